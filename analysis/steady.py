"""Whether a case's rounds reached a steady state: each case's rounds, in the order they ran, classified as
flat, warm-up, slowdown or no steady state (issue 34; the four classes of Barrett et al., "Virtual Machine
Warmup Blows Hot and Cold", OOPSLA 2017).

pytest-benchmark takes every round as a sample of one steady state and does not check. Here the log of each
round's time, smoothed by a running median of ``SMOOTHING`` rounds (an isolated slow round is another
process's time slice, not a new level), is split where its mean changes, by binary segmentation (Scott & Knott
1974; the approximate, O(n log n) relative of PELT, which is exact but O(n²) at worst, too slow for the 10⁵
rounds of a fast case), each split kept when it lowers the residual sum of squares by more than a BIC penalty,
2·σ²·ln n, with σ the robust (MAD) spread of successive differences, which a change in level does not inflate.
Hand-written on numpy's cumulative sums: neither scipy nor numpy has a changepoint search, and ``ruptures``
would be a dependency for what ~40 lines here do. A split counts only when the two levels differ by ≥
``MIN_SHIFT`` (a 1 % step over 10⁴ rounds is real but no reason to doubt a figure):

- **flat**: no split;
- **warm-up**: every split steps down (slower first), the rounds before the last split are the warm-up;
- **slowdown**: every split steps up (faster first);
- **no steady state**: the level goes both up and down, or its last change comes in the last
  ``STEADY_TAIL`` (a quarter) of the rounds.

A warm-up's rounds are left out of the case's figures, once, where each saved run is parsed
(``steady_rounds``, called by ``analysis.load`` for every case read with its rounds, before the parsed-run
cache, whose key holds this module's source): the row's raw samples become the rounds after the warm-up and
pytest-benchmark's statistics (min, max, mean, stddev, median, q1, q3, iqr, ops, rounds) are recomputed from
them as pytest-benchmark defines them (``round_statistics``), so every fit, verdict, stability check and
prediction reads the steady rounds. The row says what was done: ``steady`` (the class) and
``warm_up_rounds`` (the rounds left out; 0 for the other classes). A case read without its rounds (saved
without them, ``--no-samples``, or a quick case's 5 rounds: too few to classify) keeps pytest-benchmark's
statistics over every round, and NaN in both columns.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

FLAT, WARM_UP, SLOWDOWN, NO_STEADY_STATE = "flat", "warm-up", "slowdown", "no steady state"
CLASSES = (FLAT, WARM_UP, SLOWDOWN, NO_STEADY_STATE)
#: The smallest change of level between two segments that counts, as a ratio of their mean times − 1.
MIN_SHIFT = 0.05
#: The fewest rounds of a segment, and of a series worth classifying.
MIN_SEGMENT = 3
#: The most splits searched.
MAX_SPLITS = 4
#: The share of a series' last rounds its last level must cover to be a steady state: a level that starts
#: later has not shown it lasts (Barrett et al. expect it before the last 500 of 2000 in-process iterations,
#: as ``warmup_stats --steady`` does). A warm-up's figures so keep at least this share of its rounds.
STEADY_TAIL = 0.25
#: Rounds of the running median the series is smoothed with first: an isolated slow round (another
#: process's time slice) is not a change of level.
SMOOTHING = 5
#: The columns ``steady_rounds`` adds to each case's row.
STEADY_COLUMNS = ("steady", "warm_up_rounds")
#: What is said of the cases ``steady_rounds`` could not classify, after their count.
UNCLASSIFIED = (
    f"not classified (read without their rounds, or fewer than {2 * MIN_SEGMENT} of them, as a quick run's "
    "5): their figures are over every round"
)


@dataclass(frozen=True)
class Steadiness:
    """A series' class, its change points (round indices where a new level starts) and, for a warm-up, how
    many rounds it took (the first level's rounds, before the last split)."""

    kind: str
    splits: tuple[int, ...]
    warm_up_rounds: int


def classify(rounds: np.ndarray) -> Steadiness | None:
    """The steadiness of one case's rounds (seconds, in the order they ran); None for fewer than
    2 × ``MIN_SEGMENT`` rounds or any not finite and > 0."""
    times = np.asarray(rounds, dtype=float)
    if times.size < 2 * MIN_SEGMENT or not np.all(np.isfinite(times) & (times > 0)):
        return None
    logs = _rolling_median(np.log(times), SMOOTHING)
    if _level_range(logs) < math.log1p(MIN_SHIFT) * (1 - 1e-9):
        # No two segments' means can differ by MIN_SHIFT: flat, as the search would find, without it (411 of
        # the committed runs' 617 flat cases; every case of every run parsed is classified)
        return Steadiness(FLAT, (), 0)
    diffs = np.diff(logs)
    noise = 1.4826 * float(np.median(np.abs(diffs - np.median(diffs)))) / math.sqrt(2)
    if noise == 0:
        noise = float(np.std(logs)) or 1e-12
    penalty = 2 * noise**2 * math.log(times.size)
    splits = sorted(_splits(logs, 0, logs.size, penalty, MAX_SPLITS))
    # each segment's mean as np.mean takes it (numpy's sum, divided by the count), without its overhead
    levels = [
        float(logs[a:b].sum()) / (b - a) for a, b in zip([0, *splits], [*splits, logs.size], strict=True)
    ]
    steps = [after - before for before, after in itertools.pairwise(levels)]
    kept = [split for split, step in zip(splits, steps, strict=True) if abs(step) >= math.log1p(MIN_SHIFT)]
    signs = {step > 0 for step in steps if abs(step) >= math.log1p(MIN_SHIFT)}
    if not kept:
        return Steadiness(FLAT, (), 0)
    if kept[-1] > times.size * (1 - STEADY_TAIL):
        return Steadiness(NO_STEADY_STATE, tuple(kept), 0)  # the last level: too late to be a steady state
    if signs == {False}:
        return Steadiness(WARM_UP, tuple(kept), kept[-1])
    if signs == {True}:
        return Steadiness(SLOWDOWN, tuple(kept), 0)
    return Steadiness(NO_STEADY_STATE, tuple(kept), 0)


def _level_range(logs: np.ndarray) -> float:
    """An upper bound of the difference between the means of any two segments of ``MIN_SEGMENT`` rounds or
    more (the levels ``_splits`` compares): such a segment is made of blocks of ``MIN_SEGMENT`` to
    2 × ``MIN_SEGMENT`` − 1 rounds, so its mean lies between the least and the greatest mean of a block."""
    sums = np.concatenate(([0.0], np.cumsum(logs)))
    means = [(sums[width:] - sums[:-width]) / width for width in range(MIN_SEGMENT, 2 * MIN_SEGMENT)]
    return float(max(m.max() for m in means) - min(m.min() for m in means))


def _rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    """The running median of ``values`` over ``window`` rounds (centred; the first and last value repeated
    past the ends)."""
    if values.size < window:
        return values
    half = window // 2
    padded = np.concatenate((np.repeat(values[:1], half), values, np.repeat(values[-1:], half)))
    # the middle of each window, partitioned: np.pad and np.median cost 3x as much a series (one per case
    # of every run parsed), for the same values
    return np.partition(np.lib.stride_tricks.sliding_window_view(padded, window), half, axis=1)[:, half]


def _splits(logs: np.ndarray, start: int, stop: int, penalty: float, budget: int) -> list[int]:
    """Binary segmentation of ``logs[start:stop]``: the best split of the segment (the one that lowers the
    sum of squared deviations from each side's mean most) where that gain beats ``penalty``, then the same
    within each side, at most ``budget`` splits in all."""
    n = stop - start
    if budget <= 0 or n < 2 * MIN_SEGMENT:
        return []
    segment = logs[start:stop]
    total = np.cumsum(segment)
    squares = np.cumsum(segment**2)
    left = np.arange(MIN_SEGMENT, n - MIN_SEGMENT + 1)
    right = n - left
    # the sums up to each candidate split (rounds MIN_SEGMENT .. n - MIN_SEGMENT): a slice, not an index array
    total_left, squares_left = (
        total[MIN_SEGMENT - 1 : n - MIN_SEGMENT],
        squares[MIN_SEGMENT - 1 : n - MIN_SEGMENT],
    )
    cost_left = squares_left - total_left**2 / left
    cost_right = (squares[-1] - squares_left) - (total[-1] - total_left) ** 2 / right
    whole = squares[-1] - total[-1] ** 2 / n
    gains = whole - (cost_left + cost_right)
    best = int(np.argmax(gains))
    if gains[best] <= penalty:
        return []
    split = start + int(left[best])
    before = _splits(logs, start, split, penalty, (budget - 1) // 2)
    after = _splits(logs, split, stop, penalty, budget - 1 - len(before))
    return [*before, split, *after]


def steady_rounds(row: dict[str, object]) -> None:
    """Classify one parsed case's rounds (``row["data"]``, s per iteration, in the order they ran; the row
    of ``analysis.load``) and, for a warm-up, leave its rounds out of the row: ``data`` becomes the rounds
    after it, the statistics of pytest-benchmark (``round_statistics``) those of these rounds, and the
    decode step's per-round probe times (``probe_s``, one per step round) lose the same first rounds, so
    that probe round i still pairs with step round i. Sets ``steady`` and ``warm_up_rounds`` (NaN both
    where the rounds were not read or are too few to classify)."""
    data = row.get("data")
    found = classify(data) if isinstance(data, np.ndarray) else None
    row["steady"] = found.kind if found is not None else math.nan
    row["warm_up_rounds"] = found.warm_up_rounds if found is not None else math.nan
    if found is None or found.kind != WARM_UP:
        return
    skipped = found.warm_up_rounds
    probe = row.get("probe_s")
    if isinstance(probe, tuple | list) and len(probe) == len(data):
        row["probe_s"] = tuple(probe[skipped:])
    row["data"] = data[skipped:]
    row.update(round_statistics(row["data"]))


def round_statistics(rounds: np.ndarray) -> dict[str, float | int]:
    """pytest-benchmark's statistics of ``rounds`` (s per iteration), as its ``stats.Stats`` defines them
    (5.x; 3.x and 4.x alike): sample standard deviation (n − 1), 0 for one round; the quartiles by
    Wikipedia's method 3 for an odd count and method 2 (the medians of each half) for an even one; ``ops``
    = rounds ÷ their total. Computed with numpy: ``Stats`` sorts and sums in Python, 10⁵ rounds in 50 ms."""
    ordered = np.sort(np.asarray(rounds, dtype=float))
    count = int(ordered.size)
    total = float(ordered.sum())
    q1, q3 = _quartiles(ordered)
    return {
        "min": float(ordered[0]),
        "max": float(ordered[-1]),
        "mean": total / count,
        "stddev": float(np.std(ordered, ddof=1)) if count > 1 else 0.0,
        "median": float(np.median(ordered)),
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "ops": count / total if total else 0.0,
        "rounds": count,
    }


def _quartiles(ordered: np.ndarray) -> tuple[float, float]:
    """pytest-benchmark's first and third quartiles of the sorted ``ordered`` (``Stats.q1``, ``Stats.q3``)."""
    count = ordered.size
    if count == 1:
        return float(ordered[0]), float(ordered[0])
    if count % 2 == 0:  # method 2: the median of each half
        half = count // 2
        return float(np.median(ordered[:half])), float(np.median(ordered[half:]))
    n, rest = divmod(count, 4)  # method 3
    if rest == 1:
        return (
            float(0.25 * ordered[n - 1] + 0.75 * ordered[n]),
            float(0.75 * ordered[3 * n] + 0.25 * ordered[3 * n + 1]),
        )
    return (
        float(0.75 * ordered[n] + 0.25 * ordered[n + 1]),
        float(0.25 * ordered[3 * n + 1] + 0.75 * ordered[3 * n + 2]),
    )


def steadiness_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Each case of ``frame`` classified at loading (``steady_rounds``): columns ``source``, ``machine_id``,
    ``name``, ``rounds`` (all it ran, a warm-up's included), ``kind``, ``warm_up_rounds`` (left out of its
    figures). Cases read without their rounds, or too few to classify, are left out."""
    columns = ["source", "machine_id", "name", "rounds", "kind", "warm_up_rounds"]
    if frame.empty or "steady" not in frame:
        return pd.DataFrame(columns=columns)
    classified = frame[frame["steady"].isin(CLASSES)]
    unknown = pd.Series("", index=classified.index)
    warm_up = pd.to_numeric(classified["warm_up_rounds"], errors="coerce").fillna(0).astype(int)
    rounds = pd.to_numeric(classified.get("rounds", unknown), errors="coerce").fillna(0).astype(int)
    return pd.DataFrame(
        {
            "source": classified.get("source", unknown).astype(object),
            "machine_id": classified.get("machine_id", unknown).astype(object),
            "name": classified.get("name", unknown).astype(object),
            "rounds": rounds + warm_up,
            "kind": classified["steady"].astype(object),
            "warm_up_rounds": warm_up,
        },
        columns=columns,
    ).reset_index(drop=True)


def steadiness_line(table: pd.DataFrame, unclassified: int = 0) -> str | None:
    """One line counting the classes of ``steadiness_table``'s cases, the warm-up rounds left out of their
    figures (the cases with the most named, at most three), the cases with no steady state (at most three
    named) and the ``unclassified`` ones (read without their rounds, or too few); None when no case was
    classified and none left unclassified."""
    if table.empty and not unclassified:
        return None
    if table.empty:
        return f"Steady state: {unclassified} case measurements {UNCLASSIFIED}"
    counts = table["kind"].value_counts()
    parts = [f"{int(counts.get(kind, 0))} {kind}" for kind in CLASSES]
    line = (
        f"Steady state of {len(table)} case measurements (changepoints of their rounds): {', '.join(parts)}"
    )
    warm = table[table["kind"] == WARM_UP].sort_values("warm_up_rounds", ascending=False, kind="stable")
    if not warm.empty:
        named = [f"{name} {count}" for name, count in zip(warm["name"], warm["warm_up_rounds"], strict=True)]
        more = ", …" if len(named) > 3 else ""
        line += (
            f"; warm-ups left out of their figures: {int(warm['warm_up_rounds'].sum())} rounds "
            f"({', '.join(named[:3])}{more})"
        )
    unsteady = [name for name in table[table["kind"] == NO_STEADY_STATE]["name"].astype(str) if name]
    if unsteady:
        line += f"; no steady state: {', '.join(unsteady[:3])}{', …' if len(unsteady) > 3 else ''}"
    if unclassified:
        line += f"; {unclassified} {UNCLASSIFIED}"
    return line


def frame_steadiness_line(frame: pd.DataFrame) -> str | None:
    """``steadiness_line`` of every case of ``frame``: its classes counted and its unclassified cases (the
    line of the summary and of the report's runs)."""
    return steadiness_line(steadiness_table(frame), unclassified_count(frame))


def unclassified_count(frame: pd.DataFrame) -> int:
    """How many cases of ``frame`` were not classified at loading (``steady_rounds``: read without their
    rounds, or too few): their figures are pytest-benchmark's over every round, a warm-up's included."""
    if frame.empty:
        return 0
    if "steady" not in frame:
        return len(frame)
    return int((~frame["steady"].isin(CLASSES)).sum())


def warm_up_text(rows: pd.DataFrame) -> str:
    """ "12 warm-up rounds left out in 2 of 3 runs" for ``rows`` (one figure's rows in one group), "" when
    none of them was a warm-up."""
    if rows.empty or "steady" not in rows:
        return ""
    warm = rows["steady"] == WARM_UP
    if not warm.any():
        return ""
    left_out = int(pd.to_numeric(rows.loc[warm, "warm_up_rounds"], errors="coerce").sum())
    runs = rows["source"].astype(str) if "source" in rows else pd.Series(range(len(rows)), index=rows.index)
    return f"{left_out} warm-up rounds left out in {runs[warm].nunique()} of {runs.nunique()} run(s)"


def warm_up_line(frame: pd.DataFrame) -> str | None:
    """One line for the head of a comparison (``python -m analysis compare``): how many of ``frame``'s cases
    warmed up and how many rounds were left out of their figures, and how many were not classified (their
    figures over every round); None for an empty frame."""
    table = steadiness_table(frame)
    unclassified = unclassified_count(frame)
    if table.empty and not unclassified:
        return None
    if table.empty:
        return f"Warm-ups not looked for: {unclassified} case measurements {UNCLASSIFIED}"
    warm = table[table["kind"] == WARM_UP]
    line = (
        f"Warm-ups left out: {len(warm)} of {len(table)} case measurements classified started slower and "
        f"settled, their first {int(warm['warm_up_rounds'].sum())} rounds left out of their figures"
        if not warm.empty
        else f"Warm-ups: none among {len(table)} case measurements classified"
    )
    if unclassified:
        line += f"; {unclassified} {UNCLASSIFIED}"
    return line
