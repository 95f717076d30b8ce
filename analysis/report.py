"""``DIR/report.md``: the saved runs as a Markdown report — inputs, machines, each family's fitted figures
with their confidence intervals, measured vs predicted with errors, the machine comparison, and the figures.

Numbers are SI in the data and formatted only here, through ``model.units``; every table names its units.
The report owns the files it writes in DIR and only those (``analysis.output``): a rerun replaces them,
removes its own figures the new report no longer has, and refuses to replace a file it did not write or
one edited since (a hand-edited report.md) unless forced.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import ops
from analysis.compare import BY_MACHINE, Groups, compared_table, fitted_and_started, group_runs
from analysis.decode_text import prediction_cell, rounds_below_text, where
from analysis.figures import FIGURES_DIR, FIGURES_OWNER, PREDICTION_FIGURES, start_figures
from analysis.fits import Fits, predictions_key, with_predictions
from analysis.host import BANDWIDTH_OPS
from analysis.memo import Memo
from analysis.output import DEFAULT_FIGURE_FORMATS, REPORT_NAME, REPORT_OWNER, publish_whole, staging
from analysis.render import figure_lines, markdown_table, with_interval
from analysis.runs import Selection, selection_lines
from analysis.steady import frame_steadiness_line
from analysis.trust import condensed_conditions, stability, unstable_line
from analysis.verdicts import with_run_kinds
from model.units import (
    fmt_count,
    fmt_percent,
    fmt_rate,
    fmt_si,
    fmt_signed_percent,
    fmt_time,
)


@dataclass(frozen=True)
class WrittenReport:
    """``path``: the Markdown file written; ``figures``: the figure files it links (in each format asked);
    ``removed``: files of an earlier report in the folder that this one no longer has; ``kept``: one line
    per such file left in place because it was changed since it was written."""

    path: Path
    figures: tuple[Path, ...]
    removed: tuple[Path, ...] = ()
    kept: tuple[str, ...] = ()


def _machines_lines(frame: pd.DataFrame) -> list[str]:
    rows = []
    # The columns shown, grouped: grouping the whole frame split its every column per machine.
    shown = frame[["machine_id", "run_datetime", "host", "cpu_model", "gpu_name", "source", "pb_version"]]
    for machine, runs in shown.groupby("machine_id", sort=False):
        first, last = runs["run_datetime"].min(), runs["run_datetime"].max()
        rows.append(
            [
                machine,
                str(runs["host"].iloc[0]),
                str(runs["cpu_model"].iloc[0]),
                str(runs["gpu_name"].iloc[0] or "—"),
                str(runs["source"].nunique()),
                f"{first:%Y-%m-%d %H:%M}" if not pd.isna(first) else "?",
                f"{last:%Y-%m-%d %H:%M}" if not pd.isna(last) else "?",
                ", ".join(sorted({str(v) for v in runs["pb_version"].unique()})),
            ]
        )
    header = [
        "machine",
        "host",
        "CPU",
        "GPU",
        "runs",
        "first run (UTC)",
        "last run (UTC)",
        "pytest-benchmark",
    ]
    return markdown_table(header, rows)


def _host_lines(fits: Fits, figures: Links) -> list[str | FigureLink]:
    if fits.host.empty:
        return []
    lines = ["## CPU: numpy per-call cost and host bandwidth", ""]
    lines += [
        "Fixed-overhead law t(n) = t0 + n/r∞ fitted per machine on `np.add` sizes whose working set fits the "
        "core's cache; the per-element cost from DRAM at sizes ≥ 2 × the last-level cache. 95 % bootstrap "
        "intervals in brackets.",
        "",
    ]
    rows = []
    for fit in fits.host.itertuples(index=False):
        if fit.fit_error is not None:
            rows.append([fit.machine_id, f"not fitted: {fit.fit_error}", "", "", "", "", ""])
            continue
        rows.append(
            [
                fit.machine_id,
                with_interval(fit.t0_s, fit.t0_low_s, fit.t0_high_s, "s"),
                with_interval(
                    fit.cache_s_per_element, fit.cache_s_per_element_low, fit.cache_s_per_element_high, "s"
                ),
                with_interval(fit.n_half, fit.n_half_low, fit.n_half_high, "count"),
                with_interval(
                    fit.dram_s_per_element, fit.dram_s_per_element_low, fit.dram_s_per_element_high, "s"
                )
                if fit.dram_points
                else "not measured",
                " / ".join(
                    fmt_rate(v) if not math.isnan(v) else "—"
                    for v in (getattr(fit, f"{op}_bytes_per_s") for op in BANDWIDTH_OPS)
                ),
                str(fit.ci_method),
            ]
        )
    header = [
        "machine",
        "t0 per call",
        "per element, in cache",
        "n½ (elements)",
        "per element, from DRAM",
        f"{' / '.join(BANDWIDTH_OPS)} bandwidth",
        "interval from",
    ]
    lines += [*markdown_table(header, rows), ""]
    lines += _figure_link(figures, "time_vs_size", "Time per call vs size, with the fitted law")
    if not fits.many_vs_one.empty:
        lines += [
            "### Many small calls vs one big",
            "",
            "Measured time of the whole timed call (each run's fastest round, median over runs) beside the "
            "prediction: one call on all N = pieces · n elements (measured above) plus t0 for each extra "
            "call, t(N) + (pieces − 1) · t0 (the pieces' data lives where the whole array's does); where N "
            "was not measured, pieces · t(n) from the law. Error = (predicted − measured) / measured.",
            "",
        ]
        rows = [
            [
                row.machine_id,
                row.variant,
                fmt_count(row.pieces),
                fmt_count(row.n),
                fmt_time(row.measured_s),
                fmt_time(row.predicted_s),
                fmt_signed_percent(row.rel_error, 1),
                row.basis,
            ]
            for row in fits.many_vs_one.itertuples(index=False)
        ]
        lines += markdown_table(
            ["machine", "variant", "pieces", "elements per call", "measured", "predicted", "error", "basis"],
            rows,
        )
        lines += [
            "",
            *_figure_link(figures, "many_vs_one", "Many small calls vs one big: measured and predicted"),
        ]
    return lines


def _launch_lines(fits: Fits, figures: Links) -> list[str | FigureLink]:
    """The GPU launch family: fitted costs per machine, spin kernels against the model's bounds, and the
    lecture's demo 2 recomputed with the measured launch costs."""
    if fits.launch.empty:
        return []
    from analysis.launch import QUANTITIES, per_kernel_s

    lines = ["## GPU: launch, synchronise and graph costs", ""]
    rows = []
    for row in fits.launch.itertuples(index=False):
        value = (
            "n/a" if math.isnan(row.value_s) else with_interval(row.value_s, row.ci_low_s, row.ci_high_s, "s")
        )
        rows.append(
            [
                row.machine_id,
                QUANTITIES[row.quantity],
                value,
                str(row.n_points),
                str(row.ci_method),
                row.note or "",
            ]
        )
    lines += markdown_table(
        ["machine", "figure (from)", "value [95 % CI]", "points", "interval from", "note"], rows
    )
    lines.append("")
    lines += _figure_link(figures, "launch_vs_graph", "Time per kernel: eager launches and graph replay")
    lines += _figure_link(
        figures, "launch_ladder", "The launch-cost ladder: cost per launch by kernel arguments"
    )
    if not fits.spin.empty:
        lines += [
            "### Spin kernels against the model's bounds",
            "",
            "N kernels of requested duration d per timed call; the model's overlapped and serial bounds "
            "(`model.launch.compose` / `compose_graph` with the fitted costs, plus the synchronise round "
            "trip), shown per kernel (timed call / N).",
            "",
        ]
        rows = []
        for row in fits.spin.itertuples(index=False):
            n = row.n_kernels
            rows.append(
                [
                    row.machine_id,
                    row.mode,
                    fmt_time(row.kernel_ns * 1e-9),
                    fmt_count(n),
                    fmt_time(row.measured_per_kernel_s),
                    fmt_time(float(per_kernel_s(row.overlapped_s, n))),
                    fmt_time(float(per_kernel_s(row.serial_s, n))),
                    "yes" if row.within_bounds else "no",
                    fmt_signed_percent(row.error_vs_overlapped, 1),
                ]
            )
        header = ["machine", "mode", "d", "N", "measured", "overlapped", "serial", "within", "vs overlapped"]
        lines += [*markdown_table(header, rows), ""]
        lines += _figure_link(figures, "knee", "Spin kernels against the model's band, with the knee")
    if not fits.decode_demo.empty:
        lines += [
            "### Lecture demo 2 with measured launch costs",
            "",
            "One decode step on the H100 roofline (batch 1, ctx 1,024): GPU work plus kernel launches, "
            "serial (never hidden) and overlapped (hidden behind the GPU work) compositions.",
            "",
        ]
        rows = []
        for row in fits.decode_demo.itertuples(index=False):
            who = "assumed" if row.launch == "assumed" else f"{row.launch} ({row.machine_id})"
            per = "per node" if row.launch == "measured graph" else "per kernel"
            rows.append(
                [
                    row.config,
                    row.plan,
                    fmt_count(row.n_kernels),
                    fmt_time(row.t_gpu_s),
                    who,
                    f"{fmt_time(row.t_launch_s)} {per}",
                    fmt_time(row.serial_s),
                    fmt_time(row.overlapped_s),
                    fmt_percent(row.overhead_share),
                    f"{row.tok_per_s_serial:.0f}",
                ]
            )
        header = [
            "model",
            "plan",
            "kernels",
            "GPU work",
            "launch cost",
            "cost",
            "serial step",
            "overlapped step",
            "overhead share (serial)",
            "tok/s (serial)",
        ]
        lines += [*markdown_table(header, rows), ""]
        lines += _figure_link(figures, "decode_step", "Decode step: GPU work and launch overhead")
    return lines


