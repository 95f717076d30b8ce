"""GPU launch suite: what launching, synchronising and replaying CUDA kernels costs, measured with CuPy.

Eight cases, each a ``case`` in ``extra_info`` (with ``mode``, ``n_kernels``, ``kernel_ns``, ``gpu_time_s``):

- ``launch_batch``: N empty kernels on one stream, then one synchronise (slope: cost per launch; intercept:
  the synchronise round trip);
- ``launch_sync_each``: launch + synchronise, N times (nothing can overlap);
- ``graph_replay``: the same N kernels captured once into a CUDA graph, replayed and synchronised (slope:
  cost per graph node; intercept: the graph launch);
- ``spin``: N = 256 kernels of a known duration d, eager and graph (per-kernel time ≈ max(launch, d + gap):
  the knee is where launches start to hide behind GPU work, the lecture's overlapped composition). The
  kernels spin on the SM cycle counter at the run's calibrated rate (``benchmarks.spin_clock``), and each
  writes what it achieved: ``achieved_ns`` and ``achieved_timer_ns`` beside the requested ``kernel_ns``;
- ``enqueue``: N launches (eager), or one launch of a graph of N kernels (graph), issued while one long
  spin kernel holds the GPU, timed on the host with no synchronise inside (the host cost of submitting
  alone, nvbench's blocking-kernel idea); N stays below the queue depth measured at the start;
- ``launch_args``: the launch-cost ladder, the same empty kernel with ``n_args`` = 0, 1, 4, 8, 13 arguments
  issued by ``layer`` "cupy" (``RawKernel.__call__``) or "driver" (``cuLaunchKernel`` through
  ``cupy.cuda.driver.launchKernel``, arguments packed once), both as ``enqueue`` behind a blocking kernel
  (host cost per launch), or "graph" (captured, replayed; its CUDA-event time behind a lead spin is the GPU's
  time per node);
- ``sync``: synchronising an idle stream;
- ``launch_pdl``: programmatic dependent launch (compute capability >= 9.0). N launches of ``pdl_kernel``
  (``launch.cu``: it lets its successor be scheduled, then waits for its predecessor) through the driver's
  ``cuLaunchKernelEx`` (``benchmarks/launch_ex.py``: CuPy binds no launch with attributes), ``pdl`` true with
  the programmatic stream serialization attribute, false the same call without it; ``mode`` "eager" queued
  behind a blocking kernel as ``enqueue`` is (its CUDA-event slope: the GPU's time per kernel, the gap g
  with and without PDL), or "graph" captured from those launches (programmatic edges with the attribute) and
  replayed behind a lead spin as the ladder's graph layer is (the GPU's time per node). What PDL hides of g
  is the ratio of the two slopes, measured on the same kernel in the same run. Skipped, with the reason,
  below compute capability 9.0 or where the driver has no ``cuLaunchKernelEx``.

pytest-benchmark times the host; every timed call ends with a synchronise, except those issued behind a
blocking kernel (their work is waited for in the untimed setup of the next round). ``gpu_time_s`` is the
median of a separate set of CUDA-event-timed submissions, so recording events never adds to the host time.
Kernels are compiled, graphs captured and instantiated, and every call warmed up before any timing.
Per-call figures are saved as they are; dividing by ``n_kernels`` happens once, in ``analysis/launch.py``.

Facts of the run (``benchmarks.run_notes.record_fact``): ``gpu.spin_clock`` (cycles per ns and its spread)
and ``gpu.spin_clock_end`` (the same, measured again after the module), ``gpu.timer_tick_ns`` and
``gpu.timer_advances_ns``, ``gpu.enqueue_depth`` and ``gpu.enqueue_depth_detail``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from benchmarks import kernels
from benchmarks.cuda import cupy_module, device_failures, unavailable_reason
from benchmarks.cuda_timing import (
    LADDER_ARGS,
    EnqueueDepth,
    Launch,
    Submit,
    capture,
    capture_graph,
    driver_eager,
    eager,
    eager_each,
    eager_sync_each,
    event_median_s,
    ladder_args,
    ladder_kernel_name,
    measure_enqueue_depth,
    replay,
    then_sync,
)
from benchmarks.launch_ex import ex_eager, pdl_reason
from benchmarks.records import record
from benchmarks.run_notes import record_fact
from benchmarks.spin_clock import (
    SpinClock,
    achieved,
    elapsed_slots,
    measure_spin_clock,
    record_clock_facts,
    spin,
    spin_clock,
)

_REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")

# Sweeps: kernels per timed call, and requested spin durations (ns). --quick keeps a few points of each.
LAUNCH_N = tuple(2**k for k in range(11))  # 1 … 1,024
QUICK_LAUNCH_N = (1, 16, 256)
# Launches queued behind a blocking kernel: each case with more than the measured queue depth leaves room for
# (the blocker, two events and a margin: _QUEUE_RESERVE) is skipped, so no case times a launch that blocks.
ENQUEUE_N = tuple(2**k for k in range(10))  # 1 … 512
QUICK_ENQUEUE_N = (1, 16, 256)
SPIN_NS = (0, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000)
QUICK_SPIN_NS = (0, 4_000, 32_000)
SPIN_N_KERNELS = 256
# The launch-cost ladder: argument counts (LADDER_ARGS, 0 … 13), layers, launches per timed call (fewer
# where the queue holds fewer than twice as many).
LADDER_LAYERS = ("cupy", "driver", "graph")
QUICK_LADDER_ARGS = (0, 13)
LADDER_N = 256
# The PDL case: kernels per timed call (eager ones within the measured queue, as ENQUEUE_N).
PDL_N = (1, 4, 16, 64, 256)
QUICK_PDL_N = (1, 256)

_SWEEPS = {  # test function -> (argument, full values, --quick values)
    "test_launch_batch": ("n_kernels", LAUNCH_N, QUICK_LAUNCH_N),
    "test_launch_sync_each": ("n_kernels", LAUNCH_N, QUICK_LAUNCH_N),
    "test_graph_replay": ("n_kernels", LAUNCH_N, QUICK_LAUNCH_N),
    "test_enqueue": ("n_kernels", ENQUEUE_N, QUICK_ENQUEUE_N),
    "test_spin": ("kernel_ns", SPIN_NS, QUICK_SPIN_NS),
    "test_launch_args": ("n_args", LADDER_ARGS, QUICK_LADDER_ARGS),
    "test_launch_pdl": ("n_kernels", PDL_N, QUICK_PDL_N),
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
# A spin ahead of each event-timed graph replay of the ladder, so the start event fires with the graph
# already queued behind it: the event span is the GPU's time for the nodes, not the host's graph launch.
_LEAD_NS = 50_000
# The enqueue-depth measurement: launches tried behind one blocking kernel, and its repeats per kernel.
_DEPTH_LIMIT = 8_192
_DEPTH_REPEATS = 3
_DEPTH_MIN_BLOCK_S = 0.05
# Queue entries kept free besides the measured launches: the blocking kernel, two events, a margin.
_QUEUE_RESERVE = 8


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise each sweep with its full values, or its ``--quick`` values."""
    sweep = _SWEEPS.get(metafunc.function.__name__)
    if sweep is not None:
        argument, full, quick = sweep
        metafunc.parametrize(argument, quick if metafunc.config.getoption("quick") else full)


