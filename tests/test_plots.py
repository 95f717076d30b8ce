"""``analysis.figures``: each figure shows what its data say, readably — the defects issue 14 found, one by
one — and ``report`` and ``plot`` write one set of figure files in one place.

Figures are drawn from the committed real runs, from fan-out fleets of them, and from the SYNTHETIC GPU and
per-op run of ``tests/test_plots_collisions.py`` (made up there, never saved as data).
"""

from __future__ import annotations

import importlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.text import Text

from analysis.__main__ import main
from analysis.compare import figure_table
from analysis.decode import decode_table
from analysis.decode_text import where
from analysis.figures import FIGURES_DIR, build_figures, figure_jobs
from analysis.figures.decode import decode_bands
from analysis.figures.style import MARKERS, PALETTE, Machines, nice_log_ticks, time_tick, trim
from analysis.fits import fit_all
from analysis.launch import fitted
from analysis.load import load_runs
from analysis.output import MANIFEST_NAME
from analysis.runs import select_runs
from analysis.verdicts import MARK_CHANGED
from model.units import fmt_count, fmt_signed_percent, fmt_time
from tests.test_decode_analysis import _host_fits, _launch_fits, _steps
from tests.test_plots_collisions import DATA, REAL_RUN, TODAY, _fanout, synthetic_everything_run


def _inputs(paths: list[Path]) -> tuple[pd.DataFrame, object, pd.DataFrame]:
    frame = select_runs(load_runs(paths, samples=False)).result.frame
    fits = fit_all(frame)
    return frame, fits, figure_table(frame, fits, None)


def _one_figure(paths: list[Path], stem: str) -> tuple[pd.DataFrame, object, dict[str, Figure]]:
    """The figure ``stem`` of ``paths`` alone, built from the job ``build_figures`` builds it from
    (``figure_jobs``: a figure depends on its own arguments alone), for a fixture whose tests read that
    figure only. No comparison table: only the machines figure reads it."""
    frame = select_runs(load_runs(paths, samples=False)).result.frame
    fits = fit_all(frame)
    name, args = figure_jobs(frame, fits, pd.DataFrame())[stem]
    module, function = name.rsplit(".", 1)
    draw = getattr(importlib.import_module(f"analysis.figures.{module}"), function)
    return frame, fits, {stem: draw(*args)}


@pytest.fixture(scope="module")
def real_inputs() -> tuple[pd.DataFrame, object, pd.DataFrame]:
    """The older committed runs of two machines (Xeon and EPYC, tests/data/*.json): frame, fits and the
    comparison table the machines figure is drawn from."""
    return _inputs(sorted(DATA.glob("*.json")))


@pytest.fixture(scope="module")
def real(real_inputs) -> tuple[pd.DataFrame, object, dict[str, Figure]]:
    """The older committed runs of two machines, with their figures."""
    frame, fits, table = real_inputs
    return frame, fits, build_figures(frame, fits, table)


@pytest.fixture(scope="module")
def today() -> tuple[pd.DataFrame, object, dict[str, Figure]]:
    """Today's code's committed runs (tests/data/runs): the decode step with its probe (its tests read the
    decode_bands figure only)."""
    return _one_figure([TODAY], "decode_bands")


@pytest.fixture(scope="module")
def one_run() -> tuple[pd.DataFrame, object, dict[str, Figure]]:
    """The committed run with the most cases (its tests read the time_vs_size figure only)."""
    return _one_figure([REAL_RUN], "time_vs_size")


@pytest.fixture(scope="module")
def fleet4(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, object, dict[str, Figure]]:
    fleet = _fanout(REAL_RUN, tmp_path_factory.mktemp("fleet") / "fleet", 4, copies=8)
    frame, fits, table = _inputs([fleet])
    return frame, fits, build_figures(frame, fits, table)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, object, dict[str, Figure]]:
    path = tmp_path_factory.mktemp("synthetic") / "synthetic.json"
    path.write_text(json.dumps(synthetic_everything_run()), encoding="utf-8")
    frame, fits, table = _inputs([path])
    return frame, fits, build_figures(frame, fits, table)


