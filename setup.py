"""The package layout pyproject.toml cannot state: the Hydra tree lives at the top-level ``conf/``
(the design's layout) and ships inside the aorta-core wheel as ``aorta_core.conf``, mapped by
``package_dir``; every package under both folders is found, never listed by hand."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["aorta_core", "aorta_core.*"]),
              *(f"aorta_core.{p}" for p in find_packages(include=["conf", "conf.*"]))],
    package_dir={"aorta_core.conf": "conf"},
)
