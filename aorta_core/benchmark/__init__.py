"""aorta's built-in benchmark: an FSDP2 ranking-transformer training run with stream telemetry.

Launch with ``torchrun --standalone --nproc_per_node N -m aorta_core.benchmark [overrides]``
(or ``python -m aorta_core.benchmark`` for one process). See docs/benchmark.md.
"""