def _decode_lines(fits: Fits, figures: Links) -> list[str | FigureLink]:
    """Measured decode steps (``analysis.decode.decode_table``): CPU steps against their prediction from
    other cases, with its interval, and the seed's model; GPU steps beside their overlapped and serial bounds
    (``position`` 0 = at the overlapped one, 1 = at the serial)."""
    steps = fits.decode_steps
    if steps.empty:
        return []
    lines = ["## Decode step: measured vs predicted", ""]
    cpu, gpu = steps[steps["device"] == "cpu"], steps[steps["device"] != "cpu"]
    if not cpu.empty:
        lines += _cpu_decode_lines(cpu)
    if not gpu.empty:
        lines += _gpu_decode_lines(gpu)
    lines += _figure_link(figures, "decode_bands", "Decode steps against their predictions")
    return lines


def _cpu_decode_lines(steps: pd.DataFrame) -> list[str]:
    """The CPU table of the decode section (``_decode_lines``)."""
    intro = (
        "CPU (numpy), one token per step. Predicted from other cases only: (bytes − KV cache) at the probe "
        "case's bandwidth (the step's matrix-vector products timed as a case of their own; runs older than "
        "it: host_bandwidth's read case) + attention (its "
        "own case, at the step's context) + every other call at its op's measured fixed cost (numpy_op) + "
        "the overhead floor's remainder; its 95 % interval from each term's run-to-run spread. The seed's "
        "model: bytes at the same bandwidth + calls × t0. Consistency check: the same sum with the step's "
        "own matrix-vector products (the probe, timed in the step's rounds) in place of the probe case — "
        "not a prediction. Probe estimate: the probe's fastest round + the floor's work outside it, an "
        "estimate and not a bound (a step round can beat the probe round before it; counted). Statistic: "
        "the fastest round (min) on every side."
    )
    header = ["numpy calls", "measured step", "predicted [95 %]", "measured ÷ predicted", "seed's model"]
    header += ["÷ seed", "÷ check", "probe estimate", "rounds below it", "bandwidth from", "cache-resident"]

    def cells(row: Any) -> list[str]:
        return [
            fmt_count(row.ops_per_step),
            fmt_time(row.measured_s),
            prediction_cell(row),
            where(row).removesuffix(" predicted"),
            _maybe(row.serial_s, fmt_time),
            _maybe(row.measured_s / row.serial_s, lambda ratio: f"{ratio:.2f}×"),
            _maybe(row.measured_s / row.check_s, lambda ratio: f"{ratio:.2f}×"),
            _maybe(row.probe_estimate_s, fmt_time),
            rounds_below_text(row),
            str(row.bandwidth_from) if isinstance(row.bandwidth_from, str) else "",
            "yes" if row.cache_resident is True else "no" if row.cache_resident is False else "unknown",
        ]

    return _step_table(intro, steps, header, cells)


