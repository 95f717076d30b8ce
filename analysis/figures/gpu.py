"""The GPU launch figures, one panel per machine: time per kernel against kernels per call, eager launches
beside graph replay (``launch_vs_graph``); the launch-cost ladder, cost per launch against kernel arguments
per layer with its fitted line (``launch_ladder``); spin kernels against their duration with the model's
band and the knee (``knee``); and the lecture's decode step with assumed and measured launch costs
(``decode_demo``). Each returns a ``Figure``, or None when its cases are absent."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from analysis.figures.style import (
    MAX_SERIES,
    PALETTE,
    SMALL_PT,
    TICK_PT,
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
from analysis.launch import (
    DEMO2_BATCH,
    DEMO2_CTX,
    DEMO2_GPU,
    LADDER_LAYERS,
    cuda_rows,
    fitted,
    per_kernel_s,
)
from model.units import fmt_count, fmt_percent, fmt_time

_PANEL_IN = 2.6
_ONE_PANEL_IN = 3.8

#: (colour, marker, what) of each series of ``launch_vs_graph``: case -> style.
_SUBMISSION = {
    "launch_batch": (PALETTE[0], "o", "eager: N launches, then one synchronise"),
    "graph_replay": (PALETTE[1], "s", "graph: N nodes replayed"),
    "launch_sync_each": (PALETTE[2], "^", "eager, synchronise after each"),
}
#: (colour, marker, what) of each layer of the launch-cost ladder.
_LAYERS = {
    "cupy": (PALETTE[0], "o", "CuPy RawKernel call (host)"),
    "driver": (PALETTE[1], "s", "cuLaunchKernel (host)"),
    "graph": (PALETTE[2], "^", "graph node (GPU time)"),
}
_MODES = {"eager": (PALETTE[0], "o", "-"), "graph": (PALETTE[1], "s", "--")}


def _panel_height(machines: Machines) -> float:
    return _ONE_PANEL_IN if len(machines) == 1 else _PANEL_IN


def _machine_panels(machines: Machines) -> tuple[Figure, list[Axes]]:
    """One panel per machine, each with its own time axis (so each can mark its own costs)."""
    return panels(len(machines), _panel_height(machines), sharey=False)


def _fit(launch: pd.DataFrame, machine: str, quantity: str) -> float:
    """``analysis.launch.fitted``, NaN where nothing was fitted."""
    return fitted(launch, machine, quantity) if not launch.empty else math.nan


def _signed(seconds: float) -> str:
    return ("+" if seconds >= 0 else "−") + fmt_time(abs(seconds))


# --- eager launches vs graph replay -------------------------------------------------------------------------


def launch_vs_graph(frame: pd.DataFrame, launch: pd.DataFrame) -> Figure | None:
    """``launch_batch``, ``graph_replay`` and ``launch_sync_each``: time per kernel (timed call / N) against N
    kernels per call (log-log), the median over runs, with each fitted line t(N)/N = intercept/N + slope;
    the per-launch and per-node costs are ticks of the panel's time axis."""
    cuda = cuda_rows(frame)
    rows = cuda[cuda["case"].isin(list(_SUBMISSION))] if not cuda.empty else cuda
    if rows.empty:
        return None
    machines = Machines.of(rows["machine_id"])
    rows = rows.assign(per_kernel_s=per_kernel_s(rows["median"], rows["n_kernels"]))
    figure, axes = _machine_panels(machines)
    limits = None
    for ax, machine in zip(axes, machines.ids, strict=True):
        mine = rows[rows["machine_id"] == machine]
        marks = [_fit(launch, machine, q) for q in ("launch_s", "graph_node_s")]
        limits = log_axis(
            ax,
            "y",
            rows["per_kernel_s"],
            time_tick,
            "time per kernel",
            max_ticks(_panel_height(machines), 3.2),
            marked=[m for m in marks if math.isfinite(m) and m > 0],
            limits=limits,
        )
        log_axis(ax, "x", rows["n_kernels"], count_tick, "kernels per timed call, N", max_ticks(3.5, 2.2))
        for case, (color, marker, _) in _SUBMISSION.items():
            points = mine[mine["case"] == case].groupby("n_kernels")["per_kernel_s"].median()
            if points.empty:
                continue
            ax.plot(points.index, points.to_numpy(), marker, color=color, ms=4.5, linestyle="none", zorder=3)
            line = _fitted_line(launch, machine, case, points.index.to_numpy(dtype=float))
            if line is not None:
                ax.plot(*line, color=color, linewidth=1.2, zorder=2)
        if len(machines) > 1:
            panel_title(ax, machines.label(machine))
        ax.grid(True, alpha=0.3)
    outer_labels(axes)
    handles = [Line2D([], [], color=c, marker=m, ms=4.5) for c, m, _ in _SUBMISSION.values()]
    side_legend(figure, handles, [what for _, _, what in _SUBMISSION.values()])
    eager = machines.values(lambda m: _fit(launch, m, "launch_s"), fmt_time)
    node = machines.values(lambda m: _fit(launch, m, "graph_node_s"), fmt_time)
    title = f"Per kernel: an eager launch costs {eager}, a replayed graph node {node}"
    caption = (
        "Each point: the median time of a timed call over its N kernels (median over runs); lines: the "
        "fitted t(N) = intercept + N × slope, divided by N, so each line levels off at its per-kernel cost "
        "(the labelled ticks of the time axis). Empty kernels: the time is launching and synchronising "
        "alone. " + machines.caption()
    )
    return finish(figure, title, caption)


