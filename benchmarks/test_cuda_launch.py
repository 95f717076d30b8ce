"""GPU launch suite: what launching, synchronising and replaying CUDA kernels costs, measured with CuPy.

Six cases, each a ``case`` in ``extra_info`` (with ``mode``, ``n_kernels``, ``kernel_ns``, ``gpu_time_s``):

- ``launch_batch``: N empty kernels on one stream, then one synchronise (slope: cost per launch; intercept:
  the synchronise round trip);
- ``launch_sync_each``: launch + synchronise, N times (nothing can overlap);
- ``graph_replay``: the same N kernels captured once into a CUDA graph, replayed and synchronised (slope:
  cost per graph node; intercept: the graph launch);
- ``spin``: N = 256 kernels of a known duration d, eager and graph (per-kernel time ≈ max(launch, d + gap):
  the knee is where launches start to hide behind GPU work, the lecture's overlapped composition);
- ``enqueue``: N launches (eager), or one launch of a graph of N kernels (graph), issued while one long
  spin kernel holds the GPU, timed on the host with no synchronise inside (the host cost of submitting
  alone, nvbench's blocking-kernel idea);
- ``sync``: synchronising an idle stream.

pytest-benchmark times the host; every timed call ends with a synchronise, except ``enqueue``'s by design
(its work is waited for in the untimed setup of the next round). ``gpu_time_s`` is the median of a separate
set of CUDA-event-timed submissions, so recording events never adds to the host time. Kernels are compiled,
graphs captured and instantiated, and every call warmed up before any timing. Per-call figures are saved as
they are; dividing by ``n_kernels`` happens once, in ``analysis/launch.py``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from benchmarks import kernels
from benchmarks.cuda import cupy_module, unavailable_reason
from benchmarks.cuda_timing import (
    Launch,
    Submit,
    capture,
    eager,
    eager_sync_each,
    event_median_s,
    replay,
    then_sync,
)
from benchmarks.records import record

_REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")

# Sweeps: kernels per timed call, and requested spin durations (ns). --quick keeps a few points of each.
LAUNCH_N = tuple(2**k for k in range(11))  # 1 … 1,024
QUICK_LAUNCH_N = (1, 16, 256)
# Blocker + N launches (+ 2 events when timing on the GPU) stay well under the ~1,024 launches a CUDA
# stream queues before a launch call blocks, so the enqueue case never times a full queue.
ENQUEUE_N = tuple(2**k for k in range(10))  # 1 … 512
QUICK_ENQUEUE_N = (1, 16, 256)
SPIN_NS = (0, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000)
QUICK_SPIN_NS = (0, 4_000, 32_000)
SPIN_N_KERNELS = 256

_SWEEPS = {  # test function -> (argument, full values, --quick values)
    "test_launch_batch": ("n_kernels", LAUNCH_N, QUICK_LAUNCH_N),
    "test_launch_sync_each": ("n_kernels", LAUNCH_N, QUICK_LAUNCH_N),
    "test_graph_replay": ("n_kernels", LAUNCH_N, QUICK_LAUNCH_N),
    "test_enqueue": ("n_kernels", ENQUEUE_N, QUICK_ENQUEUE_N),
    "test_spin": ("kernel_ns", SPIN_NS, QUICK_SPIN_NS),
}


@dataclass(frozen=True)
class _Budget:
    """How long each case is timed: seconds of timed rounds, and the bounds on the number of rounds."""

    case_s: float
    min_rounds: int
    max_rounds: int
    max_event_rounds: int


_FULL = _Budget(case_s=0.4, min_rounds=20, max_rounds=2_000, max_event_rounds=50)
_QUICK = _Budget(case_s=0.05, min_rounds=5, max_rounds=200, max_event_rounds=5)
_WARMUP_CALLS = 3
_PROBE_CALLS = 3
# A timed round shorter than this repeats the call (pytest-benchmark's iterations), so the host timer's
# own cost (tens of ns) stays a small part of the round.
_MIN_ROUND_S = 20e-6
# The enqueue case: the blocking kernel lasts this many times the measured enqueue, and at least 2 ms.
_BLOCK_FACTOR = 8
_MIN_BLOCK_NS = 2_000_000
_PROBE_BLOCK_NS = 20_000_000


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise each sweep with its full values, or its ``--quick`` values."""
    sweep = _SWEEPS.get(metafunc.function.__name__)
    if sweep is not None:
        argument, full, quick = sweep
        metafunc.parametrize(argument, quick if metafunc.config.getoption("quick") else full)


