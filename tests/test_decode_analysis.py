"""``analysis/decode.py`` and ``analysis/ops.py``: on synthetic frames, predicted bounds equal the model's,
positions, bandwidths, the per-op model; on real saved runs (tests/data), what older runs and the loader
give."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis import ops
from analysis.decode import DECODE_COLUMNS, decode_table, matvec_table
from analysis.decode_text import summary_section, where
from analysis.fits import Fits
from analysis.host import HOST_COLUMNS
from analysis.launch import FIT_COLUMNS, GAP_DEFAULT, GAP_MEASURED, PDL_ASSUMED, PDL_MEASURED
from analysis.load import load_runs
from model.hardware import H200
from model.launch import DEFAULT_EAGER_GAP_S, DEFAULT_PDL_HIDDEN_SHARE, FUSED, UNFUSED, compose, compose_graph
from model.llm import LLAMA32_1B
from model.roofline import decode_step
from model.units import fmt_time

GPU_MACHINE, CPU_MACHINE = "gpu-box / Xeon / NVIDIA H200", "laptop / i7 / no GPU"
LAUNCH_S, SYNC_S, NODE_S, GRAPH_S = 4e-6, 9e-6, 1.2e-6, 8e-6
T0_S, COPY_BPS, TRIAD_BPS = 500e-9, 20e9, 24e9
CTX = 1024
STEP_BYTES = decode_step(LLAMA32_1B, H200, 1, CTX).bytes_total
CPU_BYTES = 382_771_200


def _gpu_step(plan, mode: str, median_s: float) -> dict[str, object]:
    return {
        "machine_id": GPU_MACHINE,
        "gpu_name": "NVIDIA H200",
        "case": "decode_step",
        "device": "cuda",
        "op": "decode_step",
        "plan": plan.name,
        "mode": mode,
        "n_kernels": plan.n_kernels(LLAMA32_1B),
        "bytes": STEP_BYTES,
        "spec_bytes_per_s": H200.mem_bytes_per_s,
        "gpu_time_s": median_s * 0.9,
        "config": LLAMA32_1B.name,
        "batch": 1,
        "ctx": CTX,
        "min": 0.8 * median_s,
        "median": median_s,
    }


def _cpu_step(plan: str, n_calls: int, fastest_s: float, **extra: object) -> dict[str, object]:
    """A CPU decode step row: fastest round ``fastest_s``, median 1.5× that (other work on the machine)."""
    return {
        "machine_id": CPU_MACHINE,
        "gpu_name": None,
        "case": "decode_step",
        "device": "cpu",
        "op": "decode_step",
        "plan": plan,
        "n_calls": n_calls,
        "bytes": CPU_BYTES,
        "config": "tiny-llama-4L-1024",
        "batch": 1,
        "ctx": CTX,
        "min": fastest_s,
        "median": 1.5 * fastest_s,
        **extra,
    }


def _steps() -> pd.DataFrame:
    return pd.DataFrame(
        [
            _gpu_step(UNFUSED, "eager", 1.5e-3),
            _gpu_step(FUSED, "graph", 0.7e-3),
            _cpu_step("unfused", 158, 40e-3),
            _cpu_step("fused", 126, 15e-3),
        ]
    )


def _launch_fits() -> pd.DataFrame:
    values = {
        "launch_s": LAUNCH_S,
        "sync_round_trip_s": SYNC_S,
        "graph_node_s": NODE_S,
        "graph_launch_s": GRAPH_S,
    }
    rows = [
        dict.fromkeys(FIT_COLUMNS, math.nan) | {"machine_id": GPU_MACHINE, "quantity": name, "value_s": value}
        for name, value in values.items()
    ]
    return pd.DataFrame(rows, columns=list(FIT_COLUMNS))


def _fitted(frame: pd.DataFrame) -> Fits:
    """``analysis.fits.fit_all``'s result for ``frame`` with ``_host_fits`` as its CPU fits."""
    empty = pd.DataFrame()
    return Fits(
        host=_host_fits(),
        many_vs_one=empty,
        launch=empty,
        spin=empty,
        decode_demo=empty,
        decode_steps=decode_table(frame, host_fits=_host_fits()),
    )


def _host_fits() -> pd.DataFrame:
    row = dict.fromkeys(HOST_COLUMNS, math.nan) | {
        "machine_id": CPU_MACHINE,
        "t0_s": T0_S,
        "copy_bytes_per_s": COPY_BPS,
        "triad_bytes_per_s": TRIAD_BPS,
    }
    return pd.DataFrame([row], columns=list(HOST_COLUMNS))


def _row(table: pd.DataFrame, plan: str, device: str) -> pd.Series:
    match = table[(table["plan"] == plan) & (table["device"] == device)]
    assert len(match) == 1
    return match.iloc[0]


