"""The GPU suite's bookkeeping, checked where no GPU is: the driver layer's argument packing and calls, the
enqueue-depth search, the spin clock's arithmetic, and the queue sizing of the launch cases.

CuPy is replaced by small stand-ins that record what they are given; the kernels' own view of packed
arguments is checked in ``tests/test_launch_kernels_host.py`` (the real ``launch.cu`` on the host).
"""

from __future__ import annotations

import ctypes
import math
import struct
import time
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks import cuda_timing, kernels, spin_clock
from benchmarks.cuda_timing import (
    Launch,
    driver_eager,
    eager_each,
    measure_enqueue_depth,
    pack_arguments,
    read_packed,
)
from benchmarks.spin_clock import SpinClock, clock_from_samples
from benchmarks.test_cuda_launch import _QUEUE_RESERVE, LADDER_N, _Queue


class _DeviceArray:
    """Stands in for a CuPy array: what ``cupy_device_pointer`` reads is ``data.ptr``."""

    def __init__(self, address: int) -> None:
        self.data = SimpleNamespace(ptr=address)


def _fake_cupy(calls: list[tuple[int, ...]]) -> SimpleNamespace:
    def launch_kernel(*args: int) -> None:
        calls.append(args)

    return SimpleNamespace(
        ndarray=_DeviceArray, cuda=SimpleNamespace(driver=SimpleNamespace(launchKernel=launch_kernel))
    )


def test_pack_arguments_packs_each_argument_as_cuda_reads_it() -> None:
    device = _DeviceArray(0x7F00_0000_1000)
    packed = pack_arguments(
        (device, np.int32(-7), None, np.uint64(2**40 + 5), np.float32(0.5)),
        lambda arg: arg.data.ptr if isinstance(arg, _DeviceArray) else None,
    )
    assert packed.count == 5
    assert read_packed(packed, (8, 4, 8, 8, 4)) == [
        struct.pack("<Q", 0x7F00_0000_1000),
        struct.pack("<i", -7),
        bytes(8),
        struct.pack("<Q", 2**40 + 5),
        struct.pack("<f", 0.5),
    ]
    pointers = (ctypes.c_void_p * 5).from_address(packed.pointer)
    assert all(address % 4 == 0 for address in pointers), "each value aligned for the driver's copy"
    assert pack_arguments((), lambda arg: None).pointer == 0


def test_pack_arguments_refuses_what_it_cannot_pass() -> None:
    with pytest.raises(TypeError, match="kernel argument 1: int is not an array, None or a scalar"):
        pack_arguments((None, 3), lambda arg: None)


def test_driver_eager_calls_cuLaunchKernel_with_the_packed_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, ...]] = []
    monkeypatch.setattr(cuda_timing, "cupy_module", lambda: _fake_cupy(calls))
    raw_kernel = SimpleNamespace(kernel=SimpleNamespace(ptr=0xF00D))
    stream = SimpleNamespace(ptr=0x5EED)
    submit = driver_eager(Launch(raw_kernel, (_DeviceArray(0xBEEF), np.int32(3))), 4, stream)
    submit()
    assert len(calls) == 4
    params = calls[0][9]
    assert calls == [(0xF00D, 1, 1, 1, 1, 1, 1, 0, 0x5EED, params, 0)] * 4
    assert read_packed(submit.packed, (8, 4)) == [struct.pack("<Q", 0xBEEF), struct.pack("<i", 3)]
    assert submit.packed.pointer == params


def test_eager_each_launches_each_once_in_order() -> None:
    seen: list[object] = []
    kernel = lambda grid, block, args: seen.append((grid, block, args))  # noqa: E731
    eager_each([Launch(kernel, (index,)) for index in range(3)])()
    assert seen == [((1,), (1,), (0,)), ((1,), (1,), (1,)), ((1,), (1,), (2,))]


class _Blocked:
    """A launch queue of ``depth`` entries behind a blocker of ``blocker_s``: the launch after ``depth`` waits
    for the blocker to end; launch number ``preempted`` is held up 5 ms early on (a preempted host thread)."""

    def __init__(self, depth: int | None, blocker_s: float, preempted: int | None = None) -> None:
        self.depth, self.blocker_s, self.preempted = depth, blocker_s, preempted
        self.launched = 0
        self.started = math.nan
        self.synchronized = 0

    def blocker(self, grid: object, block: object, args: object) -> None:
        self.started = time.perf_counter()

    def kernel(self, grid: object, block: object, args: object) -> None:
        if self.launched == self.depth:
            time.sleep(max(0.0, self.started + self.blocker_s - time.perf_counter()))
        elif self.launched == self.preempted:
            time.sleep(0.005)
        self.launched += 1

    def synchronize(self) -> None:
        self.synchronized += 1


