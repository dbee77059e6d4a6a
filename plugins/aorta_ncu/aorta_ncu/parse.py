"""Turn an ncu artifact folder (``raw.csv``, ``console.txt``) into ``ncu_*`` metrics, fail-soft.

Hardware percentages are averaged over launches weighted by each launch's duration, so a long
GEMM counts for more than a short copy: the number is what the GPU did while ncu timed kernels.
Every problem costs metrics and raises a warning, never an exception. Both files are read
through aorta's bounded reader, inside the artifact folder: a FIFO, a device, a link out of the
folder or a file over ``read_limit_mb`` is named in a warning and never read.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import polars as pl

from aorta_core.api import FileRefused, KernelRow, read_limited
from aorta_ncu.collect import CONSOLE, RAW
from aorta_ncu.counters import HARDWARE
from aorta_ncu.host import PERMISSION_FIX
from aorta_ncu.raw import read_launches

TOP_N = 5
#: ncu's ``==ERROR==`` lines that only repeat what the trial record already says.
NOT_A_REASON = ("The application returned an error code",)
#: ncu's ``==WARNING==`` lines that explain missing data, passed on verbatim.
FORWARDED_WARNINGS = ("No metrics to collect found in sections",)


def console_reasons(console: Path) -> bool:
    """Warn with each reason ncu gave for profiling nothing or failing; ``True`` if it gave one."""
    try:
        lines = read_limited(console, console.parent).decode("utf-8-sig", "replace").splitlines()
    except FileNotFoundError:
        return False
    except OSError as exc:
        warnings.warn(f"ncu: {_reason(exc)}; ncu's reasons in it are not read", stacklevel=2)
        return False
    reasons = []
    if any("ERR_NVGPUCTRPERM" in line for line in lines):
        reasons.append("ncu: ERR_NVGPUCTRPERM, no permission to read the GPU performance "
                       f"counters; {PERMISSION_FIX}")
    if any("No kernels were profiled" in line for line in lines):
        reasons.append("ncu: no kernels were profiled: the command launched no CUDA kernel in a "
                       "profiled process, or kernel_regex, launch_skip, launch_count or "
                       "target_processes left none")
    if any("No ranges were profiled" in line for line in lines):
        reasons.append("ncu: no ranges were profiled: replay_mode=range profiles only ranges the "
                       "command opens (cudaProfilerStart/Stop, or NVTX with --nvtx); use "
                       "replay_mode=kernel or application otherwise")
    reasons += [f"ncu: {line.removeprefix('==WARNING== ')}" for line in lines
                if any(text in line for text in FORWARDED_WARNINGS)]
    reasons += [f"ncu: {line.removeprefix('==ERROR== ')}" for line in lines
                if line.startswith("==ERROR== ") and "ERR_NVGPUCTRPERM" not in line
                and not any(text in line for text in NOT_A_REASON)]
    for reason in dict.fromkeys(reasons):
        warnings.warn(reason, stacklevel=3)
    return bool(reasons)


def _weighted(frame: pl.DataFrame, key: str) -> float | None:
    """Duration-weighted mean of ``key`` over the launches that report it, to 14 significant
    digits: the division leaves float noise (one launch of 42.5 % weighing 7e-06 ms came out
    42.50000000000001), and ncu prints percentages to 2 decimals."""
    rows = frame.filter(pl.col(key).is_not_null())
    weight = rows["time_ms"].sum()
    if rows.height == 0 or not weight > 0:
        return None
    return float(f"{(rows[key] * rows['time_ms']).sum() / weight:.14g}")


def launch_metrics(launches: pl.DataFrame) -> dict[str, Any]:
    """Kernel count, GPU time, hottest kernels and the weighted hardware percentages."""
    metrics: dict[str, Any] = {"ncu_kernel_count": launches.height}
    if "time_ms" not in launches.columns:
        return metrics
    timed = launches.filter(pl.col("time_ms").is_not_null() & pl.col("name").is_not_null())
    if timed.height < launches.height:
        warnings.warn(f"ncu: {launches.height - timed.height} launch(es) without a kernel name "
                      "or a readable duration left out of the time metrics", stacklevel=2)
    if timed.height == 0:
        return metrics
    per_kernel = (timed.group_by("name").agg(pl.col("time_ms").sum())
                  .sort(["time_ms", "name"], descending=[True, False]))
    top = per_kernel["name"][0]
    metrics |= {
        "ncu_gpu_time_ms": float(timed["time_ms"].sum()),
        "ncu_top_kernel_ms": float(per_kernel["time_ms"][0]),
        "ncu_top_kernels": per_kernel["name"].head(TOP_N).to_list(),
    }
    top_launches = timed.filter(pl.col("name") == top)
    for key in HARDWARE:
        if key not in timed.columns:
            continue
        for prefix, frame in (("ncu_", timed), ("ncu_top_kernel_", top_launches)):
            value = _weighted(frame, key)
            if value is not None:
                metrics[f"{prefix}{key}"] = value
    return metrics


def _reason(exc: BaseException) -> str:
    """The first line of ``exc`` (its type when it has no message)."""
    text = f"{exc}"
    return text.splitlines()[0] if text.strip() else type(exc).__name__


def parse_metrics(artifact_dir: Path) -> dict[str, Any]:
    """All ``ncu_*`` metrics the folder supports (``ncu_artifact_dir`` comes from the core)."""
    root = Path(artifact_dir)
    explained = console_reasons(root / CONSOLE)
    raw = root / RAW
    try:
        launches = read_launches(raw, root)
    except FileNotFoundError:
        if not explained:
            warnings.warn(f"ncu: no {RAW} in {root} (ncu wrote no report; its own lines are in "
                          "the trial's stdout.log and stderr.log)", stacklevel=2)
        return {}
    except FileRefused as exc:
        warnings.warn(f"ncu: {_reason(exc)}; its metrics are omitted", stacklevel=2)
        return {}
    except (Exception, pl.exceptions.PanicException) as exc:
        warnings.warn(f"ncu: cannot read {raw}: {_reason(exc)}", stacklevel=2)
        return {}
    if launches.height == 0:
        warnings.warn(f"ncu: {raw} lists no profiled launch", stacklevel=2)
        return {}
    return launch_metrics(launches)


def kernel_rows(artifact_dir: Path) -> list[KernelRow]:
    """One row per kernel (launches and summed duration; ncu has no steps), from the launches
    ``parse_metrics`` reads; ``[]`` where it found none (it said why)."""
    root = Path(artifact_dir)
    try:
        launches = read_launches(root / RAW, root)
    except (Exception, pl.exceptions.PanicException):
        return []
    if launches.height == 0 or "time_ms" not in launches.columns:
        return []
    timed = launches.filter(pl.col("time_ms").is_not_null() & pl.col("name").is_not_null())
    per_kernel = timed.group_by("name").agg(pl.len().alias("calls"), pl.col("time_ms").sum())
    return [KernelRow(name, int(calls), float(ms), "gpu_kernel")
            for name, calls, ms in per_kernel.iter_rows()]