def test_gpu_bounds_are_the_models() -> None:
    table = decode_table(_steps(), host_fits=_host_fits(), launch_fits=_launch_fits())
    work_s = decode_step(LLAMA32_1B, H200, 1, CTX).t_step
    eager = _row(table, "unfused", "cuda")
    # No gpu_gap_s in these fits: the GPU's gap per kernel is model.launch's documented default.
    composition = compose(work_s, UNFUSED.n_kernels(LLAMA32_1B), LAUNCH_S, DEFAULT_EAGER_GAP_S)
    assert eager["work_s"] == pytest.approx(work_s)
    assert eager["serial_s"] == pytest.approx(composition.serial_s + SYNC_S)
    assert eager["overlapped_s"] == pytest.approx(composition.overlapped_s + SYNC_S)
    assert (eager["gap_s"], eager["gap_from"]) == (DEFAULT_EAGER_GAP_S, GAP_DEFAULT)
    graph = _row(table, "fused", "cuda")
    composition = compose_graph(work_s, FUSED.n_kernels(LLAMA32_1B), NODE_S, GRAPH_S)
    assert graph["serial_s"] == pytest.approx(composition.serial_s)
    assert graph["overlapped_s"] == graph["serial_s"]  # one launch, then a synchronise: a sum
    assert graph["ops_per_step"] == FUSED.n_kernels(LLAMA32_1B) == 131
    assert graph["achieved_bytes_per_s"] == pytest.approx(STEP_BYTES / 0.7e-3)
    assert graph["bandwidth_fraction"] == pytest.approx(STEP_BYTES / 0.7e-3 / H200.mem_bytes_per_s)
    assert math.isnan(graph["position"])  # one figure, no band to place the measurement in
    assert graph["within_bounds"] == (composition.serial_s == 0.7e-3)


def test_a_cpu_step_without_its_call_list_gets_the_seeds_estimate_and_no_prediction() -> None:
    """Runs without a read case or call list: the seed's model at the best host bandwidth of the same run,
    an estimate (another case, another time), never a bound; no overlapped figure on the CPU."""
    table = decode_table(_steps(), host_fits=_host_fits(), launch_fits=_launch_fits())
    row = _row(table, "unfused", "cpu")
    work_s = CPU_BYTES / max(COPY_BPS, TRIAD_BPS)
    assert row["work_s"] == pytest.approx(work_s)
    assert row["serial_s"] == pytest.approx(work_s + 158 * T0_S)
    assert math.isnan(row["overlapped_s"]) and math.isnan(row["predicted_s"]) and math.isnan(row["position"])
    assert row["reference_bytes_per_s"] == TRIAD_BPS
    assert row["bandwidth_from"] == "host_bandwidth triad (no read case in the run)"
    assert row["within_bounds"] is None and where(SimpleNamespace(**row)) == "no prediction"
    assert _row(table, "fused", "cpu")["ops_per_step"] == 126


def test_missing_fits_keep_the_measurement() -> None:
    table = decode_table(_steps(), host_fits=_host_fits().iloc[0:0], launch_fits=_launch_fits().iloc[0:0])
    assert list(table.columns) == list(DECODE_COLUMNS)
    assert table["measured_s"].notna().all()
    assert table["serial_s"].isna().all()
    gpu = _row(table, "fused", "cuda")
    assert gpu["work_s"] == pytest.approx(
        decode_step(LLAMA32_1B, H200, 1, CTX).t_step
    )  # roofline needs no fit


def test_with_the_launch_suites_cases_fitted_in_place() -> None:
    """decode_table(frame) fits the launch suite's rows of the same frame (analysis.launch.fit_launch)."""
    launch_rows = []
    for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024):
        base = {"machine_id": GPU_MACHINE, "gpu_name": "NVIDIA H200", "device": "cuda", "n_kernels": n}
        base |= {"op": "empty_kernel", "data": None}
        launch_rows.append(base | {"case": "launch_batch", "mode": "eager", "median": SYNC_S + n * LAUNCH_S})
        launch_rows.append(base | {"case": "graph_replay", "mode": "graph", "median": GRAPH_S + n * NODE_S})
    frame = pd.concat([_steps(), pd.DataFrame(launch_rows)], ignore_index=True)
    table = decode_table(frame, host_fits=_host_fits())
    expected = decode_table(_steps(), host_fits=_host_fits(), launch_fits=_launch_fits())
    for column in ("serial_s", "overlapped_s", "per_op_s", "fixed_s"):
        pd.testing.assert_series_equal(table[column], expected[column], rtol=1e-6)


def test_matvec_table_and_summary() -> None:
    matvec = {
        "machine_id": GPU_MACHINE,
        "case": "decode_step",
        "device": "cuda",
        "op": "matvec",
        "rows": 128_256,
        "cols": 2048,
        "bytes": 128_256 * 2048 * 2,
        "gpu_time_s": 130e-6,
        "spec_bytes_per_s": H200.mem_bytes_per_s,
        "median": 140e-6,
    }
    frame = pd.concat([_steps(), pd.DataFrame([matvec])], ignore_index=True)
    table = matvec_table(frame)
    assert table["achieved_bytes_per_s"].iloc[0] == pytest.approx(128_256 * 2048 * 2 / 130e-6)
    assert table["bandwidth_fraction"].iloc[0] == pytest.approx(128_256 * 2048 * 2 / 130e-6 / 4.8e12)
    lines = summary_section(frame)
    assert any("Decode step" in line for line in lines)
    assert any("128,256 × 2,048" in line for line in lines)


def test_summary_is_empty_without_decode_cases() -> None:
    other = pd.DataFrame([{"machine_id": CPU_MACHINE, "case": "ufunc_size", "device": "cpu", "op": "np.add"}])
    assert summary_section(other) == []
    assert decode_table(other).empty


