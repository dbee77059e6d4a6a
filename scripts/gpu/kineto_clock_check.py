"""Read kineto_clock_probe.py's output: per probe range, Kineto minus wall at its start and end
(the interval that holds the offset), so a constant offset, a drift or a jump shows.
  python kineto_clock_check.py <out>
"""

import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
probe = json.loads((out / "probe.json").read_text())
doc = json.loads((out / "trace.json").read_text())
base = int(doc.get("baseTimeNanoseconds") or 0)
# the CPU-side ranges (with CUDA, a gpu_user_annotation of the same name spans its kernels)
cpu = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "user_annotation"]
ranges = {e["name"]: e for e in cpu if str(e["name"]).startswith("probe")}
steps = {e["name"]: e for e in cpu if str(e["name"]).startswith("ProfilerStep#")}
print(f"cuda={probe['cuda']} torch={probe['torch']} baseTimeNanoseconds={base}")
for s in probe["stamps"]:
    if "step" not in s:
        print("export wall ns", s["export"])
        continue
    ev = ranges.get(f"probe{s['step']}")
    if ev is None:
        print(f"probe{s['step']}: not in the trace")
        continue
    start = base + round(ev["ts"] * 1000)
    end = start + round(ev["dur"] * 1000)
    (a, d), (b, c) = s["outside"], s["inside"]
    # Kineto = wall + off: start in [a, b] -> off in [start - b, start - a]; end in [c, d]
    lo, hi = max(start - b, end - d), min(start - a, end - c)
    ps = steps.get(f"ProfilerStep#{s['step']}")
    print(f"probe{s['step']}: kineto-wall in [{lo / 1e6:.3f}, {hi / 1e6:.3f}] ms "
          f"(start-side [{(start - b) / 1e6:.3f}, {(start - a) / 1e6:.3f}], end-side "
          f"[{(end - d) / 1e6:.3f}, {(end - c) / 1e6:.3f}]); dur kineto {ev['dur'] / 1e3:.3f} "
          f"ms wall {(c - b) / 1e6:.3f}..{(d - a) / 1e6:.3f} ms"
          + (f"; ProfilerStep dur {ps['dur'] / 1e3:.3f} ms" if ps else ""))
