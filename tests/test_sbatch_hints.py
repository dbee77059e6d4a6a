"""sbatch's refusals, as Slurm words them (src/common/slurm_errno.c) and submitit passes them on,
get the aorta_slurm key to change; anything else gets none. The live path: test_slurm_live.py
(a GPU request on the GPU-less test cluster)."""

from __future__ import annotations

import pytest

from aorta_core.app.sbatch_hints import sbatch_fix


@pytest.mark.parametrize(("refusal", "key"), [
    ('Could not detect "srun", are you indeed on a slurm cluster?', "leave hydra/launcher out"),
    ("Could not establish a configuration source", "SLURM_CONF"),  # sbatch without slurm.conf
    ("Unable to contact slurm controller (connect failure)", "scontrol ping"),
    ("Invalid generic resource (gres) specification", "hydra.launcher.gpus_per_node=0"),
    ("Invalid partition name specified", "hydra.launcher.partition"),
    ("Requested node configuration is not available", "hydra.launcher.cpus_per_task"),
    ("Requested time limit is invalid (missing or exceeds some limit)",
     "hydra.launcher.timeout_min"),
    ("Invalid account or account/partition combination specified", "hydra.launcher.account"),
    ("Invalid qos specification", "hydra.launcher.qos"),
])
def test_each_refusal_names_the_launcher_key(refusal: str, key: str) -> None:
    message = f"sbatch: error: Batch job submission failed: {refusal}"
    assert key in sbatch_fix(message)


def test_other_failures_get_no_slurm_advice() -> None:
    assert sbatch_fix("sbatch: command not found") is None
    assert sbatch_fix("ValueError: bad cpus_per_task") is None
