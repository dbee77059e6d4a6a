"""Process group, device and model wrapping (FSDP2 ``fully_shard`` or DDP)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

from aorta_core.api.ranks import rank_from_env
from aorta_core.benchmark.collectives import ddp_allreduce_hook
from aorta_core.benchmark.config import ParallelConfig


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device


class DeviceError(RuntimeError):
    """The device asked for cannot host this rank; the message is the one line with the fix."""


def pick_device(requested: str, local_rank: int, local_ranks: int = 1) -> torch.device:
    """``cpu`` is the CPU even where CUDA is available. ``auto`` is GPU ``LOCAL_RANK`` when each
    rank on this host gets a GPU of its own (NCCL refuses two ranks on one GPU), else the CPU with
    gloo, said once; ``cuda`` insists and is refused with the fix when it cannot be had. A GPU
    run selects its device here, before any group or mesh exists."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if requested == "cpu" or (requested == "auto" and not gpus):
        return torch.device("cpu")
    if local_ranks > gpus:
        if requested == "auto":
            if local_rank == 0:
                logging.getLogger(__name__).warning(
                    "device=auto: %d ranks on this host but torch sees %d GPU(s), one per rank "
                    "is needed; running on the CPU with gloo (device=cuda refuses instead)",
                    local_ranks, gpus)
            return torch.device("cpu")
        raise DeviceError(
            f"device=cuda: {local_ranks} ranks on this host need {local_ranks} GPUs (one each) "
            f"but torch sees {gpus}; use --nproc_per_node {gpus} or device=cpu" if gpus else
            "device=cuda but torch sees no GPU; use device=cpu or device=auto")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def init_distributed(requested_device: str, env: Mapping[str, str]) -> DistContext:
    """Join torchrun's group (env:// rendezvous) or make a one-process group in memory.

    A group always exists, so FSDP2/DDP run the same code path with one process as with many.
    """
    # torchrun's only: a task that srun started alone sees its own GPU (Slurm's binding) as
    # device 0, whatever SLURM_LOCALID is
    local_rank = rank_from_env({"LOCAL_RANK": env.get("LOCAL_RANK", "")}, "LOCAL_RANK")
    device = pick_device(requested_device, local_rank, int(env.get("LOCAL_WORLD_SIZE", "1")))
    backend = "nccl" if device.type == "cuda" else "gloo"
    kwargs = {"device_id": device} if device.type == "cuda" else {}
    if "WORLD_SIZE" in env and "MASTER_ADDR" in env:
        dist.init_process_group(backend=backend, timeout=timedelta(minutes=10), **kwargs)
    else:
        dist.init_process_group(backend=backend, store=dist.HashStore(), rank=0, world_size=1,
                                **kwargs)
    return DistContext(dist.get_rank(), dist.get_world_size(), local_rank, device)


def wrap_model(model: nn.Module, cfg: ParallelConfig, ctx: DistContext) -> nn.Module:
    """FSDP2: shard every encoder layer, then the root. DDP: timed all-reduce comm hook.

    FSDP2 gets its mesh from the run's device: its default mesh is on the machine's accelerator
    whatever the run asked for, so ``device=cpu`` on a GPU host would move the parameters to
    ``cuda:0`` (and, under torchrun, set device ``LOCAL_RANK`` on a host with fewer GPUs).
    """
    if cfg.mode == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
        for layer in model.layers:
            fully_shard(layer, mesh=mesh, reshard_after_forward=cfg.reshard_after_forward)
        fully_shard(model, mesh=mesh, reshard_after_forward=cfg.reshard_after_forward)
        return model
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(
        model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,
        bucket_cap_mb=cfg.bucket_cap_mb,
    )
    ddp.register_comm_hook(None, ddp_allreduce_hook)
    return ddp


def shutdown(failed: bool = False) -> None:
    """Leave the process group; after a failure skip the barrier, which the other ranks (still
    inside a collective) would never reach: the error surfaces and torchrun ends the job."""
    if dist.is_initialized():
        if not failed:
            dist.barrier()
        dist.destroy_process_group()

