"""``--help``: recipes, workloads and collectors, then the composed config.

Hydra's own ``--help`` lists every group of every installed Hydra plugin and deep-copies the
config store for each (about a second here); this lists only aorta's groups, through the same
compose API, so it answers in a fraction of that. ``--hydra-help`` still reaches Hydra.
"""

from __future__ import annotations

import sys

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import OmegaConf

USAGE = """\
aorta: run a workload over a sweep of settings, profile every trial, merge one matrix.

Usage:
  python -m aorta_core [sweep=<recipe>] [collector=<name>|collector=[a,b]] [key=value ...] \
[-- command args...]
  aorta plugins [--json]                      installed collectors
  aorta matrix <output>                       (re)build matrix.json/.parquet, perf.md, report.html
  aorta parse <collector> <artifact_dir> [key=value ...]   metrics of one artifact folder (JSON)
  aorta report sweep <output> | aorta report overlap --log-dir D --label L ... --output O
  aorta compare <run A> <run B> [--json|--html F] [--fail-on metric:pct]
  aorta agree <output> [--tolerance-pct X]    do the profilers of a sweep=agree agree?
                                              (agreement.json, report.html, the verdicts)
  aorta timeline <trial_dir|output> [--output F] [--ranks 0,1] [--steps 3-5] [--window A:B]
                                              every rank's traces on one clock, for Perfetto

Everything after `--` is the workload argv, passed byte-for-byte and never through a shell.
Top-level keys: output=<dir> trials=N timeout=<s> +env.<VAR>=<value> retain.on_pass=<level>
Collector options: collector.<name>.<option>=<value> (see docs/collectors/<name>.md).
"""

GROUPS = ("sweep", "workload", "collector")


def print_help(overrides: list[str]) -> None:
    with initialize_config_module("aorta_core.conf", version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        lines = [USAGE, "== Config groups =="]
        for group in GROUPS:
            options = loader.get_group_options(group)
            lines.append(f"{group}: {', '.join(options) if options else '(none installed)'}")
        try:
            cfg = compose("config", overrides=overrides)
        except HydraException as exc:
            lines += ["", f"(config not shown: {str(exc).splitlines()[0]})"]
        else:
            lines += ["", "== Config ==", OmegaConf.to_yaml(cfg)]
    sys.stdout.write("\n".join(lines) + "\n")
