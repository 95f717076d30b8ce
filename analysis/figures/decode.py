"""``decode_bands``: every measured decode step against its prediction (``analysis.decode.decode_table``).

The x axis is each time divided by the step's reference, on a log scale, so steps of different sizes share
one axis and a step 30× off stays on it. GPU: the reference is the overlapped (lower) bound; the band runs
from it to the serial one (its edges drawn as lines, so a band 0.4 % wide stays visible); a second, hatched
band is the calibrated roofline's, an estimate (the bandwidth the run's largest matrix-vector product
achieved). CPU: the reference is the prediction from other cases, at 1 with its 95 % interval, and the
seed's model beside it. Right of each row: where the measurement falls.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from analysis.decode_text import where, where_calibrated
from analysis.figures.style import (
    PALETTE,
    TICK_PT,
    Machines,
    finish,
    new_figure,
    panel_title,
    ratio_axis,
    side_legend,
)
from model.units import fmt_count

_BAND = PALETTE[5]
_BAND_EDGE = PALETTE[0]
_CALIBRATED = PALETTE[4]
_DEVICES = {"cpu": "CPU (numpy)", "cuda": "GPU (CuPy)"}
_ROW_IN = 0.42


def decode_bands(steps: pd.DataFrame) -> Figure | None:
    """One row per measured step (machine, model, plan, mode) with a prediction, one panel per device."""
    if steps.empty:
        return None
    gpu = (steps["device"] == "cuda") & steps["overlapped_s"].notna() & steps["serial_s"].notna()
    cpu = (steps["device"] == "cpu") & steps["predicted_s"].notna()
    steps = steps[gpu | cpu]
    if steps.empty:
        return None
    devices = [device for device in _DEVICES if (steps["device"] == device).any()]
    machines = Machines.of(steps["machine_id"])
    heights = [int((steps["device"] == device).sum()) for device in devices]
    figure = new_figure(1.9 + _ROW_IN * sum(heights) + 0.9 * len(devices))
    axes = figure.subplots(len(devices), 1, squeeze=False, height_ratios=heights)[:, 0]
    several_configs = steps["config"].nunique() > 1
    for ax, device in zip(axes, devices, strict=True):
        rows = steps[steps["device"] == device].reset_index(drop=True)
        ratios = _draw_rows(ax, rows, machines)
        names = [
            f"{_row_name(row, machines, several_configs, device)}\n{_row_note(row)}"
            for row in rows.itertuples(index=False)
        ]
        ax.set_yticks(np.arange(len(rows)), names, fontsize=TICK_PT)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        statistic = " / ".join(dict.fromkeys(str(s) for s in rows["statistic"]))
        reference = "overlapped bound" if device == "cuda" else "prediction"
        ratio_axis(ax, ratios, f"time ÷ the step's {reference} (measured: {_statistic(statistic)})")
        panel_title(ax, _DEVICES[device])
    side_legend(figure, *_legend(steps, machines))
    return finish(figure, _title(steps, devices), _caption(steps, machines))


def _draw_rows(ax, rows: pd.DataFrame, machines: Machines) -> np.ndarray:
    """Draw each row's prediction and measurements at x = time ÷ its reference; return every x drawn."""
    drawn = []
    for y, row in enumerate(rows.itertuples(index=False)):
        if row.device == "cpu":
            drawn += _draw_cpu_row(ax, y, row, machines)
            continue
        lower = row.overlapped_s
        top = row.serial_s / lower
        ax.barh(y, top - 1, left=1, height=0.56, color=_BAND, alpha=0.45, linewidth=0, zorder=1)
        ax.vlines([1, top], y - 0.28, y + 0.28, colors=_BAND_EDGE, linewidth=1.2, zorder=2)
        drawn += [1.0, top]
        if math.isfinite(row.calibrated_overlapped_s) and math.isfinite(row.calibrated_serial_s):
            low, high = row.calibrated_overlapped_s / lower, row.calibrated_serial_s / lower
            ax.barh(
                y,
                high - low,
                left=low,
                height=0.56,
                facecolor="none",
                edgecolor=_CALIBRATED,
                hatch="////",
                linewidth=1.2,
                zorder=2,
            )
            drawn += [low, high]
        color, marker = machines.style(row.machine_id)
        ax.plot(row.measured_s / lower, y, marker, color=color, ms=6, zorder=4)
        drawn.append(row.measured_s / lower)
        if math.isfinite(row.gpu_time_s):
            ax.plot(row.gpu_time_s / lower, y, marker, color=color, markerfacecolor="none", ms=9, zorder=4)
            drawn.append(row.gpu_time_s / lower)
    return np.asarray(drawn, dtype=float)


def _draw_cpu_row(ax, y: int, row: object, machines: Machines) -> list[float]:
    """A CPU step: its prediction at 1 with its interval, the seed's model, the measured step."""
    reference = row.predicted_s
    ax.vlines([1.0], y - 0.28, y + 0.28, colors=_BAND_EDGE, linewidth=2, zorder=2)
    drawn = [1.0]
    if math.isfinite(row.predicted_low_s) and math.isfinite(row.predicted_high_s):
        low, high = row.predicted_low_s / reference, row.predicted_high_s / reference
        ax.barh(y, high - low, left=low, height=0.3, color=_BAND, alpha=0.45, zorder=1)
        drawn += [low, high]
    if math.isfinite(row.serial_s):
        ax.plot(row.serial_s / reference, y, "|", color=PALETTE[6], ms=12, mew=1.8, zorder=3)
        drawn.append(row.serial_s / reference)
    color, marker = machines.style(row.machine_id)
    ax.plot(row.measured_s / reference, y, marker, color=color, ms=6, zorder=4)
    drawn.append(row.measured_s / reference)
    return drawn


