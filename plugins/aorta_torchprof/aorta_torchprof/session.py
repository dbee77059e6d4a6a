"""One torch.profiler session driven by the collector's options, inside the profiled process.

Used by the runner (wrap mode) and, through :func:`payload_session` (the collector's
``payload_session`` hook), by any workload that opens ``aorta_core.payload.session``:
it reads the ``AORTA_TORCHPROF_DIR`` / ``AORTA_TORCHPROF_OPTIONS`` contract (env mode) or the
workload's own ``torch_profiler`` request, names every output with the rank (``rank<R>``) and
advances the schedule on optimizer steps, the workload's steps (``step_on=manual``), not at
all (``step_on=run``), or on optimizer steps when there are any, else not at all
(``step_on=auto``). torch is imported lazily so the plugin stays cheap to load.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from aorta_torchprof.options import TorchprofOptions

#: ``rank<R>.no-trace.txt``: why a rank's session wrote no trace, for the parser to report.
NO_TRACE_SUFFIX = ".no-trace.txt"
#: ``rank<R>.step-on.txt``: what ``step_on=auto`` followed on that rank (``optimizer`` or
#: ``run``), for the parser to publish: the record says which it was.
STEP_ON_SUFFIX = ".step-on.txt"

DIR_ENV = "AORTA_TORCHPROF_DIR"
OPTIONS_ENV = "AORTA_TORCHPROF_OPTIONS"

_active: Session | None = None


def options_to_env(options: TorchprofOptions, artifact_dir: Path) -> dict[str, str]:
    """The environment additions that hand ``options`` and the output folder to the child."""
    return {DIR_ENV: str(artifact_dir), OPTIONS_ENV: json.dumps(asdict(options))}


def options_from_env(environ: Mapping[str, str] | None = None) -> TorchprofOptions:
    """Rebuild the options from ``AORTA_TORCHPROF_OPTIONS``; unknown keys are ignored."""
    return _known_options(json.loads((environ or os.environ).get(OPTIONS_ENV) or "{}"))


def _known_options(raw: Mapping[str, Any]) -> TorchprofOptions:
    known = {f.name for f in fields(TorchprofOptions)}
    return TorchprofOptions(**{k: v for k, v in raw.items() if k in known})


def step() -> None:
    """One iteration ended: advances the active session's schedule with ``step_on=manual``.

    A no-op when no session runs, or when the schedule follows the optimizer or the whole run.
    """
    if _active is not None:
        _active.step()


def payload_session(rank: int, env: Mapping[str, str], context: Mapping[str, Any]
                    ) -> Session | _RunnerSession | None:
    """The session this process runs for ``aorta_core.payload.session``, or ``None``.

    The sweep's env mode (``AORTA_TORCHPROF_DIR``) wins over the workload's own request
    ``context["torch_profiler"]`` (option names, plus ``dir``: the trace folder). Under the
    runner (wrap mode) its session already runs; the workload's steps reach it.
    """
    torch_profiler = context.get("torch_profiler")
    if _active is not None:
        return _RunnerSession()
    if env.get(DIR_ENV):
        return Session(options_from_env(env), Path(env[DIR_ENV]), rank)
    if torch_profiler:
        return Session(_known_options(torch_profiler), Path(torch_profiler["dir"]), rank)
    return None


class _RunnerSession:
    """The runner's session seen from the payload: the runner starts and stops it."""

    def start(self) -> None:
        pass

    def step(self) -> None:
        step()

    def stop(self) -> None:
        pass


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
        #: What advances the schedule: ``step_on``, or what ``auto`` turned out to be
        #: (``run`` until an optimizer steps, where it records the whole run).
        self.followed = options.step_on
        #: Recording without a schedule (``run``, and ``auto`` until an optimizer steps).
        self._whole_run = False
        self.activities: list[str] = []

    def start(self) -> None:
        """Start profiling. ``step_on=auto`` records the whole run until an optimizer steps
        (then it follows the optimizer, as ``optimizer`` does), except in a process of a
        distributed launch (``WORLD_SIZE`` set), where it follows the optimizer from the start:
        with torch 2.13, a gloo process group created while the profiler records deadlocked at
        its teardown in 3 of 8 runs."""
        global _active
        import torch

        opts = self.options
        names = opts.activities or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
        self.activities = list(names)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        auto = opts.step_on == "auto"
        from_start = auto and self._records_first_step()  # the schedule records step 0 anyway
        if auto:
            whole = from_start or "WORLD_SIZE" not in os.environ
            self.followed = "run" if whole else "optimizer"
        self._whole_run = opts.step_on == "run" or (self.followed == "run" and not from_start)
        self._prof = self._profile()
        self._prof.start()
        if opts.step_on in ("optimizer", "auto"):
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self._hook = register_optimizer_step_post_hook(lambda *_: self._optimizer_stepped())
        _active = self

    def _schedule(self) -> Any:
        from torch.profiler import schedule

        opts = self.options
        return schedule(skip_first=opts.skip_first, wait=opts.wait, warmup=opts.warmup,
                        active=opts.active, repeat=opts.repeat)

    def _records_first_step(self) -> bool:
        from torch.profiler import ProfilerAction

        recording = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        return self._schedule()(0) in recording

    def _profile(self) -> Any:
        """A profiler with the options; with no schedule while it records the whole run."""
        from torch.profiler import ProfilerActivity, profile

        opts = self.options
        table = {"cpu": ProfilerActivity.CPU, "cuda": ProfilerActivity.CUDA}
        return profile(
            activities=[table[n] for n in self.activities],
            schedule=None if self._whole_run else self._schedule(),
            on_trace_ready=self._trace_ready,
            record_shapes=opts.record_shapes,
            profile_memory=opts.profile_memory,
            with_stack=opts.with_stack,
            with_flops=opts.with_flops,
        )

    def _optimizer_stepped(self) -> None:
        """An optimizer stepped. The first step of an ``auto`` session that records the whole
        run without a schedule drops that recording and starts the optimizer's schedule at its
        step 1, where ``step_on=optimizer`` would be by now."""
        if self._whole_run:
            self._prof.on_trace_ready = None  # what ran before the first step is not kept
            self._prof.stop()
            self._whole_run = False
            self._prof = self._profile()
            self._prof.start()
        self.followed = "optimizer"
        self._advance()

    def step(self) -> None:
        """One iteration of the workload ended; the schedule advances with ``step_on=manual``."""
        if self.options.step_on == "manual":
            self._advance()

    def _advance(self) -> None:
        self.steps += 1
        self._prof.step()

    def stop(self, workload_status: int = 0) -> None:
        """Stop the profiler (flushing a window still recording) and write the text outputs.

        ``workload_status``: how the workload ended, where the caller knows it (the runner).
        Non-zero, the workload failed: the session then prints nothing, so that the workload's
        own error stays the last line of stderr, the line the trial's failure reason is read
        from, and its no-trace note names the failure instead of the schedule.
        """
        global _active
        _active = None
        if self._hook is not None:
            self._hook.remove()
        self._prof.stop()
        failed = workload_status != 0
        if self.options.key_averages:
            self._write_key_averages(quiet=failed)
        if not self.saved and (self.options.chrome_trace or self.options.tensorboard):
            if failed:
                why = (f"rank {self.rank} wrote no trace: the workload failed (exit status "
                       f"{workload_status}) after {self.steps} steps with "
                       f"step_on={self._step_on_said()}, before the schedule reached an "
                       "active step; its error is in the trial's stderr.log")
            else:
                why = (f"rank {self.rank} wrote no trace: the schedule never reached an active "
                       f"step ({self.steps} steps seen with step_on={self._step_on_said()}); "
                       "set collector.torchprof.step_on=run or lower wait/warmup/skip_first")
                print(f"aorta-torchprof: {why}", file=sys.stderr)
            # The parser says it in the record's warnings, where the user looks first.
            (self.out_dir / f"rank{self.rank}{NO_TRACE_SUFFIX}").write_text(why + "\n")
        if self.options.step_on == "auto":
            (self.out_dir / f"rank{self.rank}{STEP_ON_SUFFIX}").write_text(self.followed + "\n")

    def _step_on_said(self) -> str:
        auto = self.options.step_on == "auto"
        return f"auto, following the {self.followed}" if auto else self.options.step_on

    def _trace_ready(self, prof: Any) -> None:
        opts = self.options
        if opts.tensorboard:
            from torch.profiler import tensorboard_trace_handler

            folder = self.out_dir / "tensorboard"
            before = set(folder.glob("*")) if folder.exists() else set()
            tensorboard_trace_handler(str(folder), f"rank{self.rank}", use_gzip=opts.gzip)(prof)
            self.saved.extend(sorted(set(folder.glob("*")) - before))
        elif opts.chrome_trace:
            step = "" if self.followed == "run" else f".step{prof.step_num}"
            suffix = ".pt.trace.json.gz" if opts.gzip else ".pt.trace.json"
            path = self.out_dir / f"rank{self.rank}{step}{suffix}"
            prof.export_chrome_trace(str(path))
            self.saved.append(path)

    def _write_key_averages(self, quiet: bool = False) -> None:
        cuda = "cuda" in self.activities
        sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
        try:
            table = self._prof.key_averages().table(sort_by=sort_by, row_limit=50)
        except Exception as exc:  # the profiler may hold no events (nothing recorded)
            if not quiet:
                print(f"aorta-torchprof: key_averages unavailable: {exc}", file=sys.stderr)
            return
        (self.out_dir / f"rank{self.rank}.key_averages.txt").write_text(table + "\n")
