"""The ``aorta`` command: sweep (the Hydra app) plus the ``plugins``, ``matrix``, ``parse``,
``report``, ``compare``, ``agree``, ``timeline`` and ``diagnose`` tools.

Kept light: polars, plotly and torch are imported only by the subcommands that use them.

A tool's output (JSON, a table, a version list) goes to a private copy of stdout; fd 1 and
``sys.stdout`` lead to stderr while it runs, so a plugin that prints, or any library writing to
fd 1 while collectors load and parse, cannot corrupt what a script reads from stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import os
import signal
import sys
from pathlib import Path
from typing import TextIO

from aorta_core.api.parallel import prestart, shared_workers
from aorta_core.app.plugin_commands import is_command_name
from aorta_core.app.sweep_command import load_registry_or_exit, run_sweep
from aorta_core.app.usage import OneLineParser, UsageError
from aorta_core.engine.argv import split_command
from aorta_core.engine.progress import (
    bind_console,
    clamped_width,
    collector_warning,
    console,
    error_line,
    warning_line,
    wrote,
)

SUBCOMMANDS = ("plugins", "matrix", "parse", "report", "compare", "agree", "timeline",
               "diagnose")
#: What no collector's command may be named: the tools, upstream's ``aorta sweep run`` and
#: ``aorta help``.
RESERVED = frozenset(SUBCOMMANDS) | {"sweep", "help"}
def _print_json(obj, out: TextIO) -> None:
    from aorta_core.engine.records import dump_json

    out.write(dump_json(obj).decode() + "\n")


def _described(row: dict) -> str:
    """A collector's description, then the commands it adds to ``aorta``."""
    added = "; adds " + ", ".join(f"aorta {c}" for c in row["commands"]) if row["commands"] else ""
    return (row["description"] or "") + added


def _own_stdout() -> TextIO:
    """A stream on the process's stdout for the command's output alone; from now on fd 1 (and so
    ``print``, a C library's write, a child's inherited stdout) leads to stderr."""
    stdout = sys.stdout  # None when started with fd 1 closed (`>&-`): the output is dropped
    if stdout is not None:
        stdout.flush()
    source = 1 if stdout is not None else os.open(os.devnull, os.O_WRONLY)  # may be fd 1 itself
    private = fcntl.fcntl(source, fcntl.F_DUPFD_CLOEXEC, 3)  # above fds 0-2, whichever are closed
    if source != 1:
        os.close(source)
    try:
        os.dup2(2, 1)
    except OSError:  # stderr closed (`2>&-`): what plugins print is dropped, never mixed in
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    return os.fdopen(private, "w", encoding=getattr(stdout, "encoding", None),
                     errors=getattr(stdout, "errors", None),
                     buffering=1 if getattr(stdout, "line_buffering", False) else -1)


def cmd_plugins(ns: argparse.Namespace) -> int:
    from aorta_core.app.plugin_commands import collector_commands

    registry = load_registry_or_exit()
    commands = collector_commands(registry, RESERVED)
    rows = [dataclasses.asdict(s) for s in registry.statuses]
    for row in rows:
        collector = registry.collectors.get(row["name"])
        row["description"] = collector.info.description if collector else None
        row["times_comparable"] = collector.info.times_comparable if collector else None
        row["wrap_order"] = collector.info.wrap_order if collector else None
        row["commands"] = sorted(n for n, c in commands.items() if c.collector == row["name"])
    if ns.json:
        _print_json(rows, ns.out)
        return 0
    from rich.table import Table
    from rich.text import Text

    table = Table(title="aorta collectors", title_justify="left")
    for column in ("name", "distribution", "version", "status", "error / description"):
        table.add_column(column)
    for row in rows:  # what plugins say is text, never Rich markup (an error may read '[/x]')
        style = {"ok": "green", "error": "red"}.get(row["status"], "yellow")
        table.add_row(*map(Text, (row["name"], row["distribution"], row["version"])),
                      Text(row["status"], style=style),
                      Text(row["error"] or _described(row)))
    if not rows:
        console().print("no collectors installed (in the aorta repository: pip install -e "
                        "plugins/aorta_torchprof, and so on for each folder of plugins/)")
    else:
        _render(ns.out, lambda screen: screen.print(table))  # the listing is the output
    return 0


