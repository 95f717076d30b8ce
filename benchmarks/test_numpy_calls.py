"""The fixed cost of every numpy call: per-call time over array size, and many small calls against one big.

Demo 3 of the lecture script as pytest-benchmark cases. ``ufunc_size`` times ``np.add(a, a, out=o)`` on
float32 from 1 element (all fixed cost) to past the last-level cache (all memory traffic): the data the
fixed-overhead law t(n) = t0 + n/r∞ is fitted to. ``many_vs_one`` adds the same 262,144 elements in 1 to
1,024 pieces: with views made once outside the timing (the call cost alone) and with slicing inside the loop
(what a user writes, as the lecture script does).

Coordinates go to ``extra_info`` (``benchmarks/records.py``): ``n`` is the elements of one numpy call,
``n_calls`` the numpy calls per timed call, ``bytes`` the bytes moved per timed call by STREAM convention
(``a`` read once, ``o`` written once: 8 B per element and call; write-allocate traffic not counted),
``flops`` one addition per element and call. Analysis divides by ``n_calls`` where it needs one call.

Small sizes are timed as a loop of ``np.add(a, a, out=o)`` written as a user writes it (and as
``python -m timeit`` runs it): pytest-benchmark's own loop calls ``function(*args, **kwargs)``, which adds
~70 ns to a ~400 ns call (measured on a 2-vCPU Xeon VM), a fifth of the fixed cost this case is about.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from benchmarks.budget import timing_mark
from benchmarks.provenance import collect_caches
from benchmarks.random_fill import random_into
from benchmarks.records import record

DTYPE = np.float32
ITEM_BYTES = np.dtype(DTYPE).itemsize
#: Bytes one element of ``np.add(a, a, out=o)`` touches: read from ``a``, written to ``o``.
BYTES_PER_ELEMENT = 2 * ITEM_BYTES

#: The lecture script's five sizes (1, 64, 4096, 262,144, 4,194,304) are among these: 4^0 … 4^11, then 2^24
#: (a 128 MiB working set, past the last-level cache of laptops and most servers).
SIZES = (*(4**k for k in range(12)), 2**24)
QUICK_SIZES = (1, 16, 256, 4_096, 65_536, 262_144, 1_048_576, 2**24)

#: numpy calls per timed call at most: with 64, pytest-benchmark's per-call overhead (~70 ns) adds ~1 ns.
#: Sizes from 65,536 on take one call per timed call (the overhead is < 0.5 % of ≥ 15 µs there).
MAX_CALLS = 64
CALLS_BUDGET_ELEMENTS = 65_536

#: Many small vs one big: 262,144 elements (a 2 MiB working set) in 1, 2, 4 … 1,024 pieces; the lecture
#: script's 128 pieces among them.
MANY_TOTAL = 262_144
PIECES = tuple(2**k for k in range(11))
QUICK_PIECES = (1, 16, 128, 1_024)
VARIANTS = ("views", "slices")

#: Seconds of rounds per case (``benchmarks/budget.py``): about 250 rounds of at least 2 ms (stable minimum
#: and median); the full run stays < 1 min. ``--quick``: pytest-benchmark's minimum of 5 rounds, a smoke run's
#: "best of 5" as ``python -m timeit`` takes it.
MAX_TIME_S = 0.5
QUICK_MAX_TIME_S = 0.01

_SEED = 20_240_605


def dram_size(llc_bytes: int | None) -> int | None:
    """Return a size whose ``np.add`` working set is at least twice the last-level cache, when 2^24's is not.

    Some servers (and VMs that report the host's cache) have last-level caches beyond 64 MiB; without a size
    past them analysis could not measure the per-element cost from DRAM. Elements, a multiple of 2^20 (the
    smallest one that suffices, to keep the run short); ``None`` when 2^24 suffices or the cache is unknown.
    """
    if not llc_bytes or SIZES[-1] * BYTES_PER_ELEMENT >= 2 * llc_bytes:
        return None
    step = 2**20
    return -(-2 * llc_bytes // (BYTES_PER_ELEMENT * step)) * step


def ufunc_sizes(quick: bool) -> list[int]:
    """The sizes of ``ufunc_size`` (elements): ``SIZES``, or ``QUICK_SIZES`` under ``--quick``, and a size
    past this machine's last-level cache where 2^24 is not (``dram_size``)."""
    info: dict[str, object] = {}
    collect_caches(info)
    extra = dram_size(info["llc_bytes"])
    return [*(QUICK_SIZES if quick else SIZES), *([] if extra is None else [extra])]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise the cases: the full sweep, or fewer sizes, pieces and seconds under ``--quick``."""
    config = metafunc.config
    quick = config.getoption("quick")
    max_time_s = QUICK_MAX_TIME_S if quick else MAX_TIME_S
    if metafunc.definition.name == "test_ufunc_size":
        sizes = ufunc_sizes(quick)
        group = "ufunc_size: np.add(a, a, out=o) float32; id n<elements>-x<calls per timed call>"
        mark = timing_mark(config, group, max_time_s)
        metafunc.parametrize("n", [pytest.param(n, id=case_id(n), marks=mark) for n in sizes])
    elif metafunc.definition.name == "test_many_vs_one":
        params = [
            pytest.param(
                pieces,
                variant,
                id=f"{variant}-pieces{pieces}",
                marks=timing_mark(config, f"many_vs_one: {MANY_TOTAL:,} float32 ({variant})", max_time_s),
            )
            for variant in VARIANTS
            for pieces in (QUICK_PIECES if quick else PIECES)
        ]
        metafunc.parametrize(("pieces", "variant"), params)


def make_add_input(n: int) -> np.ndarray:
    """``a``, the input of the add cases at ``n`` elements: float32, random (not all zeros or ones), seeded,
    so every call gives the same array. Made once per session (``add_input`` in ``benchmarks/conftest.py``)
    and shared by ``ufunc_size``, ``many_vs_one`` and every caller of ``framework_call``
    (``test_framework_calls.py``), which read it and never write it. Drawn on every core (``random_into``:
    the numbers ``rng.random(n, dtype=DTYPE)`` draws)."""
    return random_into(np.random.default_rng(_SEED), np.empty(n, dtype=DTYPE))


#: Elements compared at a time by ``require_doubled``: 4 MiB of float32 temporaries, not a second array of
#: hundreds of MB (first-touched pages cost this VM about 1 s per 500 MB).
CHECK_BLOCK_ELEMENTS = 2**20


def require_doubled(got: np.ndarray, a: np.ndarray, what: str) -> None:
    """Require ``got`` == 2·a everywhere (float32 doubling is exact), block by block; fails naming ``what``,
    how many elements are wrong and the first. ``np.array_equal`` per block rather than
    ``np.testing.assert_array_equal``, which takes seconds on 10^8 elements."""
    if got.shape != a.shape:
        raise AssertionError(f"{what}: result has shape {got.shape}, expected {a.shape}")
    flat_got, flat_a = got.reshape(-1), a.reshape(-1)
    wrong, first = 0, -1
    for start in range(0, flat_a.size, CHECK_BLOCK_ELEMENTS):
        block, expected = (
            flat_got[start : start + CHECK_BLOCK_ELEMENTS],
            flat_a[start : start + CHECK_BLOCK_ELEMENTS],
        )
        expected = expected * a.dtype.type(2)
        if not np.array_equal(block, expected):
            bad = np.flatnonzero(block != expected)
            wrong += bad.size
            first = start + int(bad[0]) if first < 0 else first
    if wrong:
        raise AssertionError(
            f"{what}: result is not 2·a ({wrong:,} of {a.size:,} elements wrong, first at {first})"
        )


def _check(call: Callable[[], object], a: np.ndarray, o: np.ndarray) -> None:
    """Run ``call`` once on a NaN-filled ``o`` and require o == 2·a everywhere, so a broken case fails."""
    o.fill(np.nan)
    call()
    require_doubled(o, a, "np.add(a, a, out=o)")


def calls_per_round(n: int) -> int:
    """Numpy calls per timed call for ``n`` elements: ``MAX_CALLS`` for small sizes, down to 1 from 65,536."""
    return max(1, min(MAX_CALLS, CALLS_BUDGET_ELEMENTS // n))


def case_id(n: int) -> str:
    """The test id of size ``n``: elements and calls per timed call, e.g. "n1-x64" (the table shows the time
    of all calls of a timed call)."""
    return f"n{n}-x{calls_per_round(n)}"


def _add_repeatedly(a: np.ndarray, o: np.ndarray, calls: int) -> None:
    """``calls`` times ``np.add(a, a, out=o)``, spelled as in user code and in ``python -m timeit``."""
    for _ in range(calls):
        np.add(a, a, out=o)


def test_ufunc_size(benchmark, add_input: Callable[[int], np.ndarray], n: int) -> None:
    """``np.add(a, a, out=o)`` on ``n`` float32 elements: fixed cost plus ``n`` times the element cost."""
    a = add_input(n)
    o = np.empty_like(a)
    calls = calls_per_round(n)
    _check(lambda: _add_repeatedly(a, o, calls), a, o)
    record(
        benchmark,
        case="ufunc_size",
        device="cpu",
        op="np.add",
        dtype="float32",
        n=n,
        n_calls=calls,
        bytes=calls * n * BYTES_PER_ELEMENT,
        flops=calls * n,
    )
    benchmark(_add_repeatedly, a, o, calls)


def _add_views(views: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Add each (piece of a, piece of o) pair: the call cost alone, views made beforehand."""
    for x, y in views:
        np.add(x, x, out=y)


def _add_slices(a: np.ndarray, o: np.ndarray, chunk: int, pieces: int) -> None:
    """Add ``a`` into ``o`` piece by piece, slicing inside the loop as the lecture script does."""
    for k in range(pieces):
        np.add(
            a[k * chunk : (k + 1) * chunk],
            a[k * chunk : (k + 1) * chunk],
            out=o[k * chunk : (k + 1) * chunk],
        )


def test_many_vs_one(benchmark, add_input: Callable[[int], np.ndarray], pieces: int, variant: str) -> None:
    """Add 262,144 float32 elements in ``pieces`` calls: the same work, ``pieces`` times the fixed cost.

    Recorded per numpy call (``n`` = 262,144 / pieces elements, ``n_calls`` = pieces), like ``ufunc_size``.
    """
    a = add_input(MANY_TOTAL)
    o = np.empty_like(a)
    chunk = MANY_TOTAL // pieces
    if variant == "views":
        views = [(a[k * chunk : (k + 1) * chunk], o[k * chunk : (k + 1) * chunk]) for k in range(pieces)]
        target, args = _add_views, (views,)
    else:
        target, args = _add_slices, (a, o, chunk, pieces)
    _check(lambda: target(*args), a, o)
    record(
        benchmark,
        case="many_vs_one",
        device="cpu",
        op="np.add",
        dtype="float32",
        n=chunk,
        pieces=pieces,
        variant=variant,
        n_calls=pieces,
        bytes=MANY_TOTAL * BYTES_PER_ELEMENT,
        flops=MANY_TOTAL,
    )
    benchmark(target, *args)
