"""The ``collector/rocprof`` option."""
