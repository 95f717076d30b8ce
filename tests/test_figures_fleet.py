"""Figures at fleet scale (issue 22): many runs of a machine are drawn as that machine's summary (a median
marker per point and the fastest-to-slowest-run bar), never a marker per run, and a fleet's dispatch ladder
as one bar per caller over its machines; figures are drawn side by side
in worker processes, giving the same files, byte for byte, as drawn one after another; PNG is written by
default and SVG only when asked, and report.md links exactly the files written; a finished figure is laid
out once.

The fleet is ``tools/fanout_runs.py`` copies of a committed real quick run (perturbed timings: made up,
never saved as data): the three figures of a quick fleet's report, drawn in a fraction of a full run's time;
the ladder's fleet is copies of the committed full run.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from analysis.__main__ import main
from analysis.compare import figure_table
from analysis.figures import (
    FIGURES_DIR,
    PREDICTION_FIGURES,
    cpu,
    figure_jobs,
    ladder,
    start_figures,
    write_figures,
)
from analysis.figures.style import save
from analysis.fits import fit_all, with_predictions
from analysis.frameworks import fit_calls
from analysis.host import per_numpy_call
from analysis.load import forks, load_runs, pool_context
from analysis.runs import select_runs
from tests.test_plots_collisions import DATA, REAL_RUN, _fanout

#: The run the fleet is copied from: a quick run of the CPU suite (time per call vs size, many vs one).
QUICK_RUN = DATA / "cpu-2core-quick.json"
#: How the commands are told to read the fleet: its quick runs pooled, no raw samples.
QUICK = ("--no-samples", "--include-quick")
#: Machines of the fleet and runs of each: several runs per machine, so each point is a summary of runs.
MACHINES = 2
RUNS = 6


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _fanout(QUICK_RUN, tmp_path_factory.mktemp("fleet") / "fleet", MACHINES, copies=MACHINES * RUNS)


@pytest.fixture(scope="module")
def inputs(fleet: Path) -> tuple[pd.DataFrame, object, pd.DataFrame]:
    frame = select_runs(load_runs([fleet], samples=False), include_quick=True).result.frame
    fits = fit_all(frame)
    return frame, fits, figure_table(frame, fits, None)


@pytest.fixture(scope="module")
def time_vs_size(inputs):
    """The fleet's time_vs_size figure, as ``build_figures`` builds it (its job: ``cpu.time_vs_size`` of
    the frame and the host fits); the tests below only read it."""
    frame, fits, table = inputs
    name, args = figure_jobs(frame, fits, table)["time_vs_size"]
    assert name == "cpu.time_vs_size"
    return cpu.time_vs_size(*args)


@pytest.fixture(scope="module")
def serial(inputs, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The fleet's figures drawn one after another here (``workers=1``), as PNG and SVG: the reference the
    figures drawn by workers are checked against (a figure's PNG is the same whether an SVG is written
    beside it or not: ``test_a_figure_is_laid_out_once_and_a_second_format_draws_it_alike``)."""
    frame, fits, table = inputs
    return write_figures(frame, fits, table, tmp_path_factory.mktemp("serial"), ("png", "svg"), workers=1)


def _digests(paths: list[Path]) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


def _links(report: Path) -> list[str]:
    return re.findall(r"\]\(([^)]+)\)", report.read_text(encoding="utf-8"))


# --- summaries, not every run's point -----------------------------------------------------------------------


def test_many_runs_of_a_machine_are_drawn_as_one_median_marker_and_one_bar_per_size(
    inputs, time_vs_size
) -> None:
    frame, _, _ = inputs
    figure = time_vs_size
    sizes = frame[(frame["case"] == "ufunc_size") & (frame["device"] == "cpu")]
    assert sizes.groupby("machine_id")["source"].nunique().min() == RUNS
    per_call = per_numpy_call(sizes)[0]
    ax = figure.axes[0]  # MACHINES <= MAX_SERIES: every machine in one panel
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    caps = {id(cap) for bar in bars for cap in bar.lines[1]}
    # The markers (filled: fitted, hollow: left out of the fits): one per machine and size, at its median.
    marked = sorted(
        (float(x), float(y))
        for line in ax.get_lines()
        if line.get_linestyle() == "None" and id(line) not in caps
        for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
    )
    medians = per_call.groupby([sizes["machine_id"], sizes["n"]]).median()
    expected = sorted((float(n), float(value)) for (_, n), value in medians.items())
    assert len(marked) == len(expected) == sizes.groupby(["machine_id", "n"]).ngroups
    np.testing.assert_allclose(np.array(marked), np.array(expected), rtol=1e-12)
    assert len(bars) == MACHINES
    assert "bar: fastest–slowest run" in [text.get_text() for text in figure.legends[0].get_texts()]


