"""Figures of saved runs (matplotlib, PNG and SVG): time vs size with the fitted law, measured vs predicted,
measured decode steps inside their predicted bounds, machines side by side, and — when GPU cases are
present — per-kernel time vs kernel duration and the lecture's decode step as stacked bars.

Figures are built on ``matplotlib.figure.Figure`` (the Agg canvas, no pyplot), so importing or calling this
module changes no global matplotlib state and needs no display. Data are SI; tick labels carry human units
through ``model.units``; every figure names the machines it shows. Each function returns the paths it wrote
(none when its cases are absent).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

from analysis.decode import where
from analysis.fits import Fits
from analysis.host import per_numpy_call
from model.laws import fixed_overhead_time
from model.units import fmt_count, fmt_si, fmt_time

FORMATS = ("png", "svg")
_DPI = 120
_WIDTH_IN = 7.5
_HEIGHT_IN = 4.8
#: Many-vs-one points with fewer pieces sit together at t(N), where labels would overlap: left unlabelled.
_LABEL_MIN_PIECES = 64


def save(figure: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write ``figure`` as ``out_dir/stem.png`` and ``.svg``; return both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in FORMATS:
        path = out_dir / f"{stem}.{fmt}"
        figure.savefig(path, dpi=_DPI, metadata={"Date": None} if fmt == "svg" else None)
        paths.append(path)
    return paths


def _time_axis(axis, label: str, seconds: object) -> None:
    """Log axis of seconds whose tick labels carry the unit (ns, µs, ms, s); ticks at each decade when
    ``seconds`` (the values drawn) span two or more, else also at 2 and 5 so a narrow axis keeps labels."""
    values = np.asarray(seconds, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    wide = values.size > 0 and values.max() / values.min() >= 100
    axis.set_major_locator(LogLocator(base=10, subs=(1.0,) if wide else (1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: fmt_time(value, 2) if value > 0 else "0"))
    axis.set_label_text(label)


def _count_axis(axis, label: str) -> None:
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda value, _: _short_count(value)))
    axis.set_label_text(label)


def _short_count(value: float) -> str:
    """1, 10, 100, 1k, 10k, … for log-axis ticks of counts."""
    return fmt_si(value, "", 1).strip() if value >= 1000 else f"{value:g}"


def _machines_title(title: str, machines: list[str]) -> str:
    return f"{title}\n" + "; ".join(machines)


def _figure(height_in: float = _HEIGHT_IN) -> tuple[Figure, Axes]:
    """A new figure of the report's width (``height_in`` inches tall, constrained layout) and its one axes."""
    figure = Figure(figsize=(_WIDTH_IN, height_in), layout="constrained")
    return figure, figure.add_subplot()


def _colors(machines: list[str]) -> dict[str, str]:
    return {machine: f"C{index % 10}" for index, machine in enumerate(machines)}