@dataclass(frozen=True)
class _Gpu:
    """What every case needs: its own non-blocking stream (current for the whole module) and the kernels."""

    stream: Any
    empty: Launch
    spin_kernel: Any

    def spin(self, duration_ns: int) -> Launch:
        """A launch of the spin kernel lasting ``duration_ns`` ns (passed as the kernel's unsigned 64-bit)."""
        return Launch(self.spin_kernel, (np.uint64(duration_ns),))


@pytest.fixture(scope="module")
def gpu() -> Iterator[_Gpu]:
    """Compile the kernels once and make a non-blocking stream current (graph capture needs one)."""
    cupy = cupy_module()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        yield _Gpu(
            stream=stream,
            empty=Launch(kernels.kernel("launch", "empty_kernel")),
            spin_kernel=kernels.kernel("launch", "spin_kernel"),
        )
    stream.synchronize()


@pytest.fixture
def budget(request: pytest.FixtureRequest) -> _Budget:
    """The timing budget: ``--quick`` or full."""
    return _QUICK if request.config.getoption("quick") else _FULL


def _host_time_s(call: Submit, before: Submit | None = None) -> float:
    """Seconds one ``call()`` takes on the host clock (``before()`` untimed), after ``_WARMUP_CALLS`` calls;
    the mean of ``_PROBE_CALLS`` calls. Used only to size rounds, never recorded."""
    times_s = []
    for index in range(_WARMUP_CALLS + _PROBE_CALLS):
        if before is not None:
            before()
        start = time.perf_counter()
        call()
        if index >= _WARMUP_CALLS:
            times_s.append(time.perf_counter() - start)
    return sum(times_s) / len(times_s)


def _rounds(budget: _Budget, round_s: float) -> int:
    """Rounds of ``round_s`` seconds each that fill ``budget.case_s``, within the budget's bounds."""
    wanted = int(budget.case_s / max(round_s, 1e-9))
    return min(budget.max_rounds, max(budget.min_rounds, wanted))


def _event_rounds(budget: _Budget, round_s: float) -> int:
    """Rounds of CUDA-event timing: half the host budget, at least 3, at most ``budget.max_event_rounds``."""
    return min(budget.max_event_rounds, max(3, int(budget.case_s / 2 / max(round_s, 1e-9))))


def _time_host(benchmark: Any, call: Submit, budget: _Budget) -> float:
    """Warm ``call()`` up, then time it with pytest-benchmark; returns the warm-up's estimate, s per call.

    Rounds shorter than ``_MIN_ROUND_S`` repeat the call (iterations); the estimate sizes the rounds only.
    """
    call_s = _host_time_s(call)
    iterations = max(1, math.ceil(_MIN_ROUND_S / call_s))
    rounds = _rounds(budget, call_s * iterations)
    benchmark.pedantic(call, rounds=rounds, iterations=iterations, warmup_rounds=1)
    return call_s


def _measure_and_record(
    benchmark: Any, gpu: _Gpu, budget: _Budget, call: Submit, submit: Submit, **coords: Any
) -> None:
    """Time ``call()`` on the host (``_time_host``), then ``submit()`` with CUDA events, and record the case
    (``coords``) on the "cuda" device with the CUDA-event median as ``gpu_time_s``, s per call.

    ``call`` is the timed unit and ends with a synchronise; ``submit`` is the same work without the final
    synchronise (the end event is recorded in its place).
    """
    call_s = _time_host(benchmark, call, budget)
    gpu_time_s = event_median_s(submit, gpu.stream, _event_rounds(budget, call_s))
    record(benchmark, device="cuda", **coords, gpu_time_s=gpu_time_s)


def _submission(gpu: _Gpu, launch: Launch, n_kernels: int, mode: str) -> Submit:
    """``n_kernels`` launches of ``launch``: back to back ("eager"), or one replay of them captured into a
    CUDA graph ("graph"; captured and instantiated here, outside any timing)."""
    if mode == "eager":
        return eager(launch, n_kernels)
    if mode == "graph":
        return replay(capture(launch, n_kernels, gpu.stream), gpu.stream)
    raise ValueError(f"mode must be 'eager' or 'graph', got {mode!r}")


def _measure_submission(
    benchmark: Any,
    gpu: _Gpu,
    budget: _Budget,
    *,
    case: str,
    op: str,
    launch: Launch,
    mode: str,
    n_kernels: int,
    **coords: Any,
) -> None:
    """The cases that differ only in what they submit: ``n_kernels`` launches of ``launch`` in ``mode``
    (``_submission``), timed with a synchronise after each submission, then recorded."""
    submit = _submission(gpu, launch, n_kernels, mode)
    _measure_and_record(
        benchmark,
        gpu,
        budget,
        then_sync(submit, gpu.stream),
        submit,
        case=case,
        op=op,
        mode=mode,
        n_kernels=n_kernels,
        **coords,
    )


