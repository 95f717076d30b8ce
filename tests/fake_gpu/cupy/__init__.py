"""A fake ``cupy`` for tests: a GPU that answers the probe of ``benchmarks/cuda.py`` and then fails every
device call, as a GPU that falls off the bus, or a driver that breaks, after the first kernel does.

Not CuPy and not a measurement: it only lets tests run the benchmark suite, the GPU tests and
``.ci/gpu-run`` where no GPU is, and check that such a GPU ends in clear failures, recorded faults and a
saved run with the CPU results in it. ``FAILURE`` is the message every failing call raises.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from benchmarks.outputs import folder_problem

__version__ = "0.0.0-fake-gpu-after-probe"
FAILURE = "cudaErrorLaunchFailure: unspecified launch failure (fake GPU: fails every call after the probe)"
int32 = np.int32
float16, float32, uint32, uint64 = np.float16, np.float32, np.uint32, np.uint64


class CUDARuntimeError(RuntimeError):
    """Stands in for ``cupy_backends.cuda.api.runtime.CUDARuntimeError``."""


def _fail(*args: Any, **kwargs: Any) -> Any:
    raise CUDARuntimeError(FAILURE)


class _ProbeArray:
    """The one array the probe allocates: the probe kernel writes into it, ``get`` reads it back."""

    def __init__(self) -> None:
        self.value = np.zeros(1, dtype=np.int32)

    def get(self) -> np.ndarray:
        return self.value


_probed = False


def zeros(shape: Any, dtype: Any = None) -> Any:
    """The probe's first allocation works; every later one fails."""
    global _probed
    if _probed:
        _fail()
    _probed = True
    return _ProbeArray()


class RawModule:
    """Compiles anything (where CuPy's kernel cache can be written); its functions write 42, as the probe's
    kernel does, into a ``_ProbeArray``."""

    def __init__(self, code: str = "", options: tuple[str, ...] = (), **kwargs: Any) -> None:
        self.code = code

    def compile(self) -> None:
        """Loading a module is a device call: it fails, as every call after the probe does."""
        _fail()

    def get_function(self, name: str) -> Any:
        """Compiling writes the kernel into CuPy's cache folder: it fails, as CuPy's does, where that
        folder cannot be made (``_kernel_cache_problem``)."""
        problem = _kernel_cache_problem()
        if problem is not None:
            raise OSError(problem)

        def launch(grid: Any, block: Any, args: tuple[Any, ...], **kwargs: Any) -> None:
            if not isinstance(args[0], _ProbeArray):
                _fail()
            args[0].value[0] = 42

        return launch


def _kernel_cache_problem() -> str | None:
    """Why CuPy could not write its compiled kernels (``CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache``, as
    ``cupy.cuda.compiler.get_cache_dir``), checked without writing anything; None when it could."""
    folder = Path(os.environ.get("CUPY_CACHE_DIR") or Path("~/.cupy/kernel_cache").expanduser())
    problem = folder_problem(folder)
    return None if problem is None else f"CuPy's kernel cache cannot be written: {problem}"


def __getattr__(name: str) -> Any:  # every other cupy.<name> is a failing call
    return _fail


runtime = SimpleNamespace(
    CUDARuntimeError=CUDARuntimeError,
    getDeviceCount=lambda: 1,
    deviceSynchronize=lambda: None,
    getDeviceProperties=_fail,
    deviceGetAttribute=_fail,
    deviceGetPCIBusId=_fail,
    driverGetVersion=_fail,
    runtimeGetVersion=_fail,
    cudaDevAttrClockRate=13,
    cudaDevAttrMemoryClockRate=36,
    cudaDevAttrGlobalMemoryBusWidth=37,
    cudaDevAttrL2CacheSize=38,
)
cuda = SimpleNamespace(
    runtime=runtime,
    nvrtc=SimpleNamespace(getVersion=lambda: (13, 0)),
    device=SimpleNamespace(get_cublas_handle=lambda: 1),
    Stream=_fail,
    Device=_fail,
    Event=_fail,
)
