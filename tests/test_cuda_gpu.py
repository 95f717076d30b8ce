"""The GPU launch suite's kernels and submission patterns do what the benchmarks assume (needs a GPU).

Correctness only, never speed: the spin clock is calibrated and steady, the spin kernel lasts what it is
asked to (the ruler of the ``spin`` case) by CUDA events and by the host's clock, and what each spin records
of itself agrees with the timer (judged on the durations achieved, never on the timer's resolution, which
is only recorded); every submission pattern of ``benchmarks.cuda_timing`` (the driver layer's included)
runs exactly the kernels it is given, every rung of the launch-cost ladder launches with its arguments, the
enqueue-depth search finds a depth the queue really holds, and a captured graph replays the same effect as
eager launches; launches with programmatic dependent launch (``benchmarks/launch_ex.py``) run every kernel,
each after its predecessor's write, eager, behind a blocker and captured into a graph. Skipped, with the
reason, where CUDA is unusable (the PDL checks also below compute capability 9.0).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks import kernels
from benchmarks.cuda import cupy_module, unavailable_reason
from benchmarks.cuda_timing import (
    LADDER_ARGS,
    Launch,
    capture,
    capture_graph,
    driver_eager,
    eager,
    eager_each,
    eager_sync_each,
    event_times_s,
    ladder_args,
    ladder_kernel_name,
    measure_enqueue_depth,
    replay,
    then_sync,
)
from benchmarks.launch_ex import ex_eager, pdl_reason
from benchmarks.spin_clock import achieved, elapsed_slots, spin, spin_clock

_REASON = unavailable_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

SPIN_NS = 100_000
SPIN_TOLERANCE = 0.05
REPEATS = 21
COUNTS = (1, 7, 256)
# The spin case's durations, and how many spins of each are checked.
SHORT_SPINS_NS = (1_000, 2_000, 4_000, 32_000)
SHORT_SPINS = 256
# The spread of the spin clock's calibration repeats above which the SM clock is not steady enough for
# microsecond spins.
CLOCK_SPREAD_MAX = 0.02
# Longer than any enqueue below takes on the host, so the launches queue up behind it.
BLOCK_NS = 20_000_000
# Long enough for the host to queue one launch and an event behind it.
HOLD_NS = 50_000
# The enqueue-depth search: its blocking kernel and the most launches it tries.
DEPTH_BLOCK_NS = 200_000_000
DEPTH_LIMIT = 8_192


@pytest.fixture(scope="module")
def stream() -> Iterator[Any]:
    """A non-blocking stream (graph capture refuses the legacy default stream), current for the module."""
    cupy = cupy_module()
    own = cupy.cuda.Stream(non_blocking=True)
    with own:
        yield own
    own.synchronize()


@pytest.fixture
def counter(stream: Any) -> Any:
    """A device counter (one unsigned 64-bit integer) set to zero."""
    cupy = cupy_module()
    value = cupy.zeros(1, dtype=cupy.uint64)
    stream.synchronize()
    return value


def _count(counter: Any) -> int:
    return int(counter.get()[0])


def _counting(counter: Any) -> Launch:
    return Launch(kernels.kernel("launch", "count_kernel"), (counter,))


def test_spin_kernel_lasts_its_duration_by_events(stream: Any) -> None:
    """A short spin first holds the GPU, so the spin under test is queued before the start event is
    processed and the events time the kernel, not the host's launch of it."""
    submit, hold = eager(spin(SPIN_NS), 1), spin(HOLD_NS)
    event_times_s(submit, stream, 3, before=hold)  # warm up: compile, load, first launch
    median_s = statistics.median(event_times_s(submit, stream, REPEATS, before=hold))
    assert median_s == pytest.approx(SPIN_NS * 1e-9, rel=SPIN_TOLERANCE)


