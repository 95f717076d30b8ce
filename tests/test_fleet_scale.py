"""What makes ``compare`` of a fleet of runs fast and small gives what the plain ways give: the frame with its
text as categories (``load_runs(categorical=True)``, parsed or read from the cache) holds the values of the
plain frame, and the comparison of it is the plain one's, table for table; a group's label mapped per
category is the plain ``map``'s; and a stop while workers load files waits for one small batch per worker,
not for a quarter of the files."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import load
from analysis.compare import figure_table, group_runs, mapped, point_table
from analysis.facts import BY_MACHINE, BY_RUN
from analysis.figures import write_figures
from analysis.fits import fit_all, uses_samples
from analysis.runs import select_runs

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).parent.parent
#: Modification time of the copies: older than the cache's ``RACY_S``, so that it keeps them.
OLD = time.time() - 3600


def _storage(folder: Path) -> Path:
    """Every committed run (three machines, a quick run, runs with and without a run record), copied."""
    storage = folder / "storage"
    for index, source in enumerate(sorted(DATA.rglob("*.json"))):
        target = storage / f"{index:04d}_{source.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
        os.utime(target, (OLD, OLD))
    return storage


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its categories as the texts they stand for, as the plain load holds them."""
    with pd.option_context("mode.string_storage", "python"):
        return frame.astype(
            {
                column: pd.StringDtype("python", na_value=np.nan)
                for column in frame.columns
                if isinstance(frame[column].dtype, pd.CategoricalDtype)
            }
        )


def _same_frames(plain: pd.DataFrame, categorical: pd.DataFrame) -> None:
    texts = [column for column in categorical if isinstance(categorical[column].dtype, pd.CategoricalDtype)]
    assert {"source", "machine_id", "case", "fullname"} <= set(texts)
    for column in texts:
        assert list(categorical[column].cat.categories) == sorted(categorical[column].cat.categories)
    pd.testing.assert_frame_equal(plain.drop(columns="data"), _plain(categorical).drop(columns="data"))
    for want, have in zip(plain["data"], categorical["data"], strict=True):
        assert (want is None and have is None) or np.array_equal(want, have)


@pytest.mark.parametrize("samples", [True, uses_samples], ids=["all", "picked"])
def test_the_categorical_frame_holds_the_plain_values_parsed_and_cached(
    tmp_path: Path, samples: load.Samples
) -> None:
    pytest.importorskip("pyarrow")
    storage = _storage(tmp_path)
    plain = load.load_runs([storage], samples=samples)
    cache = tmp_path / "cache"
    for _ in ("parsed, cache cold", "read from the cache"):
        got = load.load_runs([storage], samples=samples, cache=cache, categorical=True)
        _same_frames(plain.frame, got.frame)
        pd.testing.assert_frame_equal(plain.runs, got.runs)
        assert got.problems == plain.problems
        assert got.files_used == plain.files_used
    _same_frames(plain.frame, load.load_runs([storage], samples=samples, categorical=True).frame)
    # The plain load from the cache is the plain load (texts back as Python strings, not categories).
    pd.testing.assert_frame_equal(
        plain.frame.drop(columns="data"),
        load.load_runs([storage], samples, cache=cache).frame.drop(columns="data"),
    )


@pytest.mark.parametrize("by", [BY_MACHINE, BY_RUN])
def test_compare_of_the_categorical_frame_is_the_plain_one(tmp_path: Path, by: str) -> None:
    storage = _storage(tmp_path)
    tables = []
    for categorical in (False, True):
        loaded = load.load_runs([storage], samples=uses_samples, categorical=categorical)
        selection = select_runs(loaded, include_quick=True)
        groups = group_runs(selection.result.runs, by, None)
        frame = groups.relabel(selection.result.frame)
        assert isinstance(frame["machine_id"].dtype, pd.CategoricalDtype) is categorical
        figures = figure_table(frame, fit_all(frame, predictions=False), groups.baseline.label)
        points = point_table(frame, groups.baseline.label)
        tables.append((figures, points, selection.left_out, selection.notes))
    (figures, points, left_out, notes), (cat_figures, cat_points, cat_left_out, cat_notes) = tables
    assert len(figures) > 20 and figures["mark"].isin(["changed", "same", "inconclusive"]).any()
    pd.testing.assert_frame_equal(figures, cat_figures)
    pd.testing.assert_frame_equal(points, _plain(cat_points), check_dtype=False)
    assert (left_out, notes) == (cat_left_out, cat_notes)


def test_no_kept_result_depends_on_a_category_no_row_holds(tmp_path: Path) -> None:
    """The memo keys a categorical column by its values, not by its list of categories (a new machine's run
    must not refit every other machine), so no fit, table or figure may depend on a category no row holds:
    the frame of the runs selected (the quick run left out, its texts still categories), with one more
    unused category in every text column, gives what the same frame trimmed of unused categories gives."""
    storage = _storage(tmp_path)
    selection = select_runs(load.load_runs([storage], samples=uses_samples, categorical=True))
    frame = selection.result.frame
    texts = [column for column in frame if isinstance(frame[column].dtype, pd.CategoricalDtype)]
    trimmed = frame.assign(**{column: frame[column].cat.remove_unused_categories() for column in texts})
    padded = trimmed.assign(**{column: trimmed[column].cat.add_categories(["~unused"]) for column in texts})
    assert any(len(frame[c].cat.categories) > len(trimmed[c].cat.categories) for c in texts)
    drawn = []
    for name, each in (("trimmed", trimmed), ("padded", padded)):
        fits = fit_all(each)
        table = figure_table(each, fits, None)
        paths = write_figures(each, fits, table, tmp_path / name, formats=("png",), workers=1)
        drawn.append((table, point_table(each, None), {path.name: path.read_bytes() for path in paths}))
    (table, points, files), (padded_table, padded_points, padded_files) = drawn
    assert len(table) > 20 and len(files) >= 4
    pd.testing.assert_frame_equal(_plain(table), _plain(padded_table))
    pd.testing.assert_frame_equal(_plain(points), _plain(padded_points))
    assert files == padded_files


