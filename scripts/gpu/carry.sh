#!/usr/bin/env bash
# aorta's dependencies for a GPU machine without a package index (Python 3.12, x86-64), as one
# archive of unpacked wheels: .carry/site312.tar.xz (about 40 MB; the device tree limit is 64 MiB).
# Only what that machine's image lacks (it has torch, triton, numpy, pandas, pyarrow, pytest,
# pytest-xdist, hypothesis, rich, pluggy, pyyaml, joblib, scipy, ...). Versions follow the resolver's
# choice here, so hydra's omegaconf<2.4 pin is respected.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$W" hydra-core==1.3.8 'omegaconf>=2.2,<2.4' polars polars-runtime-32 msgspec importlib-metadata \
  lazy_importer plotly orjson hydra-joblib-launcher hydra-submitit-launcher submitit \
  holistictraceanalysis==0.5.0 cxxfilt 'setuptools>=77'
python3 -m pip wheel -q --no-deps antlr4-python3-runtime==4.9.3 -w "$W"
mkdir -p "$W/site" .carry
for w in "$W"/*.whl; do python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" "$W/site"; done
tar cJf .carry/site312.tar.xz -C "$W/site" .
ls -la .carry/site312.tar.xz
