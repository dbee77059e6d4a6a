"""Hydra config package of the rocprof collector."""
