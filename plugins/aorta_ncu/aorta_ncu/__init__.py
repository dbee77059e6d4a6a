"""aorta-ncu: the Nsight Compute collector, written only against aorta's documented plugin API."""

__version__ = "0.1.0"
