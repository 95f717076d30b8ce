"""``analysis.launch`` recovers known launch costs from a synthetic frame and holds them against the model.

The frame is built here the way ``analysis.load`` lays a saved run out (one row per case, per-call medians in
seconds, raw per-call samples in ``data``), from known parameters plus seeded multiplicative noise.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import launch, launch_text
from analysis.fit import CI_POINTS
from model.launch import (
    DEFAULT_EAGER_GAP_S,
    DEFAULT_PDL_HIDDEN_SHARE,
    PLANS,
    SEED_GAP_S,
    compose,
    compose_graph,
)
from model.llm import LLAMA31_8B, LLAMA32_1B
from model.roofline import decode_step

N_KERNELS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
ENQUEUE_N = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
SPIN_NS = (0, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000)
SPIN_N = 256
LADDER_ARGS = (0, 1, 4, 8, 13)
LADDER_N = 256
SAMPLES = 200
NOISE = 0.01  # relative spread of each raw sample

# Two machines with known parameters (seconds). Spin kernels: per-kernel time max(launch_s, d + spin_gap_s),
# so the knee is launch_s − spin_gap_s.
FAST = {
    "launch_s": 4e-6,
    "sync_round_trip_s": 12e-6,
    "launch_sync_s": 18e-6,
    "graph_node_s": 1.2e-6,
    "graph_launch_s": 15e-6,
    "enqueue_s": 2.5e-6,
    "graph_enqueue_s": 3e-6,
    "gpu_gap_s": 0.9e-6,
    "sync_s": 1.5e-6,
    "spin_gap_s": 1e-6,
    # the launch-cost ladder: per launch a + b·n_args, per layer
    "ladder_cupy_s": 3e-6,
    "ladder_cupy_per_arg_s": 0.15e-6,
    "ladder_driver_s": 1.5e-6,
    "ladder_driver_per_arg_s": 0.02e-6,
    "ladder_graph_s": 0.8e-6,
    "ladder_graph_per_arg_s": 0.05e-6,
    # the PDL case: the same kernel with and without programmatic dependent launch, eager and graph
    "pdl_gap_s": 0.5e-6,
    "pdl_plain_gap_s": 1.0e-6,
    "pdl_graph_node_s": 0.3e-6,
    "pdl_plain_graph_node_s": 0.9e-6,
}
SLOW = {key: 2 * value for key, value in FAST.items()}
MACHINES = {"fast / cpu A / GPU A": FAST, "slow / cpu B / GPU B": SLOW}


def _row(machine_id: str, rng: np.random.Generator, seconds: float, **coords: object) -> dict[str, object]:
    samples = seconds * (1 + NOISE * rng.standard_normal(SAMPLES))
    return {
        "machine_id": machine_id,
        "device": "cuda",
        "median": float(np.median(samples)),
        "data": samples.tolist(),
        **coords,
    }


def _machine_rows(machine_id: str, p: dict[str, float], rng: np.random.Generator) -> list[dict[str, object]]:
    rows = []
    for n in N_KERNELS:
        for case, mode, seconds in (
            ("launch_batch", "eager", p["sync_round_trip_s"] + n * p["launch_s"]),
            ("launch_sync_each", "eager", n * p["launch_sync_s"]),
            ("graph_replay", "graph", p["graph_launch_s"] + n * p["graph_node_s"]),
        ):
            rows.append(_row(machine_id, rng, seconds, case=case, n_kernels=n, mode=mode))
    for n in ENQUEUE_N:
        gpu_time_s = (2e-6 + n * p["gpu_gap_s"]) * (1 + NOISE * rng.standard_normal())
        for mode, seconds in (("eager", 0.2e-6 + n * p["enqueue_s"]), ("graph", p["graph_enqueue_s"])):
            rows.append(
                _row(machine_id, rng, seconds, case="enqueue", n_kernels=n, mode=mode, gpu_time_s=gpu_time_s)
            )
    for kernel_ns in SPIN_NS:
        d = kernel_ns * 1e-9
        eager_s = SPIN_N * max(p["launch_s"], d + p["spin_gap_s"]) + p["sync_round_trip_s"]
        graph_s = p["graph_enqueue_s"] + SPIN_N * (d + p["graph_node_s"]) + p["sync_round_trip_s"]
        for mode, seconds in (("eager", eager_s), ("graph", graph_s)):
            rows.append(
                _row(machine_id, rng, seconds, case="spin", n_kernels=SPIN_N, kernel_ns=kernel_ns, mode=mode)
            )
    rows.append(_row(machine_id, rng, p["sync_s"], case="sync"))
    for layer in ("cupy", "driver", "graph"):
        for n_args in LADDER_ARGS:
            per_launch_s = p[f"ladder_{layer}_s"] + n_args * p[f"ladder_{layer}_per_arg_s"]
            coords = {"case": "launch_args", "layer": layer, "n_args": n_args, "n_kernels": LADDER_N}
            if layer == "graph":  # the GPU's time per node: CUDA-event medians, no raw samples
                gpu_time_s = LADDER_N * per_launch_s * (1 + NOISE * rng.standard_normal())
                rows.append(
                    _row(machine_id, rng, 20e-6 + gpu_time_s, mode="graph", gpu_time_s=gpu_time_s, **coords)
                )
            else:  # the host's time per call behind a blocking kernel
                rows.append(
                    _row(machine_id, rng, LADDER_N * per_launch_s, mode="eager", gpu_time_s=1e-3, **coords)
                )
    for n in ENQUEUE_N:
        for mode, with_pdl, slope in (
            ("eager", True, "pdl_gap_s"),
            ("eager", False, "pdl_plain_gap_s"),
            ("graph", True, "pdl_graph_node_s"),
            ("graph", False, "pdl_plain_graph_node_s"),
        ):
            gpu_time_s = (3e-6 + n * p[slope]) * (1 + NOISE * rng.standard_normal())
            coords = {"case": "launch_pdl", "mode": mode, "pdl": with_pdl, "n_kernels": n}
            rows.append(_row(machine_id, rng, n * 2e-6, gpu_time_s=gpu_time_s, **coords))
    return rows  # fmt: skip


def _frame(machines: dict[str, dict[str, float]] = MACHINES, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame([row for mid, p in machines.items() for row in _machine_rows(mid, p, rng)])


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return _frame()


@pytest.fixture(scope="module")
def fits(frame: pd.DataFrame) -> pd.DataFrame:
    return launch.fit_launch(frame)


def _fit(fits: pd.DataFrame, machine_id: str, quantity: str) -> pd.Series:
    match = fits[(fits["machine_id"] == machine_id) & (fits["quantity"] == quantity)]
    assert len(match) == 1, f"{quantity} of {machine_id}: {len(match)} rows"
    return match.iloc[0]


def test_fit_launch_has_one_row_per_machine_and_quantity(fits: pd.DataFrame) -> None:
    assert list(fits.columns) == list(launch.FIT_COLUMNS)
    assert sorted(fits["machine_id"].unique()) == sorted(MACHINES)
    for machine_id in MACHINES:
        assert sorted(fits[fits["machine_id"] == machine_id]["quantity"]) == sorted(launch.QUANTITIES)


@pytest.mark.parametrize("machine_id", sorted(MACHINES))
@pytest.mark.parametrize("quantity", sorted(set(launch.QUANTITIES) - {"knee_s"}))
def test_fit_launch_recovers_known_costs(fits: pd.DataFrame, machine_id: str, quantity: str) -> None:
    row = _fit(fits, machine_id, quantity)
    true = MACHINES[machine_id][quantity]
    assert row["value_s"] == pytest.approx(true, rel=0.05)
    assert row["ci_low_s"] <= row["value_s"] <= row["ci_high_s"]
    assert row["ci_high_s"] - row["ci_low_s"] < 0.5 * true, "the interval is no real constraint"
    assert row["note"] == ""


@pytest.mark.parametrize("machine_id", sorted(MACHINES))
def test_fit_launch_finds_the_knee(fits: pd.DataFrame, machine_id: str) -> None:
    p = MACHINES[machine_id]
    row = _fit(fits, machine_id, "knee_s")
    assert row["value_s"] == pytest.approx(p["launch_s"] - p["spin_gap_s"], rel=0.05)
    assert row["ci_low_s"] <= row["value_s"] <= row["ci_high_s"]


def test_the_knee_uses_the_durations_the_spins_achieved() -> None:
    """Spins that each last 300 ns longer than requested: the knee from their achieved durations is the
    true one; from the requested durations it would be 300 ns too low."""
    frame = _frame({"m": FAST})
    spin = frame["case"] == "spin"
    longer_ns = 300
    true_s = FAST["launch_s"] - FAST["spin_gap_s"]
    stretched = frame.copy()
    achieved_ns = stretched.loc[spin, "kernel_ns"] + longer_ns
    eager = spin & (stretched["mode"] == "eager")
    per_kernel = np.maximum(FAST["launch_s"], achieved_ns[eager] * 1e-9 + FAST["spin_gap_s"])
    stretched.loc[eager, "median"] = SPIN_N * per_kernel + FAST["sync_round_trip_s"]
    stretched.loc[eager, "data"] = None
    with_achieved = _fit(launch.fit_launch(stretched.assign(achieved_ns=achieved_ns)), "m", "knee_s")
    requested_only = _fit(launch.fit_launch(stretched), "m", "knee_s")
    assert with_achieved["value_s"] == pytest.approx(true_s, rel=0.02)
    assert requested_only["value_s"] == pytest.approx(true_s - longer_ns * 1e-9, rel=0.02)


def test_every_fit_says_which_points_it_set_aside() -> None:
    frame = _frame({"m": FAST})
    broken = frame.copy()
    batch = broken.index[broken["case"] == "launch_batch"][:2]
    broken.loc[batch, "median"] = np.nan
    graph = broken.index[(broken["case"] == "launch_args") & (broken["layer"] == "graph")][:1]
    broken.loc[graph, "gpu_time_s"] = 0.0
    fits = launch.fit_launch(broken)
    for quantity in ("launch_s", "sync_round_trip_s"):
        row = _fit(fits, "m", quantity)
        assert (row["n_points"], row["n_set_aside"]) == (len(N_KERNELS) - 2, 2)
        assert row["note"] == f"2 of {len(N_KERNELS)} points set aside: 2 without a finite median > 0"
        assert row["value_s"] == pytest.approx(FAST[quantity], rel=0.05)
    row = _fit(fits, "m", "ladder_graph_s")
    assert (row["n_points"], row["n_set_aside"]) == (len(LADDER_ARGS) - 1, 1)
    assert "1 without a finite gpu_time_s > 0" in row["note"]
    untouched = _fit(fits, "m", "ladder_cupy_s")
    assert (untouched["n_points"], untouched["n_set_aside"], untouched["note"]) == (len(LADDER_ARGS), 0, "")


def test_a_ladder_of_too_few_argument_counts_says_why() -> None:
    frame = _frame({"m": FAST})
    two = frame[~((frame["case"] == "launch_args") & (frame["n_args"] > 1))]
    row = _fit(launch.fit_launch(two), "m", "ladder_driver_per_arg_s")
    assert math.isnan(row["value_s"])
    assert row["note"] == "needs at least 3 points over at least 2 argument counts"


def test_ladder_cost_is_the_fitted_line_at_the_mean_argument_count(fits: pd.DataFrame) -> None:
    machine_id = "fast / cpu A / GPU A"
    cost = launch.ladder_cost_s(fits, machine_id, "cupy", n_kernels=195, n_args_total=1058)
    base = launch.fitted(fits, machine_id, "ladder_cupy_s")
    per_arg = launch.fitted(fits, machine_id, "ladder_cupy_per_arg_s")
    assert cost == pytest.approx(base + per_arg * 1058 / 195, rel=1e-12)
    assert cost == pytest.approx(FAST["ladder_cupy_s"] + FAST["ladder_cupy_per_arg_s"] * 1058 / 195, rel=0.02)
    assert math.isnan(launch.ladder_cost_s(fits, "no such machine", "cupy", 195, 1058))
    assert math.isnan(launch.ladder_cost_s(fits, machine_id, "cupy", 195, math.nan))


def test_knee_parameters_is_exact_on_noise_free_points() -> None:
    d = np.array([[0, 1, 2, 4, 8, 16, 32]], dtype=float) * 1e-6
    per_kernel = np.maximum(4e-6, d + 1e-6)
    flat, gap, knee = launch.knee_parameters(d, per_kernel)[0]
    assert (flat, gap, knee) == pytest.approx((4e-6, 1e-6, 3e-6), rel=1e-9)


def test_fits_without_raw_samples_bootstrap_over_points() -> None:
    frame = _frame({"m": FAST}).assign(data=None)
    fits = launch.fit_launch(frame)
    row = _fit(fits, "m", "launch_s")
    assert row["ci_method"] == CI_POINTS
    assert row["value_s"] == pytest.approx(FAST["launch_s"], rel=0.05)


def test_a_fit_that_cannot_be_made_says_why() -> None:
    frame = _frame({"m": FAST})
    frame = frame[~((frame["case"] == "launch_batch") & (frame["n_kernels"] > 2))]  # two points left
    row = _fit(launch.fit_launch(frame), "m", "launch_s")
    assert math.isnan(row["value_s"])
    assert "points" in row["note"]


def test_predict_spin_uses_the_model_bounds(frame: pd.DataFrame, fits: pd.DataFrame) -> None:
    spin = launch.predict_spin(frame, fits)
    assert list(spin.columns) == list(launch.SPIN_COLUMNS)
    assert len(spin) == len(MACHINES) * len(SPIN_NS) * 2
    for row in spin.itertuples(index=False):
        fitted = {q: launch.fitted(fits, row.machine_id, q) for q in launch.QUANTITIES}
        t_gpu_s = SPIN_N * row.kernel_ns * 1e-9
        if row.mode == "eager":  # the GPU's own gap of the same run
            bounds = compose(t_gpu_s, SPIN_N, fitted["launch_s"], fitted["gpu_gap_s"])
            assert (row.gap_s, row.gap_from) == (fitted["gpu_gap_s"], launch.GAP_MEASURED)
        else:
            bounds = compose_graph(t_gpu_s, SPIN_N, fitted["graph_node_s"], fitted["graph_enqueue_s"])
        assert row.serial_s == pytest.approx(bounds.serial_s + fitted["sync_round_trip_s"], rel=1e-12)
        assert row.overlapped_s == pytest.approx(bounds.overlapped_s + fitted["sync_round_trip_s"], rel=1e-12)
        assert row.measured_per_kernel_s == pytest.approx(row.measured_s / SPIN_N, rel=1e-12)
        assert row.error_vs_serial == pytest.approx((row.measured_s - row.serial_s) / row.serial_s)


def test_predict_spin_eager_lies_between_the_bounds_and_graph_on_its_serial_bound(
    frame: pd.DataFrame, fits: pd.DataFrame
) -> None:
    """The synthetic eager time N·max(L, d + g) + sync lies between max(N·(d + g'), N·L) + sync and
    N·(d + L + g') + sync (g' the fitted gpu_gap_s, a little below the spins' g); the graph time is built as
    compose_graph's sum, its bounds one figure."""
    spin = launch.predict_spin(frame, fits)
    eager, graph = spin[spin["mode"] == "eager"], spin[spin["mode"] == "graph"]
    tolerance = 0.03
    assert (eager["measured_s"] >= eager["overlapped_s"] * (1 - tolerance)).all()
    assert (eager["measured_s"] <= eager["serial_s"] * (1 + tolerance)).all()
    assert graph["error_vs_serial"].abs().max() < tolerance
    assert (graph["serial_s"] == graph["overlapped_s"]).all()


def test_predict_spin_without_a_measured_gap_uses_the_documented_default() -> None:
    frame = _frame({"m": FAST})
    frame = frame[~(frame["case"] == "enqueue")]  # no gpu_gap_s in this run
    spin = launch.predict_spin(frame, launch.fit_launch(frame))
    eager = spin[spin["mode"] == "eager"]
    assert (eager["gap_s"] == DEFAULT_EAGER_GAP_S).all() and (eager["gap_from"] == launch.GAP_DEFAULT).all()


def test_decode_with_measured_recomputes_demo2(fits: pd.DataFrame) -> None:
    decode = launch.decode_with_measured(fits)
    assert list(decode.columns) == list(launch.DECODE_COLUMNS)
    for cfg in (LLAMA31_8B, LLAMA32_1B):
        t_gpu_s = decode_step(cfg, launch.DEMO2_GPU, 1, 1024).t_step
        for plan in PLANS.values():
            n = plan.n_kernels(cfg)
            rows = decode[(decode["config"] == cfg.name) & (decode["plan"] == plan.name)]
            assumed = rows[rows["launch"] == "assumed"]
            assert sorted(assumed["t_launch_s"]) == list(launch.ASSUMED_LAUNCH_S)
            for row in assumed.itertuples(index=False):  # the seed's model: g = 0
                assert row.serial_s == pytest.approx(compose(t_gpu_s, n, row.t_launch_s, SEED_GAP_S).serial_s)
                assert row.gap_s == 0
            for machine_id in MACHINES:
                ours = rows[rows["machine_id"] == machine_id]
                eager = ours[ours["launch"] == "measured eager"].iloc[0]
                gap_s = launch.fitted(fits, machine_id, "gpu_gap_s")
                expected = compose(t_gpu_s, n, launch.fitted(fits, machine_id, "launch_s"), gap_s)
                assert (eager["serial_s"], eager["overlapped_s"]) == pytest.approx(
                    (expected.serial_s, expected.overlapped_s)
                )
                assert eager["gap_from"] == launch.GAP_MEASURED
                graph = ours[ours["launch"] == "measured graph"].iloc[0]
                node_s = launch.fitted(fits, machine_id, "graph_node_s")
                graph_s = launch.fitted(fits, machine_id, "graph_enqueue_s")
                expected = compose_graph(t_gpu_s, n, node_s, graph_s)
                assert (graph["serial_s"], graph["t_graph_launch_s"]) == pytest.approx(
                    (expected.serial_s, graph_s)
                )
                assert graph["overlapped_s"] == graph["serial_s"]  # one launch, then a synchronise: a sum
                pdl = ours[ours["launch"] == "measured graph + PDL"].iloc[0]
                ratio = launch.fitted(fits, machine_id, "pdl_graph_node_s") / launch.fitted(
                    fits, machine_id, "pdl_plain_graph_node_s"
                )
                expected = compose_graph(t_gpu_s, n, node_s * ratio, graph_s)
                assert pdl["serial_s"] == pytest.approx(expected.serial_s)
                assert pdl["gap_from"] == launch.PDL_MEASURED


def test_pdl_without_its_case_is_the_stated_assumption() -> None:
    frame = _frame({"m": FAST})
    fits = launch.fit_launch(frame[frame["case"] != "launch_pdl"])
    node_s, source = launch.pdl_gap(fits, "m", 1e-6, "graph")
    assert (node_s, source) == (pytest.approx(1e-6 * (1 - DEFAULT_PDL_HIDDEN_SHARE)), launch.PDL_ASSUMED)
    pdl = launch.decode_with_measured(fits)
    pdl = pdl[pdl["launch"] == "measured graph + PDL"]
    assert not pdl.empty and (pdl["gap_from"] == launch.PDL_ASSUMED).all()


def test_the_pdl_fits_compare_the_same_kernel_with_and_without_the_attribute(fits: pd.DataFrame) -> None:
    """Measured in the same run: PDL hides 1 − 0.3/0.9 of a graph node's gap on the synthetic machines."""
    for machine_id in MACHINES:
        node_s, source = launch.pdl_gap(fits, machine_id, 1e-6, "graph")
        assert source == launch.PDL_MEASURED
        assert node_s == pytest.approx(1e-6 * 0.3 / 0.9, rel=0.05)
        gap_s, source = launch.pdl_gap(fits, machine_id, 1e-6, "eager")
        assert (gap_s, source) == (pytest.approx(1e-6 * 0.5 / 1.0, rel=0.05), launch.PDL_MEASURED)
    with pytest.raises(ValueError, match="mode"):
        launch.pdl_gap(fits, "m", 1e-6, "pdl")


def test_decode_without_measurements_is_the_lecture_table() -> None:
    decode = launch.decode_with_measured(pd.DataFrame(columns=list(launch.FIT_COLUMNS)))
    assert (decode["launch"] == "assumed").all()
    assert len(decode) == 2 * len(PLANS) * len(launch.ASSUMED_LAUNCH_S)


def test_summary_section_reports_each_machine(frame: pd.DataFrame) -> None:
    lines = launch_text.summary_section(frame)
    text = "\n".join(lines)
    for machine_id in MACHINES:
        assert machine_id in text
    assert "cost per launch" in text
    assert "4.00 µs" in text and "8.00 µs" in text  # each machine's cost per launch, formatted by model.units
    assert "Llama-3.2-1B" in text


def test_a_run_of_one_case_gives_its_figure_alone() -> None:
    """A run of ``-k sync`` saves no ``mode``, ``n_kernels`` or ``kernel_ns`` column at all."""
    frame = _frame({"m": FAST})
    only_sync = frame[frame["case"] == "sync"].dropna(axis=1, how="all")
    assert "mode" not in only_sync.columns
    fits = launch.fit_launch(only_sync)
    assert list(fits["quantity"]) == ["sync_s"]
    assert launch.predict_spin(only_sync, fits).empty
    assert any("synchronise an idle stream" in line for line in launch_text.summary_section(only_sync))


def test_summary_section_is_empty_without_cuda_cases(frame: pd.DataFrame) -> None:
    assert launch_text.summary_section(frame.iloc[0:0]) == []
    assert launch_text.summary_section(frame.assign(device="cpu")) == []
    assert launch_text.summary_section(pd.DataFrame({"case": ["ufunc_size"], "device": ["cpu"]})) == []


def test_compare_judges_the_ladder_on_its_own_layer_and_argument_count(frame: pd.DataFrame) -> None:
    """``analysis compare`` sets the ladder's lines side by side, each judged from each run's own fit of its
    layer, the graph layer (CUDA-event medians) included."""
    from analysis.compare import figure_table
    from analysis.fits import fit_all

    table = figure_table(frame, fit_all(frame), None)
    slow = table[table["machine_id"] == "slow / cpu B / GPU B"].set_index("short")
    for short in ("RawKernel", "RawK./arg", "driver", "driver/arg"):
        assert slow.loc[short, "ratio"] == pytest.approx(2.0, rel=0.1)
        assert slow.loc[short, "mark"] == "changed"
        assert slow.loc[short, "evidence"].startswith("1 v 1 run(s)")
    assert slow.loc["node/arg", "mark"] in ("changed", "same", "inconclusive")


def test_a_saved_launch_pdl_case_loads_and_is_fitted(tmp_path: Path) -> None:
    """Through the loader, as a saved run carries it: ``pdl`` (true / false) reaches the frame, and the four
    PDL slopes are fitted from it."""
    import json

    from analysis.load import load_runs
    from benchmarks.records import SUITE
    from tests.test_report import synthetic_gpu_run

    doc = synthetic_gpu_run(seed=3)
    template = doc["benchmarks"][0]
    for mode, with_pdl, per_kernel_s in (
        ("eager", True, 0.5e-6),
        ("eager", False, 1.0e-6),
        ("graph", True, 0.3e-6),
        ("graph", False, 0.9e-6),
    ):
        for n in ENQUEUE_N:
            extra = {"suite": SUITE, "device": "cuda", "case": "launch_pdl", "op": "pdl_kernel"}
            extra |= {"mode": mode, "pdl": with_pdl, "n_kernels": n, "gpu_time_s": 3e-6 + n * per_kernel_s}
            name = f"test_launch_pdl[{mode}-{with_pdl}-{n}]"
            doc["benchmarks"].append(template | {"name": name, "fullname": name, "extra_info": extra})
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    fits = launch.fit_launch(load_runs([path], samples=True).frame)
    machine_id = fits["machine_id"].iloc[0]
    for quantity, expected in (
        ("pdl_gap_s", 0.5e-6),
        ("pdl_plain_gap_s", 1.0e-6),
        ("pdl_graph_node_s", 0.3e-6),
        ("pdl_plain_graph_node_s", 0.9e-6),
    ):
        assert launch.fitted(fits, machine_id, quantity) == pytest.approx(expected, rel=1e-6), quantity