def _render(out: TextIO, draw) -> None:
    """``draw(console)`` with a Rich console shaped like ``out``, then write what it drew like
    any other output: a closed pipe ends in ``main``'s status 141 (Rich itself would make it
    ``SystemExit(1)``)."""
    import io

    from rich.console import Console

    screen = Console(file=out, highlight=False)
    text = io.StringIO()
    draw(Console(file=text, highlight=False, width=clamped_width(screen.width),
                 color_system=screen.color_system, force_terminal=screen.is_terminal))
    out.write(text.getvalue())


def cmd_matrix(ns: argparse.Namespace) -> int:
    from aorta_core.app.summary import finish

    output = Path(ns.output)
    if not (output / "cells").is_dir():
        error_line(f"{output} holds no sweep (no cells/ folder); pass the output=<dir> of a sweep")
        return 2
    finish(output)
    return 0


def cmd_parse(ns: argparse.Namespace) -> int:
    if ns.kernels:
        return _parse_kernels(ns)
    if ns.artifact_dir is None:
        error_line("aorta parse needs COLLECTOR ARTIFACT_DIR (or OUTPUT --kernels)")
        return 2
    registry = load_registry_or_exit(ns.collector)  # imports no other collector
    collector = registry.collectors.get(ns.collector)
    if collector is None:
        from aorta_core.engine.plugins import option_names

        names = ", ".join(option_names()) or "none"
        error_line(f"unknown collector {ns.collector!r}; installed: {names}")
        return 2
    folder = Path(ns.artifact_dir)
    if not folder.is_dir():
        error_line(f"{folder} is not a folder; pass the collector's artifact folder of a trial")
        return 2
    above = _above_artifacts(folder, ns.collector)
    if above is not None:
        error_line(above)
        return 2
    options = _parse_options(ns.collector, collector.info.options, ns.options)
    if options is None:
        return 2
    from aorta_core.engine.metrics import Notes, collector_metrics, safe_text

    notes = Notes()
    metrics = collector_metrics(registry, ns.collector, folder, options, notes)
    for note in notes.by_collector.get(ns.collector, []):
        collector_warning(ns.collector, note)
    metrics[f"{ns.collector}_artifact_dir"] = safe_text(str(folder.resolve()))
    _print_json(metrics, ns.out)
    return 0


def _above_artifacts(folder: Path, collector: str) -> str | None:
    """Why ``folder`` is a sweep's, a cell's or a trial's folder rather than an artifact folder
    (read as one, every trial's traces, and the tools' outputs beside them, would add up to one
    artifact's metrics), with the folder to pass instead; ``None`` when it is none of those."""
    from aorta_core.engine.kernel_tables import rebuild_command
    from aorta_core.engine.records import RECORD_NAME

    if (folder / RECORD_NAME).is_file():
        return (f"{folder} is a trial's folder, not {collector}'s artifact folder; pass "
                f"{folder / collector}")
    if (folder / "cells").is_dir() and any((folder / name).is_file()
                                           for name in ("matrix.json", ".aorta.run.json")):
        return (f"{folder} is a sweep's output folder, not {collector}'s artifact folder; pass "
                f"one trial's, e.g. {folder}/cells/<cell>/trial_000/{collector}, or write every "
                f"trial's kernel table with {rebuild_command(folder)}")
    if any(folder.glob(f"trial_[0-9]*/{RECORD_NAME}")):
        return (f"{folder} is a cell's folder, not {collector}'s artifact folder; pass one "
                f"trial's artifact folder, e.g. {folder / 'trial_000' / collector}")
    return None


def _parse_kernels(ns: argparse.Namespace) -> int:
    output = Path(ns.collector)
    if ns.artifact_dir is not None or ns.options:
        error_line("aorta parse OUTPUT --kernels takes only the sweep's output folder")
        return 2
    if not (output / "cells").is_dir():
        error_line(f"{output} holds no sweep (no cells/ folder); pass the output=<dir> of a sweep")
        return 2
    from aorta_core.app.parse_kernels import write_kernel_tables

    write_kernel_tables(output, load_registry_or_exit(), lambda line: ns.out.write(line + "\n"),
                        warning_line)
    return 0


def _parse_options(name: str, schema: type, dotlist: list[str]):
    """The collector's options with ``key=value`` applied, as in a sweep; ``None`` after saying
    why an option is bad."""
    from aorta_core.engine.plugins import collector_options

    try:
        return collector_options(schema, dotlist)
    except Exception as exc:
        from omegaconf.errors import OmegaConfBaseException

        if not isinstance(exc, OmegaConfBaseException):
            raise
        error_line(f"bad option for {name}: {' '.join(str(exc).split())}")
        return None


