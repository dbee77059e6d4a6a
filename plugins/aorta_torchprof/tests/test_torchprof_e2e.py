"""End to end through the real core CLI: sweeps on CPU with collector=torchprof (the payload is
told ``--device cpu``, so a GPU host runs the same CPU sweep)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

REPO = Path(__file__).resolve().parents[3]
TRAIN = REPO / "examples" / "profiling" / "torchprof" / "train_tiny.py"
BIN = Path(sys.executable).parent


class _Lists(HTMLParser):
    """report.html's headings, and each table's body rows (cell texts) under the heading
    before it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.headings: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self._heading: str | None = None
        self._row: list[str] | None = None
        self._text: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag in ("h2", "h3"):
            self._heading = ""
        elif tag == "tbody" and self.headings:
            self.tables[self.headings[-1]] = []
        elif tag == "tr":
            self._row = []
        elif tag == "td":
            self._text = ""

    def handle_endtag(self, tag):
        if tag in ("h2", "h3") and self._heading is not None:
            self.headings.append(self._heading.strip())
            self._heading = None
        elif tag == "td" and self._row is not None and self._text is not None:
            self._row.append(self._text.strip())
            self._text = None
        elif tag == "tr" and self._row and self.headings:
            self.tables.setdefault(self.headings[-1], []).append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._heading is not None:
            self._heading += data
        if self._text is not None:
            self._text += data


#: glibc's words when the PyTorch profiler's teardown corrupts the heap: an upstream race
#: (pytorch/pytorch#64345, "a memory corruption / use after free" in pytorch/pytorch#94013) seen
#: once in a rank of the torchrun sweep below, after both ranks had written their traces.
HEAP_CORRUPTED = "malloc(): unsorted double linked list corrupted"


def _sweep(tmp_path: Path, *command: str, overrides: tuple[str, ...] = ()) -> dict:
    """The sweep's matrix; run once more (in a fresh folder) only when a rank died of the
    upstream heap corruption, so that the test still fails on any fault of aorta's."""
    done = _run_sweep(tmp_path, *command, overrides=overrides)
    logs = list(tmp_path.glob("cells/*/trial_*/stderr.log"))
    if done.returncode != 0 and any(HEAP_CORRUPTED in p.read_text(errors="replace") for p in logs):
        shutil.rmtree(tmp_path)
        done = _run_sweep(tmp_path, *command, overrides=overrides)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((tmp_path / "matrix.json").read_text())


