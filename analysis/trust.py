"""How far a run's figures can be trusted: the machine's conditions while it ran, and each case's stability.

Other work on the machine only ever adds time, so a run measured while other processes took the CPUs, a
hypervisor stole them or the GPU throttled shows figures that are too high, and it says so in one line
(``verdict``) at the top of the summary and the report. The run record (``benchmarks/run_record.py``)
holds what was seen; the limits below are the judgement, kept here so old records can be judged again.

A case is unstable when its rounds spread far (``stability``): a median far above the fastest round, or a
wide interquartile range. Its figure then depends on which statistic is taken (the CPU fits use the fastest
round, the decode step the median), so such cases are flagged with the limits stated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.sentinel import drift_line, speed_line, speed_ratios, unsteady_line
from model.units import fmt_percent

#: Other processes' share of the usable CPUs' time during the run (busy time on those CPUs not spent by
#: the run itself, kernel work included) at which a run counts as measured on a busy machine. Measured on
#: a 2-vCPU VM: 1 % with nothing else running, 9 % while other users' jobs came and went, 79 % beside two
#: spinning processes.
OTHER_CPU_SHARE_LIMIT = 0.10
#: The hypervisor's steal time (CPU time given to other guests) as a share of the usable CPUs' time.
STEAL_SHARE_LIMIT = 0.05
#: A case is unstable when the median of its rounds is this many times its fastest round, or more ...
MEDIAN_OVER_MIN_LIMIT = 1.5
#: ... or when the interquartile range of its rounds is this share of their median, or more.
IQR_OVER_MEDIAN_LIMIT = 0.3

STABILITY_COLUMNS = (
    "source",
    "machine_id",
    "case",
    "name",
    "rounds",
    "median_over_min",
    "iqr_over_median",
    "unstable",
)

#: How the stability limits are stated wherever unstable cases are listed.
STABILITY_RULE = (
    f"unstable: the median of its rounds ≥ {MEDIAN_OVER_MIN_LIMIT:g} × the fastest, or their IQR ≥ "
    f"{fmt_percent(IQR_OVER_MEDIAN_LIMIT)} of the median"
)


def verdict(run: Mapping) -> str | None:
    """One line saying what was seen when the machine was busy during ``run`` (a ``LoadResult.runs`` row):
    other processes' share of the CPUs ≥ ``OTHER_CPU_SHARE_LIMIT``, steal ≥ ``STEAL_SHARE_LIMIT``, a load
    average at start (legacy runs: when saved) ≥ the usable CPUs, or GPU slowdown reasons; None for a
    quiet run, and for a run whose conditions are unknown."""
    seen = []
    cpus = _number(run.get("usable_cpus"))
    cpus_text = f"{cpus:g} usable CPU{'s' if cpus != 1 else ''}" if cpus else "the usable CPUs"
    other = _share_of_time(run.get("other_cpu_share"))
    if other is not None and other >= OTHER_CPU_SHARE_LIMIT:
        seen.append(
            f"other processes took {fmt_percent(other)} of the {cpus_text}' time "
            f"(limit {fmt_percent(OTHER_CPU_SHARE_LIMIT)})"
        )
    steal = _share_of_time(run.get("steal_share"))
    if steal is not None and steal >= STEAL_SHARE_LIMIT:
        limit = fmt_percent(STEAL_SHARE_LIMIT)
        seen.append(f"the hypervisor stole {fmt_percent(steal)} of their time (limit {limit})")
    for key, when in (("load_start", "at start"), ("load_saved", "when saved")):
        load = _number(run.get(key))
        if load is not None and cpus and load >= cpus:
            seen.append(f"load average {load:.2f} {when} on {cpus_text}")
    slowdown = run.get("gpu_slowdown") or ()
    if slowdown:
        seen.append(f"the GPU slowed down ({', '.join(slowdown)})")
    if not seen:
        return None
    return f"Busy machine: {'; '.join(seen)}: figures may be inflated"


def condition_lines(runs: pd.DataFrame) -> dict[str, list[str]]:
    """Each run's (``runs``: ``LoadResult.runs``) lines about the machine it ran on, by source: its busy
    verdict (``verdict``), its speed hopping (``unsteady_line``) or else drifting during the run
    (``drift_line``: halves of a run that hops differ by chance) and its speed against its machine's other
    runs (``analysis.sentinel``); runs with none are left out. What the summary, compare and the report
    say of a run's conditions, from one place."""
    speeds = {row.source: (row.ratio, row.others) for row in speed_ratios(runs).itertuples(index=False)}
    lines = {}
    for run in runs.itertuples(index=False):
        fields = run._asdict()
        speed = speeds.get(run.source)
        found = [verdict(fields), unsteady_line(fields) or drift_line(fields), speed and speed_line(*speed)]
        if any(found):
            lines[run.source] = [line for line in found if line]
    return lines


#: The kinds of ``condition_lines``' lines, by how each begins.
CONDITION_KINDS = ("Busy machine", "Machine speed unsteady", "Machine speed drifted", "Machine speed:")
#: A kind of condition seen in more runs than this is said in one line (``condensed_conditions``).
CONDENSE_ABOVE = 20