def _gpu_decode_lines(steps: pd.DataFrame) -> list[str]:
    """The GPU table of the decode section (``_decode_lines``)."""
    intro = (
        "GPU, one token per step. Predicted: the roofline step on its spec (the datasheet's, a MIG slice's "
        "share or one derived from the device's attributes, as the spec column says) plus the per-launch "
        "cost fitted in the same run, overlapped and serial. Where: between the bounds, 0 = at the "
        "overlapped one and 1 = at the serial one; outside them, the ratio to the nearer bound. Estimate: "
        "model/gpu_terms.py's step with this machine's terms (its bytes at the achievable bandwidth, a ramp "
        "and the mode's gap per kernel), each the run's own where it measured it (analysis/gpu_terms.py), "
        "else the sourced default, as the terms column says. Statistic: the median of the rounds."
    )
    header = ["mode", "kernels", "measured step", "overlapped", "serial", "where", "estimate"]
    header += ["measured ÷ estimate", "achieved", "of spec bandwidth", "spec", "terms"]

    def cells(row: Any) -> list[str]:
        return [
            "" if pd.isna(row.mode) else str(row.mode),
            fmt_count(row.ops_per_step),
            fmt_time(row.measured_s),
            _maybe(row.overlapped_s, fmt_time),
            _maybe(row.serial_s, fmt_time),
            where(row),
            _maybe(row.estimate_s, fmt_time),
            _maybe(row.estimate_ratio, lambda ratio: f"{ratio:.2f}×"),
            fmt_rate(row.achieved_bytes_per_s),
            _maybe(row.bandwidth_fraction, fmt_percent),
            row.spec_from if isinstance(row.spec_from, str) else "",
            row.terms_from if isinstance(row.terms_from, str) else "",
        ]

    return _step_table(intro, steps, header, cells)


