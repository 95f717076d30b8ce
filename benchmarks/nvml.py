"""The GPU's conditions during a run, through NVML: clocks, power, temperature, throttling, at start and end.

Clocks, power, temperature and throttle reasons change from run to run, so they belong in the run record
(``benchmarks.run_record``), taken at the start and the end of a session, never in ``machine_info``. Two
snapshots of *current* throttle reasons would miss a slowdown in between (at the end the GPU is idle), so
each snapshot also holds NVML's cumulative violation counters (``nvmlDeviceGetViolationStatus``: ns spent
held back by power, heat, the board's limits, ... since the driver loaded) and the energy counter; their
growth between start and end (``throttled_between``) says whether, and for how long, the run was slowed.

NVML is reached through ``pynvml`` (nvidia-ml-py, the CUDA extras) where it is installed, else straight from
the driver's ``libnvidia-ml.so.1`` through ctypes (``DriverNvml``): the prepared GPU run installs nothing,
and the library ships with every driver. Both are optional: without them, or without a usable CUDA device,
``gpu_conditions`` returns a dict that says why (or None when there is no GPU at all), and never raises.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Mapping
from typing import Any

#: NVML's clock-event (throttle) reason bits -> the names the run record uses (nvml.h,
#: ``nvmlClocksEventReason*``; 0x200 and 0x400 as nvidia-ml-py's ``nvmlClocksThrottleReasonBoardLimit`` and
#: ``...Reliability``). ``GpuIdle`` is not a slowdown of work and is reported but never a throttle.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}
#: The reasons that mean the GPU ran below the clocks it would otherwise run at, for power, heat or limits.
SLOWDOWN_REASONS = frozenset(
    {
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "board_limit",
        "reliability",
    }
)
#: NVML's performance policies (``nvmlPerfPolicyType_t``) whose violation time a snapshot records.
VIOLATION_POLICIES = {
    "power": 0,
    "thermal": 1,
    "sync_boost": 2,
    "board_limit": 3,
    "low_utilization": 4,
    "reliability": 5,
    "total_app_clocks": 10,
    "total_base_clocks": 11,
}
#: The policies whose violation time means the run was slowed (power, heat, board limits, reliability, or
#: held below the base clock at all).
SLOWDOWN_POLICIES = ("power", "thermal", "board_limit", "reliability", "total_base_clocks")


def gpu_conditions(device_id: int = 0) -> dict[str, Any] | None:
    """The conditions of CUDA device ``device_id`` now, or None when CUDA cases cannot run here.

    Keys: ``sm_clock_hz``, ``memory_clock_hz``, ``sm_clock_max_hz`` (Hz), ``power_w``, ``power_limit_w`` (W),
    ``temperature_c`` (°C), ``pstate`` (0 = P0, the fastest), ``throttle_reasons`` (names from
    ``THROTTLE_REASONS``), ``persistence_mode`` (bool), ``energy_j`` (since the driver loaded, J),
    ``violation_time_ns`` (policy -> ns held back since the driver loaded), ``nvml_source`` ("pynvml" or
    "libnvidia-ml"); each value None where NVML does not answer for this GPU. Where NVML itself is unusable
    the one key ``nvml_error`` says why.
    """
    from benchmarks import cuda

    if cuda.unavailable_reason() is not None:
        return None
    try:  # the device first: a GPU that fails is the fact to record, whether or not NVML is here
        bus_id = cuda.cupy_module().cuda.runtime.deviceGetPCIBusId(device_id)
    except Exception as error:  # CUDARuntimeError: a device that fails after the probe
        return {"nvml_error": f"{type(error).__name__}: {error}"}
    nvml, source = _nvml()
    if nvml is None:
        return {"nvml_error": source}
    try:
        nvml.nvmlInit()
    except Exception as error:  # NVMLError: no driver library, driver mismatch
        return {"nvml_error": f"{type(error).__name__}: {error}"}
    try:
        handle = nvml.nvmlDeviceGetHandleByPciBusId(bus_id.encode() if isinstance(bus_id, str) else bus_id)
        return {**_read(nvml, handle), "nvml_source": source}
    except Exception as error:  # NVMLError: a GPU NVML does not know, or a driver error
        return {"nvml_error": f"{type(error).__name__}: {error}"}
    finally:
        with contextlib.suppress(Exception):  # shutdown after a failed init: nothing to release
            nvml.nvmlShutdown()


def throttle_names(mask: int) -> list[str]:
    """The names of the reason bits set in NVML's clock-event ``mask``; unknown bits as hex."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    return [*names, f"0x{unknown:x}"] if unknown else names


def throttled_between(
    start: Mapping[str, Any] | None, end: Mapping[str, Any] | None
) -> dict[str, float] | None:
    """Seconds the GPU was held back per ``SLOWDOWN_POLICIES`` policy between two ``gpu_conditions``
    snapshots (only policies whose counter grew); {} for a run that was never slowed, None where the two
    snapshots do not both hold the counters (no GPU, no NVML, counters refused)."""
    before = (start or {}).get("violation_time_ns") or {}
    after = (end or {}).get("violation_time_ns") or {}
    grown = {}
    known = False
    for policy in SLOWDOWN_POLICIES:
        first, last = before.get(policy), after.get(policy)
        if first is None or last is None:
            continue
        known = True
        if last > first:
            grown[policy] = (last - first) * 1e-9
    return grown if known else None


def _nvml() -> tuple[Any, str]:
    """(an NVML binding, its name) — ``pynvml`` if importable, else ``DriverNvml`` — or (None, why not)."""
    try:
        import pynvml
    except ImportError:
        pass
    else:
        return pynvml, "pynvml"
    try:
        return DriverNvml(), "libnvidia-ml"
    except OSError as error:
        return None, (
            f"no NVML: nvidia-ml-py is not installed and the driver's NVML library cannot be loaded ({error})"
        )


