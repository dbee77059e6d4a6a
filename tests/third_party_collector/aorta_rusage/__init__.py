"""A third-party aorta collector measuring the workload's CPU time and peak memory."""
