"""analysis.steady (issue 34, point 4): each case's rounds classified flat, warm-up, slowdown or no steady
state by their change points; synthetic series of each class, and the counts over the committed runs."""

from __future__ import annotations

import copy
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pytest_benchmark.stats import Stats

from analysis import cache as run_cache
from analysis import load
from analysis.__main__ import main
from analysis.fits import fit_all
from analysis.load import STAT_COLUMNS, load_runs
from analysis.steady import (
    FLAT,
    NO_STEADY_STATE,
    SLOWDOWN,
    STEADY_TAIL,
    UNCLASSIFIED,
    WARM_UP,
    classify,
    round_statistics,
    steadiness_line,
    steadiness_table,
    steady_rounds,
    unclassified_count,
)
from analysis.summary import summary_lines

DATA = Path(__file__).parent / "data"
RUNS = DATA / "runs"
XEON_RUN = DATA / "runs-xeon" / "xeon-2core-full-1.json"
#: The case given a warm-up in the synthetic runs: a measured figure that compare judges (an op's cost).
WARMED = "test_numpy_op[np.dot(1d,1d)]"


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


def test_a_level_reached_only_in_the_last_quarter_is_no_steady_state() -> None:
    """A series that steps down in its last rounds has not shown that its new level lasts (``STEADY_TAIL``):
    no steady state, and nothing left out, rather than a "warm-up" of nine rounds in ten."""
    rng = np.random.default_rng(5)
    late = classify(np.r_[_noisy(1.2e-6, 180, rng), _noisy(1e-6, 20, rng)])
    assert late.kind == NO_STEADY_STATE and late.warm_up_rounds == 0
    early = classify(np.r_[_noisy(1.2e-6, 140, rng), _noisy(1e-6, 60, rng)])
    assert early.kind == WARM_UP and abs(early.warm_up_rounds - 140) <= 2
    assert classify(np.r_[_noisy(1e-6, 180, rng), _noisy(1.2e-6, 20, rng)]).kind == NO_STEADY_STATE


def test_the_committed_runs_are_counted_by_class_in_one_line() -> None:
    frame = load_runs([RUNS], samples=True).frame
    table = steadiness_table(frame)
    assert len(table) > 300 and set(table["kind"]) <= {FLAT, WARM_UP, SLOWDOWN, NO_STEADY_STATE}
    counts = table["kind"].value_counts()
    assert counts[FLAT] > len(table) / 2  # quiet runs: most cases settle
    line = steadiness_line(table)
    assert line.startswith(f"Steady state of {len(table)} case measurements")
    assert f"{counts[FLAT]} flat" in line and f"{counts.get(NO_STEADY_STATE, 0)} no steady state" in line
    warm = table[table["kind"] == WARM_UP]
    assert f"warm-ups left out of their figures: {warm['warm_up_rounds'].sum()} rounds" in line
    # every case with its rounds is classified once, at loading; the few left (< 6 rounds) are counted
    assert len(table) + unclassified_count(frame) == len(frame)
    assert f"; {unclassified_count(frame)} not classified" in steadiness_line(
        table, unclassified_count(frame)
    )


def test_compare_names_a_figure_whose_rounds_never_settled() -> None:
    """Issue 34: "no steady state" is an instability wherever the case is compared (``unstable_text``),
    read from the class given at loading."""
    from analysis.compare import unstable_text

    rng = np.random.default_rng(3)
    flat = _noisy(1e-6, 300, rng)
    rows = pd.DataFrame(
        {
            "source": ["a", "b"],
            "machine_id": "m",
            "min": [flat.min()] * 2,
            "median": [np.median(flat)] * 2,
            "iqr": [0.0, 0.0],
            "steady": [NO_STEADY_STATE, FLAT],
            "warm_up_rounds": [0, 0],
        }
    )
    assert unstable_text(rows) == "no steady state in 1 of 2 run(s)"
    assert unstable_text(rows.iloc[1:]) == ""


