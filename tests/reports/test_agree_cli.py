"""A real ``sweep=agree`` on this CPU through the CLI, then ``aorta agree`` on its output.

torchprof and the third-party ``rusage`` collector run beside the bare cell; the payload times
itself and writes ``gpu_time_ms`` to ``$AORTA_METRICS_PATH`` (the documented reference hook).
On a CPU no collector measures GPU time, so this checks the structure, the overhead rows, the
reference column, the report section and the command's exit statuses, not agreement itself
(tests/reports/test_agreement.py does that on chosen values).
"""

from __future__ import annotations

import html
import json
import statistics
import sys

from needs import needs
from pytest import approx
from reports.report_helpers import aorta

from aorta_core.reports import significance

REFERENCE = "workload_gpu_time_ms"
PAYLOAD = """\
import json, os, time
start = time.perf_counter()
sum(i * i for i in range(300_000))
elapsed = (time.perf_counter() - start) * 1e3
json.dump({"gpu_time_ms": elapsed}, open(os.environ["AORTA_METRICS_PATH"], "w"))
"""


def _walls(output, cell: str) -> list[float]:
    records = [json.loads(p.read_text()) for p in sorted(output.glob(f"cells/{cell}/trial_*/"
                                                                       "record.json"))]
    return [r["wall_time_s"] for r in records if r["verdict"] == "pass"]


@needs("aorta_rusage")
def test_agreement_sweep_on_cpu_and_aorta_agree(tmp_path):
    script = tmp_path / "payload.py"
    script.write_text(PAYLOAD)
    out = tmp_path / "agree"
    done = aorta("sweep=agree", "trials=2", "agree.collectors=[torchprof,rusage]",
                 f"output={out}", "--", sys.executable, str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "agreement (tolerance 10 %)" in done.stderr and f"wrote {out / 'agreement.json'}" \
        in done.stderr
    agreement = json.loads((out / "agreement.json").read_text())
    assert agreement["tolerance_pct"] == 10.0 and agreement["reference"] == {
        "metric": REFERENCE, "found": True}
    assert agreement["bare"]["trials"]["pass"] == 2
    for name in ("torchprof", "rusage"):
        collector = agreement["collectors"][name]
        assert collector["trials"] == {"pass": 2, "fail": 0, "error": 0, "total": 2}
        assert collector["skipped"] is None and collector["times_comparable"] is True
        walls, bare = _walls(out, name), _walls(out, "bare")
        overhead = agreement["overhead"][name]
        assert overhead["ratio"] == approx(statistics.median(walls) / statistics.median(bare))
        # 2 trials a side: the U test cannot reach 0.05, so no p and no claim
        assert overhead["p_value"] is None and overhead["significant"] is None
        assert overhead["verdict"].endswith(f"({significance.inconclusive(0.05)})")
    gpu = agreement["metrics"]["gpu_time_ms"]
    assert gpu["sources"]["torchprof"]["status"] == "not measured"
    assert gpu["sources"]["rusage"]["verdict"] == \
        "not measured: no passing trial reported rusage_gpu_time_ms"
    assert gpu["sources"]["reference"]["n"] == 2 and gpu["status"] == "only one source"
    own = agreement["metrics"][REFERENCE]
    assert list(own["sources"]) == ["bare", "rusage", "torchprof"]
    assert all(s["n"] == 2 for s in own["sources"].values())
    assert own["status"] in ("agree", "disagree") and own["spread_pct"] >= 0
    matrix = json.loads((out / "matrix.json").read_text())
    assert {c["cell"]: c["agree"]["collector"] for c in matrix["cells"]} == {
        "bare": None, "rusage": "rusage", "torchprof": "torchprof"}
    page = (out / "report.html").read_text()
    assert "<h2>Agreement (sweep=agree)</h2>" in page and "Wall-time overhead" in page
    assert page.index("Agreement (sweep=agree)") < page.index("<h2>Cells")

    wide = aorta("agree", str(out), "--tolerance-pct", "1000", "--no-png", cwd=tmp_path,
                 env={"COLUMNS": "200"})
    assert wide.returncode == 0, wide.stderr
    assert "agreement (tolerance 1000 %)" in wide.stdout and REFERENCE in wide.stdout
    rebuilt = json.loads((out / "agreement.json").read_text())
    assert rebuilt["tolerance_pct"] == 1000.0
    assert rebuilt["metrics"][REFERENCE]["spread_pct"] == approx(own["spread_pct"])


def test_aorta_agree_refuses_what_is_no_agreement_sweep(tmp_path):
    plain = tmp_path / "plain"
    (plain / "cells" / "default").mkdir(parents=True)
    for folder in (tmp_path / "nothing", plain):
        done = aorta("agree", str(folder), cwd=tmp_path, check=False)
        assert done.returncode == 2
        assert done.stderr.strip() == (f"aorta: error: {folder} holds no agreement sweep; make "
                                       f"one with python -m aorta_core sweep=agree "
                                       f"output={folder} -- <command>")
    bad = aorta("agree", str(plain), "--tolerance-pct", "-3", cwd=tmp_path, check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "-3" in bad.stderr
    assert not (plain / "agreement.json").exists()


def test_auto_leaves_out_what_cannot_measure_here_without_failing(tmp_path):
    """``agree.collectors=auto`` tries every installed collector: ncu and rocprof find no
    profiler binary (pointed at nothing here, so also on a GPU machine) and are left out before
    any trial; the sweep still passes and every file says why."""
    script = tmp_path / "payload.py"
    script.write_text(PAYLOAD)
    out = tmp_path / "auto"
    nothing = str(tmp_path / "no-such-profiler")
    done = aorta("sweep=agree", "trials=1", f"output={out}", "--", sys.executable, str(script),
                 cwd=tmp_path, env={"NCU_BIN": nothing, "ROCPROF_BIN": nothing})
    assert done.returncode == 0, done.stderr
    agreement = json.loads((out / "agreement.json").read_text())
    collectors = agreement["collectors"]
    assert {"ncu", "rocprof", "torchprof"} <= set(collectors)
    page = (out / "report.html").read_text()
    for name, collector in collectors.items():
        reason = collector["skipped"]
        if name in ("ncu", "rocprof"):
            assert reason and collector["trials"]["total"] == 0, collector
        if reason is None:  # it ran: every trial passed
            assert collector["trials"]["pass"] == collector["trials"]["total"] == 1, name
            continue
        assert f"left out of the agreement: {name}: " in done.stderr
        assert html.escape(reason, quote=True) in page
        assert agreement["overhead"][name]["verdict"] == "not measured: left out"
        for metric in agreement["metrics"].values():
            assert metric["sources"][name]["verdict"] == "not measured: left out"
