"""The CPU figures: numpy's time per call against size with the fitted law (``time_vs_size``), many small
calls against one big (``many_vs_one``), and the fixed cost of each numpy op of the decode step beside t0
(``op_costs``). Each returns a ``Figure``, or None when its cases are absent."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from analysis import ops
from analysis.figures.style import (
    CONTEXT,
    PALETTE,
    SMALL_PT,
    DirectLabel,
    Machines,
    count_tick,
    direct_label,
    finish,
    log_axis,
    max_ticks,
    outer_labels,
    panel_title,
    panels,
    side_legend,
    time_tick,
)
from analysis.host import per_numpy_call
from model.laws import fixed_overhead_time
from model.units import fmt_count, fmt_si, fmt_signed_percent, fmt_time

#: Panel heights (inches): one panel for all machines, or one per machine.
_SHARED_IN, _PANEL_IN = 4.2, 2.3


def _cpu(frame: pd.DataFrame, case: str) -> pd.DataFrame:
    if frame.empty or not {"case", "device"} <= set(frame.columns):
        return frame.iloc[0:0]
    return frame[(frame["case"] == case) & (frame["device"] == "cpu")]


def _fit_of(host: pd.DataFrame, machine: str) -> pd.Series | None:
    """The machine's ``fit_host`` row when its law was fitted, else None."""
    if host.empty:
        return None
    rows = host[host["machine_id"] == machine]
    if rows.empty or not math.isfinite(float(rows["t0_s"].iloc[0])):
        return None
    return rows.iloc[0]


def _layout(machines: Machines, shared_in: float, panel_in: float) -> tuple[Figure, dict[str, Axes]]:
    """One panel for all machines, or one per machine past ``MAX_SERIES``."""
    if not machines.panels:
        figure, (ax,) = panels(1, shared_in)
        return figure, dict.fromkeys(machines.ids, ax)
    figure, axes = panels(len(machines), panel_in, sharey=False)
    return figure, dict(zip(machines.ids, axes, strict=True))


# --- time per call vs size ----------------------------------------------------------------------------------


def time_vs_size(frame: pd.DataFrame, host: pd.DataFrame) -> Figure | None:
    """``ufunc_size``: seconds per ``np.add`` call against elements per call (log-log): each run's fastest
    round, the median over runs (bars: fastest to slowest run, where a machine has several runs), the
    fixed-overhead law t0 + n/r∞ over the in-cache sizes it was fitted to, the DRAM line near the DRAM
    sizes, n½ marked; t0 gets a tick of its own where a panel shows one machine."""
    sizes = _cpu(frame, "ufunc_size")
    if sizes.empty:
        return None
    machines = Machines.of(sizes["machine_id"])
    per_call = per_numpy_call(sizes)[0]
    figure, axes = _layout(machines, _SHARED_IN, _PANEL_IN)
    medians = {m: per_call[rows.index].groupby(rows["n"]).median() for m, rows in sizes.groupby("machine_id")}
    # The DRAM lines run to 1.4 × the largest DRAM size: their ends are part of both axes (never cut).
    dram_fits = [
        fit for machine in machines.ids if (fit := _fit_of(host, machine)) is not None and fit["dram_points"]
    ]
    dram_ends = [fit["t0_s"] + 1.4 * max(fit["dram_sizes"]) * fit["dram_s_per_element"] for fit in dram_fits]
    dram_sizes = [1.4 * max(fit["dram_sizes"]) for fit in dram_fits]
    x_values = sizes["n"].to_numpy(dtype=float)
    panel_in = _SHARED_IN if not machines.panels else _PANEL_IN
    limits = None
    labels: list[DirectLabel] = []
    several_runs = False
    for machine in machines.ids:
        ax = axes[machine]
        fit = _fit_of(host, machine)
        alone = machines.panels or len(machines) == 1
        limits = log_axis(
            ax,
            "y",
            per_call,
            time_tick,
            "time per call",
            max_ticks(panel_in, 3.5),
            include=dram_ends,
            marked=[fit["t0_s"]] if alone and fit is not None else (),
            limits=limits,
        )
        log_axis(
            ax, "x", x_values, count_tick, "elements per call, n", max_ticks(3.5, 2.2), include=dram_sizes
        )
        if machines.panels:
            for other, curve in medians.items():
                if other != machine:
                    ax.plot(curve.index, curve.to_numpy(), color=CONTEXT, linewidth=1, zorder=1)
            panel_title(ax, _panel_title(machines, machine, fit))
        rows = sizes[sizes["machine_id"] == machine]
        several_runs |= _draw_sizes(ax, machines, machine, rows, per_call, fit)
        if fit is not None:
            # Right of the dotted line just below the curve, else at the foot of the line.
            labels.append(
                direct_label(
                    ax,
                    f"n½ = {fmt_count(fit['n_half'])}",
                    (fit["n_half"], 2 * fit["t0_s"]),
                    [(4, -6, "left", "top"), (-4, 4, "right", "bottom")],
                    color=machines.color(machine),
                )
            )
        ax.grid(True, alpha=0.3)
    outer_labels(list(dict.fromkeys(axes.values())))
    side_legend(figure, *_size_legend(machines, host, several_runs))
    return finish(figure, _size_title(machines, host), _size_caption(machines, several_runs), labels)