def _fitted_line(
    launch: pd.DataFrame, machine: str, case: str, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    slope_name, intercept_name = {
        "launch_batch": ("launch_s", "sync_round_trip_s"),
        "graph_replay": ("graph_node_s", "graph_launch_s"),
        "launch_sync_each": ("launch_sync_s", None),
    }[case]
    slope = _fit(launch, machine, slope_name)
    intercept = _fit(launch, machine, intercept_name) if intercept_name else 0.0
    if not (math.isfinite(slope) and math.isfinite(intercept)):
        return None
    grid = np.geomspace(n.min(), n.max(), 60)
    return grid, (intercept + grid * slope) / grid


# --- the launch-cost ladder ---------------------------------------------------------------------------------


def launch_ladder(frame: pd.DataFrame, launch: pd.DataFrame) -> Figure | None:
    """``launch_args``: cost per launch against kernel arguments, per layer (median over runs), with the
    fitted line a + b·n_args (``analysis.launch``); a linear time axis from 0, so a + b·0 is read off it."""
    cuda = cuda_rows(frame)
    rows = cuda[cuda["case"] == "launch_args"] if not cuda.empty else cuda
    if rows.empty or "layer" not in rows.columns:
        return None
    cost = [
        float(per_kernel_s(getattr(row, LADDER_LAYERS[row.layer]), row.n_kernels))
        if row.layer in LADDER_LAYERS
        else math.nan
        for row in rows.itertuples(index=False)
    ]
    rows = rows.assign(cost_s=cost).dropna(subset=["cost_s"])
    if rows.empty:
        return None
    machines = Machines.of(rows["machine_id"])
    figure, axes = _machine_panels(machines)
    top = float(rows["cost_s"].max()) * 1.15
    for ax, machine in zip(axes, machines.ids, strict=True):
        mine = rows[rows["machine_id"] == machine]
        for layer, (color, marker, _) in _LAYERS.items():
            points = mine[mine["layer"] == layer].groupby("n_args")["cost_s"].median()
            if points.empty:
                continue
            ax.plot(points.index, points.to_numpy(), marker, color=color, ms=5, linestyle="none", zorder=3)
            base, per_arg = (_fit(launch, machine, f"ladder_{layer}{q}") for q in ("_s", "_per_arg_s"))
            if math.isfinite(base) and math.isfinite(per_arg):
                n = np.array([0.0, float(points.index.max())])
                ax.plot(n, base + per_arg * n, color=color, linewidth=1.2, zorder=2)
        ax.set_ylim(0, top)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: time_tick(value)))
        ax.set_ylabel("cost per launch", fontsize=SMALL_PT + 1)
        ax.set_xlabel("kernel arguments, n", fontsize=SMALL_PT + 1)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if len(machines) > 1:
            panel_title(ax, machines.label(machine))
        ax.grid(True, alpha=0.3)
    outer_labels(axes)
    handles = [Line2D([], [], color=c, marker=m, ms=5) for c, m, _ in _LAYERS.values()]
    side_legend(figure, handles, [what for _, _, what in _LAYERS.values()])
    slopes = [
        f"{name} {machines.values(lambda m, q=f'ladder_{layer}_per_arg_s': _fit(launch, m, q), _signed)}"
        for layer, name in (("cupy", "CuPy"), ("driver", "driver"), ("graph", "graph node"))
        if (rows["layer"] == layer).any()
    ]
    title = "Each kernel argument changes the cost per launch by " + ", ".join(slopes)
    caption = (
        "Empty kernels with 0 … 13 arguments. CuPy and driver: the host's time per launch while a long "
        "kernel holds the GPU; graph: the GPU's CUDA-event time per replayed node. Lines: a + b·n fitted "
        "per layer "
        "(weighted least squares). " + machines.caption()
    )
    return finish(figure, title, caption)


# --- spin kernels and the knee ------------------------------------------------------------------------------


