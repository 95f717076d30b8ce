"""``benchmarks.random_fill``: random numbers drawn on several threads are bit for bit those one thread draws,
and the generator ends where one thread leaves it; the benchmarks' seeded inputs are unchanged by it."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from benchmarks import random_fill
from benchmarks.decode_numpy import TINY_LLAMA_4L, draw_kv_cache, draw_weights, uniform_draw
from benchmarks.random_fill import random_into, skipped

#: Sizes that split unevenly, with odd and even parts, and a part of one element.
SIZES = (1, 2, 3, 7, 1_000, 1_001, 65_537)


@pytest.fixture
def split_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split every array, however small, between four threads, even on a one-core machine."""
    monkeypatch.setattr(random_fill, "SPLIT_ELEMENTS", 1)
    monkeypatch.setattr(random_fill, "MAX_THREADS", 4)
    monkeypatch.setattr(random_fill.os, "sched_getaffinity", lambda _: {0, 1, 2, 3}, raising=False)


def _generators(lead: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Two generators in the same state: seeded alike, then ``lead`` float32 drawn (odd: a half kept)."""
    one, other = np.random.default_rng(7), np.random.default_rng(7)
    one.random(lead, dtype=np.float32)
    other.random(lead, dtype=np.float32)
    return one, other


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lead", [0, 1, 2])
@pytest.mark.parametrize("n", SIZES)
def test_threads_draw_what_one_thread_draws_and_leave_the_generator_there(
    split_everything: None, dtype: type[np.floating], lead: int, n: int
) -> None:
    serial, threaded = _generators(lead)
    expected = serial.random(n, dtype=dtype)
    got = random_into(threaded, np.empty(n, dtype=dtype))
    assert np.array_equal(got, expected)
    assert threaded.bit_generator.state == serial.bit_generator.state
    assert np.array_equal(threaded.random(5, dtype=np.float32), serial.random(5, dtype=np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lead", [0, 1])
@pytest.mark.parametrize("count", [0, 1, 2, 5, 1_000])
def test_skipped_is_the_generator_after_count_numbers(
    dtype: type[np.floating], lead: int, count: int
) -> None:
    serial, other = _generators(lead)
    before = other.bit_generator.state
    ahead = np.random.Generator(skipped(other.bit_generator, count, dtype))
    serial.random(count, dtype=dtype)
    assert _position(ahead) == _position(serial)
    for next_dtype in (np.float32, np.float64, np.float32):  # what follows is the same, half kept or not
        assert np.array_equal(ahead.random(3, dtype=next_dtype), serial.random(3, dtype=next_dtype))
    assert other.bit_generator.state == before, "the generator itself is not moved"


def _position(rng: np.random.Generator) -> tuple[int, int, int | None]:
    """Where a PCG64 generator stands: its state, and the 32 bits it keeps for the next float32, if any (a
    used half's old value lingers in the state, unread)."""
    state = rng.bit_generator.state
    return state["state"]["state"], state["has_uint32"], state["uinteger"] if state["has_uint32"] else None


def test_skipped_refuses_a_dtype_it_cannot_place() -> None:
    with pytest.raises(ValueError, match="dtype must be float32 or float64, got float16"):
        skipped(np.random.PCG64(0), 3, np.float16)


def test_then_runs_on_every_part_after_its_draw(split_everything: None) -> None:
    serial, threaded = _generators(1)
    expected = serial.random((3, 1_001), dtype=np.float32) * np.float32(3)

    def triple(part: np.ndarray) -> None:
        part *= np.float32(3)

    got = random_into(threaded, np.empty((3, 1_001), dtype=np.float32), then=triple)
    assert np.array_equal(got, expected)


def test_an_error_in_a_part_is_raised(split_everything: None) -> None:
    def fail(part: np.ndarray) -> None:
        raise RuntimeError(f"part of {part.size}")

    with pytest.raises(RuntimeError, match="part of"):
        random_into(np.random.default_rng(0), np.empty(8, dtype=np.float32), then=fail)


def test_a_strided_array_is_refused() -> None:
    with pytest.raises(ValueError, match="out must be C-contiguous"):
        random_into(np.random.default_rng(0), np.empty((4, 4), dtype=np.float32)[:, ::2])


def test_the_decode_inputs_are_the_numbers_one_thread_draws(split_everything: None) -> None:
    """``uniform_draw`` on numpy, split between threads, gives the weights and cache of the draw it replaced:
    ``rng.random`` of each array in turn, then scaled in place (a small model: the fixture splits it)."""
    cfg = dataclasses.replace(TINY_LLAMA_4L, name="tiny-test", d_model=64, d_ff=128, vocab=500)
    rng = np.random.default_rng(3)

    def serial_draw(shape: tuple[int, ...], std: float, mean: float) -> np.ndarray:
        values = rng.random(shape, dtype=np.float32)
        values -= 0.5
        values *= np.float32(std * math.sqrt(12.0))
        values += np.float32(mean)
        return values

    expected = draw_weights(cfg, serial_draw), draw_kv_cache(cfg, 9, serial_draw)
    draw = uniform_draw(np, 3, np.float32)
    got = draw_weights(cfg, draw), draw_kv_cache(cfg, 9, draw)
    pairs = [(got[0].embedding, expected[0].embedding), (got[0].final_norm, expected[0].final_norm)]
    for layer, layer_expected in zip(got[0].layers, expected[0].layers, strict=True):
        names = [field.name for field in dataclasses.fields(layer)]
        pairs += [(getattr(layer, name), getattr(layer_expected, name)) for name in names]
    pairs += list(zip(got[1].keys + got[1].values, expected[1].keys + expected[1].values, strict=True))
    for array, array_expected in pairs:
        assert array.dtype == np.float32 and np.array_equal(array, array_expected)


@pytest.mark.parametrize("n", SIZES)
def test_a_converted_draw_is_the_float32_draw_rounded_chunk_by_chunk(
    split_everything: None, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    """FP16 drawn through a small reused buffer (chunks of 1,000: several, the last one short) holds the
    float32 draw of the same generator, scaled and rounded, and leaves the generator where that draw does."""
    monkeypatch.setattr(random_fill, "CONVERT_CHUNK_ELEMENTS", 1_000)
    serial, chunked = _generators(1)
    expected = (serial.random(n, dtype=np.float32) * np.float32(3)).astype(np.float16)

    def triple(values: np.ndarray) -> None:
        values *= np.float32(3)

    got = random_fill.random_into_converted(chunked, np.empty(n, dtype=np.float16), triple)
    assert got.dtype == np.float16 and np.array_equal(got, expected)
    assert chunked.bit_generator.state == serial.bit_generator.state
    with pytest.raises(ValueError, match="out must be C-contiguous"):
        random_fill.random_into_converted(chunked, np.empty((4, 4), dtype=np.float16)[:, ::2])


def test_fp16_decode_inputs_are_the_float32_ones_rounded() -> None:
    cfg = dataclasses.replace(TINY_LLAMA_4L, name="tiny-test", d_model=64, d_ff=128, vocab=500)
    single = draw_weights(cfg, uniform_draw(np, 5, np.float32))
    half = draw_weights(cfg, uniform_draw(np, 5, np.float16))
    assert half.embedding.dtype == np.float16
    assert np.array_equal(half.embedding, single.embedding.astype(np.float16))
    assert np.array_equal(half.layers[-1].wd, single.layers[-1].wd.astype(np.float16))