def test_the_bars_run_from_the_fastest_to_the_slowest_run(inputs, time_vs_size) -> None:
    frame, _, _ = inputs
    figure = time_vs_size
    sizes = frame[(frame["case"] == "ufunc_size") & (frame["device"] == "cpu")]
    spread = per_numpy_call(sizes)[0].groupby([sizes["machine_id"], sizes["n"]]).agg(["min", "max"])
    expected = sorted(zip(spread["min"], spread["max"], strict=True))
    drawn = sorted(
        (min(y0, y1), max(y0, y1))
        for container in figure.axes[0].containers
        if isinstance(container, ErrorbarContainer)
        for bars in container.lines[2]
        for (_, y0), (_, y1) in bars.get_segments()
    )
    assert len(drawn) == len(expected)
    np.testing.assert_allclose(np.array(drawn), np.array(expected), rtol=1e-9)


def test_a_fleet_s_dispatch_ladder_draws_one_bar_per_caller_over_its_machines(tmp_path: Path) -> None:
    """13 machines of 2 callers would be 26 bars, more than the panel's height labels: one bar per caller
    at the median t0 over the machines, its line from the fastest machine to the slowest."""
    fleet = _fanout(REAL_RUN, tmp_path / "fleet", 13, copies=13)
    frame = select_runs(load_runs([fleet], samples=False)).result.frame
    fitted = fit_calls(frame)
    calls = fitted[fitted["t0_s"].notna()]
    assert calls["machine_id"].nunique() == 13 and len(calls) > 24
    figure = ladder.ladder(frame, fitted)
    ax = figure.axes[0]
    t0 = calls.groupby("caller", sort=False)["t0_s"]
    assert [label.get_text() for label in ax.get_yticklabels()] == list(t0.median().index)
    widths = [bar.get_width() for bar in ax.patches]
    np.testing.assert_allclose(widths, t0.median().to_numpy(), rtol=1e-12)
    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    spans = sorted(sorted(x for x, _ in segment) for segment in bars.lines[2][0].get_segments())
    expected = sorted([low, high] for low, high in zip(t0.min(), t0.max(), strict=True))
    np.testing.assert_allclose(spans, expected, rtol=1e-12)
    assert "the median over 13 machines" in figure.get_supxlabel()  # the caption


# --- side by side, the same files ---------------------------------------------------------------------------


def test_figures_drawn_side_by_side_are_the_files_drawn_one_after_another(
    inputs, serial: list[Path], tmp_path: Path
) -> None:
    frame, fits, table = inputs
    parallel = write_figures(frame, fits, table, tmp_path / "parallel", ("png", "svg"), workers=2)
    assert [path.name for path in serial] == [path.name for path in parallel]  # reading order, both
    assert {path.suffix for path in serial} == {".png", ".svg"}
    assert _digests(serial) == _digests(parallel)
    assert all(path.parent == tmp_path / "parallel" / FIGURES_DIR for path in parallel)


def test_figures_started_before_the_table_are_the_files_drawn_one_after_another(
    inputs, serial: list[Path], tmp_path: Path
) -> None:
    """The report's order (issue 33): the figures but the table's start drawing in workers, the table is
    given later (``Drawing.finish``), and the files are those drawn one after another, in reading order."""
    frame, fits, table = inputs
    with start_figures(frame, fits, tmp_path / "early", ("png", "svg"), workers=2) as drawing:
        assert multiprocessing.active_children()  # drawing meanwhile
        early = drawing.finish(table)
    assert not multiprocessing.active_children()
    assert [path.name for path in serial] == [path.name for path in early]
    assert _digests(serial) == _digests(early)


def _report_order(frame: pd.DataFrame, folder: Path, formats: tuple[str, ...], workers: int) -> tuple:
    """The report's drawing (``analysis.report``): the fitted laws' figures started first, the predictions
    made beside them by a worker, the table's figure drawn here; (the files, the fits, whether a worker
    made the predictions and the figures it held back until the predictions' were added)."""
    fitted = fit_all(frame, predictions=False)
    beside = (with_predictions, (frame, fitted))
    with start_figures(
        frame, fitted, folder, formats, workers=workers, later=PREDICTION_FIGURES, beside=beside
    ) as drawing:
        by_worker, held = drawing._beside_future is not None, list(drawing._held)
        table = figure_table(frame, fitted, None)
        fits = drawing.beside_result()
        drawing.add(PREDICTION_FIGURES, fits)
        return drawing.finish(table), fits, by_worker, held


