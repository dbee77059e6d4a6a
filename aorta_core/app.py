"""The Hydra application: one Hydra job is one cell of the sweep."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from aorta_core.argv import escape_for_omegaconf
from aorta_core.cells import ConfigError, build_cell, cell_name
from aorta_core.plugins import load_registry
from aorta_core.progress import CellProgress, error_line
from aorta_core.records import CELL_FILE, RECORD_NAME, read_record, write_json_atomic
from aorta_core.slots import device_slot
from aorta_core.trial import run_trial

OmegaConf.register_new_resolver("aorta_cell", cell_name, replace=True)
OmegaConf.register_new_resolver("aorta_python", lambda: sys.executable, replace=True)


def example_path(relative: str) -> str:
    """``examples/<relative>`` in the working folder, else in the aorta checkout it came from."""
    for base in (Path.cwd(), Path(__file__).resolve().parent.parent):
        candidate = base / "examples" / relative
        if candidate.exists():
            return str(candidate)
    return str(Path("examples") / relative)


OmegaConf.register_new_resolver("aorta_example", example_path, replace=True)


def register_command(command: list[str] | None) -> None:
    """Carry the argv given after ``--`` into the config as the ``command`` key."""
    if command is not None:
        ConfigStore.instance().store(
            group="aorta_cli",
            name="argv",
            node={"command": [escape_for_omegaconf(a) for a in command]},
            package="_global_",
        )


def _completed(path: Path, fingerprint: str) -> bool:
    record = read_record(path)
    if record is None:
        return False
    if record.get("fingerprint") != fingerprint:
        raise ConfigError(
            f"{path.parent.parent} holds trials of another command or collector set; "
            "use a new output=<dir> or delete that cell folder"
        )
    return True


def run_cell(cfg: DictConfig) -> dict[str, Any]:
    """Run the missing trials of this job's cell (resume: recorded trials are kept)."""
    hydra_cfg = HydraConfig.get()
    registry = load_registry()
    try:
        cell = build_cell(cfg, hydra_cfg, registry)
        todo = [i for i in range(int(cfg.trials)) if not _completed(
            cell.trial_dir(i) / RECORD_NAME, cell.fingerprint)]
    except ConfigError as exc:
        name = cell_name(hydra_cfg.job.override_dirname)
        error_line(f"cell {name}: {exc}")
        cell_dir = Path(hydra_cfg.runtime.output_dir)
        cell_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(cell_dir / CELL_FILE, {"cell": name, "error": str(exc)})
        return {"cell": name, "error": str(exc)}
    cell.directory.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        cell.directory / CELL_FILE,
        {"cell": cell.name, "axes": dict(cell.axes), "command": list(cell.command),
         "collectors": list(cell.collectors), "trials": int(cfg.trials), "error": None,
         "auto": cell.auto.to_json() if cell.auto else None},
    )
    verdicts: dict[str, int] = {}
    devices = OmegaConf.to_container(cfg.devices) if cfg.get("devices") is not None else None
    slot = device_slot(Path(str(cfg.output)), devices, int(cfg.devices_per_cell),
                       list(cfg.device_env)) if todo else contextlib.nullcontext({})
    with slot as device_env:
        cell = dataclasses.replace(cell, env={**cell.env, **device_env})
        with CellProgress(cell, int(cfg.trials), skipped=int(cfg.trials) - len(todo)) as progress:
            for index in todo:
                progress.start(index)
                record = run_trial(cell, index, registry)
                progress.done(index, record)
                verdicts[record["verdict"]] = verdicts.get(record["verdict"], 0) + 1
    return {"cell": cell.name, "verdicts": verdicts}


@hydra.main(version_base="1.3", config_path="pkg://aorta_core.conf", config_name="config")
def hydra_main(cfg: DictConfig) -> dict[str, Any]:
    return run_cell(cfg)
