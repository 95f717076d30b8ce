"""GPU specifications as data: peak rates and sizes that the roofline and the scaling demos need.

All rates are dense (no 2:4 sparsity) vendor peaks in SI units. Cache sizes are binary (NVIDIA's "50 MB" L2 is
50 MiB, as the CUDA device query reports it); memory sizes are the datasheet's decimal gigabytes.
Sources: NVIDIA H100 Tensor Core GPU datasheet and Hopper architecture whitepaper (H100), H200 datasheet,
A100 datasheet and Ampere whitepaper (A100), L40S datasheet and Ada whitepaper (L40S), HGX B200 /
Blackwell datasheet (B200).
"""

from __future__ import annotations

from dataclasses import dataclass

_MIB = 2**20
_GB = 10**9


@dataclass(frozen=True)
class GPUSpec:
    """Peak figures of one GPU model.

    Fields carry their unit: bytes per second of DRAM bandwidth, FLOP per second of dense BF16 tensor-core and
    of FP32 (non-tensor, CUDA-core) arithmetic, counts of SMs and FP32 lanes, bytes of L2 and of DRAM.
    """

    name: str
    mem_bytes_per_s: float
    bf16_flops_per_s: float
    fp32_flops_per_s: float
    sm_count: int
    fp32_lanes: int
    l2_bytes: int
    mem_bytes: int


H100_SXM = GPUSpec(
    name="H100-SXM",
    mem_bytes_per_s=3.35e12,  # H100 datasheet, SXM: 3.35 TB/s HBM3
    bf16_flops_per_s=989.4e12,  # Hopper whitepaper, SXM5: 989.4 TFLOPS dense BF16 (1,979 with sparsity)
    fp32_flops_per_s=66.9e12,  # Hopper whitepaper, SXM5: 66.9 TFLOPS FP32
    sm_count=132,  # Hopper whitepaper: 132 SMs on H100 SXM5
    fp32_lanes=16_896,  # Hopper whitepaper: 128 FP32 cores/SM × 132 SMs
    l2_bytes=50 * _MIB,  # Hopper whitepaper: 50 MB L2
    mem_bytes=80 * _GB,  # H100 datasheet: 80 GB HBM3
)
H100_PCIE = GPUSpec(
    name="H100-PCIe",
    mem_bytes_per_s=2.0e12,  # H100 datasheet, PCIe 80 GB: 2 TB/s HBM2e
    bf16_flops_per_s=756e12,  # Hopper whitepaper, PCIe: 756 TFLOPS dense BF16 (1,513 with sparsity)
    fp32_flops_per_s=51.2e12,  # Hopper whitepaper, PCIe: 51.2 TFLOPS FP32
    sm_count=114,  # Hopper whitepaper: 114 SMs on H100 PCIe
    fp32_lanes=14_592,  # 128 FP32 cores/SM × 114 SMs
    l2_bytes=50 * _MIB,  # Hopper whitepaper: 50 MB L2
    mem_bytes=80 * _GB,  # H100 datasheet: 80 GB HBM2e
)
H200_SXM = GPUSpec(
    name="H200-SXM",
    mem_bytes_per_s=4.8e12,  # H200 datasheet: 4.8 TB/s HBM3e
    bf16_flops_per_s=989.4e12,  # H200 datasheet: 1,979 TFLOPS BF16 with sparsity = H100 SXM compute
    fp32_flops_per_s=66.9e12,  # same GH100 die and clocks as H100 SXM
    sm_count=132,  # same GH100 configuration as H100 SXM
    fp32_lanes=16_896,  # 128 FP32 cores/SM × 132 SMs
    l2_bytes=50 * _MIB,  # same GH100 configuration as H100 SXM
    mem_bytes=141 * _GB,  # H200 datasheet: 141 GB HBM3e
)
A100_SXM_80GB = GPUSpec(
    name="A100-SXM-80GB",
    mem_bytes_per_s=2.039e12,  # A100 datasheet, 80 GB SXM: 2,039 GB/s HBM2e
    bf16_flops_per_s=312e12,  # A100 datasheet: 312 TFLOPS dense BF16 (624 with sparsity)
    fp32_flops_per_s=19.5e12,  # A100 datasheet: 19.5 TFLOPS FP32
    sm_count=108,  # Ampere whitepaper: 108 SMs on A100
    fp32_lanes=6_912,  # Ampere whitepaper: 64 FP32 cores/SM × 108 SMs
    l2_bytes=40 * _MIB,  # Ampere whitepaper: 40 MB L2
    mem_bytes=80 * _GB,  # A100 datasheet: 80 GB HBM2e
)
A100_40GB = GPUSpec(
    name="A100-40GB",
    mem_bytes_per_s=1.555e12,  # A100 datasheet, 40 GB: 1,555 GB/s HBM2
    bf16_flops_per_s=312e12,  # A100 datasheet: 312 TFLOPS dense BF16
    fp32_flops_per_s=19.5e12,  # A100 datasheet: 19.5 TFLOPS FP32
    sm_count=108,  # Ampere whitepaper: 108 SMs on A100
    fp32_lanes=6_912,  # 64 FP32 cores/SM × 108 SMs
    l2_bytes=40 * _MIB,  # Ampere whitepaper: 40 MB L2
    mem_bytes=40 * _GB,  # A100 datasheet: 40 GB HBM2
)
L40S = GPUSpec(
    name="L40S",
    mem_bytes_per_s=864e9,  # L40S datasheet: 864 GB/s GDDR6
    bf16_flops_per_s=362.05e12,  # L40S datasheet: 362.05 TFLOPS dense BF16 (733 with sparsity)
    fp32_flops_per_s=91.6e12,  # L40S datasheet: 91.6 TFLOPS FP32
    sm_count=142,  # Ada whitepaper / CUDA device query: 142 SMs on L40S
    fp32_lanes=18_176,  # L40S datasheet: 18,176 CUDA cores (128/SM × 142)
    l2_bytes=96 * _MIB,  # Ada whitepaper: 96 MB L2 on AD102
    mem_bytes=48 * _GB,  # L40S datasheet: 48 GB GDDR6
)
B200 = GPUSpec(
    name="B200",
    mem_bytes_per_s=8.0e12,  # HGX B200 datasheet: 8 TB/s HBM3e per GPU
    bf16_flops_per_s=2.25e15,  # HGX B200 datasheet: 4.5 PFLOPS BF16 with sparsity per GPU → 2.25 dense
    fp32_flops_per_s=80e12,  # Blackwell datasheet, HGX B200 at 1,000 W: 80 TFLOPS FP32
    sm_count=148,  # CUDA device query on B200: 148 SMs
    fp32_lanes=18_944,  # 128 FP32 cores/SM × 148 SMs
    l2_bytes=126 * _MIB,  # CUDA device query on B200: 126 MB L2
    mem_bytes=180 * _GB,  # HGX B200 datasheet: 1,440 GB HBM3e per 8 GPUs
)

