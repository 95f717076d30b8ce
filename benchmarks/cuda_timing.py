"""How the CUDA cases submit kernels and how they are timed on the GPU: submission patterns and CUDA events.

A pattern is built once (outside any timing) and returns a ``submit()`` closure that issues its work on
the current stream without waiting for it. The same closure is timed by pytest-benchmark on the host
(followed by a synchronise, see ``then_sync``), timed by CUDA events on the GPU (``event_median_s``), and
checked with the counting kernel by ``tests/test_cuda_gpu.py``: the code measured is the code verified.

CuPy's rules this relies on, read in CuPy's source (cupy/cupy, the v14 files behind the installed wheel):

- ``cupy/cuda/stream.pyx``, ``_BaseStream.begin_capture``: raises ``RuntimeError("cannot capture on the
  default (legacy) stream")`` when ``ptr`` is 0 or 1 (checked on the installed 14.2 wheel too: it raises
  before any driver call), and captures in ``runtime.streamCaptureModeRelaxed`` by default. Hence
  captures run on a stream of our own, created with ``non_blocking=True``.
- ``_BaseStream.end_capture`` returns ``graph.Graph.from_stream(g, host_funcargs)``, and
  ``cupy/cuda/graph.pyx``'s ``Graph.from_stream`` calls ``runtime.graphInstantiate`` at once: in v14.2 and
  in CuPy's main branch as of 2026-08 (commit 6b6d956, unchanged since v14.2). ``capture`` then calls
  ``Graph.upload(stream)`` (``cudaGraphUpload``), which moves the executable graph to the device ahead of
  its first launch: capture, instantiation and upload all happen there, outside any timing.
- ``cupy/cuda/graph.pyx``, ``Graph.launch(stream)``: one ``runtime.graphLaunch(graphExec, stream.ptr)``
  (on the current stream when ``stream`` is None), nothing else; it does not synchronise.
- ``cupy_backends/cuda/libs/cublas.pyx``, ``setStream``: raises ``NotImplementedError("calling cuBLAS
  API during stream capture is currently unsupported")`` on a capturing stream (cuRAND, cuSOLVER and
  cuSPARSE do the same), and ``cupy/cuda/memory.pyx``, ``MemoryPointer.copy_from_device`` and the other
  synchronous copies raise ``RuntimeError`` on a capturing stream. Hence a capture holds only our
  ``RawKernel`` launches: no library call, no allocation, no copy, no synchronise.
- ``cupy/cuda/function.pyx``, ``_pointer`` (used by ``_launch``): a Python ``int`` kernel argument is
  packed as ``numpy.int64`` (C ``long long``), a Python ``float`` as ``float64``, ``None`` as a null
  pointer. Hence scalars are passed as numpy scalars of the kernel's exact C type (``numpy.uint64`` for
  ``unsigned long long``).
- What one ``RawKernel.__call__`` does (``cupy/_core/raw.pyx`` and ``cupy/cuda/function.pyx``): the
  ``kernel`` property (``runtime.getDevice()`` and a cache lookup), ``Function.__call__`` (pads grid and
  block to three, finds the current stream), ``_launch`` (one ``_pointer`` object per argument, in Python
  objects, then ``runtime._ensure_context()``), then ``driver.launchKernel``, i.e. ``cuLaunchKernel``.
  ``driver_eager`` calls ``cupy.cuda.driver.launchKernel(f, gx, gy, gz, bx, by, bz, shared_mem, stream,
  kernel_params, extra)`` (``cupy_backends/cuda/api/driver.pyx``, v14.2) with the arguments packed once
  (``pack_arguments``): the driver's part of a launch and one Cython call, without CuPy's per-call Python.
"""

from __future__ import annotations

import contextlib
import ctypes
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.cuda import cupy_module

#: One block of one thread: the launch suite's kernels need no more, and launch cost does not depend on it.
GRID = (1,)
BLOCK = (1,)

Submit = Callable[[], None]

#: Argument counts of the launch-cost ladder: ``launch.cu``'s ``empty_kernel`` and ``empty_args_<n>``.
LADDER_ARGS = (0, 1, 4, 8, 13)


@dataclass(frozen=True)
class Launch:
    """One kernel launch on the current stream: ``kernel`` (a ``cupy.RawKernel``) with ``args`` (numpy scalars
    or CuPy arrays, in the kernel's parameter order), one block of one thread."""

    kernel: Any
    args: tuple[Any, ...] = ()

    def __call__(self) -> None:
        self.kernel(GRID, BLOCK, self.args)


def ladder_kernel_name(n_args: int) -> str:
    """The empty kernel of ``launch.cu`` that takes ``n_args`` arguments (one of ``LADDER_ARGS``)."""
    if n_args not in LADDER_ARGS:
        raise ValueError(f"no ladder kernel takes {n_args} arguments (known: {LADDER_ARGS})")
    return "empty_kernel" if n_args == 0 else f"empty_args_{n_args}"


