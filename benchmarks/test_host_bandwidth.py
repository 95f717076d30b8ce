"""The host's measured memory roofline: STREAM-style copy and triad, and a read-only stream through BLAS,
over arrays far larger than the caches.

The GPU side has a datasheet bandwidth; the CPU side gets a measured one here, so per-element costs from DRAM
and the CPU decode step can be held against it. Copy and triad arrays are float64 (as STREAM), each at least
128 MiB and at least the size of the last-level cache, so copy's working set is ≥ 256 MiB and ≥ 2× the LLC,
triad's ≥ 384 MiB and ≥ 3× (the suite's rule for "from DRAM" is a working set of at least twice the LLC).

``bytes`` follows the STREAM convention: copy moves 2 × 8 B per element (read b, write a), triad 3 × 8 B
(read b and c, write a). Write-allocate traffic (reading a's cache lines before writing them) is NOT counted,
so on hardware that performs it the reported bandwidth is below the bus's actual traffic, exactly as STREAM's.

Why a third case: a decode step only reads its weights, through BLAS matrix-vector products that use BLAS's
threads, while copy and triad write as much as they read and run on one thread. On a machine whose reads
outrun copy (seen: 2 vCPUs of an AMD EPYC, decode at 106 % of copy), bytes / copy bandwidth over-predicts the
step. ``read`` streams a float32 matrix as large as one copy array through the same ``np.matmul`` the step
uses: the read roofline of that step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from benchmarks.decode_numpy import matvec64
from benchmarks.provenance import collect_caches
from benchmarks.random_fill import random_into
from benchmarks.records import record

DTYPE = np.float64
ITEM_BYTES = np.dtype(DTYPE).itemsize
MIN_ARRAY_BYTES = 128 * 2**20
#: Triad runs block by block so its temporary (s·c) stays in cache and DRAM sees only b, c and a, as in
#: STREAM's one-pass loop: 32,768 float64 = 256 KiB per block (a few thousand numpy calls per pass, their
#: fixed cost ~1 % of the time).
BLOCK = 2**15
SCALAR = 3.0
#: Columns of the read case's matrix: rows of 4 KiB of float32, as a decode step's projections have.
READ_COLS = 1024
#: Timed passes per case (each ~0.05–0.3 s), after one warm-up pass (under ``--quick``: the checked pass
#: just before, as the quick CPU decode step's warm-up is its checked step).
ROUNDS = 10
QUICK_ROUNDS = 3
#: The read pass is 3–6× shorter than copy's and triad's: three times their rounds, about as long in all, so
#: its best round is as likely to catch the memory bus free of other tenants' traffic.
READ_ROUND_FACTOR = 3
GROUP = "host_bandwidth: STREAM copy and triad, BLAS read"

_SEED = 20_240_606


def array_elements(llc_bytes: int | None) -> int:
    """Return float64 elements per array: ≥ 128 MiB and ≥ ``llc_bytes``, a whole number of ``BLOCK``s."""
    target_bytes = max(MIN_ARRAY_BYTES, llc_bytes or 0)
    blocks = -(-target_bytes // (BLOCK * ITEM_BYTES))
    return blocks * BLOCK


@pytest.fixture(scope="module")
def arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (a, b, c): a preallocated destination and two random sources (drawn on every core:
    ``random_into``), shared by every case."""
    info: dict[str, object] = {}
    collect_caches(info)
    n = array_elements(info["llc_bytes"])
    rng = np.random.default_rng(_SEED)
    b = random_into(rng, np.empty(n, dtype=DTYPE))
    return np.empty(n, dtype=DTYPE), b, random_into(rng, np.empty(n, dtype=DTYPE))


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
    round_factor: int = 1,
    **coords: Any,
) -> None:
    """Record the case (``coords``: op, dtype, n, bytes by STREAM's count, ...), then time
    ``one_pass(*args)``. Each pass takes ~0.003–0.3 s, far above the timer's resolution: fixed rounds
    (``ROUNDS``, or ``QUICK_ROUNDS`` with ``--quick``, times ``round_factor``), one call each, after one
    warm-up pass; under ``--quick`` the case's checked pass, run just before, is the warm-up (every page of
    its arrays touched, its code run once)."""
    record(benchmark, case="host_bandwidth", device="cpu", **coords)
    quick = config.getoption("quick")
    rounds = round_factor * (QUICK_ROUNDS if quick else ROUNDS)
    benchmark.pedantic(one_pass, args=args, rounds=rounds, warmup_rounds=0 if quick else 1, iterations=1)


@pytest.mark.benchmark(group=GROUP)
def test_copy(benchmark, arrays, pytestconfig: pytest.Config) -> None:
    """STREAM copy, a = b: one pass reading b and writing a."""
    a, b, _ = arrays
    a.fill(np.nan)
    np.copyto(a, b)
    _require_equal("copy", a, b)
    n = a.size
    _record_and_time(
        benchmark, pytestconfig, np.copyto, (a, b), op="copy", dtype="float64", n=n, bytes=2 * ITEM_BYTES * n
    )


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
        benchmark,
        pytestconfig,
        _triad,
        (blocks, scratch),
        op="triad",
        dtype="float64",
        n=n,
        bytes=3 * ITEM_BYTES * n,
        flops=2 * n,
    )


@pytest.mark.benchmark(group=GROUP)
def test_read(benchmark, arrays, pytestconfig: pytest.Config) -> None:
    """Read-only stream, y = W @ x: a float32 matrix as large as one copy array (values of b and c), read
    once per pass by BLAS's matrix-vector product; x stays in cache, y is 1/1,024 of W's elements."""
    _, b, c = arrays
    w = np.empty((2 * b.size // READ_COLS, READ_COLS), dtype=np.float32)
    w.reshape(-1)[: b.size] = b
    w.reshape(-1)[b.size :] = c
    x = np.random.default_rng(_SEED + 1).random(READ_COLS, dtype=np.float32)
    y = np.full(w.shape[0], np.nan, dtype=np.float32)
    np.matmul(w, x, out=y)
    # float64 accumulation, a different summation altogether; widened block by block (``matvec64``), not
    # as one float64 copy of W twice its size, which took a third of a second.
    expected = matvec64(w, x.astype(np.float64))
    # float32 sums of 1,024 products in [0, 1): BLAS's rounding stays far below 1e-4 of each sum.
    np.testing.assert_allclose(y, expected, rtol=1e-4, err_msg="read: W @ x is wrong")
    rows, cols = w.shape
    _record_and_time(
        benchmark,
        pytestconfig,
        np.matmul,
        (w, x, y),  # matmul's third positional argument is ``out``
        READ_ROUND_FACTOR,
        op="read",
        dtype="float32",
        n=w.size,
        rows=rows,
        cols=cols,
        bytes=w.nbytes + y.nbytes,
        flops=2 * w.size,
    )
