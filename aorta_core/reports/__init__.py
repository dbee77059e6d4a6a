"""What users read after a run: the overlap report, the sweep's report.html, run comparison.

Every page is self-contained (plotly.js inline, no network); every figure is also written as a
PNG when kaleido finds a Chrome/Chromium. plotly, kaleido and polars are imported only here, so
``aorta --help`` and plugin loading stay fast.
"""