def _draw_sizes(
    ax: Axes, machines: Machines, machine: str, rows: pd.DataFrame, per_call: pd.Series, fit: pd.Series | None
) -> bool:
    """One machine's points and fitted lines; returns whether it drew bars (several runs)."""
    color, marker = machines.style(machine)
    spread = per_call[rows.index].groupby(rows["n"]).agg(["median", "min", "max"])
    several = rows["source"].nunique() > 1
    if several:
        ax.errorbar(
            spread.index,
            spread["median"],
            yerr=[spread["median"] - spread["min"], spread["max"] - spread["median"]],
            fmt="none",
            ecolor=color,
            elinewidth=1,
            capsize=2,
            zorder=2,
        )
    fitted = set(fit["cache_sizes"]) | set(fit["dram_sizes"]) if fit is not None else set()
    used = spread.index.isin(list(fitted))
    ax.plot(spread.index[used], spread["median"][used], marker, color=color, linestyle="none", ms=5, zorder=3)
    ax.plot(
        spread.index[~used],
        spread["median"][~used],
        marker,
        color=color,
        markerfacecolor="white",
        linestyle="none",
        ms=5,
        zorder=3,
    )
    if fit is None:
        return several
    cache_n = np.geomspace(min(fit["cache_sizes"]), max(fit["cache_sizes"]), 100)
    ax.plot(cache_n, fixed_overhead_time(cache_n, fit["t0_s"], fit["r_inf_per_s"]), color=color, zorder=2)
    if fit["dram_points"]:
        # Only near the sizes it was fitted to: the line says nothing about the sizes between.
        dram_n = np.geomspace(min(fit["dram_sizes"]) / 1.4, max(fit["dram_sizes"]) * 1.4, 20)
        ax.plot(
            dram_n, fit["t0_s"] + dram_n * fit["dram_s_per_element"], color=color, linestyle="--", zorder=2
        )
    low = ax.get_ylim()[0]
    ax.vlines(fit["n_half"], low, 2 * fit["t0_s"], colors=color, linestyles=":", linewidth=1.2, zorder=2)
    return several


def _panel_title(machines: Machines, machine: str, fit: pd.Series | None) -> str:
    if fit is None:
        return f"{machines.label(machine)}: law not fitted"
    return f"{machines.label(machine)}: t0 = {fmt_time(fit['t0_s'])}, n½ = {fmt_count(fit['n_half'])}"