def plot_time_vs_size(frame: pd.DataFrame, host: pd.DataFrame, out_dir: Path) -> list[Path]:
    """``ufunc_size``: seconds per numpy call against elements per call (log-log), the median over runs at
    each size (bars: fastest to slowest run), and each machine's fitted law: t0 + n/r∞ over its in-cache
    sizes, t0 + n·(DRAM cost per element) over its DRAM sizes, with n½ marked."""
    sizes = frame[(frame["case"] == "ufunc_size") & (frame["device"] == "cpu")] if "case" in frame else frame
    if sizes.empty:
        return []
    machines = list(dict.fromkeys(sizes["machine_id"]))
    colors = _colors(machines)
    figure, ax = _figure()
    fits = host.set_index("machine_id") if not host.empty else pd.DataFrame()
    per_call_s = per_numpy_call(sizes)[0]
    for machine, rows in sizes.groupby("machine_id", sort=False):
        color = colors[machine]
        # One point per size: seconds per numpy call of each run's fastest round (the figure the law is fitted
        # to), the median over runs, bars from the fastest to the slowest run.
        spread = per_call_s[rows.index].groupby(rows["n"]).agg(["median", "min", "max"])
        ax.errorbar(
            spread.index,
            spread["median"],
            yerr=[spread["median"] - spread["min"], spread["max"] - spread["median"]],
            fmt="o",
            markersize=4,
            capsize=2,
            color=color,
            alpha=0.7,
            label=f"{machine}: measured ({rows['source'].nunique()} run(s); bars: fastest–slowest run)",
        )
        if machine not in fits.index or math.isnan(fits.loc[machine, "t0_s"]):
            continue
        fit = fits.loc[machine]
        cache_n = np.geomspace(1, max(fit["cache_sizes"]), 100)
        ax.plot(
            cache_n,
            fixed_overhead_time(cache_n, fit["t0_s"], fit["r_inf_per_s"]),
            color=color,
            label=f"t0 + n/r∞: t0 = {fmt_time(fit['t0_s'])}, r∞ = {fmt_si(fit['r_inf_per_s'], 'elem/s')}",
        )
        if fit["dram_points"]:
            dram_n = np.geomspace(min(fit["dram_sizes"]) / 4, max(fit["dram_sizes"]), 20)
            ax.plot(
                dram_n,
                fit["t0_s"] + dram_n * fit["dram_s_per_element"],
                color=color,
                linestyle="--",
                label=f"from DRAM: {fmt_time(fit['dram_s_per_element'])}/element",
            )
        ax.axvline(fit["n_half"], color=color, linestyle=":", linewidth=1)
        ax.annotate(
            f"n½ = {fmt_count(fit['n_half'])}",
            (fit["n_half"], fit["t0_s"] * 2),
            color=color,
            fontsize=8,
            rotation=90,
            ha="right",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.minorticks_off()  # the grid follows the decades; minor ticks would double the drawing time
    _count_axis(ax.xaxis, "elements per call, n (float32)")
    _time_axis(ax.yaxis, "time per numpy call (fastest round)", per_call_s)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(_machines_title("np.add(a, a, out=o): time per call vs size", machines), fontsize=9)
    return save(figure, out_dir, "time_vs_size")


def plot_parity(
    predictions: pd.DataFrame,
    out_dir: Path,
    stem: str,
    title: str,
    label: Callable[[pd.Series], str],
    measured: str,
    bounds: tuple[str, str] | None = None,
) -> list[Path]:
    """Measured against predicted seconds per call (log-log) with the y = x line, one colour per machine.

    ``predictions`` has ``machine_id``, ``measured_s`` and either ``predicted_s`` or, with ``bounds``, the
    two columns of the lower and upper predicted bound (s): each point then sits at its lower bound with a
    shaded band to its upper bound, so the measurement lies within the bounds where the band crosses y = x.
    ``label`` names each point (an empty name leaves it unlabelled, so dense clusters stay legible);
    ``measured`` says which statistic ``measured_s`` is, for the y-axis label.
    """
    if predictions.empty:
        return []
    if bounds:
        predictions = predictions.assign(predicted_s=predictions[bounds[0]])
    machines = list(dict.fromkeys(predictions["machine_id"]))
    colors = _colors(machines)
    figure, ax = _figure()
    values = [predictions["measured_s"], predictions["predicted_s"]]
    if bounds:
        values += [predictions[bounds[0]], predictions[bounds[1]]]
    low = float(np.nanmin(np.concatenate([np.asarray(v, dtype=float) for v in values]))) / 1.5
    high = float(np.nanmax(np.concatenate([np.asarray(v, dtype=float) for v in values]))) * 1.5
    ax.plot([low, high], [low, high], color="0.4", linewidth=1, label="measured = predicted")
    if not bounds:
        ax.fill_between(
            [low, high], [low / 1.2, high / 1.2], [low * 1.2, high * 1.2], color="0.85", label="±20 %"
        )
    for machine, rows in predictions.groupby("machine_id", sort=False):
        color = colors[machine]
        if bounds:
            for row in rows.itertuples(index=False):
                lo, hi = getattr(row, bounds[0]), getattr(row, bounds[1])
                ax.fill_between(
                    [lo, hi], [row.measured_s / 1.08] * 2, [row.measured_s * 1.08] * 2, color=color, alpha=0.2
                )
        ax.scatter(rows["predicted_s"], rows["measured_s"], color=color, s=18, label=machine, zorder=3)
        for _, row in rows.iterrows():
            if not (text := label(row)):
                continue
            ax.annotate(
                text,
                (row["predicted_s"], row["measured_s"]),
                fontsize=6,
                xytext=(3, 3),
                textcoords="offset points",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.minorticks_off()  # the grid follows the decades; minor ticks would double the drawing time
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    _time_axis(
        ax.xaxis,
        "predicted time per timed call" + (" (band: overlapped … serial bound)" if bounds else ""),
        [low, high],
    )
    _time_axis(ax.yaxis, f"measured time per timed call ({measured})", [low, high])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(_machines_title(title, machines), fontsize=9)
    return save(figure, out_dir, stem)


def plot_machines(table: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Machines side by side: each fitted figure's ratio to the baseline machine (log scale, 1 = equal),
    hatched where the difference is not significant or could not be judged. Only figures both machines have;
    nothing when no other machine shares one with the baseline."""
    others = table[(table["mark"] != "baseline") & np.isfinite(table["ratio"].astype(float))]
    if others.empty:
        return []
    baseline = table.attrs["baseline"]
    figures = list(dict.fromkeys(others["figure"]))
    machines = list(dict.fromkeys(others["machine_id"]))
    colors = _colors([baseline, *machines])
    figure, ax = _figure(height_in=1.2 + 0.35 * len(figures) * max(1, len(machines)))
    height = 0.8 / len(machines)
    for index, machine in enumerate(machines):
        rows = others[others["machine_id"] == machine].set_index("figure")
        for position, name in enumerate(figures):
            if name not in rows.index:
                continue
            row = rows.loc[name]
            ax.barh(
                position + index * height,
                row["ratio"] - 1.0,  # each bar runs from 1 (equal to the baseline) to the ratio
                left=1.0,
                height=height,
                color=colors[machine],
                hatch=None if row["mark"] == "significant" else "//",
                label=machine if position == 0 else None,
            )
    ax.axvline(1.0, color="0.3", linewidth=1)
    ratios = others["ratio"].astype(float)
    if ratios.max() / ratios.min() > 4:  # very different machines: ratios read better on a log axis
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 0.2×, 0.5×, 1×, 2×, 5×
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))
    ax.set_yticks([p + 0.4 - height / 2 for p in range(len(figures))], figures, fontsize=8)
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}×"))
    ax.set_xlabel("ratio to the baseline machine (×; hatched: not significant or not judged)")
    ax.legend(fontsize=7)
    ax.set_title(f"Fitted figures relative to the baseline\nbaseline: {baseline}", fontsize=9)
    return save(figure, out_dir, "machines")


def plot_knee(spin: pd.DataFrame, launch: pd.DataFrame, out_dir: Path) -> list[Path]:
    """``spin``: time per kernel against requested kernel duration d (log-log), eager and graph, per machine,
    with the model's overlapped…serial band per kernel (``analysis.launch.predict_spin``), the fitted launch
    cost and the fitted knee (``analysis.launch.fit_launch``). d = 0 is drawn at the left edge."""
    if spin.empty:
        return []
    machines = list(dict.fromkeys(spin["machine_id"]))
    colors = _colors(machines)
    figure, ax = _figure()
    smallest = (
        spin.loc[spin["kernel_ns"] > 0, "kernel_ns"].min() * 1e-9 if (spin["kernel_ns"] > 0).any() else 1e-6
    )
    floor_s = smallest / 4  # where d = 0 is drawn on the log axis
    for (machine, mode), rows in spin.groupby(["machine_id", "mode"], sort=False):
        rows = rows.sort_values("kernel_ns")
        color = colors[machine]
        d = np.maximum(rows["kernel_ns"].to_numpy(dtype=float) * 1e-9, floor_s)
        n = rows["n_kernels"].to_numpy(dtype=float)
        marker, style = ("o", "-") if mode == "eager" else ("s", "--")
        ax.fill_between(
            d, rows["overlapped_s"] / n, rows["serial_s"] / n, color=color, alpha=0.12, linewidth=0
        )
        ax.plot(
            d,
            rows["measured_per_kernel_s"],
            marker=marker,
            linestyle=style,
            color=color,
            label=f"{machine}, {mode}",
        )
    if not launch.empty:
        for machine in machines:
            fits = launch[launch["machine_id"] == machine].set_index("quantity")["value_s"]
            if "launch_s" in fits and np.isfinite(fits["launch_s"]):
                ax.axhline(fits["launch_s"], color=colors[machine], linestyle=":", linewidth=1)
                ax.annotate(
                    f"launch {fmt_time(fits['launch_s'])}",
                    (floor_s, fits["launch_s"]),
                    fontsize=7,
                    color=colors[machine],
                    va="bottom",
                )
            if "knee_s" in fits and np.isfinite(fits["knee_s"]) and fits["knee_s"] > 0:
                ax.axvline(fits["knee_s"], color=colors[machine], linestyle="-.", linewidth=1)
                ax.annotate(
                    f"knee {fmt_time(fits['knee_s'])}",
                    (fits["knee_s"], ax.get_ylim()[0]),
                    fontsize=7,
                    color=colors[machine],
                    rotation=90,
                    va="bottom",
                    ha="right",
                )
    d_all = np.maximum(np.sort(spin["kernel_ns"].unique()) * 1e-9, floor_s)
    ax.plot(d_all, d_all, color="0.5", linewidth=1, label="time per kernel = d")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.minorticks_off()  # the grid follows the decades; minor ticks would double the drawing time
    _time_axis(ax.xaxis, "requested kernel duration d (d = 0 drawn at the left edge)", d_all)
    _time_axis(ax.yaxis, "time per kernel (timed call / N)", spin["measured_per_kernel_s"])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(
        _machines_title("Spin kernels: time per kernel vs kernel duration (band: model bounds)", machines),
        fontsize=9,
    )
    return save(figure, out_dir, "knee")


def plot_decode(decode: pd.DataFrame, out_dir: Path) -> list[Path]:
    """The lecture's demo 2 (``analysis.launch.decode_with_measured``): one decode step per model and plan as
    a stacked bar of GPU work and launch overhead (serial composition), for the assumed launch costs and for
    each machine's measured eager and graph costs. Nothing without a measured machine."""
    if decode.empty or (decode["launch"] == "assumed").all():
        return []
    configs = list(dict.fromkeys(decode["config"]))
    figure = Figure(figsize=(_WIDTH_IN, 2.2 + 2.4 * len(configs)), layout="constrained")
    axes = figure.subplots(len(configs), 1, squeeze=False)[:, 0]
    machines = [m for m in dict.fromkeys(decode["machine_id"]) if isinstance(m, str)]
    for ax, config in zip(axes, configs, strict=True):
        rows = decode[decode["config"] == config]
        labels, gpu, overhead = [], [], []
        for row in rows.itertuples(index=False):
            who = (
                "assumed"
                if row.launch == "assumed"
                else f"M{machines.index(row.machine_id) + 1} {row.launch.split()[-1]}"
            )
            cost = (
                f"{fmt_time(row.t_launch_s, 2)}/kernel"
                if row.launch != "measured graph"
                else f"{fmt_time(row.t_launch_s, 2)}/node"
            )
            labels.append(f"{row.plan}, {who} {cost}")
            gpu.append(row.t_gpu_s)
            overhead.append(row.serial_s - row.t_gpu_s)
        positions = np.arange(len(labels))
        ax.barh(positions, gpu, color="C0", label="GPU work (roofline)")
        ax.barh(positions, overhead, left=gpu, color="C3", label="launch overhead (serial)")
        ax.set_yticks(positions, labels, fontsize=6)
        ax.invert_yaxis()
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: fmt_time(value, 2) if value > 0 else "0"))
        ax.set_xlabel("time per decode step")
        ax.set_title(f"{config}", fontsize=8)
        ax.legend(fontsize=6, loc="lower right")
    legend = "; ".join(f"M{index + 1} = {machine}" for index, machine in enumerate(machines))
    figure.suptitle(
        f"Decode step, batch 1, ctx 1,024, H100 roofline: assumed vs measured launch cost\n{legend}",
        fontsize=8,
    )
    return save(figure, out_dir, "decode_step")


def plot_decode_bands(steps: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Each measured decode step (``analysis.decode.decode_table``) drawn inside its predicted band: one row
    per machine / config / plan / mode, a shaded bar from the overlapped to the serial bound, the bytes-only
    work time as a tick, the measured host time as a dot (and the CUDA-event time as a ring on the GPU),
    labelled with where the dot falls. One panel per device, each on its own linear time axis from 0, so the
    bars read as proportions of the step."""
    if steps.empty or (steps := steps.dropna(subset=["overlapped_s", "serial_s"])).empty:
        return []
    devices = list(dict.fromkeys(steps["device"]))
    machines = list(dict.fromkeys(steps["machine_id"]))
    colors = _colors(machines)
    heights = [len(steps[steps["device"] == device]) for device in devices]
    figure = Figure(figsize=(_WIDTH_IN, 1.3 + 0.42 * sum(heights) + 0.5 * len(devices)), layout="constrained")
    axes = figure.subplots(len(devices), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, device in zip(axes, devices, strict=True):
        rows = steps[steps["device"] == device].reset_index(drop=True)
        positions = np.arange(len(rows))
        for y, row in zip(positions, rows.itertuples(index=False), strict=True):
            color = colors[row.machine_id]
            ax.barh(
                y, row.serial_s - row.overlapped_s, left=row.overlapped_s, height=0.6, color=color, alpha=0.25
            )
            ax.plot([row.work_s] * 2, [y - 0.3, y + 0.3], color="0.3", linewidth=1)
            ax.plot(row.measured_s, y, "o", color=color, markersize=5, zorder=3)
            if math.isfinite(row.gpu_time_s):
                ax.plot(row.gpu_time_s, y, "o", markerfacecolor="none", color=color, markersize=8, zorder=3)
            right_end = max(row.measured_s, row.serial_s)
            ax.annotate(where(row), (right_end, y), xytext=(6, -3), textcoords="offset points", fontsize=6)
        labels = [
            f"M{machines.index(row.machine_id) + 1} {row.config} {row.plan}"
            + (f" {row.mode}" if isinstance(row.mode, str) else "")
            + f" ({fmt_count(row.ops_per_step)} {'kernels' if device == 'cuda' else 'calls'})"
            for row in rows.itertuples(index=False)
        ]
        ax.set_yticks(positions, labels, fontsize=6)
        ax.invert_yaxis()
        right = float(np.nanmax(rows[["serial_s", "measured_s", "gpu_time_s"]].to_numpy(dtype=float)))
        ax.set_xlim(0, right * 1.35)  # room for the labels right of the bars
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: fmt_time(value, 3) if value > 0 else "0"))
        ax.grid(True, axis="x", alpha=0.3)
        work = (
            "bytes / best measured host bandwidth"
            if device == "cpu"
            else "roofline at the datasheet bandwidth"
        )
        ax.set_title(
            f"{'GPU (CuPy)' if device == 'cuda' else 'CPU (numpy)'}: band = overlapped … serial bound; "
            f"tick = work alone ({work})\ndot = measured host time (median)"
            + ("; ring = CUDA-event time" if device == "cuda" else ""),
            fontsize=7,
        )
        ax.set_xlabel("time per decode step")
    legend = "; ".join(f"M{index + 1} = {machine}" for index, machine in enumerate(machines))
    figure.suptitle(f"Decode steps inside their predicted bounds\n{legend}", fontsize=8)
    return save(figure, out_dir, "decode_bands")


def plot_all(frame: pd.DataFrame, fits: Fits, table: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Every figure the data allow, into ``out_dir``; ``table`` is ``analysis.compare.figure_table``."""
    paths = plot_time_vs_size(frame, fits.host, out_dir)
    paths += plot_parity(
        fits.many_vs_one,
        out_dir,
        "many_vs_one_parity",
        "Many small calls vs one big: measured vs predicted t(N) + (pieces − 1)·t0",
        lambda row: f"{row['variant']} ×{int(row['pieces'])}" if row["pieces"] >= _LABEL_MIN_PIECES else "",
        measured="fastest round",
    )
    paths += plot_parity(
        fits.spin,
        out_dir,
        "spin_parity",
        "Spin kernels: measured vs the model's overlapped … serial bounds",
        lambda row: f"{row['mode']} d={fmt_time(row['kernel_ns'] * 1e-9, 2)}",
        measured="median",
        bounds=("overlapped_s", "serial_s"),
    )
    paths += plot_knee(fits.spin, fits.launch, out_dir)
    paths += plot_decode_bands(fits.decode_steps, out_dir)
    paths += plot_decode(fits.decode_demo, out_dir)
    paths += plot_machines(table, out_dir)
    return paths
