"""The ``profiling`` block (torch.profiler inside the benchmark) and the collectors' env modes.

``AORTA_TORCHPROF_DIR`` (the torchprof collector in env mode) overrides the block: profiling is
on, the schedule and switches come from ``AORTA_TORCHPROF_OPTIONS`` and traces land in that
folder, so the collector parses them into the matrix. ``AORTA_PROTON_DIR`` makes rank 0 start
and finalize Proton through ``aorta_proton.payload``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import torch

from aorta_core.benchmark.config import ProfilingConfig

#: Keys of ``AORTA_TORCHPROF_OPTIONS`` the benchmark honours (others belong to the collector).
TORCHPROF_KEYS = ("wait", "warmup", "active", "repeat", "skip_first", "record_shapes",
                  "profile_memory", "with_stack", "with_flops", "chrome_trace", "gzip",
                  "tensorboard", "key_averages")
ROCM_EXPORT_WARNING = (
    "profiling: trace export is off on ROCm (Kineto can crash in export_chrome_trace on some "
    "ROCm builds, pytorch/pytorch#138360); set profiling.rocm_trace_export=true to force it"
)


@dataclass(frozen=True)
class ProfilerPlan:
    settings: ProfilingConfig
    rank_dir: Path
    activities: tuple[str, ...]
    source: str  # config | torchprof-env


def plan_profiler(cfg: ProfilingConfig, output_dir: Path, rank: int, device: torch.device,
                  env: Mapping[str, str]) -> ProfilerPlan | None:
    """Decide whether and how to profile: env mode first, then the config block."""
    settings, root, source = cfg, Path(cfg.trace_dir or output_dir / "torch_profiler"), "config"
    activities: tuple[str, ...] = ("cpu", "cuda") if device.type == "cuda" else ("cpu",)
    if env.get("AORTA_TORCHPROF_DIR"):
        options = _torchprof_options(env.get("AORTA_TORCHPROF_OPTIONS", ""))
        known = {f.name for f in fields(ProfilingConfig)}
        chosen = {k: v for k, v in options.items() if k in TORCHPROF_KEYS and k in known}
        settings = replace(cfg, enabled=True, **chosen)
        root, source = Path(env["AORTA_TORCHPROF_DIR"]), "torchprof-env"
        requested = options.get("activities")
        if isinstance(requested, list) and requested:
            activities = tuple(a for a in activities if a in {str(x).lower() for x in requested})
    if not settings.enabled:
        return None
    if torch.version.hip and not settings.rocm_trace_export and (
            settings.chrome_trace or settings.tensorboard):
        warnings.warn(ROCM_EXPORT_WARNING, stacklevel=2)
        settings = replace(settings, chrome_trace=False, tensorboard=False)
    return ProfilerPlan(settings, root / f"rank{rank}", activities, source)


def _torchprof_options(text: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        options = json.loads(text)
    except ValueError:
        warnings.warn("AORTA_TORCHPROF_OPTIONS is not JSON; using the profiling block's "
                      "schedule", stacklevel=3)
        return {}
    return options if isinstance(options, dict) else {}


class Profiler:
    """torch.profiler with a schedule; one trace file per recorded cycle, rank in its name."""

    def __init__(self, plan: ProfilerPlan, rank: int) -> None:
        s = plan.settings
        self.plan, self.rank, self.files = plan, rank, []
        plan.rank_dir.mkdir(parents=True, exist_ok=True)
        activity = {"cpu": torch.profiler.ProfilerActivity.CPU,
                    "cuda": torch.profiler.ProfilerActivity.CUDA}
        self._prof = torch.profiler.profile(
            activities=[activity[a] for a in plan.activities],
            schedule=torch.profiler.schedule(wait=s.wait, warmup=s.warmup, active=s.active,
                                             repeat=s.repeat, skip_first=s.skip_first),
            on_trace_ready=self._ready,
            record_shapes=s.record_shapes,
            profile_memory=s.profile_memory,
            with_stack=s.with_stack,
            with_flops=s.with_flops,
        )

    def _ready(self, prof: torch.profiler.profile) -> None:
        """Export one cycle; TensorBoard naming (``rank<R>.<ns>.pt.trace.json``) when asked.

        The TensorBoard file *is* a chrome trace, so with both switches on one file is written.
        """
        s = self.plan.settings
        suffix = ".pt.trace.json" + (".gz" if s.gzip else "")
        last = max(0, prof.step_num - 1)  # ProfilerStep#<last> is the cycle's last recorded step
        try:
            if s.tensorboard:
                handler = torch.profiler.tensorboard_trace_handler(
                    str(self.plan.rank_dir), worker_name=f"rank{self.rank}", use_gzip=s.gzip)
                handler(prof)
            elif s.chrome_trace:
                path = self.plan.rank_dir / f"rank{self.rank}_step{last}{suffix}"
                prof.export_chrome_trace(str(path))
            if s.key_averages:
                table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40)
                path = self.plan.rank_dir / f"rank{self.rank}_step{last}_key_averages.txt"
                path.write_text(table + "\n")
        except (OSError, RuntimeError) as exc:
            warnings.warn(f"profiling: trace export failed on rank {self.rank}: {exc}",
                          stacklevel=2)

    def __enter__(self) -> Profiler:
        self._prof.__enter__()
        return self

    def step(self) -> None:
        self._prof.step()

    def __exit__(self, *exc: object) -> None:
        self._prof.__exit__(*exc)


class ProtonSession:
    """Rank 0 starts Proton when the proton collector runs in env mode; others do nothing."""

    def __init__(self, env: Mapping[str, str], rank: int) -> None:
        self._payload: Any = None
        if rank != 0 or not env.get("AORTA_PROTON_DIR"):
            return
        try:
            from aorta_proton import payload
        except ImportError:
            warnings.warn("AORTA_PROTON_DIR is set but aorta_proton is not installed "
                          "(pip install aorta-proton); Proton is not started", stacklevel=2)
            return
        try:
            started = payload.start()
        except (ImportError, RuntimeError) as exc:
            warnings.warn(f"AORTA_PROTON_DIR is set but Proton could not start ({exc}); "
                          "this run has no Proton profile", stacklevel=2)
            return
        if started:
            self._payload = payload

    def finalize(self) -> None:
        if self._payload is not None:
            self._payload.finalize()
            self._payload = None
