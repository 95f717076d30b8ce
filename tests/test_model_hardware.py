"""model.hardware: GPU specs as data, each figure pinned to its source; MIG slices; specs derived from device
attributes; the one lookup analysis calls."""

import math

import pytest

from model.hardware import (
    A10,
    A100_40GB,
    A100_PCIE_80GB,
    A100_SXM_80GB,
    ATTRIBUTE_KEYS,
    B200,
    FP32_LANES_PER_SM,
    GH200_96GB,
    GH200_144GB,
    GPUS,
    H100,
    H100_NVL,
    H100_PCIE,
    H100_SXM,
    H200,
    H200_NVL,
    H200_SXM,
    L4,
    L40S,
    RTX_4090,
    RTX_6000_ADA,
    SOURCE_DATASHEET,
    SOURCE_DERIVED,
    SOURCE_MIG,
    T4,
    GPUSpec,
    derive_gpu_spec,
    gpu_spec,
    mig_spec,
    parse_compute_capability,
    resolve_gpu_spec,
    spec_for_device_name,
)

GIB = 2**30
MIB = 2**20

GB = 10**9

# (spec, bandwidth B/s, dense BF16, dense FP16, FP32 FLOP/s, SMs, FP32 lanes, memory B, L2 B): the source
# values the comments in model/hardware.py cite, copied here so that a change to the table is a deliberate
# one. Memory in the unit of its source (a datasheet's decimal GB, a device query's MiB); L2 as reported.
SOURCE_FIGURES = [
    (H100_SXM, 3.35e12, 989.4e12, 989.4e12, 66.9e12, 132, 16_896, 80 * GB, 50 * MIB),
    (H100_PCIE, 2.0e12, 756e12, 756e12, 51.2e12, 114, 14_592, 80 * GB, 50 * MIB),
    (H100_NVL, 3.9e12, 835.5e12, 835.5e12, 60e12, 132, 16_896, 94 * GB, 62_914_560),
    (H200_SXM, 4.8e12, 989.4e12, 989.4e12, 66.9e12, 132, 16_896, 141 * GB, 62_914_560),
    (H200_NVL, 4.8e12, 835.5e12, 835.5e12, 60e12, 132, 16_896, 141 * GB, 62_914_560),
    (GH200_96GB, 4.0e12, 989.4e12, 989.4e12, 66.9e12, 132, 16_896, 96 * GB, 62_914_560),
    (GH200_144GB, 4.9e12, 989.4e12, 989.4e12, 66.9e12, 132, 16_896, 144 * GB, 62_914_560),
    (A100_SXM_80GB, 2.039e12, 312e12, 312e12, 19.5e12, 108, 6_912, 80 * GB, 40 * MIB),
    (A100_PCIE_80GB, 1.935e12, 312e12, 312e12, 19.5e12, 108, 6_912, 80 * GB, 40 * MIB),
    (A100_40GB, 1.555e12, 312e12, 312e12, 19.5e12, 108, 6_912, 40 * GB, 40 * MIB),
    (A10, 600e9, 125e12, 125e12, 31.2e12, 72, 9_216, 24 * GB, 6 * MIB),
    (L40S, 864e9, 362.05e12, 362.05e12, 91.6e12, 142, 18_176, 48 * GB, 96 * MIB),
    (RTX_6000_ADA, 960e9, 364.25e12, 364.25e12, 91.1e12, 142, 18_176, 48 * GB, 96 * MIB),
    (RTX_4090, 1.008e12, 165.2e12, 165.2e12, 82.6e12, 128, 16_384, 24 * GB, 72 * MIB),
    (L4, 300e9, 121e12, 121e12, 30.3e12, 58, 7_424, 24 * GB, 48 * MIB),
    (T4, 320e9, None, 65e12, 8.1e12, 40, 2_560, 16 * GB, 4 * MIB),
    (B200, 7.7e12, 2.25e15, 2.25e15, 75e12, 148, 18_944, 182_631 * MIB, 126 * MIB + 512 * 2**10),
]


def test_every_table_gpu_has_its_figures_pinned() -> None:
    assert {row[0].name for row in SOURCE_FIGURES} == set(GPUS)