def _tick_texts(axis: object) -> list[str]:
    return [label.get_text() for label in axis.get_ticklabels() if label.get_text()]


def _visible_ticks(ax: object, which: str) -> list[tuple[float, str]]:
    """(value, label) of the ticks of ``ax``'s ``which`` axis inside its view."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    low, high = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    ticks = zip(axis.get_ticklocs(), axis.get_ticklabels(), strict=True)
    return [(value, label.get_text()) for value, label in ticks if low <= value <= high and label.get_text()]


def _texts(figure: Figure) -> list[str]:
    """Every visible, non-blank text of ``figure`` (titles, labels, legend entries, direct labels)."""
    figure.draw_without_rendering()
    return [
        text.get_text() for text in figure.findobj(Text) if text.get_visible() and text.get_text().strip()
    ]


# --- shared look --------------------------------------------------------------------------------------------


def test_every_machine_of_ten_gets_its_own_colour_and_marker_pair_from_the_palette() -> None:
    machines = Machines.of(f"fleet-{k:02d} / Linux / Xeon / no GPU" for k in range(10))
    styles = [machines.style(machine) for machine in machines.ids]
    assert len(set(styles)) == 10
    assert len({marker for _, marker in styles}) == 10  # never colour alone
    assert {color for color, _ in styles} <= set(
        PALETTE
    ) and "#F0E442" not in PALETTE  # Okabe-Ito less yellow
    assert [machines.label(m) for m in machines.ids] == [f"fleet-{k:02d}" for k in range(10)]
    assert "Linux / Xeon / no GPU" in machines.caption()
    assert len(MARKERS) >= 10


def test_machines_whose_differing_fields_are_long_are_keyed_in_the_caption() -> None:
    ids = [
        "vm / Linux / AMD EPYC / no GPU",
        "gpu-box / Linux / Intel(R) Xeon(R) Platinum 8480+ / NVIDIA H100",
    ]
    machines = Machines.of(ids)
    assert [machines.label(m) for m in ids] == ["M1", "M2"]
    assert machines.caption() == f"Machines: M1 = {ids[0]}; M2 = {ids[1]}."
    one = Machines.of(ids[:1])
    assert one.label(ids[0]) == ids[0] and one.caption() == f"Machine: {ids[0]}."
    assert one.values(lambda m: 2.8e-7, fmt_time) == "280 ns" and one.scope() == ""


def test_log_ticks_start_at_or_below_the_smallest_value_and_read_alike() -> None:
    ticks = nice_log_ticks(2.8e-7, 6e-2, 14)
    assert ticks[0] <= 2.8e-7 < ticks[1]
    assert [time_tick(t) for t in ticks[:3]] == ["100 ns", "300 ns", "1 µs"]
    assert trim("50.0 ms") == "50 ms" and trim("100 ms") == "100 ms" and trim("2.50 µs") == "2.5 µs"
    narrow = nice_log_ticks(0.88, 1.003, 9)  # a narrow ratio axis still gets ticks inside its range
    assert narrow[0] <= 0.88 and sum(0.88 <= t <= 1.003 for t in narrow) >= 2


# --- time_vs_size -------------------------------------------------------------------------------------------


def test_time_vs_size_reads_t0_off_the_axis_and_names_each_t0_in_the_title(real, one_run) -> None:
    _, fits, figures = one_run
    t0 = float(fits.host["t0_s"].iloc[0])
    ax = figures["time_vs_size"].axes[0]
    assert time_tick(t0) in [text for _, text in _visible_ticks(ax, "y")]  # one machine: t0 is a tick
    _, fits, figures = real
    ax = figures["time_vs_size"].axes[0]
    lowest = min(value for value, _ in _visible_ticks(ax, "y"))
    assert lowest < 1e-6 and lowest <= fits.host["t0_s"].min()  # a tick below 1 µs and below every t0
    title = figures["time_vs_size"].get_suptitle()
    for row in fits.host.itertuples(index=False):
        assert fmt_time(row.t0_s) in title and fmt_count(row.n_half) in title


def test_time_vs_size_draws_the_dram_line_only_near_the_sizes_it_was_fitted_to(real) -> None:
    frame, fits, figures = real
    ax = figures["time_vs_size"].axes[0]
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == len(fits.host)
    for fit in fits.host.itertuples(index=False):
        sizes = set(frame[(frame["machine_id"] == fit.machine_id) & (frame["case"] == "ufunc_size")]["n"])
        others = [n for n in sizes if n not in fit.dram_sizes]
        line = next(
            line for line in dashed if min(line.get_xdata()) <= min(fit.dram_sizes) <= max(line.get_xdata())
        )
        assert max(others) < min(line.get_xdata())  # never over a size it was not fitted to
        assert max(line.get_xdata()) < 2 * max(fit.dram_sizes)


def test_time_vs_size_promises_bars_only_where_a_machine_has_several_runs(one_run, fleet4) -> None:
    figure = one_run[2]["time_vs_size"]
    assert not any("fastest–slowest" in text for text in _texts(figure))
    assert not any(isinstance(c, ErrorbarContainer) for c in figure.axes[0].containers)
    figure = fleet4[2]["time_vs_size"]
    assert any("bar: fastest–slowest run" in text for text in _texts(figure))
    assert all(any(isinstance(c, ErrorbarContainer) for c in ax.containers) for ax in figure.axes)


def test_time_vs_size_gives_four_machines_a_panel_each_with_its_t0_on_the_axis(fleet4) -> None:
    _, fits, figures = fleet4
    figure = figures["time_vs_size"]
    assert len(figure.axes) == 4
    for ax, fit in zip(figure.axes, fits.host.itertuples(index=False), strict=True):
        assert ax.get_title().startswith(Machines.of(fits.host["machine_id"]).label(fit.machine_id))
        assert time_tick(fit.t0_s) in [text for _, text in _visible_ticks(ax, "y")]


def test_no_direct_label_covers_a_data_point(real, fleet4, synthetic) -> None:
    checked = 0
    for _, _, figures in (real, fleet4, synthetic):
        for stem, figure in figures.items():
            figure.draw_without_rendering()
            renderer = figure.canvas.get_renderer()
            for ax in figure.axes:
                labels = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
                for label in labels:
                    box = label.get_window_extent(renderer)
                    for line in ax.get_lines():
                        if line.get_marker() in (None, "", " ", "None", "none"):
                            continue
                        xy = ax.transData.transform(
                            np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
                        )
                        inside = [(x, y) for x, y in xy if box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1]
                        assert not inside, f"{stem}: {label.get_text()!r} covers a point"
                    checked += 1
    assert checked >= 6  # the n½ labels and the knee labels


# --- many vs one --------------------------------------------------------------------------------------------


def test_many_vs_one_tells_views_from_slices_by_colour_and_marker_and_labels_no_point(real) -> None:
    _, fits, figures = real
    figure = figures["many_vs_one"]
    assert len(figure.axes) == fits.many_vs_one["machine_id"].nunique()
    for ax in figure.axes:
        points = [line for line in ax.get_lines() if line.get_linestyle() in ("None", "none", "")]
        assert len(points) == 2
        assert points[0].get_color() != points[1].get_color()
        assert points[0].get_marker() != points[1].get_marker()
        assert not [t for t in ax.texts if t.get_visible()]
    legend = _texts(figure)
    assert any(text.startswith("views") for text in legend) and any(
        text.startswith("sliced") for text in legend
    )


def test_many_vs_one_title_is_computed_from_the_points(real) -> None:
    _, fits, figures = real
    rows = fits.many_vs_one
    most = rows[rows["pieces"] == rows["pieces"].max()].pivot(
        index="machine_id", columns="variant", values="measured_s"
    )
    slowdown = most["slices"] / most["views"]
    title = figures["many_vs_one"].get_suptitle().replace("\n", " ")
    assert f"{slowdown.min():.2g}–{slowdown.max():.2g}×" in title
    views = rows.loc[
        rows["variant"] == "views", "rel_error"
    ]  # as the tables: (predicted − measured) / measured
    assert (
        f"prediction error of views {fmt_signed_percent(views.min())} … {fmt_signed_percent(views.max())}"
        in title
    )


# --- decode bands -------------------------------------------------------------------------------------------


def test_decode_bands_draws_cpu_steps_against_their_prediction(today) -> None:
    """Today's runs (tests/data/runs): every CPU step with a prediction is one row at x = time ÷ the
    prediction, the prediction at 1 with its interval as a bar, the seed's model beside it."""
    _, fits, figures = today
    steps = fits.decode_steps
    drawn = steps[steps["predicted_s"].notna()]
    assert not drawn.empty
    figure = figures["decode_bands"]
    (ax,) = figure.axes
    assert ax.get_xscale() == "log"
    ticks = [text for _, text in _visible_ticks(ax, "x")]
    assert len(ticks) >= 2 and all(re.fullmatch(r"\d+(\.\d+)?×", text) for text in ticks)
    labels = _tick_texts(ax.yaxis)
    assert len(labels) == len(drawn)
    for row in drawn.itertuples(index=False):
        note = f"{where(row)}; {row.measured_s / row.serial_s:.2f}× the seed's model"
        assert any(note in label for label in labels), note
    bars = [patch for patch in ax.patches if not patch.get_hatch()]
    assert len(bars) == len(drawn)  # one interval bar per step, around the prediction at 1
    for bar, row in zip(bars, drawn.itertuples(index=False), strict=True):
        assert bar.get_x() == pytest.approx(row.predicted_low_s / row.predicted_s)
        assert bar.get_x() < 1 < bar.get_x() + bar.get_width()
    assert "fastest round" in ax.get_xlabel() and "prediction" in ax.get_xlabel()


