"""``parse_metrics`` on the profiles the GPU proof captured on an NVIDIA H200 (Triton 3.6).

Each ``fixtures/h200/<case>.<ext>`` sits next to ``<case>.record.json``, the record aorta wrote
for that trial on the H200. Expected values are computed here from the fixture JSON with a walker
of the test's own, and checked against what the core recorded on the GPU host.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from aorta_proton import plugin
from aorta_proton.options import ProtonOptions

H200 = Path(__file__).parent / "fixtures" / "h200"
RECORDED = sorted(p.name.removesuffix(".record.json") for p in H200.glob("*.record.json"))
KERNEL_TREES = [
    "cupti_vecadd.hatchet",
    "pcsampling_vecadd.hatchet",
    "env_train_step.hatchet",
    "python_context_vecadd.hatchet",
    "system_exit.hatchet",
    "pytest_failing.hatchet",
    "native_cli_pytest_failing.hatchet",
]


def profile(case: str) -> Path:
    (path,) = [p for p in H200.glob(f"{case}.*") if not p.name.endswith(".record.json")]
    return path


def parse_file(tmp_path: Path, path: Path) -> tuple[dict, list[str]]:
    """Parsed metrics of one fixture alone in an artifact folder, and the warnings raised."""
    folder = tmp_path / "proton"
    folder.mkdir()
    shutil.copy(path, folder / path.name)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        metrics = plugin.parse_metrics(artifact_dir=folder, options=ProtonOptions())
    return metrics, [str(w.message) for w in seen]


def frames_below_root(name: str) -> list[dict]:
    """Every frame under ROOT of a fixture's tree, read without the parser."""
    found, stack = [], list(json.loads((H200 / name).read_text())[0]["children"])
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(node["children"])
    return found


def per_kernel(name: str) -> tuple[dict[str, int], dict[str, int]]:
    """Time (ns) and launch count per kernel name, summed over the frames that carry a time."""
    ns: dict[str, int] = {}
    calls: dict[str, int] = {}
    for node in frames_below_root(name):
        if "time (ns)" in node["metrics"]:
            kernel = node["frame"]["name"]
            ns[kernel] = ns.get(kernel, 0) + node["metrics"]["time (ns)"]
            calls[kernel] = calls.get(kernel, 0) + node["metrics"]["count"]
    return ns, calls


def trace_kernels(name: str) -> tuple[dict[str, float], dict[str, int]]:
    """Time (ns) and event count per kernel name of a chrome trace, read without the parser."""
    ns: dict[str, float] = {}
    calls: dict[str, int] = {}
    for event in json.loads((H200 / name).read_text())["traceEvents"]:
        if event["ph"] == "X" and event["cat"] == "kernel":
            ns[event["name"]] = ns.get(event["name"], 0.0) + event["dur"] * 1e3
            calls[event["name"]] = calls.get(event["name"], 0) + 1
    return ns, calls


def expected_kernel_metrics(ns: dict[str, float], calls: dict[str, int]) -> dict:
    ranked = sorted(ns, key=lambda kernel: (-ns[kernel], kernel))
    return {
        "proton_kernel_count": sum(calls.values()),
        "proton_gpu_time_ms": pytest.approx(sum(ns.values()) / 1e6),
        "proton_top_kernel_ms": pytest.approx(ns[ranked[0]] / 1e6),
        "proton_top_kernels": ranked[:5],
    }


@pytest.mark.parametrize("case", RECORDED)
def test_parse_matches_the_record_written_on_the_h200(tmp_path, case):
    record = json.loads((H200 / f"{case}.record.json").read_text())
    metrics, seen = parse_file(tmp_path, profile(case))
    recorded = {
        key: pytest.approx(value) if isinstance(value, float) else value
        for key, value in record["metrics"].items()
        if key != "proton_artifact_dir"
    }
    assert metrics == recorded
    assert seen == record["warnings"].get("proton", [])


@pytest.mark.parametrize("name", KERNEL_TREES)
def test_kernel_trees_sum_every_timed_frame(tmp_path, name):
    ns, calls = per_kernel(name)
    metrics, seen = parse_file(tmp_path, H200 / name)
    assert seen == []
    assert {k: metrics[k] for k in expected_kernel_metrics(ns, calls)} == expected_kernel_metrics(
        ns, calls
    )


def test_trace_kernel_events_sum_their_durations(tmp_path):
    ns, calls = trace_kernels("trace_vecadd.chrome_trace")
    metrics, seen = parse_file(tmp_path, H200 / "trace_vecadd.chrome_trace")
    assert seen == []
    assert metrics == expected_kernel_metrics(ns, calls)


