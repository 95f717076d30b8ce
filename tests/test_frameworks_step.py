"""The decode step written once for every framework (``benchmarks/decode_frameworks.py``): its equations
against the float64 reference, on numpy, on a numpy stand-in for PyTorch (CI has no torch), and on JAX's CPU
build where it is installed (the dev extra installs it)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks import frameworks
from benchmarks.decode_frameworks import (
    decode_logits,
    jax_ops,
    numpy_ops,
    step_arrays,
    step_bytes,
    torch_ops,
)
from benchmarks.decode_numpy import (
    REFERENCE_TOLERANCE,
    TINY_LLAMA_4L,
    build_numpy_step,
    random_kv_cache,
    random_weights,
    reference_error,
    reference_logits,
)
from benchmarks.test_framework_calls import poison_position, step_call
from benchmarks.test_framework_gpu import FRAMEWORK_STEP_TOLERANCE

CFG = dataclasses.replace(
    TINY_LLAMA_4L,
    name="tiny-test",
    n_layers=2,
    d_model=128,
    n_heads=4,
    n_kv_heads=2,
    d_head=32,
    d_ff=256,
    vocab=500,
)
CTX, TOKEN = 48, 7


@pytest.fixture
def model() -> tuple:
    weights = random_weights(CFG)
    cache = random_kv_cache(CFG, CTX)
    return weights, cache, reference_logits(weights, cache, TOKEN)


def _fake_torch() -> SimpleNamespace:
    """What ``torch_ops`` calls, spelled as PyTorch spells it, done by numpy."""

    class Tensor(np.ndarray):
        def to(self, dtype: object = None, device: object = None) -> np.ndarray:
            return np.asarray(self, dtype=dtype).view(Tensor)

    def softmax(x: np.ndarray, dim: int, dtype: object) -> np.ndarray:
        x = np.asarray(x, dtype=dtype)
        p = np.exp(x - x.max(axis=dim, keepdims=True))
        return (p / p.sum(axis=dim, keepdims=True)).view(Tensor)

    return SimpleNamespace(
        cat=lambda xs, dim: np.concatenate(xs, axis=dim),
        exp=np.exp,
        sqrt=np.sqrt,
        softmax=softmax,
        float32=np.float32,
        from_numpy=lambda array: array.view(Tensor),
    )


def test_the_numpy_step_matches_the_float64_reference_and_writes_the_cache(model: tuple) -> None:
    weights, cache, reference = model
    poison_position(cache)
    ops = numpy_ops()
    logits = decode_logits(ops, CFG, step_arrays(ops, weights, cache), TOKEN, CTX - 1)
    assert reference_error(logits, reference) < 1e-5
    assert np.isfinite(cache.keys[0][:, CTX - 1]).all(), "the step writes its key in place"


def test_a_step_that_skips_the_cache_write_reads_the_poison_and_fails(model: tuple) -> None:
    weights, cache, reference = model
    poison_position(cache)
    ops = dataclasses.replace(numpy_ops(), put_position=lambda keys, pos, rows: keys)
    logits = decode_logits(ops, CFG, step_arrays(ops, weights, cache), TOKEN, CTX - 1)
    assert not reference_error(logits, reference) <= REFERENCE_TOLERANCE


def test_the_torch_spelling_runs_the_same_step_on_a_stand_in(model: tuple) -> None:
    weights, cache, reference = model
    ops = torch_ops(_fake_torch())
    logits = decode_logits(ops, CFG, step_arrays(ops, weights, cache), TOKEN, CTX - 1)
    assert reference_error(logits, reference) < 1e-5


def test_the_fp16_step_of_the_gpu_case_stays_within_the_gpu_tolerance(model: tuple) -> None:
    """The GPU case's step: FP16 weights, cache, RoPE tables and activations, softmax in float32."""
    weights, cache, reference = model
    ops = torch_ops(_fake_torch())
    arrays = step_arrays(ops, weights, cache, device="cuda", dtype=np.float16)
    assert arrays.layers[0].wqkv.dtype == np.float16 and arrays.cos.dtype == np.float16
    logits = decode_logits(ops, CFG, arrays, TOKEN, CTX - 1)
    assert logits.dtype == np.float16
    assert 1e-4 < reference_error(logits, reference) <= FRAMEWORK_STEP_TOLERANCE  # rounded, yet close


def test_step_bytes_are_the_numpy_steps_bytes(model: tuple) -> None:
    weights, cache, _ = model
    numpy_step = build_numpy_step("fused", weights, cache, TOKEN)
    assert step_bytes(weights, cache, item_bytes=4) == numpy_step.bytes_per_step


@pytest.mark.parametrize("compiler", [None, "jax.jit"])
def test_the_jax_step_matches_the_reference_and_leaves_the_numpy_cache_alone(
    model: tuple, compiler: str | None
) -> None:
    if frameworks.unavailable_reason("jax") is not None:
        pytest.skip(frameworks.unavailable_reason("jax"))
    jax = frameworks.module("jax")
    weights, cache, reference = model
    poison_position(cache)
    call = step_call("jax", compiler, jax, weights, cache, TOKEN)
    assert reference_error(frameworks.to_numpy(call()), reference) < 1e-5
    assert np.isnan(cache.keys[0][:, CTX - 1]).all(), "JAX writes a new array, never the numpy cache"
    ops = jax_ops(jax)
    assert ops.put_position(jax.numpy.zeros((1, 3, 2)), 1, jax.numpy.ones((1, 2)))[0, 1].tolist() == [1, 1]


def test_step_call_refuses_an_unknown_compiler(model: tuple) -> None:
    weights, cache, _ = model
    with pytest.raises(ValueError, match="unknown compiler 'tvm'"):
        step_call("numpy", "tvm", np, weights, cache, TOKEN)


def test_step_call_runs_the_numpy_step_to_its_logits(model: tuple) -> None:
    weights, cache, reference = model
    call = step_call("numpy", None, np, weights, cache, TOKEN)
    assert reference_error(call(), reference) < 1e-5