def test_cpu_work_uses_the_read_bandwidth_where_it_is_the_highest() -> None:
    read_bps = 30e9  # above copy and triad: a step that only reads streams at the read rate
    host = _host_fits().assign(read_bytes_per_s=read_bps)
    row = _row(decode_table(_steps(), host_fits=host, launch_fits=_launch_fits()), "unfused", "cpu")
    assert row["work_s"] == pytest.approx(CPU_BYTES / read_bps)
    assert row["reference_bytes_per_s"] == read_bps
    assert row["bandwidth_fraction"] == pytest.approx(CPU_BYTES / 40e-3 / read_bps)


# ------------------------------------------------------------------------------------------------------------
# GPU: launch costs from the launch-cost ladder, and the calibrated roofline
# ------------------------------------------------------------------------------------------------------------

#: The ladder's lines (cost per launch = a + b·n_args) and the steps' summed kernel arguments.
LADDER = {"ladder_cupy_s": 3e-6, "ladder_cupy_per_arg_s": 0.2e-6, "ladder_graph_s": 0.9e-6}
LADDER |= {"ladder_graph_per_arg_s": 0.03e-6}
N_ARGS_TOTAL = {"unfused": 1058, "fused": 898}  # what decode_cuda's Llama-3.2-1B steps pass


def _ladder_fits() -> pd.DataFrame:
    rows = [
        dict.fromkeys(FIT_COLUMNS, math.nan) | {"machine_id": GPU_MACHINE, "quantity": name, "value_s": value}
        for name, value in LADDER.items()
    ]
    return pd.concat([_launch_fits(), pd.DataFrame(rows, columns=list(FIT_COLUMNS))], ignore_index=True)


def _steps_with_args() -> pd.DataFrame:
    steps = _steps()
    return steps.assign(n_args_total=steps["plan"].map(N_ARGS_TOTAL).where(steps["device"] == "cuda"))


def test_gpu_decode_prediction_uses_the_ladder_at_the_steps_arguments() -> None:
    table = decode_table(_steps_with_args(), host_fits=_host_fits(), launch_fits=_ladder_fits())
    work_s = decode_step(LLAMA32_1B, H200, 1, CTX).t_step
    eager = _row(table, "unfused", "cuda")
    n = UNFUSED.n_kernels(LLAMA32_1B)
    per_launch_s = LADDER["ladder_cupy_s"] + LADDER["ladder_cupy_per_arg_s"] * N_ARGS_TOTAL["unfused"] / n
    assert eager["per_op_s"] == pytest.approx(per_launch_s, rel=1e-12)
    assert eager["per_op_s"] > LAUNCH_S  # 5.4 arguments per kernel cost more than the 0-argument slope
    composition = compose(work_s, n, per_launch_s, DEFAULT_EAGER_GAP_S)
    assert eager["serial_s"] == pytest.approx(composition.serial_s + SYNC_S)
    assert eager["overlapped_s"] == pytest.approx(composition.overlapped_s + SYNC_S)
    assert eager["per_op_from"] == "ladder (cupy) at 5.4 args/kernel"
    graph = _row(table, "fused", "cuda")
    n = FUSED.n_kernels(LLAMA32_1B)
    per_node_s = LADDER["ladder_graph_s"] + LADDER["ladder_graph_per_arg_s"] * N_ARGS_TOTAL["fused"] / n
    assert graph["per_op_s"] == pytest.approx(per_node_s, rel=1e-12)
    assert graph["serial_s"] == pytest.approx(compose_graph(work_s, n, per_node_s, GRAPH_S).serial_s)
    assert graph["per_op_from"] == "ladder (graph) at 6.9 args/kernel"


def test_without_the_ladder_the_zero_argument_slopes_are_used_and_named() -> None:
    for steps in (_steps(), _steps_with_args()):  # a run without n_args_total, or without the ladder
        fits = _launch_fits() if "n_args_total" in steps else _ladder_fits()
        table = decode_table(steps, host_fits=_host_fits(), launch_fits=fits)
        assert _row(table, "unfused", "cuda")["per_op_s"] == LAUNCH_S
        assert _row(table, "unfused", "cuda")["per_op_from"] == "launch_batch slope (0 args)"
        assert _row(table, "fused", "cuda")["per_op_from"] == "graph_replay slope (0 args)"
        assert pd.isna(_row(table, "fused", "cpu")["per_op_from"])


def _matvec(rows: int, cols: int, per_kernel_s: float, n_kernels: int = 32) -> dict[str, object]:
    return {
        "machine_id": GPU_MACHINE,
        "case": "decode_step",
        "device": "cuda",
        "op": "matvec",
        "rows": rows,
        "cols": cols,
        "n_kernels": n_kernels,
        "bytes": n_kernels * rows * cols * 2,
        "gpu_time_s": n_kernels * per_kernel_s,
        "spec_bytes_per_s": H200.mem_bytes_per_s,
        "median": n_kernels * per_kernel_s * 1.1,
    }


