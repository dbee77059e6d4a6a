"""The sweep's command line (``aorta [sweep] <overrides> -- <command>``): load the collectors,
check the line, then let Hydra run one job per cell. Shared by ``aorta`` itself and upstream's
``aorta sweep run --recipe``."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from aorta_core.engine.argv import split_command
from aorta_core.engine.config_tree import config_tree_missing
from aorta_core.engine.progress import console, error_line, escape, warning_line

_INFO_FLAGS = ("--hydra-help", "--info", "-i", "--cfg", "-c")


def _output_arg(output: Path) -> str:
    """``output=`` as Hydra reads it back whole, whatever the path holds."""
    from aorta_core.engine.grammar import quote

    return f"output={quote(str(output))}"


def load_registry_or_exit(only: str | None = None, warn: bool = True):
    """The collectors (``only``: just that one), or exit 2 with the strict load's error;
    ``warn``: one warning per collector that failed to load (:func:`warn_unusable`)."""
    from aorta_core.engine.plugins import PluginLoadError, load_registry

    try:
        registry = load_registry(only)
    except PluginLoadError as exc:
        error_line(str(exc))
        raise SystemExit(2) from None
    if warn:
        warn_unusable(registry)
    return registry


def warn_unusable(registry) -> None:
    for status in registry.statuses:
        if status.status == "error":
            warning_line(status.unusable)


def run_sweep(args: list[str]) -> int:
    hydra_args, command = split_command(args)
    missing = config_tree_missing()
    if missing is not None:
        error_line(missing)
        return 2
    if "--help" in hydra_args or "-h" in hydra_args:  # imports no plugin: one may be slow
        from aorta_core.app.help import print_help
        from aorta_core.engine.plugins import option_names

        print_help([a for a in hydra_args if "=" in a and not a.startswith("-")], option_names())
        return 0
    # one warning per unusable collector before anything runs, once the line is checked: a
    # selected one is the check's error, said once
    registry = load_registry_or_exit(warn=False)
    from aorta_core.app import searchpath
    from aorta_core.app.cell_job import hydra_main, register_command, run_jobs, run_rounds
    from aorta_core.app.driver import EXIT_USAGE, drive, recorded_trials
    from aorta_core.app.precheck import UsageError, check, without_output
    from aorta_core.app.run_folder import identity, new_output, resumable

    searchpath.install()
    try:
        plan = check(hydra_args, command)
    except UsageError as exc:
        error_line(str(exc))
        return EXIT_USAGE
    warn_unusable(registry)
    output = plan.output
    register_command(command, plan.swept)
    if any(a in _INFO_FLAGS for a in plan.flags):  # Hydra prints and runs nothing
        sys.argv = [sys.argv[0], *plan.hydra_args, *([_output_arg(output)] if output else []),
                    *plan.flags]
        hydra_main()
        return 0
    run = identity(without_output(hydra_args), command)
    existing = None
    if output is None:
        output = resumable(run, plan.retry)
        if output is not None:
            console().print(f"resuming {escape(str(output))}, the latest run of this command, "
                            f"which has trials left to run ({recorded_trials(output)} recorded); "
                            "give output=<dir> for a new run")
        else:
            try:
                output, existing = new_output()
            except OSError as exc:
                error_line(f"cannot make a folder for the run in {Path.cwd()} "
                           f"({exc.strerror or exc}); give a writable output=<dir>")
                return EXIT_USAGE
    argv = [sys.argv[0], *plan.hydra_args, _output_arg(output)]
    sys.argv = [*argv, *plan.flags]
    jobs = (run_jobs if plan.order == "cells"
            else functools.partial(run_rounds, argv, plan.flags, plan.trials))
    return drive(output, jobs, plan.allow_failures, run, existing)