def test_a_label_mapped_per_category_is_the_plain_map() -> None:
    values = pd.Series(["b", "a", np.nan, "c", "a"], dtype=object)
    mapping = {"a": "x", "b": "x", "c": "w"}
    got = mapped(values.astype("category"), mapping)
    assert isinstance(got.dtype, pd.CategoricalDtype)
    assert list(got.cat.categories) == ["w", "x"]
    assert got.astype(object).tolist()[:2] == ["x", "x"]
    pd.testing.assert_series_equal(got.astype(object), values.map(mapping).astype(object))
    # A value the mapping lacks maps to a missing label, as ``map`` has it.
    partial = mapped(values.astype("category"), {"a": "x"})
    pd.testing.assert_series_equal(partial.astype(object), values.map({"a": "x"}).astype(object))


def test_batches_of_a_fleet_are_small() -> None:
    """100,000 files split four ways per CPU made batches of 12,500 files (a minute of parsing each)."""
    files = [Path(f"{index}.json") for index in range(4 * 8 * load.MAX_BATCH_FILES + 7)]
    sizes = load.map_batches(len, files)
    assert sum(sizes) == len(files)
    if (os.cpu_count() or 1) >= 2 and len(os.sched_getaffinity(0)) >= 2:
        assert len(sizes) > 1
        assert max(sizes) <= load.MAX_BATCH_FILES


_STOPPED = textwrap.dedent(
    """
    import signal, sys, time
    from pathlib import Path
    from analysis.load import map_batches

    log = Path(sys.argv[1])

    def work(paths):
        for path in paths:
            # 25 ms a file: the command's reaction to the signal may be late by a few tenths of a second
            # on a loaded machine, and the bound is in files (10 ms a file failed once in a full suite).
            time.sleep(0.025)
            with log.open("a") as file:
                file.write(f"{path}\\n")
        return len(paths)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        files = [Path(str(index)) for index in range(4000)]
        map_batches(work, files, meanwhile=lambda: print("started", flush=True))
    except KeyboardInterrupt:
        print("stopped", flush=True)
    """
)


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM and fork-started workers are POSIX's")
def test_a_stop_while_loading_waits_for_one_small_batch_per_worker(tmp_path: Path) -> None:
    """Files done after SIGTERM: at most the batch in each worker's hand and the one queued behind it."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one usable CPU: files are read in this process, in one batch")
    log = tmp_path / "done.txt"
    log.touch()
    script = tmp_path / "stopped.py"
    script.write_text(_STOPPED, encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, str(script), str(log)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "started"
    while len(log.read_text().splitlines()) < 10:  # the workers are parsing
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    at_stop = len(log.read_text().splitlines())
    out, _ = process.communicate(timeout=120)
    assert out.strip() == "stopped"
    done = len(log.read_text().splitlines())
    workers = min(len(os.sched_getaffinity(0)), 8)
    assert done < 4000
    assert done - at_stop <= 3 * workers * load.MAX_BATCH_FILES


def _scipy_replicates(
    sizes: np.ndarray, seconds: np.ndarray, n_boot: int, seed: int, min_sizes: int, batch: int
) -> np.ndarray:
    """The replicates ``scipy.stats.bootstrap`` gives for the points' resamples (the way
    ``analysis.fit._bootstrap_points`` called it before it drew them itself)."""
    import warnings

    import scipy.stats

    from analysis import fit

    def fitted(index: np.ndarray, axis: int = -1) -> np.ndarray:
        rows = np.atleast_2d(index)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.array(fit._overhead_coefficients(sizes[rows], seconds[rows]), dtype=float)
        values[~fit._enough_sizes(rows, sizes, min_sizes)] = np.nan
        return values.T

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.stats.DegenerateDataWarning)
        result = scipy.stats.bootstrap(
            (np.arange(sizes.size),),
            fitted,
            n_resamples=n_boot,
            batch=batch,
            vectorized=True,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    replicates = np.asarray(result.bootstrap_distribution, dtype=float).reshape(-1, n_boot).T
    return replicates[~np.isnan(replicates).any(axis=1)]


@pytest.mark.parametrize(
    ("sizes", "min_sizes"),
    [
        ([1e3, 1e3, 1e4], 2),
        ([1e3, 1e4, 1e5, 1e6] * 30, 2),
        ([1e3, 1e4, 1e5, 1e6, 1e3], 3),
        ([1e3, 1e4] * 5, 1),
    ],
)
def test_the_points_bootstrap_draws_scipy_s_replicates_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch, sizes: list[float], min_sizes: int
) -> None:
    from analysis import fit

    monkeypatch.setattr(fit, "_POINTS_PER_BATCH", 40)  # several batches, the last one short
    n = np.array(sizes)
    t = 2e-6 + n * 1e-9 * (1 + 0.1 * np.random.default_rng(3).random(n.size))
    got = fit._bootstrap_points(n, t, fit._overhead_coefficients, 1000, 11, min_sizes)
    want = _scipy_replicates(n, t, 1000, 11, min_sizes, max(1, 40 // n.size))
    assert 0 < len(got) <= 1000
    np.testing.assert_array_equal(got, want)
