"""Every result README.md and docs/results.md quote is regenerated from the committed runs (tests/data/runs)
by ``tools/readme_results.py``: a figure that no longer follows from the runs fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("readme_results", ROOT / "tools" / "readme_results.py")
readme_results = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(readme_results)


@pytest.mark.parametrize("name", readme_results.DOCUMENTS)
def test_the_quoted_results_are_what_the_committed_runs_give(name: str) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    blocks = readme_results._COMMAND.findall(text) + readme_results._TABLE.findall(text)
    assert blocks, f"{name} quotes no generated block"
    assert readme_results.regenerated(text) == text, f"{name}: run python tools/readme_results.py --write"


def test_a_drifted_figure_is_caught(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    table = readme_results.decode_runs_table()
    assert table in text
    first_row = table.splitlines()[2]
    drifted = text.replace(first_row, first_row.replace("×", "x", 1))
    assert readme_results.regenerated(drifted) == text  # the drift is undone, so the test above fails on it
    assert drifted != text


def test_every_committed_run_is_in_the_table_with_its_prediction_and_interval() -> None:
    """Issue 30: each run's step against its prediction from other cases, the interval around the ratio;
    README's one line spans exactly the table's ratios."""
    table = readme_results.decode_runs_table()
    runs = sorted(path.name for path in readme_results.RUNS.glob("*.json"))
    assert len(runs) >= 3
    for run in runs:
        assert f"`{run}`" in table
    ratios = []
    for row in table.splitlines()[2:]:
        cell = row.split("|")[5].strip()  # "1.15× [1.08–1.23]"
        ratio, low, high = (
            float(x) for x in cell.replace("×", "").replace("[", "").rstrip("]").replace("–", " ").split()
        )
        assert low < ratio < high, row
        ratios.append(ratio)
    today = [row.measured_over_predicted for _, row in readme_results._cpu_steps((readme_results.TODAY,))]
    assert len(today) >= 6 and all(abs(ratio - 1) <= 0.10 for ratio in today)  # issue 30: within ±10 %
    line = readme_results.decode_summary_line()
    assert f"measured {min(today):.2f}×–{max(today):.2f}× its prediction" in line
