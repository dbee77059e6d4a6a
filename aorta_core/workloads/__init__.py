"""Payloads that aorta's own workload configs run (``python -m aorta_core.workloads.<name>``).

They live in the package, not in ``examples/``, so that a wheel install runs every recipe that a
checkout runs.
"""
