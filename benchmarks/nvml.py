"""The GPU's conditions during a run, through NVML (``nvidia-ml-py``: CUDA extras, optional at run time).

Clocks, power, temperature and throttle reasons change from run to run, so they belong in the run record
(``benchmarks.run_record``), taken at the start and the end of a session, never in ``machine_info``. A GPU
that throttled while it was measured ran slower than its spec; the run's verdict says so.

``pynvml`` is imported lazily: without it, or without a usable CUDA device, ``gpu_conditions`` returns a
dict that says why (or None when there is no GPU at all), never raises.
"""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any

#: NVML's clock-event (throttle) reason bits -> the names the run record uses (nvml.h,
#: ``nvmlClocksEventReason*``; ``GpuIdle`` is not a slowdown of work and is reported but never a throttle).
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
}
#: The reasons that mean the GPU ran below the clocks it would otherwise run at, for power or heat.
SLOWDOWN_REASONS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)


def gpu_conditions(device_id: int = 0) -> dict[str, Any] | None:
    """The conditions of CUDA device ``device_id`` now, or None when CUDA cases cannot run here.

    Keys: ``sm_clock_hz``, ``memory_clock_hz``, ``sm_clock_max_hz`` (Hz), ``power_w``, ``power_limit_w`` (W),
    ``temperature_c`` (°C), ``throttle_reasons`` (names from ``THROTTLE_REASONS``), ``persistence_mode``
    (bool); each None where NVML does not answer for this GPU. Where NVML itself is unusable, the one key
    ``nvml_error`` says why.
    """
    from benchmarks import cuda

    if cuda.unavailable_reason() is not None:
        return None
    try:
        import pynvml
    except ImportError:
        return {"nvml_error": "nvidia-ml-py is not installed (pip install 'launchbench[cuda13]')"}
    try:
        bus_id = cuda.cupy_module().cuda.runtime.deviceGetPCIBusId(device_id)
        pynvml.nvmlInit()
    except Exception as error:  # NVMLError (no libnvidia-ml), CUDARuntimeError
        return {"nvml_error": f"{type(error).__name__}: {error}"}
    try:
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id.encode() if isinstance(bus_id, str) else bus_id)
        return _read(pynvml, handle)
    except Exception as error:  # NVMLError: a GPU NVML does not know, or a driver error
        return {"nvml_error": f"{type(error).__name__}: {error}"}
    finally:
        with contextlib.suppress(Exception):  # shutdown after a failed init: nothing to release
            pynvml.nvmlShutdown()


def throttle_names(mask: int) -> list[str]:
    """The names of the reason bits set in NVML's clock-event ``mask``; unknown bits as hex."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    return [*names, f"0x{unknown:x}"] if unknown else names


def _read(pynvml: ModuleType, handle: Any) -> dict[str, Any]:
    """Every condition of ``handle`` NVML answers for; None for each it refuses (NotSupported)."""

    def ask(call: Any, *args: Any) -> Any:
        try:
            return call(handle, *args)
        except pynvml.NVMLError:
            return None

    sm_mhz = ask(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_SM)
    memory_mhz = ask(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_MEM)
    max_sm_mhz = ask(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_SM)
    power_mw = ask(pynvml.nvmlDeviceGetPowerUsage)
    limit_mw = ask(pynvml.nvmlDeviceGetEnforcedPowerLimit)
    reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    mask = ask(reasons) if reasons is not None else None
    persistence = ask(pynvml.nvmlDeviceGetPersistenceMode)
    return {
        "sm_clock_hz": sm_mhz * 1e6 if sm_mhz is not None else None,
        "memory_clock_hz": memory_mhz * 1e6 if memory_mhz is not None else None,
        "sm_clock_max_hz": max_sm_mhz * 1e6 if max_sm_mhz is not None else None,
        "power_w": power_mw / 1e3 if power_mw is not None else None,
        "power_limit_w": limit_mw / 1e3 if limit_mw is not None else None,
        "temperature_c": ask(pynvml.nvmlDeviceGetTemperature, pynvml.NVML_TEMPERATURE_GPU),
        "throttle_reasons": throttle_names(int(mask)) if mask is not None else None,
        "persistence_mode": bool(persistence) if persistence is not None else None,
    }