# Short aliases the lecture scripts use.
H100 = H100_SXM
H200 = H200_SXM

GPUS: dict[str, GPUSpec] = {
    spec.name: spec for spec in (H100_SXM, H100_PCIE, H200_SXM, A100_SXM_80GB, A100_40GB, L40S, B200)
}
_ALIASES: dict[str, GPUSpec] = {"h100": H100_SXM, "h200": H200_SXM}

# Device names as the CUDA runtime reports them (CuPy's getDeviceProperties()["name"]), lower-cased.
_DEVICE_NAMES: dict[str, GPUSpec] = {
    "nvidia h100 80gb hbm3": H100_SXM,
    "nvidia h100": H100_SXM,
    "nvidia h100 pcie": H100_PCIE,
    "nvidia h200": H200_SXM,
    "nvidia a100-sxm4-80gb": A100_SXM_80GB,
    "nvidia a100-sxm4-40gb": A100_40GB,
    "nvidia a100-pcie-40gb": A100_40GB,
    "nvidia l40s": L40S,
    "nvidia b200": B200,
}


def gpu_spec(name: str) -> GPUSpec:
    """Return the spec called ``name`` (case-insensitive; "H100" and "H200" mean the SXM parts).

    Raises ValueError naming the unknown GPU and listing the known ones.
    """
    key = name.strip().lower()
    by_lower_name = {spec_name.lower(): spec for spec_name, spec in GPUS.items()} | _ALIASES
    if key not in by_lower_name:
        known = ", ".join(GPUS)
        raise ValueError(f"unknown GPU {name!r}; known GPUs: {known}")
    return by_lower_name[key]


def spec_for_device_name(device_name: str) -> GPUSpec | None:
    """Return the spec of a CUDA device by the name the runtime reports ("NVIDIA H200"); None if unknown."""
    return _DEVICE_NAMES.get(" ".join(device_name.lower().split()))
