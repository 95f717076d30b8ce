"""Uniform random numbers drawn on several threads: bit for bit the numbers one thread draws.

The benchmarks' inputs are large seeded random arrays (the CPU decode model's 375 MB of weights, the host
bandwidth case's 256 MiB), drawn before anything is timed but inside the run: about a second of a quick run
on one core of a 2-core VM. numpy's ``Generator`` fills an array without holding the GIL, so threads can fill
parts of it at once, provided each part starts where the one before it ends in the generator's stream.
PCG64, ``np.random.default_rng``'s generator, jumps ahead in constant time (``PCG64.advance``), and
``Generator.random`` takes one 64-bit output per float64 and half of one per float32 (the low 32 bits first,
the high 32 kept for the next float32): ``skipped`` places a copy of a generator ``count`` numbers ahead, so
the parts hold what ``rng.random(out=out)`` writes, and ``rng`` ends where that call leaves it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

#: Arrays of fewer elements are drawn on the calling thread: starting threads would cost more than they
#: save (a million float32 take about a millisecond to draw).
SPLIT_ELEMENTS = 2**20
#: Threads at most (the calling one among them).
MAX_THREADS = 8
#: Float32 numbers ``random_into_converted`` draws at a time into its one reused buffer (16 MiB).
CONVERT_CHUNK_ELEMENTS = 2**22


def skipped(bit_generator: np.random.PCG64, count: int, dtype: type[np.floating]) -> np.random.PCG64:
    """A copy of ``bit_generator`` positioned as if ``Generator.random`` had drawn ``count`` more numbers of
    ``dtype`` (float32 or float64) from it; ``bit_generator`` is not changed."""
    state = bit_generator.state
    ahead = np.random.PCG64()
    ahead.state = state
    if count == 0:
        return ahead
    if np.dtype(dtype) == np.float64:  # one output each; the kept half of an output stays kept
        ahead.advance(count)
        ahead.state = {**ahead.state, "has_uint32": state["has_uint32"], "uinteger": state["uinteger"]}
        return ahead
    if np.dtype(dtype) != np.float32:
        raise ValueError(f"dtype must be float32 or float64, got {np.dtype(dtype)}")
    if state["has_uint32"]:  # the first number takes the kept half
        count -= 1
    ahead.advance(count // 2)  # also forgets any kept half
    if count % 2:  # the last number takes the low half of an output, and its high half is kept
        high = int(ahead.random_raw()) >> 32
        ahead.state = {**ahead.state, "has_uint32": 1, "uinteger": high}
    return ahead


def random_into(
    rng: np.random.Generator, out: np.ndarray, then: Callable[[np.ndarray], None] | None = None
) -> np.ndarray:
    """Fill ``out`` (C-contiguous, float32 or float64) as ``rng.random(out=out, dtype=out.dtype)`` does, and
    leave ``rng`` where that call leaves it; ``then(part)``, if given, runs on each part after its draw, in
    the part's thread (element-wise work only: it sees one part at a time). Large arrays of a PCG64 generator
    are split between up to ``MAX_THREADS`` threads, one per usable CPU. Returns ``out``."""
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    flat = out.reshape(-1)
    threads = min(MAX_THREADS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if flat.size < SPLIT_ELEMENTS or threads < 2 or not isinstance(rng.bit_generator, np.random.PCG64):
        _fill(rng, flat, then)
        return out
    bounds = [flat.size * part // threads for part in range(threads + 1)]
    ahead = [np.random.Generator(skipped(rng.bit_generator, start, out.dtype)) for start in bounds[1:-1]]
    with ThreadPoolExecutor(threads - 1) as pool:
        parts = [
            pool.submit(_fill, generator, flat[start:stop], then)
            for generator, start, stop in zip(ahead, bounds[1:-1], bounds[2:], strict=True)
        ]
        _fill(rng, flat[: bounds[1]], then)
        for part in parts:
            part.result()  # a part's error is raised here
    rng.bit_generator.state = ahead[-1].bit_generator.state
    return out


def random_into_converted(
    rng: np.random.Generator, out: np.ndarray, then: Callable[[np.ndarray], None] | None = None
) -> np.ndarray:
    """Fill ``out`` (C-contiguous, any float dtype, e.g. FP16) with what ``random_into`` draws as float32
    (``then`` applied), converted to ``out``'s dtype, and leave ``rng`` where that draw leaves it. Drawn a
    chunk at a time into one float32 buffer: a whole float32 copy (2 × an FP16 array, faulted in and freed)
    made a 2.5 GB FP16 model take three times as long to draw. Returns ``out``."""
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    flat = out.reshape(-1)
    buffer = np.empty(min(flat.size, CONVERT_CHUNK_ELEMENTS), dtype=np.float32)
    for lo in range(0, flat.size, buffer.size):
        part = buffer[: min(flat.size, lo + buffer.size) - lo]
        random_into(rng, part, then)
        flat[lo : lo + part.size] = part
    return out


def _fill(rng: np.random.Generator, part: np.ndarray, then: Callable[[np.ndarray], None] | None) -> None:
    rng.random(out=part, dtype=part.dtype)
    if then is not None:
        then(part)
