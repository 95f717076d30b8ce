"""analysis.steady (issue 34, point 4): each case's rounds classified flat, warm-up, slowdown or no steady
state by their change points; synthetic series of each class, and the counts over the committed runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.load import load_runs
from analysis.steady import (
    FLAT,
    NO_STEADY_STATE,
    SLOWDOWN,
    WARM_UP,
    classify,
    steadiness_line,
    steadiness_table,
)

RUNS = Path(__file__).parent / "data" / "runs"


def _noisy(level: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` rounds at ``level`` s with 2 % log-normal noise, as a quiet machine's."""
    return level * np.exp(rng.normal(0, 0.02, n))


@pytest.mark.parametrize("seed", range(5))
def test_each_class_is_told_from_synthetic_rounds(seed: int) -> None:
    rng = np.random.default_rng(seed)
    assert classify(_noisy(1e-6, 300, rng)).kind == FLAT
    warm = classify(np.r_[_noisy(2e-6, 20, rng), _noisy(1e-6, 280, rng)])
    assert warm.kind == WARM_UP and abs(warm.warm_up_rounds - 20) <= 2
    assert classify(np.r_[_noisy(1e-6, 150, rng), _noisy(1.3e-6, 150, rng)]).kind == SLOWDOWN
    bumpy = np.r_[_noisy(1e-6, 100, rng), _noisy(1.5e-6, 100, rng), _noisy(1e-6, 100, rng)]
    assert classify(bumpy).kind == NO_STEADY_STATE


def test_isolated_slow_rounds_and_small_steps_leave_a_series_flat() -> None:
    rng = np.random.default_rng(7)
    spiky = _noisy(1e-6, 500, rng)
    spiky[rng.choice(500, 20, replace=False)] *= 3  # another process's time slice, now and then
    assert classify(spiky).kind == FLAT
    step = np.r_[_noisy(1e-6, 250, rng), _noisy(1.02e-6, 250, rng)]  # under MIN_SHIFT
    assert classify(step).kind == FLAT
    assert classify(np.array([1e-6, 2e-6, 1e-6])) is None  # too few rounds to say
    assert classify(np.array([1e-6] * 5 + [0.0] * 5)) is None


def test_the_committed_runs_are_counted_by_class_in_one_line() -> None:
    table = steadiness_table(load_runs([RUNS], samples=True).frame)
    assert len(table) > 300 and set(table["kind"]) <= {FLAT, WARM_UP, SLOWDOWN, NO_STEADY_STATE}
    counts = table["kind"].value_counts()
    assert counts[FLAT] > len(table) / 2  # quiet runs: most cases settle
    line = steadiness_line(table)
    assert line.startswith(f"Steady state of {len(table)} case measurements")
    assert f"{counts[FLAT]} flat" in line and f"{counts.get(NO_STEADY_STATE, 0)} no steady state" in line


def test_compare_names_a_figure_whose_rounds_never_settled() -> None:
    """Issue 34: "no steady state" is an instability wherever the case is compared (``unstable_text``)."""
    import pandas as pd

    from analysis.compare import unstable_text

    rng = np.random.default_rng(3)
    bumpy = np.r_[_noisy(1e-6, 100, rng), _noisy(1.5e-6, 100, rng), _noisy(1e-6, 100, rng)]
    flat = _noisy(1e-6, 300, rng)
    rows = pd.DataFrame(
        {
            "source": ["a", "b"],
            "machine_id": "m",
            "min": [bumpy.min(), flat.min()],
            "median": [np.median(bumpy), np.median(flat)],
            "iqr": [0.0, 0.0],
            "data": [bumpy, flat],
        }
    )
    assert unstable_text(rows) == "no steady state in 1 of 2 run(s)"
    assert unstable_text(rows.iloc[1:]) == ""