@dataclass(frozen=True)
class _Gpu:
    """What every case needs: its own non-blocking stream (current for the whole module), the kernels, the
    run's spin clock, and a one-element device array the ladder kernels take as their pointer arguments."""

    stream: Any
    empty: Launch
    clock: SpinClock
    scratch: Any

    def spin(self, duration_ns: float, elapsed: Any = None) -> Launch:
        """A launch of the spin kernel lasting ``duration_ns`` ns (``benchmarks.spin_clock.spin``)."""
        return spin(duration_ns, elapsed, self.clock)


@pytest.fixture(scope="module")
def gpu(request: pytest.FixtureRequest) -> Iterator[_Gpu]:
    """Compile the kernels once, calibrate the spin clock (facts of the run), and make a non-blocking stream
    current (graph capture needs one); after the module, calibrate again (``gpu.spin_clock_end``): a rate
    that moved means the SM clock changed during the run."""
    config = request.config
    with device_failures(config, "setting up the launch suite"):
        cupy = cupy_module()
        stream = cupy.cuda.Stream(non_blocking=True)
        clock = spin_clock()
        record_clock_facts(config, clock)
        scratch = cupy.zeros(1, dtype=cupy.int32)
    with stream:
        yield _Gpu(
            stream=stream,
            empty=Launch(kernels.kernel("launch", "empty_kernel")),
            clock=clock,
            scratch=scratch,
        )
    with device_failures(config, "calibrating the spin clock after the launch suite"):
        record_clock_facts(config, measure_spin_clock(stream), "gpu.spin_clock_end")


