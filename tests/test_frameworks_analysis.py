"""``analysis/frameworks.py`` and the ladder figure on frames made by the law: each caller's t0 recovered by
``fit_host``'s own fit, costs per launch, torch's graph split into launch and node, the decode steps'
ratios, demo 2 per layer, and a saved run's framework cases through ``analysis.load``'s checks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure

from analysis.compare import POINT_KEYS
from analysis.figures.ladder import ladder
from analysis.frameworks import (
    CALL_COLUMNS,
    caller,
    demo2_by_layer,
    fit_calls,
    fit_torch_graph,
    launch_costs,
    step_times,
    summary_lines,
)
from analysis.launch import DEMO2_BATCH, DEMO2_CTX, DEMO2_GPU
from analysis.load import load_runs
from benchmarks.records import coordinates
from model.launch import SEED_GAP_S, UNFUSED, compose
from model.laws import fixed_overhead_time
from model.llm import LLAMA32_1B
from model.roofline import decode_step

MACHINE = "test-machine"
S_PER_ELEMENT = 1e-10
CALLERS = {("numpy", math.nan): 400e-9, ("torch", 1.0): 2e-6, ("torch", 8.0): 2.4e-6, ("jax", math.nan): 8e-6}


def _call_rows() -> list[dict[str, object]]:
    rows = []
    for (framework, threads), t0_s in CALLERS.items():
        for n in (4**k for k in range(9)):
            calls = 64 if n <= 1024 else 1
            per_call = float(fixed_overhead_time(n, t0_s, 1 / S_PER_ELEMENT))
            rows.append(
                {
                    "machine_id": MACHINE,
                    "case": "framework_call",
                    "device": "cpu",
                    "op": f"{framework}.add",
                    "framework": framework,
                    "threads": threads,
                    "n": n,
                    "n_calls": calls,
                    "bytes": 8 * n * calls,
                    "min": calls * per_call,
                    "median": calls * per_call,
                    "core_cache_bytes": 2 * 2**20,
                    "llc_bytes": 32 * 2**20,
                }
            )
    return rows


def _launch_rows() -> list[dict[str, object]]:
    rows = []
    for layer, framework, n_args, n_kernels, host_s in (
        ("torch", "torch", math.nan, 256, 5e-6),
        ("triton", "triton", 0, 256, 3e-6),
        ("triton", "triton", 13, 256, 4e-6),
        ("jax", "jax", 0, 256, 9e-6),
        ("torch_graph", "torch", math.nan, 1, 10e-6 + 1e-6),
        ("torch_graph", "torch", math.nan, 256, 10e-6 + 256e-6),
    ):
        rows.append(
            {
                "machine_id": MACHINE,
                "case": "framework_launch",
                "device": "cuda",
                "framework": framework,
                "layer": layer,
                "n_args": n_args,
                "n_kernels": n_kernels,
                "median": host_s * n_kernels if layer != "torch_graph" else host_s,
                "gpu_time_s": math.nan,
            }
        )
    return rows


def _step_rows() -> list[dict[str, object]]:
    return [
        {
            "machine_id": MACHINE,
            "case": "framework_step",
            "device": "cpu",
            "framework": framework,
            "compiler": compiler,
            "config": "tiny",
            "median": seconds,
            "min": seconds,
            "bytes": 10**8,
        }
        for framework, compiler, seconds in (
            ("numpy", None, 0.040),
            ("torch", None, 0.050),
            ("torch", "torch.compile", 0.030),
            ("jax", None, 0.080),
            ("jax", "jax.jit", 0.020),
        )
    ]


def test_each_callers_law_is_fitted_by_the_host_fit_and_ratioed_to_numpy() -> None:
    table = fit_calls(pd.DataFrame(_call_rows()))
    assert list(table.columns) == list(CALL_COLUMNS)
    by_caller = table.set_index("caller")
    for (framework, threads), t0_s in CALLERS.items():
        row = by_caller.loc[caller(framework, threads)]
        assert row["fit_error"] is None
        assert row["t0_s"] == pytest.approx(t0_s, rel=1e-6)
        assert row["t0_ratio"] == pytest.approx(t0_s / 400e-9, rel=1e-6)
    assert list(by_caller.index) == ["numpy", "torch (1 thread)", "torch (8 threads)", "jax"]


def test_launch_costs_divide_once_and_the_graph_splits_into_launch_and_node() -> None:
    costs = launch_costs(pd.DataFrame(_launch_rows()))
    torch = costs[costs["layer"] == "torch"].iloc[0]
    assert torch["host_s"] == pytest.approx(5e-6)
    launch_s, node_s = fit_torch_graph(costs, MACHINE)
    assert launch_s == pytest.approx(10e-6) and node_s == pytest.approx(1e-6)
    assert math.isnan(fit_torch_graph(costs[costs["n_kernels"] == 1], MACHINE)[0])


def test_demo2_charges_each_layers_cost_per_launch() -> None:
    table = demo2_by_layer(launch_costs(pd.DataFrame(_launch_rows())))
    row = table[(table["layer"] == "torch") & (table["plan"] == UNFUSED.name)].iloc[0]
    t_gpu_s = decode_step(LLAMA32_1B, DEMO2_GPU, DEMO2_BATCH, DEMO2_CTX).t_step
    step = compose(t_gpu_s, UNFUSED.n_kernels(LLAMA32_1B), 5e-6, SEED_GAP_S, DEMO2_BATCH)
    assert row["step_s"] == pytest.approx(step.serial_s)
    assert row["launch_share"] == pytest.approx(1 - t_gpu_s / step.serial_s)
    triton = table[(table["layer"] == "triton") & (table["plan"] == UNFUSED.name)].iloc[0]
    assert triton["launch_s"] == pytest.approx(3e-6), "the empty kernel's cost, not the 13-argument one"
    graph = table[table["layer"] == "torch_graph"]
    assert (graph["launch_share"] < row["launch_share"]).all()


def test_step_times_compare_with_numpy_and_with_the_eager_step() -> None:
    table = step_times(pd.DataFrame(_step_rows())).set_index(["framework", "compiler"])
    assert table.loc[("jax", "jax.jit"), "vs_numpy"] == pytest.approx(0.5)
    assert table.loc[("jax", "jax.jit"), "vs_eager"] == pytest.approx(0.25)
    assert table.loc[("torch", "torch.compile"), "vs_eager"] == pytest.approx(0.6)


def test_the_summary_and_the_figure_show_both_sides() -> None:
    frame = pd.DataFrame(_call_rows() + _launch_rows() + _step_rows())
    text = "\n".join(summary_lines(frame))
    assert "20.00 × numpy" in text  # jax: 8 µs over 400 ns
    assert "torch_graph" in text and "loses" in text
    figure = ladder(frame, fit_calls(frame))
    assert isinstance(figure, Figure) and len(figure.axes) == 2
    assert ladder(pd.DataFrame(), fit_calls(pd.DataFrame())) is None


def test_a_saved_framework_case_passes_the_loaders_checks(tmp_path: Path) -> None:
    """Coordinates the benchmark writes, in a minimal saved run, come through ``load_runs`` as columns."""
    root = Path(__file__).resolve().parent / "data"
    saved = sorted(root.glob("*.json"))
    if not saved:
        pytest.skip("no committed run to borrow machine_info from")
    doc = json.loads(saved[0].read_text(encoding="utf-8"))
    template = doc["benchmarks"][0]
    bench = {
        **template,
        "name": "test_framework_call[torch-threads1-n1-x64]",
        "fullname": "benchmarks/test_framework_calls.py::test_framework_call[torch-threads1-n1-x64]",
        "extra_info": coordinates(
            "framework_call",
            "cpu",
            op="torch.add",
            framework="torch",
            threads=1,
            dtype="float32",
            n=1,
            n_calls=64,
            bytes=512,
            flops=64,
        ),
    }
    doc["benchmarks"] = [bench]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = load_runs([path], samples=False)
    assert not result.problems, result.problems
    row = result.frame.iloc[0]
    assert (row["case"], row["framework"], row["threads"]) == ("framework_call", "torch", 1)
    del bench["extra_info"]["framework"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    problems = load_runs([path], samples=False).problems
    assert "dropped: extra_info.framework is missing (every framework_call case records it)" in problems[0]


def test_compare_tells_the_callers_apart() -> None:
    """Two PyTorch callers differ only in ``threads``, the steps only in ``framework`` and ``compiler``: all
    three name a compared point, so ``compare`` never pools them."""
    assert {"framework", "threads", "compiler"} <= set(POINT_KEYS)