def _note(line: str) -> None:
    """A report's note: ``wrote <path>`` as such, anything else a warning."""
    if line.startswith("wrote "):
        wrote(line.removeprefix("wrote "))
    else:
        warning_line(line)


def cmd_report_overlap(ns: argparse.Namespace) -> int:
    prestart("aorta_core.reports.overlap_report")
    from aorta_core.reports.overlap_report import build_report

    dirs, labels = ns.log_dir, ns.label or []
    if len(labels) != len(dirs):
        warning_line(f"--log-dir and --label counts differ ({len(dirs)} vs {len(labels)}); "
                     "pairing them in order, a folder without a label is named after itself, "
                     "a label without a folder is dropped: give one --label per --log-dir")
    pairs = [(labels[i] if i < len(labels) else Path(d).name or d, Path(d))
             for i, d in enumerate(dirs)]
    output = Path(ns.output)
    summary, notes = build_report(pairs, output, ns.reference, ns.candidate,
                                  pngs=False if ns.no_png else None)
    for note in notes:
        _note(note)
    wrote(output / "summary.json")
    wrote(output / "report.html")
    if not any(d.get("count") for d in summary["datasets"].values()):
        error_line("no iteration records found in any --log-dir; nothing to report")
        return 1
    return 0


def cmd_report_sweep(ns: argparse.Namespace) -> int:
    from aorta_core.reports.matrix_files import BadMatrix, load_matrix

    output = Path(ns.output)
    try:  # a page that only says the matrix is missing or unusable is no report
        matrix = load_matrix(output)
    except BadMatrix as exc:
        error_line(str(exc))
        return 2
    from aorta_core.reports.sweep import write_sweep_report  # the page's whole stack, ~50 ms

    path = write_sweep_report(output, pngs=False if ns.no_png else None, matrix=matrix)
    if path is None:
        return 1
    wrote(path)
    return 0


def _html_problem(path: str) -> str | None:
    """Why ``--html PATH`` cannot be written, found before the comparison runs."""
    if not path:
        return "--html '': give the path of the page to write, e.g. --html runs/compare.html"
    if Path(path).is_dir():
        return (f"--html {path} is a folder; give the path of the page to write, e.g. "
                f"--html {Path(path) / 'compare.html'}")
    return None


def cmd_compare(ns: argparse.Namespace) -> int:
    from aorta_core.reports.compare import CompareError, compare, markdown, write_html

    problem = None if ns.html is None else _html_problem(ns.html)
    if problem is not None:
        error_line(problem)
        return 2
    try:
        result = compare(Path(ns.baseline), Path(ns.candidate), factor=ns.factor,
                         alpha=ns.alpha, fail_on=ns.fail_on,
                         allow_env_mismatch=ns.allow_env_mismatch,
                         pairs=[tuple(p) for p in ns.pair or []],
                         match=None if ns.match is None else ns.match.split(","),
                         floor_runs=ns.noise_floor)
    except CompareError as exc:
        error_line(str(exc))
        return 2
    if result.self_compared:
        warning_line(result.self_compared)
    if ns.json:
        _print_json(result.to_json(), ns.out)
    else:
        ns.out.write(markdown(result, only_changed=ns.only_changed))
    if ns.html is not None:
        line = write_html(result, Path(ns.html), pngs=False if ns.no_png else None)
        wrote(ns.html)
        if line:
            _note(line)
    if result.nothing_compared:
        error_line(result.nothing_compared)
        return 2
    for failure in result.failures:
        error_line(f"--fail-on: {failure}")
    return 1 if result.failures else 0


def cmd_agree(ns: argparse.Namespace) -> int:

    from aorta_core.app.summary import print_agreement
    from aorta_core.reports.agreement import write_agreement
    from aorta_core.reports.sweep import write_sweep_report

    output = Path(ns.output)
    if ns.tolerance_pct is not None and not ns.tolerance_pct >= 0:
        error_line(f"--tolerance-pct {ns.tolerance_pct}: must be a percentage >= 0, e.g. 5")
        return 2
    try:
        path = write_agreement(output, ns.tolerance_pct) if (output / "cells").is_dir() else None
    except OSError as exc:
        error_line(f"cannot write the agreement of {output}: {exc}")
        return 1
    if path is None:
        error_line(f"{output} holds no agreement sweep; make one with python -m aorta_core "
                   f"sweep=agree output={output} -- <command>")
        return 2
    report = write_sweep_report(output, pngs=False if ns.no_png else None)
    for written in (path, report):
        if written is not None:
            wrote(written)
    _render(ns.out, lambda screen: print_agreement(path, screen))  # the verdicts: the output
    return 0


