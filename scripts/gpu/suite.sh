#!/usr/bin/env bash
# README command 2's test suite on the lent GPU machine (setup.sh says how it is installed).
#   OUT=<dir> [SUITE_TIMEOUT=<s>] bash scripts/gpu/suite.sh [pytest args, e.g. -n 12 -m gpu]
# Writes $OUT/junit.xml and $OUT/pytest.log, one line per test as it ends (`-v`), so that a run
# cut by the call's time limit still names its failures (pytest's summary comes only at the end);
# prints the failures and errors so far, then the tail of the log. SUITE_TIMEOUT stops pytest
# after that many seconds and still prints them (a `timeout` around this script would not).
set -u
source "$(dirname "$0")/setup.sh"
timeout "${SUITE_TIMEOUT:-0}" python3 -m pytest -p no:cacheprovider -v -rfEs --junitxml="$OUT/junit.xml" "$@" \
  > "$OUT/pytest.log" 2>&1
echo "pytest exit status $?"
grep -E "(FAILED|ERROR) " "$OUT/pytest.log" | head -60
tail -40 "$OUT/pytest.log"
