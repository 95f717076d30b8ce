"""``benchmarks/nvml.py`` against stand-ins of its two NVML bindings (no GPU here): nvidia-ml-py's ``pynvml``
module, and the driver's ``libnvidia-ml`` as ``DriverNvml`` calls it through ctypes. Each must give the same
conditions in SI units, None for what NVML refuses, one ``nvml_error`` line where NVML is unusable, and the
violation counters that tell a throttled run from one that was not."""

from __future__ import annotations

import ctypes
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks import cuda, nvml

BUS_ID = "00000000:3B:00.0"
#: What the stand-ins report: an H200 under load, held back 2 ms by power since the driver loaded.
CLOCKS_MHZ = {1: 1980, 2: 3201}  # NVML_CLOCK_SM, NVML_CLOCK_MEM
MAX_SM_MHZ = 1980
POWER_MW, LIMIT_MW, TEMPERATURE_C, PSTATE = 512_345, 700_000, 61, 0
REASONS = 0x4 | 0x800  # sw_power_cap and a bit NVML may add later
ENERGY_MJ = 9_876_543
VIOLATIONS_NS = {0: 2_000_000, 1: 0, 2: 0, 3: 0, 4: 50, 5: 0, 10: 7, 11: 0}
EXPECTED = {
    "sm_clock_hz": 1.98e9,
    "memory_clock_hz": 3.201e9,
    "sm_clock_max_hz": 1.98e9,
    "power_w": 512.345,
    "power_limit_w": 700.0,
    "temperature_c": TEMPERATURE_C,
    "pstate": 0,
    "throttle_reasons": ["sw_power_cap", "0x800"],
    "persistence_mode": None,  # refused by both stand-ins: NotSupported
    "energy_j": 9876.543,
    "violation_time_ns": {
        policy: VIOLATIONS_NS[number] for policy, number in nvml.VIOLATION_POLICIES.items()
    },
}


@pytest.fixture
def usable_gpu(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """CUDA usable, with one device at ``BUS_ID``; returns the log the stand-in bindings append to."""
    runtime = SimpleNamespace(deviceGetPCIBusId=lambda device: BUS_ID)
    monkeypatch.setattr(cuda, "unavailable_reason", lambda: None)
    monkeypatch.setattr(cuda, "cupy_module", lambda: SimpleNamespace(cuda=SimpleNamespace(runtime=runtime)))
    return []


def _fake_pynvml(log: list[str]) -> SimpleNamespace:
    class NVMLError(Exception):
        pass

    def refused(*args: Any) -> Any:
        raise NVMLError("Not Supported")

    def handle_by_bus(bus: bytes) -> str:
        log.append(f"handle {bus!r}")
        return "handle"

    return SimpleNamespace(
        NVMLError=NVMLError,
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: log.append("init"),
        nvmlShutdown=lambda: log.append("shutdown"),
        nvmlDeviceGetHandleByPciBusId=handle_by_bus,
        nvmlDeviceGetClockInfo=lambda handle, clock: CLOCKS_MHZ[clock],
        nvmlDeviceGetMaxClockInfo=lambda handle, clock: MAX_SM_MHZ,
        nvmlDeviceGetPowerUsage=lambda handle: POWER_MW,
        nvmlDeviceGetEnforcedPowerLimit=lambda handle: LIMIT_MW,
        nvmlDeviceGetTemperature=lambda handle, sensor: TEMPERATURE_C,
        nvmlDeviceGetPerformanceState=lambda handle: PSTATE,
        nvmlDeviceGetCurrentClocksEventReasons=lambda handle: REASONS,
        nvmlDeviceGetPersistenceMode=refused,
        nvmlDeviceGetTotalEnergyConsumption=lambda handle: ENERGY_MJ,
        nvmlDeviceGetViolationStatus=lambda handle, policy: SimpleNamespace(
            violationTime=VIOLATIONS_NS[policy]
        ),
    )


def test_without_a_usable_gpu_there_are_no_conditions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda, "unavailable_reason", lambda: "CuPy is not installed")
    assert nvml.gpu_conditions() is None


