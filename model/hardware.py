"""GPU specifications as data: peak rates and sizes that the roofline and the scaling demos need.

Conventions, one for every entry:
- Rates are SI: bytes per second (1 TB/s = 1e12 B/s) and FLOP per second, as the datasheets state them.
- Tensor-core rates are **dense** (no 2:4 structured sparsity; datasheets often print the sparse figure,
  twice the dense one, marked with an asterisk) and with **FP32 accumulate**, which LLM inference kernels use.
  On data-centre and professional parts FP16/BF16 with FP32 accumulate run at the full tensor rate; on GeForce
  parts (RTX 4090) they run at half the FP16-accumulate rate, and the FP32-accumulate figure is the one here.
  A rate the part does not have is None: the T4 (Turing) has FP16 tensor cores but no BF16 at all.
- Sizes are bytes, stored in the unit their source states them in: a datasheet's "80 GB" of DRAM is
  80 × 10**9 B (``_GB``), never silently read as 80 GiB (0.4–1 % more than the part has: an H100 SXM reports
  85,520,809,984 B usable, 79.6 GiB); a capacity that comes from a device query is the device's own MiB
  figure (B200). Caches are binary: a whitepaper's "50 MB" of L2 is what the device reports, 52,428,800 B =
  50 MiB, so ``l2_bytes`` is the figure × 2**20. Capacities are printed in decimal GB, caches in MiB.

Every figure names its source in a comment: the vendor datasheet or whitepaper (with its edition where
editions differ), or a device query. Figures that could not be checked against the document's text while
writing this table say so in their comment.

Three kinds of spec, named by ``GPUSpec.source`` and printed wherever a spec is shown:
- datasheet: an entry of the table below;
- MIG slice: a table entry scaled to a Multi-Instance GPU profile (``mig_spec``);
- derived: computed from the device's own attributes (``derive_gpu_spec``) for a GPU the table does not hold.
``resolve_gpu_spec`` picks the right one for a device name and its recorded attributes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

_KIB = 2**10
_MIB = 2**20
_GB = 10**9  # a datasheet's decimal gigabyte

SOURCE_DATASHEET = "datasheet"
SOURCE_MIG = "datasheet, scaled to a MIG slice"
SOURCE_DERIVED = "derived from device attributes"

TENSOR_DTYPES = ("bf16", "fp16")


@dataclass(frozen=True)
class GPUSpec:
    """Peak figures of one GPU model.

    Fields carry their unit: bytes per second of DRAM bandwidth; FLOP per second of dense tensor-core BF16 and
    FP16 arithmetic with FP32 accumulate (None where the part has no such tensor rate, or where a derived spec
    cannot know it) and of FP32 CUDA-core arithmetic; counts of SMs and FP32 lanes; bytes of L2 (None when
    unknown) and of DRAM. ``source`` says where the figures come from (``SOURCE_*``).
    """

    name: str
    mem_bytes_per_s: float
    bf16_flops_per_s: float | None
    fp16_flops_per_s: float | None
    fp32_flops_per_s: float
    sm_count: int
    fp32_lanes: int
    l2_bytes: int | None
    mem_bytes: int
    source: str = SOURCE_DATASHEET

    def tensor_flops_per_s(self, dtype: str) -> float | None:
        """Dense tensor-core FLOP/s (FP32 accumulate) for ``dtype`` ("bf16" or "fp16"); None if the spec has
        no such rate. Raises ValueError for any other dtype."""
        if dtype not in TENSOR_DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(TENSOR_DTYPES)}, got {dtype!r}")
        return self.bf16_flops_per_s if dtype == "bf16" else self.fp16_flops_per_s


# --- Hopper ------------------------------------------------------------------------------------------------
H100_SXM = GPUSpec(
    name="H100-SXM",
    mem_bytes_per_s=3.35e12,  # H100 datasheet, SXM: 3.35 TB/s HBM3
    bf16_flops_per_s=989.4e12,  # Hopper whitepaper, SXM5: 989.4 TFLOPS dense BF16 (1,979 with sparsity)
    fp16_flops_per_s=989.4e12,  # Hopper whitepaper, SXM5: 989.4 TFLOPS dense FP16, FP32 accumulate
    fp32_flops_per_s=66.9e12,  # Hopper whitepaper, SXM5: 66.9 TFLOPS FP32
    sm_count=132,  # Hopper whitepaper: 132 SMs on H100 SXM5
    fp32_lanes=16_896,  # Hopper whitepaper: 128 FP32 cores/SM × 132 SMs
    l2_bytes=50 * _MIB,  # Hopper whitepaper: 50 MB L2 (device query on H100 SXM: 52,428,800 B = 50 MiB)
    mem_bytes=80 * _GB,  # H100 datasheet: 80 GB HBM3 (CUDA reports 85,520,809,984 B usable)
)
H100_PCIE = GPUSpec(
    name="H100-PCIe",
    mem_bytes_per_s=2.0e12,  # H100 datasheet, PCIe 80 GB: 2 TB/s HBM2e
    bf16_flops_per_s=756e12,  # Hopper whitepaper, PCIe: 756 TFLOPS dense BF16 (1,513 with sparsity)
    fp16_flops_per_s=756e12,  # Hopper whitepaper, PCIe: 756 TFLOPS dense FP16, FP32 accumulate
    fp32_flops_per_s=51.2e12,  # Hopper whitepaper, PCIe: 51.2 TFLOPS FP32
    sm_count=114,  # Hopper whitepaper: 114 SMs on H100 PCIe
    fp32_lanes=14_592,  # 128 FP32 cores/SM × 114 SMs
    l2_bytes=50 * _MIB,  # Hopper whitepaper: 50 MB L2
    mem_bytes=80 * _GB,  # H100 datasheet: 80 GB HBM2e
)
H100_NVL = GPUSpec(
    name="H100-NVL",
    # H100 datasheet, 2023 edition with the "H100 NVL" column (which replaced the PCIe column). Not checked
    # against the document's text in this session: 3.9 TB/s agrees with third-party listings (3.93 TB/s).
    mem_bytes_per_s=3.9e12,  # H100 datasheet, NVL: 3.9 TB/s HBM3
    bf16_flops_per_s=835.5e12,  # H100 datasheet, NVL: 1,671 TFLOPS BF16 with sparsity → 835.5 dense
    fp16_flops_per_s=835.5e12,  # H100 datasheet, NVL: 1,671 TFLOPS FP16 with sparsity → 835.5 dense
    fp32_flops_per_s=60e12,  # H100 datasheet, NVL: 60 TFLOPS FP32
    sm_count=132,  # the full SXM configuration of GH100 (132 SMs); not checked against a device query here
    fp32_lanes=16_896,  # 128 FP32 cores/SM × 132 SMs
    # device query (cudaDevAttrL2CacheSize) on H100 NVL: 62,914,560 B = 60 MiB, not the SXM part's 50 MiB
    l2_bytes=60 * _MIB,
    mem_bytes=94 * _GB,  # H100 datasheet, NVL: 94 GB HBM3 (nvidia-smi shows 95,830 MiB)
)
H200_SXM = GPUSpec(
    name="H200-SXM",
    mem_bytes_per_s=4.8e12,  # H200 datasheet: 4.8 TB/s HBM3e
    bf16_flops_per_s=989.4e12,  # H200 datasheet: 1,979 TFLOPS BF16 with sparsity = H100 SXM compute
    fp16_flops_per_s=989.4e12,  # H200 datasheet: 1,979 TFLOPS FP16 with sparsity = H100 SXM compute
    fp32_flops_per_s=66.9e12,  # same GH100 die and clocks as H100 SXM (datasheet: 67 TFLOPS)
    sm_count=132,  # same GH100 configuration as H100 SXM
    fp32_lanes=16_896,  # 128 FP32 cores/SM × 132 SMs
    # device query (cudaDevAttrL2CacheSize) on H200: 62,914,560 B = 60 MiB, as the H200 this project is lent
    # reports it (the H100 SXM's is 50 MiB)
    l2_bytes=60 * _MIB,
    mem_bytes=141 * _GB,  # H200 datasheet: 141 GB HBM3e (CUDA reports 150,754,820,096 B usable)
)
H200_NVL = GPUSpec(
    name="H200-NVL",
    # H200 datasheet, "H200 NVL" column. Not checked against the document's text in this session.
    mem_bytes_per_s=4.8e12,  # H200 datasheet, NVL: 4.8 TB/s HBM3e
    bf16_flops_per_s=835.5e12,  # H200 datasheet, NVL: 1,671 TFLOPS BF16 with sparsity → 835.5 dense
    fp16_flops_per_s=835.5e12,  # H200 datasheet, NVL: 1,671 TFLOPS FP16 with sparsity → 835.5 dense
    fp32_flops_per_s=60e12,  # H200 datasheet, NVL: 60 TFLOPS FP32
    sm_count=132,  # same GH100 configuration as H200 SXM; not checked against a device query here
    fp32_lanes=16_896,  # 128 FP32 cores/SM × 132 SMs
    l2_bytes=60 * _MIB,  # device query (cudaDevAttrL2CacheSize) on H200 NVL: 62,914,560 B = 60 MiB
    mem_bytes=141 * _GB,  # H200 datasheet, NVL: 141 GB HBM3e
)
GH200_96GB = GPUSpec(
    name="GH200-96GB",
    # The Hopper GPU of a GH200 Grace Hopper Superchip with 96 GB HBM3 (CUDA name "NVIDIA GH200 480GB": the
    # 480 GB is the Grace CPU's LPDDR5X). GH200 datasheet; compute figures not checked against the document's
    # text in this session.
    mem_bytes_per_s=4.0e12,  # GH200 datasheet: 96 GB HBM3 at 4 TB/s
    bf16_flops_per_s=989.4e12,  # GH200 datasheet: 1,979 TFLOPS BF16 with sparsity (H100 SXM compute)
    fp16_flops_per_s=989.4e12,  # GH200 datasheet: 1,979 TFLOPS FP16 with sparsity (H100 SXM compute)
    fp32_flops_per_s=66.9e12,  # GH200 datasheet: 67 TFLOPS FP32 (H100 SXM: 66.9)
    sm_count=132,  # H100 SXM configuration; not checked against a device query here
    fp32_lanes=16_896,  # 128 FP32 cores/SM × 132 SMs
    l2_bytes=60 * _MIB,  # device query (cudaDevAttrL2CacheSize) on GH200: 62,914,560 B = 60 MiB
    mem_bytes=96 * _GB,  # GH200 datasheet: 96 GB HBM3 (CUDA reports 97,871 MiB)
)
GH200_144GB = GPUSpec(
    name="GH200-144GB",
    # The HBM3e GH200 (CUDA name "NVIDIA GH200 144G HBM3e"). The August 2023 announcement said 141 GB at
    # 5 TB/s; the shipping part's datasheet says 144 GB at 4.9 TB/s, used here. Not checked against the
    # document's text in this session; nvidia-smi on the part shows 146,831 MiB.
    mem_bytes_per_s=4.9e12,  # GH200 datasheet, HBM3e: 4.9 TB/s
    bf16_flops_per_s=989.4e12,  # same Hopper GPU as GH200-96GB
    fp16_flops_per_s=989.4e12,  # same Hopper GPU as GH200-96GB
    fp32_flops_per_s=66.9e12,  # same Hopper GPU as GH200-96GB
    sm_count=132,  # same Hopper GPU as GH200-96GB
    fp32_lanes=16_896,  # 128 FP32 cores/SM × 132 SMs
    l2_bytes=60 * _MIB,  # device query (cudaDevAttrL2CacheSize) on GH200: 62,914,560 B = 60 MiB
    mem_bytes=144 * _GB,  # GH200 datasheet, HBM3e: 144 GB
)

# --- Ampere ------------------------------------------------------------------------------------------------
A100_SXM_80GB = GPUSpec(
    name="A100-SXM-80GB",
    mem_bytes_per_s=2.039e12,  # A100 datasheet, 80 GB SXM: 2,039 GB/s HBM2e
    bf16_flops_per_s=312e12,  # A100 datasheet: 312 TFLOPS dense BF16 (624 with sparsity)
    fp16_flops_per_s=312e12,  # A100 datasheet: 312 TFLOPS dense FP16 (624 with sparsity)
    fp32_flops_per_s=19.5e12,  # A100 datasheet: 19.5 TFLOPS FP32
    sm_count=108,  # Ampere whitepaper: 108 SMs on A100
    fp32_lanes=6_912,  # Ampere whitepaper: 64 FP32 cores/SM × 108 SMs
    l2_bytes=40 * _MIB,  # Ampere whitepaper: 40 MB L2
    mem_bytes=80 * _GB,  # A100 datasheet: 80 GB HBM2e
)
A100_PCIE_80GB = GPUSpec(
    name="A100-PCIe-80GB",
    mem_bytes_per_s=1.935e12,  # A100 datasheet, 80 GB PCIe: 1,935 GB/s HBM2e
    bf16_flops_per_s=312e12,  # A100 datasheet: 312 TFLOPS dense BF16, PCIe and SXM alike
    fp16_flops_per_s=312e12,  # A100 datasheet: 312 TFLOPS dense FP16
    fp32_flops_per_s=19.5e12,  # A100 datasheet: 19.5 TFLOPS FP32
    sm_count=108,  # Ampere whitepaper: 108 SMs on A100
    fp32_lanes=6_912,  # 64 FP32 cores/SM × 108 SMs
    l2_bytes=40 * _MIB,  # Ampere whitepaper: 40 MB L2
    mem_bytes=80 * _GB,  # A100 datasheet: 80 GB HBM2e
)
A100_40GB = GPUSpec(
    name="A100-40GB",
    mem_bytes_per_s=1.555e12,  # A100 datasheet, 40 GB (SXM and PCIe): 1,555 GB/s HBM2
    bf16_flops_per_s=312e12,  # A100 datasheet: 312 TFLOPS dense BF16
    fp16_flops_per_s=312e12,  # A100 datasheet: 312 TFLOPS dense FP16
    fp32_flops_per_s=19.5e12,  # A100 datasheet: 19.5 TFLOPS FP32
    sm_count=108,  # Ampere whitepaper: 108 SMs on A100
    fp32_lanes=6_912,  # 64 FP32 cores/SM × 108 SMs
    l2_bytes=40 * _MIB,  # Ampere whitepaper: 40 MB L2
    mem_bytes=40 * _GB,  # A100 datasheet: 40 GB HBM2
)
A10 = GPUSpec(
    name="A10",
    mem_bytes_per_s=600e9,  # A10 datasheet: 600 GB/s GDDR6
    bf16_flops_per_s=125e12,  # A10 datasheet: 125 TFLOPS dense BF16 (250 with sparsity)
    fp16_flops_per_s=125e12,  # A10 datasheet: 125 TFLOPS dense FP16 (250 with sparsity)
    fp32_flops_per_s=31.2e12,  # A10 datasheet: 31.2 TFLOPS FP32
    sm_count=72,  # GA102 as configured on the A10: 72 SMs (9,216 CUDA cores ÷ 128)
    fp32_lanes=9_216,  # A10 datasheet: 9,216 CUDA cores (128/SM, compute capability 8.6)
    l2_bytes=6 * _MIB,  # GA102: 6 MB L2 (third-party spec listings; not in the datasheet)
    mem_bytes=24 * _GB,  # A10 datasheet: 24 GB GDDR6
)

# --- Ada Lovelace ------------------------------------------------------------------------------------------
L40S = GPUSpec(
    name="L40S",
    mem_bytes_per_s=864e9,  # L40S datasheet: 864 GB/s GDDR6
    bf16_flops_per_s=362.05e12,  # L40S datasheet: 362.05 TFLOPS dense BF16 (733 with sparsity)
    fp16_flops_per_s=362.05e12,  # L40S datasheet: 362.05 TFLOPS dense FP16 (733 with sparsity)
    fp32_flops_per_s=91.6e12,  # L40S datasheet: 91.6 TFLOPS FP32
    sm_count=142,  # Ada whitepaper / CUDA device query: 142 SMs on L40S
    fp32_lanes=18_176,  # L40S datasheet: 18,176 CUDA cores (128/SM × 142)
    l2_bytes=96 * _MIB,  # Ada whitepaper: 96 MB L2 on AD102
    mem_bytes=48 * _GB,  # L40S datasheet: 48 GB GDDR6
)
RTX_6000_ADA = GPUSpec(
    name="RTX-6000-Ada",
    mem_bytes_per_s=960e9,  # RTX 6000 Ada Generation datasheet: 960 GB/s GDDR6 (384-bit)
    # The datasheet prints only "1,457 TFLOPS" tensor performance (FP8 with sparsity). Dense FP16/BF16 with
    # FP32 accumulate is a quarter of that on professional Ada parts (FP8 → FP16 halves the rate, dense halves
    # it again: L40S 1,466 → 362 by the same rule); derived here, not printed by NVIDIA for this card.
    bf16_flops_per_s=364.25e12,  # 1,457 / 4: derived as above
    fp16_flops_per_s=364.25e12,  # 1,457 / 4: derived as above
    fp32_flops_per_s=91.1e12,  # RTX 6000 Ada datasheet: 91.1 TFLOPS FP32
    sm_count=142,  # RTX 6000 Ada datasheet: 142 RT cores, one per SM (18,176 CUDA cores ÷ 128)
    fp32_lanes=18_176,  # RTX 6000 Ada datasheet: 18,176 CUDA cores
    l2_bytes=96 * _MIB,  # Ada whitepaper: 96 MB L2 on AD102
    mem_bytes=48 * _GB,  # RTX 6000 Ada datasheet: 48 GB GDDR6 with ECC
)
RTX_4090 = GPUSpec(
    name="RTX-4090",
    # NVIDIA Ada GPU architecture whitepaper (v2.1), GeForce RTX 4090 column; bandwidth and SM count match the
    # CUDA device query listed by NVIDIA nvbench (PR #207: 128 SMs, 384-bit DDR @ 10,501 MHz = 1,008 GB/s).
    mem_bytes_per_s=1.008e12,  # Ada whitepaper: 1,008 GB/s GDDR6X (21 Gb/s × 384 bits / 8)
    bf16_flops_per_s=165.2e12,  # Ada whitepaper: 165.2 TFLOPS dense BF16, FP32 accum. (GeForce: half rate)
    fp16_flops_per_s=165.2e12,  # Ada whitepaper: 165.2 TFLOPS dense FP16, FP32 accumulate (330.3 FP16 accum.)
    fp32_flops_per_s=82.6e12,  # Ada whitepaper: 82.6 TFLOPS FP32
    sm_count=128,  # Ada whitepaper: 128 SMs on the RTX 4090
    fp32_lanes=16_384,  # Ada whitepaper: 16,384 CUDA cores (128/SM)
    l2_bytes=72 * _MIB,  # Ada whitepaper: 72 MB L2 (device query: 73,728 KiB)
    mem_bytes=24 * _GB,  # Ada whitepaper: 24 GB GDDR6X (device query: 24,563 MiB)
)
L4 = GPUSpec(
    name="L4",
    mem_bytes_per_s=300e9,  # L4 datasheet: 300 GB/s GDDR6
    bf16_flops_per_s=121e12,  # L4 datasheet: 242 TFLOPS BF16 with sparsity → 121 dense
    fp16_flops_per_s=121e12,  # L4 datasheet: 242 TFLOPS FP16 with sparsity → 121 dense
    fp32_flops_per_s=30.3e12,  # L4 datasheet: 30.3 TFLOPS FP32
    # 58 SMs: the datasheet's 30.3 TFLOPS at its 2,040 MHz boost clock is 7,426 lanes ≈ 58 × 128. (Third-party
    # listings give 60 SMs / 7,680 cores, which would be 31.3 TFLOPS.) Not checked against a device query
    # here.
    sm_count=58,
    fp32_lanes=7_424,  # 128 FP32 cores/SM × 58 SMs
    l2_bytes=48 * _MIB,  # AD104: 48 MB L2 (third-party spec listings; not in the datasheet)
    mem_bytes=24 * _GB,  # L4 datasheet: 24 GB GDDR6
)

# --- Turing -------------------------------------------------------------------------------------------------
T4 = GPUSpec(
    name="T4",
    mem_bytes_per_s=320e9,  # T4 datasheet: 320 GB/s GDDR6 (device query: 256-bit, 5,001 MHz × 2)
    bf16_flops_per_s=None,  # Turing tensor cores have no BF16 (T4 datasheet lists FP16, INT8, INT4 only)
    fp16_flops_per_s=65e12,  # T4 datasheet: 65 TFLOPS mixed precision (FP16 multiply, FP32 accumulate), dense
    fp32_flops_per_s=8.1e12,  # T4 datasheet: 8.1 TFLOPS FP32
    sm_count=40,  # CUDA device query on a T4: 40 multiprocessors
    fp32_lanes=2_560,  # T4 datasheet: 2,560 CUDA cores (device query: 64 per SM)
    l2_bytes=4 * _MIB,  # CUDA device query on a T4: L2 4,194,304 bytes
    mem_bytes=16 * _GB,  # T4 datasheet: 16 GB GDDR6 (device query: 15,110 MiB usable)
)

# --- Blackwell ----------------------------------------------------------------------------------------------
B200 = GPUSpec(
    name="B200",
    # HGX B200 specifications (nvidia.com/data-center/hgx, per-GPU column of the current edition: 180 GB
    # HBM3e at 7.7 TB/s, FP32 75 TFLOPS, FP16/BF16 4.5 PFLOPS with sparsity). The first Blackwell datasheet
    # (GTC, March 2024) printed 8 TB/s and 80 TFLOPS FP32; the device itself reports a 7,680-bit bus at
    # 3,996 MHz × 2 = 7.67 TB/s (pytorch/ao PR #4002, device query), which agrees with the current edition.
    mem_bytes_per_s=7.7e12,  # HGX B200, current edition: 7.7 TB/s per GPU (62 TB/s per 8 GPUs)
    bf16_flops_per_s=2.25e15,  # HGX B200: 4.5 PFLOPS BF16 with sparsity per GPU → 2.25 dense
    fp16_flops_per_s=2.25e15,  # HGX B200: 4.5 PFLOPS FP16 with sparsity per GPU → 2.25 dense
    fp32_flops_per_s=75e12,  # HGX B200, current edition: 75 TFLOPS FP32 per GPU
    sm_count=148,  # CUDA device query on B200 (pytorch/ao PR #4002): 148 SMs
    fp32_lanes=18_944,  # 128 FP32 cores/SM × 148 SMs
    l2_bytes=126 * _MIB + 512 * _KIB,  # CUDA device query on B200 (pytorch/ao PR #4002): 126.5 MiB L2
    # device query on B200 (totalGlobalMem, nvidia-smi): 182,631 MiB; the HGX B200 page's "180 GB HBM3e per
    # GPU" is a rounded label (180 GiB would be 184,320 MiB, 0.9 % more than the device has)
    mem_bytes=182_631 * _MIB,
)

# Short aliases the lecture scripts use.
H100 = H100_SXM
H200 = H200_SXM

GPUS: dict[str, GPUSpec] = {
    spec.name: spec
    for spec in (
        H100_SXM,
        H100_PCIE,
        H100_NVL,
        H200_SXM,
        H200_NVL,
        GH200_96GB,
        GH200_144GB,
        A100_SXM_80GB,
        A100_PCIE_80GB,
        A100_40GB,
        A10,
        L40S,
        RTX_6000_ADA,
        RTX_4090,
        L4,
        T4,
        B200,
    )
}
_ALIASES: dict[str, GPUSpec] = {"h100": H100_SXM, "h200": H200_SXM}

# Device names as the CUDA runtime reports them (CuPy's getDeviceProperties()["name"], nvidia-smi -L),
# lower-cased with single spaces.
_DEVICE_NAMES: dict[str, GPUSpec] = {
    "nvidia h100 80gb hbm3": H100_SXM,
    "nvidia h100": H100_SXM,
    "nvidia h100 pcie": H100_PCIE,
    "nvidia h100 nvl": H100_NVL,
    "nvidia h200": H200_SXM,
    "nvidia h200 nvl": H200_NVL,
    "nvidia gh200 480gb": GH200_96GB,
    "nvidia gh200 144g hbm3e": GH200_144GB,
    "nvidia a100-sxm4-80gb": A100_SXM_80GB,
    "nvidia a100 80gb pcie": A100_PCIE_80GB,
    "nvidia a100-sxm4-40gb": A100_40GB,
    "nvidia a100-pcie-40gb": A100_40GB,
    "nvidia a10": A10,
    "nvidia l40s": L40S,
    "nvidia rtx 6000 ada generation": RTX_6000_ADA,
    "nvidia geforce rtx 4090": RTX_4090,
    "nvidia l4": L4,
    "tesla t4": T4,
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


# --- MIG slices --------------------------------------------------------------------------------------------
# NVIDIA Multi-Instance GPU User Guide (r580), "Terminology": "A GPU memory slice is roughly one eighth of the
# total GPU memory resources, including both capacity and bandwidth"; "A GPU SM slice is roughly one seventh
# of the total number of SMs available in the GPU when configured in MIG mode"; "each GPU slice includes
# dedicated GPU memory resources which limit both the available capacity and bandwidth". Its profile tables
# (A100, H100, H200, B200) give each profile's fraction of memory in eighths and of SMs in sevenths. So a
# slice gets the whole GPU's bandwidth × memory slices / 8 (the decode roofline's term) and compute × SM
# slices / 7. One seventh of the SMs is "roughly": `nvidia-smi mig -lgip` lists 16 SMs for an H100 80GB's
# 1g.10gb, not 18.9; where the device's own SM count is known (CUDA reports the slice's), it replaces the
# estimate. The estimate errs high, which keeps the roofline a lower bound. L2 per profile varies (1g.20gb on
# H100: 1/4 of the memory, 1/8 of the L2), so a slice's L2 is left unknown.
_MIG_NAME = re.compile(
    r"^(?P<base>.+?)\s+mig\s+(?:(?P<ci>\d+)c\.)?(?P<gi>\d+)g\.(?P<gb>\d+)gb(?:[+-][a-z.]+)?$"
)
_MIG_SM_SLICES = 7
_MIG_MEMORY_SLICES = 8
_MIG_MEMORY_SLICE_COUNTS = (1, 2, 4, 8)  # every profile in the user guide's tables holds 1/8, 2/8, 4/8 or all
# A profile's "<n>gb" is in the unit of the whole GPU's own "7g.<n>gb" profile, the datasheet's decimal GB
# (7g.80gb on an H100 80GB, 7g.141gb on an H200): the slices are counted against that figure. Where the spec's
# capacity is not stored in datasheet GB (the B200's is the device's MiB figure), the whole profile's is here.
_MIG_WHOLE_GB = {"B200": 180}  # MIG user guide, B200 profile table: 7g.180gb is the whole GPU


def _normalised(device_name: str) -> str:
    return " ".join(device_name.lower().split())


def mig_spec(
    base: GPUSpec, profile: str, sm_count: int | None = None, mem_bytes: int | None = None
) -> GPUSpec:
    """Spec of one MIG slice of ``base`` with profile ``profile`` ("1g.10gb", "3g.40gb", "1c.3g.40gb" for one
    compute instance of a 3g GPU instance, with or without a "+me" suffix), scaled as the MIG user guide
    describes (see the comment above). ``sm_count`` and ``mem_bytes``, where the device reports them, replace
    the estimates. Raises ValueError when the profile does not fit ``base``."""
    match = re.fullmatch(r"(?:(\d+)c\.)?(\d+)g\.(\d+)gb(?:[+-][a-z.]+)?", profile.strip().lower())
    if match is None:
        raise ValueError(f"not a MIG profile: {profile!r}")
    compute_instance, gpu_instance, profile_gb = (int(group) if group else None for group in match.groups())
    assert gpu_instance is not None and profile_gb is not None  # the pattern requires both
    sm_slices = compute_instance or gpu_instance
    whole_gb = _MIG_WHOLE_GB.get(base.name, base.mem_bytes / _GB)
    memory_eighths = profile_gb * _MIG_MEMORY_SLICES / whole_gb
    memory_slices = round(memory_eighths)
    if not (
        1 <= sm_slices <= gpu_instance <= _MIG_SM_SLICES
        and memory_slices in _MIG_MEMORY_SLICE_COUNTS
        and abs(memory_eighths - memory_slices) < 0.1
    ):
        raise ValueError(f"MIG profile {profile!r} does not fit a {base.name}")
    estimated_sms = base.sm_count * sm_slices // _MIG_SM_SLICES
    slice_sms = sm_count if sm_count is not None else estimated_sms
    compute_share = slice_sms / base.sm_count
    lanes_per_sm = base.fp32_lanes // base.sm_count
    return replace(
        base,
        name=f"{base.name} MIG {profile.strip().lower()}",
        mem_bytes_per_s=base.mem_bytes_per_s * memory_slices / _MIG_MEMORY_SLICES,
        bf16_flops_per_s=None if base.bf16_flops_per_s is None else base.bf16_flops_per_s * compute_share,
        fp16_flops_per_s=None if base.fp16_flops_per_s is None else base.fp16_flops_per_s * compute_share,
        fp32_flops_per_s=base.fp32_flops_per_s * compute_share,
        sm_count=slice_sms,
        fp32_lanes=lanes_per_sm * slice_sms,
        l2_bytes=None,
        mem_bytes=mem_bytes
        if mem_bytes is not None
        else base.mem_bytes * memory_slices // _MIG_MEMORY_SLICES,
        source=SOURCE_MIG,
    )


def spec_for_device_name(device_name: str) -> GPUSpec | None:
    """Return the spec of a CUDA device by the name the runtime reports ("NVIDIA H200"); a MIG slice ("NVIDIA
    H100 80GB HBM3 MIG 1g.10gb") gets its base GPU's spec scaled to the slice (``mig_spec``), never the whole
    GPU's. None if the name (or a MIG slice's base name) is unknown or the profile does not fit it: the
    name alone, without the device attributes ``resolve_gpu_spec`` also reads."""
    return resolve_gpu_spec(device_name).spec


# --- Specs derived from the device's attributes ------------------------------------------------------------
# FP32 results per clock per SM ("CUDA cores" per SM) by compute capability: CUDA C++ Programming Guide,
# "Arithmetic Instructions", throughput table (32-bit floating-point add, multiply, multiply-add).
# Cross-checked against the table above: T4 (7.5) 64, A100 (8.0) 64, A10 (8.6) 128, L4 / RTX 4090 (8.9) 128,
# H100 (9.0) 128, B200 (10.0) 128.
FP32_LANES_PER_SM: dict[tuple[int, int], int] = {
    (5, 0): 128,
    (5, 2): 128,
    (5, 3): 128,
    (6, 0): 64,
    (6, 1): 128,
    (6, 2): 128,
    (7, 0): 64,
    (7, 2): 64,
    (7, 5): 64,
    (8, 0): 64,
    (8, 6): 128,
    (8, 7): 128,
    (8, 9): 128,
    (9, 0): 128,
    (10, 0): 128,
    (12, 0): 128,
}
_FP32_FLOPS_PER_LANE_PER_CLOCK = 2  # one fused multiply-add
_DDR = 2  # the reported memory clock is half the per-pin data rate (see derive_gpu_spec)


def parse_compute_capability(value: object) -> tuple[int, int]:
    """Compute capability as (major, minor) from the forms it is recorded in: "9.0", "8.9", "90", "100"
    (CuPy's ``Device.compute_capability``), (9, 0) or [9, 0]. Raises ValueError for anything else."""
    if isinstance(value, list | tuple) and len(value) == 2 and all(_is_int(part) for part in value):
        return int(value[0]), int(value[1])
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\d+\.\d", text):
            major, minor = text.split(".")
            return int(major), int(minor)
        if re.fullmatch(r"\d{2,3}", text):
            return int(text[:-1]), int(text[-1])
    raise ValueError(f"compute_capability must look like '9.0', '90' or (9, 0), got {value!r}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value > 0)
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be an integer > 0, got {value!r}")
    return value


def _optional_positive_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def derive_gpu_spec(
    name: str,
    *,
    memory_clock_hz: float,
    memory_bus_width_bits: int,
    sm_count: int,
    sm_clock_rate_hz: float,
    compute_capability: object,
    memory_bytes: int,
) -> GPUSpec:
    """A spec computed from a device's own attributes, for a GPU the table does not hold (``source`` =
    ``SOURCE_DERIVED``). Pure arithmetic on numbers, each validated (a missing or non-numeric value is a
    ValueError naming it); reading them from the device is the caller's job.

    - ``memory_clock_hz``: cudaDevAttrMemoryClockRate × 1000 (the attribute is the peak memory clock in kHz;
      NVML's max memory clock gives the same number). For HBM2/2e/3/3e, GDDR6 and GDDR6X alike the reported
      clock is half the per-pin data rate, so bandwidth = clock × bus width / 8 × 2: H100 SXM 2,619 MHz ×
      5,120 bits → 3.35 TB/s; B200 3,996 MHz × 7,680 bits → 7.67 TB/s; T4 (GDDR6, 10 Gb/s per pin) 5,001 MHz ×
      256 bits → 320 GB/s; RTX 4090 (GDDR6X, 21 Gb/s, PAM4) 10,501 MHz × 384 bits → 1,008 GB/s. Each matches
      its datasheet. Not checked for GDDR7 parts.
    - ``memory_bus_width_bits``: cudaDevAttrGlobalMemoryBusWidth.
    - ``sm_count``: cudaDevAttrMultiProcessorCount; ``sm_clock_rate_hz``: cudaDevAttrClockRate × 1000, the
      peak (boost) SM clock; ``compute_capability``: any form ``parse_compute_capability`` reads.
    - ``memory_bytes``: totalGlobalMem, bytes.

    FP32 rate = SMs × FP32 lanes per SM (``FP32_LANES_PER_SM``) × 2 × SM clock. Tensor-core rates are left
    None: parts of one compute capability differ (an RTX 4090 runs FP16 with FP32 accumulate at half the
    rate of an L40S of the same 8.9), so no device attribute tells them; a roofline on a derived spec has
    a memory term only. L2 is left None. Raises ValueError naming the first bad attribute, or a compute
    capability the lanes table does not hold.
    """
    clock_hz = _positive("memory_clock_hz", memory_clock_hz)
    bus_bits = _positive_int("memory_bus_width_bits", memory_bus_width_bits)
    sms = _positive_int("sm_count", sm_count)
    sm_hz = _positive("sm_clock_rate_hz", sm_clock_rate_hz)
    capability = parse_compute_capability(compute_capability)
    total_bytes = _positive_int("memory_bytes", memory_bytes)
    if capability not in FP32_LANES_PER_SM:
        known = ", ".join(f"{major}.{minor}" for major, minor in FP32_LANES_PER_SM)
        major, minor = capability
        raise ValueError(f"compute capability {major}.{minor}: FP32 lanes per SM not known (known: {known})")
    lanes = sms * FP32_LANES_PER_SM[capability]
    return GPUSpec(
        name=name,
        mem_bytes_per_s=clock_hz * bus_bits / 8 * _DDR,
        bf16_flops_per_s=None,
        fp16_flops_per_s=None,
        fp32_flops_per_s=lanes * _FP32_FLOPS_PER_LANE_PER_CLOCK * sm_hz,
        sm_count=sms,
        fp32_lanes=lanes,
        l2_bytes=None,
        mem_bytes=total_bytes,
        source=SOURCE_DERIVED,
    )


# Keys of the device attributes that benchmarks record in machine_info["launchbench"]["gpu"].
ATTRIBUTE_KEYS = (
    "memory_clock_hz",
    "memory_bus_width_bits",
    "sm_count",
    "sm_clock_rate_hz",
    "compute_capability",
    "memory_bytes",
)


@dataclass(frozen=True)
class SpecLookup:
    """What ``resolve_gpu_spec`` found for a device: ``spec`` (None when there is none) and, when there is
    none, ``reason`` (one line saying why). ``source`` is the spec's ``SOURCE_*`` label, or None."""

    spec: GPUSpec | None
    reason: str | None = None

    @property
    def source(self) -> str | None:
        """The spec's source label (``SOURCE_DATASHEET``, ``SOURCE_MIG``, ``SOURCE_DERIVED``); None without
        a spec."""
        return None if self.spec is None else self.spec.source


def resolve_gpu_spec(name: object, attributes: Mapping[str, object] | None = None) -> SpecLookup:
    """The spec for a device called ``name`` with recorded ``attributes`` (keys ``ATTRIBUTE_KEYS``, as in
    machine_info["launchbench"]["gpu"]; may be None or partial): the datasheet entry when the name is known;
    for a MIG slice of a known GPU its scaled spec (``mig_spec``, with the slice's own SM count and memory
    size from the attributes where recorded); otherwise a spec derived from the attributes
    (``derive_gpu_spec``); otherwise no spec, with the reason. Never raises."""
    if not isinstance(name, str) or not name.strip():
        return SpecLookup(None, f"no GPU name recorded (got {name!r})")
    attrs = attributes if isinstance(attributes, Mapping) else {}
    key = _normalised(name)
    if key in _DEVICE_NAMES:
        return SpecLookup(_DEVICE_NAMES[key])
    mig = _MIG_NAME.match(key)
    if mig is not None:
        return _resolve_mig(name, mig, attrs)
    if not attrs:
        return SpecLookup(
            None, f"GPU {name!r} is not in the datasheet table and no device attributes were recorded"
        )
    try:
        return SpecLookup(
            derive_gpu_spec(
                name.strip(),
                memory_clock_hz=attrs.get("memory_clock_hz"),
                memory_bus_width_bits=attrs.get("memory_bus_width_bits"),
                sm_count=attrs.get("sm_count"),
                sm_clock_rate_hz=attrs.get("sm_clock_rate_hz"),
                compute_capability=attrs.get("compute_capability"),
                memory_bytes=attrs.get("memory_bytes"),
            )
        )
    except ValueError as err:
        return SpecLookup(
            None, f"GPU {name!r} is not in the datasheet table; no spec derived from its attributes: {err}"
        )


def _resolve_mig(name: str, mig: re.Match[str], attrs: Mapping[str, object]) -> SpecLookup:
    base = _DEVICE_NAMES.get(mig["base"])
    if base is None:
        # The slice's share of the memory system is not among the device attributes; deriving a spec from them
        # could hand a slice the bandwidth of the whole GPU.
        return SpecLookup(
            None, f"MIG slice {name!r} of a GPU not in the datasheet table: no spec for the slice"
        )
    profile = mig.string[mig.end("base") :].strip().removeprefix("mig").strip()
    try:
        return SpecLookup(
            mig_spec(
                base,
                profile,
                sm_count=_optional_positive_int(attrs.get("sm_count")),
                mem_bytes=_optional_positive_int(attrs.get("memory_bytes")),
            )
        )
    except ValueError as err:
        return SpecLookup(None, f"MIG slice {name!r}: {err}")
