"""GPU state per iteration window: clocks, power, temperature, memory, utilisation.

NVIDIA through NVML (``pip install aorta-core[gpu]`` brings nvidia-ml-py), AMD through
``amd-smi`` or else ``rocm-smi`` (JSON output, one subprocess per sample: keep the sampling
interval coarse). When no source works the ``gpu`` field stays absent and one warning says why.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import warnings
from collections.abc import Callable
from typing import Any

import torch

from aorta_core.benchmark.schema import GpuSample

Sampler = Callable[[], GpuSample | None]


def make_sampler(device: torch.device) -> Sampler | None:
    """The first source that works for ``device``; None (after one warning) when none does."""
    if device.type != "cuda":
        warnings.warn("telemetry.gpu_diagnostics: no GPU (device is cpu); gpu fields are absent",
                      stacklevel=2)
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    if torch.version.hip:
        return _amd_sampler(index)
    return _nvml_sampler(index)


def _nvml_sampler(index: int) -> Sampler | None:
    try:
        import pynvml
    except ImportError:
        warnings.warn("telemetry.gpu_diagnostics: nvidia-ml-py is not installed "
                      "(pip install 'aorta-core[gpu]'); gpu fields are absent", stacklevel=3)
        return None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(_pci_bus_id(index))
    except pynvml.NVMLError as exc:
        warnings.warn(f"telemetry.gpu_diagnostics: NVML unusable ({exc}); gpu fields are absent",
                      stacklevel=3)
        return None
    return lambda: _nvml_sample(pynvml, handle)


def _pci_bus_id(index: int) -> str:
    """NVML's bus id of torch device ``index`` (robust to CUDA_VISIBLE_DEVICES reordering)."""
    p = torch.cuda.get_device_properties(index)
    return f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"


def _nvml_sample(nvml: Any, handle: Any) -> GpuSample:
    values: dict[str, Any] = {}
    readers = {
        "sm_clock_mhz": lambda: float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        "mem_clock_mhz": lambda: float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        "power_w": lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        "temperature_c": lambda: float(
            nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        "utilization_pct": lambda: float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
        "throttle_reasons": lambda: _throttle_names(
            nvml, nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)),
    }
    for key, read in readers.items():
        try:
            values[key] = read()
        except (nvml.NVMLError, AttributeError):
            continue
    try:
        mem = nvml.nvmlDeviceGetMemoryInfo(handle)
        values["memory_used_bytes"], values["memory_total_bytes"] = int(mem.used), int(mem.total)
    except nvml.NVMLError:
        pass
    return GpuSample(source="nvml", **values)


def _throttle_names(nvml: Any, mask: int) -> list[str]:
    prefix = "nvmlClocksEventReason"
    names = [n for n in dir(nvml) if n.startswith(prefix) and n != prefix + "None"
             and n != prefix + "All"]
    return sorted(n[len(prefix):] for n in names if mask & getattr(nvml, n))


def _amd_sampler(index: int) -> Sampler | None:
    if shutil.which("amd-smi"):
        argv = ["amd-smi", "metric", "-g", str(index), "--json"]
        return lambda: _run_json(argv, lambda data: parse_amd_smi(data))
    if shutil.which("rocm-smi"):
        argv = ["rocm-smi", "-d", str(index), "--showuse", "--showpower", "--showtemp",
                "--showclocks", "--showmeminfo", "vram", "--json"]
        return lambda: _run_json(argv, parse_rocm_smi)
    warnings.warn("telemetry.gpu_diagnostics: neither amd-smi nor rocm-smi is on PATH; "
                  "gpu fields are absent", stacklevel=3)
    return None


def _run_json(argv: list[str], parse: Callable[[Any], GpuSample | None]) -> GpuSample | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True).stdout
        return parse(json.loads(out))
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _num(value: Any) -> float | None:
    if isinstance(value, dict):
        value = value.get("value")
    match = _NUMBER.search(str(value)) if value is not None else None
    return float(match.group()) if match else None


def parse_rocm_smi(data: dict[str, Any]) -> GpuSample | None:
    """``rocm-smi --json``: one ``cardN`` object of "<label> (<unit>)" -> string values."""
    card = next((v for k, v in data.items() if k.startswith("card")), None)
    if not isinstance(card, dict):
        return None
    values: dict[str, Any] = {}
    for key, raw in card.items():
        value, low = _num(raw), key.lower()
        if value is None:
            continue
        if low.startswith("temperature") and "edge" in low:
            values["temperature_c"] = value
        elif "package power" in low:
            values["power_w"] = value
        elif low == "gpu use (%)":
            values["utilization_pct"] = value
        elif low.startswith("sclk"):
            values["sm_clock_mhz"] = value
        elif low.startswith("mclk"):
            values["mem_clock_mhz"] = value
        elif low == "vram total memory (b)":
            values["memory_total_bytes"] = int(value)
        elif low == "vram total used memory (b)":
            values["memory_used_bytes"] = int(value)
    return GpuSample(source="rocm-smi", **values) if values else None


def parse_amd_smi(data: Any) -> GpuSample | None:
    """``amd-smi metric --json``: a list (or object) per GPU of {"value", "unit"} groups."""
    gpu = data[0] if isinstance(data, list) and data else data
    if not isinstance(gpu, dict):
        return None
    values: dict[str, Any] = {}

    def pick(key: str, *path: str, scale: float = 1.0) -> None:
        node: Any = gpu
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        number = _num(node)
        if number is not None:
            values[key] = number * scale

    pick("utilization_pct", "usage", "gfx_activity")
    pick("power_w", "power", "socket_power")
    pick("temperature_c", "temperature", "edge")
    pick("sm_clock_mhz", "clock", "gfx_0", "clk")
    pick("mem_clock_mhz", "clock", "mem_0", "clk")
    pick("memory_used_bytes", "mem_usage", "used_vram", scale=2**20)
    pick("memory_total_bytes", "mem_usage", "total_vram", scale=2**20)
    for key in ("memory_used_bytes", "memory_total_bytes"):
        if key in values:
            values[key] = int(values[key])
    return GpuSample(source="amd-smi", **values) if values else None
