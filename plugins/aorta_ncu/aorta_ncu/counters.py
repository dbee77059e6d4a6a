"""The ncu metrics aorta asks for and publishes, by their Nsight Compute names.

The collector adds :data:`REQUESTED` to every ``--metrics`` so that they exist whatever ``set``
is chosen. Where Nsight Compute has spelt a quantity in several ways across versions and chips,
the parser takes the first name the file has. The names were checked against the raw pages
Nsight Compute 2025.3.1 wrote on an H200 (``tests/fixtures/h200``): there the SpeedOfLight
section reports ``gpu__dram_throughput`` (no ``dram__throughput``), and the generic tensor-pipe
metric equals the ``hmma`` one, Hopper's wgmma GEMMs included.
"""

from __future__ import annotations

#: Kernel duration of one profiled launch.
TIME = "gpu__time_duration.sum"
#: Published ``ncu_<key>`` (and ``ncu_top_kernel_<key>``) -> ncu names, the requested one first.
HARDWARE: dict[str, tuple[str, ...]] = {
    "sm_throughput_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "dram_throughput_pct": (
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    ),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "tensor_pipe_pct": (
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    ),
    "l2_hit_rate_pct": ("lts__t_sector_hit_rate.pct",),
}
REQUESTED = (TIME, *(names[0] for names in HARDWARE.values()))