def test_decode_bands_title_counts_where_the_steps_fall_and_changes_with_them() -> None:
    table = decode_table(_steps(), host_fits=_host_fits(), launch_fits=_launch_fits())
    figure = decode_bands(table)  # the CPU rows have no prediction (no call list): only the GPU's are drawn
    gpu = table[table["device"] == "cuda"]
    title = figure.get_suptitle().replace("\n", " ")
    assert "CPU" not in title
    above = int((gpu["measured_s"] > gpu["serial_s"]).sum())
    inside = int(gpu["within_bounds"].astype(bool).sum())
    assert f"of {len(gpu)} decode steps" in title or f"{above} of {len(gpu)}" in title
    moved = table.copy()
    first_gpu = moved.index[moved["device"] == "cuda"][0]
    low, high = moved.loc[first_gpu, "overlapped_s"], moved.loc[first_gpu, "serial_s"]
    was_inside = bool(moved.loc[first_gpu, "within_bounds"])
    moved.loc[first_gpu, ["measured_s", "within_bounds"]] = [(low + high) / 2, True]
    now_inside = inside + (0 if was_inside else 1)
    assert f"{now_inside} " in decode_bands(moved).get_suptitle().replace("\n", " ")
    labels = [text for ax in figure.axes for text in _tick_texts(ax.yaxis)]
    for row in gpu.itertuples(index=False):  # one labelled row per step, with where it falls
        name = f"{row.plan} {row.mode}"
        assert any(name in label and where(row) in label for label in labels), name
    assert decode_bands(table.assign(serial_s=math.nan, overlapped_s=math.nan)) is None


