"""The run-to-run spread of every kind of figure (``analysis.verdicts.SPREAD``), measured from saved runs.

Each figure is taken from each run alone (``compare --by run``'s per-run figures); its spread is the pooled
standard deviation of its log across runs of one commit on one machine (quick and full runs apart); a kind's
spread is the root mean square over its figures. ``python tools/run_spread.py tests/data/runs tests/data/aa``
prints the table ``analysis/verdicts.py`` holds (``tests/test_verdicts.py`` recomputes it).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.compare import DERIVED, figure_table, group_runs
from analysis.fits import fit_all
from analysis.load import load_runs
from analysis.runs import select_runs
from analysis.verdicts import spread, with_run_kinds


def per_run_figures(paths: Sequence[Path]) -> pd.DataFrame:
    """One row per figure and run: ``figure``, ``kind``, ``source``, ``value`` (the run's own figure), with
    each run's ``run_set`` and ``quick``."""
    loaded = load_runs(list(paths), samples=False)  # each run's statistics; no figure here needs rounds
    selection = select_runs(loaded, include_quick=True, include_partial=False)
    groups = group_runs(selection.result.runs, "run", None)
    frame = with_run_kinds(groups.relabel(selection.result.frame), selection.result.runs)
    table = figure_table(frame, fit_all(frame, predictions=False), groups.baseline.label)
    source_of = {group.label: group.runs[0] for group in groups.groups}
    sets = frame.drop_duplicates("source").set_index(frame.drop_duplicates("source")["source"].astype(str))
    table = table[table["value"].notna() & (table["value"] > 0) & (table["mark"] != DERIVED)]
    table = table.assign(source=table["machine_id"].map(source_of))
    return table.assign(
        run_set=table["source"].map(sets["run_set"]), quick=table["source"].map(sets["quick"]).astype(bool)
    )[["figure", "kind", "source", "value", "run_set", "quick"]]


def kind_spreads(figures: pd.DataFrame) -> pd.DataFrame:
    """Per kind and run kind (quick or full): the root mean square of its figures' spreads, how many figures
    and the degrees of freedom behind them."""
    rows = []
    for (kind, quick), rows_kind in figures.groupby(["kind", "quick"], sort=True):
        squares, freedom, count = 0.0, 0, 0
        for _, rows_figure in rows_kind.groupby("figure", sort=False):
            values = rows_figure.set_index("source")["value"]
            sigma, df, _ = spread(values, rows_figure.set_index("source")["run_set"])
            if math.isfinite(sigma):
                squares += sigma**2
                freedom += df
                count += 1
        if count:
            rows.append(
                {
                    "kind": kind,
                    "quick": quick,
                    "spread": math.sqrt(squares / count),
                    "figures": count,
                    "df": freedom,
                }
            )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args()
    # Each folder on its own: a figure measured with other parameters on another machine has no ratio to
    # the first run there, but its own runs' spread still counts.
    table = kind_spreads(pd.concat([per_run_figures([path]) for path in args.paths], ignore_index=True))
    for row in table.itertuples(index=False):
        print(
            f"{row.kind:22s} {'quick' if row.quick else 'full':5s}  spread {row.spread:.4f}  "
            f"({row.figures} figures, {row.df} df)"
        )
    print(f"all: median of the figures' spreads {float(np.median(table['spread'])):.4f}")


if __name__ == "__main__":
    main()
