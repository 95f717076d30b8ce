"""The GPU launch suite's section of the terminal summary: per machine, the fitted figures with their CIs,
the launch-cost ladder, the spin kernels against ``model.launch``'s bounds and the lecture's demo 2
recomputed with the measured costs.

``analysis.launch`` computes them (frames of SI values); this module, one floor above it, turns them into
lines, so that the family imports nothing that prints.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.fit import DEFAULT_LEVEL
from analysis.fits import Fits, fit_all
from analysis.launch import (
    DEMO2_BATCH,
    DEMO2_CTX,
    DEMO2_GPU,
    QUANTITIES,
    cuda_rows,
    ladder_by_count,
    per_kernel_s,
)
from model.tables import format_table
from model.units import fmt_count, fmt_percent, fmt_time


def summary_section(frame: pd.DataFrame, fitted: Fits | None = None) -> list[str]:
    """The GPU launch lines of the terminal summary; empty when ``frame`` holds no case of the suite.

    Per machine: the fitted figures with their CIs, the spin kernels against ``model.launch``'s bounds, and
    the lecture's demo 2 recomputed with the measured costs. ``fitted``: ``analysis.fits.fit_all(frame)``,
    fitted here when not given.
    """
    cuda = cuda_rows(frame)
    if cuda.empty:
        return []
    if fitted is None:
        fitted = fit_all(frame)
    fits, spin, decode = fitted.launch, fitted.spin, fitted.decode_demo
    lines = [f"GPU launch costs (CuPy), {fmt_percent(DEFAULT_LEVEL)} CI; per kernel = per call / N:"]
    for machine_id, machine_fits in fits.groupby("machine_id", sort=True):
        lines.append(f"  {machine_id}")
        table = format_table(
            ["figure", "value", "CI", "points", "from"],
            [_fit_cells(row) for row in machine_fits.itertuples(index=False)],
        )
        lines.extend(f"    {line}" for line in table.splitlines())
        lines.extend(_ladder_lines(cuda[cuda["machine_id"] == machine_id], machine_fits))
        ours = spin[spin["machine_id"] == machine_id]
        if not ours.empty:
            lines.append("    spin kernels of duration d, per kernel, against model.launch's bounds:")
            table = format_table(
                ["mode", "d", "N", "measured", "overlapped", "serial", "inside"],
                [_spin_cells(row) for row in ours.itertuples(index=False)],
            )
            lines.extend(f"      {line}" for line in table.splitlines())
        lines.extend(_decode_lines(decode, machine_id))
    return lines


def _fit_cells(row: object) -> list[str]:
    value = "n/a" if math.isnan(row.value_s) else fmt_time(row.value_s)
    if math.isnan(row.ci_low_s):
        interval = row.note or "none"
    else:
        interval = f"[{fmt_time(row.ci_low_s)}, {fmt_time(row.ci_high_s)}]"
    figure, source = QUANTITIES[row.quantity].split(" (", 1)
    aside = int(getattr(row, "n_set_aside", 0) or 0)
    points = f"{row.n_points} of {row.n_points + aside}" if aside else str(row.n_points)
    return [figure, value, interval, points, source[:-1]]


def _spin_cells(row: object) -> list[str]:
    n = row.n_kernels
    return [
        str(row.mode),
        fmt_time(row.kernel_ns * 1e-9) if row.kernel_ns else "0 s",
        fmt_count(n),
        fmt_time(float(per_kernel_s(row.measured_s, n))),
        fmt_time(float(per_kernel_s(row.overlapped_s, n))),
        fmt_time(float(per_kernel_s(row.serial_s, n))),
        _inside_cell(row),
    ]


def _inside_cell(row: object) -> str:
    """Whether a spin row lies inside its band; where the composition is one figure (a graph replay: a sum),
    how far the measurement is from it."""
    if row.serial_s == row.overlapped_s:
        return f"{row.error_vs_serial:+.1%} off the sum"
    return "yes" if row.within_bounds else "no"


def _ladder_lines(machine: pd.DataFrame, fits: pd.DataFrame) -> list[str]:
    """The launch-cost ladder of one machine: cost per launch at each argument count, per layer (median over
    runs), and the fitted line; none without ``launch_args`` rows."""
    costs = ladder_by_count(machine)
    if costs.columns.empty:
        return []
    counts = list(costs.columns)
    cells = []
    for layer, values in costs.iterrows():
        base = fits[fits["quantity"] == f"ladder_{layer}_s"]["value_s"]
        per_arg = fits[fits["quantity"] == f"ladder_{layer}_per_arg_s"]["value_s"]
        line = (
            f"{fmt_time(float(base.iloc[0]))} + {fmt_time(float(per_arg.iloc[0]))}·n"
            if len(base) and len(per_arg) and math.isfinite(base.iloc[0]) and math.isfinite(per_arg.iloc[0])
            else "n/a"
        )
        cells.append(
            [layer, *("n/a" if not math.isfinite(v) or v <= 0 else fmt_time(v) for v in values), line]
        )
    table = format_table(["layer", *(f"n = {n}" for n in counts), "fit a + b·n"], cells)
    return [
        "    launch cost per launch by argument count n (cupy, driver: host, GPU busy; graph: GPU per node):",
        *(f"      {line}" for line in table.splitlines()),
    ]


def _decode_lines(decode: pd.DataFrame, machine_id: str) -> list[str]:
    """Demo 2 for one machine: per model and plan, the serial step at each assumed launch cost (the seed's
    model) beside the serial and overlapped step at the machine's measured eager costs with the GPU's gap, its
    graph replay and the graph with PDL (one figure each: a sum); none without them."""
    ours = decode[decode["machine_id"] == machine_id]
    if ours.empty:
        return []
    assumed = decode[decode["launch"] == "assumed"]
    assumed_costs = " / ".join(fmt_time(t) for t in dict.fromkeys(assumed["t_launch_s"]))
    headers = ["model", "plan", "kernels", "GPU work", f"seed's model at {assumed_costs}", "eager", "graph"]
    headers.append("graph + PDL")
    table_rows = []
    for (config, plan), group in assumed.groupby(["config", "plan"], sort=False):
        measured = ours[(ours["config"] == config) & (ours["plan"] == plan)]
        table_rows.append(
            [
                str(config),
                str(plan),
                fmt_count(group["n_kernels"].iloc[0]),
                fmt_time(group["t_gpu_s"].iloc[0]),
                " / ".join(fmt_time(t) for t in group["serial_s"]),
                _bounds_cell(measured[measured["launch"] == "measured eager"]),
                _sum_cell(measured[measured["launch"] == "measured graph"]),
                _sum_cell(measured[measured["launch"] == "measured graph + PDL"]),
            ]
        )
    gaps = []
    for launch, what in (("measured eager", "eager g"), ("measured graph + PDL", "PDL node gap")):
        rows = ours[ours["launch"] == launch]
        if not rows.empty:
            gaps.append(f"{what} {fmt_time(rows['gap_s'].iloc[0])} ({rows['gap_from'].iloc[0]})")
    return [
        f"    lecture demo 2, one decode step on {DEMO2_GPU.name} (roofline GPU work, batch {DEMO2_BATCH}, "
        f"ctx {DEMO2_CTX}); assumed launch costs in the seed's model (g = 0) vs measured: eager serial / "
        "overlapped with the GPU's gap g per kernel; graph and graph + PDL one figure each (launch, then a "
        "synchronise: a sum)",
        *([f"    {'; '.join(gaps)}"] if gaps else []),
        *(f"      {line}" for line in format_table(headers, table_rows).splitlines()),
    ]


def _sum_cell(rows: pd.DataFrame) -> str:
    return "n/a" if rows.empty else fmt_time(rows.iloc[0]["serial_s"])


def _bounds_cell(rows: pd.DataFrame) -> str:
    if rows.empty:
        return "n/a"
    row = rows.iloc[0]
    return f"{fmt_time(row['serial_s'])} / {fmt_time(row['overlapped_s'])}"