@pytest.mark.parametrize("row", SOURCE_FIGURES, ids=lambda row: row[0].name)
def test_figures_equal_their_sources(row: tuple) -> None:
    spec, bandwidth, bf16, fp16, fp32, sms, lanes, mem_bytes, l2_bytes = row
    assert spec.mem_bytes_per_s == bandwidth
    assert spec.bf16_flops_per_s == bf16
    assert spec.fp16_flops_per_s == fp16
    assert spec.fp32_flops_per_s == fp32
    assert (spec.sm_count, spec.fp32_lanes) == (sms, lanes)
    assert spec.mem_bytes == mem_bytes  # in its source's unit: no datasheet GB read as GiB
    assert spec.l2_bytes == l2_bytes
    assert spec.source == SOURCE_DATASHEET


def test_b200_at_the_current_hgx_figures_not_the_early_datasheet() -> None:
    assert B200.mem_bytes_per_s == 7.7e12  # not 8 TB/s
    assert B200.fp32_flops_per_s == 75e12  # not 80 TFLOPS
    assert B200.l2_bytes == 126 * MIB + 512 * 2**10  # 126.5 MiB, as the device reports
    # The current figure agrees with the device's own attributes: 7,680-bit bus at 3,996 MHz.
    derived = derive_gpu_spec(
        "NVIDIA B200",
        memory_clock_hz=3_996e6,
        memory_bus_width_bits=7_680,
        sm_count=148,
        sm_clock_rate_hz=1.98e9,
        compute_capability="10.0",
        memory_bytes=182_631 * MIB,
    )
    assert derived.mem_bytes_per_s == pytest.approx(B200.mem_bytes_per_s, rel=0.005)


def test_h100_sxm_cache_and_aliases() -> None:
    assert H100 is H100_SXM
    assert H100.l2_bytes == 50 * MIB


@pytest.mark.parametrize("spec", [H100_NVL, H200_SXM, H200_NVL, GH200_96GB, GH200_144GB])
def test_the_larger_gh100_parts_have_60_mib_of_l2(spec: GPUSpec) -> None:
    """Their devices report cudaDevAttrL2CacheSize = 62,914,560 B, not the H100 SXM's 50 MiB (issue 18)."""
    assert spec.l2_bytes == 62_914_560 == 60 * MIB


@pytest.mark.parametrize("spec", [spec for spec in GPUS.values() if spec is not B200], ids=lambda s: s.name)
def test_datasheet_capacities_are_decimal_gigabytes(spec: GPUSpec) -> None:
    """Every datasheet capacity is a whole number of decimal GB; stored as GiB it would be 7.4 % larger."""
    assert spec.mem_bytes % GB == 0


def test_b200_memory_is_the_devices_own_figure() -> None:
    assert B200.mem_bytes == 182_631 * MIB  # not 180 × 2**30 (184,320 MiB, 0.9 % more)
    assert resolve_gpu_spec("NVIDIA B200 MIG 3g.90gb").spec.mem_bytes == B200.mem_bytes // 2


def test_h200_is_h100_compute_with_more_bandwidth() -> None:
    assert H200 is H200_SXM
    assert H200.mem_bytes_per_s == 4.8e12
    for field in ("bf16_flops_per_s", "fp16_flops_per_s", "fp32_flops_per_s", "sm_count", "fp32_lanes"):
        assert getattr(H200, field) == getattr(H100, field)


def test_tensor_rates_per_dtype() -> None:
    assert T4.tensor_flops_per_s("fp16") == 65e12
    assert T4.tensor_flops_per_s("bf16") is None  # Turing has no BF16 tensor cores
    # GeForce: the FP32-accumulate rate, half the card's FP16-accumulate 330.3 TFLOPS.
    assert RTX_4090.tensor_flops_per_s("fp16") == pytest.approx(330.3e12 / 2, rel=0.001)
    with pytest.raises(ValueError, match="dtype"):
        H100.tensor_flops_per_s("fp8")