def knee(spin: pd.DataFrame, launch: pd.DataFrame) -> Figure | None:
    """``analysis.launch.predict_spin``: time per kernel against kernel duration d (log-log), eager and graph,
    with the model's overlapped … serial band, the line time = d, the fitted launch cost (a tick of the time
    axis) and the fitted knee. d = 0 is drawn at the left edge, its tick labelled 0."""
    if spin.empty:
        return None
    machines = Machines.of(spin["machine_id"])
    achieved = spin["achieved_ns"].astype(float) if "achieved_ns" in spin else spin["kernel_ns"] * np.nan
    d_s = np.where(np.isfinite(achieved), achieved, spin["kernel_ns"].astype(float)) * 1e-9
    positive = d_s[d_s > 0]
    zero_at = float(positive.min()) / 4 if positive.size else 1e-7
    spin = spin.assign(d_s=np.maximum(d_s, zero_at))
    figure, axes = _machine_panels(machines)
    n = spin["n_kernels"].astype(float)
    band = np.concatenate([(spin["overlapped_s"] / n).to_numpy(), (spin["serial_s"] / n).to_numpy()])
    y_values = np.concatenate([spin["measured_per_kernel_s"].to_numpy(dtype=float), band])
    labels = []
    limits = None

    def d_tick(value: float) -> str:
        return "0" if math.isclose(value, zero_at, rel_tol=1e-6) else time_tick(value)

    for ax, machine in zip(axes, machines.ids, strict=True):
        launch_s = _fit(launch, machine, "launch_s")
        knee_s = _fit(launch, machine, "knee_s")
        limits = log_axis(
            ax,
            "y",
            y_values,
            time_tick,
            "time per kernel",
            max_ticks(_panel_height(machines), 3.2),
            marked=[launch_s] if math.isfinite(launch_s) and launch_s > 0 else (),
            limits=limits,
        )
        log_axis(ax, "x", spin["d_s"], d_tick, "kernel duration d", max_ticks(3.5, 2.0), marked=[zero_at])
        mine = spin[spin["machine_id"] == machine]
        for mode, (color, marker, style) in _MODES.items():
            rows = mine[mine["mode"] == mode].sort_values("d_s")
            if rows.empty:
                continue
            per = rows["n_kernels"].astype(float)
            ax.fill_between(
                rows["d_s"], rows["overlapped_s"] / per, rows["serial_s"] / per, color=color, alpha=0.15, lw=0
            )
            ax.plot(
                rows["d_s"],
                rows["measured_per_kernel_s"],
                marker=marker,
                linestyle=style,
                color=color,
                ms=4.5,
            )
        d_line = np.sort(spin["d_s"].unique())
        ax.plot(d_line, d_line, color="0.5", linewidth=1, zorder=1)
        if math.isfinite(launch_s) and launch_s > 0:
            ax.axhline(launch_s, color=PALETTE[6], linestyle=":", linewidth=1)
        if math.isfinite(knee_s) and knee_s > 0:
            ax.axvline(knee_s, color=PALETTE[6], linestyle="-.", linewidth=1)
            labels.append(
                direct_label(
                    ax,
                    f"knee {fmt_time(knee_s)}",
                    (knee_s, limits[1]),
                    [(3, -4, "left", "top"), (-3, -4, "right", "top")],
                )
            )
        if len(machines) > 1:
            panel_title(ax, machines.label(machine))
        ax.grid(True, alpha=0.3)
    outer_labels(axes)
    handles: list[object] = []
    texts = []
    for mode, (color, marker, style) in _MODES.items():
        if (spin["mode"] == mode).any():
            handles += [
                Line2D([], [], color=color, marker=marker, linestyle=style, ms=4.5),
                Patch(color=color, alpha=0.15),
            ]
            texts += [f"{mode}: measured", f"{mode}: model band"]
    handles += [
        Line2D([], [], color="0.5"),
        Line2D([], [], color=PALETTE[6], linestyle=":"),
        Line2D([], [], color=PALETTE[6], linestyle="-."),
    ]
    texts += ["time per kernel = d", "fitted cost per launch", "fitted knee"]
    side_legend(figure, handles, texts)
    inside = int(spin["within_bounds"].astype(bool).sum())
    knee_text = machines.values(lambda m: _fit(launch, m, "knee_s"), fmt_time)
    title = f"{inside} of {len(spin)} spin-kernel points lie inside the model's band"
    if knee_text != "n/a":
        title += f"; eager launches hide behind kernels longer than the knee, {knee_text}"
    caption = (
        f"{fmt_count(int(spin['n_kernels'].iloc[0]))} kernels of duration d per timed call (d as achieved "
        "where the run recorded it); time per kernel = timed call ÷ N, median of the rounds. Band: "
        "model.launch's overlapped … serial bounds with the fitted costs and the GPU's own gap per kernel g "
        "(the run's gpu_gap_s, else 2.1 µs), plus the synchronise round trip; a graph replay is a sum, "
        "its band a line. " + machines.caption()
    )
    return finish(figure, title, caption, labels)


