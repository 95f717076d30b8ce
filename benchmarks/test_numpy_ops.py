"""The fixed cost of each numpy operation the decode step calls, and the step's own overhead floor.

The seed's model charges every numpy call one t0, the fitted cost of ``np.add(a, a, out=o)``. The decode step
(``benchmarks/decode_numpy.py``) calls 22–23 different operations whose fixed costs differ by 16× (a 1-D
``copyto`` 0.15 µs, a reduction with ``axis`` and ``out`` 2.3 µs, on a 2-vCPU EPYC VM).
Two families measure what one t0 leaves out:

- ``numpy_op``: for each op of the step's call list (``op`` = ``decode_numpy.op_identity``, e.g.
  ``"np.max(3d, axis, keepdims, out=3d)"``), the step's own calls of that op replayed in a loop: the same
  functions, shapes, strides, keyword arguments and values the step passes, taken from the step of
  ``FLOOR``, a model so small that data costs nothing, so each call costs its fixed cost alone. Both plans'
  calls of the op are replayed (an op's cost is one figure for both); ``n_calls`` is the numpy calls per
  timed call, at least ``MIN_CALLS``, so pytest-benchmark's own per-call overhead (~70 ns) adds ~1 ns.
- ``decode_floor``: the whole step of ``FLOOR``, each plan: the step's overhead floor, what its call list
  costs when data costs nothing, including what no per-op figure holds (the Python work between the calls:
  the ops' bodies, reshapes, transposes and slices, the RMSNorm's float arithmetic). ``FLOOR`` has the
  layers of the benchmark's model on this machine (``cpu_decode_config``) and its GQA grouping, and no
  dimension of 1 (which would change which views are contiguous), so its call list is the benchmark
  step's: equal ``op_counts``, by which analysis pairs the two. Its logits are checked against the float64
  reference first.

How a call is replayed: while the floor step runs once through a recording stand-in for numpy, each call's
array arguments are copied with their layout (a view keeps its offset and strides, in a copy of the array
it views; views of one array stay views of one copy) and with their values at that moment. The output
(``out``) always gets a copy of its own, so a repeated in-place call (``np.exp(s, out=s)``) does not feed its
result back into itself: in a loop, in-place exp, scaling or division reach infinities or subnormal numbers
within tens of calls, and subnormal arithmetic costs more than the step's numbers do. Whether ``out``
aliases an input changed no call's cost beyond noise on the EPYC VM. Each replayed call is a
``functools.partial`` of the numpy function: one Python-level call, as the step makes it. Its result is
checked against the step's own result of that call before timing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from benchmarks.budget import timing_mark
from benchmarks.decode_numpy import (
    PLANS,
    CallCounter,
    NumpyDecodeStep,
    build_numpy_step,
    check_against_reference,
    op_identity,
    random_kv_cache,
    random_weights,
    reference_logits,
)
from benchmarks.records import record
from benchmarks.run_notes import record_fact
from benchmarks.test_decode_step import cpu_config
from model.llm import ModelConfig

_LAYERS = cpu_config().n_layers
#: The overhead floor's model: the benchmark model's layers (on this machine) and GQA group (4 query heads per
#: KV head), every other size a few elements, so data costs nothing and the call list is the benchmark step's.
FLOOR = ModelConfig(
    f"floor-llama-{_LAYERS}L-16",
    n_layers=_LAYERS,
    d_model=16,
    n_heads=8,
    n_kv_heads=2,
    d_head=4,
    d_ff=32,
    vocab=64,
    tied=True,
)
#: Context of the floor step (positions in its KV cache).
FLOOR_CTX = 16
#: Input token of the floor step.
FLOOR_TOKEN = 5
#: Numpy calls per timed call of a ``numpy_op`` case at least: an op's calls are replayed this often.
MIN_CALLS = 64
#: Seconds of rounds per case (``benchmarks/budget.py``), full and ``--quick``: an op case's fastest round is
#: stable within a few percent after ~25 rounds of 2 ms; a quick run takes pytest-benchmark's minimum of 5.
OP_MAX_TIME_S, QUICK_OP_MAX_TIME_S = 0.25, 0.01
FLOOR_MAX_TIME_S, QUICK_FLOOR_MAX_TIME_S = 0.5, 0.01
#: A replayed call's result matches the step's own within this fraction of the result's largest magnitude
#: (the same inputs; only BLAS's path may differ with the copies' alignment).
REPLAY_TOLERANCE = 1e-6


@dataclass(frozen=True)
class ReplayCall:
    """One numpy call of the step, ready to repeat: ``call()`` runs it on copies of its arguments;
    ``expected`` is what the step's own call produced (its result, or what it wrote into its first argument
    when it returns nothing, as ``np.copyto`` does)."""

    op: str
    call: functools.partial
    expected: np.ndarray

    def output(self) -> np.ndarray:
        """Run the call once and return what it produced, as ``expected`` holds it."""
        result = self.call()
        return np.asarray(self.call.args[0] if result is None else result)


def _root(array: np.ndarray) -> np.ndarray:
    """The array that owns the memory ``array`` views."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _relayout(value: Any, copies: dict[int, np.ndarray]) -> Any:
    """``value`` itself when it is not an array; else the same view (shape, strides, offset) into a copy of
    the array it views, one copy per viewed array in ``copies``."""
    if not isinstance(value, np.ndarray):
        return value
    root = _root(value)
    if not root.flags.c_contiguous:
        raise ValueError(f"cannot replay a view of a non-contiguous array (shape {root.shape})")
    copy = copies.setdefault(id(root), root.copy())
    offset = value.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return np.ndarray(value.shape, value.dtype, buffer=copy, offset=offset, strides=value.strides)


