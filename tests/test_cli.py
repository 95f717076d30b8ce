"""``python -m analysis``: subcommands, their --help, one-line warnings and errors, exit codes, and that the
input folder is only ever read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analysis.__main__ import main
from tests.test_load import CPU_RUNS, DATA, as_other_machine, tree_digest


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    """A pytest-benchmark storage folder: the real CPU run, the same run as a second machine, one bad file."""
    assert CPU_RUNS, f"no real CPU run (cpu-*.json) under {DATA}"
    folder = tmp_path / ".benchmarks" / "Linux-CPython-3.11-64bit"
    folder.mkdir(parents=True)
    shutil.copy(CPU_RUNS[0], folder / "0001_laptop.json")
    doc = json.loads(CPU_RUNS[0].read_text(encoding="utf-8"))
    (folder / "0002_desktop.json").write_text(json.dumps(as_other_machine(doc, "desktop")), encoding="utf-8")
    (folder / "0003_broken.json").write_text('{"benchmarks": [', encoding="utf-8")
    return tmp_path / ".benchmarks"


@pytest.mark.parametrize("command", ["report", "compare", "plot"])
def test_help_of_each_subcommand(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert f"python -m analysis {command}" in out
    assert "PATHS" in out
    assert ".benchmarks" in out


def test_report_warns_per_bad_file_uses_the_rest_and_reads_only(
    storage: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree_digest(storage)
    out_dir = tmp_path / "out"
    assert main(["report", str(storage), "--out", str(out_dir)]) == 0
    captured = capsys.readouterr()
    warnings = captured.err.strip().splitlines()
    assert len(warnings) == 1
    assert "warning" in warnings[0]
    assert "0003_broken.json" in warnings[0]
    text = (out_dir / "report.md").read_text(encoding="utf-8")
    assert "desktop" in text
    assert "(baseline)" in text
    assert (out_dir / "figures" / "machines.png").is_file()
    assert tree_digest(storage) == before


def test_compare_prints_the_machine_table_with_a_chosen_baseline(
    storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(storage), "--baseline", "desktop", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("- A  desktop") for line in lines)  # the baseline is group A
    header = next(line for line in lines if line.startswith("| figure"))
    assert header.split("|")[2].strip() == "A (baseline)"
    t0 = next(line for line in lines if line.startswith("| t0, fixed cost per call"))
    # Identical samples on both machines: ratio 1, and the test finds no difference.
    assert t0.endswith(" ×1.00 ~ |")
    assert "- ~ within noise (p ≥ 0.01)" in lines


def test_plot_writes_png_and_svg(storage: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "figs"
    assert main(["plot", str(storage), "--out", str(out_dir)]) == 0
    captured = capsys.readouterr()
    printed = [Path(line) for line in captured.out.splitlines()]
    assert printed
    # Which runs the figures show goes to stderr, beside the load warnings.
    assert "python -m analysis: Runs used: 2 (2 machines): " in captured.err
    assert all(path.is_file() and path.parent == out_dir for path in printed)
    assert {path.suffix for path in printed} == {".png", ".svg"}


def test_nothing_usable_is_one_error_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.json").write_text("not json", encoding="utf-8")
    assert main(["compare", str(tmp_path / "notes.json"), str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3
    warnings = err[:2]
    assert all(line.startswith("python -m analysis: warning:") for line in warnings)
    assert any("notes.json: is not valid JSON" in line for line in warnings)
    assert any("missing: no such file or folder" in line for line in warnings)
    assert err[2].startswith("python -m analysis: error: no usable pytest-benchmark run")


def test_unknown_baseline_and_output_inside_storage_are_errors(
    storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(storage), "--baseline", "nosuchmachine"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("python -m analysis: error: --baseline 'nosuchmachine' names no machine")
    before = tree_digest(storage)
    assert main(["report", str(storage), "--out", str(storage / "report")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"python -m analysis: error: --out {storage / 'report'} lies inside the input folder {storage}; "
        "storage is only read"
    ]
    assert tree_digest(storage) == before


def test_default_path_is_dot_benchmarks(
    storage: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(storage.parent)
    assert main(["compare"]) == 0
    assert "desktop" in capsys.readouterr().out


def test_no_samples_flag_leaves_differences_unjudged(
    storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(storage), "--no-samples", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    t0 = next(line for line in out.splitlines() if line.startswith("| t0, fixed cost per call"))
    assert t0.endswith(" ×1.00 ? |")
    assert "- ? not judged: no raw samples (not saved, or skipped) (t0, fixed cost per call" in out