def test_conditions_through_pynvml(monkeypatch: pytest.MonkeyPatch, usable_gpu: list[str]) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(usable_gpu))
    assert nvml.gpu_conditions() == EXPECTED | {"nvml_source": "pynvml"}
    assert usable_gpu == ["init", f"handle {BUS_ID.encode()!r}", "shutdown"]


def test_a_gpu_nvml_does_not_know_says_why(monkeypatch: pytest.MonkeyPatch, usable_gpu: list[str]) -> None:
    fake = _fake_pynvml(usable_gpu)
    fake.nvmlDeviceGetHandleByPciBusId = lambda bus: (_ for _ in ()).throw(fake.NVMLError("Not Found"))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert nvml.gpu_conditions() == {"nvml_error": "NVMLError: Not Found"}
    assert usable_gpu == ["init", "shutdown"]


def test_without_pynvml_or_the_driver_library_one_line_says_why(
    monkeypatch: pytest.MonkeyPatch, usable_gpu: list[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # ``import pynvml`` raises ImportError
    monkeypatch.setattr(nvml.DriverNvml, "LIBRARY", "libnvidia-ml-that-is-not-here.so.1")
    conditions = nvml.gpu_conditions()
    assert list(conditions) == ["nvml_error"]
    assert conditions["nvml_error"].startswith(
        "no NVML: nvidia-ml-py is not installed and the driver's NVML library cannot be loaded ("
    )
    assert "libnvidia-ml-that-is-not-here.so.1" in conditions["nvml_error"]


def _fake_library(log: list[str]) -> SimpleNamespace:
    """The C functions ``DriverNvml`` calls, as ctypes hands them their arguments (``byref`` out-values)."""

    def out(value: Any) -> Any:
        def function(handle: Any, *rest: Any) -> int:
            rest[-1]._obj.value = value(*(arg.value for arg in rest[:-1]))
            return 0

        return function

    def handle_by_bus(bus: ctypes.c_char_p, handle: Any) -> int:
        log.append(f"handle {bus.value!r}")
        handle._obj.value = 0x1234
        return 0

    def violations(handle: Any, policy: ctypes.c_int, status: Any) -> int:
        status._obj.violationTime = VIOLATIONS_NS[policy.value]
        return 0

    return SimpleNamespace(
        nvmlInit_v2=lambda: log.append("init") or 0,
        nvmlShutdown=lambda: log.append("shutdown") or 0,
        nvmlErrorString=lambda status: b"Not Supported" if status.value == 3 else b"Unknown Error",
        nvmlDeviceGetHandleByPciBusId_v2=handle_by_bus,
        nvmlDeviceGetClockInfo=out(lambda clock: CLOCKS_MHZ[clock]),
        nvmlDeviceGetMaxClockInfo=out(lambda clock: MAX_SM_MHZ),
        nvmlDeviceGetPowerUsage=out(lambda: POWER_MW),
        nvmlDeviceGetEnforcedPowerLimit=out(lambda: LIMIT_MW),
        nvmlDeviceGetTemperature=out(lambda sensor: TEMPERATURE_C),
        nvmlDeviceGetPerformanceState=out(lambda: PSTATE),
        nvmlDeviceGetCurrentClocksEventReasons=out(lambda: REASONS),
        nvmlDeviceGetPersistenceMode=lambda handle, state: 3,  # NVML_ERROR_NOT_SUPPORTED
        nvmlDeviceGetTotalEnergyConsumption=out(lambda: ENERGY_MJ),
        nvmlDeviceGetViolationStatus=violations,
    )


def test_conditions_straight_from_the_driver_library(
    monkeypatch: pytest.MonkeyPatch, usable_gpu: list[str]
) -> None:
    binding = nvml.DriverNvml(_fake_library(usable_gpu))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed: the driver's library
    monkeypatch.setattr(nvml, "DriverNvml", lambda: binding)
    assert nvml.gpu_conditions() == EXPECTED | {"nvml_source": "libnvidia-ml"}
    assert usable_gpu == ["init", f"handle {BUS_ID.encode()!r}", "shutdown"]


def test_the_driver_binding_names_each_failure() -> None:
    library = _fake_library([])
    binding = nvml.DriverNvml(library)
    with pytest.raises(
        nvml.DriverNvml.NVMLError, match=r"nvmlDeviceGetPersistenceMode: Not Supported \(NVML error 3\)"
    ):
        binding.nvmlDeviceGetPersistenceMode(ctypes.c_void_p(1))
    del library.nvmlDeviceGetPowerUsage
    with pytest.raises(nvml.DriverNvml.NVMLError, match="nvmlDeviceGetPowerUsage: not in this driver's NVML"):
        binding.nvmlDeviceGetPowerUsage(ctypes.c_void_p(1))
    conditions = nvml._read(binding, ctypes.c_void_p(1))
    assert conditions["power_w"] is None and conditions["sm_clock_hz"] == 1.98e9  # one refusal, alone


def _snapshot(**violations: int) -> dict[str, Any]:
    return {"violation_time_ns": dict.fromkeys(nvml.VIOLATION_POLICIES, 0) | violations}


def test_throttled_between_says_for_how_long_each_slowdown_held_the_run_back() -> None:
    start = _snapshot(power=5_000_000, sync_boost=9)
    end = _snapshot(power=7_500_000_000, thermal=2_000_000, sync_boost=99, low_utilization=10**9)
    assert nvml.throttled_between(start, end) == pytest.approx({"power": 7.495, "thermal": 0.002})
    assert nvml.throttled_between(start, start) == {}, "a run never slowed: no policy grew"
    assert nvml.throttled_between(start, {"nvml_error": "no NVML"}) is None
    assert nvml.throttled_between(None, None) is None
    refused = {"violation_time_ns": dict.fromkeys(nvml.VIOLATION_POLICIES)}
    assert nvml.throttled_between(refused, refused) is None


def test_throttle_names() -> None:
    assert nvml.throttle_names(0) == []
    assert nvml.throttle_names(0x1 | 0x40) == ["gpu_idle", "hw_thermal_slowdown"]
    assert nvml.throttle_names(0x1000) == ["0x1000"]
    assert set(nvml.SLOWDOWN_REASONS) <= set(nvml.THROTTLE_REASONS.values())


def test_every_nvml_call_exists_in_nvidia_ml_py_and_in_the_driver_binding() -> None:
    """The names ``_read`` asks a binding for, recorded, exist in the installed nvidia-ml-py (skipped where it
    is not installed) and in ``DriverNvml``: neither binding can fail on a name the other has."""
    asked: list[str] = []

    class Recorder:
        NVMLError = Exception

        def __getattr__(self, name: str) -> Any:
            asked.append(name)
            if name.startswith("NVML_"):
                return 0
            if name == "nvmlDeviceGetViolationStatus":
                return lambda *args: SimpleNamespace(violationTime=0)
            return lambda *args: 0

    nvml._read(Recorder(), "handle")
    asked += ["nvmlInit", "nvmlShutdown", "nvmlDeviceGetHandleByPciBusId", "NVMLError"]
    missing = [name for name in asked if not hasattr(nvml.DriverNvml, name)]
    assert not missing, f"DriverNvml lacks {missing}"
    pynvml = pytest.importorskip("pynvml")
    missing = [name for name in asked if not hasattr(pynvml, name)]
    assert not missing, f"nvidia-ml-py {getattr(pynvml, '__version__', '')} lacks {missing}"
    assert (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM, pynvml.NVML_TEMPERATURE_GPU) == (
        nvml.DriverNvml.NVML_CLOCK_SM,
        nvml.DriverNvml.NVML_CLOCK_MEM,
        nvml.DriverNvml.NVML_TEMPERATURE_GPU,
    )
    for policy, number in nvml.VIOLATION_POLICIES.items():
        assert getattr(pynvml, f"NVML_PERF_POLICY_{policy.upper()}") == number
    for bit, name in nvml.THROTTLE_REASONS.items():
        camel = "".join(word.title() for word in name.split("_"))  # sw_power_cap -> SwPowerCap
        assert getattr(pynvml, f"nvmlClocksThrottleReason{camel}") == bit, name
