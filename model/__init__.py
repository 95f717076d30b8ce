"""launchbench's analytic model: GPU specs, LLM shapes, decode roofline, launch composition, scaling laws.

Pure figures in SI units; no I/O, no measurement, nothing imported from ``analysis`` or ``benchmarks``.
"""

from model.hardware import (
    A100_40GB,
    A100_SXM_80GB,
    B200,
    GPUS,
    H100,
    H100_PCIE,
    H100_SXM,
    H200,
    H200_SXM,
    L40S,
    GPUSpec,
    gpu_spec,
    spec_for_device_name,
)
from model.launch import FUSED, MEGAKERNEL, PLANS, UNFUSED, Composition, KernelPlan, compose, compose_graph
from model.laws import amdahl, fixed_overhead_time, gustafson, half_performance_length
from model.llm import (
    LLAMA31_8B,
    LLAMA31_70B,
    LLAMA32_1B,
    LLAMA32_3B,
    MISTRAL_7B,
    MODELS,
    QWEN25_7B,
    ModelConfig,
    model_config,
)
from model.roofline import (
    DecodeStep,
    compute_bound_batch,
    decode_step,
    flops_per_token,
    ridge_point,
    weight_bytes_per_step,
)

__all__ = [
    "A100_40GB",
    "A100_SXM_80GB",
    "B200",
    "FUSED",
    "GPUS",
    "H100",
    "H100_PCIE",
    "H100_SXM",
    "H200",
    "H200_SXM",
    "L40S",
    "LLAMA31_8B",
    "LLAMA31_70B",
    "LLAMA32_1B",
    "LLAMA32_3B",
    "MEGAKERNEL",
    "MISTRAL_7B",
    "MODELS",
    "PLANS",
    "QWEN25_7B",
    "UNFUSED",
    "Composition",
    "DecodeStep",
    "GPUSpec",
    "KernelPlan",
    "ModelConfig",
    "amdahl",
    "compose",
    "compose_graph",
    "compute_bound_batch",
    "decode_step",
    "fixed_overhead_time",
    "flops_per_token",
    "gpu_spec",
    "gustafson",
    "half_performance_length",
    "model_config",
    "ridge_point",
    "spec_for_device_name",
    "weight_bytes_per_step",
]