def _trial_or_sweep(path: Path) -> bool:
    """Whether ``path`` can be a trial folder or a sweep's output; says why not."""
    if not path.is_dir():
        error_line(f"{path} is not a folder; pass a trial folder (.../trial_NNN), a cell's, a "
                   "sweep's output or a folder of Kineto traces")
    return path.is_dir()


def cmd_timeline(ns: argparse.Namespace) -> int:
    # its workers merge the ranks and read them for the alignment (numpy, as diagnose's)
    prestart("aorta_core.reports.timeline_rank", "aorta_core.reports.rank_traces", min_cores=2)
    from aorta_core.reports.timeline import build_timeline, trial_dirs
    from aorta_core.reports.timeline_selection import Selection

    path = Path(ns.path)
    if not _trial_or_sweep(path):
        return 2
    trials = trial_dirs(path)
    if ns.output and trials != [path]:
        error_line(f"--output names one file, but {path} is a sweep's or a cell's folder "
                   f"({len(trials)} trial(s)); each trial gets its own trial_NNN/timeline.json: "
                   "leave --output out, or give one trial's folder")
        return 2
    selection = Selection(ns.ranks, ns.steps, ns.window)
    written = 0
    for trial in trials:
        try:
            done = build_timeline(trial, Path(ns.output) if ns.output else None, selection,
                                  hook_timeout_s=ns.hook_timeout, align=ns.align)
        except OSError as exc:
            from aorta_core.api.files import disk_full

            fix = ("free space there (or give --output on another disk), then run it again"
                   if disk_full(exc) else "fix it, then run it again")
            error_line(f"cannot write the timeline of {trial} ({exc.strerror or exc}); {fix}")
            continue
        if done is not None:
            counts = ", ".join(f"{k} {v}" for k, v in sorted(done.events.items())) or "none"
            wrote(f"{done.path} (ranks {', '.join(map(str, done.ranks))}; events: {counts})")
            written += 1
    return 0 if written else 1


def cmd_diagnose(ns: argparse.Namespace) -> int:
    # its workers read the ranks' traces; the server imports numpy as this process does
    prestart("aorta_core.reports.rank_traces", min_cores=2)
    from aorta_core.reports import straggler_thresholds
    from aorta_core.reports.diagnose import write_diagnosis
    from aorta_core.reports.timeline import trial_dirs

    path = Path(ns.path)
    if not _trial_or_sweep(path):
        return 2
    for name in ("min_excess_ms", "min_excess_pct"):
        if not getattr(ns, name) >= 0:
            error_line(f"--{name.replace('_', '-')} {getattr(ns, name)}: must be >= 0, e.g. "
                       f"{getattr(straggler_thresholds, name.upper()):g} (the default)")
            return 2
    written, failed, results = 0, 0, []
    for trial in trial_dirs(path):
        try:
            done = write_diagnosis(trial, hook_timeout_s=ns.hook_timeout,
                                   min_excess_ms=ns.min_excess_ms,
                                   min_excess_pct=ns.min_excess_pct)
        except Exception as exc:  # one trial's trouble is one line, never the others'
            from aorta_core.api.oneline import exception_line
            from aorta_core.api.slurm_map import SlurmError

            if isinstance(exc, SlurmError):  # every trial's: the command's one line
                raise
            error_line(f"cannot diagnose {trial}: {exception_line(exc)}")
            failed += 1
            continue
        if done is None:
            continue
        written += 1
        wrote(done[0])
        results.append(done[1])
        if not ns.json:
            ns.out.write(f"{trial}: {len(done[1]['ranks'])} rank(s), profiled steps "
                         f"{', '.join(map(str, done[1]['steps'])) or 'none in common'}\n")
            for finding in done[1]["findings"] or [{"text": "nothing stands out"}]:
                ns.out.write(f"  - {finding['text']}\n")
            if done[1].get("what_if"):
                ns.out.write(f"  - what if: {done[1]['what_if']['text']}\n")
    if ns.json:
        _print_json(results, ns.out)
    return 0 if written and not failed else 1


