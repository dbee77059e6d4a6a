"""Kernel tables of the real collectors on their committed captures (plugins/*/tests/fixtures,
each PROVENANCE.md), written as ``kernels.parquet`` and paired across collectors by
``kernel_key``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import polars as pl
import pytest

from aorta_core.api.kernel_names import kernel_key
from aorta_core.engine.kernel_tables import COLUMNS, checked_rows, write_table

REPO = Path(__file__).resolve().parents[1]
PLUGINS = REPO / "plugins"


def _proton(tmp_path: Path, name: str = "env_train_step.hatchet"):
    from aorta_proton.parse import kernel_rows

    shutil.copy(PLUGINS / f"aorta_proton/tests/fixtures/h200/{name}", tmp_path)
    return kernel_rows(tmp_path)


def _torchprof():
    from aorta_torchprof.parse import kernel_rows

    return kernel_rows(PLUGINS / "aorta_torchprof/tests/fixtures/cuda_h200/torchprof")


def test_the_same_kernels_pair_across_torchprof_and_proton(tmp_path):
    """The same train_tiny.py run shape on the H200 (both fixtures' PROVENANCE.md): Proton's
    mangled names pair with Kineto's demangled ones, and its times are of the same order."""
    proton, torchprof = _proton(tmp_path), _torchprof()
    by_key = {kernel_key(r.name): r for r in proton}
    paired = {kernel_key(r.name) for r in torchprof} & by_key.keys()
    mangled = {k for k in paired if by_key[k].name.startswith("_Z")}
    assert len(paired) >= 6 and len(mangled) >= 5, paired
    assert "cutlass::kernel2<cutlass_80_simt_sgemm_256x128_8x4_nt_align1>" in mangled
    assert any(k.startswith("at::native::distribution_elementwise_grid_stride_kernel<")
               for k in mangled)
    # Collapsing template arguments and tiles pairs more, never fewer.
    loose = ({kernel_key(r.name, templates=False, tiles=False) for r in torchprof}
             & {kernel_key(r.name, templates=False, tiles=False) for r in proton})
    assert len(loose) >= len({k.split("<")[0] for k in paired})


def test_collapsing_templates_and_tiles():
    xmma = "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_kernel"
    assert kernel_key(xmma) == xmma
    assert kernel_key(xmma, tiles=False) == "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize*_" \
                                            "warpgroupsize*_kernel"
    a = "_ZN7cutlass7Kernel2I42cutlass_80_simt_sgemm_128x64_8x5_tn_align1EEvNT_6ParamsE"
    b = "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_tn_align1>(Params)"
    assert kernel_key(a) != kernel_key(b)
    assert kernel_key(a, tiles=False) == kernel_key(b, tiles=False)
    assert kernel_key(a, templates=False) == "cutlass::kernel2<>"


NCCL = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"


@pytest.mark.parametrize(("folder", "hottest"), [("v3_stats_mi355x", NCCL), ("legacy_trace", None)])
def test_rocprof_rows_are_its_totals(folder, hottest):
    from aorta_rocprof.parse import kernel_rows, kernel_totals

    root = PLUGINS / f"aorta_rocprof/tests/fixtures/{folder}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows, totals = kernel_rows(root), kernel_totals(root)
    assert {r.name: (r.calls, r.total_ms) for r in rows} == {
        n: (totals.calls[n], ns / 1e6) for n, ns in totals.ns.items()}
    assert all(r.step is None and r.kind == "gpu_kernel" for r in rows)
    if hottest:
        assert max(rows, key=lambda r: r.total_ms).name == hottest


def test_ncu_rows_count_launches(tmp_path):
    from aorta_ncu.collect import RAW
    from aorta_ncu.parse import kernel_rows, parse_metrics

    shutil.copy(PLUGINS / "aorta_ncu/tests/fixtures/h200/mm_basic.raw.csv", tmp_path / RAW)
    rows, metrics = kernel_rows(tmp_path), parse_metrics(tmp_path)
    assert sum(r.calls for r in rows) == metrics["ncu_kernel_count"]
    assert sum(r.total_ms for r in rows) == pytest.approx(metrics["ncu_gpu_time_ms"])
    assert max(rows, key=lambda r: r.total_ms).name == metrics["ncu_top_kernels"][0]


def test_only_a_cpp_signature_loses_its_arguments_and_return_type():
    """Names of other shapes stay whole: a Python profiler's functions of two files, Kineto's
    copies of two kinds, an op around another op never merge into one key."""
    assert kernel_key("void f<int>(int, float*)") == "f<int>"
    assert kernel_key("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") \
        == "nccldevkernel_allreduce_sum_f32_ring_ll"
    keys = [kernel_key(n) for n in (
        "__init__ (a.py:1)", "__init__ (b.py:1)", "work.py:9 <genexpr>", "<genexpr>",
        "Memcpy HtoD (Device -> Pinned)", "Memcpy HtoD (Device -> Pageable)",
        "autograd::engine::evaluate_function: MmBackward0", "MmBackward0")]
    assert len(set(keys)) == len(keys), keys


def test_tables_of_two_collectors_in_one_file(tmp_path):
    rows = checked_rows("proton", _proton(tmp_path)) + checked_rows("torchprof", _torchprof())
    write_table(tmp_path / "kernels.parquet", rows)
    table = pl.read_parquet(tmp_path / "kernels.parquet")
    assert tuple(table.columns) == COLUMNS and table.height == len(rows)
    assert not any(n.startswith("_Z") for n in table["name"])  # demangled as Kineto shows them
    steps = table.filter(pl.col("collector") == "torchprof")["step"]
    assert set(steps) == {2, 3, 4}
    assert table.filter(pl.col("collector") == "proton")["step"].null_count() == \
        table.filter(pl.col("collector") == "proton").height


def test_without_a_cpp_runtime_names_stay_mangled_with_one_warning():
    """Where ctypes finds neither libstdc++ nor libc++ (a bare container), cxxfilt cannot
    demangle: the name is kept as is, and the warning says what to install."""
    code = (
        "import ctypes.util, warnings\n"
        "ctypes.util.find_library = lambda name: None\n"
        "from aorta_core.api.kernel_names import demangle, kernel_key\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    name = '_ZN7cutlass7Kernel2I3cfgEEvNT_6ParamsE'\n"
        "    assert demangle(name) == name and demangle(name) == name\n"
        "    assert kernel_key(name) == name.lower()\n"
        "print(len(caught), caught[0].message)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    count, message = done.stdout.split(" ", 1)
    assert count == "1" and "kernel names stay mangled" in message and "libstdc++" in message