def test_trace_and_tree_of_the_same_payload_agree_on_launches():
    assert trace_kernels("trace_vecadd.chrome_trace")[1] == per_kernel("cupti_vecadd.hatchet")[1]


def test_python_context_sums_one_kernel_over_its_launch_lines(tmp_path):
    ns, calls = per_kernel("python_context_vecadd.hatchet")
    frames = frames_below_root("python_context_vecadd.hatchet")
    launch_sites = [n for n in frames if "count" in n["metrics"]]
    assert len(launch_sites) > len(calls)  # some kernel is launched from more than one line
    assert calls == per_kernel("cupti_vecadd.hatchet")[1]  # same payload, shadow context
    metrics, _ = parse_file(tmp_path, H200 / "python_context_vecadd.hatchet")
    assert metrics["proton_kernel_count"] == sum(calls.values())
    assert metrics["proton_gpu_time_ms"] == pytest.approx(sum(ns.values()) / 1e6)


def test_pc_sampling_counts_samples_on_kernels_and_on_source_lines(tmp_path):
    frames = frames_below_root("pcsampling_vecadd.hatchet")
    sampled = [n for n in frames if "num_samples" in n["metrics"]]
    line_frames = [n for n in sampled if "@" in n["frame"]["name"]]
    assert line_frames and all("time (ns)" not in n["metrics"] for n in line_frames)
    samples = sum(n["metrics"]["num_samples"] for n in sampled)
    stalled = sum(n["metrics"]["num_stalled_samples"] for n in sampled)
    metrics, _ = parse_file(tmp_path, H200 / "pcsampling_vecadd.hatchet")
    assert metrics["proton_pc_samples"] == samples
    assert metrics["proton_pc_stalled_samples"] == stalled
    assert 0 < stalled < samples
    assert isinstance(metrics["proton_pc_samples"], int)


def test_instrumentation_scopes_of_the_gluon_kernel(tmp_path):
    scopes = {
        n["frame"]["name"]: n["metrics"]
        for n in frames_below_root("instrumentation_gluon.hatchet")
        if "cycles" in n["metrics"]
    }
    assert set(scopes) == {"compute", "load"}
    total = sum(m["cycles"] for m in scopes.values())
    top = max(scopes, key=lambda name: scopes[name]["cycles"])
    metrics, seen = parse_file(tmp_path, H200 / "instrumentation_gluon.hatchet")
    assert seen == []
    assert metrics == {
        "proton_scope_cycles": total,
        "proton_top_scope": top,
        "proton_top_scope_cycles": scopes[top]["cycles"],
        "proton_top_scopes": sorted(scopes, key=lambda name: -scopes[name]["cycles"]),
        "proton_top_scope_normalized_cycles": scopes[top]["normalized_cycles"],
        "proton_scope_compute_share": pytest.approx(scopes["compute"]["cycles"] / total),
        "proton_scope_load_share": pytest.approx(scopes["load"]["cycles"] / total),
    }


def test_no_kernel_run_warns_and_publishes_nothing(tmp_path):
    assert frames_below_root("no_kernel.hatchet") == []
    metrics, seen = parse_file(tmp_path, H200 / "no_kernel.hatchet")
    assert metrics == {}
    assert len(seen) == 1 and seen[0].startswith("no GPU work seen")


def test_runner_and_proton_cli_record_the_same_failing_pytest(tmp_path):
    """Same payload under aorta's runner and under ``python -m triton.profiler.proton``."""
    ours = per_kernel("pytest_failing.hatchet")[1]
    assert ours == per_kernel("native_cli_pytest_failing.hatchet")[1]
    record = json.loads((H200 / "pytest_failing.record.json").read_text())
    assert (record["verdict"], record["exit_code"]) == ("fail", 1)
    assert parse_file(tmp_path, H200 / "pytest_failing.hatchet")[0]["proton_kernel_count"] == (
        sum(ours.values())
    )


def test_h200_profiles_in_one_folder_are_summed(tmp_path):
    names = ["cupti_vecadd.hatchet", "env_train_step.hatchet", "instrumentation_gluon.hatchet"]
    folder = tmp_path / "together"
    folder.mkdir()
    for name in names:
        shutil.copy(H200 / name, folder / name)
    metrics = plugin.parse_metrics(artifact_dir=folder, options=ProtonOptions())
    ns, calls = per_kernel("cupti_vecadd.hatchet")
    env_ns, env_calls = per_kernel("env_train_step.hatchet")
    for kernel in env_ns:
        ns[kernel] = ns.get(kernel, 0) + env_ns[kernel]
        calls[kernel] = calls.get(kernel, 0) + env_calls[kernel]
    scopes, _ = parse_file(tmp_path, H200 / "instrumentation_gluon.hatchet")
    assert metrics == {**expected_kernel_metrics(ns, calls), **scopes}
