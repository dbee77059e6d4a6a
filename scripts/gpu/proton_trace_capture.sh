#!/usr/bin/env bash
# Issue 43's Proton lane on the lent GPU machine: the README benchmark (one DDP cell, one trial)
# under Proton in env mode with data=trace and timeline=true. Keeps Proton's raw .chrome_trace
# files (what Proton really writes), the trial's record and timeline, and the sweep's log in $OUT.
#   OUT=<dir> bash scripts/gpu/proton_trace_capture.sh
set -u
source "$(dirname "$0")/setup.sh"
timeout 240 python3 -m aorta_core trials=1 collector=proton collector.proton.mode=env \
  collector.proton.data=trace timeline=true workload.parallel=ddp output="$OUT/sweep" \
  > "$OUT/proton.log" 2>&1; echo "proton sweep rc=$?"
grep -h "warning" "$OUT/proton.log" | sort | uniq -c | head -20
find "$OUT/sweep" -name '*.chrome_trace' -exec ls -la {} \; -exec sh -c \
  'python3 -c "import sys; d=open(sys.argv[1],\"rb\").read(); print(len(d), d[:200], d[-200:])" "$1"' _ {} \;
find "$OUT/sweep" -name '*.marks.jsonl' -exec cat {} \;
python3 - "$OUT/sweep" <<'PY'
import glob, json, sys
for path in glob.glob(f"{sys.argv[1]}/cells/*/trial_*/timeline.json"):
    other = json.load(open(path))["otherData"]
    print("sources:", json.dumps([s for s in other["sources"] if s["kind"] == "proton"]))
    print("clock_checks:", json.dumps(other["clock_checks"]))
for path in glob.glob(f"{sys.argv[1]}/cells/*/trial_*/record.json"):
    metrics = json.load(open(path)).get("metrics", {})
    print({k: v for k, v in metrics.items() if k.startswith("proton_") and "top" not in k})
PY
tar czf "$OUT/sweep.tgz" -C "$OUT" sweep && rm -rf "${OUT:?}/sweep"
