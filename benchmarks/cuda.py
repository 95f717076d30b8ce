"""The one place that decides whether CUDA cases can run, and says why not.

CuPy is imported lazily, so a machine without it (or without a driver or a device) imports every module
and gets one clear skip reason instead of a crash.
"""

from __future__ import annotations

import functools
import subprocess
from types import ModuleType


@functools.cache
def _probe() -> tuple[ModuleType | None, str | None]:
    """Return (cupy, None) when a CUDA device is usable, else (None, the reason it is not)."""
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed (pip install 'launchbench[cuda12]' or '[cuda13]')"
    except Exception as error:  # a broken CUDA install fails inside CuPy's import with various errors
        return None, f"CuPy failed to import: {type(error).__name__}: {error}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CUDARuntimeError without a driver; others on a broken runtime
        return None, f"CuPy sees no CUDA driver or device: {type(error).__name__}: {error}"
    if count < 1:
        return None, "CuPy sees no CUDA device (device count is 0)"
    try:  # CuPy's wheel carries the runtime but not NVRTC, which compiles every kernel of these cases
        cupy.cuda.nvrtc.getVersion()
    except Exception as error:  # DynamicLibNotFoundError (no libnvrtc) or a CUDA error from it
        return None, (
            "CuPy sees a CUDA device but cannot load NVRTC, which compiles the kernels: "
            f"{type(error).__name__}: {error} (pip install 'launchbench[cuda13]' or '[cuda12]': their CuPy "
            "brings the CUDA libraries; or install a CUDA toolkit)"
        )
    return cupy, None


def unavailable_reason() -> str | None:
    """Return why CUDA cases cannot run here, or None when they can."""
    return _probe()[1]


def cupy_module() -> ModuleType:
    """Return the imported ``cupy`` module; raises ``RuntimeError`` with the reason when CUDA is unusable."""
    cupy, reason = _probe()
    if cupy is None:
        raise RuntimeError(reason)
    return cupy


def _nvidia_smi_clocks_hz(pci_bus_id: str) -> dict[str, float]:
    """Return the SM clock now and its maximum, Hz, as ``nvidia-smi`` reports them; empty where it cannot.

    The GPU is named by PCI bus id because ``nvidia-smi``'s indices ignore ``CUDA_VISIBLE_DEVICES``.
    """
    command = [
        "nvidia-smi",
        f"--id={pci_bus_id}",
        "--query-gpu=clocks.sm,clocks.max.sm",
        "--format=csv,noheader,nounits",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=True)
        sm_mhz, max_sm_mhz = (float(field) for field in done.stdout.strip().splitlines()[0].split(","))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):  # no tool, no driver, "[N/A]"
        return {}
    return {"sm_clock_hz": sm_mhz * 1e6, "sm_clock_max_hz": max_sm_mhz * 1e6}


def _attribute_clock_hz(cupy: ModuleType, device_id: int) -> dict[str, float]:
    """Return the SM clock rate the runtime reports (``cudaDevAttrClockRate``, kHz), Hz; empty if refused.

    CUDA 13 removed ``clockRate`` from ``cudaDeviceProp``; the device attribute is the query that remains.
    """
    runtime = cupy.cuda.runtime
    try:
        khz = runtime.deviceGetAttribute(runtime.cudaDevAttrClockRate, device_id)
    except Exception:  # CUDARuntimeError or a missing enum on a runtime without the attribute
        return {}
    return {"sm_clock_rate_hz": float(khz) * 1e3}


def _version_text(version: int) -> str:
    """Turn CUDA's integer version (e.g. 12040) into "12.4"."""
    return f"{version // 1000}.{version % 1000 // 10}"


def gpu_info(device_id: int = 0) -> dict[str, object] | None:
    """Return the metadata a saved run carries about the GPU, or None when no CUDA device is usable.

    Keys: ``name``, ``compute_capability`` ("9.0"), ``sm_count``, ``memory_bytes``, ``driver_version`` and
    ``runtime_version`` ("12.4"), ``cupy_version``, and, where the source answers, ``sm_clock_rate_hz`` (the
    runtime's nominal SM clock), ``sm_clock_hz`` / ``sm_clock_max_hz`` (``nvidia-smi``'s SM clock at start and
    its maximum). Clocks are Hz, memory bytes.
    """
    if unavailable_reason() is not None:
        return None
    cupy = cupy_module()
    runtime = cupy.cuda.runtime
    props = runtime.getDeviceProperties(device_id)
    name = props["name"]
    info: dict[str, object] = {
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "sm_count": int(props["multiProcessorCount"]),
        "memory_bytes": int(props["totalGlobalMem"]),
        "driver_version": _version_text(runtime.driverGetVersion()),
        "runtime_version": _version_text(runtime.runtimeGetVersion()),
        "cupy_version": cupy.__version__,
    }
    info.update(_attribute_clock_hz(cupy, device_id))
    info.update(_nvidia_smi_clocks_hz(runtime.deviceGetPCIBusId(device_id)))
    return info
