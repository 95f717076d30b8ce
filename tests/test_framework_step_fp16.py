"""The torch FP16 decode step's GPU tolerance (``test_framework_gpu.FRAMEWORK_STEP_TOLERANCE``), held at the
real size and precision on the CPU: Llama-3.2-1B, ctx 1,024, FP16 weights and activations as PyTorch computes
them on CUDA (``benchmarks/fp16_emulation.py``, which runs the very ``decode_logits`` the GPU case runs), for
three seeds (``tools/fp16_step_error.py`` prints sixteen), and JAX's own FP16 step on the CPU beside the
emulation (on the CPU decode model: JAX's copy of the real weights would double the test's 2.5 GB). Each
seed's error, and its pessimistic split-K variant's, lies at least ``HEADROOM`` times below the tolerance; a
step that skips its KV write lies at least ``DEFECT_FACTOR`` times above it, and with the position poisoned as
the GPU case poisons it, it cannot pass at all. The emulation itself is checked op by op against float32
arithmetic rounded to FP16."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from benchmarks import fp16_emulation, frameworks
from benchmarks.decode_frameworks import decode_logits, jax_ops, step_arrays
from benchmarks.decode_numpy import (
    TINY_LLAMA_4L,
    draw_kv_cache,
    draw_weights,
    reference_error,
    reference_logits,
    uniform_draw,
)
from benchmarks.fp16_emulation import Fp16Array, Fp16StepErrors, fp16_ops, fp16_step_errors, matmul_f32
from benchmarks.test_decode_step import CTX, TOKEN
from benchmarks.test_framework_calls import poison_position
from benchmarks.test_framework_gpu import FRAMEWORK_STEP_TOLERANCE
from model.llm import LLAMA32_1B

#: Seeds checked here (each draws 2.5 GB of FP16 weights: about 10 s a seed on a quiet 2-core VM).
SEEDS = (0, 1, 2)
#: The tolerance is at least this many times every seed's error (16 seeds: 3.1 times the largest).
HEADROOM = 2.0
#: A step without its KV write is off by at least this many tolerances (16 seeds: 6.5 at the least).
DEFECT_FACTOR = 4.0
#: A small model for the emulation's own checks.
SMALL = dataclasses.replace(
    TINY_LLAMA_4L, name="tiny-fp16", n_layers=2, d_model=128, n_heads=4, n_kv_heads=2, d_head=32, d_ff=256
)


@pytest.fixture(scope="module", params=SEEDS, ids=lambda seed: f"seed{seed}")
def real_size(request: pytest.FixtureRequest) -> Fp16StepErrors:
    """One seed's errors at the real size (2.5 GB of FP16 weights held: JAX's copy of them would double
    that, so JAX's own step is compared with the emulation on the CPU model below, and at the real size by
    ``tools/fp16_step_error.py``)."""
    return fp16_step_errors(LLAMA32_1B, CTX, TOKEN, request.param)


def test_the_tolerance_holds_every_seed_at_the_real_size_with_room(real_size: Fp16StepErrors) -> None:
    assert real_size.correct > 1e-3, "FP16 rounding must show: the emulation rounds"
    assert real_size.correct * HEADROOM <= FRAMEWORK_STEP_TOLERANCE, real_size
    assert real_size.split_k * HEADROOM <= FRAMEWORK_STEP_TOLERANCE, real_size


@pytest.mark.parametrize("seed", SEEDS)
def test_jaxs_own_fp16_step_errs_as_the_emulation_does(seed: int) -> None:
    """A real framework's half-precision path (JAX's on the CPU: each op a compiled FP16 executable) errs as
    much as the emulation, on the CPU decode model (4 layers, ctx 1,024; at the real size
    ``tools/fp16_step_error.py`` gives 0.023-0.031 × RMS over 16 seeds)."""
    if frameworks.unavailable_reason("jax") is not None:
        pytest.skip(frameworks.unavailable_reason("jax"))
    jax = frameworks.module("jax")
    errors = fp16_step_errors(TINY_LLAMA_4L, CTX, TOKEN, seed, {"jax": (jax_ops(jax), jax.devices("cpu")[0])})
    error = errors.frameworks["jax"]
    assert 0.5 * errors.correct < error < 2 * errors.correct, errors
    assert error * HEADROOM <= FRAMEWORK_STEP_TOLERANCE


def test_a_step_without_its_kv_write_fails_the_tolerance_at_the_real_size(real_size: Fp16StepErrors) -> None:
    assert real_size.stale_cache >= DEFECT_FACTOR * FRAMEWORK_STEP_TOLERANCE, real_size


def _small_model(seed: int = 3) -> tuple:
    weights = draw_weights(SMALL, uniform_draw(np, seed, np.float16))
    cache = draw_kv_cache(SMALL, 48, uniform_draw(np, seed + 1, np.float16))
    return weights, cache, reference_logits(weights, cache, TOKEN % SMALL.vocab)


def test_a_step_without_its_kv_write_reads_the_poison_and_cannot_pass() -> None:
    """As the GPU case does: the position the step writes is NaN first, so skipping the write gives NaN."""
    weights, cache, reference = _small_model()
    poison_position(cache)
    ops = dataclasses.replace(fp16_ops(), put_position=lambda keys, pos, rows: keys)
    logits = decode_logits(ops, SMALL, step_arrays(ops, weights, cache, dtype=np.float16), TOKEN, 47)
    assert not reference_error(logits, reference) <= FRAMEWORK_STEP_TOLERANCE


def test_the_emulated_step_is_fp16_and_close_to_the_reference() -> None:
    weights, cache, reference = _small_model()
    poison_position(cache)  # the step writes the position: no NaN is read
    ops = fp16_ops()
    logits = decode_logits(ops, SMALL, step_arrays(ops, weights, cache, dtype=np.float16), TOKEN, 47)
    assert isinstance(logits, Fp16Array) and logits.dtype == np.float16
    assert 1e-4 < reference_error(logits, reference) < FRAMEWORK_STEP_TOLERANCE / HEADROOM


def _halves(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float16)


def _rounded(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).astype(np.float16)


def test_each_op_is_float32_arithmetic_rounded_once_to_fp16() -> None:
    a, b = _halves(64, seed=1), _halves(64, seed=2)
    x, y = a.view(Fp16Array), b.view(Fp16Array)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    for got, expected in [
        (x * y, a32 * b32),
        (x + y, a32 + b32),
        (x / y, a32 / b32),
        (x * 0.125, a32 * np.float32(0.125)),  # a Python scalar is taken as float32, as PyTorch's opmath
        (1.0 + np.exp(-x), 1 + _rounded(np.exp(-a32)).astype(np.float32)),  # two ops: rounded twice
        (np.sqrt(np.abs(x)), np.sqrt(np.abs(a32))),
    ]:
        assert isinstance(got, Fp16Array) and got.dtype == np.float16
        assert np.array_equal(got, _rounded(expected), equal_nan=True)
    mean = (x * x).mean()
    assert mean.dtype == np.float16 and mean == _rounded(_rounded(a32 * a32).astype(np.float32).mean())


def test_products_accumulate_in_float32_and_round_once(monkeypatch: pytest.MonkeyPatch) -> None:
    weight, vector = _halves(300, 96, seed=3), _halves(96, seed=4)
    expected = _rounded(weight.astype(np.float32) @ vector.astype(np.float32))
    monkeypatch.setattr(fp16_emulation, "WIDEN_BLOCK_BYTES", 4 * 96 * 7)  # blocks of 7 rows, the last short
    got = weight.view(Fp16Array) @ vector.view(Fp16Array)
    assert np.array_equal(got, expected)
    batch, other = _halves(2, 3, 96, seed=5), _halves(2, 96, 5, seed=6)
    got = batch.view(Fp16Array) @ other.view(Fp16Array)
    assert np.array_equal(got, _rounded(batch.astype(np.float32) @ other.astype(np.float32)))


def test_split_k_rounds_each_partial_sum_to_fp16() -> None:
    weight, vector = _halves(200, 64, seed=7), _halves(64, seed=8)
    w32, v32 = weight.astype(np.float32), vector.astype(np.float32)
    parts = [_rounded(w32[:, lo : lo + 16] @ v32[lo : lo + 16]).astype(np.float32) for lo in range(0, 64, 16)]
    got = matmul_f32(weight, vector, split_k=4)
    assert np.array_equal(got, ((parts[0] + parts[1]) + parts[2]) + parts[3])
    assert not np.array_equal(_rounded(got), _rounded(w32 @ v32)), "the partials' rounding shows"
    ops = fp16_ops(split_k=4)
    assert type(ops.asarray(weight, None, None) @ ops.asarray(vector, None, None)).split_k == 4


def test_what_it_does_not_emulate_is_refused() -> None:
    x = _halves(8).view(Fp16Array)
    with pytest.raises(TypeError, match=r"plain ufunc calls only, not add\.reduce"):
        np.add.reduce(x)
    with pytest.raises(TypeError, match="mean of every element only"):
        x.reshape(2, 4).mean(axis=0)


def test_softmax_is_float32_then_fp16() -> None:
    scores = _halves(3, 40, seed=9).view(Fp16Array) * 4.0
    p = fp16_ops().softmax(scores)
    assert p.dtype == np.float16 and np.allclose(np.asarray(p, dtype=np.float64).sum(axis=-1), 1, atol=1e-2)
