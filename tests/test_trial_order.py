"""``order=rounds`` through the real CLI: trial 0 of every cell, then trial 1, ... (so that
drift of the machine hits every cell alike), resumed like any sweep, its two cells compared as A
and B (``aorta compare run run --pair A B``); a cell refused in every round is said once;
``order`` is one value for the whole sweep."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from cli_helpers import records, run_aorta


def _logging_sides(log: Path) -> list[str]:
    return ["--", "sh", "-c", f'echo "$SIDE" >> {shlex.quote(str(log))}']


def test_rounds_run_trial_n_of_every_cell_before_trial_n_plus_1(tmp_path: Path):
    log = tmp_path / "sides.log"
    out = tmp_path / "out"
    args = ["sweep=repeat", "trials=3", "order=rounds", "+env.SIDE=a,b", f"output={out}"]
    done = run_aorta([*args, *_logging_sides(log)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert log.read_text().split() == ["a", "b", "a", "b", "a", "b"]
    for index in range(3):
        assert f"round {index + 1}/3: trial {index} of every cell" in done.stderr
    assert done.stderr.count("cell env.SIDE=a") == 1  # the cell's line once, in round 1
    assert "[HYDRA]" not in done.stderr  # its launch lines would repeat aorta's, every round
    assert sorted((r["cell"], r["trial"]) for r in records(out)) == [
        (cell, trial) for cell in ("env.SIDE=a", "env.SIDE=b") for trial in range(3)]

    compared = run_aorta(["compare", str(out), str(out), "--pair", "env.SIDE=a", "env.SIDE=b",
                          "--json"], cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    result = json.loads(compared.stdout)
    assert result["pairing"] == "Cells of one run, paired as --pair says."
    assert {r["cell"] for r in result["rows"]} == {"env.SIDE=a → env.SIDE=b"}  # nothing else

    more = run_aorta([*args[:1], "trials=4", *args[2:], *_logging_sides(log)], cwd=tmp_path)
    assert more.returncode == 0, more.stderr
    assert log.read_text().split()[6:] == ["a", "b"]  # only round 4 ran
    assert "(3/4 trials already recorded)" in more.stderr
    # rounds 2 and 3 are not launched at all (composing their jobs costs ~0.5 s a cell)
    assert "trials 1-2 of every cell are recorded already: their rounds are not run" in more.stderr
    assert "round 2/4" not in more.stderr and "round 4/4: trial 3 of every cell" in more.stderr


def test_a_rerun_launches_only_the_rounds_of_trials_some_cell_lacks(tmp_path: Path):
    """A record lost in one cell: its round runs (that cell's trial alone), the others do not;
    a failed trial under ``retry=failed`` brings its round back too."""
    log = tmp_path / "sides.log"
    out = tmp_path / "out"
    script = tmp_path / "side.sh"
    script.write_text(f'echo "$SIDE" >> {shlex.quote(str(log))}\n'
                      f'[ "$SIDE" != b ] || [ -e {shlex.quote(str(tmp_path / "fixed"))} ]\n')
    args = ["sweep=repeat", "trials=4", "order=rounds", "+env.SIDE=a,b", f"output={out}"]
    first = run_aorta([*args, "--", "sh", str(script)], cwd=tmp_path)
    assert first.returncode == 1  # b fails every trial
    (out / "cells" / "env.SIDE=a" / "trial_002" / "record.json").unlink()
    log.write_text("")
    kept = run_aorta([*args, "--", "sh", str(script)], cwd=tmp_path)
    assert log.read_text().split() == ["a"], kept.stderr  # round 3, a's trial 2 alone
    assert "trials 1,3 of every cell are recorded already: their rounds are not run" in kept.stderr
    (tmp_path / "fixed").touch()
    log.write_text("")
    again = run_aorta([*args, "retry=failed", "--", "sh", str(script)], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert log.read_text().split() == ["b"] * 4  # every round: each has a failed trial of b
    assert "their rounds are not run" not in again.stderr


def test_cells_order_runs_every_trial_of_a_cell_first(tmp_path: Path):
    log = tmp_path / "sides.log"
    done = run_aorta(["sweep=repeat", "trials=2", "+env.SIDE=a,b", f"output={tmp_path / 'o'}",
                      *_logging_sides(log)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert log.read_text().split() == ["a", "a", "b", "b"]
    assert "round 1/" not in done.stderr


def test_a_cell_refused_in_every_round_is_said_once(tmp_path: Path):
    out = tmp_path / "out"
    done = run_aorta(["sweep=repeat", "trials=2", "order=rounds", "requires_command=false,abc",
                      f"output={out}", "--", "true"], cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.count("cell requires_command=abc:") == 1, done.stderr
    assert [r["verdict"] for r in records(out)] == ["pass", "pass"]


def test_order_and_the_other_sweep_level_keys_take_one_value(tmp_path: Path):
    swept = run_aorta(["sweep=repeat", "order=cells,rounds", f"output={tmp_path / 'a'}",
                       "--", "true"], cwd=tmp_path)
    assert swept.returncode == 2
    assert "order= is the whole sweep's (it does not name a cell" in swept.stderr
    trials = run_aorta(["sweep=repeat", "order=rounds", "trials=1,2",
                        f"output={tmp_path / 'b'}", "--", "true"], cwd=tmp_path)
    assert trials.returncode == 2
    assert "trials= is the whole sweep's" in trials.stderr
    timeout = run_aorta(["sweep=repeat", "timeout=30,600", f"output={tmp_path / 'd'}", "--",
                         "true"], cwd=tmp_path)  # one cell folder would take both values
    assert timeout.returncode == 2 and "timeout= is the whole sweep's" in timeout.stderr
    wrong = run_aorta(["sweep=repeat", "order=round", f"output={tmp_path / 'c'}", "--", "true"],
                      cwd=tmp_path)
    assert wrong.returncode == 2
    assert "order" in wrong.stderr and "rounds" in wrong.stderr
    assert not any((tmp_path / name).exists() for name in "abcd")