@pytest.mark.parametrize("count", [*range(1, 42), 100, 1001])
def test_round_statistics_are_pytest_benchmarks(count: int) -> None:
    """Each statistic recomputed from the rounds kept is the one pytest-benchmark's ``Stats`` gives (its
    quartile methods for odd and even counts, n − 1 standard deviation, ops = rounds / total)."""
    rounds = np.random.default_rng(count).lognormal(-13, 0.3, count)
    stats = Stats()
    for value in rounds:
        stats.update(float(value))
    ours = round_statistics(rounds)
    assert ours["rounds"] == stats.rounds == count
    for key in ("min", "max", "mean", "stddev", "median", "q1", "q3", "iqr", "ops"):
        assert ours[key] == pytest.approx(getattr(stats, key), rel=1e-12, abs=1e-24), key


def _restat(bench: dict, rounds: np.ndarray) -> None:
    """``bench``'s samples and statistics as pytest-benchmark saves them for ``rounds`` (s per iteration)."""
    stats = Stats()
    for value in rounds:
        stats.update(float(value))
    bench["stats"].update({key: getattr(stats, key) for key in Stats.fields}, data=rounds.tolist())


def _warmed_runs(folder: Path) -> list[dict]:
    """Two copies of a real full run in ``folder`` whose ``WARMED`` case ran 5 slow rounds (2×) then 30
    steady ones, and a third copy saved without raw samples; returns the three documents."""
    doc = json.loads(XEON_RUN.read_text(encoding="utf-8"))
    rng = np.random.default_rng(11)
    docs = []
    for number in (1, 2, 3):
        copy_doc = copy.deepcopy(doc)
        copy_doc["datetime"] = f"2026-12-0{number}T10:00:00+00:00"
        bench = next(b for b in copy_doc["benchmarks"] if b["name"] == WARMED)
        _restat(bench, np.r_[_noisy(6e-7, 5, rng), _noisy(3e-7, 30, rng)])
        if number == 3:
            for each in copy_doc["benchmarks"]:
                each["stats"].pop("data")
        (folder / f"run-{number}.json").write_text(json.dumps(copy_doc), encoding="utf-8")
        docs.append(copy_doc)
    return docs


