# The fixture aorta_sweep: a real sweep in tmp_path, its records read back (docs/plugins.md).
pytest_plugins = ["aorta_core.testing"]
