"""Unlike runs are not pooled silently (issue 29, point 4): runs of one machine that differ in a recorded
setting — BLAS threads, a thread variable, numpy or Python version, the governor — are separate groups by
default, pooled only with ``--pool`` and then named above the table; ``--by blas`` tells thread counts
apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.facts import run_settings
from analysis.load import load_runs
from analysis.runs import select_runs

RUNS = Path(__file__).parent / "data" / "runs"


def _storage(tmp_path: Path, change: dict[str, object]) -> Path:
    """The three committed full runs of one machine, the third changed by ``change`` (a setting name →
    its new value: ``blas_threads``, or an environment variable)."""
    storage = tmp_path / "runs"
    storage.mkdir()
    for number, source in enumerate(sorted(RUNS.glob("*.json")), start=1):
        doc = json.loads(source.read_text())
        if number == 3:
            ours = doc["machine_info"]["launchbench"]
            for name, value in change.items():
                if name == "blas_threads":
                    ours["blas"][0]["num_threads"] = value
                else:
                    ours["env"][name] = value
        (storage / source.name).write_text(json.dumps(doc))
    return storage


def test_settings_name_blas_threads_and_set_variables() -> None:
    doc = json.loads(next(RUNS.glob("*.json")).read_text())
    settings = run_settings(doc)
    assert settings["blas"] == "openblas 0.3.31.188.0 (2 threads)"
    assert settings["numpy"] == "2.4.6"
    assert settings["python"] == "3.11.7"
    assert settings["OPENBLAS_CORETYPE"] == "Haswell"
    assert settings["OMP_NUM_THREADS"] == "unset"


@pytest.mark.parametrize(
    ("change", "label"),
    [
        ({"blas_threads": 1}, "blas=openblas 0.3.31.188.0 (1 thread)"),
        ({"OMP_NUM_THREADS": "1"}, "OMP_NUM_THREADS=1"),
    ],
)
def test_runs_that_differ_in_a_setting_are_kept_apart(tmp_path: Path, change: dict, label: str) -> None:
    selection = select_runs(load_runs([_storage(tmp_path, change)], samples=False))
    machines = selection.result.runs["machine_id"]
    assert machines.nunique() == 2
    assert any(machine.endswith(f"[{label}]") for machine in machines)
    assert sorted(machines.value_counts()) == [1, 2]
    assert set(selection.result.frame["machine_id"]) == set(machines)
    assert any("kept apart as 2 groups" in note and "--pool pools them" in note for note in selection.notes)


def test_pool_keeps_them_together_and_says_what_differs(tmp_path: Path) -> None:
    selection = select_runs(load_runs([_storage(tmp_path, {"blas_threads": 1})], samples=False), pool=True)
    assert selection.result.runs["machine_id"].nunique() == 1
    (note,) = [note for note in selection.notes if "pools runs that differ in" in note]
    assert "blas (--pool)" in note
    assert "(2 threads): 2 runs" in note
    assert "(1 thread): 1 run" in note


def test_a_setting_recorded_by_one_run_only_does_not_split(tmp_path: Path) -> None:
    storage = _storage(tmp_path, {})
    first = sorted(storage.glob("*.json"))[0]
    doc = json.loads(first.read_text())
    del doc["machine_info"]["launchbench"]["env"]  # saved before the environment was recorded
    doc["machine_info"]["launchbench"]["governor"] = "performance"  # and recorded by this run only
    first.write_text(json.dumps(doc))
    selection = select_runs(load_runs([storage], samples=False))
    assert selection.result.runs["machine_id"].nunique() == 1


def test_compare_shows_the_split_above_the_table_and_by_blas_splits_threads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = _storage(tmp_path, {"blas_threads": 1})
    assert main(["compare", str(storage), "--no-cache"]) == 0
    out = capsys.readouterr().out
    head = out.split("\n\n")[0]
    assert "runs that differ in blas are kept apart as 2 groups" in out
    assert "[blas=openblas 0.3.31.188.0 (1 thread)]" in out
    assert head  # the note comes before the table
    assert out.index("kept apart as 2 groups") < out.index("t0")
    assert main(["compare", str(storage), "--no-cache", "--pool"]) == 0
    assert "pools runs that differ in blas (--pool)" in capsys.readouterr().out
    assert main(["compare", str(storage), "--no-cache", "--by", "blas"]) == 0
    out = capsys.readouterr().out
    assert "blas=openblas 0.3.31.188.0 (2 threads)" in out
    assert "blas=openblas 0.3.31.188.0 (1 thread)" in out
