"""The verdicts of agreement.json on sweeps written with the real record and cell-file writers.

Each test lays out a ``sweep=agree`` folder as the sweep does (``cell.json`` with its ``agree``
marker, ``trial_NNN/record.json`` through :func:`write_record`, a left-out cell through the
sweep's own :func:`skip`) holding chosen values, and computes what it expects from those values.
Kernel names are the real H200 fixtures' (Proton's mangled, Kineto's demangled).
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from pytest import approx
from reports.report_helpers import REPO

from aorta_core.api.kernel_names import kernel_key
from aorta_core.engine.cell_state import skip
from aorta_core.engine.cells import Place
from aorta_core.engine.records import RECORD_NAME, TrialRecord, write_json_atomic, write_record
from aorta_core.reports import significance
from aorta_core.reports.agreement import (
    AGREEMENT_NAME,
    build_agreement,
    write_agreement,
)

REFERENCE = "workload_gpu_time_ms"
TORCHPROF_TOP = json.loads((REPO / "plugins/aorta_torchprof/tests/fixtures/cuda_h200/record.json")
                           .read_text())["metrics"]["torchprof_top_kernels"]
PROTON_TOP = json.loads((REPO / "plugins/aorta_proton/tests/fixtures/h200/env_train_step"
                         ".record.json").read_text())["metrics"]["proton_top_kernels"]


def _marker(collector: str | None, comparable: bool = True, tolerance: float = 2.0) -> dict:
    return {"collector": collector, "times_comparable": comparable, "tolerance_pct": tolerance,
            "reference": REFERENCE}


def _cell(output: Path, name: str, trials: list[dict], comparable: bool = True,
          tolerance: float = 2.0) -> None:
    """A cell as the sweep writes it; each trial: ``metrics``, ``wall`` and ``verdict``."""
    collector = None if name == "bare" else name
    folder = output / "cells" / name
    folder.mkdir(parents=True)
    write_json_atomic(folder / "cell.json", {"cell": name, "axes": {"collector": name},
                                             "error": None,
                                             "agree": _marker(collector, comparable, tolerance)})
    for index, trial in enumerate(trials):
        record = TrialRecord(cell=name, axes={"collector": name}, trial=index,
                             verdict=trial.get("verdict", "pass"), wall_time_s=trial["wall"],
                             metrics=trial["metrics"])
        (folder / f"trial_{index:03d}").mkdir()
        write_record(folder / f"trial_{index:03d}" / RECORD_NAME, record)


def _trials(collector: str, metric: str, values: list[float], walls: list[float] | None = None,
            **more) -> list[dict]:
    walls = walls or [1.0 + i / 100 for i in range(len(values))]
    return [{"metrics": {f"{collector}_{metric}": v, **more}, "wall": w}
            for v, w in zip(values, walls, strict=True)]


def _gap(a: float, b: float) -> float:
    return abs(a - b) * 100 / min(a, b)


def test_gpu_time_against_each_other_the_reference_and_an_incomparable_collector(tmp_path):
    torchprof, proton, ncu = [77.0, 77.1, 77.05], [74.3, 74.31, 74.35], [400.0, 410.0, 405.0]
    reference = [75.0, 75.2, 74.9]
    tolerance = 3.0  # as set in the cells: agree.tolerance_pct=3
    _cell(tmp_path, "bare", [{"metrics": {REFERENCE: v}, "wall": 1.0} for v in reference],
          tolerance=tolerance)
    _cell(tmp_path, "torchprof", _trials("torchprof", "gpu_time_ms", torchprof),
          tolerance=tolerance)
    _cell(tmp_path, "proton", _trials("proton", "gpu_time_ms", proton), tolerance=tolerance)
    _cell(tmp_path, "ncu", _trials("ncu", "gpu_time_ms", ncu), comparable=False,
          tolerance=tolerance)
    out = build_agreement(tmp_path)
    gpu = out["metrics"]["gpu_time_ms"]
    medians = {"torchprof": statistics.median(torchprof), "proton": statistics.median(proton),
               "reference": statistics.median(reference)}
    assert gpu["consensus"] == approx(statistics.median(medians.values()))
    spread = _gap(max(medians.values()), min(medians.values()))
    assert gpu["spread_pct"] == approx(spread) and spread > out["tolerance_pct"] == tolerance
    assert gpu["status"] == "disagree"
    assert gpu["verdict"].startswith("disagree: torchprof 77.05 ms vs proton 74.31 ms, ")
    assert gpu["verdict"].endswith(f"{spread:.1f} % > 3 %")
    sources = gpu["sources"]
    assert sources["reference"]["cell"] == "bare" and sources["reference"]["metric"] == REFERENCE
    for name, median in medians.items():
        s = sources[name]
        assert s["median"] == approx(median) and s["n"] == 3
        assert s["deviation_pct"] == approx((median - gpu["consensus"]) * 100 / gpu["consensus"])
        furthest = max(_gap(median, m) for o, m in medians.items() if o != name)
        assert s["status"] == ("agree" if furthest <= tolerance else "disagree")
    furthest = max(_gap(medians["reference"], m) for m in medians.values())
    assert furthest <= tolerance
    assert sources["reference"]["verdict"] == f"agree within {furthest:.1f} %"
    ncu_source = sources["ncu"]
    assert ncu_source["status"] == "not comparable" and ncu_source["median"] == approx(405.0)
    assert ncu_source["verdict"] == "not comparable: ncu changes what it times " \
                                    "(times_comparable=false)"
    assert out["collectors"]["ncu"]["times_comparable"] is False
    # The reference metric of its own: the payload's timing in each cell that reported it.
    own = out["metrics"][REFERENCE]["sources"]
    assert own["bare"]["n"] == 3 and own["torchprof"]["status"] == "not measured"
    assert out["reference"] == {"metric": REFERENCE, "found": True}


@pytest.mark.parametrize(("high", "tolerance"), [(100.0, 25.0), (100.0, 24.99), (100.01, 25.0)])
def test_the_tolerance_edge_agrees(tmp_path, high, tolerance):
    low = 80.0  # (100 - 80) / 80 = 25 % exactly
    _cell(tmp_path, "bare", [{"metrics": {}, "wall": 1.0}] * 2)
    _cell(tmp_path, "torchprof", _trials("torchprof", "gpu_time_ms", [low, low]))
    _cell(tmp_path, "proton", _trials("proton", "gpu_time_ms", [high, high]))
    gpu = build_agreement(tmp_path, tolerance_pct=tolerance)["metrics"]["gpu_time_ms"]
    spread = (high - low) * 100 / low
    expected = "agree" if spread <= tolerance else "disagree"
    assert gpu["status"] == expected
    assert {s["status"] for s in gpu["sources"].values()} == {expected}
    if expected == "disagree":
        assert gpu["verdict"].startswith(f"disagree: proton {high:.4g} ms vs torchprof 80 ms, ")
        shown = float(re.search(r", ([\d.]+) % > ", gpu["verdict"])[1])
        assert shown > tolerance and shown == approx(spread, abs=0.01)  # never reads as equal
        assert gpu["verdict"].endswith(f" % > {tolerance:g} %")


def test_missing_metrics_left_out_cells_and_failed_trials(tmp_path):
    _cell(tmp_path, "bare", [{"metrics": {}, "wall": w} for w in (1.0, 1.1, 0.9)])
    counts = [120, 120, 121]
    _cell(tmp_path, "torchprof", [
        *_trials("torchprof", "kernel_count", counts, [2.0, 2.1, 1.9]),
        {"metrics": {"torchprof_kernel_count": 999}, "wall": 9.0, "verdict": "fail"}])
    _cell(tmp_path, "ncu", _trials("ncu", "kernel_count", [118]), comparable=False)
    _cell(tmp_path, "rusage", [{"metrics": {"rusage_max_rss_bytes": 1}, "wall": 1.0}])
    reason = "proton: its first trial failed where the bare run passed: exit code 1"
    skip(Place("proton", tmp_path / "cells" / "proton", {"collector": "proton"}), reason,
         agree=_marker("proton"))
    out = write_agreement(tmp_path)
    assert out == tmp_path / AGREEMENT_NAME
    agreement = json.loads(out.read_text())
    count = agreement["metrics"]["kernel_count"]
    # ncu's times are not comparable, its kernel count is; the failed trial is not counted.
    assert count["sources"]["torchprof"]["values"] == counts
    assert count["sources"]["ncu"]["comparable"] is True
    assert count["spread_pct"] == approx(_gap(statistics.median(counts), 118))
    assert count["status"] == "agree" and count["unit"] == ""
    assert count["sources"]["rusage"]["verdict"] == \
        "not measured: no passing trial reported rusage_kernel_count"
    assert count["sources"]["proton"]["verdict"] == "not measured: left out"
    assert agreement["collectors"]["proton"]["skipped"] == reason
    assert agreement["collectors"]["torchprof"]["trials"] == {"pass": 3, "fail": 1, "error": 0,
                                                              "total": 4}
    gpu = agreement["metrics"]["gpu_time_ms"]
    assert gpu["status"] == "not measured" and gpu["consensus"] is None
    assert REFERENCE not in agreement["metrics"]
    assert agreement["reference"] == {"metric": REFERENCE, "found": False}
    overhead = agreement["overhead"]["torchprof"]
    bare, walls = [1.0, 1.1, 0.9], [2.0, 2.1, 1.9]
    assert overhead["ratio"] == approx(statistics.median(walls) / statistics.median(bare))
    # 3 trials a side: below the 4 the U test needs to reach 0.05, so no p and no claim
    assert overhead["p_value"] is None and overhead["significant"] is None
    assert (overhead["n"], overhead["n_bare"]) == (3, 3)
    assert significance.min_trials(agreement["alpha"]) == 4
    alone = agreement["overhead"]["ncu"]  # one trial: the ratio, but nothing to test
    assert alone["ratio"] == approx(1.0) and alone["p_value"] is None
    assert alone["significant"] is None
    assert significance.inconclusive(agreement["alpha"]) in alone["verdict"]
    assert agreement["overhead"]["proton"]["verdict"] == "not measured: left out"


def _demangled(name: str) -> str:
    """An independent demangler: torch's own binding of the C++ runtime's."""
    torch = pytest.importorskip("torch")
    return torch._C._demangle(name)


def test_mangled_proton_names_match_kinetos_demangled_ones():
    for proton in PROTON_TOP:
        for kineto in TORCHPROF_TOP:
            same = _demangled(proton) == kineto or proton == kineto
            assert (kernel_key(proton) == kernel_key(kineto)) is same, (proton, kineto)
    assert any(kernel_key(p) == kernel_key(k) for p in PROTON_TOP for k in TORCHPROF_TOP
               if p.startswith("_Z"))
    # Same template, other arguments: different kernels, never merged.
    cutlass = [k for k in {*PROTON_TOP, *TORCHPROF_TOP} if "cutlass" in k]
    assert len({kernel_key(k) for k in cutlass}) == len({_demangled(k) for k in cutlass})


def _shared(a: list[str], b: list[str]) -> set[str]:
    return {_demangled(x) for x in a} & {_demangled(x) for x in b}


def test_top_kernels_are_matched_and_top_kernel_ms_needs_the_same_hottest(tmp_path):
    _cell(tmp_path, "bare", [{"metrics": {}, "wall": 1.0}])
    _cell(tmp_path, "torchprof", _trials("torchprof", "top_kernel_ms", [0.22],
                                         torchprof_top_kernels=TORCHPROF_TOP))
    _cell(tmp_path, "proton", _trials("proton", "top_kernel_ms", [0.97],
                                      proton_top_kernels=PROTON_TOP))
    out = build_agreement(tmp_path)
    top = out["top_kernels"]
    shared = _shared(PROTON_TOP, TORCHPROF_TOP)
    (pair,) = top["pairs"]
    union = len(PROTON_TOP) + len(TORCHPROF_TOP) - len(shared)
    assert (pair["shared"], pair["union"]) == (len(shared), union)
    assert pair["jaccard"] == approx(len(shared) / union) and top["in_all"] == len(shared)
    both = [k for k in top["kernels"] if len(k["ranks"]) == 2]
    assert len(both) == len(shared)
    for kernel in both:
        assert _demangled(kernel["names"]["proton"]) == _demangled(kernel["names"]["torchprof"])
        assert kernel["ranks"]["torchprof"] == TORCHPROF_TOP.index(kernel["names"]["torchprof"]) + 1
    hottest_differ = _demangled(PROTON_TOP[0]) != _demangled(TORCHPROF_TOP[0])
    assert top["hottest_agrees"] is not hottest_differ
    timed = out["metrics"]["top_kernel_ms"]
    assert hottest_differ and timed["status"] == "not comparable"
    assert all(s["verdict"].startswith("not comparable: its hottest kernel ")
               for s in timed["sources"].values())


def test_top_kernel_ms_is_compared_where_the_hottest_kernel_is_the_same(tmp_path):
    common = next(iter(_shared(PROTON_TOP, TORCHPROF_TOP) - {_demangled(PROTON_TOP[0])}))
    first = [n for n in TORCHPROF_TOP if _demangled(n) == common]
    kineto = first + [n for n in TORCHPROF_TOP if n not in first]
    mangled = [n for n in PROTON_TOP if _demangled(n) == common]
    proton = mangled + [n for n in PROTON_TOP if n not in mangled]
    _cell(tmp_path, "bare", [{"metrics": {}, "wall": 1.0}])
    _cell(tmp_path, "torchprof", _trials("torchprof", "top_kernel_ms", [1.00],
                                         torchprof_top_kernels=kineto))
    _cell(tmp_path, "proton", _trials("proton", "top_kernel_ms", [1.01],
                                      proton_top_kernels=proton))
    _cell(tmp_path, "rusage", _trials("rusage", "top_kernel_ms", [3.0],
                                      rusage_top_kernels=PROTON_TOP))
    out = build_agreement(tmp_path)
    timed = out["metrics"]["top_kernel_ms"]
    assert out["top_kernels"]["hottest_agrees"] is False
    assert timed["sources"]["rusage"]["status"] == "not comparable"  # it timed another kernel
    assert timed["status"] == "agree" and timed["spread_pct"] == approx(_gap(1.0, 1.01))


def test_no_agreement_sweep_writes_nothing(tmp_path):
    (tmp_path / "cells" / "plain").mkdir(parents=True)
    write_json_atomic(tmp_path / "cells" / "plain" / "cell.json", {"cell": "plain"})
    assert build_agreement(tmp_path) is None and write_agreement(tmp_path) is None
    assert not (tmp_path / AGREEMENT_NAME).exists()
