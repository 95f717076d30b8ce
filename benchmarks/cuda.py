"""The one place that decides whether CUDA cases can run, and says why not.

CuPy is imported lazily, so a machine without it (or without a driver or a device) imports every module
and gets one clear skip reason instead of a crash. The probe does, once per process, the least that every
CUDA case needs, in the order a broken install fails:

1. ``import cupy``;
2. a device count ≥ 1 (a driver, a device);
3. NVRTC loads (CuPy's wheel carries the runtime but not NVRTC, which compiles every kernel here);
4. a trivial ``RawModule`` compiles and loads: CuPy 14.2 raises "Failed to find CUDA headers" when it cannot
   find the runtime's headers, even for a kernel that includes none;
5. a real device call: allocate, launch that kernel, synchronise, read its result back, so a GPU that
   answers ``getDeviceCount`` but fails every call after it (a lost device, a driver/runtime mismatch) is
   caught here instead of inside a case;
6. a cuBLAS handle (``test_cuda_matvec`` checks its kernel against cuBLAS, and the GPU decode case its
   logits against a cuBLAS reference).

Any failure makes every CUDA case skip with that step's reason.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from benchmarks.run_notes import record_fault

#: The probe's kernel: header-free, with a visible result.
PROBE_SOURCE = 'extern "C" __global__ void launchbench_probe(int* out) { *out = 42; }'
PROBE_VALUE = 42
#: Options passed to NVRTC for every module, the probe's and ``benchmarks.kernels``' (CuPy 14 also defaults
#: to C++17; older CuPy does not).
COMPILE_OPTIONS = ("-std=c++17",)
_INSTALL_HINT = (
    "pip install 'launchbench[cuda13]' or '[cuda12]': their CuPy brings the CUDA libraries; or install a "
    "CUDA toolkit"
)


def _error(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _run_probe_kernel(cupy: ModuleType) -> None:
    """Compile ``PROBE_SOURCE``, launch it once, wait, and check what it wrote."""
    kernel = cupy.RawModule(code=PROBE_SOURCE, options=COMPILE_OPTIONS).get_function("launchbench_probe")
    out = cupy.zeros(1, dtype=cupy.int32)
    kernel((1,), (1,), (out,))
    cupy.cuda.runtime.deviceSynchronize()
    value = int(out.get()[0])
    if value != PROBE_VALUE:
        raise RuntimeError(f"the probe kernel wrote {value}, not {PROBE_VALUE}")


@functools.cache
def _probe() -> tuple[ModuleType | None, str | None]:
    """Return (cupy, None) when CUDA cases can run, else (None, the reason they cannot)."""
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed (pip install 'launchbench[cuda12]' or '[cuda13]')"
    except Exception as error:  # a broken CUDA install fails inside CuPy's import with various errors
        return None, f"CuPy failed to import: {_error(error)}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CUDARuntimeError without a driver; others on a broken runtime
        return None, f"CuPy sees no CUDA driver or device: {_error(error)}"
    if count < 1:
        return None, "CuPy sees no CUDA device (device count is 0)"
    steps: tuple[tuple[str, Callable[[], Any]], ...] = (
        ("cannot load NVRTC, which compiles the kernels", cupy.cuda.nvrtc.getVersion),
        ("failed to compile, load and run a trivial kernel", lambda: _run_probe_kernel(cupy)),
        ("cannot create a cuBLAS handle", cupy.cuda.device.get_cublas_handle),
    )
    for what, call in steps:
        try:
            call()
        except Exception as error:  # DynamicLibNotFoundError, CompileException, CUDARuntimeError, ...
            return None, f"CuPy sees a CUDA device but {what}: {_error(error)} ({_INSTALL_HINT})"
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


def _version_text(version: int) -> str:
    """Turn CUDA's integer version (e.g. 12040) into "12.4"."""
    return f"{version // 1000}.{version % 1000 // 10}"


def gpu_info(device_id: int = 0) -> dict[str, object] | None:
    """Return what a saved run records about the GPU, or None when no CUDA device is usable. Never raises.

    Only facts that stay true of the machine (``machine_info`` must be identical between two runs of one
    unchanged machine; clocks now, power and temperature are conditions of a run: ``benchmarks.nvml``):
    ``name``, ``compute_capability`` ("9.0"), ``sm_count``, ``memory_bytes``, ``sm_clock_rate_hz`` (the
    runtime's nominal SM clock, ``cudaDevAttrClockRate``), ``memory_clock_hz`` (its nominal memory clock,
    ``cudaDevAttrMemoryClockRate``), ``memory_bus_width_bits`` (``cudaDevAttrGlobalMemoryBusWidth``),
    ``l2_cache_bytes``, ``driver_version`` and ``runtime_version`` ("12.4"), ``cupy_version``. Hz and
    bytes. A query that fails leaves its key None and its error in ``query_errors`` (key -> "Type:
    message"), so a GPU that fails after the probe still leaves a saved run, with the error in it.
    """
    if unavailable_reason() is not None:
        return None
    cupy = cupy_module()
    runtime = cupy.cuda.runtime
    errors: dict[str, str] = {}

    def ask(key: str, query: Callable[[], Any]) -> Any:
        try:
            return query()
        except Exception as error:  # CUDARuntimeError of a failing device, a missing attribute enum
            errors[key] = _error(error)
            return None

    def attribute(name: str) -> int | None:
        return runtime.deviceGetAttribute(getattr(runtime, name), device_id)

    props = ask("properties", lambda: runtime.getDeviceProperties(device_id)) or {}

    def prop(key: str, convert: Callable[[Any], Any]) -> Any:
        return convert(props[key]) if key in props else None

    def name(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    def scaled(value: int | None, factor: float) -> float | None:
        return None if value is None else float(value) * factor

    info: dict[str, object] = {
        "name": prop("name", name),
        "compute_capability": f"{props['major']}.{props['minor']}"
        if {"major", "minor"} <= set(props)
        else None,
        "sm_count": prop("multiProcessorCount", int),
        "memory_bytes": prop("totalGlobalMem", int),
        "sm_clock_rate_hz": scaled(ask("sm_clock_rate_hz", lambda: attribute("cudaDevAttrClockRate")), 1e3),
        "memory_clock_hz": scaled(
            ask("memory_clock_hz", lambda: attribute("cudaDevAttrMemoryClockRate")), 1e3
        ),
        "memory_bus_width_bits": ask(
            "memory_bus_width_bits", lambda: attribute("cudaDevAttrGlobalMemoryBusWidth")
        ),
        "l2_cache_bytes": ask("l2_cache_bytes", lambda: attribute("cudaDevAttrL2CacheSize")),
        "driver_version": ask("driver_version", lambda: _version_text(runtime.driverGetVersion())),
        "runtime_version": ask("runtime_version", lambda: _version_text(runtime.runtimeGetVersion())),
        "cupy_version": getattr(cupy, "__version__", None),
    }
    if errors:
        info["query_errors"] = errors
    return info


@contextlib.contextmanager
def device_failures(config: Any, what: str) -> Iterator[None]:
    """Record an exception raised while ``what`` as one fault line of the run (``run_notes.record_fault``:
    the run record then says the GPU failed, and how), then let it propagate: the case fails with it and the
    other cases, the CPU ones included, still run and are saved."""
    try:
        yield
    except Exception as error:
        record_fault(config, f"GPU: {what}: {_error(error)}")
        raise
