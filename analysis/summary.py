"""The terminal summary printed below pytest-benchmark's table: how far the run can be trusted, then each
family's section, from one frame.

The same functions serve ``pytest benchmarks`` (the in-memory run) and ``python -m analysis`` (saved runs),
so the summary and the report of a saved run agree. The families compute (frames and frozen values); the
lines of text are written one floor above them: here for the CPU family (``host_section``), in
``analysis.launch_text`` and ``analysis.decode_text`` for the GPU launch suite and the decode step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pandas as pd

from analysis import decode_text, frameworks, launch_text
from analysis.fits import Fits, fit_all
from analysis.host import DRAM_LLC_FACTOR
from analysis.intervals import positive_interval
from analysis.runs import without_unfinished
from analysis.steady import frame_steadiness_line
from analysis.trust import condensed_conditions, condition_lines, stability, unstable_line
from model.units import (
    fmt_bytes,
    fmt_count,
    fmt_percent,
    fmt_rate,
    fmt_si,
    fmt_signed_percent,
    fmt_time,
)


def summary_lines(
    frame: pd.DataFrame, runs: pd.DataFrame | None = None, problems: Sequence[str] = ()
) -> list[str]:
    """Return the summary lines of ``frame``; only ``problems`` when nothing usable was measured.

    First how far the run(s) of ``runs`` (``LoadResult.runs``) can be trusted: a busy machine's verdict, an
    interruption, cases that did not finish (set aside), faults, unstable cases; then ``problems`` (cases
    dropped at loading), then every family measured.
    """
    if frame.empty:
        return list(problems)
    if runs is not None:
        frame, _ = without_unfinished(frame, runs)
    lines = [*trust_lines(runs), *problems]
    unstable = unstable_line(stability(frame))
    if unstable:
        lines.append(unstable)
    steadiness = frame_steadiness_line(frame)
    if steadiness:
        lines.append(steadiness)
    fits = fit_all(frame)  # once, for every section
    return lines + [line for section in SECTIONS for line in section(frame, fits)]


def trust_lines(runs: pd.DataFrame | None) -> list[str]:
    """Per run: its busy-machine verdict, its drift in speed during the run and, among several runs of one
    machine, its speed against the others (``analysis.sentinel``), whether it was interrupted and which cases
    did not finish, its faults; "conditions unknown" for a run saved without a record. A kind of condition
    seen in many runs is said once for them all, first (``condensed_conditions``)."""
    if runs is None or runs.empty:
        return []
    several = len(runs) > 1
    lines, conditions = condensed_conditions(condition_lines(runs), len(runs))
    for run in runs.itertuples(index=False):
        name = f"{run.source}: " if several else ""
        if not run.has_record:
            lines.append(f"{name}Conditions unknown: the run was saved without a run record")
        lines.extend(f"{name}{line}" for line in conditions.get(run.source, ()))
        if run.status == "interrupted":
            by = f" by {run.interrupted_by}" if run.interrupted_by else ""
            lines.append(
                f"{name}Interrupted{by}: {run.measured} of {run.planned} planned cases measured; "
                "the figures below cover those only"
            )
        if run.unfinished:
            lines.append(
                f"{name}{len(run.unfinished)} case(s) did not finish (set aside): {', '.join(run.unfinished)}"
            )
        lines.extend(f"{name}Fault during the run: {fault}" for fault in run.faults)
    return lines


# --- the CPU family (analysis.host) ----------------------------------------------------------------------


def host_section(frame: pd.DataFrame, fitted: Fits | None = None) -> list[str]:
    """Return the CPU family's (``analysis.host``) summary lines for ``frame``: per machine, t0 with its CI,
    per-element costs in cache and from DRAM, n½, host bandwidth, and many-vs-one predicted against
    measured. No lines when the frame holds no CPU case of this family. ``fitted``:
    ``analysis.fits.fit_all(frame)``, fitted here when not given."""
    if fitted is None:
        fitted = fit_all(frame)
    fits, predictions = fitted.host, fitted.many_vs_one
    if fits.empty:
        return []
    lines: list[str] = []
    for fit in fits.itertuples(index=False):
        lines.append(f"CPU: numpy per-call cost and host bandwidth — {fit.machine_id}")
        lines.append("  each case's fastest round, as timeit (best of 5) and STREAM (best rate) report")
        lines.extend(_law_lines(fit))
        if fit.set_aside:
            lines.append(f"  set aside (no figure uses them): {'; '.join(fit.set_aside)}")
        lines.extend(_host_bandwidth_lines(fit))
        lines.extend(_many_vs_one_lines(predictions[predictions["machine_id"] == fit.machine_id]))
    return lines


def _law_lines(fit: tuple) -> list[str]:
    """t0, per-element costs and n½ of one ``fit_host`` row (its error instead when the fit failed)."""
    if fit.fit_error is not None:
        return [f"  fixed-overhead law not fitted: {fit.fit_error}"]
    if math.isnan(fit.t0_s):
        return []
    sizes = fit.cache_sizes
    outside = (
        f"; {fit.n_outside_law:,} of {fit.n_boot:,} replicates outside the law (t0 < 0 or r∞ ≤ 0), left out "
        "of n½'s CI"
        if fit.n_outside_law
        else ""
    )
    lines = [
        f"  {fmt_percent(fit.level)} CIs by {fit.ci_method}{outside}",
        f"  t0, fixed cost per call  {fmt_time(fit.t0_s):>12}   "
        f"CI {positive_interval(fit.t0_low_s, fit.t0_high_s, fmt_time)}",
        f"  per element, in cache    {fmt_time(fit.cache_s_per_element):>12}   "
        f"CI {positive_interval(fit.cache_s_per_element_low, fit.cache_s_per_element_high, fmt_time)}   "
        f"(r∞ = {fmt_si(fit.r_inf_per_s, 'elem/s')})",
        f"      law fitted on {fit.cache_points} points at {len(sizes)} sizes, n = {fmt_count(sizes[0])} … "
        f"{fmt_count(sizes[-1])}: working set ≤ {fmt_bytes(fit.core_cache_bytes)} core cache",
    ]
    if fit.dram_points:
        lines += [
            f"  per element, from DRAM   {fmt_time(fit.dram_s_per_element):>12}   "
            f"CI {positive_interval(fit.dram_s_per_element_low, fit.dram_s_per_element_high, fmt_time)}",
            f"      from {fit.dram_points} point(s) at n = "
            f"{', '.join(fmt_count(n) for n in fit.dram_sizes)}: working set ≥ {DRAM_LLC_FACTOR} × "
            f"{fmt_bytes(fit.llc_bytes)} LLC",
        ]
    else:
        lines.append(
            f"  per element, from DRAM   not measured: no size with a working set ≥ {DRAM_LLC_FACTOR} × "
            f"{fmt_bytes(fit.llc_bytes)} LLC"
        )
    lines.append(
        f"  n½ = t0·r∞               {fmt_count(fit.n_half) + ' elem':>12}   "
        f"CI {positive_interval(fit.n_half_low, fit.n_half_high, fmt_count)}: smaller calls are mostly fixed "
        "cost"
    )
    return lines


def _host_bandwidth_lines(fit: tuple) -> list[str]:
    parts = [
        f"{op} {fmt_rate(value)}"
        for op, value in (("copy", fit.copy_bytes_per_s), ("triad", fit.triad_bytes_per_s))
        if not math.isnan(value)
    ]
    lines = []
    if parts:
        convention = "(bytes by STREAM's convention: no write-allocate)"
        lines.append(f"  host bandwidth (STREAM)  {', '.join(parts)}   {convention}")
    if not math.isnan(fit.read_bytes_per_s):
        lines.append(
            f"  read bandwidth (BLAS)    {fmt_rate(fit.read_bytes_per_s)}   (float32 W @ x: W read once)"
        )
    return lines


def _many_vs_one_lines(predictions: pd.DataFrame) -> list[str]:
    """A table of many-vs-one: per pieces, measured, predicted and error for each variant."""
    if predictions.empty:
        return []
    total = int((predictions["n"] * predictions["pieces"]).max())
    variants = sorted(predictions["variant"].unique(), key=lambda v: (v != "views", v))
    lines = [
        f"  many small vs one big (N = {fmt_count(total)} elements in pieces of n; measured: fastest round): "
        f"predicted = {' or '.join(sorted(predictions['basis'].unique(), reverse=True))}",
        "    pieces" + "".join(f"   {variant + ': measured':>17}  predicted   error" for variant in variants),
    ]
    table = predictions.set_index(["pieces", "variant"])
    for pieces in sorted(predictions["pieces"].unique()):
        cells = []
        for variant in variants:
            if (pieces, variant) in table.index:
                case = table.loc[(pieces, variant)]
                cells.append(
                    f"   {fmt_time(case['measured_s']):>17}  {fmt_time(case['predicted_s']):>9}  "
                    f"{fmt_signed_percent(case['rel_error']):>6}"
                )
            else:
                cells.append(f"   {'':>17}  {'':>9}  {'':>6}")
        lines.append(f"    {fmt_count(pieces):>6}" + "".join(cells))
    return lines


#: The families' section functions, each ``(frame, fits of the frame) -> lines`` and empty when its cases
#: are absent.
SECTIONS: tuple[Callable[[pd.DataFrame, Fits], list[str]], ...] = (
    host_section,
    launch_text.summary_section,
    decode_text.summary_section,
    frameworks.summary_section,
)
