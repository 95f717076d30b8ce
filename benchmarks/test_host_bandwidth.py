"""The host's measured memory roofline: STREAM-style copy and triad over arrays far larger than the caches.

The GPU side has a datasheet bandwidth; the CPU side gets a measured one here, so per-element costs from DRAM
can be held against it. Arrays are float64 (as STREAM), each at least 128 MiB and at least the size of the
last-level cache, so copy's working set is ≥ 256 MiB and ≥ 2× the LLC, triad's ≥ 384 MiB and ≥ 3× (the
suite's rule for "from DRAM" is a working set of at least twice the LLC).

``bytes`` follows the STREAM convention: copy moves 2 × 8 B per element (read b, write a), triad 3 × 8 B
(read b and c, write a). Write-allocate traffic (reading a's cache lines before writing them) is NOT counted,
so on hardware that performs it the reported bandwidth is below the bus's actual traffic, exactly as STREAM's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from benchmarks.provenance import collect_caches
from benchmarks.records import record

DTYPE = np.float64
ITEM_BYTES = np.dtype(DTYPE).itemsize
MIN_ARRAY_BYTES = 128 * 2**20
#: Triad runs block by block so its temporary (s·c) stays in cache and DRAM sees only b, c and a, as in
#: STREAM's one-pass loop: 32,768 float64 = 256 KiB per block (a few thousand numpy calls per pass, their
#: fixed cost ~1 % of the time).
BLOCK = 2**15
SCALAR = 3.0
#: Timed passes per case (each ~0.05–0.3 s), after one warm-up pass.
ROUNDS = 10
QUICK_ROUNDS = 3
GROUP = "host_bandwidth: STREAM float64"

_SEED = 20_240_606


def array_elements(llc_bytes: int | None) -> int:
    """Return float64 elements per array: ≥ 128 MiB and ≥ ``llc_bytes``, a whole number of ``BLOCK``s."""
    target_bytes = max(MIN_ARRAY_BYTES, llc_bytes or 0)
    blocks = -(-target_bytes // (BLOCK * ITEM_BYTES))
    return blocks * BLOCK


@pytest.fixture(scope="module")
def arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (a, b, c): a preallocated destination and two random sources, shared by both cases."""
    info: dict[str, object] = {}
    collect_caches(info)
    n = array_elements(info["llc_bytes"])
    rng = np.random.default_rng(_SEED)
    return np.empty(n, dtype=DTYPE), rng.random(n), rng.random(n)


def _require_equal(op: str, got: np.ndarray, expected: np.ndarray) -> None:
    """Fail the case when ``got`` differs from ``expected`` anywhere (np.testing takes seconds here)."""
    if not np.array_equal(got, expected):
        wrong = np.flatnonzero(got != expected)
        raise AssertionError(f"{op}: {wrong.size:,} of {got.size:,} elements wrong, first at {wrong[0]}")


def _record_and_time(
    benchmark: Any,
    config: pytest.Config,
    one_pass: Callable[..., object],
    args: tuple[Any, ...],
    *,
    op: str,
    arrays_moved: int,
    n: int,
    **coords: Any,
) -> None:
    """Record the case (``bytes``: STREAM's count, ``arrays_moved`` float64 arrays of ``n`` elements read or
    written per pass), then time ``one_pass(*args)``. Each pass takes ~0.1 s, far above the timer's
    resolution: fixed rounds (``ROUNDS``, or ``QUICK_ROUNDS`` with ``--quick``), one call each, after one
    warm-up pass."""
    record(
        benchmark,
        case="host_bandwidth",
        device="cpu",
        op=op,
        dtype="float64",
        n=n,
        bytes=arrays_moved * ITEM_BYTES * n,
        **coords,
    )
    rounds = QUICK_ROUNDS if config.getoption("quick") else ROUNDS
    benchmark.pedantic(one_pass, args=args, rounds=rounds, warmup_rounds=1, iterations=1)


@pytest.mark.benchmark(group=GROUP)
def test_copy(benchmark, arrays, pytestconfig: pytest.Config) -> None:
    """STREAM copy, a = b: one pass reading b and writing a."""
    a, b, _ = arrays
    a.fill(np.nan)
    np.copyto(a, b)
    _require_equal("copy", a, b)
    _record_and_time(benchmark, pytestconfig, np.copyto, (a, b), op="copy", arrays_moved=2, n=a.size)


def _triad(blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]], scratch: np.ndarray) -> None:
    """a = b + s·c block by block; ``scratch`` (one block, stays in cache) holds s·c."""
    for a_block, b_block, c_block in blocks:
        np.multiply(c_block, SCALAR, out=scratch)
        np.add(b_block, scratch, out=a_block)


@pytest.mark.benchmark(group=GROUP)
def test_triad(benchmark, arrays, pytestconfig: pytest.Config) -> None:
    """STREAM triad, a = b + s·c: one pass reading b and c and writing a."""
    a, b, c = arrays
    n = a.size
    blocks = [(a[lo : lo + BLOCK], b[lo : lo + BLOCK], c[lo : lo + BLOCK]) for lo in range(0, n, BLOCK)]
    scratch = np.empty(BLOCK, dtype=DTYPE)
    a.fill(np.nan)
    _triad(blocks, scratch)
    for a_block, b_block, c_block in blocks:
        _require_equal("triad", a_block, b_block + SCALAR * c_block)
    _record_and_time(
        benchmark, pytestconfig, _triad, (blocks, scratch), op="triad", arrays_moved=3, n=n, flops=2 * n
    )