def test_figures_started_stage_by_stage_are_the_files_drawn_one_after_another(
    inputs, serial: list[Path], tmp_path: Path
) -> None:
    """The report's order (issue 33): the fitted laws' figures first, the predictions made by a worker
    meanwhile and their figures added (``Drawing.add``), the table's figure drawn by the command: the
    files drawn one after another, in reading order, and the predictions ``fit_all``'s."""
    frame, fits, _ = inputs
    files, made, by_worker, held = _report_order(frame, tmp_path / "staged", ("png", "svg"), workers=2)
    assert by_worker == forks(pool_context())  # forked workers (JAX, loaded by other tests, forbids them)
    assert bool(held) == by_worker  # one figure beside the predictions, the others after theirs
    assert [path.name for path in serial] == [path.name for path in files]
    assert _digests(serial) == _digests(files)
    for name in ("host", "many_vs_one", "launch", "spin", "decode_demo", "decode_steps", "calls"):
        pd.testing.assert_frame_equal(getattr(made, name), getattr(fits, name))
    assert not multiprocessing.active_children()


def test_a_figure_left_for_later_and_never_added_is_an_error(inputs, tmp_path: Path) -> None:
    frame, fits, table = inputs
    with start_figures(frame, fits, tmp_path, ("png",), workers=1, later=PREDICTION_FIGURES) as drawing:
        drawing.add(PREDICTION_FIGURES[:1], fits)
        with pytest.raises(ValueError, match="never added: decode_bands, decode_step, knee"):
            drawing.finish(table)


def test_the_predictions_are_made_by_the_command_where_no_worker_is_forked(
    inputs, serial: list[Path], tmp_path: Path
) -> None:
    """One drawing process, or workers from a fork server (JAX or PyTorch loaded), which would be sent the
    whole frame: the command makes the predictions itself, when it asks for them."""
    frame, fits, _ = inputs
    pngs = [path for path in serial if path.suffix == ".png"]
    one, made, by_worker, held = _report_order(frame, tmp_path / "one", ("png",), workers=1)
    assert not by_worker and not held and _digests(one) == _digests(pngs)
    pd.testing.assert_frame_equal(made.decode_steps, fits.decode_steps)
    with mock.patch("analysis.load.THREADED_RUNTIMES", ("analysis.load",)):  # as if JAX were loaded
        served, made, by_worker, held = _report_order(frame, tmp_path / "served", ("png",), workers=2)
    assert not by_worker and not held and _digests(served) == _digests(pngs)
    pd.testing.assert_frame_equal(made.many_vs_one, fits.many_vs_one)


def test_a_drawing_left_before_its_table_ends_its_workers(inputs, tmp_path: Path) -> None:
    """A command stopped while it computes the table (an error, Ctrl-C) leaves no drawing worker behind."""
    frame, fits, _ = inputs
    with pytest.raises(KeyboardInterrupt), start_figures(frame, fits, tmp_path, ("png",), workers=2):
        assert multiprocessing.active_children()
        raise KeyboardInterrupt
    assert not multiprocessing.active_children()


@pytest.mark.skipif(
    "forkserver" not in multiprocessing.get_all_start_methods(), reason="no fork server on this OS"
)
def test_workers_from_a_fork_server_are_sent_their_data_and_draw_the_same_files(
    inputs, serial: list[Path], tmp_path: Path
) -> None:
    """Once JAX or PyTorch is loaded a worker must not be forked (``analysis.load.pool_context``): the
    workers then start from a fork server (the one the command starts, with its preloaded modules) and are
    sent each figure's data instead of inheriting it."""
    frame, fits, table = inputs
    with mock.patch("analysis.load.THREADED_RUNTIMES", ("analysis.load",)):  # as if JAX were loaded
        context = pool_context()
        assert context is not None and context.get_start_method() == "forkserver"
        served = write_figures(frame, fits, table, tmp_path / "served", ("png",), workers=2)
    pngs = [path for path in serial if path.suffix == ".png"]
    assert [path.name for path in served] == [path.name for path in pngs]
    assert _digests(pngs) == _digests(served)


#: The killed-worker test's program: a fresh interpreter, so that JAX (which other tests of a session load) is
#: not loaded, the drawing workers fork as a user's command forks them, and they inherit the patch.
_KILLED_WORKER = """
import os, signal, sys
from pathlib import Path
from unittest import mock
from analysis.compare import figure_table
from analysis.figures import write_figures
from analysis.fits import fit_all, with_predictions
from analysis.load import load_runs
from analysis.runs import select_runs
from analysis.signals import WorkerLost

fleet, out = sys.argv[1:]
frame = select_runs(load_runs([fleet], samples=False), include_quick=True).result.frame
fits = fit_all(frame)
table = figure_table(frame, fits, None)

def killed(*_):  # a figure function whose process is killed while it draws (the OOM killer, by hand)
    os.kill(os.getpid(), signal.SIGKILL)

with mock.patch("analysis.figures.cpu.many_vs_one", killed):
    try:
        write_figures(frame, fits, table, Path(out), ("png",), workers=2)
    except WorkerLost as lost:
        print(lost)
        sys.exit(0)
sys.exit("no WorkerLost: the killed worker went unnoticed")
"""


