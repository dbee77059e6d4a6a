"""``raw.csv`` -> ``ncu_*`` metrics: every fixture re-derived independently, and the format's edges.

The expected values are computed here with the csv module from the file itself (header row,
units row, one row per launch), never copied from the parser's output.
"""

from __future__ import annotations

import csv
import re
import shutil
import warnings
from pathlib import Path

import pytest
from aorta_ncu import plugin
from aorta_ncu.options import NcuOptions

FIXTURES = Path(__file__).parent / "fixtures"
TIME = "gpu__time_duration.sum"
MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3,
      "nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}
#: Published key -> the ncu names that may carry it, preferred first (docs/collectors/ncu.md).
PERCENTS = {
    "sm_throughput_pct": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "dram_throughput_pct": ["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                            "dram__throughput.avg.pct_of_peak_sustained_elapsed"],
    "achieved_occupancy_pct": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "tensor_pipe_pct": ["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"],
    "l2_hit_rate_pct": ["lts__t_sector_hit_rate.pct"],
}


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def expected_metrics(path: Path) -> dict:
    """What aorta should publish for one raw page, derived with the csv module."""
    lines = list(csv.reader(path.open(newline="")))
    start = next(i for i, row in enumerate(lines) if row and row[0] == "ID")
    header, units, rows = lines[start], lines[start + 1], lines[start + 2:]
    at = {name: i for i, name in enumerate(header)}
    launches = []
    for row in rows:
        launch = {"name": row[at["Kernel Name"]],
                  "ms": _number(row[at[TIME]]) * MS[units[at[TIME]]]}
        for key, names in PERCENTS.items():
            name = next((n for n in names if n in at), None)
            if name is not None and _number(row[at[name]]) is not None:
                launch[key] = _number(row[at[name]])
        launches.append(launch)
    totals: dict[str, float] = {}
    for launch in launches:
        totals[launch["name"]] = totals.get(launch["name"], 0.0) + launch["ms"]
    ranked = sorted(totals, key=lambda n: (-totals[n], n))
    metrics = {"ncu_kernel_count": len(launches), "ncu_gpu_time_ms": sum(totals.values()),
               "ncu_top_kernel_ms": totals[ranked[0]], "ncu_top_kernels": ranked[:5]}
    for key in PERCENTS:
        for prefix, group in (("ncu_", launches),
                              ("ncu_top_kernel_", [x for x in launches if x["name"] == ranked[0]])):
            weighed = [(x[key], x["ms"]) for x in group if key in x]
            if weighed and sum(ms for _, ms in weighed) > 0:
                metrics[prefix + key] = (sum(v * ms for v, ms in weighed)
                                         / sum(ms for _, ms in weighed))
    return metrics


def parse(folder: Path) -> dict:
    return plugin.parse_metrics(folder, NcuOptions())


def folder_with(tmp_path: Path, text: str | None = None, source: Path | None = None) -> Path:
    folder = tmp_path / "ncu"
    folder.mkdir(parents=True, exist_ok=True)
    if source is not None:
        shutil.copy(source, folder / "raw.csv")
    else:
        (folder / "raw.csv").write_text(text)
    return folder


def assert_same(actual: dict, expected: dict) -> None:
    assert set(actual) == set(expected)
    for key, value in expected.items():
        if isinstance(value, float):
            assert actual[key] == pytest.approx(value, rel=1e-12), key
        else:
            assert actual[key] == value, key


@pytest.mark.parametrize("raw", sorted(FIXTURES.rglob("*.csv")), ids=lambda p: p.stem)
def test_every_fixture_is_rederived(tmp_path, raw):
    assert_same(parse(folder_with(tmp_path, source=raw)), expected_metrics(raw))


def test_base_units_round_percentages_so_auto_units_are_exported(tmp_path):
    """mm_basic.raw.csv and .raw_base.csv are two exports of one H200 report: same launches and
    times, but --print-units base keeps 2 decimals of a percentage where auto keeps 6."""
    auto = parse(folder_with(tmp_path / "a", source=FIXTURES / "h200" / "mm_basic.raw.csv"))
    base = parse(folder_with(tmp_path / "b", source=FIXTURES / "h200" / "mm_basic.raw_base.csv"))
    assert set(auto) == set(base) and auto["ncu_top_kernels"] == base["ncu_top_kernels"]
    assert auto["ncu_gpu_time_ms"] == pytest.approx(base["ncu_gpu_time_ms"], rel=1e-12)
    for key in (k for k in auto if k.endswith("_pct")):
        assert auto[key] == pytest.approx(base[key], abs=0.005), key
    assert auto["ncu_top_kernel_achieved_occupancy_pct"] != base[
        "ncu_top_kernel_achieved_occupancy_pct"]


NO_KERNELS = ("ncu: no kernels were profiled: the command launched no CUDA kernel in a profiled "
              "process, or kernel_regex, launch_skip, launch_count or target_processes left none")


@pytest.mark.parametrize(("console", "reasons"), [
    ("mm_basic", []), ("mm_app", []), ("sm_basic", []), ("fail_exit3", []),
    ("no_kernels", [NO_KERNELS]),
    ("bad_set", [NO_KERNELS, "ncu: No metrics to collect found in sections."]),
    ("range_mode", ["ncu: no ranges were profiled: replay_mode=range profiles only ranges the "
                    "command opens (cudaProfilerStart/Stop, or NVTX with --nvtx); use "
                    "replay_mode=kernel or application otherwise"]),
    ("missing_prog", ["ncu: '/nonexistent/program' does not exist or is not an executable. Please "
                      "make sure to specify the absolute path to '/nonexistent/program' if the "
                      "executable is not in the local directory."]),
])
def test_reasons_from_real_ncu_console_output(tmp_path, console, reasons):
    folder = tmp_path / "ncu"
    folder.mkdir()
    shutil.copy(FIXTURES / "h200" / f"{console}.console", folder / "console.txt")
    shutil.copy(FIXTURES / "h200" / "sm_basic.raw.csv", folder / "raw.csv")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = parse(folder)
    assert [str(w.message) for w in caught] == reasons
    assert metrics["ncu_kernel_count"] == 4


BASE = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        '"Block Size","Grid Size","Device","CC"')
FIXED = '"1234","python3.12","h200","{name}","1","7","(128, 1, 1)","(264, 1, 1)","0","9.0"'