def test_calibrated_roofline_beside_the_datasheet_one() -> None:
    """The calibrated bandwidth is the largest shape's (4.1 TB/s here), not the fastest shape's."""
    largest = _matvec(128_256, 2048, 128_256 * 2048 * 2 / 4.1e12)
    faster_small = _matvec(3072, 2048, 3072 * 2048 * 2 / 4.5e12)
    frame = pd.concat([_steps_with_args(), pd.DataFrame([largest, faster_small])], ignore_index=True)
    matvec = matvec_table(frame)
    assert sorted(matvec["matrix_bytes"]) == [3072 * 2048 * 2, 128_256 * 2048 * 2]
    assert (matvec["n_kernels"] == 32).all()
    assert sorted(matvec["achieved_bytes_per_s"]) == pytest.approx([4.1e12, 4.5e12])
    table = decode_table(frame, host_fits=_host_fits(), launch_fits=_ladder_fits())
    eager = _row(table, "unfused", "cuda")
    assert eager["calibrated_bytes_per_s"] == pytest.approx(4.1e12)
    calibrated = decode_step(LLAMA32_1B, dataclasses.replace(H200, mem_bytes_per_s=4.1e12), 1, CTX).t_step
    assert eager["calibrated_work_s"] == pytest.approx(calibrated)
    assert eager["work_s"] == pytest.approx(decode_step(LLAMA32_1B, H200, 1, CTX).t_step)  # datasheet kept
    assert eager["calibrated_serial_s"] == pytest.approx(calibrated + (eager["serial_s"] - eager["work_s"]))
    assert eager["calibrated_position"] < eager["position"]  # a lower bandwidth moves both bounds up
    assert pd.isna(_row(table, "fused", "cpu")["calibrated_work_s"])
    text = "\n".join(summary_section(frame))
    assert "against the calibrated roofline, an estimate, not a bound" in text and "4.10 TB/s" in text
    assert f"work: the roofline on {H200.name} (datasheet)" in text


def test_a_run_without_matvec_has_no_calibrated_roofline() -> None:
    table = decode_table(_steps_with_args(), host_fits=_host_fits(), launch_fits=_ladder_fits())
    assert table["calibrated_work_s"].isna().all()
    assert "calibrated roofline" not in "\n".join(summary_section(_steps_with_args()))


# --- the CPU's per-op model, the overhead floor, one statistic (synthetic frames, labelled as such) ---

OP_COSTS_S = {"np.matmul(2d, 1d, out=1d)": 0.9e-6, "np.add(1d, 1d, out=1d)": 0.4e-6, "np.max(3d, axis)": 2e-6}
STEP_COUNTS = {"np.matmul(2d, 1d, out=1d)": 30, "np.add(1d, 1d, out=1d)": 20, "np.max(3d, axis)": 4}
ATTENTION_COUNTS = {"np.max(3d, axis)": 4, "np.add(1d, 1d, out=1d)": 4}
KV_BYTES, ATTENTION_S, FLOOR_S = 8_388_608, 1.2e-3, 130e-6
#: The floor's remainder: its Python work between the calls (floor − its calls at their ops' costs).
FLOOR_LEFT_S = FLOOR_S - sum(count * OP_COSTS_S[op] for op, count in STEP_COUNTS.items())


def _cpu_case(case: str, op: str, fastest_s: float, **coords: object) -> dict[str, object]:
    return {"machine_id": CPU_MACHINE, "case": case, "device": "cpu", "op": op, "min": fastest_s} | coords


def _per_op_frame(*, attention: bool = True, costs: dict[str, float] = OP_COSTS_S) -> pd.DataFrame:
    """Synthetic: the unfused step with its call list, each op's cost, the attention term and the floor."""
    calls = sum(STEP_COUNTS.values())
    rows = [_cpu_step("unfused", calls, 20e-3, op_counts=dict(STEP_COUNTS))]
    rows += [_cpu_case("numpy_op", op, 64 * cost, n_calls=64) for op, cost in costs.items()]
    floor = {
        "plan": "unfused",
        "config": "floor-4L",
        "ctx": 16,
        "n_calls": calls,
        "op_counts": dict(STEP_COUNTS),
    }
    rows.append(_cpu_case("decode_floor", "decode_step", FLOOR_S, **floor))
    if attention:
        coords = {"plan": "unfused", "config": "tiny-llama-4L-1024", "ctx": CTX, "bytes": KV_BYTES}
        rows.append(
            _cpu_case(
                "decode_step", "attention", ATTENTION_S, n_calls=8, op_counts=ATTENTION_COUNTS, **coords
            )
        )
    return pd.DataFrame(rows)


def test_cpu_prediction_prices_the_actual_call_list_from_other_cases_only() -> None:
    row = _row(decode_table(_per_op_frame(), host_fits=_host_fits()), "unfused", "cpu")
    outside = 30 * OP_COSTS_S["np.matmul(2d, 1d, out=1d)"] + 16 * OP_COSTS_S["np.add(1d, 1d, out=1d)"]
    assert row["predicted_calls_s"] == pytest.approx(outside)  # attention's calls are in its own term
    assert row["attention_s"] == ATTENTION_S and row["attention_bytes"] == KV_BYTES
    expected = (CPU_BYTES - KV_BYTES) / TRIAD_BPS + ATTENTION_S + outside + FLOOR_LEFT_S
    assert row["predicted_s"] == pytest.approx(expected)
    assert row["predicted_weights_s"] == pytest.approx((CPU_BYTES - KV_BYTES) / TRIAD_BPS)
    assert row["measured_over_predicted"] == pytest.approx(20e-3 / expected)
    # the interval: from the terms' run-to-run spreads (one run), around the estimate, on the log scale
    assert row["predicted_low_s"] < row["predicted_s"] < row["predicted_high_s"]
    assert row["predicted_s"] ** 2 == pytest.approx(row["predicted_low_s"] * row["predicted_high_s"])
    assert row["ratio_low"] < row["measured_over_predicted"] < row["ratio_high"]
    assert math.isnan(row["check_s"])  # no probe in this run: no consistency check
    assert row["serial_s"] == pytest.approx(CPU_BYTES / TRIAD_BPS + 54 * T0_S)  # the seed's model beside it
    assert row["floor_s"] == FLOOR_S and row["unpriced_ops"] == ()


