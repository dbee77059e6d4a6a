"""Traps a newcomer falls into, through the real CLI: a command with the default recipe, Hydra's
errors (multirun too), keys that are no setting, the benchmark's values and misspelt groups, a key
given twice, Hydra's flags anywhere in the line, trial lines of parallel cells, a help page for
every command, ``--version``.

Hardware: none (one-line commands per trial, or nothing runs); CPU-only and GPU machines alike.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from importlib.metadata import entry_points, version
from pathlib import Path

import pytest
from cli_helpers import good_collector, records, run_aorta
from needs import needs

from aorta_core.app.cli import SUBCOMMANDS

JOBLIB = "hydra_plugins.hydra_joblib_launcher"
SUBMITIT = "hydra_plugins.hydra_submitit_launcher"
TRUE = ["--", sys.executable, "-c", "pass"]
#: Every installed collector disabled: the tests' own plugin site decides what exists.
ONLY_TEST_PLUGINS = {"AORTA_DISABLE_PLUGINS": ",".join(
    sorted({ep.name for ep in entry_points(group="aorta.collectors")}))}


def _one_error(done) -> str:
    """The usage error's single line (exit status 2), without its prefix."""
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("aorta: error: "), done.stderr
    return lines[0].removeprefix("aorta: error: ")


# -- a command with the default recipe ----------------------------------------------------------

def test_a_command_without_a_recipe_is_refused_with_the_fix(tmp_path: Path):
    done = run_aorta(["trials=1", "--", "python", "my script.py"], cwd=tmp_path)
    assert _one_error(done) == (
        "a command after `--` needs a recipe that runs it (the default recipe sweeps the "
        "benchmark's fsdp/ddp axes): python -m aorta_core sweep=repeat trials=1 -- python "
        "'my script.py'")
    assert list(tmp_path.iterdir()) == []


def test_the_default_recipe_still_takes_a_workload(tmp_path: Path):
    done = run_aorta(["workload=benchmark", "--cfg", "job", "-p", "workload.parallel"],
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fsdp"


def test_a_recipe_axis_the_workload_lacks_is_named_as_the_recipes(tmp_path: Path):
    done = run_aorta(["workload=tiny", f"output={tmp_path / 'out'}"], cwd=tmp_path)
    assert _one_error(done) == (
        "the recipe sweep=default sweeps workload.parallel, which this config does not have "
        "(another workload?): choose a recipe for it, e.g. sweep=repeat; python -m aorta_core "
        "--help lists them")
    assert list(tmp_path.iterdir()) == []


# -- Hydra's errors: one line, exit 2, nothing left behind --------------------------------------

@pytest.mark.parametrize(("args", "line"), [
    (["-m", "workload.batch_sise=16,64"],
     "workload.batch_sise is not a setting; did you mean `workload.batch_size`?"),
    (["hydra/launcher=no_such_launcher"],
     "In 'hydra/config': Could not find 'hydra/launcher/no_such_launcher'; Available options"),
    (["collector=good,missing"],
     "In 'config': Could not find 'collector/missing'; Available options in 'collector': good"),
    (["collector=good", "collector.good.level=1,x"],
     "Error merging override collector.good.level=x; Value 'x' of type 'str' could not be "
     "converted to Integer"),
    (["trails=1"], "trails is not a setting; did you mean `trials`?"),
    (["+trails=1"], "trails is not a setting; did you mean `trials`?"),
    (["+trails=1,2"], "trails is not a setting; did you mean `trials`?"),
    (["+label=a"], "label is not a setting (a key of your own only labels replicate cells, "
                   "swept: +label=a,b; python -m aorta_core --help lists the settings)"),
    (["collector.good.level=2"],
     "collector.good.level is given, but no cell selects collector good: add collector=good"),
    (["-m", "collector=good,other", "collector.good.levle=2"],
     "collector.good.levle is not an option of good; valid: level"),
    (["x=interval(0,1)"], "x=interval(0,1): the basic sweeper sweeps lists, choice(), range() "
                          "and glob(); give the values as a,b,c"),
    (["collector=null"], "collector=null: a config group takes one of its options, not null; "
                         "leave collector= out to select none"),
    (["-m", "collector=null,good"], "collector=null: a config group takes one of its options"),
])
def test_a_hydra_error_is_one_line_before_anything_is_written(plugin_site, tmp_path: Path,
                                                              args, line):
    plugin_site.add("good", good_collector("good"))
    plugin_site.add("other", good_collector("other"))
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", f"output={out}", *args, *TRUE], cwd=tmp_path,
                     env={**plugin_site.env, **ONLY_TEST_PLUGINS})
    assert _one_error(done).startswith(line)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_a_key_of_your_own_swept_labels_replicate_cells(tmp_path: Path):
    out = tmp_path / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "+label=a,b", f"output={out}", *TRUE],
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(r["cell"] for r in records(out)) == ["label=a", "label=b"]


