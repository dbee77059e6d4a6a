"""aorta-torchprof: the PyTorch profiler collector of aorta.

Kept import-free on purpose: the runner and the session module are imported inside the
profiled process, which may not have aorta-core, and the plugin must load cheaply.
"""