@pytest.mark.parametrize("spec", list(GPUS.values()), ids=list(GPUS))
def test_specs_are_consistent(spec: GPUSpec) -> None:
    assert GPUS[spec.name] is spec
    assert spec.fp32_lanes % spec.sm_count == 0  # whole FP32 lanes per SM
    for rate in (spec.bf16_flops_per_s, spec.fp16_flops_per_s):
        assert rate is None or rate > spec.fp32_flops_per_s > 0
    assert spec.l2_bytes is not None and spec.mem_bytes > spec.l2_bytes > 0


@pytest.mark.parametrize("spec", list(GPUS.values()), ids=list(GPUS))
def test_fp32_lanes_per_sm_agree_with_the_architecture_table(spec: GPUSpec) -> None:
    assert spec.fp32_lanes // spec.sm_count in set(FP32_LANES_PER_SM.values())


@pytest.mark.parametrize(
    ("name", "spec"), [("h100", H100_SXM), ("H200", H200_SXM), ("l40s", L40S), ("t4", T4)]
)
def test_gpu_spec_is_case_insensitive(name: str, spec: GPUSpec) -> None:
    assert gpu_spec(name) is spec


def test_gpu_spec_unknown_names_it_and_lists_known() -> None:
    with pytest.raises(ValueError, match=r"unknown GPU 'nope'.*H100-SXM"):
        gpu_spec("nope")


@pytest.mark.parametrize(
    ("device_name", "spec"),
    [
        ("NVIDIA H200", H200_SXM),
        ("NVIDIA H100 80GB HBM3", H100_SXM),
        ("NVIDIA H100 PCIe", H100_PCIE),
        ("NVIDIA H200 NVL", H200_NVL),
        ("NVIDIA H100 NVL", H100_NVL),
        ("NVIDIA GH200 480GB", GH200_96GB),
        ("NVIDIA GH200 144G HBM3e", GH200_144GB),
        ("NVIDIA A100-SXM4-80GB", A100_SXM_80GB),
        ("NVIDIA A100 80GB PCIe", A100_PCIE_80GB),
        ("NVIDIA A100-PCIE-40GB", A100_40GB),
        ("NVIDIA A10", A10),
        ("NVIDIA L40S", L40S),
        ("NVIDIA RTX 6000 Ada Generation", RTX_6000_ADA),
        ("NVIDIA GeForce RTX 4090", RTX_4090),
        ("NVIDIA L4", L4),
        ("Tesla T4", T4),
        ("NVIDIA B200", B200),
        ("  nvidia   geforce rtx 4090 ", RTX_4090),
        ("NVIDIA A10G", None),  # AWS's variant: different compute; left to a derived spec
        ("NVIDIA GeForce RTX 3060 Laptop GPU", None),
    ],
)
def test_spec_for_device_name(device_name: str, spec: GPUSpec | None) -> None:
    assert spec_for_device_name(device_name) is spec


# --- MIG ---------------------------------------------------------------------------------------------------


def test_mig_slice_never_gets_the_whole_gpu() -> None:
    slice_spec = spec_for_device_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb")
    assert slice_spec is not None and slice_spec is not H100_SXM
    assert slice_spec.source == SOURCE_MIG
    assert slice_spec.name == "H100-SXM MIG 1g.10gb"
    assert slice_spec.mem_bytes_per_s == H100_SXM.mem_bytes_per_s / 8  # 1 of 8 memory slices
    assert slice_spec.mem_bytes == 10 * GB  # 1/8 of the datasheet's 80 GB
    assert slice_spec.sm_count == 132 // 7  # 1 of 7 SM slices, estimated
    assert slice_spec.fp32_lanes == 128 * slice_spec.sm_count
    assert slice_spec.bf16_flops_per_s == pytest.approx(H100_SXM.bf16_flops_per_s * 18 / 132)
    assert slice_spec.l2_bytes is None