def _argument(parse):
    """An argparse ``type`` that turns the parser's ValueError into a usage error."""
    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert


def _hook_seconds(text: str) -> float | None:
    """``--hook-timeout``: seconds as the sweep's ``hook_timeout`` takes them (``none``: no
    limit)."""
    if text.lower() in ("none", "null"):
        return None
    from aorta_core.engine.settings import MAX_HOOK_TIMEOUT_S

    seconds = float(text)
    if not 0 < seconds <= MAX_HOOK_TIMEOUT_S:  # nan fails too
        raise ValueError(f"{text}: a number of seconds above 0 (none: no limit)")
    return seconds


def _add_hook_timeout(parser: argparse.ArgumentParser) -> None:
    from aorta_core.engine.isolation import DEFAULT_HOOK_TIMEOUT_S

    parser.add_argument("--hook-timeout", type=_argument(_hook_seconds), metavar="S",
                        default=DEFAULT_HOOK_TIMEOUT_S,
                        help="seconds each collector's timeline_sources hook may take "
                             f"({DEFAULT_HOOK_TIMEOUT_S:g}; none: no limit)")


def _add_slurm(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--slurm", metavar="KEY=VALUE,...",
                        help="read each rank's (file's) traces in a Slurm job array task instead "
                             "of a local worker (docs/scaling.md): partition, time (min), "
                             "account, qos, constraint, cpus, mem_factor, mem_gb (none: no "
                             "request), parallel, folder (shared by the nodes; ./aorta-slurm); "
                             "'defaults' takes them all")


def _timeline_value(name: str):
    """The timeline selection's parser ``name``, imported at the first value it reads: no
    start-up cost of other commands."""
    def parse(text: str):
        from aorta_core.reports import timeline_selection

        return getattr(timeline_selection, name)(text)
    return _argument(parse)


def _add_tool(sub, name: str, about: str) -> argparse.ArgumentParser:
    """A tool's parser: ``aorta <tool> --help`` says what it does, then its arguments."""
    return sub.add_parser(name, help=about, description=about)


def _add_timeline_parser(sub) -> None:
    parse_ints, parse_window = _timeline_value("parse_ints"), _timeline_value("parse_window")
    t = _add_tool(sub, "timeline", "merge a trial's traces into one Perfetto/chrome trace "
                                   "(every trial of a sweep output)")
    t.add_argument("path", help="a trial folder (.../trial_NNN), a cell's, a sweep's output, "
                                "or a folder of Kineto traces")
    t.add_argument("--output", help="the file to write for one trial (default "
                                    "<trial>/timeline.json; .json.gz compresses)")
    t.add_argument("--ranks", type=parse_ints, help="ranks to keep, e.g. 0,1 or 0-3")
    t.add_argument("--steps", type=parse_ints,
                   help="ProfilerStep#N / benchmark steps to keep, e.g. 3-5")
    t.add_argument("--window", type=parse_window, metavar="START:END",
                   help="ms after the timeline's origin (the trial's start), e.g. 1200:1350")
    t.add_argument("--align", choices=("collectives", "host", "none"), default="collectives",
                   help="collectives: every rank on the lowest rank's clock, from the "
                        "collectives they share (default); host: each rank on its host's clock; "
                        "none: every source at the times it wrote")
    _add_hook_timeout(t)
    _add_slurm(t)
    t.set_defaults(func=cmd_timeline)


def _add_diagnose_parser(sub) -> None:
    d = _add_tool(sub, "diagnose", "why is a step slow: each rank's step time by part, "
                                   "stragglers, findings and the step without the stragglers, "
                                   "into <trial>/diagnosis.json")
    from aorta_core.reports.straggler_thresholds import MIN_EXCESS_MS, MIN_EXCESS_PCT

    d.add_argument("path", help="a trial folder (.../trial_NNN), a cell's, a sweep's output, "
                                "or a folder of Kineto traces")
    d.add_argument("--min-excess-ms", type=float, default=MIN_EXCESS_MS,
                   help=f"a straggler is this many ms/step slower at least ({MIN_EXCESS_MS:g})")
    d.add_argument("--min-excess-pct", type=float, default=MIN_EXCESS_PCT,
                   help=f"... and this %% of the median step at least ({MIN_EXCESS_PCT:g})")
    d.add_argument("--json", action="store_true", help="print the diagnoses as a JSON list")
    _add_hook_timeout(d)
    _add_slurm(d)
    d.set_defaults(func=cmd_diagnose)