def _size_legend(machines: Machines, host: pd.DataFrame, several_runs: bool) -> tuple[list, list[str]]:
    handles: list[object] = []
    labels: list[str] = []
    if not machines.panels:  # the fitted figures of each machine (in panels: their titles)
        for machine in machines.ids:
            color, marker = machines.style(machine)
            handles.append(Line2D([], [], color=color, marker=marker, ms=5))
            fit = _fit_of(host, machine)
            lines = [machines.label(machine)] if len(machines) > 1 else []
            if fit is not None:
                lines.append(f"t0 = {fmt_time(fit['t0_s'])}, n½ = {fmt_count(fit['n_half'])}")
                lines.append(f"r∞ = {fmt_si(fit['r_inf_per_s'], 'elem/s')}")
                if fit["dram_points"]:
                    lines.append(f"DRAM: {fmt_time(fit['dram_s_per_element'])}/elem")
            labels.append("\n".join(lines) or "measured")
    ink = "0.25"
    handles += [
        Line2D([], [], color=ink, marker="o", linestyle="none", ms=5),
        Line2D([], [], color=ink, marker="o", markerfacecolor="white", linestyle="none", ms=5),
        Line2D([], [], color=ink),
        Line2D([], [], color=ink, linestyle="--"),
        Line2D([], [], color=ink, linestyle=":"),
    ]
    labels += [
        "fitted point",
        "left out of the fits\n(between cache and DRAM)",
        "t0 + n/r∞, in cache",
        "t0 + n × DRAM cost",
        "n½: time = 2 × t0",
    ]
    if several_runs:
        handles.append(Line2D([], [], color=ink, marker="|", linestyle="none", ms=8))
        labels.append("bar: fastest–slowest run")
    return handles, labels


def _size_title(machines: Machines, host: pd.DataFrame) -> str:
    fitted = [m for m in machines.ids if _fit_of(host, m) is not None]
    if not fitted:
        return "np.add: time per call against size (the fixed-overhead law could not be fitted)"
    fits = {m: _fit_of(host, m) for m in fitted}
    t0 = machines.values(lambda m: float(fits[m]["t0_s"]) if m in fits else math.nan, fmt_time)
    n_half = machines.values(lambda m: float(fits[m]["n_half"]) if m in fits else math.nan, fmt_count)
    title = (
        f"Fixed cost per np.add call t0 = {t0}; a call of n½ = {n_half} elements spends half its time on it"
        + machines.scope()
    )
    missing = len(machines) - len(fitted)
    return title + (f" (law not fitted on {missing} machine(s))" if missing else "")


def _size_caption(machines: Machines, several_runs: bool) -> str:
    return (
        "Each point: seconds per np.add(a, a, out=o) call on float32, the fastest round of a run"
        + (", the median over runs (bars: fastest to slowest run)" if several_runs else "")
        + ". Solid: t0 + n/r∞ fitted on the sizes whose data fit the core's cache; dashed: t0 + n × the "
        "per-element cost from DRAM, drawn only near the sizes it was fitted to; hollow points lie between "
        "the two and enter neither fit. "
        + ("Grey: the other machines' medians. " if machines.panels else "")
        + machines.caption()
    )


# --- many small calls vs one big ----------------------------------------------------------------------------

#: (colour, marker, what) of each many-vs-one variant.
_VARIANTS = {
    "views": (PALETTE[0], "o", "views made once (the call cost alone)"),
    "slices": (PALETTE[1], "s", "sliced in the loop (what a user writes)"),
}


