"""The kernels of ``benchmarks/kernels/launch.cu``, their real source run on the CPU (``tests/host_cuda``):
each does what the launch suite relies on, and the Python side hands each the arguments it declares.

On the host ``%globaltimer`` and ``clock64()`` both count CLOCK_MONOTONIC's nanoseconds (one "cycle" per ns),
so what the spin and calibration kernels write can be checked against each other exactly where their reads
are ordered, and against host time with lower bounds only (a busy machine can only make things longer).
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks import kernels
from benchmarks.cuda_timing import LADDER_ARGS, ladder_args, ladder_kernel_name, pack_arguments
from benchmarks.spin_clock import ELAPSED_WORDS, UNWRITTEN, achieved, clock_from_samples
from tests.host_cuda import (
    GUARD_BYTES,
    HOST_BODIES,
    MODULE_HELPERS,
    POISON,
    SCHEDULES,
    HostCudaError,
    HostKernel,
    HostModule,
    Schedule,
    guarded_array,
    guarded_empty,
    kernel_module,
    unavailable_reason,
)

_REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")

#: Spin lengths, cycles (= ns on the host).
SPIN_CYCLES = (0, 1_000, 2_000_000)
#: The calibration kernel's interval in these tests, ns (the suite's is 2 ms).
CALIBRATION_NS = 1_000_000


def _kernel(name: str) -> HostKernel:
    return kernel_module("launch").get_function(name)


def _host_pointer(arg: object) -> int | None:
    """What ``pack_arguments`` takes a host array's address to be (a CuPy array's device address on a GPU)."""
    return arg.ctypes.data if isinstance(arg, np.ndarray) else None


def _launch_packed(kernel: HostKernel, args: tuple[object, ...]) -> None:
    """Launch ``kernel`` through its ``void** args`` entry point with ``args`` packed by ``pack_arguments``
    as for ``cuLaunchKernel``: the driver layer's packing, run against the kernel's real parameter list."""
    packed = pack_arguments(args, _host_pointer)
    geometry = (ctypes.c_uint * 6)(1, 1, 1, 1, 1, 1)
    error = ctypes.create_string_buffer(4096)
    pointers = ctypes.cast(packed.pointer, ctypes.POINTER(ctypes.c_void_p))
    assert kernel.launcher(geometry, pointers, 0, error, len(error)) == 0, error.value.decode()


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_count_kernel_adds_one_per_thread(schedule: Schedule) -> None:
    count = _kernel("count_kernel")
    counter = guarded_array(np.zeros(1, np.uint64))
    for _ in range(100):
        count((1,), (1,), (counter,), schedule=schedule)
    assert int(counter[0]) == 100, "every launch ran once"
    count((3,), (64,), (counter,), schedule=schedule)  # interleaved, each atomic switches blocks
    assert int(counter[0]) == 100 + 3 * 64


@pytest.mark.parametrize("n_args", LADDER_ARGS)
def test_ladder_kernels_take_the_arguments_the_suite_passes(n_args: int) -> None:
    """Each rung declares n_args parameters, pointers and 4-byte integers alternating, and accepts exactly
    what ``ladder_args`` builds, through ``RawKernel``-style calls and as the driver layer packs them; it
    writes nothing (every byte of its buffer, guards included, stays poisoned)."""
    kernel = _kernel(ladder_kernel_name(n_args))
    assert len(kernel.sizes) == n_args
    for index, (size, pointee) in enumerate(zip(kernel.sizes, kernel.pointees, strict=True)):
        expected = (8, 0) if index % 2 == 0 else (4, -1)  # const void*, or int by value
        assert (size, pointee) == expected, f"parameter {index}"
    buffer = guarded_empty(4, np.uint32)
    args = ladder_args(n_args, buffer)
    assert [type(arg) for arg in args[1::2]] == [np.int32] * (n_args // 2)
    kernel((1,), (1,), args)
    _launch_packed(kernel, args)
    raw = buffer
    while raw.base is not None:  # the guarded allocation the buffer is a view of
        raw = raw.base
    assert (np.frombuffer(raw, np.uint8) == POISON).all(), "an empty kernel wrote memory"
    assert raw.size >= 2 * GUARD_BYTES


def test_a_launch_with_the_wrong_arguments_is_refused() -> None:
    with pytest.raises(HostCudaError, match="takes 4 arguments, 3 given"):
        _kernel("empty_args_4")((1,), (1,), ladder_args(3, guarded_empty(1, np.uint32)))
    with pytest.raises(HostCudaError, match="argument 1: a int64 scalar is 8 bytes, the parameter 4"):
        _kernel("empty_args_4")((1,), (1,), (None, np.int64(1), None, np.int32(3)))
    with pytest.raises(HostCudaError, match="argument 0: None for a parameter passed by value"):
        _kernel("spin_kernel")((1,), (1,), (None, None))
    with pytest.raises(ValueError, match="no ladder kernel takes 5 arguments"):
        ladder_kernel_name(5)


def test_empty_kernel_runs_on_every_geometry() -> None:
    empty = _kernel("empty_kernel")
    assert empty.sizes == ()
    empty((4,), (128,), (), schedule="interleaved")
    _launch_packed(empty, ())


@pytest.mark.parametrize("cycles", SPIN_CYCLES)
def test_spin_kernel_spins_its_cycles_and_writes_what_it_achieved(cycles: int) -> None:
    elapsed = guarded_empty(ELAPSED_WORDS, np.uint64)  # 0xFF…: UNWRITTEN until written
    start_ns = time.monotonic_ns()
    _kernel("spin_kernel")((1,), (1,), (np.uint64(cycles), elapsed))
    host_ns = time.monotonic_ns() - start_ns
    spun, timer_ns = (int(word) for word in elapsed)
    assert UNWRITTEN not in (spun, timer_ns), "the kernel did not write its elapsed slot"
    assert spun >= cycles, "it stops only once it has spun its cycles"
    assert timer_ns >= spun, "the timer's reads enclose the cycle counter's (one clock on the host)"
    assert host_ns >= spun


def test_spin_kernel_with_no_slot_writes_nothing_and_still_spins() -> None:
    start_ns = time.monotonic_ns()
    _kernel("spin_kernel")((1,), (1,), (np.uint64(2_000_000), None))
    assert time.monotonic_ns() - start_ns >= 2_000_000
    slots = guarded_empty((3, ELAPSED_WORDS), np.uint64)
    _launch_packed(_kernel("spin_kernel"), (np.uint64(5_000), slots[1]))  # as the driver layer packs it
    assert (slots[0] == UNWRITTEN).all() and (slots[2] == UNWRITTEN).all(), "wrote outside its slot"
    assert int(slots[1][0]) >= 5_000


def test_each_spin_kernel_fills_its_own_slot_and_achieved_reads_them() -> None:
    spin = _kernel("spin_kernel")
    slots = guarded_empty((4, ELAPSED_WORDS), np.uint64)
    for index in range(3):  # the fourth never runs
        spin((1,), (1,), (np.uint64(10_000 * (index + 1)), slots[index]))
    clock = clock_from_samples([(CALIBRATION_NS, CALIBRATION_NS)], [1], CALIBRATION_NS)  # 1 cycle per ns
    with pytest.raises(ValueError, match="1 of 4 spin kernels did not write their elapsed time"):
        achieved(slots, clock)
    result = achieved(slots[:3], clock)
    assert result.n_kernels == 3
    assert result.cycles_ns == float(np.median(slots[:3, 0]))
    assert result.timer_ns == pytest.approx(float(np.mean(slots[:3, 1])))
    assert result.cycles_ns >= 20_000


def test_clock_calibration_counts_cycles_over_its_interval() -> None:
    out = guarded_empty(2, np.uint64)
    _kernel("clock_calibration_kernel")((1,), (1,), (np.uint64(CALIBRATION_NS), out))
    cycles, ns = (int(word) for word in out)
    assert UNWRITTEN not in (cycles, ns)
    assert ns >= CALIBRATION_NS
    assert cycles > 0


def test_calibrated_clock_on_the_host_is_one_cycle_per_ns() -> None:
    """The host's cycle counter is its timer, so the median rate of several calibrations is 1 (a preempted
    read can skew one of them; the median ignores up to three of seven)."""
    calibrate = _kernel("clock_calibration_kernel")
    samples = []
    for _ in range(7):
        out = guarded_empty(2, np.uint64)
        calibrate((1,), (1,), (np.uint64(CALIBRATION_NS), out))
        samples.append((int(out[0]), int(out[1])))
    advances = guarded_empty(64, np.uint64)
    _kernel("timer_advances_kernel")((1,), (1,), (advances, np.int32(64)))
    clock = clock_from_samples(samples, [int(a) for a in advances], CALIBRATION_NS)
    assert clock.cycles_per_ns == pytest.approx(1.0, rel=0.01)
    assert clock.repeats == 7 and clock.tick_ns > 0
    assert clock.cycles(2_000) == pytest.approx(2_000, rel=0.01)


def test_timer_advances_kernel_writes_each_advance() -> None:
    advances = guarded_empty(65, np.uint64)
    _kernel("timer_advances_kernel")((1,), (1,), (advances, np.int32(64)))
    written = advances[:64].astype(np.float64)
    assert (written > 0).all() and (written < 1e9).all(), "64 advances of the timer, each > 0 ns"
    assert int(advances[64]) == UNWRITTEN, "wrote past n"


def test_a_timer_that_never_advances_ends_the_kernels_and_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With %globaltimer frozen (and the give-up bound cut to 2 ms of host "cycles"), the calibration and
    timer kernels return instead of hanging, and the host refuses what they wrote, naming it."""
    monkeypatch.setitem(HOST_BODIES, "globaltimer_ns", "return 7;")
    code = kernels.source("launch").replace(
        "#define TIMER_GIVE_UP_CYCLES 10000000000LL", "#define TIMER_GIVE_UP_CYCLES 2000000LL"
    )
    assert "2000000LL" in code
    frozen = HostModule(code, MODULE_HELPERS["launch"], name="launch-frozen-timer.cu", cache_dir=tmp_path)
    out = guarded_array(np.zeros(2, np.uint64))
    frozen.get_function("clock_calibration_kernel")((1,), (1,), (np.uint64(CALIBRATION_NS), out))
    assert int(out[0]) >= 2_000_000 and int(out[1]) == 0
    advances = guarded_array(np.zeros(4, np.uint64))
    frozen.get_function("timer_advances_kernel")((1,), (1,), (advances, np.int32(4)))
    assert (advances == 0).all()
    with pytest.raises(ValueError, match=r"cycles over 0 ns"):
        clock_from_samples([(int(out[0]), int(out[1]))], [1], CALIBRATION_NS)
    with pytest.raises(ValueError, match="a timer that did not advance before the kernel gave up"):
        clock_from_samples([(CALIBRATION_NS, CALIBRATION_NS)], [int(a) for a in advances], CALIBRATION_NS)
