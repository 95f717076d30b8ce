"""model.hardware: GPU specs as data."""

import pytest

from model.hardware import (
    A100_SXM_80GB,
    B200,
    GPUS,
    H100,
    H100_PCIE,
    H100_SXM,
    H200,
    H200_SXM,
    L40S,
    gpu_spec,
    spec_for_device_name,
)


def test_h100_sxm_figures() -> None:
    assert H100 is H100_SXM
    assert H100.mem_bytes_per_s == 3.35e12
    assert H100.bf16_flops_per_s == 989.4e12
    assert H100.sm_count == 132
    assert H100.fp32_lanes == 16_896
    assert H100.l2_bytes == 50 * 2**20


def test_h200_is_h100_compute_with_more_bandwidth() -> None:
    assert H200 is H200_SXM
    assert H200.mem_bytes_per_s == 4.8e12
    for field in ("bf16_flops_per_s", "fp32_flops_per_s", "sm_count", "fp32_lanes", "l2_bytes"):
        assert getattr(H200, field) == getattr(H100, field)


@pytest.mark.parametrize("spec", list(GPUS.values()), ids=list(GPUS))
def test_specs_are_consistent(spec) -> None:
    assert GPUS[spec.name] is spec
    assert spec.fp32_lanes % spec.sm_count == 0  # whole FP32 lanes per SM
    assert spec.bf16_flops_per_s > spec.fp32_flops_per_s > 0
    assert spec.mem_bytes > spec.l2_bytes > 0


def test_catalogue_has_required_gpus() -> None:
    assert set(GPUS) >= {"H100-SXM", "H100-PCIe", "H200-SXM", "A100-SXM-80GB", "A100-40GB", "L40S", "B200"}


@pytest.mark.parametrize(("name", "spec"), [("h100", H100_SXM), ("H200", H200_SXM), ("l40s", L40S)])
def test_gpu_spec_is_case_insensitive(name: str, spec) -> None:
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
        ("NVIDIA A100-SXM4-80GB", A100_SXM_80GB),
        ("NVIDIA L40S", L40S),
        ("NVIDIA B200", B200),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_spec_for_device_name(device_name: str, spec) -> None:
    assert spec_for_device_name(device_name) is spec