def condensed_conditions(
    conditions: Mapping[str, list[str]], runs: int
) -> tuple[list[str], dict[str, list[str]]]:
    """``condition_lines``' lines (``conditions``, of ``runs`` runs) with each kind of condition
    (``CONDITION_KINDS``) seen in more than ``CONDENSE_ABOVE`` runs said once for all of them: (those lines —
    how many runs, the first run's line, the others by name — and the lines left, by source). A fleet of
    runs from a machine whose speed hopped opened its report with one such line a run (1,000 runs: 250 kB
    of the report's 310 kB)."""
    by_kind: dict[str, list[str]] = {}
    for source, lines in conditions.items():
        for line in lines:
            by_kind.setdefault(_kind(line), []).append(source)
    wide = {kind for kind, sources in by_kind.items() if len(sources) > CONDENSE_ABOVE}
    said = []
    for kind in (kind for kind in by_kind if kind in wide):
        sources = by_kind[kind]
        first = next(line for line in conditions[sources[0]] if _kind(line) == kind)
        said.append(
            f"{kind} in {len(sources):,} of the {runs:,} runs; the first, {sources[0]}: {first}; the others: "
            f"{', '.join(sources[1:4])}, and {len(sources) - 4:,} more (`python -m analysis summary FILE`: "
            "one run's lines)"
        )
    left = {
        source: [line for line in lines if _kind(line) not in wide] for source, lines in conditions.items()
    }
    return said, {source: kept for source, kept in left.items() if kept}


def _kind(line: str) -> str:
    """The kind of a condition line (``CONDITION_KINDS``), or the line itself for one of no known kind."""
    return next((kind for kind in CONDITION_KINDS if line.startswith(kind)), line)


def stability(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per case of ``frame`` (``STABILITY_COLUMNS``): median/min and IQR/median of its rounds (from
    pytest-benchmark's stats; NaN where a statistic is missing) and whether it is unstable."""
    if frame.empty:
        return pd.DataFrame(columns=list(STABILITY_COLUMNS))

    def column(name: str) -> pd.Series:
        return frame[name] if name in frame else pd.Series(math.nan, index=frame.index)

    median_over_min, iqr_over_median = _ratios(frame)
    table = pd.DataFrame(
        {
            "source": column("source"),
            "machine_id": column("machine_id"),
            "case": column("case"),
            "name": column("name"),
            "rounds": column("rounds"),
            "median_over_min": median_over_min,
            "iqr_over_median": iqr_over_median,
        }
    )
    table["unstable"] = _unstable(table["median_over_min"], table["iqr_over_median"])
    return table.reset_index(drop=True)


def worst_unstable(frame: pd.DataFrame) -> tuple[float, float] | None:
    """(median/min, IQR/median) of the row of ``frame`` that ``stability`` marks unstable with the largest
    median/min (the first of equals; NaN counted as 0), or None when none is; without building its table
    (a fleet's compare asks it of every unstable group of every figure)."""
    ratios = _ratios(frame)
    flagged = np.flatnonzero(_unstable(*ratios).to_numpy(dtype=bool))
    if not flagged.size:
        return None
    median_over_min, iqr_over_median = (values.to_numpy(dtype=float) for values in ratios)
    worst = flagged[np.argmax(np.nan_to_num(median_over_min[flagged], nan=0.0))]
    return float(median_over_min[worst]), float(iqr_over_median[worst])


def unstable_flags(frame: pd.DataFrame) -> np.ndarray:
    """Whether ``stability`` marks each row of ``frame`` unstable, without building its table: a figure's
    rows flagged at once, then read group by group."""
    return _unstable(*_ratios(frame)).to_numpy(dtype=bool) if not frame.empty else np.zeros(0, dtype=bool)


def _ratios(frame: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each row's median/min and IQR/median (NaN where a statistic is missing or not a number)."""

    def number(name: str) -> pd.Series:
        if name not in frame:
            return pd.Series(math.nan, index=frame.index)
        return pd.to_numeric(frame[name], errors="coerce")

    median = number("median")
    return median / number("min"), number("iqr") / median


def _unstable(median_over_min: pd.Series, iqr_over_median: pd.Series) -> pd.Series:
    """The rule: median/min ≥ ``MEDIAN_OVER_MIN_LIMIT`` or IQR/median ≥ ``IQR_OVER_MEDIAN_LIMIT``."""
    return (median_over_min >= MEDIAN_OVER_MIN_LIMIT) | (iqr_over_median >= IQR_OVER_MEDIAN_LIMIT)


def unstable_line(table: pd.DataFrame, most: int = 4) -> str | None:
    """One line naming the unstable cases of ``stability``'s ``table`` (one run, or several: a case unstable
    in several runs is named once, with its worst figures), at most ``most`` by name; None when none is."""
    unstable = table[table["unstable"]]
    if unstable.empty:
        return None
    worst = (
        unstable.groupby("name", sort=False)
        .agg(median_over_min=("median_over_min", "max"), iqr_over_median=("iqr_over_median", "max"))
        .sort_values("median_over_min", ascending=False)
    )
    named = [
        f"{name} ({_ratio(row.median_over_min)} median/min, IQR {_share(row.iqr_over_median)} of median)"
        for name, row in worst.head(most).iterrows()
    ]
    more = f", and {len(worst) - most} more" if len(worst) > most else ""
    counted = f"{len(unstable)} of {len(table)} case measurements"
    return f"Unstable cases: {counted} ({STABILITY_RULE}): {', '.join(named)}{more}"


def _ratio(value: float) -> str:
    return "?" if not math.isfinite(value) else f"{value:.2f}×"


def _share(value: float) -> str:
    return "?" if not math.isfinite(value) else fmt_percent(value)


def _share_of_time(value: object) -> float | None:
    """A share of the CPUs' time (0–1) as a float; None when missing or impossible (above 1: 3.0 would print
    "300 % of the CPUs' time", a hand-edited 1e300 a 304-digit percentage), as for unknown conditions."""
    share = _number(value)
    return share if share is not None and 0 <= share <= 1 else None


def _number(value: object) -> float | None:
    """``value`` as a float when it is a finite number, else None (missing, NaN, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
