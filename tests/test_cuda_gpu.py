"""The GPU launch suite's kernels and submission patterns do what the benchmarks assume (needs a GPU).

Correctness only, never speed: the spin kernel lasts what it is asked to (the ruler of the ``spin`` case),
every submission pattern of ``benchmarks.cuda_timing`` runs exactly the kernels it is given, and a captured
graph replays the same effect as eager launches. Skipped, with the reason, where CUDA is unusable.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from benchmarks import kernels
from benchmarks.cuda import cupy_module, unavailable_reason
from benchmarks.cuda_timing import (
    Launch,
    capture,
    eager,
    eager_sync_each,
    event_times_s,
    replay,
    then_sync,
)

_REASON = unavailable_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

SPIN_NS = 100_000
SPIN_TOLERANCE = 0.05
REPEATS = 21
COUNTS = (1, 7, 256)
# The benchmark's shortest nonzero spin is 1 µs: a %globaltimer step above a tenth of it makes short spins
# more than 10 % off their requested duration.
TIMER_STEP_MAX_NS = 100
# Longer than any enqueue below takes on the host, so the launches queue up behind it.
BLOCK_NS = 20_000_000
# Long enough for the host to queue one launch and an event behind it.
HOLD_NS = 50_000


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


def _spin(duration_ns: int) -> Launch:
    return Launch(kernels.kernel("launch", "spin_kernel"), (np.uint64(duration_ns),))


def _counting(counter: Any) -> Launch:
    return Launch(kernels.kernel("launch", "count_kernel"), (counter,))


def test_spin_kernel_lasts_its_duration_by_events(stream: Any) -> None:
    """A short spin first holds the GPU, so the spin under test is queued before the start event is
    processed and the events time the kernel, not the host's launch of it."""
    submit, hold = eager(_spin(SPIN_NS), 1), _spin(HOLD_NS)
    event_times_s(submit, stream, 3, before=hold)  # warm up: compile, load, first launch
    median_s = statistics.median(event_times_s(submit, stream, REPEATS, before=hold))
    assert median_s == pytest.approx(SPIN_NS * 1e-9, rel=SPIN_TOLERANCE)


def test_globaltimer_resolves_short_spins(stream: Any) -> None:
    """The spin kernel's ruler, %globaltimer, advances in steps fine enough for the 1 µs spins of the
    ``spin`` case. PTX calls it a nanosecond timer but does not promise its update rate, which is reported
    to be as coarse as a microsecond on some GPUs: that would make short spins end up to a step early."""
    cupy = cupy_module()
    step_ns = cupy.zeros(1, dtype=cupy.uint64)
    Launch(kernels.kernel("launch", "timer_step_kernel"), (step_ns,))()
    stream.synchronize()
    assert 0 < int(step_ns.get()[0]) <= TIMER_STEP_MAX_NS


def test_spin_kernel_lasts_its_duration_by_host_timer(stream: Any) -> None:
    """The host sees the launch and synchronise round trip too, so the spin's duration is the difference
    between a 100 µs spin and a 0 µs spin, each launched and waited for the same way."""

    def host_median_s(duration_ns: int) -> float:
        call = then_sync(eager(_spin(duration_ns), 1), stream)
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
def test_enqueue_behind_a_blocker_runs_every_kernel(stream: Any, counter: Any, n_kernels: int) -> None:
    _spin(BLOCK_NS)()
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
