"""Kernel launches with launch attributes, through the CUDA driver's ``cuLaunchKernelEx``: how the launch
suite's programmatic dependent launch (PDL) case launches, since CuPy cannot.

PDL (CUDA C++ Programming Guide, "Programmatic Dependent Launch and Synchronization", compute capability
>= 9.0): a kernel launched with ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`` = 1 may be scheduled
while its predecessor in the stream still runs, once every block of the predecessor has called
``griddepcontrol.launch_dependents`` (``cudaTriggerProgrammaticLaunchCompletion``) or exited; it then waits in
``griddepcontrol.wait`` (``cudaGridDependencySynchronize``) until the predecessor has completed and its memory
is visible. ``benchmarks/kernels/launch.cu``'s ``pdl_kernel`` does both.

What CuPy 14.2 offers, read in the installed wheel (cupy-cuda13x 14.2.0) and its source (cupy/cupy, v14):

- ``cupy_backends/cuda/api/driver.pyx`` binds, of the launch API, ``launchKernel`` (``cuLaunchKernel``) and
  ``launchCooperativeKernel`` (``cuLaunchCooperativeKernel``) only: its Python names are ctxCreate …
  funcGetAttribute, launchCooperativeKernel, launchKernel, linkAddData … streamGetCtx, with no
  ``cuLaunchKernelEx``, no ``CUlaunchConfig`` and no launch attribute. (The strings ``cuLaunchKernelEx`` and
  ``cudaLaunchKernelExC`` in the wheel's ``runtime`` module are the statically linked CUDA runtime's own
  entry-point table, not a binding; ``cupy_backends.cuda.api.runtime`` exposes no launch function at all.)
- ``cupy/cuda/function.pyx``: ``Function.__call__`` and ``RawKernel.__call__`` take grid, block, args,
  shared_mem and ``enable_cooperative_groups``: nothing reaches a launch attribute.

So the attribute is reached with ctypes on the driver library (``libcuda.so.1``, the one copy CuPy's own
driver calls use in the process): a compiled ``RawKernel``'s ``kernel.ptr`` is the driver's ``CUfunction`` and
a CuPy stream's ``ptr`` its ``CUstream``, usable as they are. The structures below mirror ``cuda.h`` (CUDA 12
and 13: ``CUlaunchConfig``, ``CUlaunchAttribute`` with its 64-byte value union);
``tests/test_cuda_pdl.py`` compiles a C program against the toolkit's ``cuda.h`` and checks every size, offset
and the attribute's number against them. A stream being captured records these launches like any other; with
the attribute, the captured graph gets programmatic edges (CUDA 12.3 and later).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

from benchmarks.cuda_timing import (
    BLOCK,
    GRID,
    Launch,
    PackedArguments,
    Submit,
    cupy_device_pointer,
    pack_arguments,
)

#: ``CUlaunchAttributeID`` of programmatic stream serialization (cuda.h, CUDA 12.0 and later).
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6
#: The driver library CuPy's driver calls use (the NVIDIA driver installs it under this soname).
LIBCUDA = "libcuda.so.1"
#: The lowest compute capability with programmatic dependent launch (the Programming Guide's section).
PDL_MIN_CAPABILITY = (9, 0)
_CUDA_SUCCESS = 0


class CUlaunchAttributeValue(ctypes.Union):
    """cuda.h's ``CUlaunchAttributeValue``: a 64-byte union; the one member used here, and a pointer member
    so that the union is aligned as the C one is (its event members are pointers)."""

    _fields_ = (
        ("pad", ctypes.c_char * 64),
        ("programmaticStreamSerializationAllowed", ctypes.c_int),
        ("event", ctypes.c_void_p),
    )


class CUlaunchAttribute(ctypes.Structure):
    """cuda.h's ``CUlaunchAttribute``: the attribute's id, padding to 8 bytes, its value."""

    _fields_ = (
        ("id", ctypes.c_int),
        ("pad", ctypes.c_char * 4),
        ("value", CUlaunchAttributeValue),
    )


class CUlaunchConfig(ctypes.Structure):
    """cuda.h's ``CUlaunchConfig``: grid and block, dynamic shared memory (bytes), stream, attributes."""

    _fields_ = (
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("hStream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(CUlaunchAttribute)),
        ("numAttrs", ctypes.c_uint),
    )


@functools.cache
def _driver(library: str = LIBCUDA) -> tuple[Any, str | None]:
    """(the driver library with ``cuLaunchKernelEx`` typed, None), or (None, why it cannot be used)."""
    try:
        driver = ctypes.CDLL(library)
    except OSError as error:
        return None, f"the CUDA driver library {library} cannot be loaded: {error}"
    try:
        launch = driver.cuLaunchKernelEx
    except AttributeError:
        return None, f"{library} has no cuLaunchKernelEx (a driver older than CUDA 11.8)"
    launch.argtypes = (ctypes.POINTER(CUlaunchConfig), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    launch.restype = ctypes.c_int
    driver.cuGetErrorName.argtypes = (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))
    driver.cuGetErrorName.restype = ctypes.c_int
    return driver, None


def launch_ex_reason(library: str = LIBCUDA) -> str | None:
    """Why ``cuLaunchKernelEx`` cannot be called here (no driver library, or one without it), or None."""
    return _driver(library)[1]


def pdl_reason(compute_capability: str, library: str = LIBCUDA) -> str | None:
    """Why a PDL case cannot run on a device of ``compute_capability`` (CuPy's form: "90", "100"), or None:
    the driver's ``cuLaunchKernelEx`` missing, or a device below compute capability 9.0."""
    reason = launch_ex_reason(library)
    if reason is not None:
        return reason
    text = str(compute_capability)
    major, minor = (int(text[:-1]), int(text[-1])) if text.isdigit() and len(text) >= 2 else (0, 0)
    if (major, minor) < PDL_MIN_CAPABILITY:
        need = ".".join(map(str, PDL_MIN_CAPABILITY))
        return (
            f"programmatic dependent launch needs compute capability >= {need}; this device has "
            f"{compute_capability!r}"
        )
    return None


def _error_text(driver: Any, code: int) -> str:
    name = ctypes.c_char_p()
    if driver.cuGetErrorName(code, ctypes.byref(name)) == _CUDA_SUCCESS and name.value:
        return f"{name.value.decode()} ({code})"
    return f"CUresult {code}"


def launch_config(stream_ptr: int, pdl: bool) -> tuple[CUlaunchConfig, CUlaunchAttribute]:
    """The ``CUlaunchConfig`` of one block of one thread (``GRID``, ``BLOCK``) on the stream ``stream_ptr``,
    with the programmatic stream serialization attribute set to 1 when ``pdl``, else no attribute (the same
    call, the plain launch to compare with). Returns the attribute too: keep it while the config is used."""
    attribute = CUlaunchAttribute()
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attribute.value.programmaticStreamSerializationAllowed = 1
    (grid,), (block,) = GRID, BLOCK
    config = CUlaunchConfig(
        gridDimX=grid,
        gridDimY=1,
        gridDimZ=1,
        blockDimX=block,
        blockDimY=1,
        blockDimZ=1,
        sharedMemBytes=0,
        hStream=stream_ptr,
        attrs=ctypes.pointer(attribute) if pdl else None,
        numAttrs=1 if pdl else 0,
    )
    return config, attribute


def ex_eager(
    launch: Launch,
    n_kernels: int,
    stream: Any,
    pdl: bool,
    device_pointer: Callable[[Any], int | None] = cupy_device_pointer,
    library: str = LIBCUDA,
) -> Submit:
    """Return a ``submit()`` that launches ``launch`` ``n_kernels`` times on ``stream`` through
    ``cuLaunchKernelEx``, with programmatic dependent launch when ``pdl`` (else the same call without the
    attribute), its arguments packed once here (``device_pointer`` gives an array argument's address).

    The driver launches in the context current on the calling thread: the device's primary context, which
    CuPy made current when it loaded the kernel's module on this thread (``benchmarks.kernels.module``).
    Raises ``RuntimeError`` with the reason where the driver has no ``cuLaunchKernelEx``; a launch the driver
    refuses raises ``RuntimeError`` naming its error."""
    driver, reason = _driver(library)
    if driver is None:
        raise RuntimeError(reason)
    packed: PackedArguments = pack_arguments(launch.args, device_pointer)
    config, attribute = launch_config(int(stream.ptr), pdl)
    function = ctypes.c_void_p(int(launch.kernel.kernel.ptr))  # RawKernel.kernel: the loaded Function
    params = ctypes.c_void_p(packed.pointer) if packed.count else None
    launch_ex, config_ref = driver.cuLaunchKernelEx, ctypes.byref(config)

    def submit() -> None:
        for _ in range(n_kernels):
            code = launch_ex(config_ref, function, params, None)
            if code != _CUDA_SUCCESS:
                raise RuntimeError(f"cuLaunchKernelEx (pdl={pdl}) failed: {_error_text(driver, code)}")

    submit.keep = (packed, config, attribute)  # what the pointers above point into lives as long as submit
    return submit
