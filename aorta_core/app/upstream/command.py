"""``aorta sweep run --recipe R.yaml [--collect a,b] [--trials N] -- <command>``.

The first command of upstream's Profiling Guide. It runs on aorta's own engine: the recipe
becomes the overrides of ``python -m aorta_core sweep=repeat ... -- <command>`` (the axes as
the sweep's ``mitigation`` x ``diagnostic`` config groups, ``trials=``, ``collector=``,
``collector.<name>.<option>=``, ``timeout=``, ``retain.*=``, ``output=``), handed to the same
entry point, so the records, ``matrix.json``, ``perf.md`` and ``report.html`` are those of any
aorta sweep and a re-run resumes. Whatever the recipe or the flags ask that aorta cannot do is
refused with one line (exit status 2) before anything runs.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from aorta_core.app.driver import EXIT_USAGE
from aorta_core.app.upstream.collect import collector_overrides
from aorta_core.app.upstream.mitigations import BUILTIN
from aorta_core.app.upstream.recipe import SEGMENT, ProbeRecipe, RecipeError, load, refusals
from aorta_core.app.usage import OneLineParser, UsageError
from aorta_core.engine.argv import split_command
from aorta_core.engine.progress import error_line

#: The config groups that carry the two axes; each option sets the name's variables in ``env``.
AXIS_GROUPS = {"mitigation_axis": "mitigation", "diagnostic_axis": "diagnostic"}
#: Upstream ``sweep run`` flags that have no counterpart in a probe run here.
_REFUSED_FLAGS = {
    "--workload": "upstream's workload flow has no counterpart: give the command after --",
    "--mitigation-axis": "put the names in the recipe's mitigation_axis",
    "--environment-axis": "environments (docker images) have no counterpart",
    "--steps": "a probe run has no steps (upstream refuses it too)",
    "--baseline-cell": "the speed-confound check has no counterpart",
    "--confound-threshold": "the speed-confound check has no counterpart",
    "--strict": "a probe run has no --strict (upstream refuses it too); the exit status is 1 "
                "when a trial fails",
    "--mitigations-file": "only upstream's built-in mitigation names are known "
                          "(aorta sweep list-mitigations)",
    "--stop-after-events": "a sweep does not stop early; every cell runs its trials",
    "--max-trials": "a sweep does not stop early; every cell runs its trials",
}


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


_RUN = ("run an upstream ROCm/aorta probe recipe on aorta's engine: each cell of its "
        "mitigation x diagnostic axes runs the command after -- for its trials, under the chosen "
        "collectors, into <output>/<ticket> (records, matrix.json, perf.md, report.html; a "
        "re-run resumes)")
_LIST = "the names a recipe's mitigation_axis and diagnostic_axis take, each with its variables"


def _verbs() -> OneLineParser:
    """``aorta sweep``'s verbs (``run`` reads its own arguments: :func:`_parser`)."""
    p = OneLineParser(prog="aorta sweep", description="upstream ROCm/aorta's probe recipes, run on "
                "aorta's engine (docs/profiling.md section 0)")
    verbs = p.add_subparsers(dest="verb", metavar="<verb>", required=True)
    verbs.add_parser("run", help="run a probe recipe: aorta sweep run --recipe R.yaml -- "
                                 "<command> (its --help has the options)")
    verbs.add_parser("list-mitigations", help=_LIST, description=_LIST)
    return p


def _parser() -> OneLineParser:
    p = OneLineParser(prog="aorta sweep run", description=_RUN,
                epilog="Keys, refusals and examples: docs/profiling.md section 0.")
    p.add_argument("--recipe", required=True, type=Path,
                   help="upstream probe recipe (.yaml, or .json)")
    p.add_argument("--collect", metavar="a,b",
                   help="collectors for every cell; replaces the recipe's collect: list "
                        "(options of a collector kept in the list stay)")
    p.add_argument("--trials", type=_positive, metavar="N", help="trials per cell (replaces "
                   "the recipe's trials:)")
    p.add_argument("--output", "--output-dir", default="probe_results", type=Path,
                   help="top folder (default probe_results); the sweep goes to "
                        "<output>/<ticket>")
    p.add_argument("--ticket", help="subfolder of --output (replaces the recipe's ticket:; "
                                    "default _no_ticket_)")
    p.add_argument("--dry-run", action="store_true",
                   help="check the recipe, print the cells and the aorta overrides, run nothing")
    p.add_argument("--env-passthrough-mode", choices=("inherit", "file"),
                   help="inherit only: the cell's variables reach the command's environment")
    p.add_argument("--mode", choices=("matrix",), help="upstream's only choice; no effect")
    p.add_argument("--disable-detector", action="append", metavar="TIER[:ID]",
                   help="accepted: aorta runs none of upstream's detectors")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="accepted: per-cell progress always goes to stderr")
    return p


