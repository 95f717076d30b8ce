"""How often ``compare``'s verdicts are wrong, measured on saved runs of one commit (``analysis.verdicts``).

- False positives (A/A): every pair of runs of one folder compared alone (one run a side, no other run of
  the commit in the storage, so the spread is the default), the share of judged figures marked changed.
- Power: one measured figure of one run scaled by a factor (semi-synthetic: every statistic and round of
  that figure's rows multiplied, done here, never in ``benchmarks/``), the share of comparisons in which it
  is marked changed and leads the output (the largest change).

``python tools/verdict_rates.py`` prints both for the committed runs (tests/data/runs: three full runs;
tests/data/aa: twelve quick runs back to back); ``tests/test_verdicts.py`` holds the bounds.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.compare import figure_table, measured_figures
from analysis.fits import fit_all
from analysis.load import load_runs
from analysis.runs import select_runs
from analysis.sentinel import normalized
from analysis.verdicts import (
    MARK_CHANGED,
    MARK_INCONCLUSIVE,
    MARK_SAME,
    THRESHOLD,
    kind_of,
    with_run_kinds,
)

ROOT = Path(__file__).resolve().parent.parent
FULL_RUNS = ROOT / "tests" / "data" / "runs"
QUICK_RUNS = ROOT / "tests" / "data" / "aa"
#: Ten quick runs back to back of a later commit, each with its speed sentinel (``compare --normalize``).
SENTINEL_RUNS = ROOT / "tests" / "data" / "aa-sentinel"
#: The per-run statistics a scaled figure's rows get multiplied in (times per call).
TIME_COLUMNS = ("min", "max", "mean", "median", "q1", "q3", "iqr", "stddev")


def runs_of(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows and the runs of every run in ``folder`` (quick ones included)."""
    loaded = load_runs([folder], samples=True)
    selection = select_runs(loaded, include_quick=True, include_partial=False)
    return selection.result.frame, selection.result.runs


def compare_sides(
    frame: pd.DataFrame, runs: pd.DataFrame, sides: Sequence[Sequence[str]], threshold: float = THRESHOLD
) -> pd.DataFrame:
    """The figure table of the runs ``sides[0]`` (the baseline) against ``sides[1]``, no other run in it."""
    label = {source: code for code, side in zip("AB", sides, strict=True) for source in side}
    keep = frame["source"].astype(str).isin(label)
    rows = frame[keep].assign(machine_id=frame.loc[keep, "source"].astype(str).map(label))
    rows = with_run_kinds(rows, runs)
    return figure_table(rows, fit_all(rows, predictions=False), "A", threshold)


def false_positives(folder: Path, threshold: float = THRESHOLD, normalize: bool = False) -> tuple[int, int]:
    """(figures marked changed, figures judged) over every pair of runs in ``folder``, one run a side;
    ``normalize``: each run's times first divided by its speed sentinel's ratio to the median of the
    folder's runs (``compare --normalize`` with the machine's history in the storage)."""
    frame, runs = runs_of(folder)
    if normalize:
        frame, _ = normalized(frame, runs)
    changed = judged = 0
    for pair in itertools.combinations(sorted(runs["source"].astype(str)), 2):
        table = compare_sides(frame, runs, [[pair[0]], [pair[1]]], threshold)
        others = table[table["machine_id"] == "B"]
        judged += int(others["mark"].isin([MARK_CHANGED, MARK_SAME, MARK_INCONCLUSIVE]).sum())
        changed += int((others["mark"] == MARK_CHANGED).sum())
    return changed, judged


def scaled(frame: pd.DataFrame, source: str, label: str, factor: float) -> pd.DataFrame:
    """``frame`` with the rows of the measured figure ``label`` in run ``source`` made ``factor`` × slower."""
    figure = next(figure for figure in measured_figures(frame) if figure.label == label)
    keep = (frame["case"] == figure.case) & (frame["source"].astype(str) == source)
    for key, value in figure.match:
        keep &= frame[key] == value
    out = frame.copy()
    for column in TIME_COLUMNS:
        if column in out:
            out.loc[keep, column] = pd.to_numeric(out.loc[keep, column], errors="coerce") * factor
    out.loc[keep, "data"] = pd.Series(
        [
            np.asarray(data, dtype=float) * factor if data is not None else None
            for data in out.loc[keep, "data"]
        ],
        index=out.index[keep],
        dtype=object,
    )
    return out