# --- the lecture's decode step ------------------------------------------------------------------------------


def decode_demo(decode: pd.DataFrame) -> Figure | None:
    """``analysis.launch.decode_with_measured``: one decode step per model (panels) and plan as a stacked
    bar of GPU work (roofline) and overhead (serial composition: launches and the GPU's own gaps), at the
    lecture's assumed launch costs (the seed's model, g = 0) and each machine's measured eager, graph and
    graph + PDL costs (past ``MAX_SERIES`` machines, the machines of the lowest and highest eager cost).
    Nothing without a measured machine."""
    if decode.empty or (decode["launch"] == "assumed").all():
        return None
    measured = decode[decode["launch"] != "assumed"]
    machines = Machines.of(measured["machine_id"])
    shown = list(machines.ids)
    if len(shown) > MAX_SERIES:
        eager = measured[measured["launch"] == "measured eager"].groupby("machine_id")["t_launch_s"].first()
        shown = list(dict.fromkeys([eager.idxmin(), eager.idxmax()])) if not eager.empty else shown[:2]
    rows = decode[(decode["launch"] == "assumed") | decode["machine_id"].isin(shown)]
    configs = list(dict.fromkeys(rows["config"]))
    per_panel = len(rows) // len(configs)
    figure, axes = panels(len(configs), 0.6 + 0.22 * per_panel, columns=1, sharex=False, sharey=False)
    for ax, config in zip(axes, configs, strict=True):
        mine = rows[rows["config"] == config]
        names = [_demo_name(row, machines) for row in mine.itertuples(index=False)]
        positions = np.arange(len(mine))
        gpu = mine["t_gpu_s"].to_numpy(dtype=float)
        overhead = (mine["serial_s"] - mine["t_gpu_s"]).to_numpy(dtype=float)
        ax.barh(positions, gpu, color=PALETTE[0], height=0.7)
        ax.barh(positions, overhead, left=gpu, color=PALETTE[1], hatch="///", edgecolor="white", height=0.7)
        ax.set_yticks(positions, names, fontsize=TICK_PT)
        ax.set_ylim(len(mine) - 0.5, -0.5)
        right = ax.secondary_yaxis("right")
        right.set_yticks(
            positions, [f"{fmt_percent(s)} overhead" for s in mine["overhead_share"]], fontsize=TICK_PT
        )
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: time_tick(value)))
        ax.set_xlabel("time per decode step (serial: GPU work + launches + gaps)", fontsize=SMALL_PT + 1)
        panel_title(ax, f"{config}")
        ax.grid(True, axis="x", alpha=0.3)
    handles = [Patch(color=PALETTE[0]), Patch(facecolor=PALETTE[1], hatch="///", edgecolor="white")]
    side_legend(figure, handles, ["GPU work (roofline)", "launches and the GPU's gaps"])
    share = measured[measured["machine_id"].isin(shown)]["overhead_share"]
    title = (
        f"Launches and the GPU's gaps are {fmt_percent(share.min())} – {fmt_percent(share.max())} of a "
        f"serial decode step at the measured costs ({DEMO2_GPU.name} roofline, batch {DEMO2_BATCH}, "
        f"ctx {fmt_count(DEMO2_CTX)})"
    )
    caption = (
        "The lecture's demo 2: each model's decode step on the roofline, plus one launch per kernel of its "
        "plan, never hidden (serial composition); assumed launch costs in the seed's model (no GPU gap) "
        "beside each machine's fitted eager launch cost with the GPU's own gap per kernel, its graph-node "
        "cost (a graph replay is a sum), and the graph with programmatic dependent launch (the node gap cut "
        "by the run's launch_pdl ratio, else by half: an assumption). "
        + (
            f"Of {len(machines)} machines, those of the lowest and highest eager cost. "
            if len(shown) < len(machines)
            else ""
        )
        + machines.caption()
    )
    return finish(figure, title, caption)


def _demo_name(row: object, machines: Machines) -> str:
    if row.launch == "assumed":
        return f"{row.plan}, assumed {time_tick(row.t_launch_s)}/kernel"
    who = machines.label(row.machine_id) + " " if len(machines) > 1 else ""
    per = "node" if row.launch.startswith("measured graph") else "kernel"
    kind = "graph + PDL" if row.launch.endswith("PDL") else row.launch.split()[-1]
    return f"{row.plan}, {who}{kind} {time_tick(row.t_launch_s)}/{per}"