def _row_name(row: object, machines: Machines, several_configs: bool, device: str) -> str:
    who = machines.label(row.machine_id) if len(machines) > 1 else ""
    parts = [
        who,
        row.config if several_configs else "",
        row.plan,
        row.mode if isinstance(row.mode, str) else "",
    ]
    unit = "kernels" if device == "cuda" else "calls"
    return " ".join(part for part in parts if part) + f" ({fmt_count(row.ops_per_step)} {unit})"


def _row_note(row: object) -> str:
    """Where the measurement falls, and (GPU) the band's width relative to its lower bound or (CPU) the
    measured step against the seed's model."""
    if row.device == "cpu":
        note = where(row)
        if math.isfinite(row.serial_s):
            note += f"; {row.measured_s / row.serial_s:.2f}× the seed's model"
        return note
    width = (row.serial_s - row.overlapped_s) / row.overlapped_s
    note = f"{where(row)}; band {width * 100:.2g} % wide"
    if math.isfinite(row.calibrated_overlapped_s) and math.isfinite(row.calibrated_serial_s):
        note += f"\ncalibrated roofline: {where_calibrated(row)}"
    return note


def _statistic(statistic: str) -> str:
    return {"min": "fastest round", "median": "median of the rounds"}.get(statistic, statistic)


def _legend(steps: pd.DataFrame, machines: Machines) -> tuple[list, list[str]]:
    handles: list[object] = []
    labels: list[str] = []
    if (steps["device"] == "cuda").any():
        handles.append(Patch(facecolor=_BAND, alpha=0.45, edgecolor=_BAND_EDGE))
        labels.append("GPU, predicted band:\noverlapped … serial bound")
    if steps["calibrated_serial_s"].notna().any():
        handles.append(Patch(facecolor="none", edgecolor=_CALIBRATED, hatch="////"))
        labels.append("GPU, calibrated roofline\n(an estimate): matvec's\nachieved bandwidth")
    if (steps["device"] == "cpu").any():
        handles.append(Patch(facecolor=_BAND, alpha=0.45, edgecolor=_BAND_EDGE))
        labels.append("CPU: predicted from\nother cases, 95 %")
    for machine in machines.ids:
        color, marker = machines.style(machine)
        handles.append(Line2D([], [], color=color, marker=marker, linestyle="none", ms=6))
        labels.append("measured" + (f": {machines.label(machine)}" if len(machines) > 1 else ""))
    if steps["gpu_time_s"].notna().any():
        handles.append(
            Line2D([], [], color="0.3", marker="o", markerfacecolor="none", linestyle="none", ms=9)
        )
        labels.append("GPU: CUDA-event time")
    if (steps["device"] == "cpu").any() and steps["serial_s"].notna().any():
        handles.append(Line2D([], [], color=PALETTE[6], marker="|", linestyle="none", ms=10, mew=1.5))
        labels.append("CPU: the seed's model")
    return handles, labels


def _title(steps: pd.DataFrame, devices: list[str]) -> str:
    """Per device, how the drawn steps lie against their prediction."""
    parts = []
    for device in devices:
        rows = steps[steps["device"] == device]
        name = _DEVICES[device].split()[0]
        if device == "cpu":
            low, high = rows["measured_over_predicted"].min(), rows["measured_over_predicted"].max()
            parts.append(f"{name}: {len(rows)} decode step(s) at {low:.2f}–{high:.2f}× their prediction")
            continue
        inside = int(rows["within_bounds"].astype(bool).sum())
        above = int((rows["measured_s"] > rows["serial_s"]).sum())
        below = len(rows) - inside - above
        counts = [
            (below, "below the overlapped bound"),
            (inside, "inside the band"),
            (above, "above the serial bound"),
        ]
        present = [(count, text) for count, text in counts if count]
        if len(present) == 1:
            count, text = present[0]
            parts.append(f"{name}: {count} of {len(rows)} decode steps {text}")
        else:
            listed = ", ".join(f"{count} {text}" for count, text in present)
            parts.append(f"{name}: of {len(rows)} decode steps {listed}")
    return "; ".join(parts)


def _caption(steps: pd.DataFrame, machines: Machines) -> str:
    parts = ["x: each time ÷ the step's reference (log scale), all from the same run's own figures."]
    how = {
        "cpu": "reference = the prediction from other cases: the weights at the probe case's bandwidth + "
        "attention (its own case) + each call at its op's cost + the floor's remainder, with its 95 % "
        "interval from each term's run-to-run spread; the seed's model = bytes at that bandwidth + calls × "
        "t0",
        "cuda": "band from the overlapped bound (work and launches hidden behind each other) to the serial "
        "one; work on the datasheet roofline, plus launches at the fitted launch costs",
    }
    for device in _DEVICES:
        rows = steps[steps["device"] == device]
        if not rows.empty:
            statistic = " / ".join(dict.fromkeys(_statistic(str(s)) for s in rows["statistic"]))
            parts.append(f"{_DEVICES[device].split()[0]}: {how[device]}; measured: {statistic}.")
    parts.append(machines.caption())
    return " ".join(parts)