def _read(nvml: Any, handle: Any) -> dict[str, Any]:
    """Every condition of ``handle`` NVML answers for; None for each it refuses (NotSupported)."""

    def ask(call: Any, *args: Any) -> Any:
        try:
            return call(handle, *args)
        except nvml.NVMLError:
            return None

    def scaled(value: float | None, factor: float) -> float | None:
        return None if value is None else value * factor

    reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    mask = ask(reasons) if reasons is not None else None
    persistence = ask(nvml.nvmlDeviceGetPersistenceMode)
    violations = {}
    for policy, number in VIOLATION_POLICIES.items():
        status = ask(nvml.nvmlDeviceGetViolationStatus, number)
        violations[policy] = None if status is None else int(status.violationTime)
    return {
        "sm_clock_hz": scaled(ask(nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_SM), 1e6),
        "memory_clock_hz": scaled(ask(nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_MEM), 1e6),
        "sm_clock_max_hz": scaled(ask(nvml.nvmlDeviceGetMaxClockInfo, nvml.NVML_CLOCK_SM), 1e6),
        "power_w": scaled(ask(nvml.nvmlDeviceGetPowerUsage), 1e-3),
        "power_limit_w": scaled(ask(nvml.nvmlDeviceGetEnforcedPowerLimit), 1e-3),
        "temperature_c": ask(nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU),
        "pstate": ask(nvml.nvmlDeviceGetPerformanceState),
        "throttle_reasons": throttle_names(int(mask)) if mask is not None else None,
        "persistence_mode": bool(persistence) if persistence is not None else None,
        "energy_j": scaled(ask(nvml.nvmlDeviceGetTotalEnergyConsumption), 1e-3),
        "violation_time_ns": violations,
    }


class _ViolationTime(ctypes.Structure):
    """``nvmlViolationTime_t``: ``referenceTime`` (CPU timestamp, µs), ``violationTime`` (ns)."""

    _fields_ = (("referenceTime", ctypes.c_ulonglong), ("violationTime", ctypes.c_ulonglong))


class DriverNvml:
    """The NVML calls ``_read`` makes, named as ``pynvml`` names them, straight from the driver's library.

    NVML's C API keeps its signatures across drivers (the reason NVIDIA points tools at it rather than at
    ``nvidia-smi``'s output); each function is looked up when called, so one a driver lacks fails alone, as an
    ``NVMLError``, and its condition is recorded as None.
    """

    NVML_CLOCK_SM = 1  # nvmlClockType_t
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0  # nvmlTemperatureSensors_t
    LIBRARY = "libnvidia-ml.so.1"

    class NVMLError(Exception):
        """An NVML call that returned an error (its ``nvmlErrorString`` and code in the message)."""

    def __init__(self, library: Any = None) -> None:
        self._lib = library if library is not None else ctypes.CDLL(self.LIBRARY)

    def _call(self, name: str, *args: Any) -> None:
        try:
            function = getattr(self._lib, name)
        except AttributeError:
            raise self.NVMLError(f"{name}: not in this driver's NVML") from None
        function.restype = ctypes.c_int
        status = function(*args)
        if status != 0:
            raise self.NVMLError(f"{name}: {self._error_string(status)} (NVML error {status})")

    def _error_string(self, status: int) -> str:
        try:
            describe = self._lib.nvmlErrorString
        except AttributeError:
            return "unknown error"
        describe.restype = ctypes.c_char_p
        text = describe(ctypes.c_int(status))
        return text.decode(errors="replace") if isinstance(text, bytes) else str(text)

    def _read_value(self, name: str, handle: Any, value: Any, *args: Any) -> Any:
        self._call(name, handle, *args, ctypes.byref(value))
        return value.value

    def nvmlInit(self) -> None:
        self._call("nvmlInit_v2")

    def nvmlShutdown(self) -> None:
        self._call("nvmlShutdown")

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: bytes) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        self._call("nvmlDeviceGetHandleByPciBusId_v2", ctypes.c_char_p(bus_id), ctypes.byref(handle))
        return handle

    def nvmlDeviceGetClockInfo(self, handle: Any, clock: int) -> int:
        return self._read_value("nvmlDeviceGetClockInfo", handle, ctypes.c_uint(), ctypes.c_int(clock))

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, clock: int) -> int:
        return self._read_value("nvmlDeviceGetMaxClockInfo", handle, ctypes.c_uint(), ctypes.c_int(clock))

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self._read_value("nvmlDeviceGetPowerUsage", handle, ctypes.c_uint())

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return self._read_value("nvmlDeviceGetEnforcedPowerLimit", handle, ctypes.c_uint())

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        return self._read_value("nvmlDeviceGetTemperature", handle, ctypes.c_uint(), ctypes.c_int(sensor))

    def nvmlDeviceGetPerformanceState(self, handle: Any) -> int:
        return self._read_value("nvmlDeviceGetPerformanceState", handle, ctypes.c_int())

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        return self._read_value("nvmlDeviceGetCurrentClocksEventReasons", handle, ctypes.c_ulonglong())

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        return self._read_value("nvmlDeviceGetPersistenceMode", handle, ctypes.c_int())

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        return self._read_value("nvmlDeviceGetTotalEnergyConsumption", handle, ctypes.c_ulonglong())

    def nvmlDeviceGetViolationStatus(self, handle: Any, policy: int) -> _ViolationTime:
        status = _ViolationTime()
        self._call("nvmlDeviceGetViolationStatus", handle, ctypes.c_int(policy), ctypes.byref(status))
        return status