def _step_table(
    intro: str, steps: pd.DataFrame, header: list[str], cells: Callable[[Any], list[str]]
) -> list[str]:
    """A table of the decode section: ``intro``, then one row per step of ``steps``: its machine, model and
    plan, then ``cells(row)`` under ``header``."""
    rows = [[row.machine_id, row.config, row.plan, *cells(row)] for row in steps.itertuples(index=False)]
    return [intro, "", *markdown_table(["machine", "model", "plan", *header], rows), ""]


def _ops_lines(frame: pd.DataFrame, fits: Fits, figures: Links) -> list[str | FigureLink]:
    """The CPU decode step's overhead floor against its call list's two prices, and each numpy op's fixed
    cost (``analysis.ops``), as the terminal summary holds them; nothing without those cases."""
    t0 = dict(zip(fits.host["machine_id"], fits.host["t0_s"], strict=True)) if not fits.host.empty else {}
    costs = ops.op_costs(frame)
    floors = ops.floor_table(frame, t0, costs)
    if floors.empty and costs.empty:
        return []
    lines = ["## CPU decode step: per-op costs and overhead floor", ""]
    if not floors.empty:
        lines += [
            "The decode step's call list on a model so small that data costs nothing (fastest round, median "
            "over runs), beside the same calls priced at each op's measured fixed cost (Σ per-op) and at the "
            "seed's one t0 per call; left out = floor − Σ per-op: the Python work between the calls (op "
            "bodies, views, reshapes, transposes, slices) that no op's figure holds.",
            "",
        ]
        rows = [
            [
                row.machine_id,
                str(row.plan),
                f"{row.config}, ctx {fmt_count(row.ctx)}",
                fmt_count(row.n_calls),
                fmt_time(row.floor_s),
                _maybe(row.op_sum_s, fmt_time),
                _maybe(row.op_sum_s / row.floor_s, fmt_percent),
                _maybe(row.t0_sum_s, fmt_time),
                _maybe(row.t0_sum_s / row.floor_s, fmt_percent),
                _maybe(row.left_out_s, fmt_time),
                ", ".join(row.missing_ops) or "",
            ]
            for row in floors.itertuples(index=False)
        ]
        header = ["machine", "plan", "floor model", "numpy calls", "floor", "Σ per-op", "of floor"]
        header += ["calls × t0", "of floor", "left out", "ops without a measured cost"]
        lines += [*markdown_table(header, rows), ""]
    if not costs.empty:
        machines = list(dict.fromkeys(costs["machine_id"]))
        table = costs.pivot_table(index="op", columns="machine_id", values="cost_s", aggfunc="median")
        table = table.loc[table.median(axis=1).sort_values(ascending=False).index]
        plans = {}
        for row in floors.itertuples(index=False):
            plans.setdefault(str(row.plan), row.op_counts)
        lines += [
            "Fixed cost of one call of each numpy op of the decode step, replayed with the step's own "
            "shapes, strides and keywords where data costs nothing (fastest round per call, median over "
            "runs), with its calls per step.",
            "",
        ]
        rows = [
            [
                str(op),
                *(_maybe(float(table.loc[op, machine]), fmt_time) for machine in machines),
                *(fmt_count(counts.get(op, 0)) for counts in plans.values()),
            ]
            for op in table.index
        ]
        header = ["op", *(f"per call, {machine}" for machine in machines)]
        header += [f"calls/step {plan}" for plan in plans]
        lines += [*markdown_table(header, rows), ""]
    lines += _figure_link(figures, "op_costs", "Fixed cost of each numpy op of the decode step, beside t0")
    return lines