@dataclass(frozen=True)
class _Queue:
    """The launch queue measured at the start (``measure_enqueue_depth``): ``depth`` for the empty kernel and
    ``depth_most_args`` for the ladder's 13-argument one (None: no launch blocked within ``limit``)."""

    depth: int | None
    depth_most_args: int | None
    limit: int

    @property
    def room(self) -> int:
        """Launches that may queue behind a blocking kernel without one blocking."""
        known = [depth for depth in (self.depth, self.depth_most_args) if depth is not None]
        return min(known, default=self.limit) - _QUEUE_RESERVE

    @property
    def ladder_n(self) -> int:
        """Launches per timed call of the ladder: ``LADDER_N``, or half the room where that is less."""
        return max(1, min(LADDER_N, self.room // 2))


def _depth(gpu: _Gpu, launch: Launch) -> tuple[int | None, list[EnqueueDepth]]:
    """``_DEPTH_REPEATS`` measurements of how many ``launch``es queue behind a blocking kernel; the smallest
    depth found (None when none blocked) and every measurement."""
    per_launch_s = _host_time_s(then_sync(eager(launch, 256), gpu.stream)) / 256
    blocker_s = max(_DEPTH_MIN_BLOCK_S, 4 * _DEPTH_LIMIT * per_launch_s)
    blocker = gpu.spin(blocker_s * 1e9)
    runs = [
        measure_enqueue_depth(launch, blocker, blocker_s, gpu.stream, _DEPTH_LIMIT)
        for _ in range(_DEPTH_REPEATS)
    ]
    depths = [run.depth for run in runs if run.depth is not None]
    return (min(depths) if depths else None), runs


@pytest.fixture(scope="module")
def queue(request: pytest.FixtureRequest, gpu: _Gpu) -> _Queue:
    """Measure the launch queue's depth once (facts ``gpu.enqueue_depth``, ``gpu.enqueue_depth_detail``)."""
    config = request.config
    most = max(LADDER_ARGS)
    widest = Launch(kernels.kernel("launch", ladder_kernel_name(most)), ladder_args(most, gpu.scratch))
    with device_failures(config, "measuring the launch queue's depth"):
        depth, runs = _depth(gpu, gpu.empty)
        depth_most_args, runs_most_args = _depth(gpu, widest)
    record_fact(config, "gpu.enqueue_depth", depth)
    record_fact(
        config,
        "gpu.enqueue_depth_detail",
        {
            "empty_kernel": [run.as_fact() for run in runs],
            ladder_kernel_name(most): [run.as_fact() for run in runs_most_args],
        },
    )
    return _Queue(depth=depth, depth_most_args=depth_most_args, limit=_DEPTH_LIMIT)


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


def _measure(benchmark: Any, gpu: _Gpu, budget: _Budget, call: Submit, submit: Submit) -> float:
    """Time ``call()`` on the host (``_time_host``), then ``submit()`` with CUDA events; returns the
    CUDA-event median, s per call. ``call`` is the timed unit and ends with a synchronise; ``submit`` is the
    same work without the final synchronise (the end event is recorded in its place)."""
    call_s = _time_host(benchmark, call, budget)
    return event_median_s(submit, gpu.stream, _event_rounds(budget, call_s))


def _measure_and_record(
    benchmark: Any, gpu: _Gpu, budget: _Budget, call: Submit, submit: Submit, **coords: Any
) -> None:
    """``_measure``, then record the case (``coords``) on the "cuda" device with its ``gpu_time_s``."""
    gpu_time_s = _measure(benchmark, gpu, budget, call, submit)
    record(benchmark, device="cuda", **coords, gpu_time_s=gpu_time_s)


def _time_behind_blocker(benchmark: Any, gpu: _Gpu, budget: _Budget, submit: Submit, what: str) -> float:
    """Time ``submit()`` on the host while a spin kernel holds the GPU (launched in the untimed setup of each
    round, after waiting for the previous round's work), so the figure is the host's cost of submitting
    alone; then the same with CUDA events. Returns the CUDA-event median, s per call: the GPU's time for the
    queued work once the blocker ends. Raises ``RuntimeError`` (naming ``what``) when the typical round
    outlasted the blocker: the queue drained while timing, and the figure is not an enqueue."""
    stream = gpu.stream
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
            f"{what}: the median round took {typical_s * 1e6:.0f} µs, not less than the "
            f"{block_ns / 1e3:.0f} µs blocking kernel, so the queue drained while timing"
        )
    # Events around the submission, after the blocker: the GPU's own time for the queued kernels.
    return event_median_s(submit, stream, _event_rounds(budget, block_ns * 1e-9), before=setup)


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
    slots = elapsed_slots(SPIN_N_KERNELS)  # each kernel writes its own: cycles spun, timer ns around them
    launches = eager_each([gpu.spin(kernel_ns, slots[index]) for index in range(SPIN_N_KERNELS)])
    submit = launches if mode == "eager" else replay(capture_graph(launches, gpu.stream), gpu.stream)
    gpu_time_s = _measure(benchmark, gpu, budget, then_sync(submit, gpu.stream), submit)
    spun = achieved(slots.get(), gpu.clock)  # of the last submission (the event-timed ones come last)
    record(
        benchmark,
        case="spin",
        device="cuda",
        op="spin_kernel",
        mode=mode,
        n_kernels=SPIN_N_KERNELS,
        kernel_ns=kernel_ns,
        achieved_ns=spun.cycles_ns,
        achieved_timer_ns=spun.timer_ns,
        gpu_time_s=gpu_time_s,
    )


@pytest.mark.benchmark(group="cuda enqueue")
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_enqueue(
    benchmark: Any, gpu: _Gpu, queue: _Queue, budget: _Budget, n_kernels: int, mode: str
) -> None:
    if mode == "eager" and n_kernels > queue.room:
        pytest.skip(
            f"the launch queue holds {queue.room + _QUEUE_RESERVE} launches behind a running kernel "
            f"(measured): {n_kernels} launches + the blocker and events would fill it"
        )
    submit = _submission(gpu, gpu.empty, n_kernels, mode)
    gpu_time_s = _time_behind_blocker(
        benchmark, gpu, budget, submit, f"enqueue {mode}, n_kernels={n_kernels}"
    )
    record(
        benchmark,
        case="enqueue",
        device="cuda",
        op="empty_kernel",
        mode=mode,
        n_kernels=n_kernels,
        gpu_time_s=gpu_time_s,
    )


@pytest.mark.benchmark(group="cuda launch_args")
@pytest.mark.parametrize("layer", LADDER_LAYERS)
def test_launch_args(
    benchmark: Any, gpu: _Gpu, queue: _Queue, budget: _Budget, n_args: int, layer: str
) -> None:
    stream, n_kernels = gpu.stream, queue.ladder_n
    launch = Launch(kernels.kernel("launch", ladder_kernel_name(n_args)), ladder_args(n_args, gpu.scratch))
    if layer == "graph":
        submit = replay(capture(launch, n_kernels, stream), stream)
        _time_host(benchmark, then_sync(submit, stream), budget)
        lead = gpu.spin(_LEAD_NS)
        gpu_time_s = event_median_s(submit, stream, budget.max_event_rounds, before=lead)
    else:
        submit = eager(launch, n_kernels) if layer == "cupy" else driver_eager(launch, n_kernels, stream)
        what = f"launch_args {layer}, n_args={n_args}"
        gpu_time_s = _time_behind_blocker(benchmark, gpu, budget, submit, what)
    record(
        benchmark,
        case="launch_args",
        device="cuda",
        op=ladder_kernel_name(n_args),
        mode="graph" if layer == "graph" else "eager",
        layer=layer,
        n_args=n_args,
        n_kernels=n_kernels,
        gpu_time_s=gpu_time_s,
    )


@pytest.fixture(scope="module")
def pdl_launch(gpu: _Gpu) -> Launch:
    """The PDL case's kernel with a null counter (it does nothing after its wait), compiled once; skips the
    case, with the reason, where programmatic dependent launch is not available (``launch_ex.pdl_reason``)."""
    reason = pdl_reason(cupy_module().cuda.Device().compute_capability)
    if reason is not None:
        pytest.skip(reason)
    return Launch(kernels.kernel("launch", "pdl_kernel"), (None,))


@pytest.mark.benchmark(group="cuda launch_pdl")
@pytest.mark.parametrize("pdl", [False, True], ids=["plain", "pdl"])
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_launch_pdl(
    benchmark: Any,
    gpu: _Gpu,
    queue: _Queue,
    pdl_launch: Launch,
    budget: _Budget,
    n_kernels: int,
    mode: str,
    pdl: bool,
) -> None:
    stream = gpu.stream
    submit = ex_eager(pdl_launch, n_kernels, stream, pdl)
    what = f"launch_pdl {mode}, pdl={pdl}, n_kernels={n_kernels}"
    if mode == "graph":
        submit = replay(capture_graph(submit, stream), stream)
        _time_host(benchmark, then_sync(submit, stream), budget)
        gpu_time_s = event_median_s(submit, stream, budget.max_event_rounds, before=gpu.spin(_LEAD_NS))
    else:
        if n_kernels > queue.room:
            pytest.skip(
                f"the launch queue holds {queue.room + _QUEUE_RESERVE} launches behind a running kernel "
                f"(measured): {n_kernels} launches + the blocker and events would fill it"
            )
        gpu_time_s = _time_behind_blocker(benchmark, gpu, budget, submit, what)
    record(
        benchmark,
        case="launch_pdl",
        device="cuda",
        op="pdl_kernel",
        mode=mode,
        pdl=pdl,
        n_kernels=n_kernels,
        gpu_time_s=gpu_time_s,
    )


@pytest.mark.benchmark(group="cuda sync")
def test_sync(benchmark: Any, gpu: _Gpu, budget: _Budget) -> None:
    gpu.stream.synchronize()
    _time_host(benchmark, gpu.stream.synchronize, budget)  # no GPU work, so no CUDA-event time to record
    record(benchmark, case="sync", device="cuda", op="synchronize")
