"""The GPU model's terms for one machine: what its own run measured, else ``model.gpu_terms``' defaults.

As the CPU's prediction takes its bandwidth and op costs from the same run (``analysis.host``,
``analysis.ops``), a GPU step's estimate takes its terms (``model.gpu_terms.GpuTerms``) from the GPU suite of
the same machine:

- achieved bandwidth and per-kernel ramp: a line through the matrix-vector kernel's time per kernel against
  the bytes it reads (``analysis.decode.matvec_table``: Llama-3.2-1B's weight shapes, each timed over K
  launches queued behind a spin, so each kernel follows the last at the GPU's own pace). t = a + bytes /
  bandwidth, weighted by 1/t² (relative errors, as ``analysis.fit``); the slope's inverse is the achieved
  bandwidth, and the intercept holds the gap between back-to-back kernels and the ramp: ramp = a − g, with g
  the run's eager gap. At least ``MIN_SHAPES`` shapes are needed, a positive slope and a bandwidth at or
  below the datasheet's (a faster line would be caches, not DRAM); otherwise the defaults stay and the
  reason is said;
- the eager gap: the run's ``gpu_gap_s`` (``analysis.launch.gpu_gap``); the graph gap: its ``graph_node_s``.

Every term says where it came from: the run, with its figure, or the default's source.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from analysis.fit import weighted_least_squares
from analysis.launch import GAP_MEASURED, fitted, gpu_gap, usable_cost
from model.gpu_terms import GpuTerms, default_terms
from model.hardware import GPUSpec
from model.units import fmt_percent, fmt_rate, fmt_time

#: Matrix-vector shapes (distinct bytes per kernel) a line needs: two for the line, one more for its errors.
MIN_SHAPES = 3


def machine_terms(
    matvec: pd.DataFrame, launch_fits: pd.DataFrame, machine_id: str, spec: GPUSpec
) -> GpuTerms:
    """The terms of ``machine_id``'s GPU (spec ``spec``): ``matvec`` (``analysis.decode.matvec_table`` of the
    runs) for its bandwidth and ramp, ``launch_fits`` (``analysis.launch.fit_launch``) for its gaps; each
    term the run lacks is ``model.gpu_terms.default_terms(spec)``'s, and says so."""
    terms = default_terms(spec)
    eager_gap_s, eager_from = gpu_gap(launch_fits, machine_id)
    node_s = fitted(launch_fits, machine_id, "graph_node_s") if not launch_fits.empty else math.nan
    gap_notes = []
    if eager_from == GAP_MEASURED:
        gap_notes.append(f"eager {fmt_time(eager_gap_s)}, gpu_gap_s of the same run")
    if usable_cost(node_s):
        terms = dataclasses.replace(terms, graph_gap_s=node_s)
        gap_notes.append(f"graph {fmt_time(node_s)}, graph_node_s of the same run")
    if gap_notes:
        kept = [] if len(gap_notes) == 2 else [f"else {terms.gap_from}"]
        terms = dataclasses.replace(terms, eager_gap_s=eager_gap_s, gap_from="; ".join(gap_notes + kept))
    machine = matvec[matvec["machine_id"] == machine_id] if not matvec.empty else matvec
    line = _bandwidth_line(machine)
    if isinstance(line, str):
        if not machine.empty:
            terms = dataclasses.replace(
                terms,
                bandwidth_from=f"{terms.bandwidth_from} ({line})",
                ramp_from=f"{terms.ramp_from} ({line})",
            )
        return terms
    bandwidth, intercept_s = line
    fraction = bandwidth / spec.mem_bytes_per_s
    if fraction > 1:
        reason = f"the matvec line's {fmt_rate(bandwidth)} is above the datasheet's: caches, not DRAM"
        return dataclasses.replace(terms, bandwidth_from=f"{terms.bandwidth_from} ({reason})")
    ramp_s = max(0.0, intercept_s - terms.eager_gap_s)
    shapes = len(machine)
    return dataclasses.replace(
        terms,
        bandwidth_fraction=fraction,
        bandwidth_from=f"the same run's matvec line over {shapes} shapes: {fmt_rate(bandwidth)}, "
        f"{fmt_percent(fraction, 1)} of the datasheet",
        ramp_s=ramp_s,
        ramp_from=f"the same run's matvec line: intercept {fmt_time(intercept_s)} less the eager gap",
    )


def _bandwidth_line(machine: pd.DataFrame) -> tuple[float, float] | str:
    """(bandwidth B/s, intercept s) of time per kernel = intercept + bytes / bandwidth over one machine's
    matvec shapes, or why there is none."""
    times = pd.to_numeric(machine["time_per_kernel_s"], errors="coerce").to_numpy(dtype=float)
    sizes = pd.to_numeric(machine["matrix_bytes"], errors="coerce").to_numpy(dtype=float)
    usable = np.isfinite(times) & (times > 0) & np.isfinite(sizes) & (sizes > 0)
    t, n_bytes = times[usable], sizes[usable]
    if len(np.unique(n_bytes)) < MIN_SHAPES:
        return f"{len(np.unique(n_bytes))} matvec shapes measured, {MIN_SHAPES} needed for a line"
    fit = weighted_least_squares(np.column_stack([np.ones_like(t), n_bytes]), t, 1 / t**2)
    intercept_s, seconds_per_byte = (float(value) for value in fit.coef)
    if not seconds_per_byte > 0:
        return "the matvec line does not rise with the bytes"
    return 1 / seconds_per_byte, intercept_s
