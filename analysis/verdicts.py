"""Whether a figure changed between two groups of runs: the one place every command takes its verdict from.

The run (one process) is the unit of evidence (Georges, Buytaert & Eeckhout, "Statistically rigorous Java
performance evaluation", OOPSLA 2007; Kalibera & Jones, "Rigorous benchmarking in reasonable time", ISMM
2013). Rounds inside a run are not independent samples (on this project's VM the median lag-1
autocorrelation of a case's rounds is 0.30) and a process carries effects of its own (where its memory
landed, which core it ran on) that no number of its rounds averages away: two runs of one commit differ by
more than their rounds' spread says. So:

- Each figure is taken from each run alone (``Side.values``: the run's fastest round, its median round, or
  the figure fitted on its points alone), and a group's figure is the mean over its runs.
- The ratio new ÷ baseline (always of times: a rate is inverted, so ×1.10 reads "10 % slower") gets its
  uncertainty on the log scale from two sources, whichever is larger:
  * a hierarchical bootstrap: the runs of each side resampled, then, for a median figure, the rounds within
    each drawn run (Kalibera & Jones §4). A fastest-round or fitted figure is resampled at the run level
    only: a resample's minimum is never below the sample's, so resampling rounds would bias it upwards.
  * the machine's run-to-run spread σ of the figure (``SPREAD``), times √(1/n_new + 1/n_baseline): from the
    runs the storage holds where it has ≥ ``SPREAD_MIN_RUNS`` runs of one commit on the machine, and never
    below the default measured on this project's VM. With one run a side this is the only source, and the
    output says which changes it cannot tell from that spread.
- A figure changed when its ratio's interval lies wholly outside the equivalence band ±``THRESHOLD``, after
  the Benjamini–Hochberg correction over every figure the command judges (``scipy.stats``'
  ``false_discovery_control``; the false discovery rate ``FALSE_DISCOVERY``). Changed figures carry the
  false-coverage-adjusted interval of Benjamini & Yekutieli (JASA 2005), level 1 − R·q/m for R changes of m
  judged: each lies wholly outside the band. A figure whose 95 % interval lies wholly inside the band is
  the same; any other is inconclusive: its interval reaches both sides of the band's edge.

Intervals are normal on the log scale around the estimate (the standard error from above), so every
interval contains its estimate.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: The equivalence band: a change smaller than this (either way) is not worth reporting, by default.
THRESHOLD = 0.03
#: The false discovery rate of the Benjamini–Hochberg correction across the figures a command judges.
FALSE_DISCOVERY = 0.05
#: The level of the interval that shows a figure is the same (wholly inside the band).
LEVEL = 0.95
#: Bootstrap resamples and seed (deterministic: the same runs give the same verdicts).
N_BOOT = 2000
SEED = 20261205
#: A run's rounds are resampled (a median figure) only while a side holds at most this many runs: past it,
#: run-to-run variation dominates the standard error, and the rounds' level would cost a fleet's time.
ROUNDS_LEVEL_MAX_RUNS = 20
#: Fewest rounds a run needs for its figure to be judged.
MIN_ROUNDS = 3
#: Fewest runs of one commit on one machine that measure the figure's run-to-run spread.
SPREAD_MIN_RUNS = 3

#: Mark texts, for tables, figures and their legends.
MARK_CHANGED = "changed"
MARK_SAME = "same"
MARK_INCONCLUSIVE = "inconclusive"
MARK_BASELINE = "baseline"
MARK_NO_DATA = "not judged: no per-run value (raw samples not saved, or the case skipped)"
MARK_NO_BASELINE_POINT = "not judged: the baseline lacks this case"

#: The run-to-run spread (standard deviation of the log of a figure across runs of one commit on one machine)
#: of each kind of figure, for full and quick runs, measured on this project's 2-core VM by
#: ``python tools/run_spread.py`` from the committed runs (tests/data/runs: three full runs;
#: tests/data/aa: twelve quick runs back to back), each the root mean square over the kind's figures of the
#: per-figure spread, rounded to 0.001; ``tests/test_verdicts.py`` recomputes them. GPU figures: no GPU run is
#: committed yet, so their default is the CPU op costs' full-run spread doubled, an assumption (not a
#: measurement) that the first GPU run's own spread replaces once it holds three runs of one commit.
SPREAD: Mapping[tuple[str, bool], float] = {
    ("t0", False): 0.042,
    ("t0", True): 0.152,
    ("in-cache per element", False): 0.107,
    ("in-cache per element", True): 0.102,
    ("DRAM per element", False): 0.033,
    ("DRAM per element", True): 0.012,
    ("bandwidth", False): 0.025,
    ("bandwidth", True): 0.025,
    ("many vs one", False): 0.006,
    ("many vs one", True): 0.022,
    ("overhead floor", False): 0.011,
    ("overhead floor", True): 0.022,
    ("op cost", False): 0.019,
    ("op cost", True): 0.03,
    ("decode step, CPU", False): 0.023,
    ("decode step, CPU", True): 0.03,
    ("framework t0", False): 0.016,
    ("framework t0", True): 0.02,
    ("framework step", False): 0.03,
    ("framework step", True): 0.063,
    ("GPU", False): 0.038,
    ("GPU", True): 0.038,
}


@dataclass(frozen=True)
class Side:
    """One group's evidence for one figure: ``values``, the figure of each run alone (time-like, s, or a
    rate: ``Judgment`` inverts rates), and for a median figure each run's ``rounds`` (per timed call, the
    same unit), which the bootstrap resamples; None for a fastest-round or fitted figure."""

    values: np.ndarray
    rounds: tuple[np.ndarray, ...] | None = None

    @property
    def runs(self) -> int:
        return int(self.values.size)


@dataclass(frozen=True)
class Evidence:
    """The log ratio (new ÷ baseline time) of one figure with its standard error, before the correction:
    ``log_ratio``, ``se``; ``runs`` (new, baseline); ``spread`` the run-to-run σ used and ``spread_from``
    where it came from; ``bootstrap`` whether the hierarchical bootstrap's error was the larger."""

    log_ratio: float
    se: float
    runs: tuple[int, int]
    spread: float
    spread_from: str
    bootstrap: bool

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)

    def p_value(self, threshold: float) -> float:
        """p of "the ratio lies within ±``threshold``": the smallest 1 − level at which the interval
        log_ratio ± z·se lies wholly outside the band (1 where the estimate is inside it)."""
        from scipy.special import ndtr  # Φ, as scipy.stats.norm.cdf computes it

        beyond = abs(self.log_ratio) - math.log1p(threshold)
        if beyond <= 0:
            return 1.0
        if self.se <= 0:
            return 0.0
        return float(min(1.0, 2 * ndtr(-beyond / self.se)))

    def interval(self, level: float) -> tuple[float, float]:
        """The ratio's interval at ``level``: exp(log_ratio ± z·se)."""
        from scipy.special import ndtri  # Φ⁻¹

        z = float(ndtri(0.5 + level / 2))
        return math.exp(self.log_ratio - z * self.se), math.exp(self.log_ratio + z * self.se)

    def smallest_change(self, threshold: float, level: float) -> float:
        """The smallest change (as a fraction) this evidence could report at ``level``: the band plus the
        interval's half-width."""
        from scipy.special import ndtri

        return math.expm1(math.log1p(threshold) + float(ndtri(0.5 + level / 2)) * self.se)