class CallRecorder(CallCounter):
    """A ``CallCounter`` that also keeps every call as a ``ReplayCall`` (``recorded``, in call order)."""

    def __init__(self) -> None:
        super().__init__()
        self.recorded: list[ReplayCall] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        counted = super().__getattr__(name)
        function = getattr(np, name)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            inputs: dict[int, np.ndarray] = {}
            replay_args = tuple(_relayout(value, inputs) for value in args)
            replay_kwargs = {
                key: _relayout(value, {} if key == "out" else inputs) for key, value in kwargs.items()
            }
            op = op_identity(name, args, kwargs)
            result = counted(*args, **kwargs)
            written = args[0] if result is None else result
            call = functools.partial(function, *replay_args, **replay_kwargs)
            self.recorded.append(ReplayCall(op=op, call=call, expected=np.array(written, copy=True)))
            return result

        return recorded


def floor_step(plan: str) -> tuple[NumpyDecodeStep, np.ndarray]:
    """The ``plan`` step of ``FLOOR`` (seeded random weights and cache) and its float64 reference logits."""
    weights, cache = random_weights(FLOOR), random_kv_cache(FLOOR, FLOOR_CTX)
    reference = reference_logits(weights, cache, FLOOR_TOKEN)
    return build_numpy_step(plan, weights, cache, FLOOR_TOKEN), reference


@functools.cache
def recorded_calls() -> dict[str, tuple[ReplayCall, ...]]:
    """Every numpy call of one floor step of each plan, grouped by op, ops in the order they first occur
    (the unfused plan's step first). The step runs once before it is recorded, so every buffer holds the
    values of a real step."""
    by_op: dict[str, list[ReplayCall]] = {}
    for plan in PLANS:
        step, _ = floor_step(plan)
        step.run()
        recorder = CallRecorder()
        step.run(recorder)
        for call in recorder.recorded:
            by_op.setdefault(call.op, []).append(call)
    return {op: tuple(calls) for op, calls in by_op.items()}


def case_id(op: str) -> str:
    """The test id of ``op``: its name without spaces, e.g. "np.max(3d,axis,keepdims,out=3d)"."""
    return op.replace(", ", ",").replace(" ", "-")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One ``numpy_op`` case per op of the step's call list, one ``decode_floor`` case per plan."""
    config = metafunc.config
    quick = config.getoption("quick")
    if metafunc.definition.name == "test_numpy_op":
        group = f"numpy_op: the decode step's numpy calls, replayed ({FLOOR.name}); id: op"
        mark = timing_mark(config, group, QUICK_OP_MAX_TIME_S if quick else OP_MAX_TIME_S)
        params = [pytest.param(op, id=case_id(op), marks=mark) for op in recorded_calls()]
        metafunc.parametrize("op", params)
    elif metafunc.definition.name == "test_decode_floor":
        group = f"decode_floor: the whole decode step of {FLOOR.name}, ctx {FLOOR_CTX}"
        mark = timing_mark(config, group, QUICK_FLOOR_MAX_TIME_S if quick else FLOOR_MAX_TIME_S)
        metafunc.parametrize("plan", [pytest.param(plan, marks=mark) for plan in PLANS])


def _replay(calls: tuple[Callable[[], object], ...]) -> None:
    for call in calls:
        call()


def test_numpy_op(benchmark: Any, op: str) -> None:
    """Every call of ``op`` in the floor steps, repeated to at least ``MIN_CALLS`` calls per timed call."""
    calls = recorded_calls()[op]
    for call in calls:
        expected = call.expected
        scale = float(np.abs(expected).max()) if expected.size else 0.0
        np.testing.assert_allclose(
            call.output(), expected, rtol=0, atol=REPLAY_TOLERANCE * scale, err_msg=f"{op}: replay"
        )
    functions = tuple(call.call for call in calls) * math.ceil(MIN_CALLS / len(calls))
    record(
        benchmark,
        case="numpy_op",
        device="cpu",
        op=op,
        dtype="float32",
        n_calls=len(functions),
        config=FLOOR.name,
        ctx=FLOOR_CTX,
    )
    benchmark(_replay, functions)


def test_decode_floor(benchmark: Any, request: pytest.FixtureRequest, plan: str) -> None:
    """The floor step, checked against its float64 reference (the error saved as a fact of the run), then
    timed; it must repeat bit for bit."""
    step, reference = floor_step(plan)
    error = check_against_reference(step, reference)
    record_fact(request.config, f"cpu.decode_floor.reference_error.{plan}", error)
    counter = step.count_calls()
    expected = step.logits.copy()
    benchmark(step.run)
    np.testing.assert_array_equal(step.logits, expected, err_msg=f"{plan} floor step after timing")
    record(
        benchmark,
        case="decode_floor",
        device="cpu",
        op="decode_step",
        dtype="float32",
        plan=plan,
        n_calls=counter.calls,
        op_counts=dict(counter.op_counts),
        bytes=step.bytes_per_step,
        config=FLOOR.name,
        batch=1,
        ctx=FLOOR_CTX,
    )
