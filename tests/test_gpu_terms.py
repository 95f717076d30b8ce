"""model/gpu_terms.py and analysis/gpu_terms.py: the GPU terms beyond the roofline (achievable bandwidth, a
per-kernel ramp, eager and graph gaps), each from its source; the step estimated with them; and a GPU run's
own figures replacing the sourced defaults for its machine (synthetic frames)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.decode import decode_table, matvec_table
from analysis.decode_text import summary_section
from analysis.fits import Fits, fit_all
from analysis.gpu_terms import MIN_SHAPES, machine_terms
from analysis.host import HOST_COLUMNS
from analysis.launch import FIT_COLUMNS
from analysis.load import SUITE, load_runs
from analysis.report import write_report
from analysis.runs import select_runs
from model.gpu_terms import (
    ACHIEVABLE_BANDWIDTH,
    DATASHEET_BANDWIDTH,
    DEFAULT_RAMP_S,
    GpuTerms,
    achievable_work_s,
    default_terms,
    estimate_step,
)
from model.hardware import A100_SXM_80GB, H100_PCIE, H100_SXM, H200
from model.launch import DEFAULT_EAGER_GAP_S, DEFAULT_GRAPH_GAP_S, FUSED, UNFUSED, compose, compose_graph
from model.llm import LLAMA32_1B
from model.roofline import decode_step
from model.units import fmt_time
from tests.test_decode_analysis import GPU_MACHINE as MACHINE
from tests.test_decode_analysis import _gpu_step
from tests.test_decode_analysis import _matvec as _matvec_row
from tests.test_report import synthetic_gpu_run

STEP = decode_step(LLAMA32_1B, H100_SXM, 1, 1024)


def test_achievable_bandwidth_is_each_sources_figure_over_its_datasheet() -> None:
    """FlashMLA's 3,000 GB/s on an H800 SXM5 (the H100 SXM's 3.35 TB/s HBM3), gpu-benches' read kernel at
    1,942 GB/s on an H100 PCIe, gpt-fast's 1,700 GB/s on an A100 80GB; no other GPU has one."""
    expected = {H100_SXM: 3.0e12, H100_PCIE: 1.942e12, A100_SXM_80GB: 1.7e12}
    for spec, bytes_per_s in expected.items():
        terms = default_terms(spec)
        assert terms.bandwidth_fraction * spec.mem_bytes_per_s == pytest.approx(bytes_per_s)
        assert terms.bandwidth_from == ACHIEVABLE_BANDWIDTH[spec.name].source
    assert set(ACHIEVABLE_BANDWIDTH) == {spec.name for spec in expected}
    h200 = default_terms(H200)
    assert (h200.bandwidth_fraction, h200.bandwidth_from) == (1.0, DATASHEET_BANDWIDTH)


def test_default_ramp_and_gaps_are_their_sources_figures() -> None:
    terms = default_terms(H100_SXM)
    assert terms.ramp_s == pytest.approx(375e-9, rel=1e-3) == DEFAULT_RAMP_S  # 658 cycles at 1,755 MHz
    assert (
        (terms.eager_gap_s, terms.graph_gap_s)
        == (DEFAULT_EAGER_GAP_S, DEFAULT_GRAPH_GAP_S)
        == (2.1e-6, 1.3e-6)
    )
    assert (terms.gap_s("eager"), terms.gap_s("megakernel"), terms.gap_s("graph")) == (2.1e-6, 2.1e-6, 1.3e-6)


def test_achievable_work_is_the_bytes_at_the_fraction_never_below_the_roofline() -> None:
    work_s = achievable_work_s(STEP, H100_SXM, 0.8)
    assert work_s == pytest.approx(STEP.bytes_total / (0.8 * 3.35e12))
    assert achievable_work_s(STEP, H100_SXM, 1.0) == pytest.approx(STEP.t_step)
    assert work_s > STEP.t_step


def test_a_small_kernel_does_not_reach_the_bandwidth() -> None:
    """The ramp: a kernel of b bytes takes ramp + b / bandwidth, so its effective rate b / t rises with b and
    stays below the bandwidth; half of it at b = ramp × bandwidth."""
    terms = default_terms(H100_SXM)
    bandwidth = terms.bandwidth_fraction * H100_SXM.mem_bytes_per_s
    rates = [b / (terms.ramp_s + b / bandwidth) for b in (1e5, 1e6, 1e7, 1e8, 1e9)]
    assert rates == sorted(rates) and all(rate < bandwidth for rate in rates)
    half = terms.ramp_s * bandwidth
    assert half / (terms.ramp_s + half / bandwidth) == pytest.approx(bandwidth / 2)