def evidence(
    new: Side,
    base: Side,
    spread: float,
    spread_from: str,
    rate: bool = False,
    rng: np.random.Generator | None = None,
) -> Evidence:
    """The log time ratio of ``new`` against ``base`` (means of their runs' figures; a ``rate`` inverted)
    with its standard error: the larger of the hierarchical bootstrap's and ``spread``·√(1/n + 1/n)."""
    if new.runs == 0 or base.runs == 0:
        raise ValueError("a verdict needs at least one run a side")
    log_ratio = math.log(float(new.values.mean())) - math.log(float(base.values.mean()))
    if rate:
        log_ratio = -log_ratio
    if rng is None and _runs_only(new) and _runs_only(base):
        # the seeded generator's draws depend on the sides' run counts alone: taken once per pair of counts
        new_draws, base_draws = _run_draws(new.runs, base.runs, N_BOOT)
        replicates = np.log(new.values[new_draws].mean(axis=1)) - _base_logs(base.values, base_draws)
    else:
        rng = rng if rng is not None else np.random.default_rng(SEED)
        replicates = np.log(_replicates(new, rng)) - np.log(_replicates(base, rng))
    se_bootstrap = float(replicates.std(ddof=1)) if replicates.size > 1 else 0.0
    se_spread = spread * math.sqrt(1 / new.runs + 1 / base.runs)
    return Evidence(
        log_ratio=log_ratio,
        se=max(se_bootstrap, se_spread),
        runs=(new.runs, base.runs),
        spread=spread,
        spread_from=spread_from,
        bootstrap=se_bootstrap > se_spread,
    )