@dataclass(frozen=True)
class Run:
    """The parsed command line: the recipe, the flags and the command after ``--``."""

    path: Path
    recipe: ProbeRecipe
    collect: list[str] | None
    trials: int | None
    output: Path
    dry_run: bool
    command: list[str]


def _refuse_flags(args: list[str]) -> None:
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in _REFUSED_FLAGS:
            raise UsageError(f"aorta sweep run {flag}: {_REFUSED_FLAGS[flag]}")


def parse(argv: list[str]) -> Run:
    """Read ``sweep run`` arguments; raises :class:`UsageError` or :class:`RecipeError`."""
    options, command = split_command(argv)
    _refuse_flags(options)
    ns, extra = _parser().parse_known_args(options)
    if extra:
        bare = next((a for a in extra if not a.startswith("-")), None)
        if bare is None:
            raise UsageError(f"aorta sweep run: unknown option {extra[0]}; see "
                             "aorta sweep run --help")
        raise UsageError(f"aorta sweep run: {bare!r} is not an option; put your command after "
                         f"--: aorta sweep run --recipe {ns.recipe} -- {shlex.join(extra)}")
    if ns.env_passthrough_mode == "file":
        raise UsageError("aorta sweep run --env-passthrough-mode file: probe.env and "
                         "AORTA_ENV_FILE have no counterpart; use inherit")
    recipe = load(ns.recipe)
    refused = refusals(recipe)
    if refused:
        raise RecipeError(f"{ns.recipe}: {refused[0]}")
    if not command:
        raise UsageError("aorta sweep run: a probe recipe runs a user command: put it after "
                         f"--, e.g. aorta sweep run --recipe {ns.recipe} -- python train.py")
    ticket = ns.ticket if ns.ticket is not None else recipe.ticket or "_no_ticket_"
    if not SEGMENT.fullmatch(ticket):
        raise UsageError(f"aorta sweep run --ticket {ticket!r}: a ticket names the output "
                         "subfolder; use letters, digits, '_', '.' and '-' (e.g. PERF-123)")
    collect = None
    if ns.collect is not None:
        collect = list(dict.fromkeys(n.strip() for n in ns.collect.split(",") if n.strip()))
    return Run(ns.recipe, recipe, collect, ns.trials, ns.output / ticket, ns.dry_run, command)


def overrides(run: Run, registry) -> list[str]:
    """The ``python -m aorta_core`` arguments (before ``--``) that run this recipe."""
    recipe = run.recipe
    timeout = recipe.timeout_per_trial
    args = ["sweep=repeat", f"trials={run.trials or recipe.trials}",
            f"timeout={'null' if timeout is None else repr(timeout)}",
            f"output={run.output.absolute()}"]
    for key, group in AXIS_GROUPS.items():
        args.append(f"+{group}={','.join(getattr(recipe, key))}")
    args += collector_overrides(run.path, recipe, run.collect, registry)
    if recipe.retain is not None:
        args += [f"retain.{k}={getattr(recipe.retain, k)}" for k in ("on_pass", "on_fail",
                                                                     "on_error")]
    return args


def register_axes() -> None:
    """Each built-in mitigation name as an option of both axis groups (it sets ``env``)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for group in AXIS_GROUPS.values():
        for name, env in BUILTIN.items():
            store.store(group=group, name=name, node={"env": dict(env)}, package="_global_")


def _env_text(env: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in env.items()) or "(no variables)"


def _dry_run(run: Run, args: list[str]) -> None:
    out = sys.stdout
    out.write(f"cells, {run.trials or run.recipe.trials} trial(s) each, in {run.output}:\n")
    for m in run.recipe.mitigation_axis:
        for d in run.recipe.diagnostic_axis:
            out.write(f"  mitigation={m} diagnostic={d}: "
                      f"{_env_text({**BUILTIN[m], **BUILTIN[d]})}\n")
    out.write("overrides: " + shlex.join([*args, "--", *run.command]) + "\n")


def main(argv: list[str]) -> int:
    """``aorta sweep <verb> ...``; returns the exit status."""
    from aorta_core.app.sweep_command import load_registry_or_exit, run_sweep

    try:
        if argv[:1] != ["run"]:  # --help prints the page and exits 0
            _verbs().parse_args(argv)
            for name, env in BUILTIN.items():  # the only other verb: list-mitigations
                sys.stdout.write(f"{name}: {_env_text(env)}\n")
            return 0
        run = parse(argv[1:])
        args = overrides(run, load_registry_or_exit())
    except (UsageError, RecipeError) as exc:
        error_line(str(exc))
        return EXIT_USAGE
    if run.dry_run:
        _dry_run(run, args)
        return 0
    register_axes()
    return run_sweep([*args, "--", *run.command])
