"""The kernels of ``benchmarks/kernels/launch.cu``, their real source run on the CPU (``tests/host_cuda``):
each does what the launch suite relies on. ``%globaltimer`` is CLOCK_MONOTONIC there, so the spin is
checked against host time, with a lower bound only (a busy machine can only make it longer)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.host_cuda import (
    SCHEDULES,
    HostKernel,
    Schedule,
    guarded_array,
    guarded_empty,
    kernel_module,
    unavailable_reason,
)

_REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")


def _kernel(name: str) -> HostKernel:
    return kernel_module("launch").get_function(name)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_count_kernel_adds_one_per_thread(schedule: Schedule) -> None:
    count = _kernel("count_kernel")
    counter = guarded_array(np.zeros(1, np.uint64))
    for _ in range(100):
        count((1,), (1,), (counter,), schedule=schedule)
    assert int(counter[0]) == 100, "every launch ran once"
    count((3,), (64,), (counter,), schedule=schedule)  # interleaved, each atomic switches blocks
    assert int(counter[0]) == 100 + 3 * 64


def test_empty_kernel_runs() -> None:
    empty = _kernel("empty_kernel")
    assert empty.sizes == ()
    empty((1,), (1,), ())
    empty((4,), (128,), ())


@pytest.mark.parametrize("duration_ns", [0, 1_000, 2_000_000])
def test_spin_kernel_lasts_at_least_its_duration(duration_ns: int) -> None:
    spin = _kernel("spin_kernel")
    start_ns = time.monotonic_ns()
    spin((1,), (1,), (np.uint64(duration_ns),))
    assert time.monotonic_ns() - start_ns >= duration_ns


def test_timer_step_kernel_writes_a_positive_step() -> None:
    step_ns = guarded_empty(1, np.uint64)  # 0xFF… until written: 2^64 − 1
    _kernel("timer_step_kernel")((1,), (1,), (step_ns,))
    assert 0 < int(step_ns[0]) < 10**9, "the smallest advance of the timer, in ns"