def test_spin_clock_is_calibrated_and_steady() -> None:
    """SM cycles per ns within any GPU's clock range, and repeats that agree: the rate every spin uses. The
    timer's tick is a fact of the run (``gpu.timer_tick_ns``), not a condition: only its sign is checked."""
    clock = spin_clock()
    assert 0.3 < clock.cycles_per_ns < 4.0, f"{clock.cycles_per_ns:.3f} SM cycles per ns"
    assert clock.spread <= CLOCK_SPREAD_MAX, (
        f"the SM clock moved by {clock.spread:.1%} between calibrations ({clock.cycles_per_ns_min:.4f} … "
        f"{clock.cycles_per_ns_max:.4f} cycles/ns): spins of a few µs would be off by as much"
    )
    assert clock.tick_ns > 0


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("duration_ns", SHORT_SPINS_NS)
def test_short_spins_achieve_their_durations(stream: Any, duration_ns: int, mode: str) -> None:
    """The spin case's kernels, as it submits them: each lasts its duration in SM cycles at the calibrated
    rate, and the mean of their %globaltimer readings agrees within half a timer step (each reading is whole
    steps; the mean of 256 is not) or 5 %, whichever is larger: a coarse timer widens this check, never fails
    it, and a fine one makes it tight."""
    clock = spin_clock()
    slots = elapsed_slots(SHORT_SPINS)
    submit = eager_each([spin(duration_ns, slots[index], clock) for index in range(SHORT_SPINS)])
    if mode == "graph":
        submit = replay(capture_graph(submit, stream), stream)
    then_sync(submit, stream)()
    spun = achieved(slots.get(), clock)
    assert spun.n_kernels == SHORT_SPINS
    assert duration_ns <= spun.cycles_ns <= duration_ns * (1 + SPIN_TOLERANCE)
    tolerance_ns = max(SPIN_TOLERANCE * duration_ns, clock.tick_ns / 2)
    assert spun.timer_ns == pytest.approx(spun.cycles_ns, abs=tolerance_ns), (
        f"spins of {duration_ns} ns: {spun.cycles_ns:.0f} ns by SM cycles, {spun.timer_ns:.0f} ns by "
        f"%globaltimer (tick {clock.tick_ns:.0f} ns)"
    )


def test_spin_kernel_lasts_its_duration_by_host_timer(stream: Any) -> None:
    """The host sees the launch and synchronise round trip too, so the spin's duration is the difference
    between a 100 µs spin and a 0 µs spin, each launched and waited for the same way."""

    def host_median_s(duration_ns: int) -> float:
        call = then_sync(eager(spin(duration_ns), 1), stream)
        times_s = []
        for index in range(3 + REPEATS):
            start = time.perf_counter()
            call()
            if index >= 3:  # the first calls warm up
                times_s.append(time.perf_counter() - start)
        return statistics.median(times_s)

    spin_s = host_median_s(SPIN_NS) - host_median_s(0)
    assert spin_s == pytest.approx(SPIN_NS * 1e-9, rel=SPIN_TOLERANCE)


@pytest.mark.parametrize("n_kernels", COUNTS)
def test_eager_runs_every_kernel(stream: Any, counter: Any, n_kernels: int) -> None:
    then_sync(eager(_counting(counter), n_kernels), stream)()
    assert _count(counter) == n_kernels


@pytest.mark.parametrize("n_kernels", COUNTS)
def test_sync_each_runs_every_kernel(stream: Any, counter: Any, n_kernels: int) -> None:
    eager_sync_each(_counting(counter), n_kernels, stream)()
    assert _count(counter) == n_kernels


@pytest.mark.parametrize("n_kernels", COUNTS)
def test_driver_layer_runs_every_kernel(stream: Any, counter: Any, n_kernels: int) -> None:
    """``cuLaunchKernel`` with the arguments packed once: the counter's address reaches the kernel."""
    then_sync(driver_eager(_counting(counter), n_kernels, stream), stream)()
    assert _count(counter) == n_kernels


@pytest.mark.parametrize("n_args", LADDER_ARGS)
def test_every_rung_of_the_ladder_launches_through_each_layer(stream: Any, n_args: int) -> None:
    cupy = cupy_module()
    scratch = cupy.zeros(1, dtype=cupy.int32)
    launch = Launch(kernels.kernel("launch", ladder_kernel_name(n_args)), ladder_args(n_args, scratch))
    for submit in (
        eager(launch, 8),
        driver_eager(launch, 8, stream),
        replay(capture(launch, 8, stream), stream),
    ):
        then_sync(submit, stream)()
    assert int(scratch.get()[0]) == 0, "an empty kernel wrote its pointer argument"