def power(
    folder: Path,
    factor: float,
    sides: Sequence[tuple[Sequence[str], Sequence[str]]],
    threshold: float = THRESHOLD,
    kinds: Sequence[str] | None = None,
) -> pd.DataFrame:
    """For each measured figure and each (baseline runs, new runs) of ``sides`` (sources' names within
    ``folder``): whether the figure scaled by ``factor`` in the first new run is marked changed and leads
    (no other figure changed more), for the figures of ``kinds`` (all when None). One row per trial:
    ``figure``, ``kind``, ``flagged``, ``leads``."""
    frame, runs = runs_of(folder)
    by_name = {Path(str(source)).name: str(source) for source in runs["source"]}
    rows = []
    for base_names, new_names in sides:
        base, new = [by_name[name] for name in base_names], [by_name[name] for name in new_names]
        for figure in measured_figures(frame):
            if kinds is not None and kind_of(figure.case) not in kinds:
                continue
            table = compare_sides(scaled(frame, new[0], figure.label, factor), runs, [base, new], threshold)
            others = table[table["machine_id"] == "B"]
            changed = others[others["mark"] == MARK_CHANGED]
            own = others[others["figure"] == figure.label]
            if own.empty or own["mark"].iat[0] not in (MARK_CHANGED, MARK_SAME, MARK_INCONCLUSIVE):
                continue
            flagged = bool(own["mark"].iat[0] == MARK_CHANGED)
            distance = np.abs(np.log(changed["ratio"].astype(float)))
            leads = flagged and changed.loc[distance.idxmax(), "figure"] == figure.label
            rows.append(
                {"figure": figure.label, "kind": own["kind"].iat[0], "flagged": flagged, "leads": leads}
            )
    return pd.DataFrame(rows)


def one_run_pairs(folder: Path) -> list[tuple[list[str], list[str]]]:
    """Every ordered pair of runs in ``folder`` as one run a side."""
    names = sorted(path.name for path in folder.glob("*.json"))
    return [([a], [b]) for a, b in itertools.permutations(names, 2)]


def three_run_sides(folder: Path) -> list[tuple[list[str], list[str]]]:
    """The runs of ``folder`` in time order cut into consecutive threes, each three against the next."""
    names = sorted(path.name for path in folder.glob("*.json"))
    threes = [names[i : i + 3] for i in range(0, len(names) - 2, 3)]
    return [(threes[i], threes[i + 1]) for i in range(len(threes) - 1)]


def main() -> None:
    for folder in (FULL_RUNS, QUICK_RUNS):
        changed, judged = false_positives(folder)
        print(f"A/A {folder.name}: {changed} of {judged} judged figures changed ({changed / judged:.2%})")
    for normalize in (False, True):
        changed, judged = false_positives(SENTINEL_RUNS, normalize=normalize)
        how = "normalized by the speed sentinel" if normalize else "as measured"
        print(
            f"A/A {SENTINEL_RUNS.name}, {how}: {changed} of {judged} judged figures changed "
            f"({changed / judged:.2%})"
        )
    for folder, factor, sides, what in (
        (FULL_RUNS, 1.10, one_run_pairs(FULL_RUNS), "one full run a side"),
        (QUICK_RUNS, 1.10, three_run_sides(QUICK_RUNS), "three quick runs a side"),
        (QUICK_RUNS, 1.05, three_run_sides(QUICK_RUNS), "three quick runs a side"),
    ):
        trials = power(folder, factor, sides)
        rate = trials["leads"].mean()
        print(f"power ×{factor:.2f}, {what}: flagged and leading in {rate:.1%} of {len(trials)}")
        for kind, rows in trials.groupby("kind"):
            print(f"    {kind:20s} {rows['leads'].mean():6.1%} of {len(rows)}")


if __name__ == "__main__":
    main()