def test_the_title_gives_the_cpu_steps_measured_over_predicted() -> None:
    from tests.test_decode_analysis import _probe_frame

    one = decode_table(_probe_frame(20e-3), host_fits=_host_fits())
    two = decode_table(_probe_frame(25e-3), host_fits=_host_fits())
    both = pd.concat([one.assign(machine_id="a"), two.assign(machine_id="b")], ignore_index=True)
    ratios = both["measured_over_predicted"]
    title = decode_bands(both).get_suptitle().replace("\n", " ")
    assert f"CPU: 2 decode step(s) at {ratios.min():.2f}–{ratios.max():.2f}× their prediction" in title


def test_gpu_decode_steps_show_the_calibrated_roofline_beside_the_datasheet_one(synthetic) -> None:
    _, fits, figures = synthetic
    gpu = fits.decode_steps[fits.decode_steps["device"] == "cuda"]
    assert gpu["calibrated_serial_s"].notna().all()
    ax = next(ax for ax in figures["decode_bands"].axes if ax.get_title() == "GPU (CuPy)")
    hatched = [patch for patch in ax.patches if patch.get_hatch()]
    assert len(hatched) == len(gpu)
    for patch, row in zip(hatched, gpu.itertuples(index=False), strict=True):
        assert patch.get_x() == pytest.approx(row.calibrated_overlapped_s / row.overlapped_s)
        assert patch.get_x() + patch.get_width() == pytest.approx(row.calibrated_serial_s / row.overlapped_s)
    assert "median of the rounds" in ax.get_xlabel()