def test_the_enqueue_depth_found_is_a_depth_the_queue_holds(stream: Any) -> None:
    """Behind a blocker, as many launches as the search found return at once; the one after them waits."""
    empty = Launch(kernels.kernel("launch", "empty_kernel"))
    found = measure_enqueue_depth(empty, spin(DEPTH_BLOCK_NS), DEPTH_BLOCK_NS * 1e-9, stream, DEPTH_LIMIT)
    if found.depth is None:
        pytest.skip(f"no launch blocked within {DEPTH_LIMIT} launches: nothing more to check")
    assert found.depth > 0 and found.blocked_s is not None
    stream.synchronize()
    spin(DEPTH_BLOCK_NS)()
    start = time.perf_counter()
    eager(empty, found.depth)()
    queued_s = time.perf_counter() - start
    assert not stream.done and queued_s < DEPTH_BLOCK_NS * 1e-9 / 2, "the found depth did not fit the queue"
    stream.synchronize()


@pytest.mark.parametrize("n_kernels", COUNTS)
def test_enqueue_behind_a_blocker_runs_every_kernel(stream: Any, counter: Any, n_kernels: int) -> None:
    spin(BLOCK_NS)()
    eager(_counting(counter), n_kernels)()
    assert not stream.done, "the blocking kernel ended before the launches were queued behind it"
    stream.synchronize()
    assert _count(counter) == n_kernels


@pytest.mark.parametrize("n_kernels", COUNTS)
def test_graph_replay_runs_every_node(stream: Any, counter: Any, n_kernels: int) -> None:
    graph = capture(_counting(counter), n_kernels, stream)
    stream.synchronize()
    assert _count(counter) == 0, "capturing must record the launches, not run them"
    then_sync(replay(graph, stream), stream)()
    assert _count(counter) == n_kernels


def test_graph_replays_the_same_effect_as_eager_launches(stream: Any) -> None:
    cupy = cupy_module()
    by_graph, by_eager = cupy.zeros(1, dtype=cupy.uint64), cupy.zeros(1, dtype=cupy.uint64)
    replays, n_kernels = 5, 64
    submit = replay(capture(_counting(by_graph), n_kernels, stream), stream)
    for _ in range(replays):
        submit()
    eager(_counting(by_eager), replays * n_kernels)()
    stream.synchronize()
    assert _count(by_graph) == _count(by_eager) == replays * n_kernels


def test_capture_refuses_the_legacy_default_stream() -> None:
    """CuPy's ``begin_capture`` rule the suite relies on (see ``benchmarks/cuda_timing.py``)."""
    cupy = cupy_module()
    with pytest.raises(RuntimeError, match="default"):
        capture(Launch(kernels.kernel("launch", "empty_kernel")), 1, cupy.cuda.Stream.null)


def _pdl_kernel(counter: Any) -> Launch:
    """``pdl_kernel`` adding to ``counter``; skips the test where PDL is not available, with the reason."""
    reason = pdl_reason(cupy_module().cuda.Device().compute_capability)
    if reason is not None:
        pytest.skip(reason)
    return Launch(kernels.kernel("launch", "pdl_kernel"), (counter,))


@pytest.mark.parametrize("pdl", [False, True], ids=["plain", "pdl"])
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_pdl_launches_run_every_kernel_after_its_predecessor(
    stream: Any, counter: Any, mode: str, pdl: bool
) -> None:
    """256 launches of ``pdl_kernel``, whose plain read-add-write of the counter would lose increments if a
    kernel read it before its predecessor's write were visible: the count is exact only if every wait held."""
    submit = ex_eager(_pdl_kernel(counter), 256, stream, pdl)
    if mode == "graph":
        graph = capture_graph(submit, stream)
        stream.synchronize()
        assert _count(counter) == 0, "capturing must record the launches, not run them"
        submit = replay(graph, stream)
    for _ in range(3):
        then_sync(submit, stream)()
    assert _count(counter) == 3 * 256


@pytest.mark.parametrize("pdl", [False, True], ids=["plain", "pdl"])
def test_pdl_launches_queue_behind_a_blocker(stream: Any, counter: Any, pdl: bool) -> None:
    """As the case times them: queued behind a running kernel without blocking the host, then all run."""
    submit = ex_eager(_pdl_kernel(counter), 64, stream, pdl)
    spin(BLOCK_NS)()
    submit()
    assert not stream.done, "the blocking kernel ended before the launches were queued behind it"
    stream.synchronize()
    assert _count(counter) == 64