def _ladder_lines(frame: pd.DataFrame, fits: Fits, figures: Links) -> list[str | FigureLink]:
    """The dispatch ladder (``analysis.frameworks``): t0 per caller with its interval, each framework's
    decode step against numpy's and against numpy's predicted step, and demo 2 with each GPU layer's cost per
    launch; empty without a framework case."""
    from analysis.frameworks import demo2_by_layer, launch_costs, step_times

    calls, steps = fits.calls, step_times(frame, fits.decode_steps)
    demo = demo2_by_layer(launch_costs(frame))
    if calls.empty and steps.empty and demo.empty:
        return []
    lines = ["## The dispatch ladder across frameworks", ""]
    if not calls.empty:
        lines += markdown_table(
            ["machine", "caller", "t0 [95 % CI]", "× numpy", "r∞"],
            [
                [
                    row.machine_id,
                    row.caller,
                    f"no fit: {row.fit_error}"
                    if row.fit_error
                    else with_interval(row.t0_s, row.t0_low_s, row.t0_high_s, "s"),
                    _maybe(row.t0_ratio, lambda value: f"{value:.2f}×"),
                    _maybe(row.r_inf_per_s, lambda value: fmt_si(value, "elem/s")),
                ]
                for row in calls.itertuples(index=False)
            ],
        )
        lines.append("")
    if not steps.empty:
        lines += markdown_table(
            [
                "machine",
                "device",
                "model",
                "framework",
                "compiler",
                "fastest",
                "median",
                "× numpy's step",
                "× eager",
                "× numpy's predicted step",
            ],
            [
                [
                    row.machine_id,
                    row.device,
                    row.config,
                    row.framework,
                    row.compiler,
                    fmt_time(row.min_s),
                    fmt_time(row.median_s),
                    _maybe(row.vs_numpy, lambda value: f"{value:.2f}×"),
                    _maybe(row.vs_eager, lambda value: f"{value:.2f}×"),
                    _maybe(row.vs_predicted, lambda value: f"{value:.2f}×"),
                ]
                for row in steps.itertuples(index=False)
            ],
        )
        lines += ["", "Ratios of the CPU steps compare fastest rounds, of the GPU steps medians.", ""]
    if not demo.empty:
        lines += markdown_table(
            ["machine", "layer", "model", "plan", "per launch", "step", "lost to launches"],
            [
                [
                    row.machine_id,
                    row.layer,
                    row.config,
                    row.plan,
                    fmt_time(row.launch_s),
                    fmt_time(row.step_s),
                    fmt_percent(row.launch_share),
                ]
                for row in demo.itertuples(index=False)
            ],
        )
        lines.append("")
    return lines + _figure_link(
        figures, "ladder", "The dispatch ladder: one call's and one launch's cost per framework"
    )


