"""The parser on real rocprofv3 / rocprof output (tests/fixtures, see PROVENANCE.md)."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from aorta_rocprof import plugin

FIXTURES = Path(__file__).parent / "fixtures"
ADD = "void addition_kernel<float>(float*, float const*, float const*, int, int)"
DIV = "divide_kernel(float*, float const*, float const*, int, int)"
MUL = "multiply_kernel(float*, float const*, float const*, int, int)"
SUB = "subtract_kernel(float*, float const*, float const*, int, int)"
LAPLACE = ("void laplacian_kernel<double>(double*, double const*, int, int, int, double, double, "
           "double, double)")


def parse(folder: Path) -> tuple[dict, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = plugin.parse_metrics(artifact_dir=folder, options=None)
    return metrics, [str(w.message) for w in caught]


def copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


def test_rocm7_kernel_trace_fallback():
    # 9 dispatches; addition: 12800 + 11400 + 9840 ns, divide 11200 + 12440, ... (fixture rows)
    metrics, warned = parse(FIXTURES / "v3_7x_trace")
    assert warned == []
    assert metrics["rocprof_kernel_count"] == 9
    assert metrics["rocprof_top_kernel_ms"] == pytest.approx(0.03404)
    assert metrics["rocprof_gpu_time_ms"] == pytest.approx(0.09616)
    assert metrics["rocprof_top_kernels"] == [ADD, DIV, MUL, SUB]
    assert set(metrics) == {"rocprof_kernel_count", "rocprof_gpu_time_ms", "rocprof_top_kernel_ms",
                            "rocprof_top_kernels"}
    assert all(type(metrics[k]) is float for k in ("rocprof_gpu_time_ms", "rocprof_top_kernel_ms"))


def test_rocm63_layout_with_private_segment_columns():
    metrics, _ = parse(FIXTURES / "v3_stream_trace")
    assert metrics["rocprof_kernel_count"] == 9
    assert metrics["rocprof_gpu_time_ms"] == pytest.approx(0.09536)
    assert metrics["rocprof_top_kernels"][0] == ADD


def test_rocm61_sixteen_column_layout():
    metrics, _ = parse(FIXTURES / "v3_61_trace")
    assert metrics == {"rocprof_kernel_count": 1, "rocprof_gpu_time_ms": pytest.approx(0.06676),
                       "rocprof_top_kernel_ms": pytest.approx(0.06676),
                       "rocprof_top_kernels": ["matrixTranspose(float*, float*, int)"]}


def test_truncated_names_without_trailing_newline():
    metrics, _ = parse(FIXTURES / "v3_truncated_names")
    assert metrics["rocprof_top_kernels"] == ["addition_kernel", "divide_kernel",
                                              "subtract_kernel"]
    assert metrics["rocprof_kernel_count"] == 4


def test_mi355x_stats_drop_the_wrapped_row_and_see_rccl():
    # The first row's TotalDurationNs is 18444334160200519208 (>= 2**63: an end<start wrap).
    metrics, warned = parse(FIXTURES / "v3_stats_mi355x")
    assert any("dropped 1 stats row" in w for w in warned)
    assert metrics["rocprof_top_kernels"][0] == (
        "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)")
    assert metrics["rocprof_top_kernel_ms"] == pytest.approx(553877.020838)
    assert metrics["rocprof_rccl_kernel_ms"] == pytest.approx(553877.020838)
    assert metrics["rocprof_gpu_time_ms"] == pytest.approx(1353926.614044)
    assert metrics["rocprof_kernel_count"] == 3902053
    assert len(metrics["rocprof_top_kernels"]) == 5


def test_legacy_stats_names_lose_kd_suffix():
    metrics, _ = parse(FIXTURES / "legacy_stats")
    assert metrics["rocprof_kernel_count"] == 1004
    assert metrics["rocprof_top_kernels"][0] == LAPLACE
    assert metrics["rocprof_top_kernels"][-1] == "__amd_rocclr_fillBufferAligned"
    assert metrics["rocprof_gpu_time_ms"] == pytest.approx(2610.787312)


def test_legacy_results_csv_uses_begin_end():
    metrics, _ = parse(FIXTURES / "legacy_trace")
    assert metrics["rocprof_kernel_count"] == 6
    # laplacian rows: 2610567 + 2608008 + 2604808 ns (EndNs - BeginNs == DurationNs here)
    assert metrics["rocprof_top_kernel_ms"] == pytest.approx(7.823383)


def test_memory_copy_and_rccl_api_traces():
    metrics, _ = parse(FIXTURES / "v3_copy_rccl")
    assert metrics["rocprof_memcpy_count"] == 4
    assert metrics["rocprof_memcpy_ms"] == pytest.approx(0.402766)
    assert "rocprof_memcpy_bytes" not in metrics  # rocprofv3 7.x writes no size column
    assert metrics["rocprof_rccl_api_ms"] == pytest.approx(430.140109)
    assert "rocprof_gpu_time_ms" not in metrics


def test_stats_preferred_over_trace(tmp_path):
    folder = copy("v3_stats_mi355x", tmp_path)
    shutil.copy(FIXTURES / "v3_7x_trace" / "aorta_kernel_trace.csv", folder)
    metrics, _ = parse(folder)
    assert metrics["rocprof_top_kernel_ms"] == pytest.approx(553877.020838)


@pytest.mark.parametrize(
    "stats_text",
    [
        '"Name","Calls","TotalDurationNs"\n"k(int, int)",3,1.5e+03\n"k(int, int)",1,nan\n',
        '"Name","Calls","TotalDurationNs","Av',  # truncated mid-header
        '"Kernel","Count","Total"\n"k",1,5\n',  # renamed columns
        '"Name","Calls","TotalDurationNs"\n"k",1,-5\n',  # negative only
    ],
)
def test_unusable_or_partial_stats(tmp_path, stats_text):
    folder = copy("v3_7x_trace", tmp_path)
    (folder / "aorta_kernel_stats.csv").write_text(stats_text)
    metrics, _ = parse(folder)
    if stats_text.endswith("nan\n"):
        assert metrics["rocprof_top_kernels"] == ["k(int, int)"]
        assert metrics["rocprof_gpu_time_ms"] == pytest.approx(0.0015)
    else:  # no usable stats row: the trace answers
        assert metrics["rocprof_kernel_count"] == 9


def test_fractional_calls_omit_kernel_count_keep_time(tmp_path):
    (tmp_path / "x_kernel_stats.csv").write_text(
        '"Name","Calls","TotalDurationNs"\n"a",2.5,100\n"b",1,4.0e+02\n')
    metrics, warned = parse(tmp_path)
    assert "rocprof_kernel_count" not in metrics
    assert metrics["rocprof_gpu_time_ms"] == pytest.approx(0.0005)
    assert metrics["rocprof_top_kernels"] == ["b", "a"]
    assert any("rocprof_kernel_count omitted" in w for w in warned)


def test_nested_host_pid_layout_sums_processes(tmp_path):
    for pid in ("111", "222"):
        (tmp_path / "node7" / "host").mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / "v3_7x_trace" / "aorta_kernel_trace.csv",
                    tmp_path / "node7" / "host" / f"{pid}_kernel_trace.csv")
    metrics, _ = parse(tmp_path)
    assert metrics["rocprof_kernel_count"] == 18
    assert metrics["rocprof_gpu_time_ms"] == pytest.approx(2 * 0.09616)


def test_other_kinds_and_bad_spans_skipped(tmp_path):
    text = (FIXTURES / "v3_7x_trace" / "aorta_kernel_trace.csv").read_text().splitlines()
    bad_span = text[1].replace("1550151853042437", "1550151853000000")  # end before start
    other_kind = text[2].replace('"KERNEL_DISPATCH"', '"MEMORY_COPY"')
    garbage = text[3].replace("1550151853064037", "12:00")
    (tmp_path / "a_kernel_trace.csv").write_text(
        "\n".join([text[0], bad_span, other_kind, garbage, *text[4:]]) + "\n")
    metrics, warned = parse(tmp_path)
    assert metrics["rocprof_kernel_count"] == 6
    assert any("dropped 2 kernel trace row" in w for w in warned)


@pytest.mark.parametrize("content", [None, "", '"Kind","Agent_Id"\n', "\x00\xff\xfe garbage"])
def test_fail_soft_cases(tmp_path, content):
    if content is not None:
        (tmp_path / "aorta_kernel_trace.csv").write_bytes(content.encode("latin-1"))
    metrics, warned = parse(tmp_path)
    assert metrics == {}
    assert warned


def test_missing_folder_is_empty(tmp_path):
    metrics, warned = parse(tmp_path / "absent")
    assert metrics == {} and "does not exist" in warned[0]



