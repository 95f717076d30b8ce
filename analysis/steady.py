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
- **no steady state**: the level goes both up and down.
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
#: Rounds of the running median the series is smoothed with first: an isolated slow round (another
#: process's time slice) is not a change of level.
SMOOTHING = 5


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
    noise = 1.4826 * float(np.median(np.abs(np.diff(logs) - np.median(np.diff(logs))))) / math.sqrt(2)
    if noise == 0:
        noise = float(np.std(logs)) or 1e-12
    penalty = 2 * noise**2 * math.log(times.size)
    splits = sorted(_splits(logs, 0, logs.size, penalty, MAX_SPLITS))
    levels = [float(np.mean(logs[a:b])) for a, b in zip([0, *splits], [*splits, logs.size], strict=True)]
    steps = [after - before for before, after in itertools.pairwise(levels)]
    kept = [split for split, step in zip(splits, steps, strict=True) if abs(step) >= math.log1p(MIN_SHIFT)]
    signs = {step > 0 for step in steps if abs(step) >= math.log1p(MIN_SHIFT)}
    if not kept:
        return Steadiness(FLAT, (), 0)
    if signs == {False}:
        return Steadiness(WARM_UP, tuple(kept), kept[-1])
    if signs == {True}:
        return Steadiness(SLOWDOWN, tuple(kept), 0)
    return Steadiness(NO_STEADY_STATE, tuple(kept), 0)


def _rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    """The running median of ``values`` over ``window`` rounds (centred; the ends over what they have)."""
    if values.size < window:
        return values
    half = window // 2
    padded = np.pad(values, half, mode="edge")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, window), axis=1)


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
    cost_left = squares[left - 1] - total[left - 1] ** 2 / left
    cost_right = (squares[-1] - squares[left - 1]) - (total[-1] - total[left - 1]) ** 2 / right
    whole = squares[-1] - total[-1] ** 2 / n
    gains = whole - (cost_left + cost_right)
    best = int(np.argmax(gains))
    if gains[best] <= penalty:
        return []
    split = start + int(left[best])
    before = _splits(logs, start, split, penalty, (budget - 1) // 2)
    after = _splits(logs, split, stop, penalty, budget - 1 - len(before))
    return [*before, split, *after]


def steadiness_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Each case of ``frame`` with its raw rounds (``data``) classified: columns ``source``, ``machine_id``,
    ``name``, ``rounds``, ``kind``, ``warm_up_rounds``. Cases saved without their rounds are left out."""
    columns = ["source", "machine_id", "name", "rounds", "kind", "warm_up_rounds"]
    if frame.empty or "data" not in frame:
        return pd.DataFrame(columns=columns)
    rows = []
    unknown = pd.Series("", index=frame.index)
    for source, machine, name, data in zip(
        frame.get("source", unknown),
        frame.get("machine_id", unknown),
        frame.get("name", unknown),
        frame["data"],
        strict=True,
    ):
        if not isinstance(data, np.ndarray | list | tuple):
            continue
        found = classify(np.asarray(data, dtype=float))
        if found is not None:
            rows.append([source, machine, name, len(data), found.kind, found.warm_up_rounds])
    return pd.DataFrame(rows, columns=columns)


def steadiness_line(table: pd.DataFrame) -> str | None:
    """One line counting the classes of ``steadiness_table``'s cases, the warm-ups' rounds and the cases
    with no steady state named (at most three); None when no case was classified."""
    if table.empty:
        return None
    counts = table["kind"].value_counts()
    parts = [f"{int(counts.get(kind, 0))} {kind}" for kind in CLASSES]
    line = (
        f"Steady state of {len(table)} case measurements (changepoints of their rounds): {', '.join(parts)}"
    )
    warm = table[table["kind"] == WARM_UP]
    if not warm.empty:
        line += f"; warm-ups took {int(warm['warm_up_rounds'].sum())} rounds in all"
    unsteady = [name for name in table[table["kind"] == NO_STEADY_STATE]["name"].astype(str) if name]
    if unsteady:
        line += f"; no steady state: {', '.join(unsteady[:3])}{', …' if len(unsteady) > 3 else ''}"
    return line
