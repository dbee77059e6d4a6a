"""The application: Hydra's jobs, the command line, the sweep's driver and the upstream-compatible
``aorta sweep run``. The top layer: it may import every other one, none imports it."""