def test_one_collectors_options_go_to_the_cells_that_select_it(plugin_site, tmp_path: Path):
    """``-m collector=good,other collector.good.level=2 collector.other.level=3``: Hydra cannot
    set good's option in the cell that selects only other (nor other's in good's); each reaches
    its collector's cell and no other."""
    plugin_site.add("good", good_collector("good"))
    plugin_site.add("other", good_collector("other"))
    out = tmp_path / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=1", "collector=good,other",
                      "collector.good.level=2", "collector.other.level=3", f"output={out}", *TRUE],
                     cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS})
    assert done.returncode == 0, done.stderr
    runs = {tuple(r["collectors"]): r["metrics"] for r in records(out)}
    assert set(runs) == {("good",), ("other",)}
    assert runs[("good",)]["good_level"] == 2
    assert runs[("other",)]["other_level"] == 3
    assert not any(k.startswith("good_") for k in runs[("other",)])


# -- values checked when composed (issue 41): nothing runs, nothing is written -------------------

@pytest.mark.parametrize(("args", "line"), [
    (["workload.parallel=dpp"],
     "workload.parallel=dpp is not one of ddp, fsdp; did you mean `workload.parallel=ddp`?"),
    (["-m", "workload.parallel=ddp,dpp"],
     "workload.parallel=dpp is not one of ddp, fsdp; did you mean `workload.parallel=ddp`?"),
    (["workload.model=tinny"], "workload.model=tinny is not one of base, small, tiny, auto; did "
                               "you mean `workload.model=tiny`?"),
    (["workload.precision=bf61"], "workload.precision=bf61 is not one of none, bf16, fp16, auto; "
                                  "did you mean `workload.precision=bf16`?"),
    (["workload.batch_size=0"],
     "workload.batch_size=0 is refused by the benchmark: data.batch_size=0 must be >= 1"),
    (["workload.steps=abc"], "workload.steps=abc is refused by the benchmark: Error merging "
                             "override training.max_steps=abc; Value 'abc' of type 'str' could "
                             "not be converted to Integer"),
])
def test_a_benchmark_value_is_refused_before_anything_runs(tmp_path: Path, args, line):
    """The default recipe hands ``workload.*`` to the benchmark's own Hydra config, which aorta's
    cannot check: each cell's arguments are composed by it at plan time."""
    done = run_aorta([*args, f"output={tmp_path / 'out'}"], cwd=tmp_path)
    assert _one_error(done) == line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "line"), [
    (["colector=torchprof"], "colector is not a setting; did you mean `collector`?"),
    (["+colector=torchprof"], "colector is not a setting; did you mean `collector`?"),
    (["swep=grid"], "swep is not a setting; did you mean `sweep`?"),
    (["hydra/lancher=basic"], "hydra/lancher is not a setting; did you mean `hydra/launcher`?"),
    (["sweep=gird"], "In 'config': Could not find 'sweep/gird'; Available options in 'sweep': "
                     "agree, default, grid, repeat; did you mean `sweep=grid`?"),
    (["hydra/launcher=basc"], "did you mean `hydra/launcher=basic`?"),
])
def test_a_misspelt_group_names_the_one_meant(tmp_path: Path, args, line):
    done = run_aorta([*args, f"output={tmp_path / 'out'}"], cwd=tmp_path)
    assert _one_error(done).endswith(line)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "given"), [
    (["trials=1", "trials=2"], "trials= is given 2 times (trials=1 trials=2)"),
    (["+env.X=1", "++env.X=2"], "env.X= is given 2 times (+env.X=1 ++env.X=2)"),
    (["-m", "trials=1,2", "trials=3"], "trials= is given 2 times (trials=1,2 trials=3)"),
    (["output=elsewhere"], "output= is given 2 times (output=<out> output=elsewhere)"),
])
def test_a_key_given_twice_is_refused(tmp_path: Path, args, given):
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", f"output={out}", *args, *TRUE], cwd=tmp_path)
    assert _one_error(done) == (f"{given.replace('<out>', str(out))}; Hydra would silently "
                                "keep the last: give it once")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("place", [0, 2, 4])