# --- machines -----------------------------------------------------------------------------------------------


def test_machines_rows_say_what_their_ratio_is_and_draw_it_as_the_table_does(real_inputs, real) -> None:
    _, _, table = real_inputs  # figure_table(frame, fits, None): the table the figure was drawn from
    _, _, figures = real
    figure = figures["machines"]
    (ax,) = figure.axes
    labels = _tick_texts(ax.yaxis)
    assert all(
        re.search(r"\((time|rate, inverted|count: neither side is better)\)$", label) for label in labels
    )
    other = table[table["machine_id"] != table.attrs["baseline"]].set_index("figure")
    drawn = {label.split("\n")[0]: label for label in labels}
    # Each point as (row, ratio drawn, filled): a line holds a machine's points of one fill.
    points = {
        round(float(y)): (float(x), line.get_markerfacecolor() != "white")
        for line in ax.get_lines()
        if line.get_marker() not in (None, "None", "")
        for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
    }
    assert len(points) == len(drawn)
    for row, name in enumerate(drawn):
        ratio, filled = points[row]
        assert ratio == pytest.approx(float(other.loc[name, "ratio"]))  # as the table states it: > 1 slower
        assert filled == (other.loc[name, "mark"] == MARK_CHANGED)
    # The read bandwidth the older Xeon run lacks is named under the figure, not dropped silently.
    assert "read bandwidth" not in drawn
    assert "Left out: read bandwidth" in figure.get_supxlabel().replace("\n", " ")


def test_machines_title_counts_faster_and_slower_from_the_table_s_time_ratios(real_inputs, real) -> None:
    _, _, table = real_inputs  # figure_table(frame, fits, None): the table the figure was drawn from
    _, _, figures = real
    other = table[(table["machine_id"] != table.attrs["baseline"]) & table["ratio"].notna()]
    directed = other[other["unit"] != "count"]
    title = figures["machines"].get_suptitle().replace("\n", " ")
    faster, slower = int((directed["ratio"] < 1).sum()), int((directed["ratio"] > 1).sum())
    assert f"faster on {faster}, slower on {slower} of {len(directed)} figures" in title


# --- GPU and per-op figures ---------------------------------------------------------------------------------


def test_launch_ladder_draws_each_layers_fitted_line(synthetic) -> None:
    _, fits, figures = synthetic
    (ax,) = figures["launch_ladder"].axes
    machine = fits.launch["machine_id"].iloc[0]
    lines = [line for line in ax.get_lines() if line.get_linestyle() == "-" and len(line.get_xdata()) == 2]
    bases = sorted(float(line.get_ydata()[0]) for line in lines)
    expected = sorted(
        fitted(fits.launch, machine, f"ladder_{layer}_s") for layer in ("cupy", "driver", "graph")
    )
    assert bases == pytest.approx(expected)
    assert ax.get_ylim()[0] == 0  # a + b·0 is read off a linear axis from 0
    per_arg = fitted(fits.launch, machine, "ladder_cupy_per_arg_s")
    assert f"CuPy +{fmt_time(per_arg)}" in figures["launch_ladder"].get_suptitle()


