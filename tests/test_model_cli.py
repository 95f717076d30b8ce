"""python -m model: the demos' tables, JSON rows and one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from model.__main__ import main

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_default_run_prints_the_seed_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    for figure in (
        "944",
        "1,000",
        "10,000",
        "16,896",
        "135,168",
        "387",
        "259",
        "195",
        "131",
        "15.0 GB",
        "4.52 ms",
        "10%–41%",
        "26%–68%",
        "1.05 ms",
        "1.56 ms",
    ):
        assert figure in out, figure
    assert "Demo 1" in out and "Demo 2" in out


def test_json_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "--launch-us", "8", "--models", "Llama-3.2-1B"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["config"]["launch_s"] == [8e-6]
    rows = {row["plan"]: row for row in document["decode"]}
    assert rows["fused"]["n_kernels"] == 131
    assert rows["fused"]["overlapped_s"] == pytest.approx(1.048e-3)
    assert rows["megakernel"]["n_kernels"] == 1
    assert {row["n"] for row in document["scaling"]} == {8, 132, 16_896, 135_168}


def test_options_change_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--gpu", "h200", "--ctx", "4096", "--batch", "8", "--models", "Qwen2.5-7B"]) == 0
    out = capsys.readouterr().out
    assert "H200-SXM" in out and "ctx = 4096" in out and "batch = 8" in out and "Qwen2.5-7B" in out


@pytest.mark.parametrize(
    ("argv", "mentions"),
    [
        (["--gpu", "nope"], "nope"),
        (["--models", "gpt-9"], "gpt-9"),
        (["--ctx", "0"], "--ctx"),
        (["--batch", "-2"], "--batch"),
        (["--launch-us", "fast"], "--launch-us"),
        (["--serial", "2"], "--serial"),
    ],
)
def test_bad_command_line_is_one_error_line(
    argv: list[str], mentions: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ") and mentions in lines[0]


def test_module_entry_point_exits_2_without_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "model", "--gpu", "nope"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: unknown GPU 'nope'")
    assert "Traceback" not in result.stderr