def many_vs_one(predictions: pd.DataFrame) -> Figure | None:
    """``analysis.host.predict_many_vs_one``: time of the whole timed call (N elements in ``pieces`` calls)
    against pieces, measured for each variant and predicted t(N) + (pieces − 1)·t0, one panel per machine."""
    if predictions.empty:
        return None
    machines = Machines.of(predictions["machine_id"])
    figure, axes = panels(len(machines), _SHARED_IN if len(machines) == 1 else _PANEL_IN)
    seconds = predictions[["measured_s", "predicted_s"]].to_numpy(dtype=float)
    panel_in = _SHARED_IN if len(machines) == 1 else _PANEL_IN
    limits = None
    for ax, machine in zip(axes, machines.ids, strict=True):
        rows = predictions[predictions["machine_id"] == machine].sort_values("pieces")
        limits = log_axis(
            ax, "y", seconds, time_tick, "time per timed call", max_ticks(panel_in, 3.5), limits=limits
        )
        log_axis(ax, "x", rows["pieces"], count_tick, "pieces (calls per timed call)", max_ticks(3.5, 2.2))
        predicted = rows.groupby("pieces")["predicted_s"].median()
        ax.plot(predicted.index, predicted.to_numpy(), color="0.2", linewidth=1.2, zorder=2)
        for variant, (color, marker, _) in _VARIANTS.items():
            points = rows[rows["variant"] == variant]
            ax.plot(
                points["pieces"], points["measured_s"], marker, color=color, ms=5, linestyle="none", zorder=3
            )
        if len(machines) > 1:
            panel_title(ax, machines.label(machine))
        ax.grid(True, alpha=0.3)
    outer_labels(axes)
    handles = [Line2D([], [], color=c, marker=m, linestyle="none", ms=5) for c, m, _ in _VARIANTS.values()]
    handles.append(Line2D([], [], color="0.2"))
    texts = [what for _, _, what in _VARIANTS.values()] + ["predicted:\nt(N) + (pieces − 1)·t0"]
    side_legend(figure, handles, texts)
    caption = (
        "262,144 float32 elements added in 1 … 1,024 calls per timed call; each point the fastest round "
        "(median over runs). Prediction: one call on all N elements (measured by the size sweep) plus t0 for "
        "each extra call; where N was not measured, pieces × (t0 + n/r∞). Error = (predicted − measured) / "
        "measured. " + machines.caption()
    )
    return finish(figure, _many_title(predictions, machines), caption)


def _many_title(predictions: pd.DataFrame, machines: Machines) -> str:
    """What the many-vs-one points show, at the most pieces measured: slices against views, and how far the
    measurements lie from the prediction."""
    most = int(predictions["pieces"].max())
    at_most = predictions[predictions["pieces"] == most]
    by = at_most.pivot_table(index="machine_id", columns="variant", values="measured_s", aggfunc="median")
    parts = []
    if {"views", "slices"} <= set(by.columns):
        slowdown = (by["slices"] / by["views"]).dropna()
        if not slowdown.empty:
            parts.append(
                f"at {fmt_count(most)} pieces slicing in the loop takes {_span(slowdown)} the time of views"
            )
    # The error as the summary's and the report's tables give it: (predicted − measured) / measured.
    error = predictions["rel_error"]
    for variant in _VARIANTS:
        mine = error[predictions["variant"] == variant].dropna()
        if not mine.empty:
            parts.append(f"prediction error of {variant} {_error_span(mine)}")
    text = "; ".join(parts) if parts else "measured against t(N) + (pieces − 1)·t0"
    return f"Many small calls vs one big: {text}"


def _error_span(errors: pd.Series) -> str:
    """The range of relative errors (fractions) as signed percentages: "−21% … +23%", or one value."""
    low, high = fmt_signed_percent(float(errors.min())), fmt_signed_percent(float(errors.max()))
    return low if low == high else f"{low} … {high}"


def _span(values: pd.Series) -> str:
    low, high = float(values.min()), float(values.max())
    return f"{low:.2g}×" if f"{low:.2g}" == f"{high:.2g}" else f"{low:.2g}–{high:.2g}×"


# --- per-op fixed costs -------------------------------------------------------------------------------------


