"""``auto`` workload settings: filled from the profile that fits the machine, or refused.

A workload config may set any of its keys to ``auto`` and describe what that means in an
``auto`` block with a ``cpu`` and a ``gpu`` profile (``conf/workload/benchmark.yaml``).
The ``gpu`` profile applies when a GPU is visible to the cell and ``device`` is not ``cpu``; the
profile value ``gpus`` means "as many as are visible". A workload whose ``ranks`` names its
rank-count key needs one GPU per rank on the ``gpu`` profile (NCCL refuses two ranks on one GPU):
a cell that asks for more is refused before launch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from aorta_core.engine.machine import VISIBLE_DEVICES, Gpus, for_env

AUTO = "auto"
ALL_GPUS = "gpus"


class AutoError(ValueError):
    """The machine cannot host what the cell asks for; the message names the fix."""


@dataclass(frozen=True)
class AutoChoice:
    """What ``auto`` became for one cell, for the record and the end summary."""

    profile: str
    machine: str
    chosen: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "machine": self.machine, "chosen": dict(self.chosen)}


def uses_workload(cfg: DictConfig) -> bool:
    """Whether the cell's command is built from the ``workload`` group (not given after ``--``)."""
    raw = OmegaConf.to_container(cfg, resolve=False).get("command")
    return "${workload." in str(raw)


def _visible_hint(env: Mapping[str, str]) -> str:
    shown = [f"{k}={env[k]}" for k in VISIBLE_DEVICES if k in env]
    return f" ({', '.join(shown)})" if shown else ""


def resolve(cfg: DictConfig, cell_env: Mapping[str, str], gpus: Gpus | None = None
            ) -> AutoChoice | None:
    """Fill the workload's ``auto`` keys in ``cfg`` in place; ``None`` when it has none."""
    workload = cfg.get("workload")
    profiles = workload.get("auto") if workload is not None else None
    if not profiles:
        return None
    gpus = gpus or for_env(cell_env)
    device = str(workload.get("device", AUTO))
    if device not in (AUTO, "cpu") and not gpus.count:
        raise AutoError(f"workload.device={device} but no GPU is visible{_visible_hint(cell_env)}; "
                        "use workload.device=auto or workload.device=cpu")
    profile = "gpu" if gpus.count and device != "cpu" else "cpu"
    chosen: dict[str, Any] = {}
    with open_dict(workload):
        for key, value in profiles[profile].items():
            if key in workload and workload[key] == AUTO:
                chosen[key] = gpus.count if value == ALL_GPUS else value
                workload[key] = chosen[key]
    key = workload.get("ranks")
    ranks = workload.get(key) if key else None
    if profile == "gpu" and isinstance(ranks, int) and ranks > gpus.count:
        raise AutoError(
            f"workload.{key}={ranks} needs {ranks} GPUs (one per rank) but this machine shows "
            f"{gpus.describe()}{_visible_hint(cell_env)}; use workload.{key}=auto "
            f"({gpus.count}), or workload.device=cpu for gloo ranks on the CPU")
    return AutoChoice(profile, gpus.describe(), {f"workload.{k}": v for k, v in chosen.items()})
