"""Run the real CUDA kernels of ``benchmarks/kernels`` on the CPU, so their bodies are tested without a GPU.

The kernels are otherwise only compiled (``tests/test_kernels_nvcc.py``), and a numpy statement of what each
should compute tests the Python wiring alone. Here the ``.cu`` source itself is compiled as C++17 by g++ with
``host_cuda.h`` force-included: that header gives the CUDA built-ins host meanings and runs every block's
threads as cooperative fibers (see its opening comment for the scheduling and what it refuses). The inline
PTX of a few small helpers cannot run on a CPU, so the driver replaces the bodies of exactly the helpers it
is told to (``HOST_BODIES``) and refuses a source in which any ``asm`` remains.

The API mirrors CuPy's: ``HostModule(code)`` compiles once (cached by a hash of source, shim, flags and
compiler), ``.get_function(name)`` returns a ``HostKernel``, and ``kernel(grid, block, args)`` launches it
with numpy arrays (by pointer) and numpy scalars (by value), checked against the kernel's own parameter
sizes. What CuPy cannot tell, the harness adds: a launch runs its blocks one after another with fibers and
blocks in ``"forward"`` or ``"reverse"`` order, or all blocks at once, ``"interleaved"`` (blocks started
staggered, switched at every barrier, shuffle and atomic, each with its own shared memory), arrays from
``guarded_empty``/``guarded_array`` carry 4 KiB of 0xFF bytes (NaN as float or half) on each side that
every launch checks afterwards, and ``launch_each_schedule`` requires all three schedules to agree.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import operator
import os
import re
import shutil
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from benchmarks import kernels

#: The header of host meanings of CUDA's built-ins, force-included before every source.
SHIM = Path(__file__).resolve().with_name("host_cuda.h")
#: g++ flags. -fno-strict-aliasing: the kernels read FP16 words through uint4 and unsigned int views, as CUDA
#: code does; g++'s type-based alias analysis must not reorder those accesses on the host.
CXX_FLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-fno-strict-aliasing")

#: How a launch runs its blocks and resumes their fibers (``host_cuda.h``'s opening comment): one block after
#: another in forward or reverse order, or all blocks at once, interleaved, so that which block reaches an
#: atomic counter first or last shows.
Schedule = Literal["forward", "reverse", "interleaved"]
SCHEDULES: tuple[Schedule, ...] = ("forward", "reverse", "interleaved")

#: Bytes of 0xFF before and after a guarded array's data: an index off by a few elements, or by a short row,
#: lands in them.
GUARD_BYTES = 4096
#: Alignment of a guarded array's data, bytes: cudaMalloc's, so 16-byte vector loads are aligned too.
GUARD_ALIGNMENT = 256
#: The byte guards and fresh ``guarded_empty`` arrays are filled with: as float32 or float16, a NaN.
POISON = 0xFF

#: Host bodies of the helpers whose device bodies are inline PTX, by helper name. Each replaces the text
#: between the helper's braces and uses its parameter names (h, f, p).
HOST_BODIES: dict[str, str] = {
    "half_to_float": "return ::hostcuda::half_to_float(h);",
    "float_to_half": "return ::hostcuda::float_to_half(f);",
    # Cache hints (non-coherent, no L1 allocation, L2 only) change nothing for one thread at a time.
    "load_weights16": "return *p;",
    "load_activations16": "return *p;",
    "load_cg": "return *p;",
    "load_cg_int": "return *p;",
    # %globaltimer counts wall-clock nanoseconds; CLOCK_MONOTONIC is the host's.
    "globaltimer_ns": "return ::hostcuda::monotonic_ns();",
    # Programmatic dependent launch: the harness runs one launch after another, each complete before the
    # next starts, so letting the next be scheduled early and waiting for the previous both do nothing.
    "pdl_launch_dependents": "",
    "pdl_wait": "",
}

#: The helpers of each kernel module of ``benchmarks/kernels`` that get host bodies.
MODULE_HELPERS: dict[str, tuple[str, ...]] = {
    "decode": (
        "half_to_float",
        "float_to_half",
        "load_weights16",
        "load_activations16",
        "load_cg",
        "load_cg_int",
    ),
    "launch": ("globaltimer_ns", "pdl_launch_dependents", "pdl_wait"),
}

# A comment, a string literal or a character literal.
_LEXEME = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.DOTALL)
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(')
_ASM = re.compile(r"\b(?:asm|__asm|__asm__)\b")


class HostCudaError(RuntimeError):
    """A source the harness refuses, a failed compile, a refused argument, or a launch that went wrong."""


def unavailable_reason() -> str | None:
    """Why kernels cannot run on this host, or None when they can."""
    if not sys.platform.startswith("linux"):
        return f"the host CUDA harness needs Linux (fibers, ELF sections); this is {sys.platform}"
    if shutil.which("g++") is None:
        return "g++ is not on PATH (the host CUDA harness compiles the kernels with it)"
    return None


# ------------------------------------------------------------------------------------------------------------
# Source preparation
# ------------------------------------------------------------------------------------------------------------


def _blank(code: str, strings: bool) -> str:
    """``code`` with comments, and string and character literals if ``strings``, turned into spaces (newlines
    kept): what remains is at the same offsets and lines as in ``code``."""

    def blank(match: re.Match[str]) -> str:
        text = match.group()
        return text if text[0] in "\"'" and not strings else re.sub(r"[^\n]", " ", text)

    return _LEXEME.sub(blank, code)


def _line(code: str, offset: int) -> int:
    """The 1-based line of ``code`` that holds ``offset``."""
    return code.count("\n", 0, offset) + 1


def _body_span(code: str, bare: str, helper: str) -> tuple[int, int]:
    """(first, last) offsets of the text between the braces of ``helper``'s one definition; ``bare`` is
    ``code`` blanked (comments and literals: the braces of PTX strings do not count)."""
    definitions = list(re.finditer(rf"\b{re.escape(helper)}\s*\([^;{{}}()]*\)\s*\{{", bare))
    if len(definitions) != 1:
        found = "no definition" if not definitions else f"{len(definitions)} definitions"
        raise HostCudaError(f"helper {helper}: {found} in the source (it is named to get a host body)")
    depth, first = 0, definitions[0].end()
    for offset in range(first - 1, len(bare)):
        depth += {"{": 1, "}": -1}.get(bare[offset], 0)
        if depth == 0:
            return first, offset
    raise HostCudaError(f"helper {helper} (line {_line(code, first)}): its body never closes")


def prepare_source(code: str, helpers: Sequence[str]) -> str:
    """``code`` with the body of each named helper replaced by its host body (``HOST_BODIES``), every line
    number kept. Raises ``HostCudaError`` when a helper has no host body, is not defined exactly once, or
    when inline ``asm`` remains afterwards (naming its line)."""
    unknown = [helper for helper in helpers if helper not in HOST_BODIES]
    if unknown:
        raise HostCudaError(f"no host body for helpers {unknown} (known: {', '.join(HOST_BODIES)})")
    spans = sorted((*_body_span(code, _blank(code, strings=True), helper), helper) for helper in helpers)
    for first, last, helper in reversed(spans):  # from the end: earlier offsets stay valid
        newlines = "\n" * code.count("\n", first, last)
        code = f"{code[:first]} {HOST_BODIES[helper]} {newlines}{code[last:]}"
    bare = _blank(code, strings=True)
    remaining = _ASM.search(bare)
    if remaining:
        line = _line(bare, remaining.start())
        text = code.splitlines()[line - 1].strip()
        raise HostCudaError(
            f"inline asm remains at line {line} ({text}): a CPU cannot run PTX; give its helper a host body "
            "in HOST_BODIES and name it among the helpers"
        )
    return code


def kernel_names(code: str) -> tuple[str, ...]:
    """The names of the ``extern "C" __global__`` kernels of ``code``, in source order."""
    return tuple(_KERNEL.findall(_blank(code, strings=False)))


def _wrappers(names: Sequence[str]) -> str:
    """The exported entry points of each kernel: a launch through a ``void** args`` array, as
    cudaLaunchKernel takes them, and its parameters' sizes (both templates of ``host_cuda.h``, over the
    kernel's own parameter types)."""
    export = 'extern "C" __attribute__((visibility("default"))) int'
    lines = ['#line 1 "<host_cuda wrappers>"']
    for name in names:
        lines += [
            f"{export} hostcuda_launch_{name}(const unsigned* geometry, void** args, int schedule,"
            f' char* error, unsigned long error_size) {{ return ::hostcuda::launch("{name}", &{name},'
            " geometry, args, schedule, error, error_size); }",
            f"{export} hostcuda_parameters_{name}(long long* sizes, long long* pointees, int capacity) {{"
            f" return ::hostcuda::parameters(&{name}, sizes, pointees, capacity); }}",
        ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------------------
# Compilation
# ------------------------------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """Where compiled modules are kept between runs: a per-user folder under the system's temp dir."""
    return Path(tempfile.gettempdir()) / f"launchbench-host-cuda-{os.getuid()}"


@functools.cache
def _compiler() -> tuple[str, str]:
    """(path, version line) of g++: the version is part of the cache key."""
    gxx = shutil.which("g++")
    if gxx is None:
        raise HostCudaError(unavailable_reason() or "g++ is not on PATH")
    done = subprocess.run([gxx, "--version"], capture_output=True, text=True, check=True)
    return gxx, done.stdout.splitlines()[0]


def _compile(source: str, name: str, cache_dir: Path) -> Path:
    """The shared library of ``source`` (compiled now, or found in ``cache_dir`` under the hash of source,
    shim, flags and compiler)."""
    gxx, version = _compiler()
    key_text = "\0".join((source, SHIM.read_text(encoding="utf-8"), *CXX_FLAGS, gxx, version))
    key = hashlib.sha256(key_text.encode()).hexdigest()[:32]
    library = cache_dir / f"{key}.so"
    if library.is_file():
        return library
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Files of this process, renamed once complete: another process compiling the same source at the same
    # time never reads or loads half a file. The source stays beside the library, for reading.
    source_path, partial = (cache_dir / f"{key}.{os.getpid()}.{suffix}" for suffix in ("cpp", "tmp"))
    source_path.write_text(source, encoding="utf-8")
    command = [gxx, *CXX_FLAGS, "-include", str(SHIM), "-x", "c++", str(source_path), "-o", str(partial)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        source_path.unlink()
        raise HostCudaError(f"g++ could not compile {name} for the host:\n{done.stderr}")
    source_path.replace(cache_dir / f"{key}.cpp")
    partial.replace(library)
    return library


# ------------------------------------------------------------------------------------------------------------
# Guarded arrays
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Guards:
    """The allocation of a guarded array: data is ``raw[start:stop]``, the rest is guard bytes."""

    raw: weakref.ref[np.ndarray]
    start: int
    stop: int


_GUARDED: dict[int, _Guards] = {}  # id of the raw allocation -> its guards, while it lives


def _root(array: np.ndarray) -> np.ndarray:
    """The array that owns ``array``'s memory (a view's base, followed to the end)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def guarded_empty(shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
    """A C-contiguous array whose every byte is 0xFF (NaN as float32 or float16: a read before any write
    shows), with ``GUARD_BYTES`` of 0xFF before and after it and its data ``GUARD_ALIGNMENT``-aligned.
    ``HostKernel`` checks the guards after every launch that is given the array (or a view into it)."""
    shape = tuple(int(n) for n in np.atleast_1d(shape))  # an int or a sequence of ints; () is 0-d
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.full(nbytes + 2 * GUARD_BYTES + GUARD_ALIGNMENT, POISON, np.uint8)
    start = GUARD_BYTES + (-(raw.ctypes.data + GUARD_BYTES)) % GUARD_ALIGNMENT
    _GUARDED[id(raw)] = _Guards(weakref.ref(raw), start, start + nbytes)
    weakref.finalize(raw, _GUARDED.pop, id(raw), None)
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def guarded_array(values: Any, dtype: Any = None) -> np.ndarray:
    """A guarded copy of ``values`` (``numpy.asarray(values, dtype)``): see ``guarded_empty``."""
    source = np.asarray(values, dtype=dtype)
    array = guarded_empty(source.shape, source.dtype)
    array[...] = source
    return array


def _guards(array: np.ndarray) -> tuple[np.ndarray, _Guards] | None:
    """(raw allocation, guards) of a guarded array or a view into one; None for any other array."""
    root = _root(array)
    guards = _GUARDED.get(id(root))
    return (root, guards) if guards is not None and guards.raw() is root else None


def check_guards(array: np.ndarray, what: str) -> None:
    """Raise ``HostCudaError`` naming ``what`` if a guard byte of ``array``'s allocation changed (something
    wrote out of bounds); nothing for an array without guards."""
    found = _guards(array)
    if found is None:
        return
    raw, guards = found
    for side, region, offset in (
        ("before", raw[: guards.start], -guards.start),
        ("after", raw[guards.stop :], 0),
    ):
        changed = np.flatnonzero(region != POISON)
        if changed.size:
            raise HostCudaError(
                f"{what}: {changed.size} guard bytes {side} the array were written (byte offsets "
                f"{int(changed[0]) + offset} … {int(changed[-1]) + offset} from the "
                f"{'start' if side == 'before' else 'end'} of its data)"
            )


# ------------------------------------------------------------------------------------------------------------
# Modules and kernels
# ------------------------------------------------------------------------------------------------------------


def _dims(value: int | tuple[int, ...], what: str) -> tuple[int, int, int]:
    """A grid or block as CuPy takes it (an int, or 1 to 3 ints) padded with 1s to (x, y, z)."""
    try:
        dims = tuple(operator.index(d) for d in np.atleast_1d(value))
    except TypeError:
        dims = ()
    if not 1 <= len(dims) <= 3 or not all(0 <= d < 2**32 for d in dims):
        raise HostCudaError(f"{what} must be an int or 1 to 3 ints in [0, 2^32), got {value!r}")
    x, y, z = (*dims, 1, 1)[:3]
    return x, y, z


def _scalar(value: Any) -> np.generic | None:
    """A by-value argument as the numpy scalar whose bytes are passed: numpy scalars as they are, and Python
    scalars as CuPy passes them (bool as bool, int as a 64-bit long long, float as double)."""
    if isinstance(value, np.generic):
        return value
    for python_type, numpy_type in ((bool, np.bool_), (int, np.int64), (float, np.float64)):
        if isinstance(value, python_type):
            return numpy_type(value)
    return None


@dataclass(frozen=True)
class HostKernel:
    """One kernel of a ``HostModule``; call it as a ``cupy.RawKernel``. ``sizes`` are its parameters' sizes
    in bytes and ``pointees`` what each points to (bytes; 0: void; -1: passed by value)."""

    name: str
    sizes: tuple[int, ...]
    pointees: tuple[int, ...]
    launcher: Any  # the ctypes function hostcuda_launch_<name>
    module: HostModule  # kept so the library outlives its kernels

    def __call__(
        self,
        grid: int | tuple[int, ...],
        block: int | tuple[int, ...],
        args: Sequence[Any],
        *,
        shared_mem: int = 0,
        schedule: Schedule = "forward",
    ) -> None:
        """Run the kernel to completion on ``grid`` blocks of ``block`` threads with ``args`` (numpy arrays,
        C-contiguous, passed by pointer; None, a null pointer; numpy scalars passed by value), then check the
        guards of every guarded array argument. Raises ``HostCudaError`` naming the kernel (and the
        argument, block or threads) for a refused argument, a launch that went wrong or a written guard."""
        if shared_mem:
            raise HostCudaError(f"kernel {self.name}: dynamic shared memory is not emulated")
        if schedule not in SCHEDULES:
            raise HostCudaError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
        geometry = (ctypes.c_uint * 6)(*_dims(grid, "grid"), *_dims(block, "block"))
        if len(args) != len(self.sizes):
            raise HostCudaError(f"kernel {self.name} takes {len(self.sizes)} arguments, {len(args)} given")
        held, arrays = [], []  # what the pointers point to stays alive until the launch returns
        for index, (arg, size, pointee) in enumerate(zip(args, self.sizes, self.pointees, strict=True)):
            held.append(self._argument(index, arg, size, pointee))
            if isinstance(arg, np.ndarray):
                arrays.append((index, arg))
        pointers = (ctypes.c_void_p * max(1, len(held)))(*(ctypes.addressof(slot) for slot in held))
        error = ctypes.create_string_buffer(4096)
        if self.launcher(geometry, pointers, SCHEDULES.index(schedule), error, len(error)):
            raise HostCudaError(error.value.decode(errors="replace"))
        for index, array in arrays:
            check_guards(array, f"kernel {self.name} argument {index}")

    def _argument(self, index: int, arg: Any, size: int, pointee: int) -> ctypes.c_void_p | ctypes.Array:
        """The memory holding argument ``index``'s value, after checking it against the parameter."""
        where = f"kernel {self.name} argument {index}"
        if arg is None:  # CuPy passes None as a null pointer
            if pointee < 0:
                raise HostCudaError(f"{where}: None for a parameter passed by value ({size} bytes)")
            return ctypes.c_void_p(0)
        if isinstance(arg, np.ndarray):
            if pointee < 0:
                raise HostCudaError(f"{where}: an array for a parameter passed by value ({size} bytes)")
            if not arg.flags.c_contiguous:
                raise HostCudaError(f"{where}: the array is not C-contiguous")
            if pointee and arg.itemsize != pointee:
                raise HostCudaError(
                    f"{where}: a {arg.dtype} array ({arg.itemsize}-byte elements) for a pointer to "
                    f"{pointee}-byte elements"
                )
            return ctypes.c_void_p(arg.ctypes.data)
        value = _scalar(arg)
        if value is None:
            raise HostCudaError(f"{where}: {type(arg).__name__} is neither a numpy array nor a scalar")
        if pointee >= 0:
            raise HostCudaError(f"{where}: a {value.dtype} scalar for a pointer parameter")
        if value.itemsize != size:
            raise HostCudaError(
                f"{where}: a {value.dtype} scalar is {value.itemsize} bytes, the parameter {size} (pass a "
                "numpy scalar of the parameter's type; CuPy passes a Python int as a 64-bit long long)"
            )
        slot = (ctypes.c_uint64 * 1)()  # 8-byte aligned, as the kernel reads the value in place
        ctypes.memmove(slot, value.tobytes(), value.itemsize)
        return slot


class HostModule:
    """``code`` (CUDA C++) compiled for the host, as ``cupy.RawModule(code=code)`` compiles it for a GPU:
    once, cached in ``cache_dir`` (default: ``default_cache_dir()``). ``helpers`` name the functions whose
    inline-PTX bodies are replaced by ``HOST_BODIES``; ``name`` is the file name compile errors cite."""

    def __init__(
        self,
        code: str,
        helpers: Sequence[str] = (),
        *,
        name: str = "kernel.cu",
        cache_dir: Path | None = None,
    ) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise HostCudaError(reason)
        prepared = prepare_source(code, helpers)
        self.name = name
        self.kernel_names = kernel_names(prepared)
        source = f'#line 1 "{name}"\n{prepared}\n{_wrappers(self.kernel_names)}'
        # PyDLL keeps the GIL during a launch: one launch at a time, as the shim's global state requires.
        self._library = ctypes.PyDLL(str(_compile(source, name, cache_dir or default_cache_dir())))

    @property
    def fibers(self) -> str:
        """How the module's fibers switch: "stack switch" (x86-64, a few instructions) or "ucontext" (other
        CPUs, a shadow stack on, or ``HOSTCUDA_FIBERS=ucontext`` in the environment; ``host_cuda.h``)."""
        return "ucontext" if self._library.hostcuda_fibers_by_ucontext() else "stack switch"

    def get_function(self, name: str) -> HostKernel:
        """The kernel ``name`` (an ``extern "C" __global__`` function of the source)."""
        if name not in self.kernel_names:
            known = ", ".join(self.kernel_names) or "none"
            raise HostCudaError(f'{self.name}: no extern "C" __global__ kernel {name!r} (known: {known})')
        parameters = getattr(self._library, f"hostcuda_parameters_{name}")
        parameters.restype = ctypes.c_int
        count = parameters(None, None, 0)
        sizes, pointees = (ctypes.c_longlong * max(1, count))(), (ctypes.c_longlong * max(1, count))()
        parameters(sizes, pointees, count)
        launcher = getattr(self._library, f"hostcuda_launch_{name}")
        launcher.restype = ctypes.c_int
        launcher.argtypes = (
            ctypes.POINTER(ctypes.c_uint),
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_ulong,
        )
        return HostKernel(name, tuple(sizes[:count]), tuple(pointees[:count]), launcher, self)


@functools.cache
def kernel_module(module_name: str) -> HostModule:
    """``benchmarks/kernels/<module_name>.cu`` compiled for the host with its helpers' host bodies, once per
    process."""
    if module_name not in MODULE_HELPERS:
        raise HostCudaError(f"no host helpers listed for kernel module {module_name!r} (MODULE_HELPERS)")
    return HostModule(kernels.source(module_name), MODULE_HELPERS[module_name], name=f"{module_name}.cu")


def launch_each_schedule(
    kernel: HostKernel, grid: int | tuple[int, ...], block: int | tuple[int, ...], args: Sequence[Any]
) -> tuple[Any, ...]:
    """Launch ``kernel`` once per schedule (``SCHEDULES``), each time on fresh guarded copies of the array
    arguments (the originals are not touched), and require every array to end bit-identical in all of them:
    a missing barrier, an order-dependent reduction or a block that uses other blocks' results before they
    are written shows as a difference. Returns the forward run's arguments."""
    runs = []
    for schedule in SCHEDULES:
        copies = tuple(guarded_array(arg) if isinstance(arg, np.ndarray) else arg for arg in args)
        kernel(grid, block, copies, schedule=schedule)
        runs.append(copies)
    for schedule, run in zip(SCHEDULES[1:], runs[1:], strict=True):
        for index, (first, other) in enumerate(zip(runs[0], run, strict=True)):
            if not isinstance(first, np.ndarray):
                continue
            first_bytes, other_bytes = (
                array.reshape(-1).view(np.uint8).reshape(first.size, first.itemsize)
                for array in (first, other)
            )
            differ = np.flatnonzero((first_bytes != other_bytes).any(axis=1))
            if differ.size:
                at = int(differ[0])
                raise HostCudaError(
                    f"kernel {kernel.name} argument {index}: the {SCHEDULES[0]} and {schedule} schedules "
                    f"disagree (first at element {at}: {first.flat[at]!r} vs {other.flat[at]!r})"
                )
    return runs[0]