def _unstable_lines(frame: pd.DataFrame) -> list[str]:
    """Per machine, one line naming its unstable cases (``analysis.trust``, limits stated)."""
    table = stability(frame)
    lines = []
    for machine, cases in table.groupby("machine_id", sort=False):
        line = unstable_line(cases)
        if line:
            lines.append(f"- {machine}: {line}")
    return lines


def _maybe(value: float, fmt: Callable[[float], str]) -> str:
    return "n/a" if value is None or math.isnan(value) else fmt(value)


@dataclass(frozen=True)
class FigureLink:
    """Where report.md shows figure ``stem``, in lines made before the figures are drawn (``_linked`` writes
    it): the text is made while the drawing workers finish, not after them."""

    stem: str
    caption: str


#: The figures drawn, by stem (their files, ``_figure_link``), or None while they are being drawn: a
#: section's lines then hold a ``FigureLink`` where a figure goes.
Links = dict[str, list[str]] | None


def _figure_link(figures: Links, stem: str, caption: str) -> list[str | FigureLink]:
    """A Markdown image line for figure ``stem`` when it was drawn: its first file written (PNG where it
    was), the caption, and a link to each other format written (the SVG beside a PNG); its ``FigureLink``
    while ``figures`` is None."""
    if figures is None:
        return [FigureLink(stem, caption)]
    if stem not in figures:
        return []
    shown, *others = figures[stem]
    links = "".join(f" ([{Path(path).suffix[1:].upper()}]({path}))" for path in others)
    return [f"![{caption}]({shown})", "", f"*{caption}*{links}", ""]


#: Which file of a figure report.md shows (the first written, in this order); the others are linked.
_LINK_ORDER = {".png": 0, ".svg": 1}


def busy_lines(selection: Selection) -> list[str]:
    """One line per run used that was measured on a busy machine (``analysis.trust.verdict``), whose speed
    hopped or drifted during it, or that ran slower or faster than its machine's other runs
    (``analysis.sentinel``); one line for all the runs of a kind seen in many (``condensed_conditions``)."""
    said, left = condensed_conditions(selection.conditions, len(selection.result.runs))
    return said + [f"{source}: {line}" for source, lines in left.items() for line in lines]