def test_cpu_step_is_held_against_its_fastest_round_and_the_gpu_against_its_median() -> None:
    """Issue 10: predictions from best-case figures (t0, best bandwidth) never against a median step."""
    table = decode_table(_steps(), host_fits=_host_fits(), launch_fits=_launch_fits())
    cpu, gpu = _row(table, "unfused", "cpu"), _row(table, "unfused", "cuda")
    assert (cpu["statistic"], cpu["measured_s"]) == ("min", 40e-3)  # its median is 60 ms
    assert (gpu["statistic"], gpu["measured_s"]) == ("median", 1.5e-3)
    frame = _per_op_frame()
    row = _row(decode_table(frame, host_fits=_host_fits()), "unfused", "cpu")
    lines = summary_section(frame, _fitted(frame))
    assert any("every time is its case's fastest round (min)" in line for line in lines)
    ratio = f"{20e-3 / row['predicted_s']:.2f}×"  # the prediction's ratio, on the fastest round (20 ms)
    assert any(line.lstrip().startswith("unfused") and ratio in line for line in lines), ratio


def test_without_an_attention_term_its_bytes_go_at_the_bandwidth_and_the_summary_says_so() -> None:
    frame = _per_op_frame(attention=False)
    row = _row(decode_table(frame, host_fits=_host_fits()), "unfused", "cpu")
    all_calls = sum(count * OP_COSTS_S[op] for op, count in STEP_COUNTS.items())
    assert math.isnan(row["attention_s"])
    assert row["predicted_s"] == pytest.approx(CPU_BYTES / TRIAD_BPS + all_calls + FLOOR_LEFT_S)
    lines = summary_section(frame, _fitted(frame))
    assert any("attention: not measured in this run" in line for line in lines)


def test_an_op_without_a_measured_cost_gives_no_prediction_and_is_named() -> None:
    costs = {op: cost for op, cost in OP_COSTS_S.items() if op != "np.matmul(2d, 1d, out=1d)"}
    frame = _per_op_frame(costs=costs)
    row = _row(decode_table(frame, host_fits=_host_fits()), "unfused", "cpu")
    assert math.isnan(row["predicted_s"]) and row["unpriced_ops"] == ("np.matmul(2d, 1d, out=1d)",)
    lines = summary_section(frame, _fitted(frame))
    assert any("no measured cost for np.matmul(2d, 1d, out=1d)" in line for line in lines)


def test_the_floor_is_paired_by_the_same_call_list_only() -> None:
    frame = _per_op_frame()
    other = frame["case"] == "decode_floor"
    frame.loc[other, "op_counts"] = [{"np.add(1d, 1d, out=1d)": 54}]
    assert math.isnan(_row(decode_table(frame, host_fits=_host_fits()), "unfused", "cpu")["floor_s"])


def test_floor_table_prices_the_floor_both_ways() -> None:
    floors = ops.floor_table(_per_op_frame(), {CPU_MACHINE: T0_S})
    (floor,) = floors.itertuples(index=False)
    priced = sum(count * OP_COSTS_S[op] for op, count in STEP_COUNTS.items())
    assert floor.op_sum_s == pytest.approx(priced)
    assert floor.t0_sum_s == pytest.approx(54 * T0_S)
    assert floor.left_out_s == pytest.approx(FLOOR_S - priced)
    costs = ops.op_costs(_per_op_frame())
    assert dict(zip(costs["op"], costs["cost_s"], strict=True)) == pytest.approx(OP_COSTS_S)


# --- the CPU step's lower bound from its own probe, measured in the same rounds ---

PROBE_BYTES = CPU_BYTES - KV_BYTES - 100_000  # every weight matrix; not the cache, norms, embedding row
PROBE_COUNTS = {"np.matmul(2d, 1d, out=1d)": 30}
PROBE_S = (15e-3, 14.2e-3, 14e-3, 16e-3, 14.5e-3, 14.1e-3)


def _probe_frame(fastest_s: float, *, llc_bytes: float = 32 * 2**20) -> pd.DataFrame:
    """``_per_op_frame`` with the probe's rounds and the machine's LLC recorded, the step at ``fastest_s``."""
    frame = _per_op_frame()
    step = frame["op"] == "decode_step"
    step &= frame["case"] == "decode_step"
    frame.loc[step, "min"] = fastest_s
    frame["probe_s"] = [PROBE_S if is_step else math.nan for is_step in step]
    frame["probe_op_counts"] = [dict(PROBE_COUNTS) if is_step else math.nan for is_step in step]
    frame["probe_bytes"] = [PROBE_BYTES if is_step else math.nan for is_step in step]
    frame["llc_bytes"] = llc_bytes
    return frame


