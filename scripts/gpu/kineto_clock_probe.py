"""How Kineto's clock relates to the wall clock (time.time_ns) on this machine: each iteration is
bracketed by wall stamps taken right outside and inside a record_function range, so the range's
Kineto start must fall in [outside, inside] and its end in [inside, outside] when both clocks
agree. Run with --cuda to trace CUDA too (CUPTI), whose start-up is what differs on a GPU host.
Writes <out>/probe.json (the stamps) and <out>/trace.json (the Kineto trace).
  python kineto_clock_probe.py <out> [--cuda] [--steps N]
"""

import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
cuda = "--cuda" in sys.argv
steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 8
device = "cuda" if cuda else "cpu"
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
x = torch.randn(2048, 2048, device=device)
stamps = []


def work() -> None:
    y = x
    for _ in range(10):
        y = (y @ x) / 2048
    if cuda:
        torch.cuda.synchronize()
    time.sleep(0.02)


def ready(prof) -> None:
    t0 = time.time_ns()
    prof.export_chrome_trace(str(out / "trace.json"))
    stamps.append({"export": [t0, time.time_ns()]})


with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=steps - 2),
             on_trace_ready=ready) as prof:
    for i in range(steps):
        a = time.time_ns()
        with record_function(f"probe{i}"):
            b = time.time_ns()
            work()
            c = time.time_ns()
        d = time.time_ns()
        stamps.append({"step": i, "outside": [a, d], "inside": [b, c]})
        prof.step()
(out / "probe.json").write_text(json.dumps({"cuda": cuda, "torch": torch.__version__,
                                            "stamps": stamps}))