@pytest.mark.parametrize(
    ("device_name", "memory_eighths", "sm_sevenths"),
    [
        (
            "NVIDIA H100 80GB HBM3 MIG 1g.20gb",
            2,
            1,
        ),  # MIG user guide, H100: 1/4 of the memory, 1/7 of the SMs
        ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", 4, 3),
        ("NVIDIA H100 80GB HBM3 MIG 7g.80gb", 8, 7),
        ("NVIDIA H200 MIG 1g.18gb", 1, 1),  # H200: 1g.18gb is 1/8 of 141 GB
        ("NVIDIA H200 MIG 3g.71gb", 4, 3),
        ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", 1, 1),
        ("NVIDIA B200 MIG 1g.45gb", 2, 1),
        ("NVIDIA H100 NVL MIG 1g.12gb", 1, 1),
        ("NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb", 4, 1),  # one compute instance of a 3g instance
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", 1, 1),
    ],
)
def test_mig_profiles_scale_by_memory_and_sm_slices(
    device_name: str, memory_eighths: int, sm_sevenths: int
) -> None:
    slice_spec = spec_for_device_name(device_name)
    base = spec_for_device_name(device_name.split(" MIG ")[0])
    assert slice_spec is not None and base is not None
    assert slice_spec.mem_bytes_per_s == pytest.approx(base.mem_bytes_per_s * memory_eighths / 8)
    assert slice_spec.sm_count == base.sm_count * sm_sevenths // 7


@pytest.mark.parametrize(
    "device_name",
    [
        "NVIDIA H100 80GB HBM3 MIG 1g.30gb",  # not a whole number of memory slices
        "NVIDIA H100 80GB HBM3 MIG 8g.80gb",  # more than 7 SM slices
        "NVIDIA H100 80GB HBM3 MIG 4c.3g.40gb",  # a compute instance larger than its GPU instance
        "NVIDIA GeForce RTX 3060 MIG 1g.3gb",  # unknown base GPU
    ],
)
def test_unfitting_or_unknown_mig_slice_gets_no_spec(device_name: str) -> None:
    assert spec_for_device_name(device_name) is None


def test_mig_spec_uses_the_slices_own_sm_count_and_memory() -> None:
    # The MIG user guide's "roughly one seventh": an H100 1g.10gb slice has 16 SMs, not 18.
    slice_spec = mig_spec(H100_SXM, "1g.10gb", sm_count=16, mem_bytes=9_856 * MIB)
    assert slice_spec.sm_count == 16
    assert slice_spec.fp32_flops_per_s == pytest.approx(H100_SXM.fp32_flops_per_s * 16 / 132)
    assert slice_spec.mem_bytes == 9_856 * MIB
    with pytest.raises(ValueError, match="not a MIG profile"):
        mig_spec(H100_SXM, "half")


# --- Specs derived from device attributes ------------------------------------------------------------------

H100_SXM_ATTRIBUTES = {
    "name": "NVIDIA H100 80GB HBM3",
    "memory_clock_hz": 2_619e6,
    "memory_bus_width_bits": 5_120,
    "sm_count": 132,
    "sm_clock_rate_hz": 1_980e6,
    "compute_capability": "9.0",
    "memory_bytes": 85_520_809_984,
}


def _derive(attributes: dict) -> GPUSpec:
    return derive_gpu_spec(
        attributes["name"],
        memory_clock_hz=attributes["memory_clock_hz"],
        memory_bus_width_bits=attributes["memory_bus_width_bits"],
        sm_count=attributes["sm_count"],
        sm_clock_rate_hz=attributes["sm_clock_rate_hz"],
        compute_capability=attributes["compute_capability"],
        memory_bytes=attributes["memory_bytes"],
    )


def test_h100_attributes_give_its_datasheet_bandwidth_and_fp32_rate() -> None:
    derived = _derive(H100_SXM_ATTRIBUTES)
    assert derived.mem_bytes_per_s == 2_619e6 * 5_120 / 8 * 2  # clock × bus bytes × 2 (DDR)
    assert derived.mem_bytes_per_s == pytest.approx(3.35e12, rel=0.001)
    assert derived.fp32_lanes == 16_896
    assert derived.fp32_flops_per_s == pytest.approx(66.9e12, rel=0.001)  # 16,896 × 2 × 1.98 GHz
    assert derived.bf16_flops_per_s is None and derived.fp16_flops_per_s is None
    assert derived.l2_bytes is None
    assert derived.mem_bytes == 85_520_809_984
    assert derived.source == SOURCE_DERIVED