def test_a_warm_up_is_left_out_of_its_case_figures_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 34, point 4: a case with 5 slow rounds then 30 steady ones is loaded with the statistics of
    the 30 (pytest-benchmark's definitions), its 5 rounds counted in the summary and in compare; a flat case
    and a run saved without its samples keep the saved statistics."""
    docs = _warmed_runs(tmp_path)
    saved = [{bench["name"]: bench["stats"] for bench in doc["benchmarks"]} for doc in docs]
    warmed = saved[0][WARMED]
    frame = load_runs([tmp_path], samples=True).frame
    rows = frame[(frame["name"] == WARMED) & frame["data"].notna()]
    assert len(rows) == 2
    row = rows[rows["source"].astype(str).str.endswith("run-1.json")].iloc[0]
    assert row["steady"] == WARM_UP and row["warm_up_rounds"] == 5
    steady = np.asarray(warmed["data"][5:])
    assert row["data"].tolist() == steady.tolist() and row["rounds"] == 30
    expected = round_statistics(steady)
    for key in ("min", "max", "mean", "stddev", "median", "q1", "q3", "iqr", "ops"):
        assert row[key] == pytest.approx(expected[key], rel=1e-12), key
    assert row["median"] < warmed["median"] and row["iqr"] < warmed["iqr"]  # the slow rounds' pull gone
    assert row["min"] == warmed["min"]  # the fastest round was a steady one
    # a flat case of the same run: the saved statistics as they are
    first = frame[frame["source"].astype(str).str.endswith("run-1.json")]
    flat = first[first["steady"] == FLAT].iloc[0]
    assert len(flat["data"]) == saved[0][flat["name"]]["rounds"] and flat["warm_up_rounds"] == 0
    for key in STAT_COLUMNS:
        assert flat[key] == saved[0][flat["name"]][key], key
    # the run saved without samples: nothing to classify, the saved statistics over every round
    bare = frame[frame["source"].astype(str).str.endswith("run-3.json")]
    assert bare["steady"].isna().all() and bare["warm_up_rounds"].isna().all()
    bare_warmed = bare[bare["name"] == WARMED].iloc[0]
    for key in STAT_COLUMNS:
        assert bare_warmed[key] == saved[2][WARMED][key], key

    lines = "\n".join(summary_lines(first))
    assert "warm-ups left out of their figures:" in lines and f"{WARMED} 5" in lines
    assert main(["compare", str(tmp_path), "--by", "run", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "Warm-ups left out: " in out
    assert "op cost: np.dot(1d, 1d): 5 warm-up rounds left out in 1 of 1 run(s)" in out
    assert f"; {unclassified_count(frame)} {UNCLASSIFIED}" in out
    assert unclassified_count(frame) == len(bare) + 2 * (first["steady"].isna()).sum()


def test_without_samples_the_figures_are_the_saved_ones_and_said_so() -> None:
    """``--no-samples`` (or a run saved without them): nothing classified, pytest-benchmark's statistics."""
    with_rounds = load_runs([DATA / "runs-xeon"], samples=True).frame
    without = load_runs([DATA / "runs-xeon"], samples=False).frame
    assert without["steady"].isna().all() and unclassified_count(without) == len(without)
    warm = (with_rounds["steady"] == WARM_UP).to_numpy()
    assert warm.sum() > 0
    for key in ("median", "iqr"):
        assert (with_rounds[key].to_numpy()[warm] != without[key].to_numpy()[warm]).all()
        assert (with_rounds[key].to_numpy()[~warm] == without[key].to_numpy()[~warm]).all()
    # the fastest round changes only where it lay in the warm-up, and then only upwards
    moved = with_rounds["min"].to_numpy() != without["min"].to_numpy()
    assert (
        not (moved & ~warm).any()
        and (with_rounds["min"].to_numpy()[moved] > without["min"].to_numpy()[moved]).all()
    )
    unclassified = with_rounds["steady"].isna().to_numpy()
    assert unclassified.any() and np.isnan(with_rounds["warm_up_rounds"].to_numpy()[unclassified]).all()


def _row(rounds: np.ndarray) -> dict[str, object]:
    """A parsed case's row as ``analysis.load`` hands it to ``steady_rounds``: pytest-benchmark's statistics
    of ``rounds`` (one iteration each) and the rounds."""
    stats = Stats()
    for value in rounds:
        stats.update(float(value))
    row: dict[str, object] = {key: getattr(stats, key) for key in STAT_COLUMNS if key != "iterations"}
    return {**row, "iterations": 1, "data": np.asarray(rounds, dtype=float)}


@pytest.mark.parametrize("seed", range(3))
def test_only_a_warm_up_loses_rounds_and_its_statistics_are_those_of_the_rest(seed: int) -> None:
    """``steady_rounds`` on a series of each class: a warm-up's first rounds leave ``data`` and every
    statistic (recomputed from the rounds kept); the other classes keep what pytest-benchmark saved."""
    rng = np.random.default_rng(seed)
    series = {
        FLAT: _noisy(1e-6, 200, rng),
        WARM_UP: np.r_[_noisy(3e-6, 12, rng), _noisy(1e-6, 188, rng)],
        SLOWDOWN: np.r_[_noisy(1e-6, 100, rng), _noisy(1.3e-6, 100, rng)],
        NO_STEADY_STATE: np.r_[_noisy(1e-6, 70, rng), _noisy(1.5e-6, 60, rng), _noisy(1e-6, 70, rng)],
    }
    for kind, rounds in series.items():
        row = _row(rounds)
        saved = dict(row)
        steady_rounds(row)
        assert row["steady"] == kind, kind
        if kind != WARM_UP:
            assert row["warm_up_rounds"] == 0 and row["data"] is saved["data"]
            assert all(row[key] == saved[key] for key in STAT_COLUMNS), kind
            continue
        skipped = int(row["warm_up_rounds"])
        assert abs(skipped - 12) <= 2
        kept = rounds[skipped:]
        assert np.array_equal(row["data"], kept) and row["rounds"] == 200 - skipped
        assert row["min"] == kept.min() and row["max"] == kept.max() and row["median"] == np.median(kept)
        assert row["mean"] == pytest.approx(kept.mean(), rel=1e-12)
        assert row["stddev"] == pytest.approx(kept.std(ddof=1), rel=1e-12)
        assert row["max"] < saved["max"] / 2 and row["mean"] < saved["mean"]  # the slow rounds are gone
        assert row["iterations"] == 1
    few = _row(series[WARM_UP][:5])  # a quick case's 5 rounds: too few to say, kept as saved
    saved = dict(few)
    steady_rounds(few)
    assert np.isnan(few["steady"]) and np.isnan(few["warm_up_rounds"])
    assert all(few[key] == saved[key] for key in STAT_COLUMNS)


def test_a_committed_run_by_class_and_its_warm_ups_figures_from_their_steady_rounds() -> None:
    """The committed ``epyc-2core-full-1.json``: its cases counted by class (as docs/analysis.md gives
    them), and each warm-up case's min and median those of the rounds after its warm-up, as saved."""
    path = RUNS / "epyc-2core-full-1.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    saved = {bench["fullname"]: bench["stats"] for bench in doc["benchmarks"]}
    frame = load_runs([path], samples=True).frame
    assert frame["steady"].value_counts().to_dict() == {
        FLAT: 98,
        WARM_UP: 10,
        SLOWDOWN: 2,
        NO_STEADY_STATE: 15,
    }
    assert unclassified_count(frame) == 1
    warm = frame[frame["steady"] == WARM_UP]
    assert warm["warm_up_rounds"].sum() == 37
    # the rounds kept hold at least the last quarter (``STEADY_TAIL``): a later level is no steady state
    assert (warm["rounds"] >= STEADY_TAIL * (warm["rounds"] + warm["warm_up_rounds"])).all()
    for row in warm.itertuples():
        rounds = np.asarray(saved[row.fullname]["data"])
        kept = rounds[int(row.warm_up_rounds) :]
        assert row.rounds == kept.size == saved[row.fullname]["rounds"] - row.warm_up_rounds
        assert row.min == kept.min() and row.median == np.median(kept), row.name
        assert np.array_equal(row.data, kept)
    moved = [row.median != saved[row.fullname]["median"] for row in warm.itertuples()]
    assert sum(moved) >= len(warm) - 1  # a warm-up's rounds pulled the median their way


def test_a_quick_runs_five_rounds_are_left_unclassified_and_said_so() -> None:
    """A quick run times most cases in 5 rounds (3 for some): too few to find a level in, so their figures
    stay pytest-benchmark's over every round, and the summary says how many."""
    path = DATA / "sentinel" / "quiet-quick-1.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    saved = {bench["fullname"]: bench["stats"] for bench in doc["benchmarks"]}
    frame = load_runs([path], samples=True).frame
    few = frame[frame["rounds"] <= 5]
    assert len(few) >= 0.9 * len(frame)
    assert few["steady"].isna().all() and few["warm_up_rounds"].isna().all()
    for row in few.itertuples():
        assert row.median == saved[row.fullname]["median"] and row.rounds == saved[row.fullname]["rounds"]
    assert unclassified_count(frame) == len(few)
    lines = summary_lines(frame)
    assert any(line.endswith(f"; {len(few)} {UNCLASSIFIED}") for line in lines), lines


def test_a_warm_up_leaves_the_decode_steps_probe_rounds_paired_with_its_own(tmp_path: Path) -> None:
    """The CPU decode step saves one probe round before each step round (``probe_s``): where the step's
    first rounds are a warm-up, the probe's same first rounds go too, so probe round i still precedes step
    round i, and the decode table pairs the rounds kept."""
    doc = json.loads(XEON_RUN.read_text(encoding="utf-8"))
    name = "test_cpu_decode_step[fused]"
    bench = next(bench for bench in doc["benchmarks"] if bench["name"] == name)
    steps = np.asarray(bench["stats"]["data"])
    probe = bench["extra_info"]["probe_s"]
    assert len(probe) == steps.size == 60
    slow = steps.copy()
    slow[:10] *= 2  # a step that starts at half speed for 10 rounds
    _restat(bench, slow)
    (tmp_path / "run.json").write_text(json.dumps(doc), encoding="utf-8")
    frame = load_runs([tmp_path], samples=True).frame
    row = frame[frame["name"] == name].iloc[0]
    assert row["steady"] == WARM_UP and row["warm_up_rounds"] == 10
    assert row["probe_s"] == tuple(probe[10:]) and len(row["probe_s"]) == len(row["data"]) == 50
    assert np.array_equal(row["data"], steps[10:])
    decode = fit_all(frame).decode_steps
    fused = decode[(decode["device"] == "cpu") & (decode["plan"] == "fused")].iloc[0]
    assert fused["rounds_paired"] == 50 and fused["probe_rounds"] == 50


def test_the_cache_gives_the_frame_a_fresh_parse_gives_and_steady_is_in_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rounds are classified and a warm-up left out before the parsed-run cache: a load from it is the
    fresh parse's frame, warm-ups and all; and an edit of ``analysis.steady`` starts the cache anew."""
    storage = tmp_path / "runs"
    storage.mkdir()
    _warmed_runs(storage)
    shutil.copy(RUNS / "epyc-2core-full-1.json", storage / "epyc.json")
    old = time.time() - 3600  # older than the cache's RACY_S: kept
    for path in storage.iterdir():
        os.utime(path, (old, old))
    fresh = load_runs([storage], samples=True)
    assert (fresh.frame["steady"] == WARM_UP).sum() > 3
    folder = tmp_path / "cache"
    load_runs([storage], samples=True, cache=folder)
    parsed: list[Path] = []
    read_file = load._read_file
    monkeypatch.setattr(load, "_read_file", lambda path, *args: parsed.append(path) or read_file(path, *args))
    cached = load_runs([storage], samples=True, cache=folder)
    assert parsed == []  # every file from the cache
    pd.testing.assert_frame_equal(fresh.frame.drop(columns="data"), cached.frame.drop(columns="data"))
    for want, have in zip(fresh.frame["data"], cached.frame["data"], strict=True):
        assert (want is None and have is None) or np.array_equal(want, have)
    # a run from the cache beside one parsed now whose cases have no class (saved without their rounds)
    bare = json.loads((RUNS / "epyc-2core-full-2.json").read_text(encoding="utf-8"))
    for bench in bare["benchmarks"]:
        bench["stats"].pop("data")
    (storage / "bare.json").write_text(json.dumps(bare), encoding="utf-8")
    os.utime(storage / "bare.json", (old, old))
    mixed = load_runs([storage], samples=True, cache=folder)
    assert parsed == [storage / "bare.json"]
    fresh = load_runs([storage], samples=True)
    assert fresh.frame["steady"].isna().sum() > len(bare["benchmarks"]) - 1
    pd.testing.assert_frame_equal(fresh.frame.drop(columns="data"), mixed.frame.drop(columns="data"))
    variant = run_cache._variant(True, ())
    source = run_cache._source
    monkeypatch.setattr(
        run_cache, "_source", lambda module: source(module) + b"#" * (module == "analysis.steady")
    )
    assert run_cache._variant(True, ()) != variant