def _run_sweep(tmp_path: Path, *command: str, overrides: tuple[str, ...] = ()
               ) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "aorta_core",
            "sweep=repeat",
            "collector=torchprof",
            "trials=1",
            f"output={tmp_path}",
            "collector.torchprof.active=2",
            *overrides,
            "--",
            *command,
        ],
        env=env,
        cwd=tmp_path.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("launcher", "ranks"),
    [([sys.executable], 1), (["torchrun", "--nproc-per-node", "2", "--standalone"], 2)],
)
def test_sweep_profiles_every_rank(tmp_path: Path, launcher: list[str], ranks: int) -> None:
    out = tmp_path / "sweep"
    matrix = _sweep(out, *launcher, str(TRAIN), "--steps", "5", "--width", "32", "--device", "cpu")
    summary = matrix["cells"][0]["metrics_summary"]
    assert summary["torchprof_rank_count"]["mean"] == ranks
    assert summary["torchprof_cpu_op_ms"]["mean"] > 0
    record = json.loads(next(out.glob("cells/*/trial_000/record.json")).read_text())
    assert record["verdict"] == "pass"
    assert "aorta_torchprof.runner" in record["argv_run"]
    traces = sorted(p.name for p in next(out.glob("cells/*/trial_000/torchprof")).glob("*.json"))
    assert traces == [f"rank{r}.step4.pt.trace.json" for r in range(ranks)]
    assert record["metrics"]["torchprof_step_on"] == "optimizer"  # the default, step_on=auto
    # The op table beside the record: every rank's CPU ops per profiled step (2 active steps)
    table = pl.read_parquet(next(out.glob("cells/*/trial_000")) / record["kernels"]["file"])
    assert record["kernels"] == {"file": "kernels.parquet", "rows": table.height}
    assert table.columns == ["collector", "name", "key", "kind", "step", "calls", "total_ms"]
    assert set(table["kind"]) == {"cpu_op"} and set(table["collector"]) == {"torchprof"}
    assert len(set(table["step"].drop_nulls())) == 2
    assert table["total_ms"].sum() == pytest.approx(summary["torchprof_cpu_op_ms"]["mean"])
    # `aorta parse OUTPUT --kernels` writes the same table again from the artifacts
    trial = next(out.glob("cells/*/trial_000"))
    (trial / "kernels.parquet").unlink()
    done = subprocess.run([sys.executable, "-m", "aorta_core", "parse", str(out), "--kernels"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{trial}: {table.height} kernel rows" in done.stdout
    again = pl.read_parquet(trial / "kernels.parquet")
    assert again.sort(["name", "step"]).equals(table.sort(["name", "step"]))
    assert json.loads((trial / "record.json").read_text())["kernels"] == record["kernels"]
    # The CPU operators reach both reports, hottest first, through the core's generic section
    # of list-valued metrics (torchprof adds no section of its own: once, not twice).
    hottest = matrix["cells"][0]["metrics_text"]["torchprof_top_cpu_ops"]
    assert hottest and any(name.startswith("aten::") for name in hottest)
    perf = (out / "perf.md").read_text()
    assert "## Top kernels and operators" in perf and "### `torchprof_top_cpu_ops`" in perf
    assert "(torchprof)" not in perf  # no collector section
    table = perf.split("### `torchprof_top_cpu_ops`")[1].split("\n\n")[1].splitlines()
    assert [row.split("|")[2].strip() for row in table[2:]] == hottest
    parser = _Lists()
    parser.feed((out / "report.html").read_text())
    assert parser.tables["torchprof top CPU ops (torchprof_top_cpu_ops)"] == [
        [str(rank), name] for rank, name in enumerate(hottest, 1)]
    assert not any("(torchprof)" in h for h in parser.headings)


def test_a_failing_payload_keeps_its_own_error_in_the_record(tmp_path: Path) -> None:
    """CPU only. A payload that exits 2 with one error line, after one optimizer step (too few
    for the schedule to record): the record's error is that status and line, not the runner's
    "wrote no trace" complaint, which stays out of stderr; the no-trace note in the record's
    warnings names the failure instead of the schedule."""
    script = tmp_path / "bad_config.py"
    line = "bad_config: steps=-1 must be positive"
    script.write_text(
        "import sys\nimport torch\n"
        "w = torch.nn.Parameter(torch.ones(4))\nopt = torch.optim.SGD([w], lr=0.1)\n"
        "w.sum().backward()\nopt.step()\n"
        f"print({line!r}, file=sys.stderr)\nsys.exit(2)\n"
    )
    out = tmp_path / "sweep"
    done = _run_sweep(out, sys.executable, str(script))
    assert done.returncode != 0, done.stderr[-3000:]  # a failed trial fails the sweep
    trial = next(out.glob("cells/*/trial_000"))
    record = json.loads((trial / "record.json").read_text())
    assert record["verdict"] == "fail"
    assert record["exit_code"] == 2
    assert record["error"] == f"exit code 2: {line}"
    stderr = (trial / "stderr.log").read_text()
    # only Kineto's own log lines (``USDT:... profiler_stop``, as the profiler stops) follow it
    assert [ln for ln in stderr.splitlines() if not ln.startswith(("USDT:", "STAGE:"))][-1] == line
    assert "wrote no trace" not in stderr
    assert record["warnings"]["torchprof"] == [
        f"torchprof: no Kineto trace (*.json, *.json.gz) in {trial / 'torchprof'}: rank 0 wrote "
        "no trace: the workload failed (exit status 2) after 1 steps with step_on=auto, "
        "following the optimizer, before the schedule reached an active step; its error is in "
        "the trial's stderr.log"]


def test_by_default_a_script_without_an_optimizer_is_measured_as_one_run(tmp_path: Path) -> None:
    """``step_on=auto``: no optimizer steps, so the whole run is one recorded window, and the
    record says which it followed (``step_on=optimizer`` records nothing here)."""
    script = tmp_path / "no_optimizer.py"
    script.write_text("import torch\nx = torch.randn(64, 64)\n"
                      "for _ in range(3):\n    x = (x @ x).tanh()\n")
    out = tmp_path / "sweep"
    _sweep(out, sys.executable, str(script))
    trial = next(out.glob("cells/*/trial_000"))
    record = json.loads((trial / "record.json").read_text())
    assert record["verdict"] == "pass" and "torchprof" not in record["warnings"]
    assert record["metrics"]["torchprof_step_on"] == "run"
    assert record["metrics"]["torchprof_cpu_op_count"] > 0
    assert "aten::mm" in record["metrics"]["torchprof_top_cpu_ops"]
    assert sorted(p.name for p in (trial / "torchprof").iterdir()) == [
        "rank0.pt.trace.json", "rank0.step-on.txt"]


def _profiler_steps(trace: Path) -> list[str]:
    events = json.loads(trace.read_text())["traceEvents"]
    return sorted({e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")})


def test_by_default_a_script_with_an_optimizer_steps_as_step_on_optimizer(tmp_path: Path
                                                                           ) -> None:
    """``step_on=auto`` beside ``step_on=optimizer`` on the same script: the same trace file and
    the same recorded steps; auto's record says it followed the optimizer."""
    out = tmp_path / "sweep"
    _sweep(out, sys.executable, str(TRAIN), "--steps", "6", "--width", "32", "--device", "cpu",
           overrides=("-m", "collector.torchprof.step_on=auto,optimizer"))
    by_step_on = {}
    for path in out.glob("cells/*/trial_000/record.json"):
        record = json.loads(path.read_text())
        traces = sorted((path.parent / "torchprof").glob("*.json"))
        by_step_on[record["axes"]["collector.torchprof.step_on"]] = (
            record, [t.name for t in traces], [_profiler_steps(t) for t in traces])
    auto, optimizer = by_step_on["auto"], by_step_on["optimizer"]
    assert auto[1:] == optimizer[1:] == (["rank0.step4.pt.trace.json"],
                                         [["ProfilerStep#2", "ProfilerStep#3"]])
    assert auto[0]["metrics"]["torchprof_step_on"] == "optimizer"
    assert "torchprof_step_on" not in optimizer[0]["metrics"]  # the option says it