def _runs_only(side: Side) -> bool:
    """Whether ``_replicates`` resamples ``side`` at the run level only (no rounds to redraw)."""
    return side.rounds is None or side.runs > ROUNDS_LEVEL_MAX_RUNS


@functools.lru_cache(maxsize=16)
def _run_draws(new_runs: int, base_runs: int, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    """The runs ``_replicates`` draws, from ``SEED``'s generator, for a new side of ``new_runs`` runs and
    then a baseline of ``base_runs``, each resampled at the run level only: a fleet's table judges 400
    figures, mostly of equal run counts, and drawing them was most of its verdicts' time."""
    rng = np.random.default_rng(SEED)
    new = rng.integers(0, new_runs, size=(n_boot, new_runs))
    base = rng.integers(0, base_runs, size=(n_boot, base_runs))
    new.flags.writeable = base.flags.writeable = False
    return new, base


#: The baseline's log replicates of the figure judged last (``_base_logs``): every group of a figure is
#: judged against the same baseline values and, at equal run counts, the same draws.
_LAST_BASE: list[tuple[bytes, np.ndarray, np.ndarray]] = []


def _base_logs(values: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """``log`` of the baseline's replicates (``_replicates`` at the run level: the mean of each row of
    drawn runs), kept for the next group judged against the same values and draws."""
    key = np.ascontiguousarray(values, dtype=float).tobytes()
    if _LAST_BASE and _LAST_BASE[0][0] == key and _LAST_BASE[0][1] is draws:
        return _LAST_BASE[0][2]
    logs = np.log(values[draws].mean(axis=1))
    _LAST_BASE[:] = [(key, draws, logs)]
    return logs


def _replicates(side: Side, rng: np.random.Generator, n_boot: int = N_BOOT) -> np.ndarray:
    """``n_boot`` bootstrap replicates of the mean over a side's runs: runs drawn with replacement, then, for
    a median figure of at most ``ROUNDS_LEVEL_MAX_RUNS`` runs, each drawn run's median of its rounds drawn
    with replacement."""
    k = side.runs
    draws = rng.integers(0, k, size=(n_boot, k))
    if side.rounds is None or k > ROUNDS_LEVEL_MAX_RUNS:
        return side.values[draws].mean(axis=1)
    medians = np.empty((n_boot, k))
    for run, rounds in enumerate(side.rounds):
        resampled = rounds[rng.integers(0, rounds.size, size=(n_boot, rounds.size))]
        # A run's figure per round scaled to its own value: the bootstrap moves it by its rounds' spread.
        medians[:, run] = np.median(resampled, axis=1) * (side.values[run] / np.median(rounds))
    return np.take_along_axis(medians, draws, axis=1).mean(axis=1)


@dataclass(frozen=True)
class Judged:
    """The corrected verdicts of every judged figure: ``marks`` and the ``low``/``high`` interval of each
    (same order as the evidence given), with how many were ``judged`` and ``changed``, the level of the
    changed figures' intervals, and the ``threshold`` used."""

    marks: list[str]
    low: list[float]
    high: list[float]
    adjusted_p: list[float]
    judged: int
    changed: int
    changed_level: float
    threshold: float

    def __deepcopy__(self, memo: dict) -> Judged:
        """Itself: never changed once made, and pandas deep-copies a table's ``attrs`` (which hold it) at
        every operation on the table: 2,000 copies of a fleet's 400 verdicts drawing its machines figure."""
        return self


def correct(items: Sequence[Evidence], threshold: float = THRESHOLD) -> Judged:
    """Benjamini–Hochberg over the band p-values of ``items``: each figure "changed" (its interval at the
    false-coverage level lies wholly outside ±``threshold``), "same" (its 95 % interval lies wholly inside
    it) or "inconclusive"."""
    if not items:
        return Judged([], [], [], [], 0, 0, LEVEL, threshold)
    from scipy.stats import false_discovery_control

    p_values = np.array([item.p_value(threshold) for item in items])
    adjusted = false_discovery_control(p_values, method="bh")
    changed = adjusted < FALSE_DISCOVERY
    count = int(changed.sum())
    changed_level = 1 - count * FALSE_DISCOVERY / len(items) if count else LEVEL
    band = math.log1p(threshold)
    marks, lows, highs = [], [], []
    for item, is_changed in zip(items, changed, strict=True):
        low, high = item.interval(changed_level if is_changed else LEVEL)
        if is_changed:
            mark = MARK_CHANGED
        elif -band <= math.log(low) and math.log(high) <= band:
            mark = MARK_SAME
        else:
            mark = MARK_INCONCLUSIVE
        marks.append(mark)
        lows.append(low)
        highs.append(high)
    return Judged(marks, lows, highs, adjusted.tolist(), len(items), count, changed_level, threshold)


def direction(ratio: float) -> str:
    """A time ratio in words: "×1.10 slower", "×0.91 faster" (the ratio as printed, its way said)."""
    if not math.isfinite(ratio):
        return "× n/a"
    word = "slower" if ratio > 1 else "faster" if ratio < 1 else "unchanged"
    return f"×{ratio:#.3g} {word}"


def kind_of(case: str, column: str | None = None, device: str | None = None) -> str:
    """The kind of figure (``SPREAD``'s first key) of a figure of ``case`` (fitted: its fit ``column``)."""
    if device == "cuda" or case in _GPU_CASES:
        return "GPU"
    if column is not None:
        if column == "t0_s":
            return "t0"
        if column in ("cache_s_per_element", "r_inf_per_s", "n_half"):
            return "in-cache per element"
        if column == "dram_s_per_element":
            return "DRAM per element"
        if column.endswith("_bytes_per_s"):
            return "bandwidth"
    return _KIND_OF_CASE.get(case, "op cost")


_KIND_OF_CASE = {
    "many_vs_one": "many vs one",
    "decode_floor": "overhead floor",
    "numpy_op": "op cost",
    "decode_step": "decode step, CPU",
    "framework_call": "framework t0",
    "framework_step": "framework step",
}
_GPU_CASES = frozenset({"framework_launch"})


def run_sets(frame: pd.DataFrame, quick: Mapping[str, bool]) -> pd.Series:
    """Each row's set of like runs (``spread``): its machine, commit and whether the run was quick."""
    machine = frame["machine"] if "machine" in frame else frame["machine_id"]
    commit = frame["commit"].astype(object) if "commit" in frame else pd.Series("", index=frame.index)
    kind = frame["source"].astype(object).map(lambda source: "quick" if quick.get(source) else "full")
    return machine.astype(str) + " | " + commit.astype(str) + " | " + kind.astype(str)


def spread(values: pd.Series, sets: pd.Series) -> tuple[float, int, int]:
    """The run-to-run spread of one figure, from its per-run ``values`` (indexed by run) and each run's set
    of like runs ``sets`` (same index): the pooled standard deviation of the log values within the sets of
    at least ``SPREAD_MIN_RUNS`` runs, its degrees of freedom and the runs it used; (NaN, 0, 0) without
    such a set."""
    logs = np.log(values.to_numpy(dtype=float))
    kept = sets.reindex(values.index).to_numpy(dtype=object)
    usable = ~np.isnan(logs) & pd.notna(kept)
    logs = logs[usable]
    # numpy on each set's values, not a pandas groupby: the same sums, without pandas' cost per group (a
    # fleet's compare judges 400 figures).
    codes, _ = pd.factorize(kept[usable], sort=False)
    squares, freedom, used = 0.0, 0, 0
    for code in range(int(codes.max()) + 1 if codes.size else 0):
        rows = logs[codes == code]
        if rows.size >= SPREAD_MIN_RUNS:
            squares += float(((rows - rows.mean()) ** 2).sum())
            freedom += rows.size - 1
            used += rows.size
    return (math.sqrt(squares / freedom), freedom, used) if freedom else (math.nan, 0, 0)


def with_run_kinds(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each row's run's ``quick`` flag (from ``runs``, ``analysis.load.LoadResult.runs``) and
    its ``run_set`` (``run_sets``): what a verdict reads to choose and measure the run-to-run spread."""
    quick = {
        str(source): bool(flag)
        for source, flag in zip(runs["source"], runs["quick"].fillna(False), strict=True)
    }
    flags = frame["source"].astype(str).map(quick).fillna(False).astype(bool)
    return frame.assign(quick=flags, run_set=run_sets(frame, quick))