def write_report(
    selection: Selection,
    out_dir: Path,
    baseline: str | None,
    force: bool = False,
    formats: Sequence[str] = DEFAULT_FIGURE_FORMATS,
    memo: Memo | None = None,
) -> WrittenReport:
    """Fit the pooled runs of ``selection`` once, draw their figures into ``out_dir/figures`` in each of
    ``formats`` ("png", "svg"), write ``out_dir/report.md``: busy-machine verdicts first, then the runs used
    and left out, then the tables; report.md links only the files written.

    The files are written aside and put in place together by ``analysis.output.publish_whole`` (a new
    folder swapped in for the old, where it can: a stop, SIGKILL included, leaves the old report or the
    new one; ``force``: replace a report.md or figure the report did not write, or one edited since); raises
    ``analysis.output.OutputError`` when a file in the way may not be replaced. ``memo``: where fits,
    tables and figures computed before from the same rows are kept (``analysis.memo``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with staging(out_dir) as stage:
        written = _write_report(selection, stage, baseline, formats, memo)
        published = publish_whole(stage, out_dir, {FIGURES_DIR: FIGURES_OWNER, "": REPORT_OWNER}, force)
    return WrittenReport(
        path=out_dir / REPORT_NAME,
        figures=tuple(out_dir / path.relative_to(stage) for path in written.figures),
        removed=published.removed,
        kept=published.kept,
    )


def _write_report(
    selection: Selection, out_dir: Path, baseline: str | None, formats: Sequence[str], memo: Memo | None
) -> WrittenReport:
    """``write_report``'s files, written into ``out_dir`` (the staging folder)."""
    result = selection.result
    # One frame for the fits, the table and the figures (as ``plot`` has it): ``analysis.memo`` hashes the
    # rows of each frame it keys once, 0.6 s for 1,000 quick runs.
    frame = with_run_kinds(result.frame, result.runs)
    groups = group_runs(result.runs, BY_MACHINE, baseline)
    # The table's measured figures are judged by a fitting worker, beside the machines' fits.
    fitted, start = fitted_and_started(frame, groups.baseline.label, memo)
    # Worker processes draw the figures of the fitted laws while the table is computed here, and make the
    # predictions (unless kept, ``analysis.memo``) before they draw; then they draw the predictions'
    # figures while this process draws the table's.
    kept, predicted = memo.get(predictions_key(memo, frame, fitted)) if memo is not None else (False, None)
    beside = None if kept else (with_predictions, (frame, fitted, memo))
    later = PREDICTION_FIGURES
    with start_figures(frame, fitted, out_dir, formats, memo=memo, later=later, beside=beside) as drawing:
        table = compared_table(frame, fitted, groups.baseline.label, memo, start=start)
        fits = predicted if kept else drawing.beside_result()
        drawing.add(later, fits)
        lines = _report_lines(selection, frame, fits, table, groups)  # while the workers draw
        figure_paths = drawing.finish(table)
    figures: dict[str, list[str]] = {}
    for path in sorted(figure_paths, key=lambda path: _LINK_ORDER.get(path.suffix, len(_LINK_ORDER))):
        figures.setdefault(path.stem, []).append(f"{FIGURES_DIR}/{path.name}")
    path = out_dir / REPORT_NAME
    path.write_text("\n".join(_linked(lines, figures)) + "\n", encoding="utf-8")
    return WrittenReport(path=path, figures=tuple(figure_paths))


def _linked(lines: list[str | FigureLink], figures: dict[str, list[str]]) -> list[str]:
    """``lines`` with each ``FigureLink`` written as the figure drawn (``_figure_link``), or left out."""
    return [
        text
        for line in lines
        for text in (
            _figure_link(figures, line.stem, line.caption) if isinstance(line, FigureLink) else [line]
        )
    ]


def _report_lines(
    selection: Selection, frame: pd.DataFrame, fits: Fits, table: pd.DataFrame, groups: Groups
) -> list[str | FigureLink]:
    """report.md's lines, a ``FigureLink`` where a figure goes."""
    result = selection.result
    figures = None  # not drawn yet: ``FigureLink``s
    machines = frame["machine_id"].nunique()
    lines = ["# launchbench report", ""]
    busy = busy_lines(selection)
    if busy:
        lines += [*(f"**{line}**" for line in busy), ""]
    lines += [
        f"{len(result.files_used)} saved run file(s), {machines} machine(s), {len(frame)} measured cases. "
        "Times are per timed call; each table names its statistic: the CPU figures (t0, per-element costs, "
        "bandwidths, many vs one, the decode step) come from each case's fastest round (min), the GPU "
        "launch fits and the GPU decode steps from the median of the rounds.",
        "",
        "## Runs",
        "",
        *(f"- {line}" for line in selection_lines(selection) if line not in busy),  # busy: said above
        *(f"- {line}" for line in [frame_steadiness_line(frame)] if line),
        "",
    ]
    unstable = _unstable_lines(frame)
    if unstable:
        lines += [*unstable, ""]
    if result.problems:
        lines += [
            "Skipped or partly skipped inputs:",
            "",
            *(f"- {problem}" for problem in result.problems),
            "",
        ]
    lines += ["## Machines", "", *_machines_lines(frame), ""]
    lines += _host_lines(fits, figures)
    lines += _launch_lines(fits, figures)
    lines += _decode_lines(fits, figures)
    lines += _ops_lines(frame, fits, figures)
    lines += _ladder_lines(frame, fits, figures)
    compared = figure_lines(table, groups.groups, BY_MACHINE, markdown=True, rule=groups.rule)
    lines += ["", "## Machines compared", "", *compared, ""]
    lines += _figure_link(figures, "machines", "Fitted figures relative to the baseline machine")
    return lines