@pytest.mark.benchmark(group="cuda launch_batch")
def test_launch_batch(benchmark: Any, gpu: _Gpu, budget: _Budget, n_kernels: int) -> None:
    _measure_submission(
        benchmark,
        gpu,
        budget,
        case="launch_batch",
        op="empty_kernel",
        launch=gpu.empty,
        mode="eager",
        n_kernels=n_kernels,
    )


@pytest.mark.benchmark(group="cuda launch_sync_each")
def test_launch_sync_each(benchmark: Any, gpu: _Gpu, budget: _Budget, n_kernels: int) -> None:
    submit = eager_sync_each(gpu.empty, n_kernels, gpu.stream)  # ends with a synchronise already
    _measure_and_record(
        benchmark,
        gpu,
        budget,
        submit,
        submit,
        case="launch_sync_each",
        op="empty_kernel",
        mode="eager",
        n_kernels=n_kernels,
    )


@pytest.mark.benchmark(group="cuda graph_replay")
def test_graph_replay(benchmark: Any, gpu: _Gpu, budget: _Budget, n_kernels: int) -> None:
    _measure_submission(
        benchmark,
        gpu,
        budget,
        case="graph_replay",
        op="empty_kernel",
        launch=gpu.empty,
        mode="graph",
        n_kernels=n_kernels,
    )


@pytest.mark.benchmark(group="cuda spin")
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_spin(benchmark: Any, gpu: _Gpu, budget: _Budget, kernel_ns: int, mode: str) -> None:
    _measure_submission(
        benchmark,
        gpu,
        budget,
        case="spin",
        op="spin_kernel",
        launch=gpu.spin(kernel_ns),
        mode=mode,
        n_kernels=SPIN_N_KERNELS,
        kernel_ns=kernel_ns,
    )


@pytest.mark.benchmark(group="cuda enqueue")
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_enqueue(benchmark: Any, gpu: _Gpu, budget: _Budget, n_kernels: int, mode: str) -> None:
    stream = gpu.stream
    submit = _submission(gpu, gpu.empty, n_kernels, mode)
    probe_blocker = gpu.spin(_PROBE_BLOCK_NS)

    def probe_setup() -> None:
        stream.synchronize()
        probe_blocker()

    enqueue_s = _host_time_s(submit, before=probe_setup)
    block_ns = max(_MIN_BLOCK_NS, math.ceil(_BLOCK_FACTOR * enqueue_s * 1e9))
    blocker = gpu.spin(block_ns)

    def setup() -> None:
        """Wait for the previous round's work, then hold the GPU busy for ``block_ns`` (untimed)."""
        stream.synchronize()
        blocker()

    rounds = _rounds(budget, block_ns * 1e-9)
    benchmark.pedantic(submit, setup=setup, rounds=rounds, iterations=1, warmup_rounds=1)
    stream.synchronize()
    # A round preempted on the host may outlast the blocker (an outlier the median shrugs off); a typical
    # round that does means the GPU drained the queue during the timing, and the figure is not an enqueue.
    typical_s = benchmark.stats.stats.median if benchmark.stats is not None else 0.0
    if typical_s * 1e9 >= block_ns:
        raise RuntimeError(
            f"enqueue {mode}, n_kernels={n_kernels}: the median round took {typical_s * 1e6:.0f} µs, not "
            f"less than the {block_ns / 1e3:.0f} µs blocking kernel, so the queue drained while timing"
        )
    # Events around the submission, after the blocker: the GPU's own time for N queued empty kernels.
    gpu_time_s = event_median_s(submit, stream, _event_rounds(budget, block_ns * 1e-9), before=setup)
    record(
        benchmark,
        case="enqueue",
        device="cuda",
        op="empty_kernel",
        mode=mode,
        n_kernels=n_kernels,
        gpu_time_s=gpu_time_s,
    )


@pytest.mark.benchmark(group="cuda sync")
def test_sync(benchmark: Any, gpu: _Gpu, budget: _Budget) -> None:
    gpu.stream.synchronize()
    _time_host(benchmark, gpu.stream.synchronize, budget)  # no GPU work, so no CUDA-event time to record
    record(benchmark, case="sync", device="cuda", op="synchronize")