def _add_report_parsers(sub) -> None:
    p = _add_tool(sub, "report", "write a report: overlap (benchmark JSONL) or sweep")
    kinds = p.add_subparsers(dest="report", required=True)
    o = _add_tool(kinds, "overlap", "overlap report over rank_*_metrics.jsonl folders")
    o.add_argument("--log-dir", action="append", required=True,
                   help="a benchmark output_dir (repeatable)")
    o.add_argument("--label", action="append", help="name of the matching --log-dir")
    o.add_argument("--output", required=True, help="folder for summary.json, report.html, PNGs")
    o.add_argument("--reference", help="label to compare against")
    o.add_argument("--candidate", help="label compared with --reference")
    o.add_argument("--no-png", action="store_true", help="skip the PNG export")
    o.set_defaults(func=cmd_report_overlap)
    s = _add_tool(kinds, "sweep", "(re)write a sweep's report.html")
    s.add_argument("output", help="the sweep's output folder")
    s.add_argument("--no-png", action="store_true", help="skip the PNG export")
    s.set_defaults(func=cmd_report_sweep)
    c = _add_tool(sub, "compare", "compare two sweeps cell by cell (asv-style marks)")
    c.add_argument("baseline", help="output folder of the baseline sweep (run A)")
    c.add_argument("candidate", help="output folder of the candidate sweep (run B)")
    c.add_argument("--factor", type=float, default=1.1,
                   help="ratio beyond which a change is marked (default 1.1)")
    c.add_argument("--alpha", type=float, default=0.05,
                   help="significance level of the q-values (0.05)")
    c.add_argument("--fail-on", action="append", metavar="METRIC:PCT",
                   help="exit 1 when METRIC (a glob) is significantly more than PCT%% worse "
                        "(or untestable: too few trials), or when no pair of cells measured it; "
                        "kernel:GLOB:PCT gates the kernel rows whose name or key matches "
                        "(repeatable)")
    c.add_argument("--noise-floor", metavar="AA[,AA2]",
                   help="an A/A run (its trials split into halves) or two runs of the same "
                        "command: a row is significant only beyond the noise they measure")
    c.add_argument("--pair", action="append", nargs=2, metavar=("A_CELL", "B_CELL"),
                   help="compare cell A_CELL of run A with B_CELL of run B (repeatable; "
                        "between two runs the other cells pair as usual, within one run only "
                        "the --pair pairs are compared)")
    c.add_argument("--match", metavar="KEY[,KEY]",
                   help="pair cells on these axes alone (default: by name, else by the axes "
                        "that are not set for a whole run)")
    c.add_argument("--allow-env-mismatch", action="store_true",
                   help="compare runs from different GPUs/drivers/versions anyway")
    c.add_argument("--only-changed", action="store_true", help="markdown: marked rows only")
    c.add_argument("--json", action="store_true", help="JSON instead of markdown")
    c.add_argument("--html", metavar="PATH", help="also write an HTML page")
    c.add_argument("--no-png", action="store_true", help="skip the PNG export of --html")
    c.set_defaults(func=cmd_compare)
    a = _add_tool(sub, "agree", "do the profilers of a sweep=agree agree? (rewrites "
                                "agreement.json and report.html)")
    a.add_argument("output", help="the output folder of a sweep=agree")
    a.add_argument("--tolerance-pct", type=float, metavar="X",
                   help="a metric agrees when its sources are within X %% of each other "
                        "(default: the sweep's agree.tolerance_pct)")
    a.add_argument("--no-png", action="store_true", help="skip the PNG export")
    a.set_defaults(func=cmd_agree)


def _parser() -> argparse.ArgumentParser:
    """The tools' parser (numpy-free: the tool being run imports what it needs)."""
    parser = OneLineParser(prog="aorta", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = _add_tool(sub, "plugins", "list installed collectors")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_plugins)
    p = _add_tool(sub, "matrix", "(re)build matrix.json/.parquet, perf.md, report.html")
    p.add_argument("output", help="the sweep's output folder")
    p.set_defaults(func=cmd_matrix)
    p = _add_tool(sub, "parse", "print the metrics a collector parses from a folder; "
                                "--kernels: write a sweep's kernel tables again")
    p.add_argument("collector", help="the collector (with --kernels: the sweep's output)")
    p.add_argument("artifact_dir", nargs="?")
    p.add_argument("--kernels", action="store_true",
                   help="aorta parse OUTPUT --kernels: write each trial's kernels.parquet from "
                        "its artifacts, nothing re-run")
    p.add_argument("options", nargs="*", metavar="key=value",
                   help="collector options, as in collector.<name>.<key>=<value>")
    _add_slurm(p)
    p.set_defaults(func=cmd_parse)
    _add_report_parsers(sub)
    _add_timeline_parser(sub)
    _add_diagnose_parser(sub)
    parser.tools = sub  # each tool's own parser, for its usage errors
    return parser


