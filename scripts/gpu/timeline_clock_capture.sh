#!/usr/bin/env bash
# Issue 25's clock evidence on the lent GPU machine: Kineto's clock against the wall clock
# (kineto_clock_probe.py, CPU-only and with CUDA), then the README benchmark under torchprof and
# under Proton (env mode), each with timeline=true; the trials and their timelines land in $OUT.
#   OUT=<dir> bash scripts/gpu/timeline_clock_capture.sh
set -u
source "$(dirname "$0")/setup.sh"
for mode in cpu cuda; do
  python3 scripts/gpu/kineto_clock_probe.py "$OUT/probe_$mode" $([ $mode = cuda ] && echo --cuda) \
    > "$OUT/probe_$mode.log" 2>&1
  python3 scripts/gpu/kineto_clock_check.py "$OUT/probe_$mode" | tee -a "$OUT/probe_$mode.log"
done
timeout 240 python3 -m aorta_core trials=1 collector=torchprof timeline=true output="$OUT/torchprof" \
  > "$OUT/torchprof.log" 2>&1; echo "torchprof sweep rc=$?"
timeout 240 python3 -m aorta_core trials=1 collector=proton collector.proton.mode=env timeline=true \
  output="$OUT/proton" > "$OUT/proton.log" 2>&1; echo "proton sweep rc=$?"
for sweep in torchprof proton; do  # the device tool returns flat folders: one archive each
  python3 -c "import json,glob,sys; [print(sys.argv[1], t, json.dumps(json.load(open(t))['otherData']['clock_checks'])) for t in sorted(glob.glob(sys.argv[1] + '/cells/*/trial_*/timeline.json'))]" "$OUT/$sweep"
  tar czf "$OUT/$sweep.tgz" -C "$OUT" "$sweep" && rm -rf "${OUT:?}/$sweep"
done
grep -h "warning" "$OUT"/*.log | sort | uniq -c | head -20
du -sh "$OUT"