def page(metrics: list[str], units: list[str], rows: list[tuple[str, list[str]]]) -> str:
    lines = [BASE + "".join(f',"{m}"' for m in metrics),
             ",".join(['""'] * 11 + [f'"{u}"' for u in units])]
    for index, (name, values) in enumerate(rows):
        lines.append(f'"{index}",' + FIXED.format(name=name) + "".join(f',"{v}"' for v in values))
    return "\n".join(lines) + "\n"


SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"


def test_auto_units_thousands_separators_and_na_values(tmp_path):
    text = page([TIME, SM], ["usecond", "%"], [
        ("gemm", ["1,234.50", "80.00"]), ("softmax", ["12.50", "n/a"]),
        ("gemm", ["765.50", "60.00"]), ("copy", ["2.00", "10.00"]),
    ])
    folder = folder_with(tmp_path, "==PROF== Connected to process 1234\n" + text)
    metrics = parse(folder)
    assert_same(metrics, expected_metrics(folder / "raw.csv"))
    assert metrics["ncu_gpu_time_ms"] == pytest.approx(2.0145)
    assert metrics["ncu_top_kernels"] == ["gemm", "softmax", "copy"]
    assert metrics["ncu_top_kernel_sm_throughput_pct"] == pytest.approx(
        (1234.5 * 80 + 765.5 * 60) / 2000)


def test_one_launch_keeps_its_percentage_exactly(tmp_path):
    """A duration that leaves float noise in the weighted mean (the stand-in's ncu times)."""
    metrics = parse(folder_with(tmp_path, page([TIME, SM], ["msecond", "%"],
                                                [("k", ["0.000007", "42.50"])])))
    assert metrics["ncu_sm_throughput_pct"] == metrics["ncu_top_kernel_sm_throughput_pct"] == 42.5


