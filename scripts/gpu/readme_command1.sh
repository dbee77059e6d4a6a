#!/usr/bin/env bash
# README command 1 on a GPU machine (issue 12): the default sweep with every collector installed,
# exactly as a user runs it (`python -m aorta_core`), after installing aorta from this checkout
# into the target folder the carried dependencies live in ($SITE, on PYTHONPATH).
# Writes $OUT/readme1.log and $OUT/readme1.tar.gz (matrix.json, perf.md, report.html, records).
set -uo pipefail
OUT=${OUT:?set OUT}; SITE=${SITE:?set SITE to the folder on PYTHONPATH}
PY=${PYTHON:-python3}
cd "$(dirname "$0")/../.."
W=$(mktemp -d /tmp/readme1.XXXXXX)
mkdir -p "$OUT"
{
  "$PY" -m pip install -q --no-deps --no-build-isolation --target "$SITE" . plugins/aorta_*/ 2>&1 | grep -v WARNING
  cd "$W"  # a user's own folder, not the checkout
  /usr/bin/time -f "README command 1 wall %e s" "$PY" -m aorta_core; echo "exit status $?"
  run=$(ls -d "$W"/aorta_runs/*)
  cat "$run/perf.md"
  "$PY" -c "import json,sys; m=json.load(open(sys.argv[1])); print(json.dumps([{k: c[k] for k in ('cell','trials','auto')} for c in m['cells']], indent=1))" "$run/matrix.json"
  tar czf "$OUT/readme1.tar.gz" -C "$run" --exclude='*.pt.trace.json*' .
} > "$OUT/readme1.log" 2>&1
tail -40 "$OUT/readme1.log"
