"""Our overlap against HolisticTraceAnalysis itself on the same traces (skipped without HTA).

HTA truncates ``ts``/``dur`` to whole µs while loading, so the traces compared here carry
whole-µs times (as 2023-era Kineto wrote them); both sides then see identical intervals.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import pytest
from aorta_torchprof.parse import parse_dir

pytest.importorskip("hta.trace_analysis")
BENCH = Path(__file__).resolve().parents[3] / "bench" / "bench_torchprof_parse.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_torchprof_parse", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hta_pctg(folder: Path, include_last: bool) -> float:
    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.ERROR)
    analysis = TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=include_last)
    return float(analysis.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].iloc[0])


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("drop_last", [True, False])
def test_overlap_matches_hta(tmp_path: Path, seed: int, drop_last: bool) -> None:
    _bench().make_trace(tmp_path / "rank0.pt.trace.json", 3000, seed=seed, integer_us=True)
    ours = parse_dir(tmp_path, drop_last_profiler_step=drop_last)["torchprof_overlap_ratio"]
    hta = _hta_pctg(tmp_path, include_last=not drop_last)
    assert abs(round(100 * ours, 2) - hta) <= 0.01, (ours, hta)


def test_dropping_the_last_step_changes_the_window(tmp_path: Path) -> None:
    _bench().make_trace(tmp_path / "rank0.pt.trace.json", 3000, seed=2, integer_us=True)
    kept = parse_dir(tmp_path)["torchprof_kernel_count"]
    dropped = parse_dir(tmp_path, drop_last_profiler_step=True)["torchprof_kernel_count"]
    assert 0 < dropped < kept
