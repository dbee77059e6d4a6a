"""aorta-rocprof: the rocprofv3 collector (attach with ``wrap_argv``, read its CSV output)."""

__version__ = "0.1.0"
