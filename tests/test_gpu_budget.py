"""``tools/gpu_budget.py``: docs/gpu.md's budget table is what the steps of ``.ci/gpu-run`` collect today,
each limit at least 1.5 × its estimate and the limits within the 480 s budget; the GPU run's own measurement
comes first; and between them the benchmark steps measure every case of ``benchmarks`` once (but the framework
ladder's CPU cases, measured on the CPU machines)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("gpu_budget", ROOT / "tools" / "gpu_budget.py")
gpu_budget = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("gpu_budget", gpu_budget)  # its dataclass looks its module up while being made
_SPEC.loader.exec_module(gpu_budget)


def _run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *arguments],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def figures() -> dict:
    """The tool's figures: every step's limit, collected cases and estimate, and the problems it found."""
    done = _run("tools/gpu_budget.py", "--json")
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_the_docs_table_is_the_one_the_collected_cases_give(figures: dict) -> None:
    assert figures["table"] in (ROOT / "docs" / "gpu.md").read_text(encoding="utf-8")
    assert not [problem for problem in figures["problems"] if "block differs" in problem]


def test_every_limit_is_one_and_a_half_estimates_and_all_fit_the_budget(figures: dict) -> None:
    assert figures["problems"] == []
    steps = figures["steps"]
    assert all(step["limit_s"] >= 1.5 * step["estimate_s"] for step in steps)
    assert sum(step["limit_s"] for step in steps) <= 480


def test_the_most_valuable_measurement_comes_first_and_holds_cupy_and_the_decode_step(figures: dict) -> None:
    names = [step["name"] for step in figures["steps"]]
    assert names == ["environment", "gpu-tests", "gpu-bench", "frameworks", "cpu-bench", "gpu-check"]
    core = next(step["cases"] for step in figures["steps"] if step["name"] == "gpu-bench")
    for function in ("test_launch_batch", "test_graph_replay", "test_launch_args", "test_cuda_decode_step"):
        assert any(f"::{function}[" in case for case in core), function
    assert all("test_cuda" in case or "::test_cuda_" in case for case in core)


def test_the_benchmark_steps_measure_every_case_once(figures: dict) -> None:
    done = _run(
        "-m", "pytest", "benchmarks", "--ignore=benchmarks/test_framework_calls.py", "--collect-only", "-q"
    )
    every = set(gpu_budget.with_dram_case(tuple(line for line in done.stdout.splitlines() if "::" in line)))
    steps = {step["name"]: step["cases"] for step in figures["steps"]}
    measured = steps["gpu-bench"] + steps["frameworks"] + steps["cpu-bench"]
    assert sorted(measured) == sorted(every), "a case measured twice or not at all"


def test_the_dram_size_is_counted_whatever_this_machine_s_cache() -> None:
    """The GPU server's last-level cache asks for ``ufunc_size``'s DRAM size; a machine whose cache does not
    (this VM's 32 MiB) gets the same table."""
    from benchmarks.test_numpy_calls import SIZES

    sizes = tuple(f"benchmarks/test_numpy_calls.py::test_ufunc_size[{n}]" for n in SIZES)
    other = ("benchmarks/test_host_bandwidth.py::test_read",)
    assert gpu_budget.with_dram_case(other + sizes) == (*other, *sizes, gpu_budget.DRAM_CASE)
    past = (*sizes, "benchmarks/test_numpy_calls.py::test_ufunc_size[33554432]")
    assert gpu_budget.with_dram_case(past) == past
    assert gpu_budget.with_dram_case(other) == other


def _step(name: str, limit_s: int, estimate_s: float) -> object:
    return gpu_budget.Step(name, limit_s, ("x",), ("a", "b"), estimate_s)


def test_a_limit_under_its_headroom_or_over_the_budget_is_named() -> None:
    assert gpu_budget.check([_step("gpu-bench", 150, 100.0)]) == []
    assert gpu_budget.check([_step("gpu-bench", 149, 100.0)]) == [
        "gpu-bench: limit 149 s is under 1.5 × its estimate 100 s"
    ]
    assert gpu_budget.check([_step("a", 300, 10.0), _step("b", 181, 10.0)]) == [
        "the limits add up to 481 s, over the 480 s budget"
    ]


def test_the_block_is_replaced_and_a_document_without_one_refused() -> None:
    text = "before\n<!-- generated: gpu_budget -->\nold\n<!-- end generated -->\nafter\n"
    assert gpu_budget.regenerated(text, "new\n") == text.replace("old\n", "new\n")
    with pytest.raises(ValueError, match="no <!-- generated: gpu_budget --> block"):
        gpu_budget.regenerated("no block here\n", "new\n")


def test_each_case_has_an_estimate_and_a_cpu_case_costs_the_committed_runs_average() -> None:
    record = json.loads(gpu_budget.CPU_RUN.read_text(encoding="utf-8"))["launchbench_run"]
    average = record["conditions"]["during"]["wall_s"] / record["cases"]["measured"]
    assert gpu_budget.case_cost_s("benchmarks/test_numpy_ops.py::test_op[x]") == pytest.approx(average)
    assert gpu_budget.case_cost_s("benchmarks/test_cuda_launch.py::test_sync") == 0.6
    with pytest.raises(ValueError, match=r"no estimate for the case elsewhere/test_x\.py::t"):
        gpu_budget.case_cost_s("elsewhere/test_x.py::t")