def _with_step_rounds(frame: pd.DataFrame, rounds: tuple[float, ...]) -> pd.DataFrame:
    """``frame`` with the step's rounds (``data``), one after each probe round of ``PROBE_S``."""
    step = (frame["op"] == "decode_step") & (frame["case"] == "decode_step")
    frame["data"] = [np.array(rounds) if is_step else None for is_step in step]
    return frame


def test_the_consistency_check_and_the_probe_estimate_come_from_the_steps_own_rounds() -> None:
    row = _row(decode_table(_probe_frame(20e-3), host_fits=_host_fits()), "unfused", "cpu")
    probe_calls = 30 * OP_COSTS_S["np.matmul(2d, 1d, out=1d)"]
    assert row["probe_s"] == min(PROBE_S) and row["probe_rounds"] == len(PROBE_S)
    assert row["probe_estimate_s"] == pytest.approx(min(PROBE_S) + FLOOR_S - probe_calls)
    assert row["probe_bytes_per_s"] == pytest.approx(PROBE_BYTES / min(PROBE_S))
    assert row["probe_median_bytes_per_s"] == pytest.approx(PROBE_BYTES / float(pd.Series(PROBE_S).median()))
    # the prediction never reads the probe: the read case's (here triad's) bandwidth
    assert row["reference_bytes_per_s"] == TRIAD_BPS and math.isnan(row["overlapped_s"])
    assert row["within_bounds"] is None
    # the check: the bytes at the probe's bandwidth; the probe's calls are in its time, not priced again
    bandwidth = PROBE_BYTES / min(PROBE_S)
    outside = 20 * OP_COSTS_S["np.add(1d, 1d, out=1d)"] - 4 * OP_COSTS_S["np.add(1d, 1d, out=1d)"]
    expected = (CPU_BYTES - KV_BYTES) / bandwidth + ATTENTION_S + outside + FLOOR_LEFT_S
    assert row["op_calls_s"] == pytest.approx(outside) and row["check_s"] == pytest.approx(expected)
    text = "\n".join(summary_section(_probe_frame(20e-3), _fitted(_probe_frame(20e-3))))
    assert "consistency check = " in text and "not a prediction" in text
    assert "an estimate, not a bound" in text and "cache-resident" not in text
    assert f"[{fmt_time(row['predicted_low_s'])} – {fmt_time(row['predicted_high_s'])}]" in text


def test_the_probe_estimate_is_held_round_by_round_and_the_rounds_below_it_counted() -> None:
    """Issue 30: each step round against the probe round before it plus the floor's work outside the
    probe's calls; a round faster than that is counted (the probe's rounds are noisy too)."""
    outside = FLOOR_S - 30 * OP_COSTS_S["np.matmul(2d, 1d, out=1d)"]
    rounds = (*(p + outside + 1e-3 for p in PROBE_S[:-1]), PROBE_S[-1] + outside - 1e-4)
    frame = _with_step_rounds(_probe_frame(min(rounds)), rounds)
    row = _row(decode_table(frame, host_fits=_host_fits()), "unfused", "cpu")
    assert (row["rounds_below"], row["rounds_paired"]) == (1, len(PROBE_S))
    assert any("1 of 6" in line for line in summary_section(frame, _fitted(frame)))
    two = _with_step_rounds(_probe_frame(min(rounds)), rounds)
    both = _row(
        decode_table(pd.concat([frame, two], ignore_index=True), host_fits=_host_fits()), "unfused", "cpu"
    )
    assert (both["rounds_below"], both["rounds_paired"]) == (2, 12)  # summed over runs, not a median


def test_a_step_under_twice_the_llc_is_labelled_cache_resident() -> None:
    frame = _probe_frame(20e-3, llc_bytes=273e6)  # 383 MB < 2 × 273 MB
    row = _row(decode_table(frame, host_fits=_host_fits()), "unfused", "cpu")
    assert row["cache_resident"] and row["llc_bytes"] == 273e6
    assert any("cache-resident" in line for line in summary_section(frame, _fitted(frame)))
    big = _row(decode_table(_probe_frame(20e-3, llc_bytes=150e6), host_fits=_host_fits()), "unfused", "cpu")
    assert not big["cache_resident"]


def test_several_runs_of_a_step_give_the_median_of_their_figures() -> None:
    one = _probe_frame(20e-3)
    two = _probe_frame(22e-3)
    slower = tuple(2 * t for t in PROBE_S)
    two["probe_s"] = [slower if isinstance(value, tuple) else value for value in two["probe_s"]]
    row = _row(
        decode_table(pd.concat([one, two], ignore_index=True), host_fits=_host_fits()), "unfused", "cpu"
    )
    assert row["runs"] == 2 and row["measured_s"] == pytest.approx(21e-3)
    assert row["probe_s"] == pytest.approx(1.5 * min(PROBE_S))


def test_a_call_list_part_must_be_within_the_whole() -> None:
    assert ops.subtract_counts(STEP_COUNTS, ATTENTION_COUNTS)["np.max(3d, axis)"] == 0
    with pytest.raises(ValueError, match=r"np\.exp"):
        ops.subtract_counts(STEP_COUNTS, {"np.exp(1d, out=1d)": 1})