def test_enqueue_depth_is_the_launches_before_one_waits_for_the_blocker() -> None:
    queue = _Blocked(depth=40, blocker_s=0.1, preempted=7)
    found = measure_enqueue_depth(Launch(queue.kernel), Launch(queue.blocker), 0.1, queue, limit=1000)
    assert found.depth == 40, "a preempted launch early on is not the queue filling up"
    assert found.blocked_s is not None and found.blocked_s > 0.05
    assert found.launch_s < 0.005 and found.limit == 1000
    assert queue.launched == 41 and queue.synchronized == 2
    assert found.as_fact() == {
        "depth": 40,
        "limit": 1000,
        "blocked_s": found.blocked_s,
        "launch_s": found.launch_s,
    }


def test_enqueue_depth_beyond_the_limit_is_none() -> None:
    queue = _Blocked(depth=None, blocker_s=10.0)
    found = measure_enqueue_depth(Launch(queue.kernel), Launch(queue.blocker), 10.0, queue, limit=50)
    assert (found.depth, found.blocked_s, queue.launched) == (None, None, 50)


def test_enqueue_depth_refuses_a_blocker_that_ended_first() -> None:
    queue = _Blocked(depth=None, blocker_s=0.0)
    slow = Launch(lambda grid, block, args: time.sleep(0.002))
    with pytest.raises(RuntimeError, match="blocking kernel ended before 5 launches were issued"):
        measure_enqueue_depth(slow, Launch(queue.blocker), 0.004, queue, limit=5, waited_s=1.0)


def test_clock_from_samples_takes_the_median_rate_and_tick() -> None:
    clock = clock_from_samples(
        [(3_960_000, 2_000_000), (3_958_000, 2_000_000), (3_970_000, 2_000_000)], [1024, 1024, 32, 1024]
    )
    assert clock.cycles_per_ns == pytest.approx(1.98)
    assert (clock.cycles_per_ns_min, clock.cycles_per_ns_max) == pytest.approx((1.979, 1.985))
    assert clock.spread == pytest.approx(0.006 / 1.98)
    assert (clock.tick_ns, clock.tick_min_ns, clock.tick_max_ns) == (1024.0, 32.0, 1024.0)
    assert clock.cycles(1_000) == 1_980 and clock.ns(1_980) == pytest.approx(1_000)
    assert clock.as_fact()["repeats"] == 3 and clock.as_fact()["calibration_ns"] == 2_000_000
    with pytest.raises(ValueError, match=">= 0 ns"):
        clock.cycles(-1)


@pytest.mark.parametrize(
    ("calibrations", "advances", "message"),
    [
        ([(100, 1_000)], [10], "100 cycles over 1000 ns"),
        ([(0, 2_000_000)], [10], "0 cycles over 2000000 ns"),
        ([(4_000_000, 2_000_000)], [0], "advances must be > 0 ns"),
        ([], [10], "at least one calibration"),
    ],
)
def test_clock_from_samples_refuses_unusable_samples(calibrations, advances, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        clock_from_samples(calibrations, advances)


def test_spin_passes_the_calibrated_cycles_and_the_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "kernel", lambda module, name: f"{module}.{name}")
    clock = SpinClock(1.5, 1.5, 1.5, 1024.0, 32.0, 1024.0, 2_000_000, 7)
    launch = spin_clock.spin(4_000, "slot", clock)
    assert launch.kernel == "launch.spin_kernel"
    assert launch.args == (np.uint64(6_000), "slot") and type(launch.args[0]) is np.uint64


@pytest.mark.parametrize(
    ("depth", "depth_most_args", "room", "ladder_n"),
    [
        (1_022, 1_020, 1_020 - _QUEUE_RESERVE, LADDER_N),
        (200, None, 200 - _QUEUE_RESERVE, 96),
        (None, None, 8_184, 256),
    ],
)
def test_the_queue_sizes_the_launch_cases(depth, depth_most_args, room: int, ladder_n: int) -> None:
    queue = _Queue(depth=depth, depth_most_args=depth_most_args, limit=8_192)
    assert (queue.room, queue.ladder_n) == (room, ladder_n)
