"""``.ci/gpu_check.py RUN.json FRAMEWORKS.json``: the framework ladder's run read back beside the suite's —
its record, that its GPU cases ran, and the ladder's tables (cost per launch per layer, demo 2 per layer)."""

from __future__ import annotations

import copy
import runpy
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.run_record import RUN_RECORD_KEY
from tests.test_gpu_run_script import CHECK, _case, _write, synthetic_complete_gpu_run

#: Cost per launch (s) of each layer's smallest call, as ``tests/test_frameworks_analysis.py`` sets them.
LAYERS = {"torch": 5e-6, "triton": 3e-6, "jax": 9e-6}


def _ladder_run() -> dict:
    """SYNTHETIC: the frameworks step's saved run: torch's tiny op, Triton and JAX, 256 launches a call."""
    run = synthetic_complete_gpu_run()
    run["benchmarks"] = [
        _case(
            f"framework_launch[{layer}]",
            256 * seconds,
            case="framework_launch",
            op=f"{layer} empty",
            framework=layer,
            layer=layer,
            n_args=0,
            n_kernels=256,
        )
        for layer, seconds in LAYERS.items()
    ]
    record = run[RUN_RECORD_KEY]
    record["facts"] = {}
    record["cases"] = record["cases"] | {"planned": 3, "measured": 3}
    return run


@pytest.fixture(scope="module")
def gpu_check() -> Callable[[list[str]], int]:
    return runpy.run_path(str(CHECK), run_name="gpu_check")["main"]


def test_the_ladder_is_read_back_with_its_demo_2(
    tmp_path: Path, gpu_check: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    suite = _write(tmp_path, synthetic_complete_gpu_run(), "gpu-run.json")
    ladder = _write(tmp_path, _ladder_run(), "frameworks.json")
    code = gpu_check([str(suite), str(ladder)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"framework ladder: {ladder}" in out
    assert "run completed: 3 measured, 0 failed, 0 skipped of 3 planned" in out
    for layer in LAYERS:
        assert f", {layer}: 0 args" in out
        assert f"with {layer} at " in out and "of its step to launches" in out


def test_a_ladder_whose_cases_all_skipped_fails_and_says_where_to_look(
    tmp_path: Path, gpu_check: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    suite = _write(tmp_path, synthetic_complete_gpu_run(), "gpu-run.json")
    empty = copy.deepcopy(_ladder_run())
    empty["benchmarks"] = []
    ladder = _write(tmp_path, empty, "frameworks.json")
    assert gpu_check([str(suite), str(ladder)]) == 1
    err = capsys.readouterr().err
    assert f"FAILED: {ladder}: no framework_launch case ran" in err


def test_an_unreadable_ladder_is_refused_in_one_line(
    tmp_path: Path, gpu_check: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    suite = _write(tmp_path, synthetic_complete_gpu_run(), "gpu-run.json")
    broken = tmp_path / "frameworks.json"
    broken.write_text('{"benchmarks": [', encoding="utf-8")
    assert gpu_check([str(suite), str(broken)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(broken) in err[0] and "cannot be read as a saved run" in err[0]
