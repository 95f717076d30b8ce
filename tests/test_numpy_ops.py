"""``benchmarks/test_numpy_ops.py``: the replayed calls are the step's calls, and the cases save what analysis
reads (a pytest run of the real module, timed only as briefly as pytest-benchmark allows)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from analysis.load import load_runs
from analysis.ops import floor_table, op_costs
from analysis.summary import summary_lines
from benchmarks.decode_numpy import PLANS, REFERENCE_TOLERANCE, op_identity
from benchmarks.records import CONTRACT, SUITE
from benchmarks.run_record import RUN_RECORD_KEY
from benchmarks.test_numpy_ops import FLOOR, MIN_CALLS, CallRecorder, case_id, floor_step, recorded_calls

pytest_plugins = ["pytester"]

NUMPY_OPS = str(Path(__file__).resolve().parents[1] / "benchmarks" / "test_numpy_ops.py")


def test_recorded_calls_are_both_plans_call_lists() -> None:
    expected: Counter[str] = Counter()
    for plan in PLANS:
        step, _ = floor_step(plan)
        expected.update(step.count_calls().op_counts)
    recorded = recorded_calls()
    assert {op: len(calls) for op, calls in recorded.items()} == dict(expected)
    assert all(call.op == op for op, calls in recorded.items() for call in calls)


def test_replayed_calls_keep_the_layout_and_give_the_steps_results() -> None:
    for op, calls in recorded_calls().items():
        for call in calls:
            assert op_identity(call.call.func.__name__, call.call.args, call.call.keywords) == op
            np.testing.assert_allclose(call.output(), call.expected, rtol=1e-6, atol=1e-6, err_msg=op)


def test_an_in_place_call_replays_into_an_output_of_its_own() -> None:
    """``np.exp(s, out=s)`` in the step: the replay writes elsewhere, so repeating it leaves its input alone
    (a loop of in-place exp would reach infinity)."""
    (call, *_) = recorded_calls()["np.exp(3d, out=3d)"]
    scores, out = call.call.args[0], call.call.keywords["out"]
    assert not np.shares_memory(scores, out)
    before = scores.copy()
    for _ in range(50):
        call.call()
    np.testing.assert_array_equal(scores, before)
    assert np.isfinite(out).all()


def test_views_of_one_array_stay_views_of_one_copy() -> None:
    """``np.multiply(gate, up, out=act)``: gate and up are halves of one buffer, and stay so in the replay."""
    pairs = [call.call.args for call in recorded_calls()["np.multiply(1d, 1d, out=1d)"]]
    shared = [(a, b) for a, b in pairs if a.base is not None and a.base is b.base]
    assert shared, "no multiply of two views of one buffer recorded"
    for gate, up in shared:
        assert np.shares_memory(gate.base, up) and not np.shares_memory(gate, up)


def test_recorder_counts_as_the_counter_does() -> None:
    recorder = CallRecorder()
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.empty_like(values)
    recorder.multiply(values, 2.0, out=out)
    recorder.copyto(values, out)
    assert recorder.calls == 2
    assert recorder.op_counts == {"np.multiply(2d, scalar, out=2d)": 1, "np.copyto(2d, 2d)": 1}
    multiply, copy = recorder.recorded
    np.testing.assert_array_equal(multiply.output(), np.arange(6).reshape(2, 3) * 2)
    np.testing.assert_array_equal(copy.output(), values)  # copyto returns nothing: its first argument


def test_case_ids_have_no_spaces() -> None:
    assert (
        case_id("np.multiply(2d strided, 1d, out=2d strided)") == "np.multiply(2d-strided,1d,out=2d-strided)"
    )


def test_a_measured_run_saves_op_counts_and_the_summary_prices_the_floor(pytester: pytest.Pytester) -> None:
    """The floor cases and two op cases, measured as briefly as pytest-benchmark allows: the saved run holds
    ``op_counts`` as a mapping, ``analysis`` loads it and prints the floor against its prices."""
    saved = pytester.path / "run.json"
    ops = ("np.max(3d,axis,keepdims,out=3d)", "np.copyto(1d,1d)")
    result = pytester.runpytest_subprocess(
        f"{NUMPY_OPS}::test_decode_floor",
        *(f"{NUMPY_OPS}::test_numpy_op[{op}]" for op in ops),
        "--quick",
        "--benchmark-only",
        "--benchmark-min-time=0.00001",
        "--benchmark-max-time=0.001",
        f"--benchmark-json={saved}",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=2 + len(PLANS))
    doc = json.loads(saved.read_text())
    facts = doc[RUN_RECORD_KEY]["facts"]
    for plan in PLANS:  # the floor's reference check, saved with the run
        assert 0 <= facts[f"cpu.decode_floor.reference_error.{plan}"] < REFERENCE_TOLERANCE
    benches = doc["benchmarks"]
    for bench in benches:
        extra = bench["extra_info"]
        assert set(extra) <= {"suite", "case", "device", *CONTRACT} and extra["suite"] == SUITE
        if extra["case"] == "decode_floor":
            assert extra["config"] == FLOOR.name and isinstance(extra["op_counts"], dict)
            assert sum(extra["op_counts"].values()) == extra["n_calls"]
        else:
            assert extra["case"] == "numpy_op" and extra["n_calls"] >= MIN_CALLS
            assert "op_counts" not in extra
    loaded = load_runs([saved], samples=False)
    assert not loaded.problems
    floors = floor_table(loaded.frame)
    assert sorted(floors["plan"]) == sorted(PLANS)
    assert floors["op_sum_s"].isna().all()  # two of the ops measured: no sum that leaves calls out
    assert set(op_costs(loaded.frame)["op"]) == {
        "np.max(3d, axis, keepdims, out=3d)",
        "np.copyto(1d, 1d)",
    }
    lines = summary_lines(loaded.frame)
    assert any(line.startswith(f"  overhead floor: the same call list on {FLOOR.name}") for line in lines)
    assert any("no measured cost for" in line for line in lines)
    assert "launchbench summary" in result.stdout.str()
