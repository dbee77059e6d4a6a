"""``parse_metrics`` on real Proton captures and edge cases (fuzzed input: *_fuzz.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from aorta_proton import plugin
from aorta_proton.options import ProtonOptions

FIXTURES = Path(__file__).parent / "fixtures"


def parse(folder: Path) -> dict:
    return plugin.parse_metrics(artifact_dir=folder, options=ProtonOptions())


def folder_with(tmp_path: Path, *names: str) -> Path:
    out = tmp_path / "proton"
    out.mkdir(exist_ok=True)
    for i, name in enumerate(names):
        shutil.copy(FIXTURES / name, out / f"{i}_{name}")
    return out


def kernel_leaves(name: str) -> list[dict]:
    """Kernel frames of a fixture, read independently of the parser (any frame with time)."""
    found, stack = [], list(json.loads((FIXTURES / name).read_text())[0]["children"])
    while stack:
        node = stack.pop()
        if "time (ns)" in node["metrics"]:
            found.append(node)
        stack.extend(node["children"])
    return found


def test_cupti_tree_from_an_h100(tmp_path):
    leaves = kernel_leaves("tritonbench_softmax_h100.hatchet")
    metrics = parse(folder_with(tmp_path, "tritonbench_softmax_h100.hatchet"))
    assert metrics["proton_kernel_count"] == 18 == sum(n["metrics"]["count"] for n in leaves)
    assert metrics["proton_gpu_time_ms"] == pytest.approx(0.091711)
    per_name: dict[str, int] = {}
    for node in leaves:
        per_name[node["frame"]["name"]] = (
            per_name.get(node["frame"]["name"], 0) + (node["metrics"]["time (ns)"])
        )
    ranked = sorted(per_name, key=per_name.get, reverse=True)
    assert metrics["proton_top_kernels"] == ranked[:5]
    assert metrics["proton_top_kernel_ms"] == pytest.approx(per_name[ranked[0]] / 1e6)
    assert "CUDAFunctor_add" in ranked[0]
    assert all(
        isinstance(metrics[k], int | float) for k in ("proton_gpu_time_ms", "proton_top_kernel_ms")
    )


def test_roctracer_tree_from_an_mi300(tmp_path):
    metrics = parse(folder_with(tmp_path, "roctracer_add_mi300.hatchet"))
    assert metrics == {
        "proton_kernel_count": 1,
        "proton_gpu_time_ms": pytest.approx(0.003925),
        "proton_top_kernel_ms": pytest.approx(0.003925),
        "proton_top_kernels": ["add_kernel"],
    }


def test_files_are_summed(tmp_path):
    metrics = parse(
        folder_with(tmp_path, "roctracer_add_mi300.hatchet", "tritonbench_softmax_h100.hatchet")
    )
    assert metrics["proton_kernel_count"] == 19
    assert metrics["proton_gpu_time_ms"] == pytest.approx(0.091711 + 0.003925)


def test_root_only_tree_is_no_gpu_work_seen(tmp_path):
    with pytest.warns(UserWarning, match="no GPU work seen"):
        assert parse(folder_with(tmp_path, "root_only.hatchet")) == {}


def test_instrumentation_scopes_become_metrics(tmp_path):
    metrics = parse(folder_with(tmp_path, "instrumentation_mi355x_excerpt.hatchet"))
    assert "proton_gpu_time_ms" not in metrics  # the kernel frame carries no time
    assert metrics["proton_scope_cycles"] == 152040 + 8463028
    assert metrics["proton_top_scope"] == "expensive"
    assert metrics["proton_top_scopes"] == ["expensive", "cheap"]
    assert metrics["proton_top_scope_cycles"] == 8463028
    assert metrics["proton_top_scope_normalized_cycles"] == pytest.approx(33058.7)
    assert metrics["proton_scope_expensive_share"] == pytest.approx(8463028 / 8615068)
    assert metrics["proton_scope_cheap_share"] == pytest.approx(152040 / 8615068)


def tree(*children: dict, root_metrics: dict | None = None) -> list:
    root = {
        "frame": {"name": "ROOT", "type": "function"},
        "metrics": root_metrics or {},
        "children": list(children),
    }
    return [root, {}]


def frame(name: str, metrics: dict, *children: dict) -> dict:
    return {
        "frame": {"name": name, "type": "function"},
        "metrics": metrics,
        "children": list(children),
    }


def write(tmp_path: Path, data, name: str = "proton.hatchet") -> Path:
    out = tmp_path / "p"
    out.mkdir(exist_ok=True)
    (out / name).write_text(json.dumps(data) if not isinstance(data, str) else data)
    return out


@pytest.mark.parametrize(
    ("key", "value", "ms"),
    [
        ("time (ns)", 2e6, 2.0),
        ("time (us)", 2e3, 2.0),
        ("Time (ms)", 2, 2.0),
        ("time (s)", 0.002, 2.0),
    ],
)
def test_time_units(tmp_path, key, value, ms):
    metrics = parse(write(tmp_path, tree(frame("k", {key: value, "count": 2}))))
    assert metrics["proton_gpu_time_ms"] == pytest.approx(ms)
    assert metrics["proton_kernel_count"] == 2


def test_root_placeholders_metadata_frames_and_cpu_time_are_ignored(tmp_path):
    data = tree(
        frame("scope", {"cpu_time (ns)": 99}, frame("k", {"time (ns)": 1000, "count": 1})),
        frame("__proton_launch_metadata", {}, frame("meta_k", {"time (ns)": 5e9, "count": 1})),
        root_metrics={"time (ns)": 7e9, "count": 9},
    )
    metrics = parse(write(tmp_path, data))
    assert metrics["proton_top_kernels"] == ["k"]
    assert metrics["proton_gpu_time_ms"] == pytest.approx(0.001)
    assert metrics["proton_kernel_count"] == 1


@pytest.mark.parametrize("count", [None, "3", -1, 1.5, True])
def test_unreadable_count_omits_kernel_count_only(tmp_path, count):
    metrics_in = {"time (ns)": 1000} if count is None else {"time (ns)": 1000, "count": count}
    data = tree(frame("k", metrics_in), frame("j", {"time (ns)": 10, "count": 1}))
    with pytest.warns(UserWarning, match="kernel_count omitted"):
        metrics = parse(write(tmp_path, data))
    assert "proton_kernel_count" not in metrics
    assert metrics["proton_gpu_time_ms"] == pytest.approx(0.00101)


def test_top_kernels_cap_and_repeated_names_summed(tmp_path):
    leaves = [frame(f"k{i}", {"time (ns)": 100 * i, "count": 1}) for i in range(1, 8)]
    data = tree(
        frame("a", {}, *leaves), frame("b", {}, frame("k1", {"time (ns)": 1000, "count": 1}))
    )
    metrics = parse(write(tmp_path, data))
    assert metrics["proton_top_kernels"] == ["k1", "k7", "k6", "k5", "k4"]
    assert metrics["proton_top_kernel_ms"] == pytest.approx(0.0011)
    assert metrics["proton_kernel_count"] == 8


def test_overflowing_times_cost_the_kernel_metrics(tmp_path):
    data = tree(frame("a", {"time (ns)": 1e308, "count": 1}), frame("b", {"time (ns)": 1e308}))
    with pytest.warns(UserWarning, match="overflow"):
        assert "proton_gpu_time_ms" not in parse(write(tmp_path, data))


def test_pc_sampling_frames_publish_sample_counts(tmp_path):
    data = tree(
        frame(
            "k",
            {"time (ns)": 10, "count": 1},
            frame("k.py:12@k", {"num_samples": 40, "num_stalled_samples": 30}),
            frame("k.py:13@k", {"num_samples": 2, "num_stalled_samples": 0}),
        )
    )
    metrics = parse(write(tmp_path, data))
    assert metrics["proton_pc_samples"] == 42
    assert metrics["proton_pc_stalled_samples"] == 30


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "cannot read"),
        ('{"frame": {}}', "not a Proton tree"),
        ("[]", "not a Proton tree"),
        ("", "cannot read"),
    ],
)
def test_malformed_files_warn_and_yield_nothing(tmp_path, content, match):
    with pytest.warns(UserWarning, match=match):
        assert parse(write(tmp_path, content)) == {}


def test_missing_folder_or_empty_folder(tmp_path):
    assert parse(tmp_path / "absent") == {}
    assert parse(tmp_path) == {}


def test_bad_file_does_not_hide_a_good_one(tmp_path):
    out = folder_with(tmp_path, "roctracer_add_mi300.hatchet")
    (out / "broken.hatchet").write_text("[{")
    with pytest.warns(UserWarning, match="cannot read broken.hatchet"):
        assert parse(out)["proton_top_kernels"] == ["add_kernel"]


def kernel_event(name: str, dur: float, **extra) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": 0.0, "dur": dur, "tid": 7, **extra}


def test_trace_kernel_events_become_kernel_metrics(tmp_path):
    trace = {
        "displayTimeUnit": "us",
        "traceEvents": [
            kernel_event("add_kernel", 2.5, args={"call_stack": ["ROOT", "add_kernel"]}),
            kernel_event("add_kernel", 1.5),
            kernel_event("mul_kernel", 1.0),
            {"ph": "X", "cat": "scope", "name": "outer", "ts": 0, "dur": 100},
            {"ph": "M", "name": "process_name", "args": {"name": "Trace"}},
            {
                "ph": "X",
                "cat": "add_kernel",
                "name": "load",
                "pid": "add_kernel Core0 CTA0",
                "tid": "warp 0 (line 0)",
                "ts": 0,
                "dur": 50,
            },
        ],
    }
    metrics = parse(write(tmp_path, trace, "proton.chrome_trace"))
    assert metrics == {
        "proton_kernel_count": 3,
        "proton_gpu_time_ms": pytest.approx(0.005),
        "proton_top_kernel_ms": pytest.approx(0.004),
        "proton_top_kernels": ["add_kernel", "mul_kernel"],
    }


def test_trace_without_events_list_warns(tmp_path):
    with pytest.warns(UserWarning, match="no traceEvents list"):
        assert parse(write(tmp_path, {"traceEvents": 3}, "proton.chrome_trace")) == {}


def test_msgpack_profiles_are_named_not_parsed(tmp_path):
    out = write(tmp_path, b"\x91".decode("latin-1"), "proton.hatchet_msgpack")
    with pytest.warns(UserWarning, match="msgpack, which aorta does not read"):
        assert parse(out) == {}
