"""What to change when a Slurm launcher cannot submit a sweep's jobs: Slurm's refusal (its
slurm_errno.c text) names the request it cannot meet, not the ``hydra.launcher`` key of
aorta_slurm that made it, and submitit's names no way out where Slurm is missing."""

from __future__ import annotations

#: A part of Slurm's refusal, and the fix to name with it.
_FIXES = (
    ('Could not detect "srun"',  # submitit's words where no Slurm command is installed
     "this machine has no Slurm (srun, sbatch): run the sweep on a login node of the cluster, "
     "or leave hydra/launcher out to run its cells here"),
    ("Could not establish a configuration source",
     "sbatch finds no Slurm configuration here: run the sweep on a login node of the cluster, "
     "or point SLURM_CONF at its slurm.conf"),
    ("Unable to contact slurm controller",
     "no Slurm controller answers from here (`scontrol ping` says which): run the sweep on a "
     "login node of the cluster, or wait until its controller is back"),
    ("Invalid generic resource (gres) specification",
     "the job asks for GPUs the partition does not have: on a cluster without GPUs set "
     "hydra.launcher.gpus_per_node=0 (aorta_slurm asks for 1), else choose a partition with "
     "GPUs (hydra.launcher.partition=...; `sinfo -o '%P %G'` lists them)"),
    ("Invalid partition name specified",
     "set hydra.launcher.partition to a partition `sinfo -s` lists"),
    ("Requested node configuration is not available",
     "no node has what one cell asks for: lower hydra.launcher.cpus_per_task, mem_gb or "
     "gpus_per_node (`sinfo -N -o '%N %c %m %G'` shows what the nodes have)"),
    ("Requested time limit is invalid",
     "lower hydra.launcher.timeout_min under the partition's limit (`sinfo -o '%P %l'`)"),
    ("Invalid account or account/partition combination specified",
     "set hydra.launcher.account to one of yours (`sacctmgr show assoc user=$USER`)"),
    ("Invalid qos specification",
     "set hydra.launcher.qos to one your account may use (`sacctmgr show assoc user=$USER`)"),
)


def sbatch_fix(message: str) -> str | None:
    """The fix for the sbatch refusal in ``message``, or ``None`` when it holds none we know."""
    lowered = message.lower()
    return next((fix for refusal, fix in _FIXES if refusal.lower() in lowered), None)
