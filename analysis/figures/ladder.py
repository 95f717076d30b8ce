"""The dispatch ladder across frameworks (``analysis.frameworks``): on the CPU, the fixed cost t0 of one call
per caller (numpy, PyTorch eager with one thread and its default, JAX's jitted add) with its interval; on the
GPU, the cost per launch against kernel arguments per layer (PyTorch's tiny op, its CUDA graph's nodes,
Triton, JAX). One panel for each side that has cases; None when neither has."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator

from analysis.figures.style import (
    PALETTE,
    SMALL_PT,
    TICK_PT,
    finish,
    log_axis,
    max_ticks,
    panels,
    side_legend,
    time_tick,
)
from analysis.frameworks import GRAPH_LAYER, fit_torch_graph, launch_costs
from model.units import fmt_time

_PANEL_IN = 2.8
#: Most bars of the CPU panel, one per caller and machine, whose labels its height holds (20 do, at 7 pt):
#: past that, one bar per caller over the machines (``_cpu_summary``).
_MAX_ROWS = 24
#: (colour, marker, what) of each GPU layer.
_LAYERS = {
    "torch": (PALETTE[0], "o", "PyTorch eager tiny op (host)"),
    GRAPH_LAYER: (PALETTE[1], "s", "PyTorch CUDA graph node (host, fitted)"),
    "triton": (PALETTE[2], "^", "Triton kernel (host)"),
    "jax": (PALETTE[3], "D", "JAX jitted call (host)"),
}


def ladder(frame: pd.DataFrame, calls: pd.DataFrame) -> Figure | None:
    """The ladder figure of ``frame``'s framework cases, or None without any; ``calls``: the law per caller
    (``analysis.fits.Fits.calls``, ``analysis.frameworks.fit_calls`` of ``frame``)."""
    calls = calls[calls["t0_s"].notna()] if not calls.empty else calls
    costs = launch_costs(frame)
    sides = [side for side, table in (("cpu", calls), ("gpu", costs)) if not table.empty]
    if not sides:
        return None
    figure, axes = panels(len(sides), _PANEL_IN, sharex=False, sharey=False)
    for ax, side in zip(axes, sides, strict=True):
        if side == "cpu":
            _cpu_panel(ax, calls)
        else:
            _gpu_panel(figure, ax, costs)
    titles = []
    if not calls.empty:
        fastest = calls.sort_values("t0_s").iloc[0]
        slowest = calls.sort_values("t0_s").iloc[-1]
        titles.append(
            f"one CPU call costs {fmt_time(fastest.t0_s)} ({fastest.caller}) to {fmt_time(slowest.t0_s)} "
            f"({slowest.caller})"
        )
    if not costs.empty:
        titles.append("each GPU launch's cost per framework layer")
    machines = calls["machine_id"].nunique() if not calls.empty else 0
    cpu_bars = (
        f"the median over {machines} machines, the line across it from the fastest machine's t0 to the "
        "slowest's (each machine's t0 and interval: the report's table)"
        if _summarised(calls)
        else "with its 95 % interval"
    )
    caption = (
        f"CPU: t0 of t(n) = t0 + n/r∞ fitted to each caller's add at in-cache sizes, {cpu_bars} (log axis). "
        "GPU: a timed call's host time (launches, then a synchronise) over its launches; torch's graph as "
        "the cost per node of a line through its replays."
    )
    return finish(figure, "The dispatch ladder: " + "; ".join(titles), caption)


def _summarised(calls: pd.DataFrame) -> bool:
    """Whether the CPU panel draws one bar per caller over the machines (``_cpu_summary``): when a bar per
    caller and machine would be more rows than ``_MAX_ROWS``."""
    return not calls.empty and len(calls) > _MAX_ROWS and calls["machine_id"].nunique() > 1


def _cpu_panel(ax: Axes, calls: pd.DataFrame) -> None:
    if _summarised(calls):
        _cpu_summary(ax, calls)
        return
    multiple = calls["machine_id"].nunique() > 1
    labels = [
        f"{row.caller} · {row.machine_id}" if multiple else row.caller
        for row in calls.itertuples(index=False)
    ]
    positions = range(len(calls))
    low = (calls["t0_s"] - calls["t0_low_s"]).clip(lower=0).fillna(0)
    high = (calls["t0_high_s"] - calls["t0_s"]).clip(lower=0).fillna(0)
    ax.barh(list(positions), calls["t0_s"], color=PALETTE[0], alpha=0.8, zorder=2)
    ax.errorbar(
        calls["t0_s"], list(positions), xerr=[low, high], fmt="none", ecolor="black", capsize=3, zorder=3
    )
    ax.set_yticks(list(positions), labels, fontsize=TICK_PT)
    _t0_axis(ax, calls[["t0_s", "t0_low_s", "t0_high_s"]], "fixed cost per call, t0")


def _cpu_summary(ax: Axes, calls: pd.DataFrame) -> None:
    """The CPU panel of a fleet (``_summarised``): one bar per caller at the median t0 over the machines,
    with a line from the fastest machine's t0 to the slowest's."""
    t0 = calls.groupby("caller", sort=False)["t0_s"]
    middle, low, high = t0.median(), t0.min(), t0.max()
    positions = list(range(len(middle)))
    ax.barh(positions, middle, color=PALETTE[0], alpha=0.8, zorder=2)
    ax.errorbar(
        middle, positions, xerr=[middle - low, high - middle], fmt="none", ecolor="black", capsize=3, zorder=3
    )
    ax.set_yticks(positions, list(middle.index), fontsize=TICK_PT)
    _t0_axis(ax, pd.concat([low, high]), "fixed cost per call, t0 (median over machines)")


def _t0_axis(ax: Axes, values: pd.DataFrame | pd.Series, label: str) -> None:
    """The CPU panel's log t0 axis over ``values`` (the bars and their whiskers): ``log_axis``'s ticks, and
    no minor tick labels, which matplotlib adds where the axis spans under a decade or so (3×10⁻⁷ beside
    4×10⁻⁷: they overlapped when every caller's t0 lay between 250 ns and 4 µs)."""
    log_axis(ax, "x", values.to_numpy(), time_tick, label, max_ticks(_PANEL_IN, 1.8))
    ax.set_xlabel(label, fontsize=SMALL_PT + 1)
    ax.grid(True, axis="x", alpha=0.3)


def _gpu_panel(figure: Figure, ax: Axes, costs: pd.DataFrame) -> None:
    handles, names = [], []
    width = float(costs["n_args"].max()) if costs["n_args"].notna().any() else 13.0
    for layer, (color, marker, what) in _LAYERS.items():
        rows = costs[costs["layer"] == layer]
        if rows.empty:
            continue
        if layer == GRAPH_LAYER:
            nodes = [fit_torch_graph(costs, machine)[1] for machine in rows["machine_id"].unique()]
            node_s = min((s for s in nodes if math.isfinite(s)), default=math.nan)
            if not math.isfinite(node_s):
                continue
            ax.hlines(node_s, 0, width, color=color, linestyle="--", zorder=2)
        elif rows["n_args"].notna().any():
            points = rows.groupby("n_args")["host_s"].median()
            ax.plot(points.index, points.to_numpy(), marker=marker, color=color, ms=5, zorder=3)
        else:
            ax.hlines(float(rows["host_s"].median()), 0, width, color=color, linestyle=":", zorder=2)
        handles.append(Line2D([], [], color=color, marker=marker, ms=5))
        names.append(what)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: time_tick(value)))
    ax.set_ylabel("cost per launch", fontsize=SMALL_PT + 1)
    ax.set_xlabel("kernel (or jitted call) arguments, n", fontsize=SMALL_PT + 1)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    if handles:
        side_legend(figure, handles, names)
