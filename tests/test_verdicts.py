"""analysis.verdicts: the run is the unit of evidence; every interval holds its estimate; the corrected
verdicts of the committed runs of one commit (A/A) and of a planted change (power), measured by
tools/verdict_rates.py, which README's statistics paragraph quotes."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from analysis import verdicts
from analysis.verdicts import MARK_CHANGED, Side, correct, evidence

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rates():
    return _tool("verdict_rates")


def test_one_clear_change_among_many_equal_figures_is_the_only_one_reported() -> None:
    rng = np.random.default_rng(1)
    items = [
        evidence(Side(np.exp(rng.normal(0, 0.01, 3))), Side(np.exp(rng.normal(0, 0.01, 3))), 0.01, "test")
        for _ in range(40)
    ]
    items.append(evidence(Side(np.array([1.5, 1.52, 1.49])), Side(np.array([1.0, 1.01, 0.99])), 0.01, "test"))
    judged = correct(items, 0.03)
    assert judged.marks.count(MARK_CHANGED) == 1 and judged.marks[-1] == MARK_CHANGED
    # The changed figure's interval is at the false-coverage level 1 - R·q/m: wider than 95 %.
    assert judged.changed_level == pytest.approx(1 - verdicts.FALSE_DISCOVERY / 41)
    assert judged.low[-1] > 1.03


def test_a_rate_is_judged_as_a_time() -> None:
    item = evidence(Side(np.array([2.0])), Side(np.array([1.0])), 0.01, "test", rate=True)
    assert item.ratio == pytest.approx(0.5)  # twice the bandwidth: half the time


def test_the_spread_grows_the_error_with_fewer_runs() -> None:
    one = evidence(Side(np.array([1.0])), Side(np.array([1.0])), 0.02, "test")
    three = evidence(Side(np.ones(3)), Side(np.ones(3)), 0.02, "test")
    assert one.se == pytest.approx(0.02 * math.sqrt(2))
    assert three.se == pytest.approx(0.02 * math.sqrt(2 / 3))
    assert not one.bootstrap


def test_rounds_are_resampled_for_a_median_figure_only() -> None:
    rng = np.random.default_rng(2)
    rounds = tuple(np.exp(rng.normal(0, 0.3, 20)) for _ in range(2))
    values = np.array([float(np.median(r)) for r in rounds])
    with_rounds = evidence(Side(values, rounds), Side(values, rounds), 0.0, "test")
    without = evidence(Side(values), Side(values), 0.0, "test")
    assert with_rounds.se > without.se > 0


def test_the_default_spreads_are_those_the_committed_runs_measure() -> None:
    """``analysis.verdicts.SPREAD`` is measured, not chosen: tools/run_spread.py recomputes it."""
    tool = _tool("run_spread")
    data = Path(__file__).parent / "data"
    import pandas as pd

    figures = pd.concat([tool.per_run_figures([data / "runs"]), tool.per_run_figures([data / "aa"])])
    measured = tool.kind_spreads(figures)
    assert len(measured) == 20  # ten CPU kinds, full and quick
    for row in measured.itertuples(index=False):
        assert verdicts.SPREAD[(row.kind, bool(row.quick))] == pytest.approx(row.spread, abs=0.0005), row


def test_two_runs_of_one_commit_almost_never_differ(rates) -> None:
    """A/A: every pair of the three full runs and of the twelve quick runs, one run a side: at most 1 % of
    the judged figures are reported changed."""
    counts = [rates.false_positives(folder) for folder in (rates.FULL_RUNS, rates.QUICK_RUNS)]
    changed, judged = sum(c for c, _ in counts), sum(j for _, j in counts)
    assert judged > 2500
    assert changed / judged <= 0.01


def test_a_ten_percent_change_in_one_full_run_is_caught_and_leads(rates) -> None:
    """Power: a many-vs-one figure (run-to-run spread 0.6 %) made 1.10 × slower in one of two full runs is
    reported changed and leads the output in every ordered pair; any figure reported leads."""
    pairs = rates.one_run_pairs(rates.FULL_RUNS)
    trials = rates.power(rates.FULL_RUNS, 1.10, pairs, kinds=("many vs one",))
    assert len(trials) == 12
    assert trials["leads"].mean() >= 0.95
    assert (trials["leads"] == trials["flagged"]).all()


def test_normalized_aa_flags_no_more_than_as_measured(rates) -> None:
    """The ten quiet quick runs with a speed sentinel, every pair one run a side: ``--normalize`` flags no
    more figures than the plain comparison, and at most 1 % of those judged."""
    changed, judged = rates.false_positives(rates.SENTINEL_RUNS, normalize=True)
    plain, _ = rates.false_positives(rates.SENTINEL_RUNS)
    assert judged > 1000 and changed <= plain and changed / judged <= 0.01