def print_version(out: TextIO) -> int:
    """``aorta --version``: aorta-core's version, then each installed collector's distribution."""
    from importlib.metadata import version

    from aorta_core.engine.plugins import PluginLoadError, load_registry

    lines = [f"aorta-core {version('aorta-core')}"]
    try:
        statuses = load_registry().statuses
    except PluginLoadError as exc:
        statuses, lines = [], [*lines, f"collectors: not listed ({exc})"]
    else:
        lines += [] if statuses else ["collectors: none installed"]
    for s in statuses:
        state = "" if s.status == "ok" else f" ({': '.join(filter(None, (s.status, s.error)))})"
        lines.append(f"collector {s.name}: {s.distribution} {s.version}{state}")
    out.write("\n".join(lines) + "\n")
    return 0


def _without_help_word(args: list[str]) -> list[str]:
    """``aorta help [<command> [<sub>]]`` as ``aorta [<command> [<sub>]] --help``; a word that
    names no command is a usage error, not the general help."""
    if args[:1] != ["help"]:
        return args
    if args[1:] and args[1] not in RESERVED and _collector_command(args[1], []) is None:
        near = _near_command(args[1])
        raise UsageError(f"aorta help {args[1]}: no such command"
                         + (f"; did you mean aorta help {near}?" if near else "")
                         + f" (commands: {', '.join(sorted(RESERVED))})")
    return [*args[1:], "--help"]


def main(argv: list[str] | None = None) -> int:
    from aorta_core.app.process_setup import prepare

    problem = prepare()  # it may start this process again: before anything else is set up
    bind_console()
    if problem is not None:
        error_line(problem)
        return 2
    args = sys.argv[1:] if argv is None else argv
    out = sys.stdout
    try:
        args = _without_help_word(args)
        tool = _tool(args)
        if tool is None:
            status = _sweep(args)
        else:
            if "out" not in tool:  # a collector's command prints where it likes
                tool.out = out = _own_stdout()
            status = _run_tool(tool, args)
        if out is not None:  # None: started with stdout closed (`>&-`)
            out.flush()  # a closed pipe shows here, not in Python's flush at exit (status 120)
        return status
    except UsageError as exc:  # a tool's argument it cannot take
        error_line(str(exc))
        return 2
    except BrokenPipeError:  # `aorta plugins | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())  # no 2nd error at exit
        return 128 + signal.SIGPIPE


def _run_tool(tool: argparse.Namespace, args: list[str]) -> int:
    """A tool's command, its parallel_map calls sharing one pool of workers that start once.
    Ctrl-C and SIGTERM end those workers with the command (a killed parent's workers would
    outlive it) and say so in one line; what it writes is written whole or not at all."""
    from aorta_core.api.slurm_map import SlurmError
    from aorta_core.app.driver import (
        EXIT_INTERRUPTED,
        EXIT_TERMINATED,
        Terminated,
        sigterm_interrupts,
    )

    received: list[int] = []
    try:
        _on_slurm(getattr(tool, "slurm", None))
        with sigterm_interrupts() as received, shared_workers():
            return tool.func(tool)
    except SlurmError as exc:
        error_line(str(exc))
        return 2
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) or received:  # a SIGTERM a library re-raised
            terminated = isinstance(exc, Terminated) or bool(received)  # as its own error
            error_line(f"{'terminated (SIGTERM)' if terminated else 'interrupted'}: "
                       f"aorta {' '.join(args[:1])} stopped before its end; no file is left "
                       "half-written: run it again")
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
            error_line(_cannot_write(args[0], exc))
            return 1
        raise


