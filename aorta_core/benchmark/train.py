"""The training loop: one iteration = data, forward, backward, grad clip, optimizer step."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from omegaconf import DictConfig, OmegaConf

from aorta_core import payload
from aorta_core.benchmark import distributed, gpu_diag, peak
from aorta_core.benchmark.collectives import patched_collectives
from aorta_core.benchmark.config import BenchmarkConfig, default_stamp, resolve_output_dir
from aorta_core.benchmark.data import make_batch, steps_per_epoch
from aorta_core.benchmark.inject import Injector
from aorta_core.benchmark.markers import ITERATION_MARKER
from aorta_core.benchmark.model import RankingTransformer, train_flops_per_step, weighted_bce
from aorta_core.benchmark.profiling import torch_profiler_request, warn_if_unserved
from aorta_core.benchmark.stream_timing import make_timeline
from aorta_core.benchmark.telemetry import (
    JsonlWriter,
    StepInfo,
    Summary,
    build_record,
    metrics_file,
    write_metrics_atomic,
)

log = logging.getLogger("aorta.benchmark")

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
#: The data step's range in the profiler's traces (``aorta diagnose`` counts it as data loading).
DATA_SPAN = "aorta.data"


def lr_lambda(warmup: int, total: int):
    """Linear warm-up to the base lr, then linear decay to 0 at ``total`` (upstream's shape)."""

    def factor(step: int) -> float:
        if total <= 0:
            return 1.0
        if step < warmup:
            return (step + 1) / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def _shared_output_dir(cfg: BenchmarkConfig, env: Mapping[str, str],
                       device: torch.device) -> Path:
    """Rank 0 picks the timestamp; every rank gets the same folder.

    Broadcast as a tensor: ``broadcast_object_list`` needs NumPy, which torch does not install.
    """
    now = torch.tensor([int(time.time())], dtype=torch.int64, device=device)
    if dist.get_world_size() > 1:
        dist.broadcast(now, src=0)
    return resolve_output_dir(cfg.output_dir, default_stamp(int(now.item())), env)


def _scalar(value: torch.Tensor) -> float:
    full = getattr(value, "full_tensor", None)
    return float((full() if full else value).item())


def run(dcfg: DictConfig, env: Mapping[str, str]) -> dict[str, Any]:
    """Run the benchmark in this process (one rank); return rank 0's summary metrics."""
    cfg: BenchmarkConfig = OmegaConf.to_object(dcfg)
    ctx = distributed.init_distributed(cfg.device, env)
    try:
        result = _train(cfg, dcfg, ctx, env)
    except BaseException:
        distributed.shutdown(failed=True)
        raise
    distributed.shutdown()
    return result


def _train(cfg: BenchmarkConfig, dcfg: DictConfig, ctx: distributed.DistContext,
           env: Mapping[str, str]) -> dict[str, Any]:
    out_dir = _shared_output_dir(cfg, env, ctx.device)
    out_dir.mkdir(parents=True, exist_ok=True)
    if ctx.rank == 0:
        (out_dir / "config.yaml").write_text(OmegaConf.to_yaml(dcfg))
    loop = _Loop.build(cfg, ctx)
    t = cfg.training
    per_epoch = steps_per_epoch(cfg.data, ctx.world_size)
    max_steps = t.max_steps if t.max_steps is not None else t.epochs * per_epoch
    writer = JsonlWriter(metrics_file(out_dir, ctx.rank))
    summary = Summary(skip=min(cfg.telemetry.summary_skip_steps, max(0, max_steps - 1)))
    request = torch_profiler_request(OmegaConf.to_container(dcfg.profiling), out_dir,
                                     ctx.rank, ctx.device)
    try:
        with ExitStack() as stack:
            if cfg.telemetry.enabled:
                stack.enter_context(patched_collectives(loop.timeline, loop.comm_calls))
            stack.enter_context(loop.injector.delayed_collectives())  # wraps the patched ones
            session = stack.enter_context(
                payload.session(ctx.rank, output_dir=out_dir, torch_profiler=request))
            warn_if_unserved(request, session.names)
            for epoch, step, global_step in _positions(t.epochs, per_epoch, max_steps):
                record, wall0, wall1 = loop.iteration(epoch, step, global_step)
                writer.write(record)
                summary.add(record, wall0, wall1)
                session.step()
                if ctx.rank == 0 and (global_step % t.log_interval == 0
                                      or global_step == max_steps - 1):
                    _log_step(record)
    finally:
        writer.close()
    metrics = summary.metrics()
    if cfg.telemetry.matmul_reference:
        metrics.update(peak.reference_metrics(ctx.device, loop.amp_dtype, metrics))
    if ctx.rank == 0 and env.get("AORTA_METRICS_PATH"):
        write_metrics_atomic(Path(env["AORTA_METRICS_PATH"]), metrics)
    if ctx.rank == 0:
        log.info("benchmark done: %s -> %s", metrics, out_dir)
    return metrics


def _positions(epochs: int, per_epoch: int, max_steps: int) -> Iterator[tuple[int, int, int]]:
    """(epoch, step in epoch, global step) of every iteration, up to ``max_steps``."""
    global_step = 0
    for epoch in range(epochs):
        for step in range(per_epoch):
            if global_step >= max_steps:
                return
            yield epoch, step, global_step
            global_step += 1


@dataclass
class _Loop:
    """The model, its optimizer and the telemetry of one rank; one call per iteration."""

    cfg: BenchmarkConfig
    ctx: distributed.DistContext
    model: torch.nn.Module
    forward: Any  # the model, or its torch.compile
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler
    amp_dtype: torch.dtype | None
    timeline: Any
    sampler: Any
    flops: int
    injector: Injector
    comm_calls: dict[str, int] = field(default_factory=dict)

    @classmethod
    def build(cls, cfg: BenchmarkConfig, ctx: distributed.DistContext) -> _Loop:
        torch.manual_seed(cfg.seed)
        model = RankingTransformer(cfg.model).to(ctx.device)
        model = distributed.wrap_model(model, cfg.parallel, ctx)
        forward = model
        if cfg.compile.enabled:
            forward = torch.compile(model, backend=cfg.compile.backend, mode=cfg.compile.mode,
                                    fullgraph=cfg.compile.fullgraph)
        t = cfg.training
        opt = torch.optim.AdamW(model.parameters(), lr=t.lr, betas=tuple(t.betas), eps=t.eps,
                                weight_decay=t.weight_decay)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(t.warmup_steps, t.total_steps))
        scaler = torch.amp.GradScaler(ctx.device.type, enabled=t.mixed_precision == "fp16")
        sampler = (gpu_diag.make_sampler(ctx.device)
                   if cfg.telemetry.enabled and cfg.telemetry.gpu_diagnostics else None)
        model.train()
        return cls(cfg, ctx, model, forward, opt, sched, scaler,
                   AMP_DTYPES.get(t.mixed_precision),
                   make_timeline(ctx.device, cfg.telemetry.enabled), sampler,
                   train_flops_per_step(cfg.model, cfg.data),
                   Injector(cfg.inject, ctx.rank, ctx.device))

    def iteration(self, epoch: int, step: int, global_step: int) -> tuple[Any, int, int]:
        """Train one step; its record and its wall-clock start and end (ns)."""
        self.comm_calls.clear()
        self.injector.begin_step()
        unix0, wall0 = time.time_ns(), time.perf_counter_ns()
        # inside the two stamps: the marker a profiler's trace shares with the telemetry
        with torch.profiler.record_function(f"{ITERATION_MARKER}{global_step}"):
            lr = self.opt.param_groups[0]["lr"]
            self.timeline.begin()
            loss, grad_norm = self._timed_step(f"epoch{epoch}_step{step}", global_step)
            timing = self.timeline.end()
            loss_value = float(loss.item())
            norm_value = _scalar(grad_norm) if grad_norm is not None else None
        wall1, unix1 = time.perf_counter_ns(), time.time_ns()
        gpu = None
        if self.sampler and global_step % self.cfg.telemetry.gpu_diag_interval == 0:
            gpu = self.sampler()
        ctx = self.ctx
        info = StepInfo(
            rank=ctx.rank, world_size=ctx.world_size, epoch=epoch, step=step,
            global_step=global_step, loss=loss_value,
            grad_norm=norm_value if norm_value is None or math.isfinite(norm_value) else None,
            lr=lr, device=ctx.device.type, time_start_unix_ns=unix0, time_end_unix_ns=unix1,
            step_time_ms=(wall1 - wall0) / 1e6,
            samples=self.cfg.data.batch_size * ctx.world_size, flops=self.flops,
            injected_ms=self.injector.record(),
        )
        return build_record(info, timing, self.comm_calls, gpu), wall0, wall1

    def _timed_step(self, tag: str, global_step: int) -> tuple[torch.Tensor, Any]:
        """Data, forward, backward, grad clip, optimizer: each phase a range of the timeline."""
        cfg, ctx, timeline = self.cfg, self.ctx, self.timeline
        self.injector.host()
        with (timeline.range("aux", "data", f"{tag}_data"),
              torch.profiler.record_function(DATA_SPAN)):
            batch = make_batch(cfg.data, cfg.model, cfg.seed, ctx.rank, global_step, ctx.device)
            self.injector.data()
        timeline.handoff("aux", "compute", (batch.dense, batch.categorical, batch.target,
                                            batch.importance))
        with timeline.range("compute", "forward", f"{tag}_forward"):
            with (torch.autocast(ctx.device.type, dtype=self.amp_dtype) if self.amp_dtype
                  else nullcontext()):
                logits = self.forward(batch.dense, batch.categorical)
            loss = weighted_bce(logits, batch.target, batch.importance)
            self.injector.compute()
        with timeline.range("compute", "backward", f"{tag}_backward"):
            self.scaler.scale(loss).backward()
        timeline.handoff("compute", "aux")
        grad_norm = None
        if cfg.training.grad_clip_norm > 0:
            with timeline.range("aux", "grad_clip", f"{tag}_grad_clip"):
                self.scaler.unscale_(self.opt)
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                                           cfg.training.grad_clip_norm)
        with timeline.range("aux", "optimizer", f"{tag}_optimizer"):
            self.scaler.step(self.opt)
            self.scaler.update()
            self.opt.zero_grad(set_to_none=True)
            self.sched.step()
        return loss, grad_norm


def _log_step(record: Any) -> None:
    overlap = record.compute_comm_ms if isinstance(record.compute_comm_ms, float) else None
    extra = f" overlap={overlap:.3f}ms compute={record.compute_ms:.3f}ms" if overlap is not None \
        else ""
    log.info("epoch=%d step=%d loss=%.5f lr=%.3g step_time=%.2fms%s", record.epoch, record.step,
             record.loss, record.lr, record.step_time_ms, extra)

