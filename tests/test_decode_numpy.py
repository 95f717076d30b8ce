"""The numpy decode step (``benchmarks/decode_numpy.py``): logits of both plans, counted calls, bytes."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.decode_numpy import (
    TINY_LLAMA_4L,
    CallCounter,
    build_numpy_step,
    random_kv_cache,
    random_weights,
    reference_logits,
)
from model.hardware import H100
from model.launch import FUSED, UNFUSED
from model.llm import ModelConfig
from model.roofline import decode_step

#: Small Llama-shaped configuration for the tests (GQA group 2, tied output); ctx 37 is no power of two.
SMALL = ModelConfig("test-llama-2L-128", 2, 128, 4, 2, 32, 256, 500, tied=True)
CTX = 37
TOKEN = 123
PLANS = (UNFUSED, FUSED)
#: float32 against float64: |error| ≤ this × the reference's RMS.
FP32_TOLERANCE = 1e-5


def _step(plan, cfg: ModelConfig = SMALL, ctx: int = CTX):
    return build_numpy_step(plan.name, random_weights(cfg), random_kv_cache(cfg, ctx), TOKEN)


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_logits_match_float64_reference(plan) -> None:
    weights, cache = random_weights(SMALL), random_kv_cache(SMALL, CTX)
    reference = reference_logits(weights, cache, TOKEN)  # before the step writes its position
    step = build_numpy_step(plan.name, weights, cache, TOKEN)
    step.run()
    rms = np.sqrt(np.mean(reference**2))
    assert np.abs(step.logits - reference).max() <= FP32_TOLERANCE * rms
    assert int(step.next_token) == int(np.argmax(step.logits))


def test_reference_leaves_the_cache_alone_and_depends_on_the_token() -> None:
    weights, cache = random_weights(SMALL), random_kv_cache(SMALL, CTX)
    before = cache.keys[0].copy()
    first = reference_logits(weights, cache, TOKEN)
    np.testing.assert_array_equal(cache.keys[0], before)
    assert not np.allclose(first, reference_logits(weights, cache, TOKEN + 1))


def test_plans_agree_and_repeat() -> None:
    weights, cache = random_weights(SMALL), random_kv_cache(SMALL, CTX)
    unfused = build_numpy_step("unfused", weights, cache, TOKEN)
    fused = build_numpy_step("fused", weights, cache, TOKEN)
    unfused.run()
    fused.run()
    first = unfused.logits.copy()
    np.testing.assert_allclose(fused.logits, first, rtol=1e-5, atol=1e-5)
    unfused.run()
    np.testing.assert_array_equal(unfused.logits, first)


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_ops_are_the_seeds_plan(plan) -> None:
    step = _step(plan)
    assert len(step.ops) == plan.n_kernels(SMALL) == SMALL.n_layers * len(plan.per_layer) + 3
    for layer in step.layers:
        assert tuple(op.name for op in layer) == plan.per_layer
    assert tuple(op.name for op in step.tail) == plan.tail


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_counted_run_is_the_timed_run(plan) -> None:
    """The counting stand-in forwards every call: its run gives the same logits as plain numpy."""
    step = _step(plan)
    step.run()
    plain = step.logits.copy()
    counter = CallCounter()
    step.run(counter)
    np.testing.assert_array_equal(step.logits, plain)
    assert counter.calls == step.count_calls() > len(step.ops)


def test_counter_counts_each_call_once() -> None:
    counter = CallCounter()
    out = np.empty(3)
    counter.add(np.ones(3), 1.0, out=out)
    counter.multiply(out, out, out=out)
    assert counter.calls == 2
    np.testing.assert_array_equal(out, [4.0, 4.0, 4.0])


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_calls_grow_linearly_with_layers(plan) -> None:
    """calls(L) = per-layer calls × L + (tail + layer 0's embedding copy): a fixed count per layer, as the
    seed's kernels per layer."""
    counts = {}
    for n_layers in (1, 2, 3):
        cfg = ModelConfig(f"test-{n_layers}L", n_layers, 64, 4, 2, 16, 128, 500, tied=True)
        counts[n_layers] = _step(plan, cfg, ctx=8).count_calls()
    per_layer = counts[2] - counts[1]
    assert counts[3] - counts[2] == per_layer
    assert per_layer >= len(plan.per_layer)  # every op is at least one numpy call


def test_fused_plan_makes_fewer_calls_and_ops() -> None:
    unfused, fused = _step(UNFUSED), _step(FUSED)
    assert len(fused.ops) < len(unfused.ops)
    assert fused.count_calls() < unfused.count_calls()


def test_rmsnorm_op_is_three_numpy_calls() -> None:
    """The counted calls of one op are the numpy functions it calls: here dot, multiply, multiply."""
    step = _step(UNFUSED)
    names: list[str] = []

    class Recorder(CallCounter):
        def __getattr__(self, name: str):
            names.append(name)
            return super().__getattr__(name)

    step.layers[1][0].body(Recorder())  # layer 1's first RMSNorm (layer 0's also copies the embedding row)
    assert names == ["dot", "multiply", "multiply"]


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_bytes_per_step_is_the_rooflines(plan) -> None:
    """Weights (embedding row, layers, final norm, tied output) + KV cache at 4 bytes per value."""
    step = _step(plan)
    assert step.bytes_per_step == decode_step(SMALL, H100, 1, CTX, bytes_per_param=4).bytes_total


def test_benchmark_config_is_past_the_last_level_cache() -> None:
    """The benchmark's configuration: ≈ 375 MB of float32 weights, more than any laptop or server LLC."""
    weight_bytes = decode_step(TINY_LLAMA_4L, H100, 1, 1024, bytes_per_param=4).weight_bytes
    assert weight_bytes > 256 * 2**20
    assert TINY_LLAMA_4L.n_heads // TINY_LLAMA_4L.n_kv_heads == 4 and TINY_LLAMA_4L.tied


@pytest.mark.parametrize(
    ("plan", "token", "message"),
    [("megakernel", 0, "unknown plan 'megakernel'"), ("fused", 500, r"token must be in \[0, 500\)")],
)
def test_bad_input_is_named(plan: str, token: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_numpy_step(plan, random_weights(SMALL), random_kv_cache(SMALL, CTX), token)