def ladder_args(n_args: int, pointer: Any) -> tuple[Any, ...]:
    """The ``n_args`` arguments of ``ladder_kernel_name(n_args)``: ``pointer`` (a device array) at even
    positions, ``numpy.int32`` at odd ones, as the kernels declare them."""
    return tuple(pointer if index % 2 == 0 else np.int32(index) for index in range(n_args))


def eager(launch: Launch, n_kernels: int) -> Submit:
    """Return a ``submit()`` that launches ``launch`` ``n_kernels`` times back to back, without waiting."""
    kernel, args = launch.kernel, launch.args

    def submit() -> None:
        for _ in range(n_kernels):
            kernel(GRID, BLOCK, args)

    return submit


def eager_each(launches: Sequence[Launch]) -> Submit:
    """Return a ``submit()`` that launches each of ``launches`` once, in order, without waiting: the same
    kernel with different arguments per launch (e.g. the spin kernels' own ``elapsed`` slots)."""
    calls = tuple((launch.kernel, launch.args) for launch in launches)

    def submit() -> None:
        for kernel, args in calls:
            kernel(GRID, BLOCK, args)

    return submit


def eager_sync_each(launch: Launch, n_kernels: int, stream: Any) -> Submit:
    """Return a ``submit()`` that launches ``launch`` and synchronises ``stream`` after each, ``n_kernels``
    times: the pattern in which no launch can hide behind the previous kernel."""
    kernel, args, synchronize = launch.kernel, launch.args, stream.synchronize

    def submit() -> None:
        for _ in range(n_kernels):
            kernel(GRID, BLOCK, args)
            synchronize()

    return submit


def capture(launch: Launch, n_kernels: int, stream: Any) -> Any:
    """Capture ``n_kernels`` launches of ``launch`` on ``stream`` (a non-default stream) into a CUDA graph
    (``capture_graph``)."""
    return capture_graph(eager(launch, n_kernels), stream)


def capture_graph(submit: Submit, stream: Any) -> Any:
    """Capture the work one ``submit()`` queues on ``stream`` (a non-default stream) into a CUDA graph.

    Returns the ``cupy.cuda.Graph``, instantiated and uploaded (see the module docstring), ready to replay.
    ``submit`` may only launch kernels: CuPy refuses library calls, copies and synchronises in a capture.
    """
    with stream:
        stream.begin_capture()
        try:
            submit()
        except BaseException:
            with contextlib.suppress(Exception):  # end the capture; the launch's error is the one to report
                stream.end_capture()
            raise
        graph = stream.end_capture()
    graph.upload(stream)
    return graph


def replay(graph: Any, stream: Any) -> Submit:
    """Return a ``submit()`` that launches the instantiated ``graph`` once on ``stream``, without waiting."""
    launch_graph, target = graph.launch, stream

    def submit() -> None:
        launch_graph(target)

    return submit


def then_sync(submit: Submit, stream: Any) -> Submit:
    """Return ``submit()`` then a synchronise of ``stream``: the call a host timer can time honestly."""
    synchronize = stream.synchronize

    def call() -> None:
        submit()
        synchronize()

    return call


def event_times_s(submit: Submit, stream: Any, rounds: int, before: Submit | None = None) -> list[float]:
    """Time ``submit()`` ``rounds`` times with a pair of CUDA events recorded on ``stream`` around it, s each.

    ``before()`` (not timed, optional) runs before the start event of every round. The end event is recorded
    right after ``submit()`` returns and waited for, so each figure is the GPU's span from the start event to
    the end of the last piece of work ``submit`` queued (host gaps between launches included).
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds!r}")
    cupy = cupy_module()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times_s: list[float] = []
    for _ in range(rounds):
        if before is not None:
            before()
        start.record(stream)
        submit()
        end.record(stream)
        end.synchronize()
        times_s.append(cupy.cuda.get_elapsed_time(start, end) * 1e-3)  # CuPy reports ms
    return times_s


def event_median_s(submit: Submit, stream: Any, rounds: int, before: Submit | None = None) -> float:
    """Return the median over ``rounds`` of the CUDA-event time of ``submit()``, s (see ``event_times_s``)."""
    return statistics.median(event_times_s(submit, stream, rounds, before))


@dataclass(frozen=True)
class PackedArguments:
    """Kernel arguments as ``cuLaunchKernel`` takes them: ``pointer`` is the address of an array of ``count``
    ``void*``, each pointing to one argument's bytes (a device address, or a scalar's value); 0 when there are
    no arguments. The buffers behind the addresses are held here: keep this object while it is launched."""

    pointer: int
    count: int
    buffers: tuple[np.ndarray, ...]


def pack_arguments(args: Sequence[Any], device_pointer: Callable[[Any], int | None]) -> PackedArguments:
    """Pack ``args`` once, as CuPy's ``_launch`` packs them at every call: ``None`` as a null pointer, a numpy
    scalar as its own bytes (its dtype is the C type), and anything ``device_pointer`` maps to an address
    (CuPy arrays: ``cupy_device_pointer``) as that address. Raises ``TypeError`` naming any other argument."""
    values = []
    for index, arg in enumerate(args):
        if arg is None:
            values.append(np.zeros(1, dtype=np.uintp))
        elif isinstance(arg, np.generic):
            values.append(np.array([arg], dtype=arg.dtype))
        else:
            address = device_pointer(arg)
            if address is None:
                raise TypeError(
                    f"kernel argument {index}: {type(arg).__name__} is not an array, None or a scalar"
                )
            values.append(np.array([address], dtype=np.uintp))
    table = np.array([value.ctypes.data for value in values], dtype=np.uintp)
    return PackedArguments(table.ctypes.data if values else 0, len(values), (table, *values))


def cupy_device_pointer(arg: Any) -> int | None:
    """The device address of a CuPy array (``ndarray.data.ptr``); None for anything else."""
    cupy = cupy_module()
    return int(arg.data.ptr) if isinstance(arg, cupy.ndarray) else None


def read_packed(packed: PackedArguments, sizes: Sequence[int]) -> list[bytes]:
    """The bytes each packed argument points to, ``sizes[i]`` bytes for argument ``i``: what the driver will
    copy into the kernel's parameters (used to check the packing)."""
    table = (ctypes.c_void_p * packed.count).from_address(packed.pointer) if packed.count else []
    return [ctypes.string_at(address, size) for address, size in zip(table, sizes, strict=True)]


