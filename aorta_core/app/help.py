"""``--help``: recipes, workloads and collectors, then the config.

It must cost no more than reading a few folders: the collectors are named from their entry points
and option files, found without importing any plugin (one whose import takes 20 s must not slow
``--help``), and the config is the core's ``config.yaml`` as written, without importing Hydra. Only
``--help`` with overrides (``--help sweep=grid``) composes them through Hydra to show the result.
``--hydra-help`` still reaches Hydra.
"""

from __future__ import annotations

import sys
from importlib.resources import files

USAGE = """\
aorta: run a workload over a sweep of settings, profile every trial, merge one matrix.

Usage:
  python -m aorta_core [sweep=<recipe>] [collector=<name>|collector=[a,b]] [key=value ...] \
[-- command args...]
  aorta sweep run --recipe R.yaml [--collect a,b] [--trials N] [--output DIR] -- command args...
                                              an upstream ROCm/aorta probe recipe, same engine
                                              (docs/profiling.md section 0)
  aorta sweep list-mitigations                the names of a probe recipe's axes
  aorta plugins [--json]                      installed collectors
  aorta --version                             aorta-core's and each collector's version
  aorta matrix <output>                       (re)build matrix.json/.parquet, perf.md, report.html
  aorta parse <collector> <artifact_dir> [key=value ...]   metrics of one artifact folder (JSON)
  aorta report sweep <output> | aorta report overlap --log-dir D --label L ... --output O
  aorta compare <run A> <run B> [--json|--html F] [--fail-on metric:pct]
  aorta agree <output> [--tolerance-pct X]    do the profilers of a sweep=agree agree?
                                              (agreement.json, report.html, the verdicts)
  aorta timeline <trial_dir|output> [--output F] [--ranks 0,1] [--steps 3-5] [--window A:B]
                 [--align collectives|host|none]
                                              every rank's traces on one clock, for Perfetto
  aorta diagnose <trial_dir|output> [--json] [--min-excess-ms 5] [--min-excess-pct 10]
                                              each rank's step time by part, stragglers, findings,
                                              the step without the stragglers
                                              (diagnosis.json per trial; docs/diagnose.md)
  parse, timeline, diagnose: --slurm KEY=VALUE,...   each rank's traces read in a Slurm job
                                              array task (docs/scaling.md)
  aorta <command> [args...]                   a command a collector adds (aorta plugins lists them)
  aorta help [<command> [<sub>]]              this page, or a command's (aorta <command> --help)

Everything after `--` is the workload argv, passed byte-for-byte and never through a shell.
Top-level keys: output=<dir> trials=N timeout=<s> +env.<VAR>=<value> retain.on_pass=<level>
Collector options: collector.<name>.<option>=<value> (see docs/collectors/<name>.md).
Exit status: 0 all trials passed, 1 a trial failed or a cell was refused, 2 usage error,
130 interrupted, 143 terminated (docs/sweeps.md).
"""

CORE_CONF = "aorta_core.conf"


def config_options(package: str, group: str) -> list[str]:
    """The options of a config group of ``package``, by their files (no Hydra, no plugin)."""
    folder = files(package) / group
    if not folder.is_dir():
        return []
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir()
                  if p.name.endswith(".yaml"))


def _config(overrides: list[str]) -> str:
    if not overrides:
        return (files(CORE_CONF) / "config.yaml").read_text(encoding="utf-8")
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    with initialize_config_module(CORE_CONF, version_base="1.3"):
        try:
            return OmegaConf.to_yaml(compose("config", overrides=overrides))
        except HydraException as exc:
            return f"(config not shown: {str(exc).splitlines()[0]})"


def print_help(overrides: list[str], collectors: list[str]) -> None:
    """Usage, the recipes, workloads and installed ``collectors``, then the config."""
    lines = [USAGE, "== Config groups ==",
             f"sweep: {', '.join(config_options(CORE_CONF, 'sweep'))}",
             f"workload: {', '.join(config_options(CORE_CONF, 'workload'))}",
             f"collector: {', '.join(collectors) if collectors else '(none installed)'}",
             "", "== Config ==", _config(overrides)]
    sys.stdout.write("\n".join(lines) + "\n")