def _on_slurm(spec: str | None) -> None:
    """``--slurm``: this command's maps run as Slurm job arrays (``AORTA_SLURM``), once the
    settings read and Slurm is there to submit to; :class:`SlurmError` says why not."""
    if spec is None:
        return
    import importlib.util
    import shlex
    import shutil

    from aorta_core.api.slurm_map import SLURM_ENV, SlurmError, parse_settings

    spec = "" if spec.strip() == "defaults" else spec
    settings = parse_settings(spec)
    if importlib.util.find_spec("submitit") is None:
        raise SlurmError("--slurm needs submitit, which is not installed: "
                         f"{shlex.quote(sys.executable)} -m pip install 'aorta-core[slurm]'")
    if shutil.which("sbatch") is None:
        raise SlurmError("--slurm: no sbatch on PATH; run it where Slurm jobs are submitted (a "
                         "login node), or leave --slurm out to read the traces here")
    _check_partition(settings.partition)
    os.environ[SLURM_ENV] = spec


def _check_partition(partition: str | None) -> None:
    """A partition sinfo does not list is refused here, before a collector's parse would turn
    sbatch's refusal into a warning per trial."""
    import subprocess

    from aorta_core.api.slurm_map import SlurmError

    if partition is None:
        return
    try:
        listed = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True,
                                timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return  # no sinfo to ask: sbatch will say
    if listed and partition not in listed:
        raise SlurmError(f"--slurm partition={partition}: not a partition of this cluster "
                         f"(sinfo lists {', '.join(sorted(set(listed)))})")


def _cannot_write(tool: str, exc: OSError) -> str:
    """A tool's file it could not write or read, in one line with the fix (a full disk, a
    read-only folder, a permission)."""
    from aorta_core.api.files import disk_full

    where = f" {exc.filename}" if exc.filename else ""
    fix = ("free space there (or write the output elsewhere), then run it again"
           if disk_full(exc) else "fix that, then run it again")
    return f"aorta {tool}: cannot write or read{where} ({exc.strerror or exc}); {fix}"


def _tool(args: list[str]) -> argparse.Namespace | None:
    """The tool ``args`` name (its ``func`` prints to ``out``), or ``None`` for a sweep."""
    if "--version" in split_command(args)[0]:
        return argparse.Namespace(func=lambda ns: print_version(ns.out))
    if args and args[0] in SUBCOMMANDS:
        _one_blas_thread()
        return _parse_tool(args)
    if args and args[0] != "sweep" and is_command_name(args[0]):
        found = _collector_command(args[0], args[1:])
        if found is None and (near := _near_command(args[0])):
            raise UsageError(f"{args[0]!r} is not a command of aorta; did you mean aorta {near}? "
                             f"(commands: {', '.join(sorted(RESERVED))})")
        return found
    return None


def _near_command(word: str) -> str | None:
    """The tool a misspelt ``word`` most likely meant (``compaer``: ``compare``), if any."""
    import difflib

    near = difflib.get_close_matches(word, sorted(RESERVED), n=1, cutoff=0.75)
    return near[0] if near else None


def _parse_tool(args: list[str]) -> argparse.Namespace:
    """A tool's arguments; one it does not take is refused with that tool's usage (argparse
    would show aorta's list of tools)."""
    parser = _parser()
    ns, extra = parser.parse_known_args(args)
    if extra:
        parser.tools.choices[args[0]].error(f"unrecognized arguments: {' '.join(extra)}")
    return ns


def _one_blas_thread() -> None:
    """The tools do interval and table arithmetic, never linear algebra: numpy's OpenBLAS
    starting a thread per core costs ~70 ms of a tool's start-up (and each parse worker's). Only
    for the tools (a sweep's workloads keep their threads) and unless the user chose a number."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        if name in os.environ:
            return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"


def _collector_command(name: str, args: list[str]) -> argparse.Namespace | None:
    """A command a collector adds (``aorta_commands``), run with the process's own stdout; or
    ``None``: then ``name`` is read as a sweep's argument and refused as such."""
    from aorta_core.app.plugin_commands import collector_commands, run_command
    from aorta_core.engine.plugins import PluginLoadError, load_registry

    try:
        found = collector_commands(load_registry(), RESERVED)
    except PluginLoadError:  # the sweep path says it, once
        return None
    if name not in found:
        return None
    return argparse.Namespace(func=lambda ns: run_command(name, found[name], args), out=None)


def _sweep(args: list[str]) -> int:
    if args and args[0] == "sweep":  # upstream's `aorta sweep run --recipe R.yaml -- <command>`
        from aorta_core.app.upstream.command import main as upstream_sweep

        return upstream_sweep(args[1:])
    return run_sweep(args)


if __name__ == "__main__":
    raise SystemExit(main())