def op_costs(frame: pd.DataFrame, host: pd.DataFrame) -> Figure | None:
    """``numpy_op`` (``analysis.ops.op_costs``): the fixed cost of one call of each numpy op of the decode
    step, beside t0 (the fitted cost of ``np.add``, the seed's one cost per call), on a log time axis; with
    the op's calls per decode step (``decode_floor``'s call list) right of the panel. Up to ``MAX_SERIES``
    machines one marker each; more: the median over machines and the fastest to slowest machine."""
    costs = ops.op_costs(frame)
    if costs.empty:
        return None
    machines = Machines.of(costs["machine_id"])
    table = costs.pivot_table(index="op", columns="machine_id", values="cost_s", aggfunc="median")
    t0 = pd.Series({m: f["t0_s"] for m in machines.ids if (f := _fit_of(host, m)) is not None}, dtype=float)
    table = table.loc[table.median(axis=1).sort_values().index]
    rows = [*table.index]
    labels = ["t0: np.add, fitted law", *rows] if not t0.empty else rows
    values = (
        pd.concat([t0.to_frame().T.set_axis(["t0: np.add, fitted law"]), table]) if not t0.empty else table
    )
    height = 1.0 + 0.2 * len(labels)
    figure, (ax,) = panels(1, height)
    positions = np.arange(len(labels))
    if not machines.panels:
        for machine in machines.ids:
            if machine not in values.columns:
                continue
            color, marker = machines.style(machine)
            ax.plot(
                values[machine],
                positions,
                marker,
                color=color,
                ms=5,
                linestyle="none",
                label=machines.label(machine),
            )
    else:
        low, mid, high = values.min(axis=1), values.median(axis=1), values.max(axis=1)
        ax.hlines(positions, low, high, colors=PALETTE[0], linewidth=1.5, label="fastest to slowest machine")
        ax.plot(
            mid,
            positions,
            "o",
            color=PALETTE[0],
            ms=5,
            linestyle="none",
            label=f"median of {len(machines)} machines",
        )
    ax.set_yticks(positions, labels, fontsize=SMALL_PT)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    if not t0.empty:
        ax.axhspan(-0.5, 0.5, color=CONTEXT, alpha=0.5, zorder=0)
    log_axis(
        ax,
        "x",
        values.to_numpy(dtype=float),
        time_tick,
        "fixed cost of one call (fastest round)",
        max_ticks(6, 2.2),
    )
    ax.grid(True, axis="x", alpha=0.3)
    _calls_per_step(ax, frame, labels, positions)
    if len(machines) > 1:  # one machine: the caption names it
        side_legend(figure, *ax.get_legend_handles_labels())
    ratio = values.iloc[len(labels) - len(rows) :].div(t0, axis=1) if not t0.empty else pd.DataFrame()
    if not ratio.empty and np.isfinite(ratio.to_numpy(dtype=float)).any():
        flat = ratio.to_numpy(dtype=float)
        flat = flat[np.isfinite(flat)]
        title = (
            f"The decode step's {len(rows)} numpy ops cost {flat.min():.2g}× – {flat.max():.2g}× t0 per call"
        )
    else:
        title = f"Fixed cost per call of the decode step's {len(rows)} numpy ops"
    caption = (
        "Each op replayed with the decode step's own shapes, strides and keywords on a model where data cost "
        "nothing; its fastest round per call (median over runs). "
        + ("Dot: median over machines; bar: fastest to slowest machine. " if machines.panels else "")
        + machines.caption()
    )
    return finish(figure, title, caption)


def _calls_per_step(ax: Axes, frame: pd.DataFrame, labels: list[str], positions: np.ndarray) -> None:
    """Right of the panel, each op's calls per decode step (fused / unfused), from ``decode_floor``'s call
    lists (the benchmark step's own); nothing without them."""
    floors = ops.floor_table(frame)
    if floors.empty:
        return
    first_machine = floors[floors["machine_id"] == floors["machine_id"].iloc[0]]
    plans = {row.plan: row.op_counts for row in first_machine.itertuples(index=False)}
    if not plans:
        return
    calls = [
        " / ".join(str(counts.get(label, 0)) for counts in plans.values())
        if any(label in counts for counts in plans.values())
        else ""
        for label in labels
    ]
    right = ax.secondary_yaxis("right")
    right.set_yticks(positions, calls, fontsize=SMALL_PT)
    right.set_ylabel(f"calls per decode step ({' / '.join(plans)})", fontsize=SMALL_PT)
