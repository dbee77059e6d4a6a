"""The ``aorta`` command: sweep (the Hydra app) plus the ``plugins``, ``matrix``, ``parse`` tools.

Kept light: polars, plotly and torch are imported only by the subcommands that use them.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings
from datetime import datetime
from pathlib import Path

import orjson

from aorta_core.argv import split_command
from aorta_core.progress import console, error_line, warning_line

SUBCOMMANDS = ("plugins", "matrix", "parse")
_OUTPUT_KEYS = ("output=", "+output=", "++output=")


def _with_output(args: list[str]) -> list[str]:
    """Default ``output`` to a new timestamped folder; make a relative one absolute."""
    out = []
    for arg in args:
        key = next((k for k in _OUTPUT_KEYS if arg.startswith(k)), None)
        if key and not Path(arg[len(key):]).is_absolute():
            arg = key + str(Path.cwd() / arg[len(key):])
        out.append(arg)
    if not any(a.startswith(_OUTPUT_KEYS) for a in args):
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        out.append(f"output={Path.cwd() / 'aorta_runs' / stamp}")
    return out


def _load_registry_or_exit():
    from aorta_core.plugins import PluginLoadError, load_registry

    try:
        registry = load_registry()
    except PluginLoadError as exc:
        error_line(str(exc))
        raise SystemExit(2) from None
    for status in registry.statuses:
        if status.status == "error":
            warning_line(
                f"collector {status.name} ({status.distribution} {status.version}) is unusable: "
                f"{status.error}"
            )
    return registry


def run_sweep(args: list[str]) -> int:
    from aorta_core import callbacks, searchpath
    from aorta_core.app import hydra_main, register_command

    hydra_args, command = split_command(args)
    _load_registry_or_exit()
    searchpath.install()
    if "--help" in hydra_args or "-h" in hydra_args:
        from aorta_core.help import print_help

        print_help([a for a in hydra_args if "=" in a and not a.startswith("-")])
        return 0
    if not any(a in ("--hydra-help", "--info", "-i", "--cfg", "-c") for a in hydra_args):
        hydra_args = _with_output(hydra_args)
    register_command(command)
    sys.argv = [sys.argv[0], *hydra_args]
    hydra_main()
    return callbacks.exit_status


def cmd_plugins(ns: argparse.Namespace) -> int:
    registry = _load_registry_or_exit()
    rows = [dataclasses.asdict(s) for s in registry.statuses]
    for row in rows:
        collector = registry.collectors.get(row["name"])
        row["description"] = collector.info.description if collector else None
    if ns.json:
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    from rich.table import Table

    table = Table(title="aorta collectors", title_justify="left")
    for column in ("name", "distribution", "version", "status", "error / description"):
        table.add_column(column)
    for row in rows:
        style = {"ok": "green", "error": "red"}.get(row["status"], "yellow")
        table.add_row(row["name"], row["distribution"], row["version"],
                      f"[{style}]{row['status']}[/]", row["error"] or row["description"] or "")
    if not rows:
        console().print("no collectors installed (pip install aorta-proton, aorta-rocprof, ...)")
    else:
        console().file = sys.stdout
        console().print(table)
    return 0


def cmd_matrix(ns: argparse.Namespace) -> int:
    from aorta_core.matrix import build
    from aorta_core.summary import print_summary

    output = Path(ns.output)
    if not (output / "cells").is_dir():
        error_line(f"{output} holds no sweep (no cells/ folder); pass the output=<dir> of a sweep")
        return 2
    print_summary(build(output))
    return 0


def cmd_parse(ns: argparse.Namespace) -> int:
    registry = _load_registry_or_exit()
    collector = registry.collectors.get(ns.collector)
    if collector is None:
        names = ", ".join(registry.collectors) or "none"
        error_line(f"unknown collector {ns.collector!r}; installed: {names}")
        return 2
    folder = Path(ns.artifact_dir)
    if not folder.is_dir():
        error_line(f"{folder} is not a folder; pass the collector's artifact folder of a trial")
        return 2
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        options = OmegaConf.to_object(OmegaConf.merge(
            OmegaConf.structured(collector.info.options), OmegaConf.from_dotlist(ns.options)))
    except OmegaConfBaseException as exc:
        error_line(f"bad option for {ns.collector}: {' '.join(str(exc).split())}")
        return 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = registry.call(
            ns.collector, "parse_metrics", artifact_dir=folder, options=options
        ) or {}
    for w in caught:
        warning_line(f"{ns.collector}: {w.message}")
    metrics = {**metrics, f"{ns.collector}_artifact_dir": str(folder.resolve())}
    sys.stdout.write(orjson.dumps(metrics, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aorta", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plugins", help="list installed collectors")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_plugins)
    p = sub.add_parser("matrix", help="(re)build matrix.json/.parquet and perf.md of a sweep")
    p.add_argument("output", help="the sweep's output folder")
    p.set_defaults(func=cmd_matrix)
    p = sub.add_parser("parse", help="print the metrics a collector parses from a folder")
    p.add_argument("collector")
    p.add_argument("artifact_dir")
    p.add_argument("options", nargs="*", metavar="key=value",
                   help="collector options, as in collector.<name>.<key>=<value>")
    p.set_defaults(func=cmd_parse)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in SUBCOMMANDS:
        ns = _parser().parse_args(args)
        return ns.func(ns)
    return run_sweep(args)


if __name__ == "__main__":
    raise SystemExit(main())
