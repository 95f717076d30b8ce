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
- ``_BaseStream.end_capture`` returns ``graph.Graph.from_stream(g, host_funcargs)``; in 14.2
  ``cupy/cuda/graph.pyx``, ``Graph.from_stream``, calls ``runtime.graphInstantiate`` at once (later CuPy
  sources defer it to the first ``launch`` or ``upload``). ``capture`` therefore ends with
  ``Graph.upload(stream)``, which instantiates where that is deferred and moves the executable graph to
  the device: capture, instantiation and upload all happen there, outside any timing, in either version.
- ``cupy/cuda/graph.pyx``, ``Graph.launch(stream)``: one ``runtime.graphLaunch(graphExec, stream.ptr)``
  (on the current stream when ``stream`` is None), nothing else; it does not synchronise.
- ``cupy_backends/cuda/libs/cublas.pyx``, ``setStream``: raises ``NotImplementedError("calling cuBLAS
  API during stream capture is currently unsupported")`` on a capturing stream (cuRAND, cuSOLVER and
  cuSPARSE do the same), and ``cupy/cuda/memory.pyx``, ``MemoryPointer.copy_from_device`` and the other
  synchronous copies raise ``RuntimeError`` on a capturing stream. Hence a capture holds only our
  ``RawKernel`` launches: no library call, no allocation, no copy, no synchronise.
- ``cupy/cuda/function.pyx``, ``_pointer`` (used by ``_launch``): a Python ``int`` kernel argument is
  packed as ``numpy.int64`` (C ``long long``), a Python ``float`` as ``float64``. Hence scalars are
  passed as numpy scalars of the kernel's exact C type (``numpy.uint64`` for ``unsigned long long``).
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.cuda import cupy_module

#: One block of one thread: the launch suite's kernels need no more, and launch cost does not depend on it.
GRID = (1,)
BLOCK = (1,)

Submit = Callable[[], None]


@dataclass(frozen=True)
class Launch:
    """One kernel launch on the current stream: ``kernel`` (a ``cupy.RawKernel``) with ``args`` (numpy scalars
    or CuPy arrays, in the kernel's parameter order), one block of one thread."""

    kernel: Any
    args: tuple[Any, ...] = ()

    def __call__(self) -> None:
        self.kernel(GRID, BLOCK, self.args)


def eager(launch: Launch, n_kernels: int) -> Submit:
    """Return a ``submit()`` that launches ``launch`` ``n_kernels`` times back to back, without waiting."""
    kernel, args = launch.kernel, launch.args

    def submit() -> None:
        for _ in range(n_kernels):
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