def driver_eager(launch: Launch, n_kernels: int, stream: Any) -> Submit:
    """Return a ``submit()`` that launches ``launch`` ``n_kernels`` times on ``stream`` through
    ``cupy.cuda.driver.launchKernel`` (``cuLaunchKernel``), its arguments packed once here: the launch
    without CuPy's per-call Python (see the module docstring), one block of one thread as ``eager``'s."""
    cupy = cupy_module()
    packed = pack_arguments(launch.args, cupy_device_pointer)
    function = launch.kernel.kernel.ptr  # RawKernel.kernel: the loaded cupy.cuda.function.Function
    launch_kernel, stream_ptr, params = cupy.cuda.driver.launchKernel, stream.ptr, packed.pointer
    (grid,), (block,) = GRID, BLOCK

    def submit() -> None:
        for _ in range(n_kernels):
            launch_kernel(function, grid, 1, 1, block, 1, 1, 0, stream_ptr, params, 0)

    submit.packed = packed  # the buffers behind ``params`` live as long as ``submit``
    return submit


@dataclass(frozen=True)
class EnqueueDepth:
    """How many launches queue behind one running kernel before a launch call blocks on the host.

    ``depth``: launches that returned while the blocking kernel ran, before one waited for it (None: none
    waited within ``limit`` launches); ``blocked_s``: how long that launch waited; ``launch_s``: the median
    host time of the launches that did not wait (None when the first one waited). Seconds."""

    depth: int | None
    limit: int
    blocked_s: float | None
    launch_s: float | None

    def as_fact(self) -> dict[str, float | int | None]:
        """As the run record saves it (plain JSON)."""
        return {
            "depth": self.depth,
            "limit": self.limit,
            "blocked_s": self.blocked_s,
            "launch_s": self.launch_s,
        }


def measure_enqueue_depth(
    launch: Launch, blocker: Launch, blocker_s: float, stream: Any, limit: int, waited_s: float = 1e-3
) -> EnqueueDepth:
    """Launch ``blocker`` (a kernel of ``blocker_s`` seconds) on ``stream``, then ``launch`` behind it one at
    a time, each timed on the host, until one takes longer than ``waited_s`` and returns only once at least
    half of ``blocker_s`` has passed (it waited for the blocker: a preempted host thread returns sooner), or
    ``limit`` launches went through. Raises ``RuntimeError`` when the blocker ended before that (make it
    longer: the count would not be a depth)."""
    stream.synchronize()
    kernel, args, clock = launch.kernel, launch.args, time.perf_counter
    times_s: list[float] = []
    depth = waited = None
    blocker()
    started = clock()
    for index in range(limit):
        before = clock()
        kernel(GRID, BLOCK, args)
        after = clock()
        if after - before > waited_s and after - started >= blocker_s / 2:
            depth, waited = index, after - before
            break
        times_s.append(after - before)
    ran_out = depth is None and clock() - started >= blocker_s
    stream.synchronize()
    if ran_out:
        raise RuntimeError(
            f"enqueue depth: the {blocker_s * 1e3:.0f} ms blocking kernel ended before {limit} launches were "
            "issued behind it, so no count is a depth; give it a longer duration"
        )
    launch_s = statistics.median(times_s) if times_s else None  # None: the first launch waited already
    return EnqueueDepth(depth=depth, limit=limit, blocked_s=waited, launch_s=launch_s)
