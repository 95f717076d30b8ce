"""The terminal summary printed below pytest-benchmark's table: how far the run can be trusted, then each
family's section, from one frame.

The same functions serve ``pytest benchmarks`` (the in-memory run) and ``python -m analysis`` (saved runs),
so the summary and the report of a saved run agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from analysis import decode, host, launch
from analysis.fits import Fits, fit_all
from analysis.runs import without_unfinished
from analysis.trust import stability, unstable_line, verdict

#: The families' section functions, each ``(frame, fits of the frame) -> lines`` and empty when its cases
#: are absent.
SECTIONS: tuple[Callable[[pd.DataFrame, Fits], list[str]], ...] = (
    host.summary_section,
    launch.summary_section,
    decode.summary_section,
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
    fits = fit_all(frame)  # once, for every section
    return lines + [line for section in SECTIONS for line in section(frame, fits)]


def trust_lines(runs: pd.DataFrame | None) -> list[str]:
    """Per run: its busy-machine verdict, whether it was interrupted and which cases did not finish, its
    faults; "conditions unknown" for a run saved without a record."""
    if runs is None or runs.empty:
        return []
    several = len(runs) > 1
    lines = []
    for run in runs.itertuples(index=False):
        name = f"{run.source}: " if several else ""
        if not run.has_record:
            lines.append(f"{name}Conditions unknown: the run was saved without a run record")
        line = verdict(run._asdict())
        if line:
            lines.append(f"{name}{line}")
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
