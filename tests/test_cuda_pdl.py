"""The PDL case's launch path, checked without a GPU: ``benchmarks/launch_ex.py``'s ctypes mirror of
``cuLaunchKernelEx`` against the toolkit's own ``cuda.h``, and ``pdl_kernel`` run on the host.

A C program compiled against ``cuda.h`` prints every size, offset and the attribute's number, which must equal
the ctypes structures'; a stand-in driver library, also compiled against ``cuda.h``, exports
``cuLaunchKernelEx`` and ``cuGetErrorName`` and records what each launch handed it, so ``ex_eager`` is run
end to end: the stream, grid, attribute and argument arrive as the real driver would read them. The kernel
itself (its PTX helpers replaced by empty host bodies, ``tests/host_cuda``) counts one increment per launch.
Where g++/gcc or ``cuda.h`` is missing, those checks skip with the reason; the GPU side is in
``tests/test_cuda_gpu.py``.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks import launch_ex
from benchmarks.cuda_timing import Launch
from tests import host_cuda


def _cuda_include() -> Path | None:
    """The folder holding the toolkit's ``cuda.h``: $CUDA_HOME/include, /usr/local/cuda/include, or the one
    beside nvcc."""
    candidates = [Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"]
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        candidates.append(Path(nvcc).resolve().parents[1] / "include")
    return next((folder for folder in candidates if (folder / "cuda.h").is_file()), None)


CUDA_INCLUDE = _cuda_include()
CC = shutil.which("gcc") or shutil.which("cc")
needs_cuda_h = pytest.mark.skipif(
    CUDA_INCLUDE is None or CC is None,
    reason="a C compiler and the CUDA toolkit's cuda.h are needed (checks the ctypes layout against it)",
)

_LAYOUT_PROGRAM = r"""
#include <stddef.h>
#include <stdio.h>
#include <cuda.h>
int main(void) {
    printf("attribute_id %d\n", (int)CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
    printf("value_size %zu\n", sizeof(CUlaunchAttributeValue));
    printf("value_align %zu\n", _Alignof(CUlaunchAttributeValue));
    printf("attribute_size %zu\n", sizeof(CUlaunchAttribute));
    printf("attribute_value_offset %zu\n", offsetof(CUlaunchAttribute, value));
    printf("config_size %zu\n", sizeof(CUlaunchConfig));
    printf("config_sharedMemBytes %zu\n", offsetof(CUlaunchConfig, sharedMemBytes));
    printf("config_hStream %zu\n", offsetof(CUlaunchConfig, hStream));
    printf("config_attrs %zu\n", offsetof(CUlaunchConfig, attrs));
    printf("config_numAttrs %zu\n", offsetof(CUlaunchConfig, numAttrs));
    return 0;
}
"""

# A driver that launches nothing: it records what cuLaunchKernelEx was handed, read through cuda.h's own
# types, and fails with ``fail_with`` when that is set.
_STUB_DRIVER = r"""
#include <cuda.h>
unsigned long long calls;
unsigned int grid[3], block[3], shared_bytes, num_attrs;
int attr_id, attr_value, fail_with;
void *stream, *function, *param0;
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra) {
    if (fail_with) return (CUresult)fail_with;
    calls++;
    grid[0] = config->gridDimX; grid[1] = config->gridDimY; grid[2] = config->gridDimZ;
    block[0] = config->blockDimX; block[1] = config->blockDimY; block[2] = config->blockDimZ;
    shared_bytes = config->sharedMemBytes;
    stream = (void *)config->hStream;
    num_attrs = config->numAttrs;
    attr_id = num_attrs ? (int)config->attrs[0].id : -1;
    attr_value = num_attrs ? config->attrs[0].value.programmaticStreamSerializationAllowed : -1;
    function = (void *)f;
    param0 = kernelParams ? *(void **)kernelParams[0] : (void *)1;
    return extra == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuGetErrorName(CUresult error, const char **name) {
    *name = error == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_UNKNOWN";
    return CUDA_SUCCESS;
}
"""


def _compile(tmp_path: Path, source: str, name: str, *flags: str) -> Path:
    path, output = tmp_path / f"{name}.c", tmp_path / name
    path.write_text(source, encoding="utf-8")
    command = [CC, "-std=c11", f"-I{CUDA_INCLUDE}", str(path), "-o", str(output), *flags]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return output


@needs_cuda_h
def test_the_ctypes_structures_are_cuda_hs(tmp_path: Path) -> None:
    program = _compile(tmp_path, _LAYOUT_PROGRAM, "layout")
    out = subprocess.run([str(program)], capture_output=True, text=True, timeout=60, check=True).stdout
    c = {key: int(value) for key, value in (line.split() for line in out.splitlines())}
    attribute, config = launch_ex.CUlaunchAttribute, launch_ex.CUlaunchConfig
    assert c["attribute_id"] == launch_ex.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    assert c["value_size"] == ctypes.sizeof(launch_ex.CUlaunchAttributeValue)
    assert c["value_align"] == ctypes.alignment(launch_ex.CUlaunchAttributeValue)
    assert (c["attribute_size"], c["attribute_value_offset"]) == (
        ctypes.sizeof(attribute),
        attribute.value.offset,
    )
    assert c["config_size"] == ctypes.sizeof(config)
    for field in ("sharedMemBytes", "hStream", "attrs", "numAttrs"):
        assert c[f"config_{field}"] == getattr(config, field).offset, field


@pytest.fixture
def stub_driver(tmp_path: Path) -> tuple[str, ctypes.CDLL]:
    """A stand-in ``libcuda`` (``_STUB_DRIVER``): its path, for ``launch_ex``, and the library, to read."""
    if CUDA_INCLUDE is None or CC is None:
        pytest.skip("a C compiler and the CUDA toolkit's cuda.h are needed for the stand-in driver")
    library = _compile(tmp_path, _STUB_DRIVER, "libcuda_stub.so", "-shared", "-fPIC")
    return str(library), ctypes.CDLL(str(library))


def _read(stub: ctypes.CDLL, name: str, ctype: type = ctypes.c_uint) -> object:
    return ctype.in_dll(stub, name).value


@pytest.mark.parametrize("pdl", [False, True], ids=["plain", "pdl"])
def test_ex_eager_hands_the_driver_what_cuda_h_expects(
    stub_driver: tuple[str, ctypes.CDLL], pdl: bool
) -> None:
    path, stub = stub_driver
    counter = np.zeros(1, dtype=np.uint64)
    kernel = SimpleNamespace(kernel=SimpleNamespace(ptr=0xF00D))  # a RawKernel's loaded Function handle
    launch = Launch(kernel, (counter,))
    stream = SimpleNamespace(ptr=0xBEEF)
    submit = launch_ex.ex_eager(
        launch, 5, stream, pdl, device_pointer=lambda array: array.ctypes.data, library=path
    )
    submit()
    assert _read(stub, "calls", ctypes.c_ulonglong) == 5
    grid = (ctypes.c_uint * 3).in_dll(stub, "grid")
    block = (ctypes.c_uint * 3).in_dll(stub, "block")
    assert (tuple(grid), tuple(block), _read(stub, "shared_bytes")) == ((1, 1, 1), (1, 1, 1), 0)
    assert _read(stub, "stream", ctypes.c_void_p) == 0xBEEF
    assert _read(stub, "function", ctypes.c_void_p) == 0xF00D
    assert _read(stub, "param0", ctypes.c_void_p) == counter.ctypes.data  # the array's address, by value
    if pdl:
        assert _read(stub, "num_attrs") == 1
        assert _read(stub, "attr_id", ctypes.c_int) == 6
        assert _read(stub, "attr_value", ctypes.c_int) == 1
    else:
        assert (_read(stub, "num_attrs"), _read(stub, "attr_id", ctypes.c_int)) == (0, -1)


def test_a_refused_launch_names_the_drivers_error(stub_driver: tuple[str, ctypes.CDLL]) -> None:
    path, stub = stub_driver
    ctypes.c_int.in_dll(stub, "fail_with").value = 1  # CUDA_ERROR_INVALID_VALUE
    launch = Launch(SimpleNamespace(kernel=SimpleNamespace(ptr=1)), (None,))
    submit = launch_ex.ex_eager(launch, 3, SimpleNamespace(ptr=0), True, library=path)
    with pytest.raises(
        RuntimeError, match=r"cuLaunchKernelEx \(pdl=True\) failed: CUDA_ERROR_INVALID_VALUE \(1\)"
    ):
        submit()


def test_pdl_needs_compute_capability_9(stub_driver: tuple[str, ctypes.CDLL]) -> None:
    path, _ = stub_driver
    assert launch_ex.pdl_reason("90", path) is None
    assert launch_ex.pdl_reason("100", path) is None
    reason = launch_ex.pdl_reason("89", path)
    assert reason is not None and "compute capability >= 9.0" in reason and "'89'" in reason


def test_without_the_driver_library_the_reason_names_it() -> None:
    missing = "libcuda_not_here.so.1"
    reason = launch_ex.launch_ex_reason(missing)
    assert reason is not None and reason.startswith(f"the CUDA driver library {missing} cannot be loaded")
    assert launch_ex.pdl_reason("90", missing) == reason
    launch = Launch(SimpleNamespace(kernel=SimpleNamespace(ptr=1)), ())
    with pytest.raises(RuntimeError, match="cannot be loaded"):
        launch_ex.ex_eager(launch, 1, SimpleNamespace(ptr=0), True, library=missing)


_HOST_REASON = host_cuda.unavailable_reason()


@pytest.mark.skipif(_HOST_REASON is not None, reason=_HOST_REASON or "")
def test_pdl_kernel_counts_once_per_launch_on_the_host() -> None:
    """Run one after another (the host harness's launches never overlap), N launches add N; a null counter
    is left alone."""
    kernel = host_cuda.kernel_module("launch").get_function("pdl_kernel")
    counter = np.zeros(1, dtype=np.uint64)
    for _ in range(7):
        kernel((1,), (1,), (counter,))
    assert int(counter[0]) == 7
    kernel((1,), (1,), (None,))
    assert int(counter[0]) == 7