#: A worker killed while it makes the report's predictions (``start_figures``' ``beside``): the command's
#: ``beside_result`` says so in one line.
_KILLED_PREDICTING = """
import os, signal, sys
from pathlib import Path
from unittest import mock
from analysis.figures import PREDICTION_FIGURES, start_figures
from analysis.fits import fit_all, with_predictions
from analysis.load import load_runs
from analysis.runs import select_runs
from analysis.signals import WorkerLost

fleet, out = sys.argv[1:]
frame = select_runs(load_runs([fleet], samples=False), include_quick=True).result.frame
fitted = fit_all(frame, predictions=False)

def killed(*_):
    os.kill(os.getpid(), signal.SIGKILL)

with mock.patch("analysis.fits._predicted", killed):
    beside = (with_predictions, (frame, fitted))
    later = PREDICTION_FIGURES
    with start_figures(frame, fitted, Path(out), ("png",), workers=2, later=later, beside=beside) as drawing:
        try:
            drawing.beside_result()
        except WorkerLost as lost:
            print(lost)
            sys.exit(0)
sys.exit("no WorkerLost: the killed worker went unnoticed")
"""


@pytest.mark.parametrize("program", [_KILLED_WORKER, _KILLED_PREDICTING], ids=["drawing", "predicting"])
def test_a_drawing_worker_killed_is_one_line_not_a_hang(fleet: Path, tmp_path: Path, program: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", program, str(fleet), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = done.stdout.strip()
    assert line.startswith("a process drawing the figures") and "\n" not in line
    assert "ended before they were written (killed? out of memory?)" in line
    assert "(pid " not in line or "ended by SIGKILL)" in line  # the pool may have let go of it already
    assert "fork() was called" not in done.stderr


def test_a_figure_is_laid_out_once_and_a_second_format_draws_it_alike(inputs, tmp_path: Path) -> None:
    frame, fits, _ = inputs
    figure = cpu.time_vs_size(frame, fits.host)
    assert figure.get_layout_engine() is None  # laid out by ``finish``, for good
    before = [ax.get_position().bounds for ax in figure.axes]
    figure.draw_without_rendering()
    assert [ax.get_position().bounds for ax in figure.axes] == before
    alone = save(figure, tmp_path / "alone", "time_vs_size", ("png",))
    both = save(cpu.time_vs_size(frame, fits.host), tmp_path / "both", "time_vs_size", ("svg", "png"))
    pngs = {name: digest for name, digest in _digests(both).items() if name.endswith(".png")}
    assert _digests(alone) == pngs


# --- formats and links --------------------------------------------------------------------------------------


def test_the_report_writes_png_alone_by_default_and_links_only_what_it_wrote(
    fleet: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert main(["report", str(fleet), "--out", str(out), *QUICK]) == 0
    written = sorted(path.name for path in (out / FIGURES_DIR).iterdir())
    assert written and all(name.endswith(".png") for name in written)
    links = _links(out / "report.md")
    assert sorted(Path(link).name for link in links) == written
    assert "[SVG]" not in (out / "report.md").read_text(encoding="utf-8")


def test_the_report_writes_and_links_svg_when_asked(fleet: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["report", str(fleet), "--out", str(out), *QUICK, "--formats", "png,svg"]) == 0
    names = {path.name for path in (out / FIGURES_DIR).iterdir()}
    stems = {Path(name).stem for name in names}
    assert names == {f"{stem}.{fmt}" for stem in stems for fmt in ("png", "svg")}
    text = (out / "report.md").read_text(encoding="utf-8")
    for stem in stems:  # the PNG shown, the SVG linked beside it
        assert re.search(rf"!\[[^\]]+\]\(figures/{stem}\.png\)", text), stem
        assert f"([SVG](figures/{stem}.svg))" in text, stem
    assert sorted(Path(link).name for link in _links(out / "report.md")) == sorted(names)


def test_a_report_of_svg_alone_shows_the_svg(fleet: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["report", str(fleet), "--out", str(out), *QUICK, "--formats", "svg"]) == 0
    names = sorted(path.name for path in (out / FIGURES_DIR).iterdir())
    assert names and all(name.endswith(".svg") for name in names)
    text = (out / "report.md").read_text(encoding="utf-8")
    assert sorted(Path(link).name for link in _links(out / "report.md")) == names
    assert "figures/time_vs_size.svg)" in text and ".png" not in text


def test_plot_writes_png_alone_by_default(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plot", str(fleet), "--out", str(tmp_path), *QUICK]) == 0
    printed = [Path(line) for line in capsys.readouterr().out.splitlines()]
    assert printed and {path.suffix for path in printed} == {".png"}
    assert sorted(printed) == sorted((tmp_path / FIGURES_DIR).iterdir())