def test_ties_rank_by_name_and_top_five_only(tmp_path):
    rows = [(f"k{i}", ["1,000"]) for i in (6, 5, 4, 3, 2, 1)]
    metrics = parse(folder_with(tmp_path, page([TIME], ["nsecond"], rows)))
    assert metrics["ncu_top_kernels"] == ["k1", "k2", "k3", "k4", "k5"]
    assert metrics["ncu_kernel_count"] == 6 and metrics["ncu_gpu_time_ms"] == pytest.approx(6e-3)


def test_older_dram_name_is_read_when_the_preferred_one_is_absent(tmp_path):
    dram = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
    metrics = parse(folder_with(tmp_path, page([TIME, dram], ["msecond", "%"],
                                                [("k", ["2", "33.3"])])))
    assert metrics["ncu_dram_throughput_pct"] == pytest.approx(33.3)


def test_a_unit_aorta_does_not_know_costs_that_quantity_only(tmp_path):
    text = page([TIME, SM], ["cycle", "ratio"], [("k", ["10", "0.5"])])
    with pytest.warns(UserWarning) as caught:
        metrics = parse(folder_with(tmp_path, text))
    assert metrics == {"ncu_kernel_count": 1}
    assert [str(w.message) for w in caught] == [
        "ncu: gpu__time_duration.sum is in 'cycle', not a unit aorta reads ('ns', 'us', 'ms', "
        "'s', 'nsecond', 'usecond', 'msecond', 'second'); its metrics are omitted",
        f"ncu: {SM} is in 'ratio', not a unit aorta reads ('%'); its metrics are omitted",
    ]


def test_no_time_column_keeps_the_count(tmp_path):
    with pytest.warns(UserWarning, match="ncu: raw.csv has no gpu__time_duration.sum column"):
        metrics = parse(folder_with(tmp_path, page([SM], ["%"], [("k", ["50"])])))
    assert metrics == {"ncu_kernel_count": 1}


def test_a_launch_without_a_duration_is_left_out_of_the_times(tmp_path):
    text = page([TIME], ["nsecond"], [("k", ["2,000,000"]), ("j", ["n/a"])])
    with pytest.warns(UserWarning, match=r"ncu: 1 launch\(es\) without a kernel name or a "
                                         "readable duration left out of the time metrics"):
        metrics = parse(folder_with(tmp_path, text))
    assert metrics["ncu_kernel_count"] == 2 and metrics["ncu_gpu_time_ms"] == 2.0


@pytest.mark.parametrize(("text", "reason"), [
    ("", 'no ncu raw-page header (a line starting with "ID",)'),
    ('"ID","Kernel Name"\n"0","k"\n', "no units row under the header"),
    ('"ID","Name"\n"",""\n', 'no "Kernel Name" column: not an ncu raw page'),
])
def test_unreadable_files_cost_the_metrics_with_the_reason(tmp_path, text, reason):
    with pytest.warns(UserWarning, match="ncu: cannot read .*raw.csv: " + re.escape(reason)):
        assert parse(folder_with(tmp_path, text)) == {}


def test_header_and_units_only(tmp_path):
    with pytest.warns(UserWarning, match="lists no profiled launch"):
        assert parse(folder_with(tmp_path, page([TIME], ["nsecond"], []))) == {}


def test_console_errors_are_warned_once_each_and_exit_codes_are_not(tmp_path):
    folder = tmp_path / "ncu"
    folder.mkdir()
    (folder / "console.txt").write_text(
        "==PROF== Connected to process 1 (/usr/bin/python3)\n"
        "==ERROR== The application returned an error code (3).\n"
        "==ERROR== Failed to profile \"kernel\" in process 1\n"
        "==ERROR== Failed to profile \"kernel\" in process 1\n"
        "==WARNING== No kernels were profiled.\n")
    with pytest.warns(UserWarning) as caught:
        assert parse(folder) == {}
    assert [str(w.message) for w in caught] == [
        "ncu: no kernels were profiled: the command launched no CUDA kernel in a profiled "
        "process, or kernel_regex, launch_skip, launch_count or target_processes left none",
        'ncu: Failed to profile "kernel" in process 1',
    ]


def test_missing_folder_contents_say_where_to_look(tmp_path):
    with pytest.warns(UserWarning, match="ncu: no raw.csv in .*; its own lines are in the "
                                         "trial's stdout.log and stderr.log"):
        assert parse(tmp_path) == {}