def test_the_multirun_flag_works_anywhere_in_the_line(tmp_path: Path, place: int):
    out = tmp_path / "out"
    args = ["sweep=repeat", "trials=1", "+cell=a,b", f"output={out}"]
    args.insert(place, "-m")
    done = run_aorta([*args, *TRUE], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(r["cell"] for r in records(out)) == ["cell=a", "cell=b"]


def test_a_flag_after_the_output_reaches_hydra(tmp_path: Path):
    done = run_aorta(["sweep=repeat", "trials=2", f"output={tmp_path / 'out'}", "--cfg", "job",
                      "-p", "trials", *TRUE], cwd=tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "2"), done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_flag_is_one_line_and_leaves_nothing_behind(tmp_path: Path):
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", f"output={out}", "--multi-run", *TRUE], cwd=tmp_path)
    assert _one_error(done) == ("unrecognized arguments: --multi-run; aorta takes key=value "
                                "overrides and Hydra's flags (python -m aorta_core --hydra-help "
                                "lists them)")
    assert list(tmp_path.iterdir()) == []


@needs(SUBMITIT)
@pytest.mark.skipif(shutil.which("srun") is not None, reason="needs a machine without Slurm")
@pytest.mark.parametrize("existing", [False, True])
def test_a_launcher_that_cannot_start_leaves_nothing_behind(tmp_path: Path, existing: bool):
    out = tmp_path / "runs" / "out"
    if existing:  # an earlier run's output, with a note of the user's beside its cells
        (out / "cells").mkdir(parents=True)
        (out / "notes.txt").write_text("mine")
    done = run_aorta(["sweep=repeat", "hydra/launcher=submitit_slurm", f"output={out}", *TRUE],
                     cwd=tmp_path)
    line = _one_error(done)
    assert line.startswith('the sweep could not start (RuntimeError: Could not detect "srun"'), \
        line
    assert line.endswith("nothing ran: this machine has no Slurm (srun, sbatch): run the sweep "
                         "on a login node of the cluster, or leave hydra/launcher out to run its "
                         "cells here"), line
    if existing:
        assert sorted(p.name for p in out.iterdir()) == ["cells", "notes.txt"]
    else:
        assert list(tmp_path.iterdir()) == []
    shown = run_aorta(["sweep=repeat", "hydra/launcher=submitit_slurm", f"output={out}", *TRUE],
                      cwd=tmp_path, env={"HYDRA_FULL_ERROR": "1"})
    assert shown.returncode == 1 and "Traceback" in shown.stderr
    assert 'RuntimeError: Could not detect "srun"' in shown.stderr


# -- trial lines that name their cell (names at 60/80/200 columns: test_perfmd_layout.py) ---

@pytest.mark.parametrize("launcher", [
    pytest.param([], id="in-turn"),
    pytest.param(["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], id="joblib",
                 marks=needs(JOBLIB)),
])
def test_every_trial_line_names_its_cell(tmp_path: Path, launcher: list[str]):
    out = tmp_path / "out"
    done = run_aorta(["-m", "sweep=repeat", "trials=2", *launcher, "+env.AORTA_SHARED=x",
                      "+cell=a,b", f"output={out}", *TRUE], cwd=tmp_path,
                     env={"COLUMNS": "80"}, timeout=300)
    assert done.returncode == 0, done.stderr
    trial_lines = [line for line in done.stderr.splitlines()
                   if re.search(r"trial \d/2 (pass|fail|error)", line)]
    named = Counter(re.match(r"\s*(cell=\w) trial", line).group(1) for line in trial_lines)
    assert named == {"cell=a": 2, "cell=b": 2}, done.stderr


# -- --version ----------------------------------------------------------------------------------

def test_version_names_aorta_and_each_collector(plugin_site, tmp_path: Path):
    plugin_site.add("good", good_collector("good"), version="2.5.1")
    done = run_aorta(["--version"], cwd=tmp_path, env={**plugin_site.env, **ONLY_TEST_PLUGINS})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"aorta-core {version('aorta-core')}"
    assert "collector good: aorta-test-good 2.5.1" in lines[1:]
    assert "Hydra" not in done.stdout
    everything = run_aorta(["--version"], cwd=tmp_path)
    assert everything.returncode == 0, everything.stderr
    for ep in entry_points(group="aorta.collectors"):
        assert f"collector {ep.name}: {ep.dist.metadata['Name']} {ep.dist.version}" in \
            everything.stdout


# -- help everywhere (issue 41) ---------------------------------------------------------------

#: (command line, how its page starts, what it says): every tool, its sub-commands, ``aorta
#: sweep``'s verbs, and ``aorta help [<command>]`` for ``aorta [<command>] --help``.
HELP_PAGES = [
    *[([tool, "--help"], f"usage: aorta {tool} ", None) for tool in SUBCOMMANDS],
    (["help", "plugins"], "usage: aorta plugins ", "list installed collectors"),
    (["report", "overlap", "--help"], "usage: aorta report overlap ", "overlap report over"),
    (["help", "report", "sweep"], "usage: aorta report sweep ", "(re)write a sweep's report"),
    (["sweep", "--help"], "usage: aorta sweep ", "list-mitigations"),
    (["sweep", "-h"], "usage: aorta sweep ", "list-mitigations"),
    (["help", "sweep"], "usage: aorta sweep ", "list-mitigations"),
    (["sweep", "list-mitigations", "--help"], "usage: aorta sweep list-mitigations ",
     "the names a recipe's mitigation_axis"),
    (["sweep", "run", "--help"], "usage: aorta sweep run ", "run an upstream ROCm/aorta probe"),
    (["help", "sweep", "run"], "usage: aorta sweep run ", "--recipe"),
    (["help"], "aorta: run a workload", "aorta help [<command> [<sub>]]"),
]


@pytest.mark.parametrize(("args", "head", "says"), HELP_PAGES,
                         ids=[" ".join(args) for args, _, _ in HELP_PAGES])
def test_every_command_has_a_help_page(tmp_path: Path, args, head, says):
    done = run_aorta(args, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith(head), done.stdout
    assert says is None or says in done.stdout
    if head.startswith("usage: "):  # then what the command does, before its arguments
        assert not done.stdout.split("\n\n")[1].startswith(("positional", "options")), \
            done.stdout
    assert "``" not in done.stdout and "tf32_off:" not in done.stdout  # no reST, no listing
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "said"), [
    (["help", "compaer"], "aorta help compaer: no such command; did you mean aorta help compare?"),
    (["help", "nosuch"], "aorta help nosuch: no such command (commands: agree, compare, "),
    (["compaer", "runs/a", "runs/b"], "'compaer' is not a command of aorta; did you mean aorta "
                                      "compare?"),
])
def test_a_misspelt_command_is_named_with_the_one_meant(tmp_path: Path, args, said):
    done = run_aorta(args, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    [line] = done.stderr.splitlines()
    assert line.startswith(f"aorta: error: {said}"), line


def test_aorta_help_is_the_help_page(tmp_path: Path):
    asked = run_aorta(["help"], cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout == run_aorta(["--help"], cwd=tmp_path).stdout


@pytest.mark.parametrize("args", [["plugins", "--json"], ["plugins"], ["--version"], ["--help"],
                                  ["sweep", "list-mitigations"]])
def test_a_reader_that_stops_early_gets_no_traceback(args):
    """``aorta plugins | head``: the pipe closes before aorta writes; exit 141, as for SIGPIPE."""
    command = shlex.join([sys.executable, "-m", "aorta_core", *args])
    done = subprocess.run(["bash", "-c", f"{command} | true; exit ${{PIPESTATUS[0]}}"],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (141, "")
