#!/usr/bin/env bash
# README command 2's test suite on the lent GPU machine (setup.sh says how it is installed).
#   OUT=<dir> bash scripts/gpu/suite.sh [pytest args, e.g. -n 12 -m gpu]
# Writes $OUT/junit.xml and $OUT/pytest.log.
set -u
source "$(dirname "$0")/setup.sh"
python3 -m pytest -p no:cacheprovider -q -rfEs --junitxml="$OUT/junit.xml" "$@" 2>&1 \
  | tee "$OUT/pytest.log" | tail -120