def test_the_per_launch_and_per_node_costs_are_ticks_of_their_axes(synthetic) -> None:
    _, fits, figures = synthetic
    machine = fits.launch["machine_id"].iloc[0]
    ticks = [text for _, text in _visible_ticks(figures["launch_vs_graph"].axes[0], "y")]
    for quantity in ("launch_s", "graph_node_s"):
        assert time_tick(fitted(fits.launch, machine, quantity)) in ticks
    ticks = [text for _, text in _visible_ticks(figures["knee"].axes[0], "y")]
    assert time_tick(fitted(fits.launch, machine, "launch_s")) in ticks
    assert "0" in [text for _, text in _visible_ticks(figures["knee"].axes[0], "x")]  # d = 0 drawn, and said
    inside = int(fits.spin["within_bounds"].sum())
    assert figures["knee"].get_suptitle().startswith(f"{inside} of {len(fits.spin)} spin-kernel points")


def test_op_costs_puts_t0_beside_every_ops_cost(synthetic) -> None:
    frame, fits, figures = synthetic
    (ax,) = figures["op_costs"].axes
    labels = _tick_texts(ax.yaxis)
    assert labels[0] == "t0: np.add, fitted law"
    (points,) = [line for line in ax.get_lines() if line.get_marker() == "o"]
    from analysis.ops import op_costs

    costs = op_costs(frame).set_index("op")["cost_s"]
    assert points.get_xdata()[0] == pytest.approx(fits.host["t0_s"].iloc[0])
    for label, cost in zip(labels[1:], points.get_xdata()[1:], strict=True):
        assert cost == pytest.approx(costs[label])
    ratios = costs / fits.host["t0_s"].iloc[0]
    assert f"cost {ratios.min():.2g}× – {ratios.max():.2g}× t0" in figures["op_costs"].get_suptitle()


# --- one layout ---------------------------------------------------------------------------------------------


def test_report_and_plot_write_the_same_figures_in_the_same_place(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["report", str(REAL_RUN), "--out", str(out)]) == 0
    report_files = sorted(
        path.relative_to(out) for path in out.rglob("*") if path.is_file() and path.name != MANIFEST_NAME
    )
    text = (out / "report.md").read_text(encoding="utf-8")
    for path in report_files:
        if path.suffix == ".png":  # the report links every figure it wrote
            assert f"]({path.as_posix()})" in text, path
    capsys.readouterr()
    assert main(["plot", str(REAL_RUN), "--out", str(out)]) == 1  # the report's figures stay its own
    assert "holds a report" in capsys.readouterr().err
    plotted = tmp_path / "plotted"
    assert main(["plot", str(REAL_RUN), "--out", str(plotted)]) == 0
    printed = [Path(line) for line in capsys.readouterr().out.splitlines() if line.endswith((".png", ".svg"))]
    assert sorted(path.relative_to(plotted) for path in printed) == [
        p for p in report_files if p.name != "report.md"
    ]  # the same files, in the same place of their folder
    assert {path.parent for path in printed} == {plotted / FIGURES_DIR}
    after = sorted(
        path.relative_to(out) for path in out.rglob("*") if path.is_file() and path.name != MANIFEST_NAME
    )
    assert after == report_files


def test_plot_writes_only_the_formats_asked(tmp_path: Path, capsys) -> None:
    assert main(["plot", str(REAL_RUN), "--out", str(tmp_path), "--formats", "png"]) == 0
    assert {path.suffix for path in (tmp_path / FIGURES_DIR).iterdir()} == {".png"}
    capsys.readouterr()
    assert main(["plot", str(REAL_RUN), "--out", str(tmp_path), "--formats", "png,jpeg"]) == 2
    assert "'png,jpeg': give one or more of png, svg" in capsys.readouterr().err