@pytest.mark.parametrize("plan", [FUSED, UNFUSED])
def test_estimate_step_composes_as_model_launch_does(plan) -> None:
    terms = default_terms(H100_SXM)
    n, launch_s = plan.n_kernels(LLAMA32_1B), 4e-6
    work_s = achievable_work_s(STEP, H100_SXM, terms.bandwidth_fraction)
    eager = estimate_step(STEP, H100_SXM, terms, "eager", n, launch_s)
    expected = compose(work_s, n, launch_s, terms.eager_gap_s + terms.ramp_s)
    assert (eager.step_s, eager.no_overlap_s) == pytest.approx((expected.overlapped_s, expected.serial_s))
    assert eager.host_s == pytest.approx(n * launch_s) and eager.gpu_s == pytest.approx(
        expected.t_gpu_s + n * (2.1e-6 + terms.ramp_s)
    )
    graph = estimate_step(STEP, H100_SXM, terms, "graph", n, launch_s)
    expected_graph = compose_graph(work_s, n, terms.graph_gap_s + terms.ramp_s, launch_s)
    assert graph.step_s == graph.no_overlap_s == pytest.approx(expected_graph.serial_s)
    assert graph.step_s < eager.step_s  # a graph node's gap is the smaller: graphs gain
    mega = estimate_step(STEP, H100_SXM, terms, "megakernel", 1, launch_s)
    assert mega.step_s == pytest.approx(work_s + terms.eager_gap_s + terms.ramp_s)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda t: estimate_step(STEP, H100_SXM, t, "megakernel", 2, 2e-6), "a megakernel is 1 kernel"),
        (lambda t: estimate_step(STEP, H100_SXM, t, "pdl", 2, 2e-6), "mode must be one of"),
        (lambda t: dataclasses.replace(t, bandwidth_fraction=1.2), "bandwidth_fraction must be in"),
        (lambda t: dataclasses.replace(t, bandwidth_fraction=0.0), "bandwidth_fraction must be in"),
        (lambda t: dataclasses.replace(t, ramp_s=-1e-9), "ramp_s must be"),
        (lambda t: dataclasses.replace(t, graph_gap_s=math.nan), "graph_gap_s must be"),
    ],
)
def test_bad_terms_or_modes_name_the_field(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call(default_terms(H100_SXM))


# --- analysis/gpu_terms.py: a run's own figures replace the defaults (synthetic frames) ---------------------

#: The line the synthetic matvec times lie on: 2.9 µs per kernel (gap + ramp) + bytes at 4.3 TB/s.
INTERCEPT_S, BANDWIDTH = 2.9e-6, 4.3e12
#: Llama-3.2-1B's five matvec shapes (benchmarks/test_decode_step.py).
SHAPES = [(3072, 2048), (2048, 2048), (16_384, 2048), (2048, 8192), (128_256, 2048)]


def _matvec(rows: int, cols: int) -> dict[str, object]:
    """A matvec case whose time per kernel lies on the line INTERCEPT_S + bytes / BANDWIDTH."""
    return _matvec_row(rows, cols, INTERCEPT_S + rows * cols * 2 / BANDWIDTH)


def _fits(values: dict[str, float]) -> pd.DataFrame:
    rows = [
        dict.fromkeys(FIT_COLUMNS, math.nan) | {"machine_id": MACHINE, "quantity": name, "value_s": value}
        for name, value in values.items()
    ]
    return pd.DataFrame(rows, columns=list(FIT_COLUMNS))


def test_a_run_with_matvec_and_gaps_replaces_every_default() -> None:
    matvec = matvec_table(pd.DataFrame([_matvec(*shape) for shape in SHAPES]))
    terms = machine_terms(matvec, _fits({"gpu_gap_s": 2.4e-6, "graph_node_s": 1.1e-6}), MACHINE, H200)
    assert terms.bandwidth_fraction * H200.mem_bytes_per_s == pytest.approx(BANDWIDTH, rel=1e-9)
    assert terms.ramp_s == pytest.approx(INTERCEPT_S - 2.4e-6, rel=1e-6)  # the intercept less the run's gap
    assert (terms.eager_gap_s, terms.graph_gap_s) == (2.4e-6, 1.1e-6)
    assert terms.bandwidth_from.startswith("the same run's matvec line over 5 shapes: 4.30 TB/s, 89.6%")
    assert "gpu_gap_s of the same run" in terms.gap_from and "graph_node_s of the same run" in terms.gap_from
    assert "intercept 2.90 µs less the eager gap" in terms.ramp_from


def test_without_a_measured_gap_the_ramp_is_the_intercept_less_the_default_gap() -> None:
    matvec = matvec_table(pd.DataFrame([_matvec(*shape) for shape in SHAPES]))
    terms = machine_terms(matvec, _fits({}), MACHINE, H200)
    assert terms.ramp_s == pytest.approx(INTERCEPT_S - DEFAULT_EAGER_GAP_S, rel=1e-6)
    assert terms.gap_from == default_terms(H200).gap_from


def test_too_few_shapes_or_a_line_above_the_datasheet_keep_the_defaults_and_say_why() -> None:
    few = matvec_table(pd.DataFrame([_matvec(*shape) for shape in SHAPES[: MIN_SHAPES - 1]]))
    terms = machine_terms(few, _fits({}), MACHINE, H200)
    sourced = default_terms(H200)
    assert (terms.bandwidth_fraction, terms.ramp_s) == (sourced.bandwidth_fraction, sourced.ramp_s)
    assert "2 matvec shapes measured, 3 needed for a line" in terms.bandwidth_from
    fast = matvec_table(pd.DataFrame([_matvec(*shape) for shape in SHAPES]))
    slower_spec = dataclasses.replace(H200, mem_bytes_per_s=3e12)  # the line's 4.3 TB/s is above it
    terms = machine_terms(fast, _fits({}), MACHINE, slower_spec)
    assert (
        terms.bandwidth_fraction == 1.0 and "above the datasheet's: caches, not DRAM" in terms.bandwidth_from
    )
    assert machine_terms(fast.iloc[0:0], _fits({}), MACHINE, H200) == sourced  # no matvec at all: as sourced


def test_decode_table_estimates_each_gpu_step_with_its_machines_terms() -> None:
    """The decode step's estimate with the run's bandwidth, ramp and gaps: eager, its launches at the fitted
    cost and the synchronise after them; graph, the graph launch + synchronise and the node cost per node."""
    launch_s, sync_s, node_s, graph_s, gap_s = 4e-6, 9e-6, 1.2e-6, 8e-6, 2.4e-6
    fits = _fits(
        {
            "launch_s": launch_s,
            "sync_round_trip_s": sync_s,
            "graph_node_s": node_s,
            "graph_launch_s": graph_s,
            "gpu_gap_s": gap_s,
        }
    )
    rows = [_gpu_step(UNFUSED, "eager", 1.6e-3), _gpu_step(FUSED, "graph", 0.9e-3)]
    frame = pd.DataFrame(rows + [_matvec(*shape) for shape in SHAPES])
    table = decode_table(frame, host_fits=pd.DataFrame(), launch_fits=fits)
    step = decode_step(LLAMA32_1B, H200, 1, 1024, dtype="fp16")
    work_s, ramp_s = step.bytes_total / BANDWIDTH, INTERCEPT_S - gap_s
    eager = table[table["mode"] == "eager"].iloc[0]
    n = UNFUSED.n_kernels(LLAMA32_1B)
    expected = compose(work_s, n, launch_s, gap_s + ramp_s)
    assert eager["estimate_s"] == pytest.approx(expected.overlapped_s + sync_s, rel=1e-6)
    assert eager["estimate_no_overlap_s"] == pytest.approx(expected.serial_s + sync_s, rel=1e-6)
    assert eager["estimate_ratio"] == pytest.approx(1.6e-3 / eager["estimate_s"])
    assert eager["achievable_bytes_per_s"] == pytest.approx(BANDWIDTH) and eager["ramp_s"] == pytest.approx(
        ramp_s
    )
    graph = table[table["mode"] == "graph"].iloc[0]
    n = FUSED.n_kernels(LLAMA32_1B)
    assert graph["estimate_s"] == pytest.approx(graph_s + work_s + n * (node_s + ramp_s), rel=1e-6)
    assert graph["estimate_s"] == graph["estimate_no_overlap_s"]
    assert "graph: the node cost" in graph["terms_from"] and "matvec line" in graph["terms_from"]
    empty = pd.DataFrame()
    host = pd.DataFrame(columns=list(HOST_COLUMNS))
    fitted = Fits(
        host=host, many_vs_one=empty, launch=fits, spin=empty, decode_demo=empty, decode_steps=table
    )
    text = "\n".join(summary_section(frame, fitted))
    assert "the same steps against the model's estimate (model/gpu_terms.py): the bytes at 4.30 TB/s" in text
    assert "terms: bandwidth: the same run's matvec line over 5 shapes" in text


def test_a_gpu_step_without_matvec_is_estimated_with_the_sourced_defaults() -> None:
    fits = _fits(
        {"launch_s": 4e-6, "sync_round_trip_s": 9e-6, "graph_node_s": 1.2e-6, "graph_launch_s": 8e-6}
    )
    table = decode_table(
        pd.DataFrame([_gpu_step(UNFUSED, "eager", 1.6e-3)]), host_fits=pd.DataFrame(), launch_fits=fits
    )
    row = table.iloc[0]
    assert row["achievable_bytes_per_s"] == H200.mem_bytes_per_s  # no published figure for an H200
    assert row["ramp_s"] == DEFAULT_RAMP_S
    assert DATASHEET_BANDWIDTH in row["terms_from"] and "gpu-benches" in row["terms_from"]


def test_terms_are_frozen_values() -> None:
    assert isinstance(default_terms(H100_SXM), GpuTerms)
    with pytest.raises(dataclasses.FrozenInstanceError):
        default_terms(H100_SXM).ramp_s = 0.0  # type: ignore[misc]


def test_the_report_shows_each_gpu_steps_estimate_and_where_its_terms_came_from(tmp_path: Path) -> None:
    """A SYNTHETIC GPU run (tests/test_report.py's launch cases, on an H200 by name, with matvec shapes on a
    known line and one eager decode step): the report's GPU decode table holds the estimate with the run's
    own terms, measured ÷ estimate, and the terms' sources."""
    run = synthetic_gpu_run()
    run["machine_info"][SUITE]["gpu"] = {"name": "NVIDIA H200"}
    step_s = 1.6e-3
    for rows, cols in SHAPES:
        per_kernel_s = INTERCEPT_S + rows * cols * 2 / BANDWIDTH
        extra = {"case": "decode_step", "device": "cuda", "op": "matvec", "rows": rows, "cols": cols}
        extra |= {"n_kernels": 32, "bytes": 32 * rows * cols * 2, "gpu_time_s": 32 * per_kernel_s}
        extra |= {"mode": "eager", "spec_bytes_per_s": H200.mem_bytes_per_s, "config": LLAMA32_1B.name}
        extra["dtype"] = "float16"
        run["benchmarks"].append(_benchmark(f"matvec[{rows}x{cols}]", 32 * per_kernel_s * 1.1, extra))
    step = _gpu_step(UNFUSED, "eager", step_s)
    extra = {key: step[key] for key in ("case", "device", "op", "plan", "mode", "n_kernels", "bytes")}
    extra |= {key: step[key] for key in ("spec_bytes_per_s", "gpu_time_s", "config", "batch", "ctx")}
    extra["dtype"] = "float16"
    run["benchmarks"].append(_benchmark("decode_step[unfused-eager]", step_s, extra))
    path = tmp_path / "synthetic-gpu.json"
    path.write_text(json.dumps(run), encoding="utf-8")
    written = write_report(select_runs(load_runs([path], samples=True)), tmp_path / "out", baseline=None)
    text = written.path.read_text(encoding="utf-8")
    header = next(line for line in text.splitlines() if line.startswith("| machine | model | plan | mode"))
    assert "| estimate | measured ÷ estimate |" in header and header.endswith("| spec | terms |")
    line = next(line for line in text.splitlines() if "| unfused | eager |" in line)
    assert "the same run's matvec line over 5 shapes: 4.30 TB/s" in line
    table = fit_all(load_runs([path], samples=False).frame).decode_steps
    estimate_s = float(table["estimate_s"].iloc[0])
    assert f"| {fmt_time(estimate_s)} | {step_s / estimate_s:.2f}× |" in line


def _benchmark(name: str, seconds: float, extra: dict[str, object]) -> dict[str, object]:
    """One benchmark entry of a pytest-benchmark document, every round ``seconds``: SYNTHETIC, for tests."""
    stats = {"min": seconds, "max": seconds, "mean": seconds, "stddev": 0.0, "median": seconds, "q1": seconds}
    stats |= {
        "q3": seconds,
        "iqr": 0.0,
        "rounds": 5,
        "iterations": 1,
        "ops": 1 / seconds,
        "data": [seconds] * 5,
    }
    info = {"suite": SUITE, **extra}
    return {"name": name, "fullname": f"synthetic::{name}", "group": None, "extra_info": info, "stats": stats}