@pytest.mark.parametrize(
    ("memory_clock_hz", "bus_bits", "datasheet_bytes_per_s"),
    [
        (5_001e6, 256, 320e9),  # T4, GDDR6: device query 5,001 MHz, 256-bit
        (10_501e6, 384, 1.008e12),  # RTX 4090, GDDR6X: device query 10,501 MHz, 384-bit
    ],
)
def test_gddr_attributes_give_datasheet_bandwidth(
    memory_clock_hz: float, bus_bits: int, datasheet_bytes_per_s: float
) -> None:
    attributes = H100_SXM_ATTRIBUTES | {"memory_clock_hz": memory_clock_hz, "memory_bus_width_bits": bus_bits}
    assert _derive(attributes).mem_bytes_per_s == pytest.approx(datasheet_bytes_per_s, rel=0.001)


@pytest.mark.parametrize(
    ("value", "capability"),
    [
        ("9.0", (9, 0)),
        ("8.9", (8, 9)),
        ("90", (9, 0)),
        ("100", (10, 0)),
        ((7, 5), (7, 5)),
        ([12, 0], (12, 0)),
    ],
)
def test_compute_capability_forms(value: object, capability: tuple[int, int]) -> None:
    assert parse_compute_capability(value) == capability


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"memory_clock_hz": 0}, "memory_clock_hz"),
        ({"memory_clock_hz": math.nan}, "memory_clock_hz"),
        ({"memory_bus_width_bits": 5120.5}, "memory_bus_width_bits"),
        ({"sm_count": True}, "sm_count"),
        ({"sm_clock_rate_hz": "fast"}, "sm_clock_rate_hz"),
        ({"compute_capability": "nine"}, "compute_capability"),
        ({"compute_capability": "13.0"}, "compute capability 13.0"),
        ({"memory_bytes": None}, "memory_bytes"),
    ],
)
def test_derive_rejects_bad_attributes_naming_them(override: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        _derive(H100_SXM_ATTRIBUTES | override)


# --- The one lookup -----------------------------------------------------------------------------------------


def test_resolve_prefers_the_datasheet() -> None:
    lookup = resolve_gpu_spec("NVIDIA H100 80GB HBM3", H100_SXM_ATTRIBUTES)
    assert lookup.spec is H100_SXM and lookup.source == SOURCE_DATASHEET and lookup.reason is None


def test_resolve_derives_an_unknown_gpu_from_its_attributes() -> None:
    attributes = H100_SXM_ATTRIBUTES | {"name": "NVIDIA GeForce RTX 3060 Laptop GPU"}
    lookup = resolve_gpu_spec(attributes["name"], attributes)
    assert lookup.spec is not None and lookup.source == SOURCE_DERIVED
    assert lookup.spec.name == "NVIDIA GeForce RTX 3060 Laptop GPU"
    assert set(ATTRIBUTE_KEYS) <= set(attributes)


def test_resolve_mig_uses_the_recorded_sm_count() -> None:
    lookup = resolve_gpu_spec("NVIDIA H100 80GB HBM3 MIG 1g.10gb", {"sm_count": 16, "memory_bytes": 10 * GIB})
    assert lookup.spec is not None and lookup.source == SOURCE_MIG
    assert lookup.spec.sm_count == 16
    assert lookup.spec.mem_bytes_per_s == H100_SXM.mem_bytes_per_s / 8


@pytest.mark.parametrize(
    ("name", "attributes", "reason"),
    [
        ("NVIDIA GeForce RTX 3060", None, "no device attributes"),
        ("NVIDIA GeForce RTX 3060", {"sm_count": 28}, "memory_clock_hz"),
        ("NVIDIA GeForce RTX 3060 MIG 1g.3gb", H100_SXM_ATTRIBUTES, "MIG slice"),
        ("NVIDIA H100 80GB HBM3 MIG 1g.30gb", None, "does not fit"),
        (None, H100_SXM_ATTRIBUTES, "no GPU name"),
        ("", None, "no GPU name"),
    ],
)
def test_resolve_without_a_spec_says_why(name: object, attributes: dict | None, reason: str) -> None:
    lookup = resolve_gpu_spec(name, attributes)
    assert lookup.spec is None and lookup.source is None
    assert lookup.reason is not None and reason in lookup.reason
