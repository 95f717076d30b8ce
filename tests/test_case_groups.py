"""``compare --by framework`` (``analysis.case_groups``): one group per rung of the ladder within a run, the
framework cases rewritten into the families that compare, numpy the default baseline, the law's t0 per rung
the one ``analysis.frameworks.fit_calls`` fits, a GPU rung's cost per launch, and the refusals in one line."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.__main__ import main
from analysis.case_groups import group_cases
from analysis.compare import MARK_BASELINE, figure_table, measured_figures
from analysis.fits import fit_all
from analysis.frameworks import fit_calls
from tests.test_frameworks_analysis import MACHINE, _call_rows, _launch_rows, _step_rows

RUNS = Path(__file__).resolve().parent / "data" / "runs"
#: A committed run with numpy's and JAX's framework cases (its run record says quiet).
LADDER_RUN = RUNS / "epyc-2core-full-1.json"


def _frame() -> pd.DataFrame:
    rows = [
        {**row, "data": None, "source": "run.json", "run_datetime": "2026-12-03T10:00:00+00:00"}
        for row in _call_rows()
    ]
    # A torch step records the intra-op threads it ran with (``benchmarks.test_framework_calls``).
    rows += [
        {
            **row,
            "threads": 8.0 if row["framework"] == "torch" else math.nan,
            "data": None,
            "source": "run.json",
            "run_datetime": "2026-12-03T10:00:00+00:00",
        }
        for row in _step_rows()
    ]
    return pd.DataFrame(rows)


def test_each_rung_is_a_group_and_numpy_the_baseline() -> None:
    groups, frame = group_cases(_frame(), "framework", None)
    assert groups.labels == [
        "framework=numpy",
        "framework=jax",
        "framework=torch (1 thread)",
        "framework=torch (8 threads)",
    ]
    assert groups.rule == "numpy, the reference caller"
    assert set(frame["machine"]) == {MACHINE}
    assert set(frame["case"]) == {"ufunc_size", "decode_step"}
    steps = frame[frame["case"] == "decode_step"].set_index(["machine_id", "plan"])["min"]
    assert steps[("framework=jax", "compiled")] == pytest.approx(0.020)
    assert steps[("framework=jax", "eager")] == pytest.approx(0.080)
    assert steps[("framework=numpy", "eager")] == pytest.approx(0.040)
    # The rung's coordinates are cleared, so one point of two rungs matches.
    assert frame["framework"].isna().all() and frame["op"].isin(["decode_step", None]).all()


def test_a_baseline_is_chosen_among_the_rungs() -> None:
    groups, _ = group_cases(_frame(), "framework", "jax")
    assert groups.baseline.label == "framework=jax"
    with pytest.raises(ValueError, match="names no framework value"):
        group_cases(_frame(), "framework", "mxnet")


def test_the_compared_t0_of_each_rung_is_the_ladders_own() -> None:
    groups, frame = group_cases(_frame(), "framework", None)
    fits = fit_all(frame, predictions=False)
    table = figure_table(frame, fits, groups.baseline.label)
    t0 = table[table["figure"] == "t0, fixed cost per call"].set_index("machine_id")
    ladder = fit_calls(pd.DataFrame(_call_rows())).set_index("caller")
    for label, caller in (("framework=numpy", "numpy"), ("framework=torch (1 thread)", "torch (1 thread)")):
        assert t0.loc[label, "value"] == pytest.approx(ladder.loc[caller, "t0_s"], rel=1e-9)
    assert t0.loc["framework=numpy", "mark"] == MARK_BASELINE
    assert t0.loc["framework=jax", "ratio"] == pytest.approx(ladder.loc["jax", "t0_ratio"], rel=1e-9)
    steps = table[table["figure"] == "decode step, CPU eager"].set_index("machine_id")
    assert steps.loc["framework=torch (8 threads)", "ratio"] == pytest.approx(0.050 / 0.040)


def test_a_gpu_rung_has_its_cost_per_launch() -> None:
    rows = [
        {**row, "data": None, "source": "gpu.json", "run_datetime": "2026-12-03T10:00:00+00:00"}
        for row in _launch_rows()
    ]
    groups, frame = group_cases(pd.DataFrame(rows), "framework", None)
    assert set(groups.labels) == {
        "framework=torch",
        "framework=torch_graph",
        "framework=triton",
        "framework=jax",
    }
    figures = {figure.label: figure for figure in measured_figures(frame)}
    assert set(figures) == {"cost per launch, 0 args", "cost per launch, 13 args"}
    table = figure_table(frame, fit_all(frame, predictions=False), groups.baseline.label)
    zero = table[table["figure"] == "cost per launch, 0 args"].set_index("machine_id")["value"]
    assert zero["framework=triton"] == pytest.approx(3e-6)
    assert zero["framework=jax"] == pytest.approx(9e-6)
    assert math.isclose(
        table[table["figure"] == "cost per launch, 13 args"]
        .set_index("machine_id")
        .loc["framework=triton", "value"],
        4e-6,
    )


def test_without_a_framework_case_the_grouping_says_so() -> None:
    frame = _frame()
    frame = frame[~frame["case"].isin(["framework_call", "framework_step"])]
    with pytest.raises(ValueError, match="no run used holds a framework case"):
        group_cases(frame.head(0), "framework", None)


def test_compare_by_framework_on_a_committed_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(LADDER_RUN), "--by", "framework", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "A  framework=numpy (1 run)" in out
    assert "B  framework=jax (1 run)" in out
    assert "t0, fixed cost per call" in out and "decode step, CPU compiled" in out
    calls = fit_calls(_loaded_frame()).set_index("caller")
    assert f"×{calls.loc['jax', 't0_ratio']:.3g}" in out


def _loaded_frame() -> pd.DataFrame:
    from analysis.load import load_runs

    return load_runs([LADDER_RUN], samples=False).frame


def test_plot_and_a_run_without_frameworks_refuse_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    legacy = Path(__file__).resolve().parent / "data" / "cpu-2core-full.json"
    assert main(["compare", str(legacy), "--by", "framework", "--no-cache"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no run used holds a framework case" in err[0]
    assert main(["plot", str(LADDER_RUN), "--by", "framework", "--out", "/nonexistent/never"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "compare --by framework" in err[0]


def test_the_terminal_summary_holds_the_ladder_against_numpys_predicted_step() -> None:
    """``analysis.summary`` prints the ladder (``python -m analysis summary RUN.json``, after a pytest run),
    each framework's step against numpy's predicted step of the same machine and model (fused plan)."""
    from analysis.frameworks import step_times
    from analysis.summary import summary_lines

    frame = _loaded_frame()
    lines = summary_lines(frame)
    assert (
        "The dispatch ladder across frameworks (framework_call, framework_step, framework_launch):" in lines
    )
    decode = fit_all(frame).decode_steps
    fused = decode[decode["plan"] == "fused"].iloc[0]
    steps = step_times(frame, decode).set_index(["framework", "compiler"])
    jitted = steps.loc[("jax", "jax.jit")]
    assert jitted["predicted_s"] == pytest.approx(fused["predicted_s"])
    assert jitted["vs_predicted"] == pytest.approx(jitted["min_s"] / fused["predicted_s"])
    assert any(f"{jitted['vs_predicted']:.2f} × numpy's predicted step" in line for line in lines)


def test_the_report_tables_the_ladder() -> None:
    from analysis.report import _ladder_lines

    frame = _loaded_frame()
    lines = _ladder_lines(frame, fit_all(frame), {})
    assert lines[0] == "## The dispatch ladder across frameworks"
    calls = fit_calls(frame).set_index("caller")
    jax_row = next(line for line in lines if line.startswith("| ") and "| jax |" in line and "t0" not in line)
    assert f"{calls.loc['jax', 't0_ratio']:.2f}×" in jax_row
    assert any("| jax | jax.jit |" in line for line in lines)
    others = frame[~frame["case"].str.startswith("framework")]
    assert _ladder_lines(others, fit_all(others), {}) == []