# --- real saved runs (tests/data), altered in the test where said ---

SAVED_RUN = Path(__file__).resolve().parent / "data" / "cpu-2core-epyc-full.json"


def test_a_run_saved_before_call_lists_keeps_the_seeds_model_at_its_fastest_round() -> None:
    frame = load_runs([SAVED_RUN], samples=False).frame
    table = decode_table(frame)
    steps = frame[(frame["case"] == "decode_step") & (frame["op"] == "decode_step")].set_index("plan")
    for row in table.itertuples(index=False):
        assert row.statistic == "min" and row.measured_s == steps.loc[row.plan, "min"]
        assert math.isfinite(row.serial_s) and math.isnan(row.predicted_s)


def test_a_saved_call_list_loads_as_a_mapping_and_unmeasured_ops_are_named(tmp_path: Path) -> None:
    """The saved EPYC run with an ``op_counts`` mapping written into its decode steps (as the suite saves it
    now): the loader keeps the mapping, and with no ``numpy_op`` case in that run every op is unpriced."""
    doc = json.loads(SAVED_RUN.read_text(encoding="utf-8"))
    for bench in doc["benchmarks"]:
        if bench["extra_info"]["case"] == "decode_step":
            bench["extra_info"]["op_counts"] = dict(STEP_COUNTS)
    altered = tmp_path / "with-op-counts.json"
    altered.write_text(json.dumps(doc), encoding="utf-8")
    loaded = load_runs([altered], samples=False)
    assert not loaded.problems
    steps = loaded.frame[loaded.frame["case"] == "decode_step"]
    assert all(counts == STEP_COUNTS for counts in steps["op_counts"])
    table = decode_table(loaded.frame)
    assert all(row.unpriced_ops == tuple(sorted(STEP_COUNTS)) for row in table.itertuples(index=False))
    assert any(
        "no measured cost for np.add(1d, 1d, out=1d)" in line for line in summary_section(loaded.frame)
    )


# A GPU the datasheet table does not hold, with the attributes an RTX 4090 reports (model.hardware's derive
# docstring): 10,501 MHz × 384 bits → 1,008 GB/s.
UNLISTED_ATTRIBUTES = (
    ("memory_clock_hz", 10_501_000_000),
    ("memory_bus_width_bits", 384),
    ("sm_count", 128),
    ("sm_clock_rate_hz", 2_520_000_000),
    ("compute_capability", "8.9"),
    ("memory_bytes", 25_757_220_864),
)


@pytest.mark.parametrize(
    ("gpu_name", "attributes", "expected_bytes_per_s", "spec_from"),
    [
        ("NVIDIA Future GPU", UNLISTED_ATTRIBUTES, 10_501e6 * 384 / 8 * 2, "derived from device attributes"),
        ("NVIDIA H200 MIG 3g.71gb", (), H200.mem_bytes_per_s * 4 / 8, "MIG slice"),
        ("NVIDIA Future GPU", (), math.nan, "not in the datasheet table and no device attributes"),
    ],
)
def test_gpu_spec_for_devices_outside_the_table(
    gpu_name: str, attributes: tuple, expected_bytes_per_s: float, spec_from: str
) -> None:
    """A GPU outside the datasheet table gets the roofline of the spec its recorded attributes give, a MIG
    slice its share of the whole GPU; one without either keeps its measurement, NaN bounds and the reason."""
    step = _gpu_step(UNFUSED, "eager", 1.5e-3) | {"gpu_name": gpu_name, "gpu_attributes": attributes}
    table = decode_table(pd.DataFrame([step]), host_fits=_host_fits(), launch_fits=_launch_fits())
    row = _row(table, "unfused", "cuda")
    assert spec_from in row["spec_from"]
    assert row["measured_s"] == pytest.approx(1.5e-3)
    text = "\n".join(summary_section(pd.DataFrame([step])))
    if math.isnan(expected_bytes_per_s):
        assert math.isnan(row["work_s"]) and math.isnan(row["serial_s"])
        assert f"no roofline: GPU {gpu_name!r} is not in the datasheet table" in text
        return
    assert f"work: the roofline on {row['spec_from']}" in text
    assert row["reference_bytes_per_s"] == pytest.approx(expected_bytes_per_s)
    assert row["work_s"] == pytest.approx(STEP_BYTES / expected_bytes_per_s)
    assert row["serial_s"] > row["work_s"]


def test_the_loader_carries_the_gpu_attributes(tmp_path: Path) -> None:
    """``gpu_attributes`` in the loaded frame are the recorded ``ATTRIBUTE_KEYS``; odd values are left out."""
    from analysis.load import machine_identity

    gpu = dict(UNLISTED_ATTRIBUTES) | {"name": "NVIDIA Future GPU", "sm_count": [128], "pci_bus_id": "0:1"}
    identity = machine_identity({"launchbench": {"gpu": gpu}})
    assert dict(identity["gpu_attributes"]) == dict(UNLISTED_ATTRIBUTES[:2] + UNLISTED_ATTRIBUTES[3:])
    assert machine_identity({"launchbench": {"gpu": None}})["gpu_attributes"] == ()


