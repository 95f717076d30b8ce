"""The ruler of the spin kernel: SM cycles per nanosecond, calibrated once per run against ``%globaltimer``.

A spin of a known duration is how the launch suite finds where launches hide behind GPU work, down to 1 µs.
``%globaltimer`` cannot time that: PTX documents it as a nanosecond timer meant for NVIDIA's tools without
promising its update rate, and public traces show it advancing in 1,024 ns steps on Ampere and Ada parts
(a 1 µs spin on it lasts anywhere from 0 to 2 µs). ``clock64()`` counts SM cycles, one per cycle, so the
spin kernel spins on it; the cycle rate is the SM clock, which is measured here rather than assumed: each
of ``CALIBRATION_REPEATS`` kernels counts cycles over at least ``CALIBRATION_NS`` of ``%globaltimer`` time,
both ends taken right after the timer advances (``launch.cu``'s ``clock_calibration_kernel``), so even a
1 µs step is at most 0.05 % of the interval. The median is the rate; the spread of the repeats says how
steady the SM clock was. The timer's own step (the median of 64 consecutive advances) is recorded beside
it, as a fact of the run, never as a reason to fail one.

The clock is warm before it is calibrated: an idle H200's SM clock reads 345 MHz and a loaded one 1,980 MHz
(nvidia-smi, idle and just after a load), and a rate taken while it ramps converts every spin of the run at
the wrong rate. So the GPU is first held busy by calibration kernels of ``WARMUP_SLICE_NS`` each (each one
says the rate it achieved) for at least ``WARMUP_MIN_NS`` and until the last ``WARMUP_STABLE_SLICES`` rates
agree within ``WARMUP_STABLE`` (``WARMUP_MAX_NS`` at most); then the calibration is tried until its spread
is at most ``SPREAD_MAX`` (``CALIBRATION_TRIES`` at most, the steadiest try kept where none is). The
warm-up's rates and every try are part of the fact the run records.

Each spin kernel also writes what it achieved (cycles spun, and the ``%globaltimer`` time around them), so a
saved spin case holds the requested and the achieved duration.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks import kernels
from benchmarks.cuda import cupy_module
from benchmarks.cuda_timing import Launch
from benchmarks.run_notes import record_fact

#: Timer time each calibration kernel counts cycles over, ns (≥ 1 ms: a 1 µs timer step is then ≤ 0.1 %).
CALIBRATION_NS = 2_000_000
#: Calibration kernels per try: their median is the rate, their spread its steadiness.
CALIBRATION_REPEATS = 7
#: The largest spread ((max − min) / median) of a try that is kept at once: a 1 µs spin is then off by 10 ns
#: at most.
SPREAD_MAX = 0.01
#: Calibration tries at most, each of ``CALIBRATION_REPEATS`` kernels (14 ms): where none is within
#: ``SPREAD_MAX``, the steadiest is kept, and the recorded tries say so.
CALIBRATION_TRIES = 5
#: Each warm-up kernel's time, ns: long enough that a 1 µs timer step is 0.002 % of its rate.
WARMUP_SLICE_NS = 50_000_000
#: Warm-up kernels queued at a time (then read back, and the warm-up judged).
WARMUP_BATCH = 5
#: Load before the first calibration, ns, at least: a GPU that looks steady at once is held busy this long.
WARMUP_MIN_NS = 500_000_000
#: Load at most, ns: a clock still moving after this is calibrated anyway, and its warm-up recorded unstable.
WARMUP_MAX_NS = 3_000_000_000
#: The last warm-up kernels whose rates must agree within ``WARMUP_STABLE`` (relative spread).
WARMUP_STABLE_SLICES = 3
WARMUP_STABLE = 0.01
#: Consecutive ``%globaltimer`` advances whose median is the timer's tick.
TICK_ADVANCES = 64
#: Words a spin kernel writes into its ``elapsed`` slot: cycles spun, then ``%globaltimer`` ns around them.
ELAPSED_WORDS = 2
#: What ``elapsed_slots`` fills slots with: a slot still holding it was not written by any kernel.
UNWRITTEN = np.iinfo(np.uint64).max

#: Runs calibration kernels back to back, one per interval (ns), and returns each one's (cycles, ns).
Calibrate = Callable[[Sequence[int]], list[tuple[int, int]]]


@dataclass(frozen=True)
class Warmup:
    """How the SM clock was warmed before its calibration: the cycle rate (cycles per ns) each warm-up kernel
    of ``slice_ns`` achieved, in order, and whether the last ones agreed (False: ``WARMUP_MAX_NS`` ran
    out)."""

    rates: tuple[float, ...]
    slice_ns: int
    stable: bool

    @property
    def ns(self) -> int:
        """The load the warm-up put on the GPU, ns."""
        return self.slice_ns * len(self.rates)

    def as_fact(self) -> dict[str, object]:
        return {"ns": self.ns, "slice_ns": self.slice_ns, "stable": self.stable, "rates": list(self.rates)}


@dataclass(frozen=True)
class SpinClock:
    """SM cycles per ns (median of the calibration repeats, with their min and max), the ``%globaltimer``
    tick (median, min and max of its advances, ns), and how they were measured: ``warmup`` (None where the
    samples were given, not measured) and every calibration try as (median, min, max) cycles per ns, the
    kept one among them."""

    cycles_per_ns: float
    cycles_per_ns_min: float
    cycles_per_ns_max: float
    tick_ns: float
    tick_min_ns: float
    tick_max_ns: float
    calibration_ns: int
    repeats: int
    warmup: Warmup | None = None
    tries: tuple[tuple[float, float, float], ...] = ()

    @property
    def spread(self) -> float:
        """(max − min) / median of the calibration repeats: 0 for a perfectly steady SM clock."""
        return (self.cycles_per_ns_max - self.cycles_per_ns_min) / self.cycles_per_ns

    def cycles(self, duration_ns: float) -> int:
        """SM cycles lasting ``duration_ns`` ns at the calibrated rate (what the spin kernel is given)."""
        if duration_ns < 0:
            raise ValueError(f"a spin lasts >= 0 ns, got {duration_ns!r}")
        return round(duration_ns * self.cycles_per_ns)

    def ns(self, cycles: float | np.ndarray) -> float | np.ndarray:
        """Nanoseconds that ``cycles`` SM cycles last at the calibrated rate."""
        return cycles / self.cycles_per_ns

    def as_fact(self) -> dict[str, object]:
        """The calibration as the run record saves it (``gpu.spin_clock``): plain JSON numbers, with the
        warm-up and every try where they were measured."""
        fact: dict[str, object] = {
            "cycles_per_ns": self.cycles_per_ns,
            "cycles_per_ns_min": self.cycles_per_ns_min,
            "cycles_per_ns_max": self.cycles_per_ns_max,
            "spread": self.spread,
            "calibration_ns": self.calibration_ns,
            "repeats": self.repeats,
        }
        if self.warmup is not None:
            fact["warmup"] = self.warmup.as_fact()
        if self.tries:
            fact["tries"] = [
                {"cycles_per_ns": median, "cycles_per_ns_min": low, "cycles_per_ns_max": high}
                | {"spread": _spread([low, median, high])}
                for median, low, high in self.tries
            ]
        return fact


def _rates(calibrations: Sequence[tuple[int, int]], calibration_ns: int) -> list[float]:
    """Cycles per ns of each (cycles, ns) calibration; ``ValueError`` naming one that is unusable (shorter
    than ``calibration_ns``, or without cycles)."""
    rates = []
    for cycles, ns in calibrations:
        if ns < calibration_ns or cycles <= 0:
            raise ValueError(
                f"clock calibration: {cycles} cycles over {ns} ns (needs > 0 cycles over >= "
                f"{calibration_ns} ns)"
            )
        rates.append(cycles / ns)
    return rates


def _spread(rates: Sequence[float]) -> float:
    """(max − min) / median of ``rates``."""
    return (max(rates) - min(rates)) / statistics.median(rates)


def clock_from_samples(
    calibrations: Sequence[tuple[int, int]], advances: Sequence[int], calibration_ns: int = CALIBRATION_NS
) -> SpinClock:
    """The ``SpinClock`` of raw kernel output: ``calibrations`` = (cycles, ns) per calibration kernel,
    ``advances`` = the timer's consecutive advances, ns. Raises ``ValueError`` naming what is unusable (a
    calibration shorter than ``calibration_ns`` or without cycles, a non-positive advance)."""
    if not calibrations or not advances:
        raise ValueError("the clock calibration needs at least one calibration and one timer advance")
    rates = _rates(calibrations, calibration_ns)
    if min(advances) <= 0:
        raise ValueError(
            f"%globaltimer advances must be > 0 ns, got {min(advances)} (a timer that did not advance before "
            "the kernel gave up)"
        )
    return SpinClock(
        cycles_per_ns=statistics.median(rates),
        cycles_per_ns_min=min(rates),
        cycles_per_ns_max=max(rates),
        tick_ns=float(statistics.median(advances)),
        tick_min_ns=float(min(advances)),
        tick_max_ns=float(max(advances)),
        calibration_ns=calibration_ns,
        repeats=len(rates),
    )


def warm_up(calibrate: Calibrate) -> Warmup:
    """Hold the GPU busy with ``WARMUP_BATCH`` warm-up kernels at a time until it has run ``WARMUP_MIN_NS``
    and the last ``WARMUP_STABLE_SLICES`` rates agree within ``WARMUP_STABLE``, or ``WARMUP_MAX_NS`` ran."""
    rates: list[float] = []
    while True:
        rates += _rates(calibrate([WARMUP_SLICE_NS] * WARMUP_BATCH), WARMUP_SLICE_NS)
        loaded_ns = WARMUP_SLICE_NS * len(rates)
        stable = loaded_ns >= WARMUP_MIN_NS and _spread(rates[-WARMUP_STABLE_SLICES:]) <= WARMUP_STABLE
        if stable or loaded_ns >= WARMUP_MAX_NS:
            return Warmup(tuple(rates), WARMUP_SLICE_NS, stable)


def calibrated_clock(calibrate: Calibrate, timer_advances: Callable[[], Sequence[int]]) -> SpinClock:
    """Warm the clock up (``warm_up``), then calibrate it until a try's spread is at most ``SPREAD_MAX``
    (``CALIBRATION_TRIES`` at most; the steadiest kept), then read the timer's advances: the run's clock, with
    its warm-up and every try. ``calibrate`` and ``timer_advances`` run the kernels (``measure_spin_clock``)
    or stand in for them (the tests' ramping clock)."""
    warmup = warm_up(calibrate)
    tries: list[list[tuple[int, int]]] = []
    rates: list[list[float]] = []
    while len(tries) < CALIBRATION_TRIES and not (rates and _spread(rates[-1]) <= SPREAD_MAX):
        tries.append(calibrate([CALIBRATION_NS] * CALIBRATION_REPEATS))
        rates.append(_rates(tries[-1], CALIBRATION_NS))
    kept = min(range(len(tries)), key=lambda index: _spread(rates[index]))
    return dataclasses.replace(
        clock_from_samples(tries[kept], timer_advances()),
        warmup=warmup,
        tries=tuple((statistics.median(each), min(each), max(each)) for each in rates),
    )


def measure_spin_clock(stream: Any) -> SpinClock:
    """Calibrate now on the GPU (``calibrated_clock``), every kernel queued on ``stream`` and waited for:
    about 0.55 s where the clock is steady, up to about 3.1 s where it keeps moving."""
    cupy = cupy_module()
    calibration = kernels.kernel("launch", "clock_calibration_kernel")

    def calibrate(intervals_ns: Sequence[int]) -> list[tuple[int, int]]:
        with stream:  # the zeroing too: a non-blocking stream does not wait for the legacy default stream
            out = cupy.zeros((len(intervals_ns), 2), dtype=cupy.uint64)
            for row, interval_ns in enumerate(intervals_ns):
                calibration((1,), (1,), (np.uint64(interval_ns), out[row]))
        stream.synchronize()
        return [(int(cycles), int(ns)) for cycles, ns in out.get()]

    def timer_advances() -> list[int]:
        with stream:
            advances = cupy.zeros(TICK_ADVANCES, dtype=cupy.uint64)
            kernels.kernel("launch", "timer_advances_kernel")((1,), (1,), (advances, np.int32(TICK_ADVANCES)))
        stream.synchronize()
        return [int(advance) for advance in advances.get()]

    return calibrated_clock(calibrate, timer_advances)


@functools.cache
def spin_clock() -> SpinClock:
    """The run's calibration: measured on the first call of the process (on a stream of its own), then kept,
    so every case of a run converts durations with the same rate."""
    return measure_spin_clock(cupy_module().cuda.Stream(non_blocking=True))


def spin(duration_ns: float, elapsed: Any = None, clock: SpinClock | None = None) -> Launch:
    """A launch of ``launch.cu``'s spin kernel lasting ``duration_ns`` ns by ``clock`` (the run's
    ``spin_clock()`` by default); ``elapsed``: None, or a CuPy array of ``ELAPSED_WORDS`` uint64 that receives
    the cycles spun and the ``%globaltimer`` ns around them."""
    clock = clock or spin_clock()
    return Launch(kernels.kernel("launch", "spin_kernel"), (np.uint64(clock.cycles(duration_ns)), elapsed))


@dataclass(frozen=True)
class Achieved:
    """What a set of spin kernels achieved, from their ``elapsed`` slots: ``cycles_ns`` the median of the
    cycles each spun, as ns by the calibration; ``timer_ns`` the mean of their ``%globaltimer`` times (each a
    whole number of timer steps: only the mean over many kernels resolves durations below a step)."""

    cycles_ns: float
    timer_ns: float
    n_kernels: int


def elapsed_slots(n_kernels: int) -> Any:
    """A CuPy array of ``n_kernels`` ``elapsed`` slots ([n_kernels, ELAPSED_WORDS] uint64), all
    ``UNWRITTEN``."""
    cupy = cupy_module()
    return cupy.full((n_kernels, ELAPSED_WORDS), UNWRITTEN, dtype=cupy.uint64)


def achieved(elapsed: np.ndarray, clock: SpinClock) -> Achieved:
    """Summarise ``elapsed`` ([n, ELAPSED_WORDS] uint64, as the spin kernels wrote it) by ``clock``. Raises
    ``ValueError`` when a slot was never written (its kernel did not run, or wrote elsewhere)."""
    raw = np.asarray(elapsed, dtype=np.uint64).reshape(-1, ELAPSED_WORDS)
    unwritten = int((raw == UNWRITTEN).any(axis=1).sum())
    if raw.shape[0] == 0 or unwritten:
        raise ValueError(f"{unwritten} of {raw.shape[0]} spin kernels did not write their elapsed time")
    rows = raw.astype(np.float64)
    return Achieved(
        cycles_ns=float(np.median(clock.ns(rows[:, 0]))),
        timer_ns=float(np.mean(rows[:, 1])),
        n_kernels=int(rows.shape[0]),
    )


def record_clock_facts(config: Any, clock: SpinClock, name: str = "gpu.spin_clock") -> None:
    """Save ``clock`` in the run record: ``name`` (the calibration), and at the run's first calibration the
    timer's tick, ``gpu.timer_tick_ns`` (median advance) and ``gpu.timer_advances_ns`` (min, median, max)."""
    record_fact(config, name, clock.as_fact())
    if name == "gpu.spin_clock":
        record_fact(config, "gpu.timer_tick_ns", clock.tick_ns)
        record_fact(
            config,
            "gpu.timer_advances_ns",
            {"min": clock.tick_min_ns, "median": clock.tick_ns, "max": clock.tick_max_ns},
        )
