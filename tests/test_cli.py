"""``python -m analysis``: subcommands, their --help, one-line warnings and errors, exit codes, that the
input folder is only ever read, that ``--out`` is checked before any work and that ``report`` and ``plot``
replace only their own files, and that any terminal encoding works."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.__main__ import main
from tests.test_load import CPU_RUNS, DATA, as_other_machine, tree_digest


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pytest-benchmark storage folder: the real CPU run, the same run as a second machine, one bad file.

    Made once for the module: every test only reads it (those that check so compare its digest before and
    after), and one folder means one set of rows, so what the first command computed from them
    (``analysis.memo``) the later ones, the commands started as processes too, read back."""
    assert CPU_RUNS, f"no real CPU run (cpu-*.json) under {DATA}"
    folder = tmp_path_factory.mktemp("storage") / ".benchmarks" / "Linux-CPython-3.11-64bit"
    folder.mkdir(parents=True)
    shutil.copy(CPU_RUNS[0], folder / "0001_laptop.json")
    doc = json.loads(CPU_RUNS[0].read_text(encoding="utf-8"))
    (folder / "0002_desktop.json").write_text(json.dumps(as_other_machine(doc, "desktop")), encoding="utf-8")
    (folder / "0003_broken.json").write_text('{"benchmarks": [', encoding="utf-8")
    return folder.parent


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
    # Identical samples on both machines: ratio 1, no change (one run a side: inconclusive, never changed).
    assert t0.endswith(" ×1.00 ~ |")
    assert any(line.startswith("- ~ inconclusive: ") for line in lines)


def test_plot_writes_png_and_svg(storage: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "figs"
    assert main(["plot", str(storage), "--out", str(out_dir), "--formats", "png,svg"]) == 0
    captured = capsys.readouterr()
    printed = [Path(line) for line in captured.out.splitlines()]
    assert printed
    # Which runs the figures show goes to stderr, beside the load warnings.
    assert "python -m analysis: Runs used: 2 (2 machines): " in captured.err
    assert all(path.is_file() and path.parent == out_dir / "figures" for path in printed)
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
        f"python -m analysis: error: --out {storage / 'report'} lies inside the run storage {storage} of "
        f"input {storage}; saved runs are only read: choose a folder outside it"
    ]
    assert tree_digest(storage) == before


