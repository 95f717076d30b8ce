"""The numpy decode step (``benchmarks/decode_numpy.py``): logits of both plans, counted calls, bytes."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.decode_numpy import (
    ATTENTION,
    REFERENCE_TOLERANCE,
    TINY_LLAMA_4L,
    CallCounter,
    NumpyDecodeStep,
    build_numpy_step,
    check_against_reference,
    cpu_decode_config,
    draw_weights,
    op_identity,
    random_kv_cache,
    random_weights,
    reference_error,
    reference_logits,
)
from benchmarks.records import CONTRACT
from benchmarks.test_decode_step import QUICK_CPU_STEP_ROUNDS, cpu_config
from model.hardware import H100
from model.launch import FUSED, UNFUSED
from model.llm import ModelConfig
from model.roofline import decode_step

pytest_plugins = ["pytester"]

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
    assert counter.calls == step.count_calls().calls > len(step.ops)
    assert counter.op_counts == step.count_calls().op_counts


def test_counter_counts_each_call_once() -> None:
    counter = CallCounter()
    out = np.empty(3)
    counter.add(np.ones(3), 1.0, out=out)
    counter.multiply(out, out, out=out)
    assert counter.calls == 2
    assert counter.op_counts == {"np.add(1d, scalar, out=1d)": 1, "np.multiply(1d, 1d, out=1d)": 1}
    np.testing.assert_array_equal(out, [4.0, 4.0, 4.0])


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_calls_grow_linearly_with_layers(plan) -> None:
    """calls(L) = per-layer calls × L + (tail + layer 0's embedding copy): a fixed count per layer, as the
    seed's kernels per layer."""
    counts = {}
    for n_layers in (1, 2, 3):
        cfg = ModelConfig(f"test-{n_layers}L", n_layers, 64, 4, 2, 16, 128, 500, tied=True)
        counts[n_layers] = _step(plan, cfg, ctx=8).count_calls().calls
    per_layer = counts[2] - counts[1]
    assert counts[3] - counts[2] == per_layer
    assert per_layer >= len(plan.per_layer)  # every op is at least one numpy call


def test_fused_plan_makes_fewer_calls_and_ops() -> None:
    unfused, fused = _step(UNFUSED), _step(FUSED)
    assert len(fused.ops) < len(unfused.ops)
    assert fused.count_calls().calls < unfused.count_calls().calls


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
    """The benchmark's base configuration: ≈ 375 MB of float32 weights (more layers on a machine whose LLC is
    more than half that: ``cpu_decode_config``)."""
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


# --- the call list by op ---


def test_op_identity_names_function_argument_classes_and_keywords() -> None:
    matrix = np.ones((4, 6), np.float32)
    batch = np.ones((2, 3, 4), np.float32)
    assert (
        op_identity("matmul", (matrix, matrix[0]), {"out": matrix[:, 0].copy()})
        == "np.matmul(2d, 1d, out=1d)"
    )
    assert op_identity("multiply", (matrix[:, 3:], 2.0), {"out": matrix[:, :3]}) == (
        "np.multiply(2d strided, scalar, out=2d strided)"
    )
    keywords = {"out": batch[..., :1].copy(), "keepdims": True, "axis": -1}  # listed alphabetically
    assert op_identity("max", (batch,), keywords) == "np.max(3d, axis, keepdims, out=3d)"
    assert op_identity("matmul", (batch, batch.transpose(0, 2, 1)), {}) == "np.matmul(3d, 3d strided)"
    assert op_identity("argmax", (matrix[0],), {"out": np.empty((), np.intp)}) == "np.argmax(1d, out=0d)"


def test_rmsnorm_op_counts_by_op() -> None:
    step = _step(UNFUSED)
    step.run()  # every buffer holds a step's values
    counter = step.count_calls(step.layers[1][:1])  # layer 1's RMSNorm
    assert counter.op_counts == {
        "np.dot(1d, 1d)": 1,
        "np.multiply(1d, scalar, out=1d)": 1,
        "np.multiply(1d, 1d, out=1d)": 1,
    }


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_op_counts_are_the_call_list_and_do_not_depend_on_sizes(plan) -> None:
    """The counts by op add up to the calls, and a model of other widths (same layers, no dimension of 1)
    makes the same call list: op identities hold no sizes."""
    wide = ModelConfig("test-wide-2L", 2, 96, 6, 3, 16, 160, 300, tied=True)
    small, other = _step(plan).count_calls(), _step(plan, wide, ctx=11).count_calls()
    assert sum(small.op_counts.values()) == small.calls
    assert small.op_counts == other.op_counts


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_attention_ops_are_one_per_layer_and_count_alone(plan) -> None:
    step = _step(plan)
    attention = step.attention_ops
    assert len(attention) == SMALL.n_layers and {op.name for op in attention} == {ATTENTION}
    counter = step.count_calls(attention)
    per_layer = 8 if plan is UNFUSED else 7  # the unfused plan scales the scores in a call of its own
    assert counter.calls == per_layer * SMALL.n_layers
    assert counter.op_counts["np.max(3d, axis, keepdims, out=3d)"] == SMALL.n_layers
    assert (
        sum(op.bytes_read for op in attention)
        == 2 * SMALL.n_layers * SMALL.n_kv_heads * CTX * SMALL.d_head * 4
    )


# --- the reference check at the benchmark's shapes ---


class _Without:
    """numpy with one function made a no-op: plants a defect in an op's body."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, name: str) -> Any:
        return (lambda *args, **kwargs: None) if name == self.name else getattr(np, name)


def _planted(step: NumpyDecodeStep, op_name: str, without: str | None = None) -> NumpyDecodeStep:
    """``step`` with every op named ``op_name`` left out (``without`` None) or run without one numpy
    function (e.g. the SiLU op without its division: act = gate·up)."""

    def body(op):
        if without is None:
            return lambda xp: None
        return lambda xp: op.body(_Without(without))

    layers = tuple(
        tuple(dataclasses.replace(op, body=body(op)) if op.name == op_name else op for op in layer)
        for layer in step.layers
    )
    assert layers != step.layers, f"no op named {op_name!r}"
    return dataclasses.replace(step, layers=layers)


#: The benchmark's context (a missing KV write changes one position of ``ctx``: the smallest defect) and a
#: small width, so the check runs in a fraction of a second.
BENCH_CTX = 1024


@pytest.mark.parametrize(
    ("op_name", "without", "expected"),
    [
        ("write KV cache", None, "non-finite logits"),
        ("residual add", None, "error"),
        ("RoPE", None, "error"),
        ("SiLU × mul", "divide", "error"),
    ],
)
def test_reference_check_fails_on_planted_defects(op_name: str, without: str | None, expected: str) -> None:
    weights, cache = random_weights(SMALL), random_kv_cache(SMALL, BENCH_CTX)
    reference = reference_logits(weights, cache, TOKEN)
    correct = build_numpy_step("unfused", weights, cache, TOKEN)
    assert check_against_reference(correct, reference) < REFERENCE_TOLERANCE / 10
    defective = _planted(build_numpy_step("unfused", weights, cache, TOKEN), op_name, without)
    with pytest.raises(
        AssertionError, match=f"unfused step of {SMALL.name}, ctx 1,024: {expected}"
    ) as failure:
        check_against_reference(defective, reference)
    if expected == "error":  # the figure is in the message, and it is far past the tolerance
        figure = float(str(failure.value).split("error ", 1)[1].split(" ", 1)[0])
        assert figure > 10 * REFERENCE_TOLERANCE


def test_missing_kv_write_is_caught_even_after_a_correct_step() -> None:
    """A correct step first writes the right key and value; the check's poisoning still exposes a later
    step that writes none (the benchmark's plans share one cache)."""
    weights, cache = random_weights(SMALL), random_kv_cache(SMALL, BENCH_CTX)
    reference = reference_logits(weights, cache, TOKEN)
    check_against_reference(build_numpy_step("fused", weights, cache, TOKEN), reference)
    defective = _planted(build_numpy_step("unfused", weights, cache, TOKEN), "write KV cache")
    with pytest.raises(AssertionError, match="non-finite logits"):
        check_against_reference(defective, reference)


def test_reference_error_is_relative_to_the_references_rms() -> None:
    reference = np.array([3.0, -4.0, 0.0, 5.0])  # RMS 3.536
    logits = reference + np.array([0.0, 0.1, 0.0, 0.0])
    assert reference_error(logits.astype(np.float32), reference) == pytest.approx(
        0.1 / np.sqrt(12.5), rel=1e-6
    )
    assert np.isnan(reference_error(np.full(4, np.nan), reference))


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_benchmark_config_makes_the_floors_call_list(plan) -> None:
    """The overhead floor (benchmarks/test_numpy_ops.py) is paired with the benchmark's step by equal
    ``op_counts``: the two configurations must make the same call list. Zero weights (calloc'd, never
    written) count the big step's calls without drawing 375 MB."""
    from benchmarks.test_numpy_ops import FLOOR, FLOOR_CTX, FLOOR_TOKEN, floor_step

    big_config = cpu_config()  # the benchmark's model on this machine: as many layers as its LLC asks
    zeros = draw_weights(big_config, lambda shape, std, mean: np.zeros(shape, np.float32))
    cache = random_kv_cache(big_config, 8)
    big = build_numpy_step(plan.name, zeros, cache, FLOOR_TOKEN).count_calls()
    step, _ = floor_step(plan.name)
    assert (step.cfg, step.ctx) == (FLOOR, FLOOR_CTX)
    floor = step.count_calls()
    assert Counter(big.op_counts) == Counter(floor.op_counts) and big.calls == floor.calls


# --- the model sized from the last-level cache, and the step's bandwidth probe ---


def test_the_benchmark_model_is_sized_from_the_last_level_cache() -> None:
    """Weights ≥ 2 × the LLC, with the fewest layers that do it (never fewer than the base model's)."""
    assert cpu_decode_config(None) is TINY_LLAMA_4L and cpu_decode_config(32 * 2**20) is TINY_LLAMA_4L
    xeon = cpu_decode_config(272_629_760)  # the Xeon VM's 273 MB LLC: 4 layers would be 1.4 × it
    assert xeon.name == "tiny-llama-7L-1024" and xeon.n_layers == 7
    assert dataclasses.replace(xeon, name=TINY_LLAMA_4L.name, n_layers=4) == TINY_LLAMA_4L


def _weight_matrices(step: NumpyDecodeStep) -> list[tuple[int, tuple[int, ...]]]:
    """(address, shape) of every matrix the step's projection and output ops read, in step order."""
    return [
        (array.__array_interface__["data"][0], array.shape)
        for op in step.ops
        if "projection" in op.name or op.name == "output layer"
        for array in op.reads
    ]


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_the_probe_reads_every_weight_matrix_of_the_step_once_with_its_own_calls(plan) -> None:
    step = _step(plan)
    probe = [(a.__array_interface__["data"][0], a.shape) for op in step.probe for a in op.reads]
    assert probe == _weight_matrices(step)
    kv_bytes = sum(
        keys.nbytes + values.nbytes for keys, values in zip(step.cache.keys, step.cache.values, strict=True)
    )
    norms = 4 * SMALL.d_model * (2 * SMALL.n_layers + 1) + 4 * SMALL.d_model  # norm weights, embedding row
    assert step.probe_bytes == step.bytes_per_step - kv_bytes - norms
    counts = step.count_calls(step.probe).op_counts
    assert dict(counts) == {"np.matmul(2d, 1d, out=1d)": len(step.probe)}


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_the_probe_computes_the_products_and_leaves_the_step_alone(plan) -> None:
    step = _step(plan)
    step.run()
    logits = step.logits.copy()
    step.run(ops=step.probe)
    np.testing.assert_array_equal(step.logits, logits)  # the probe writes into buffers of its own
    step.run()
    np.testing.assert_array_equal(step.logits, logits)
    last = step.probe[-1]  # the output layer: embedding @ xn, xn as the step left it
    out = last.body.__closure__  # the buffer the probe wrote, found through its own product
    products = [cell.cell_contents for cell in out if isinstance(cell.cell_contents, np.ndarray)]
    (written,) = [array for array in products if array.shape == (SMALL.vocab,)]
    np.testing.assert_allclose(written, logits, rtol=1e-5, atol=1e-6)


def test_the_cpu_case_records_one_probe_round_per_timed_round(pytester: pytest.Pytester) -> None:
    """The benchmark end to end (--quick): the step's rounds and the probe's rounds are as many, and the
    probe's coordinates are in the contract."""
    saved = pytester.path / "run.json"
    module = str(Path(__file__).resolve().parents[1] / "benchmarks" / "test_decode_step.py")
    result = pytester.runpytest_subprocess(
        module, "--quick", "--benchmark-only", f"--benchmark-json={saved}", "-k", "cpu_decode_step",
        "-p", "no:cacheprovider",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    for bench in json.loads(saved.read_text())["benchmarks"]:
        extra = bench["extra_info"]
        assert set(extra) <= {"suite", *CONTRACT}
        assert len(extra["probe_s"]) == bench["stats"]["rounds"] == QUICK_CPU_STEP_ROUNDS
        assert all(t > 0 for t in extra["probe_s"])
        # 7 matrix-vector products a layer unfused (q, k, v, o, gate, up, down), 4 fused, and the logits.
        layers = cpu_config().n_layers
        assert extra["probe_op_counts"] == {
            "np.matmul(2d, 1d, out=1d)": (7 if extra["plan"] == "unfused" else 4) * layers + 1
        }
        assert 0 < extra["probe_bytes"] < extra["bytes"]
