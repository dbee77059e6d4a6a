"""One torch.profiler session driven by the collector's options, inside the profiled process.

Used by the runner (wrap mode) and importable by any workload in env mode: it reads the
``AORTA_TORCHPROF_DIR`` / ``AORTA_TORCHPROF_OPTIONS`` contract, names every output with the
rank (``rank<R>``) and advances the schedule on optimizer steps, explicit ``step()`` calls, or
not at all (``step_on=run``). torch is imported lazily so the plugin stays cheap to load.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from aorta_torchprof.options import TorchprofOptions

DIR_ENV = "AORTA_TORCHPROF_DIR"
OPTIONS_ENV = "AORTA_TORCHPROF_OPTIONS"

_active: Session | None = None


def options_to_env(options: TorchprofOptions, artifact_dir: Path) -> dict[str, str]:
    """The environment additions that hand ``options`` and the output folder to the child."""
    return {DIR_ENV: str(artifact_dir), OPTIONS_ENV: json.dumps(asdict(options))}


def options_from_env(environ: dict[str, str] | None = None) -> TorchprofOptions:
    """Rebuild the options from ``AORTA_TORCHPROF_OPTIONS``; unknown keys are ignored."""
    raw = json.loads((environ or os.environ).get(OPTIONS_ENV) or "{}")
    known = {f.name for f in fields(TorchprofOptions)}
    return TorchprofOptions(**{k: v for k, v in raw.items() if k in known})


def rank_from_env(environ: dict[str, str] | None = None) -> int:
    """The global rank torchrun exported (``RANK``), 0 for a single process."""
    try:
        return int((environ or os.environ).get("RANK", "0"))
    except ValueError:
        return 0


def step() -> None:
    """Advance the active session's schedule (``step_on=manual``); a no-op when none runs."""
    if _active is not None:
        _active.step()


class Session:
    """Start, step and stop a ``torch.profiler.profile`` writing into ``out_dir``."""

    def __init__(self, options: TorchprofOptions, out_dir: Path, rank: int) -> None:
        self.options = options
        self.out_dir = Path(out_dir)
        self.rank = rank
        self.steps = 0
        self.saved: list[Path] = []
        self._prof: Any = None
        self._hook: Any = None
        self.activities: list[str] = []

    def start(self) -> None:
        global _active
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        opts = self.options
        names = opts.activities or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
        self.activities = list(names)
        table = {"cpu": ProfilerActivity.CPU, "cuda": ProfilerActivity.CUDA}
        sched = None
        if opts.step_on != "run":
            sched = schedule(
                skip_first=opts.skip_first,
                wait=opts.wait,
                warmup=opts.warmup,
                active=opts.active,
                repeat=opts.repeat,
            )
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._prof = profile(
            activities=[table[n] for n in names],
            schedule=sched,
            on_trace_ready=self._trace_ready,
            record_shapes=opts.record_shapes,
            profile_memory=opts.profile_memory,
            with_stack=opts.with_stack,
            with_flops=opts.with_flops,
        )
        self._prof.start()
        if opts.step_on == "optimizer":
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self._hook = register_optimizer_step_post_hook(lambda *_: self.step())
        _active = self

    def step(self) -> None:
        self.steps += 1
        self._prof.step()

    def stop(self) -> None:
        """Stop the profiler (flushing a window still recording) and write the text outputs."""
        global _active
        _active = None
        if self._hook is not None:
            self._hook.remove()
        self._prof.stop()
        if self.options.key_averages:
            self._write_key_averages()
        if not self.saved and (self.options.chrome_trace or self.options.tensorboard):
            print(
                f"aorta-torchprof: rank {self.rank} wrote no trace: the schedule never reached an "
                f"active step ({self.steps} steps seen with step_on={self.options.step_on}); "
                "set collector.torchprof.step_on=run or lower wait/warmup/skip_first",
                file=sys.stderr,
            )

    def _trace_ready(self, prof: Any) -> None:
        opts = self.options
        if opts.tensorboard:
            from torch.profiler import tensorboard_trace_handler

            folder = self.out_dir / "tensorboard"
            before = set(folder.glob("*")) if folder.exists() else set()
            tensorboard_trace_handler(str(folder), f"rank{self.rank}", use_gzip=opts.gzip)(prof)
            self.saved.extend(sorted(set(folder.glob("*")) - before))
        elif opts.chrome_trace:
            step = "" if opts.step_on == "run" else f".step{prof.step_num}"
            suffix = ".pt.trace.json.gz" if opts.gzip else ".pt.trace.json"
            path = self.out_dir / f"rank{self.rank}{step}{suffix}"
            prof.export_chrome_trace(str(path))
            self.saved.append(path)

    def _write_key_averages(self) -> None:
        cuda = "cuda" in self.activities
        sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
        try:
            table = self._prof.key_averages().table(sort_by=sort_by, row_limit=50)
        except Exception as exc:  # the profiler may hold no events (nothing recorded)
            print(f"aorta-torchprof: key_averages unavailable: {exc}", file=sys.stderr)
            return
        (self.out_dir / f"rank{self.rank}.key_averages.txt").write_text(table + "\n")
