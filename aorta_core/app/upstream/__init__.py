"""Upstream ROCm/aorta's ``aorta sweep run --recipe R.yaml -- <command>``, run on aorta's engine.

:mod:`.recipe` reads a probe recipe with upstream's strict schema, :mod:`.mitigations` holds the
names its axes may use, and :mod:`.command` turns the recipe into the overrides of an ordinary
``python -m aorta_core sweep=repeat`` sweep and runs it (docs/profiling.md, section 0).
"""