def test_a_step_past_the_models_context_has_no_roofline_and_says_why() -> None:
    step = _gpu_step(UNFUSED, "eager", 1.5e-3) | {"ctx": LLAMA32_1B.max_position_embeddings + 1}
    row = _row(
        decode_table(pd.DataFrame([step]), host_fits=_host_fits(), launch_fits=_launch_fits()),
        "unfused",
        "cuda",
    )
    assert math.isnan(row["work_s"]) and row["measured_s"] == pytest.approx(1.5e-3)
    assert row["spec_from"].startswith(f"{H200.name} (datasheet), no roofline: ")
    assert "exceeds Llama-3.2-1B's max_position_embeddings" in row["spec_from"]


def _fits_with(values: dict[str, float]) -> pd.DataFrame:
    """``_launch_fits`` with the fitted ``values`` added (quantity -> seconds)."""
    rows = [
        dict.fromkeys(FIT_COLUMNS, math.nan) | {"machine_id": GPU_MACHINE, "quantity": name, "value_s": value}
        for name, value in values.items()
    ]
    return pd.concat([_launch_fits(), pd.DataFrame(rows, columns=list(FIT_COLUMNS))], ignore_index=True)


def test_gpu_eager_uses_the_gap_its_run_measured() -> None:
    """g = the same run's gpu_gap_s where fitted: eager overlapped max(work + n·g, n·launch) + sync, serial
    work + n·(launch + g) + sync."""
    gap_s = 2.5e-6
    table = decode_table(_steps(), host_fits=_host_fits(), launch_fits=_fits_with({"gpu_gap_s": gap_s}))
    eager = _row(table, "unfused", "cuda")
    work_s, n = decode_step(LLAMA32_1B, H200, 1, CTX).t_step, UNFUSED.n_kernels(LLAMA32_1B)
    assert eager["overlapped_s"] == pytest.approx(max(work_s + n * gap_s, n * LAUNCH_S) + SYNC_S)
    assert eager["serial_s"] == pytest.approx(work_s + n * (LAUNCH_S + gap_s) + SYNC_S)
    assert (eager["gap_s"], eager["gap_from"]) == (gap_s, GAP_MEASURED)


def test_gpu_steps_carry_a_pdl_prediction_assumed_or_measured() -> None:
    work_s = decode_step(LLAMA32_1B, H200, 1, CTX).t_step
    assumed = decode_table(_steps(), host_fits=_host_fits(), launch_fits=_launch_fits())
    graph = _row(assumed, "fused", "cuda")
    n = FUSED.n_kernels(LLAMA32_1B)
    pdl_node_s = NODE_S * (1 - DEFAULT_PDL_HIDDEN_SHARE)
    assert (
        graph["pdl_serial_s"] == graph["pdl_overlapped_s"] == pytest.approx(GRAPH_S + work_s + n * pdl_node_s)
    )
    assert graph["pdl_from"] == PDL_ASSUMED
    eager = _row(assumed, "unfused", "cuda")
    assert eager["pdl_serial_s"] < eager["serial_s"]
    measured = decode_table(
        _steps(),
        host_fits=_host_fits(),
        launch_fits=_fits_with({"pdl_graph_node_s": 0.4e-6, "pdl_plain_graph_node_s": 1.0e-6}),
    )
    graph = _row(measured, "fused", "cuda")
    assert graph["pdl_serial_s"] == pytest.approx(GRAPH_S + work_s + n * NODE_S * 0.4)
    assert graph["pdl_from"] == PDL_MEASURED
    text = "\n".join(summary_section(_steps()))
    assert "with PDL" in text


@pytest.mark.parametrize("dof", [1, 2, 3, 7, 30, 1000])
@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_the_law_intervals_t_quantile_is_scipy_stats_own(dof: int, level: float) -> None:
    import scipy.special
    import scipy.stats

    assert scipy.special.stdtrit(dof, 0.5 + level / 2) == scipy.stats.t.ppf(0.5 + level / 2, dof)


def test_the_prediction_reads_the_weights_at_the_probe_cases_bandwidth_where_the_run_has_it() -> None:
    """Issue 30: the step's matrix-vector products timed as a case of their own (``op == "probe"``, apart
    from the step's rounds) give the prediction's bandwidth; the read case stays beside it."""
    frame = _probe_frame(20e-3)
    probe_case_s = 16e-3
    coords = {"plan": "unfused", "config": "tiny-llama-4L-1024", "ctx": CTX, "bytes": PROBE_BYTES}
    case = _cpu_case("decode_step", "probe", probe_case_s, op_counts=dict(PROBE_COUNTS), **coords)
    with_case = pd.concat([frame, pd.DataFrame([case])], ignore_index=True)
    host = _host_fits().assign(read_bytes_per_s=30e9)
    row = _row(decode_table(with_case, host_fits=host), "unfused", "cpu")
    bandwidth = PROBE_BYTES / probe_case_s
    assert row["bandwidth_from"] == "probe case" and row["reference_bytes_per_s"] == pytest.approx(bandwidth)
    assert row["read_bytes_per_s"] == 30e9
    assert row["predicted_weights_s"] == pytest.approx((CPU_BYTES - KV_BYTES) / bandwidth)
    without = _row(decode_table(frame, host_fits=host), "unfused", "cpu")
    assert without["bandwidth_from"] == "host_bandwidth read" and without["reference_bytes_per_s"] == 30e9
