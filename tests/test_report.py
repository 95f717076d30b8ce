"""analysis.report and analysis.figures: the report of the real CPU run, and — since no real GPU run exists
yet — of a SYNTHETIC GPU run built here from known launch costs (never saved as data).

The figures the report states must be the fits' and the model's own values, and the figures it links must
exist as PNG and SVG files (asked for: PNG alone is the default).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from analysis.decode_text import prediction_cell, where
from analysis.fits import fit_all
from analysis.host import BASIS_LAW, BASIS_WHOLE
from analysis.load import SUITE, load_runs
from analysis.render import symbol
from analysis.report import write_report
from analysis.runs import select_runs
from analysis.steady import WARM_UP, steadiness_line, steadiness_table, unclassified_count
from model.launch import DEFAULT_EAGER_GAP_S, compose
from model.laws import fixed_overhead_time
from model.units import fmt_time

DATA = Path(__file__).parent / "data"
CPU_RUNS = sorted(DATA.glob("cpu-*.json"))

# Known launch costs of the synthetic GPU (s).
LAUNCH_S = 2.5e-6
ROUND_TRIP_S = 8e-6
GRAPH_NODE_S = 1e-6
GRAPH_LAUNCH_S = 6e-6
SYNC_S = 4e-6
SPIN_GAP_S = 1e-6
SYNTHETIC_GPU = "SYNTHETIC test GPU (not a measurement)"


def synthetic_gpu_run(seed: int = 0) -> dict:
    """A pytest-benchmark run document of the GPU launch cases on a made-up GPU whose timings follow the
    costs above with 1 % log-normal noise (50 raw samples per case). Built for tests only."""
    rng = np.random.default_rng(seed)
    benchmarks = []

    def add(name: str, per_call_s: float, **extra: object) -> None:
        data = (per_call_s * rng.lognormal(0.0, 0.01, 50)).tolist()
        stats = {
            "min": min(data),
            "max": max(data),
            "mean": float(np.mean(data)),
            "stddev": float(np.std(data, ddof=1)),
            "median": float(np.median(data)),
            "q1": float(np.quantile(data, 0.25)),
            "q3": float(np.quantile(data, 0.75)),
            "iqr": float(np.quantile(data, 0.75) - np.quantile(data, 0.25)),
            "rounds": len(data),
            "iterations": 1,
            "ops": 1 / float(np.mean(data)),
            "data": data,
        }
        info = {"suite": SUITE, "device": "cuda", **extra}
        benchmarks.append(
            {
                "name": name,
                "fullname": f"synthetic::{name}",
                "group": None,
                "extra_info": info,
                "stats": stats,
            }
        )

    for n in (2**k for k in range(11)):
        for name, per_call_s, case, mode in (
            (f"batch[{n}]", ROUND_TRIP_S + n * LAUNCH_S, "launch_batch", "eager"),
            (f"graph[{n}]", GRAPH_LAUNCH_S + n * GRAPH_NODE_S, "graph_replay", "graph"),
        ):
            add(name, per_call_s, case=case, op="empty_kernel", mode=mode, n_kernels=n, gpu_time_s=n * 1e-6)
    add("sync", SYNC_S, case="sync", op="synchronize")
    for d_ns in (0, 1000, 2000, 4000, 8000, 16000, 32000):
        per_kernel_s = max(LAUNCH_S, d_ns * 1e-9 + SPIN_GAP_S)
        add(
            f"spin[{d_ns}]",
            ROUND_TRIP_S + 256 * per_kernel_s,
            case="spin",
            op="spin_kernel",
            mode="eager",
            n_kernels=256,
            kernel_ns=d_ns,
            gpu_time_s=256 * per_kernel_s,
        )
    gpu = {"name": SYNTHETIC_GPU}
    machine_info = {
        "node": "synthetic-gpu-box",
        SUITE: {
            "host": "synthetic-gpu-box",
            "cpu_model": "synthetic CPU",
            "gpu": gpu,
            "machine_id": f"synthetic-gpu-box / synthetic CPU / {SYNTHETIC_GPU}",
        },
    }
    return {
        "machine_info": machine_info,
        "commit_info": {},
        "benchmarks": benchmarks,
        "datetime": "2026-01-01T00:00:00+00:00",
        "version": "5.2.3",
    }


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory: pytest.TempPathFactory):
    assert CPU_RUNS, f"no real CPU run (cpu-*.json) under {DATA}"
    result = load_runs([CPU_RUNS[0]], samples=True)
    written = write_report(
        select_runs(result), tmp_path_factory.mktemp("report"), baseline=None, formats=("png", "svg")
    )
    return result, written


def linked_figures(report: Path) -> list[Path]:
    text = report.read_text(encoding="utf-8")
    links = [part.split(")")[0] for part in text.split("](")[1:]]
    return [report.parent / link for link in links]


def test_report_of_the_real_cpu_run_links_existing_figures(cpu_report) -> None:
    result, written = cpu_report
    text = written.path.read_text(encoding="utf-8")
    assert written.path.name == "report.md"
    machine = result.frame["machine_id"].iloc[0]
    assert machine in text
    assert "## CPU: numpy per-call cost and host bandwidth" in text
    assert "## GPU" not in text
    stems = {path.stem for path in written.figures}
    assert {"time_vs_size", "many_vs_one"} <= stems
    assert {path.suffix for path in written.figures} == {".png", ".svg"}
    links = linked_figures(written.path)
    assert links
    for link in links:
        assert link.is_file(), link
        assert link.stat().st_size > 1000
    assert written.path.parent / "figures" / "time_vs_size.png" in links


def test_report_counts_the_steady_state_classes_and_the_warm_ups_left_out(cpu_report) -> None:
    """Issue 34, point 4: the report's runs section says how each case's rounds settled and how many
    warm-up rounds were left out of the figures (``analysis.steady``)."""
    result, written = cpu_report
    text = written.path.read_text(encoding="utf-8")
    frame = result.frame
    warm = frame[frame["steady"] == WARM_UP]
    assert len(warm) > 0
    line = steadiness_line(steadiness_table(frame), unclassified_count(frame))
    assert f"warm-ups left out of their figures: {int(warm['warm_up_rounds'].sum())} rounds" in line
    runs = text.split("## Runs", 1)[1].split("\n## ", 1)[0]
    assert f"- {line}\n" in runs


def test_report_states_the_fits_and_the_models_values(cpu_report) -> None:
    result, written = cpu_report
    text = written.path.read_text(encoding="utf-8")
    fits = fit_all(result.frame)
    law = fits.host.iloc[0]
    assert f"{fmt_time(law['t0_s'])} [{fmt_time(law['t0_low_s'])} – {fmt_time(law['t0_high_s'])}]" in text
    assert not fits.many_vs_one.empty
    sizes = result.frame[result.frame["case"] == "ufunc_size"]
    for row in fits.many_vs_one.itertuples(index=False):
        # The prediction: one call on all N elements (measured by ufunc_size) plus t0 per extra call, or
        # where N was not measured, the fixed-overhead law for pieces calls of n elements each.
        if row.basis == BASIS_WHOLE:
            one = sizes[sizes["n"] == row.pieces * row.n]
            model_s = float((one["min"] / one["n_calls"]).median()) + (row.pieces - 1) * law["t0_s"]
        else:
            assert row.basis == BASIS_LAW
            model_s = row.pieces * fixed_overhead_time(row.n, law["t0_s"], law["r_inf_per_s"])
        assert row.predicted_s == pytest.approx(float(model_s), rel=1e-12)
        assert row.rel_error == pytest.approx((row.predicted_s - row.measured_s) / row.measured_s)
        assert f"| {fmt_time(row.measured_s)} | {fmt_time(float(model_s))} |" in text


def test_gpu_sections_of_a_synthetic_run_hold_the_models_values(tmp_path: Path) -> None:
    """SYNTHETIC data (no real GPU run exists yet): known costs in, the same costs and the model's
    compositions out."""
    path = tmp_path / "synthetic-gpu.json"
    path.write_text(json.dumps(synthetic_gpu_run()), encoding="utf-8")
    result = load_runs([path], samples=True)
    written = write_report(select_runs(result), tmp_path / "out", baseline=None)
    text = written.path.read_text(encoding="utf-8")
    assert "## GPU: launch, synchronise and graph costs" in text
    assert "### Lecture demo 2 with measured launch costs" in text
    assert {"knee", "launch_vs_graph", "decode_step"} <= {p.stem for p in written.figures}
    for link in linked_figures(written.path):
        assert link.is_file(), link

    fits = fit_all(result.frame)
    value = fits.launch.set_index("quantity")["value_s"]
    assert value["launch_s"] == pytest.approx(LAUNCH_S, rel=0.02)
    assert value["sync_round_trip_s"] == pytest.approx(ROUND_TRIP_S, rel=0.02)
    assert value["graph_node_s"] == pytest.approx(GRAPH_NODE_S, rel=0.02)
    assert value["knee_s"] == pytest.approx(LAUNCH_S - SPIN_GAP_S, rel=0.05)
    for row in fits.spin.itertuples(index=False):
        gap_s = value.get(
            "gpu_gap_s", DEFAULT_EAGER_GAP_S
        )  # the GPU's gap per kernel: the run's, or the default
        expected = compose(row.n_kernels * row.kernel_ns * 1e-9, row.n_kernels, value["launch_s"], gap_s)
        assert row.serial_s == pytest.approx(expected.serial_s + value["sync_round_trip_s"])
        assert row.overlapped_s == pytest.approx(expected.overlapped_s + value["sync_round_trip_s"])
    measured = fits.decode_demo[fits.decode_demo["launch"] == "measured eager"]
    gap_s = value.get("gpu_gap_s", DEFAULT_EAGER_GAP_S)
    assert not measured.empty
    for row in measured.itertuples(index=False):
        expected = compose(row.t_gpu_s, row.n_kernels, value["launch_s"], gap_s)
        assert row.serial_s == pytest.approx(expected.serial_s)
        assert f"| {fmt_time(row.serial_s)} | {fmt_time(row.overlapped_s)} |" in text


def test_two_machines_are_compared_in_the_report(tmp_path: Path) -> None:
    fast, slow = synthetic_gpu_run(seed=1), synthetic_gpu_run(seed=2)
    ours = slow["machine_info"][SUITE]
    ours["host"], ours["machine_id"] = "slow-box", "slow-box / synthetic CPU / " + SYNTHETIC_GPU
    for bench in slow["benchmarks"]:
        bench["stats"]["data"] = [x * 1.3 for x in bench["stats"]["data"]]
        for key in ("min", "max", "mean", "median", "q1", "q3"):
            bench["stats"][key] *= 1.3
    for name, doc in (("a.json", fast), ("b.json", slow)):
        (tmp_path / "runs").mkdir(exist_ok=True)
        (tmp_path / "runs" / name).write_text(json.dumps(doc), encoding="utf-8")
    written = write_report(
        select_runs(load_runs([tmp_path / "runs"], samples=True)), tmp_path / "out", baseline="slow-box"
    )
    text = written.path.read_text(encoding="utf-8")
    assert "- A  slow-box / synthetic CPU / SYNTHETIC test GPU (not a measurement) (1 run)" in text
    # 1.3x slower everywhere: the other machine's launch cost is 1/1.3 of the baseline's, and changed.
    (line,) = [line for line in text.splitlines() if line.startswith("| cost per launch (s)")]
    ratio, mark = line.split("×")[1].split()[:2]
    assert float(ratio) == pytest.approx(1 / 1.3, rel=0.02)
    assert mark == "*"
    assert "- * changed: the ratio's interval lies wholly outside the band" in text
    assert "machines" in {p.stem for p in written.figures}


def test_report_without_raw_samples_judges_run_against_run(tmp_path: Path) -> None:
    """Each run's own fit is the evidence: runs saved without their rounds are judged all the same, each row
    with its ratio and its verdict's symbol."""
    docs = [synthetic_gpu_run(seed=1), synthetic_gpu_run(seed=2)]
    docs[1]["machine_info"][SUITE]["host"] = "other-box"
    for doc in docs:
        for bench in doc["benchmarks"]:
            del bench["stats"]["data"]
    for index, doc in enumerate(docs):
        (tmp_path / f"{index}.json").write_text(json.dumps(doc), encoding="utf-8")
    loaded = load_runs([tmp_path / "0.json", tmp_path / "1.json"], samples=True)
    frame = loaded.frame
    assert frame["data"].isna().all()
    from analysis.compare import figure_table
    from analysis.verdicts import MARK_CHANGED, MARK_INCONCLUSIVE, MARK_SAME

    base = str(frame.loc[~frame["machine_id"].str.startswith("other-box /"), "machine_id"].iloc[0])
    table = figure_table(frame, fit_all(frame), baseline=base)
    other = table["machine_id"].str.startswith("other-box /")
    judged = table[other & (table["evidence"] != "")]
    assert not judged.empty
    assert judged["mark"].isin([MARK_CHANGED, MARK_SAME, MARK_INCONCLUSIVE]).all()
    assert judged["p_value"].between(0, 1).all()
    assert not math.isnan(table.loc[other, "ratio"].iloc[0])
    # The report gives every judged figure its ratio and its verdict's symbol.
    text = write_report(select_runs(loaded), tmp_path / "out", baseline=base).path.read_text(encoding="utf-8")
    for row in judged.itertuples(index=False):
        (line,) = [line for line in text.splitlines() if line.startswith(f"| {row.figure} ({row.unit}) |")]
        assert line.endswith(f" ×{row.ratio:#.3g} {symbol(row.mark)} |")


def test_decode_section_of_a_real_cpu_decode_run(tmp_path: Path) -> None:
    path = DATA / "runs" / "epyc-2core-full-1.json"  # today's full CPU suite: the step with its probe
    assert path.is_file(), f"no real CPU decode-step run at {path}"
    result = load_runs([path], samples=True)
    written = write_report(select_runs(result), tmp_path, baseline=None)
    text = written.path.read_text(encoding="utf-8")
    assert "## Decode step: measured vs predicted" in text
    assert "decode_bands" in {p.stem for p in written.figures}
    steps = fit_all(result.frame).decode_steps
    assert not steps.empty
    for row in steps.itertuples(index=False):
        # The row the report prints is the decode table's: the prediction with its interval, and the ratio.
        ratio = where(row).removesuffix(" predicted")
        assert f"| {fmt_time(row.measured_s)} | {prediction_cell(row)} | {ratio} |" in text
        assert row.predicted_low_s < row.predicted_s < row.predicted_high_s
        assert row.bandwidth_from == "host_bandwidth read" and row.rounds_paired == 60
    assert "consistency check" in text.lower() and "not a bound" in text