def test_default_path_is_dot_benchmarks(
    storage: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(storage.parent)
    assert main(["compare"]) == 0
    assert "desktop" in capsys.readouterr().out


def test_no_samples_flag_still_judges_run_against_run(
    storage: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A verdict rests on each run's own figure, which needs no raw samples: --no-samples judges alike."""
    assert main(["compare", str(storage), "--no-samples", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    t0 = next(line for line in out.splitlines() if line.startswith("| t0, fixed cost per call"))
    assert t0.endswith(" ×1.00 ~ |")
    assert "not judged: no per-run value" not in out


def test_a_bad_command_line_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--no-such-option"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "python -m analysis: error: unrecognized arguments: --no-such-option"
    ]
    assert main(["nonsense"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("python -m analysis: error: argument COMMAND: invalid choice: 'nonsense'")


PLATFORM = "Linux-CPython-3.11-64bit"


@pytest.mark.parametrize(
    ("command", "paths", "out", "said"),
    [
        (
            "report",
            ["{storage}/**/*.json"],
            "{storage}/rep",
            "lies inside the run storage {storage} of input ",
        ),
        (
            "plot",
            ["{storage}/" + PLATFORM + "/0001_laptop.json"],
            "{storage}/L",
            "lies inside the run storage",
        ),
        (
            "report",
            ["{storage}/" + PLATFORM + "/0001_laptop.json", "{storage}/" + PLATFORM + "/0002_desktop.json"],
            "{storage}/" + PLATFORM,
            "lies inside the run storage",
        ),
        ("report", ["{storage}"], "", "--out '' names no folder"),
        ("report", ["{storage}"], "/dev/null", "--out /dev/null is a character device, not a folder"),
        ("plot", ["{storage}"], "{tmp}/afile", "is a file, not a folder"),
        ("report", ["{storage}"], "{tmp}/afile/sub", "cannot be created as a folder (Not a directory)"),
    ],
)
def test_a_bad_out_is_one_line_before_anything_is_loaded(
    storage: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    paths: list[str],
    out: str,
    said: str,
) -> None:
    """The storage holds a broken file: had anything been loaded, its warning would be printed first."""
    (tmp_path / "afile").write_text("mine", encoding="utf-8")
    before = tree_digest(storage)
    fill = {"storage": storage, "tmp": tmp_path}
    argv = [command, *(path.format(**fill) for path in paths), "--out", out.format(**fill)]
    assert main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("python -m analysis: error: --out ")
    assert said.format(**fill) in line
    assert tree_digest(storage) == before
    assert (tmp_path / "afile").read_text(encoding="utf-8") == "mine"


def test_an_out_created_for_a_command_that_failed_is_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "notes.json").write_text("not json", encoding="utf-8")
    out = tmp_path / "new" / "report"
    assert main(["report", str(tmp_path / "runs"), "--out", str(out)]) == 1
    assert "error: no usable launchbench run" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_report_rerun_replaces_its_own_files_and_refuses_a_hand_edit(
    storage: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("not the report's", encoding="utf-8")
    both = ["--formats", "png,svg"]  # each figure in two files
    assert main(["report", str(storage), "--out", str(out), *both]) == 0
    two_machines = sorted(p.name for p in (out / "figures").iterdir())
    assert "machines.png" in two_machines  # drawn only when there are machines to compare
    laptop = storage / PLATFORM / "0001_laptop.json"
    capsys.readouterr()
    assert main(["report", str(laptop), "--out", str(out), *both]) == 0
    printed = capsys.readouterr().out
    assert printed.endswith("; 2 file(s) of the earlier report removed)\n")
    assert sorted(p.name for p in (out / "figures").iterdir()) == [
        name for name in two_machines if not name.startswith("machines.")
    ]
    assert (out / "mine.txt").read_text(encoding="utf-8") == "not the report's"

    edited = (out / "report.md").read_text(encoding="utf-8") + "\nMy conclusions.\n"
    (out / "report.md").write_text(edited, encoding="utf-8")
    assert main(["report", str(storage), "--out", str(out)]) == 1
    (line,) = capsys.readouterr().err.splitlines()  # refused before loading: no warning about the bad file
    assert line == (
        f"python -m analysis: error: {out / 'report.md'} was changed since this command wrote it (edited by "
        "hand?); keep your copy elsewhere, or pass --force to replace it"
    )
    assert (out / "report.md").read_text(encoding="utf-8") == edited
    assert main(["report", str(storage), "--out", str(out), "--force"]) == 0
    assert "My conclusions." not in (out / "report.md").read_text(encoding="utf-8")
    assert (out / "mine.txt").read_text(encoding="utf-8") == "not the report's"


def test_plot_never_replaces_a_file_it_did_not_write(
    storage: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "figs"
    (out / "figures").mkdir(parents=True)
    mine = out / "figures" / "time_vs_size.png"
    mine.write_bytes(b"my own figure")
    assert main(["plot", str(storage), "--out", str(out)]) == 1
    line = capsys.readouterr().err.splitlines()[-1]
    assert line == (
        f"python -m analysis: error: {mine} exists and was not written by this "
        f"command (no record of it in {out / '.launchbench-output.json'}); move it away, or pass --force to "
        "replace it"
    )
    assert mine.read_bytes() == b"my own figure"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "figures",
        "figures/time_vs_size.png",
    ]  # nothing half-written


ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "env",
    [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}],
    ids=["PYTHONIOENCODING=ascii", "LC_ALL=C"],
)
def test_any_terminal_encoding_works(storage: Path, tmp_path: Path, env: dict[str, str]) -> None:
    """stdout and stderr that cannot encode µ or ×: every line in ASCII spellings, no traceback."""
    environment = {
        key: value for key, value in os.environ.items() if key not in ("LANG", "LC_ALL", "LC_CTYPE")
    }
    environment.update(env, PYTHONPATH=str(ROOT))
    # A run file whose name cannot be encoded either, named in a warning (in a folder of its own, read with
    # the storage: the other tests read the storage as it is).
    more = tmp_path / "more"
    more.mkdir()
    shutil.copy(storage / PLATFORM / "0003_broken.json", more / "0004_µ×.json")

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run(
            [sys.executable, "-m", "analysis", *args],
            capture_output=True,
            env=environment,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode("ascii", "replace")
        assert done.stdout.isascii() and done.stderr.isascii()
        assert b"Traceback" not in done.stderr
        return done

    compare = run("compare", str(storage), str(more), "--format", "markdown")
    out = compare.stdout.decode("ascii")
    t0 = next(line for line in out.splitlines() if line.startswith("| t0, fixed cost per call"))
    assert t0.endswith(" x1.00 ~ |")  # ×1.00, spelled for ASCII
    assert any(line.startswith("| n1/2 = t0*rinf (count) |") for line in out.splitlines())  # n½ = t0·r∞
    warnings = compare.stderr.decode("ascii").splitlines()
    (warning,) = [line for line in warnings if "0004_" in line]  # the name as this locale decodes it, escaped
    assert warning.startswith("python -m analysis: warning: ") and warning.endswith("line 1 column 17")
    report = run("report", str(storage), str(more), "--out", str(tmp_path / "rep"))
    assert report.stdout.decode("ascii").startswith(f"wrote {tmp_path / 'rep' / 'report.md'} (")
    assert "µs" in (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")  # the file stays UTF-8
    assert run("report", "--help").stdout.startswith(b"usage: python -m analysis report")
