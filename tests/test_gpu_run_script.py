"""``.ci/gpu-run``, the one prepared GPU run, checked where no GPU is: a GPU session has minutes, not hours,
so a shell error or a check that crashes instead of saying why must be caught here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from analysis.launch import cuda_rows, fit_launch
from analysis.load import load_runs
from tests.test_load import DATA
from tests.test_report import synthetic_gpu_run

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "gpu-run"


def _heredoc(step: str) -> str:
    """The Python source the script feeds to ``step`` through a ``<<'PY'`` here-document."""
    match = re.search(rf"step {step} .*<<'PY'\n(.*?)\nPY\n", SCRIPT.read_text(encoding="utf-8"), re.DOTALL)
    assert match, f"{SCRIPT}: no here-document for step {step}"
    return match.group(1)


def _gpu_check(run: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-", str(run)],
        input=_heredoc("gpu-check"),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def test_script_parses() -> None:
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_check_step_fails_with_a_reason_on_a_run_without_gpu_cases() -> None:
    run = DATA / "cpu-2core-quick.json"
    done = _gpu_check(run)
    assert done.returncode == 1
    assert f"{run}: no GPU launch cases" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_step_passes_and_prints_the_fits_of_a_gpu_run(tmp_path: Path) -> None:
    run = tmp_path / "synthetic-gpu.json"  # SYNTHETIC: tests/test_report.py's made-up GPU, not a measurement
    run.write_text(json.dumps(synthetic_gpu_run()), encoding="utf-8")
    done = _gpu_check(run)
    assert done.returncode == 0, done.stderr
    fits = fit_launch(cuda_rows(load_runs([run], samples=True).frame))
    assert len(fits) >= 5
    for quantity in fits["quantity"]:  # every figure the run can fit is printed (and none is NaN: exit 0)
        assert re.search(rf"^\s*{quantity}\s", done.stdout, re.MULTILINE), quantity


def test_usable_step_says_why_cuda_is_not() -> None:
    match = re.search(
        r"step cuda-usable \d+ \"\$PYTHON\" -c '(.*?)'\n", SCRIPT.read_text(encoding="utf-8"), re.DOTALL
    )
    assert match, f"{SCRIPT}: no cuda-usable step"
    done = subprocess.run(
        [sys.executable, "-c", match.group(1)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    from benchmarks.cuda import unavailable_reason

    reason = unavailable_reason()
    if reason is None:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 1
        assert done.stderr.strip() == f"CUDA unusable: {reason}"
