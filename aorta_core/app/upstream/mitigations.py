"""The names an upstream probe recipe's axes may use, each an environment bundle.

Upstream resolves ``mitigation_axis`` and ``diagnostic_axis`` values through its mitigations
registry: a name stands for environment variables set on the command (``none`` for none).
These are upstream's built-in names (``src/aorta/registry/mitigations.py``, read Sep 2026).
Names from upstream plugins (``aorta.mitigations`` entry points) or ``--mitigations-file``
sidecars are not known here: a recipe that uses one is refused by name.
"""

from __future__ import annotations

from types import MappingProxyType

BUILTIN: MappingProxyType[str, MappingProxyType[str, str]] = MappingProxyType({
    name: MappingProxyType(env) for name, env in {
        "none": {},
        # hipBLASLt and the ROCm runtime
        "tf32_off": {"DISABLE_TF32": "1"},
        "xnack": {"HSA_XNACK": "1"},
        "gpu_max_hw_queues_2": {"GPU_MAX_HW_QUEUES": "2"},
        "debug_hip_dynamic_queues_1": {"DEBUG_HIP_DYNAMIC_QUEUES": "1"},
        "debug_hip_dynamic_queues_2": {"DEBUG_HIP_DYNAMIC_QUEUES": "2"},
        "roc_aql_queue_size_1024": {"ROC_AQL_QUEUE_SIZE": "1024"},
        "hsa_no_sdma": {"HSA_ENABLE_SDMA": "0"},
        "hsa_no_scratch_reclaim": {"HSA_NO_SCRATCH_RECLAIM": "1"},
        "hsa_disable_cache": {"HSA_DISABLE_CACHE": "1"},
        "hsa_enable_cache": {"HSA_DISABLE_CACHE": "0"},
        "roc_signal_pool_16k": {"ROC_SIGNAL_POOL_SIZE": "16384"},
        "gpu_force_blit_copy_128": {"GPU_FORCE_BLIT_COPY_SIZE": "128"},
        "debug_clr_no_batch_cpu_sync": {"DEBUG_CLR_BATCH_CPU_SYNC_SIZE": "0"},
        # RCCL / NCCL (the fence flag under its RCCL 7.1 and 7.2 spellings)
        "nccl_launch_order_implicit": {"NCCL_LAUNCH_ORDER_IMPLICIT": "1"},
        "rccl_gfx942_cheap_fence_off": {"RCCL_GFX9_CHEAP_FENCE_OFF": "1",
                                        "RCCL_GFX942_CHEAP_FENCE_OFF": "1"},
        # PyTorch's caching allocator and SDPA backend
        "pytorch_no_cuda_memory_caching": {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
        "pytorch_alloc_expandable_segments": {"PYTORCH_CUDA_ALLOC_CONF":
                                              "expandable_segments:True"},
        "fa_prefer_ck": {"TORCH_ROCM_FA_PREFER_CK": "1"},
        "fa_prefer_aotriton": {"TORCH_ROCM_FA_PREFER_CK": "0"},
        # HIP / AMD diagnostics
        "hip_launch_blocking": {"HIP_LAUNCH_BLOCKING": "1"},
        "amd_log_level_4": {"AMD_LOG_LEVEL": "4"},
    }.items()
})
