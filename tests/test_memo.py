"""The results kept by the digest of their rows (``analysis.memo``, issue 22): a second report, compare or
plot of the same runs computes no fit, table or figure again and writes the same bytes; any change of a
row — one value, one sample, a new run — is computed anew (a new run refits its own machine only); what
is served equals what is computed without the memo; a damaged, foreign or untrusted result costs a
computation, never a wrong result; the folder is trimmed to its limit.

The runs are ``tools/fanout_runs.py`` copies of a committed real quick run (perturbed timings, made up,
never saved as data) over two machines, and the committed real full run with its raw samples.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest

from analysis import figures, fits, memo
from analysis.__main__ import main
from analysis.compare import compared_table, figure_table
from analysis.fits import fit_all, uses_samples
from analysis.load import load_runs
from analysis.memo import Memo, column_hashes
from analysis.runs import select_runs
from tests.test_plots_collisions import DATA, _fanout

QUICK_RUN = DATA / "cpu-2core-quick.json"
FULL_RUN = DATA / "cpu-2core-full.json"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _fanout(QUICK_RUN, tmp_path_factory.mktemp("fleet") / "fleet", machines=2, copies=4)


def _frame(paths: list[Path], samples: object = False) -> pd.DataFrame:
    return select_runs(load_runs(paths, samples=samples), include_quick=True).result.frame


def _files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def _report(fleet: Path, out: Path, cache: Path | None) -> dict[str, bytes]:
    cache_args = ["--cache", str(cache)] if cache is not None else ["--no-cache"]
    command = ["report", str(fleet), "--include-quick", "--no-samples", "--out", str(out), *cache_args]
    assert main(command) == 0
    files = _files(out)
    files.pop(".launchbench-manifest.json", None)  # the output folder's own bookkeeping (times written)
    return files


def _refuse(*_: object, **__: object) -> None:
    raise AssertionError("computed again: the result was kept")


@pytest.fixture(scope="module")
def first_report(fleet: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bytes], Path]:
    """The fleet's report made with an empty memo (every fit, table and figure computed), and the cache
    folder it filled: made once for the tests that start from it. A test that only reads the folder uses
    it as it is; one that adds results to it works on a copy."""
    folder = tmp_path_factory.mktemp("first-report")
    return _report(fleet, folder / "out", folder / "cache"), folder / "cache"


def test_a_second_report_computes_nothing_and_writes_the_same_bytes(
    fleet: Path, first_report: tuple[dict[str, bytes], Path], tmp_path: Path
) -> None:
    first, cache = first_report
    assert any(name.endswith(".png") for name in first)
    with (
        mock.patch.object(fits, "fit_host", _refuse),
        mock.patch.object(fits, "decode_table", _refuse),
        mock.patch.object(figures, "_draw", _refuse),
        mock.patch("analysis.compare.figure_table", _refuse),
    ):
        second = _report(fleet, tmp_path / "second", cache)
    assert second == first
    assert _report(fleet, tmp_path / "bare", None) == first  # --no-cache: computed, the same bytes


def test_a_changed_value_is_computed_anew(
    fleet: Path, first_report: tuple[dict[str, bytes], Path], tmp_path: Path
) -> None:
    changed = tmp_path / "changed"
    shutil.copytree(fleet, changed)
    path = sorted(changed.rglob("*.json"))[0]
    run = json.loads(path.read_text(encoding="utf-8"))
    bench = next(b for b in run["benchmarks"] if b["extra_info"].get("case") == "ufunc_size")
    bench["stats"]["min"] *= 3.0  # one number of one run
    path.write_text(json.dumps(run), encoding="utf-8")
    before, kept = first_report
    cache = tmp_path / "cache"
    shutil.copytree(kept, cache)  # the memo holds the unchanged fleet's results; this test adds to it
    after = _report(changed, tmp_path / "after", cache)
    assert after != before
    assert after == _report(changed, tmp_path / "bare", None)


def test_a_new_run_refits_its_own_machine_only(fleet: Path, tmp_path: Path) -> None:
    frame = _frame([fleet])
    store = Memo(tmp_path / "cache")
    fit_all(frame, memo=store)
    machines = sorted(frame["machine_id"].unique())
    assert len(machines) == 2
    # One more run of the second machine: its rows change, the first machine's do not.
    extra = frame[frame["machine_id"] == machines[1]].copy()
    extra["source"] = "new-run.json"
    grown = pd.concat([frame, extra], ignore_index=True)
    log = tmp_path / "fitted.txt"  # written by the fit, which may run in a forked worker
    real = fits.fit_host

    def counting(rows: pd.DataFrame) -> pd.DataFrame:
        with log.open("a", encoding="utf-8") as file:
            file.write(" + ".join(sorted(set(rows["machine_id"]))) + "\n")
        return real(rows)

    with mock.patch.object(fits, "fit_host", counting):
        served = fit_all(grown, memo=Memo(tmp_path / "cache"))
    assert log.read_text(encoding="utf-8").splitlines() == [machines[1]]
    pd.testing.assert_frame_equal(served.host, fit_all(grown).host)


def test_served_fits_and_table_equal_computed_ones_with_raw_samples(tmp_path: Path) -> None:
    frame = _frame([FULL_RUN, QUICK_RUN], samples=uses_samples)
    assert frame["data"].map(lambda value: isinstance(value, np.ndarray)).any()
    plain = fit_all(frame)
    table = figure_table(frame, plain, None)
    for _ in range(2):  # computed and kept, then served
        store = Memo(tmp_path / "cache")
        kept = fit_all(frame, memo=store)
        for name in ("host", "many_vs_one", "decode_steps", "calls"):
            pd.testing.assert_frame_equal(getattr(kept, name), getattr(plain, name))
        kept_table = compared_table(frame, kept, None, store)
        pd.testing.assert_frame_equal(kept_table, table)
        assert kept_table.attrs == table.attrs


def test_a_changed_raw_sample_changes_the_key(tmp_path: Path) -> None:
    frame = _frame([FULL_RUN], samples=uses_samples)
    row = frame["data"].map(lambda value: isinstance(value, np.ndarray)).to_numpy().nonzero()[0][0]
    changed = frame.copy()
    changed["data"] = changed["data"].copy()
    samples = changed["data"].iloc[row].copy()
    samples[-1] = np.nextafter(samples[-1], np.inf)  # one sample, one unit in the last place
    changed.at[changed.index[row], "data"] = samples
    store = Memo(tmp_path)
    assert store.key("k", frame) != store.key("k", changed)
    assert store.key("k", frame) == Memo(tmp_path).key("k", frame.copy())


def test_dictionaries_and_arrays_hash_by_value() -> None:
    column = pd.Series([{"a": 1}, np.arange(3.0), None], dtype=object)
    same = pd.Series([{"a": 1}, np.arange(3.0), None], dtype=object)
    other = pd.Series([{"a": 2}, np.arange(3.0), None], dtype=object)
    assert (column_hashes(column) == column_hashes(same)).all()
    assert (column_hashes(column) != column_hashes(other)).tolist() == [True, False, False]


def test_raw_samples_hash_by_value_place_and_length() -> None:
    """A column of raw samples (float64 arrays or None) is hashed at numpy's speed (``_samples_hashes``):
    equal arrays alike, and apart for a swapped pair, a sign of zero, a sample more or less, or None."""
    rows = [[0.0, 1.5], [1.5, 0.0], [-0.0, 1.5], [0.0, 1.5, 0.0], [0.0], [], None, [0.0, 1.5]]
    column = pd.Series([None if row is None else np.array(row) for row in rows], dtype=object)
    hashes = column_hashes(column).tolist()
    assert hashes[0] == hashes[-1]
    assert len(set(hashes)) == len(rows) - 1
    assert hashes[rows.index(None)] == 0
    mixed = pd.Series([np.array([0.0, 1.5]), (0.0, 1.5)], dtype=object)  # not all arrays: value by value
    assert column_hashes(mixed)[0] != column_hashes(mixed)[1]


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ([1, "a"], ["1", "a"]),  # pandas hashes a mixed column as text
        ([1, 1], [1, True]),  # and values that compare equal alike
        ([(1,), (1,)], [(1,), (True,)]),
        ([None, "a"], [float("nan"), "a"]),
        ([0.0, 1.5], [-0.0, 1.5]),  # floats: by their bits
        (np.array([0.0, 1.5]), np.array([-0.0, 1.5])),
        (pd.to_datetime(["2026-12-03T10:00:00Z"]), pd.to_datetime(["2026-12-03T10:00:00.000001Z"])),
    ],
)
def test_values_pandas_hashes_alike_make_different_keys(one: object, other: object) -> None:
    store = Memo(Path("/nonexistent"))

    def frame(values: object) -> pd.DataFrame:  # a list as an object column (pandas 3 would infer text)
        return pd.DataFrame({"x": pd.Series(values, dtype=object) if isinstance(values, list) else values})

    first, second = frame(one), frame(other)
    assert store.key("k", first) != store.key("k", second)
    assert store.rows_key("k", first, np.arange(len(first))) != store.rows_key(
        "k", second, np.arange(2)[: len(second)]
    )
    assert store.key("k", first) == Memo(Path("/nonexistent")).key("k", first.copy())


def test_a_damaged_or_untrusted_result_is_computed_anew(fleet: Path, tmp_path: Path) -> None:
    frame = _frame([fleet])
    store = Memo(tmp_path / "cache")
    expected = fit_all(frame, memo=store).host
    for path in store.folder.glob(f"*{memo.SUFFIX}"):
        path.write_bytes(b"not a kept result")
    pd.testing.assert_frame_equal(fit_all(frame, memo=Memo(tmp_path / "cache")).host, expected)
    store.folder.chmod(0o777)  # anyone may write there: nothing is read from it
    with mock.patch.object(memo, "loads", _refuse):
        pd.testing.assert_frame_equal(fit_all(frame, memo=Memo(tmp_path / "cache")).host, expected)


def test_the_folder_is_trimmed_to_its_limit_least_recently_used_first(tmp_path: Path) -> None:
    store = Memo(tmp_path)
    store.put("old", b"x" * 1000)
    store.put("used", b"y" * 1000)
    old, used = store.folder / f"old{memo.SUFFIX}", store.folder / f"used{memo.SUFFIX}"
    for age, path in ((300, old), (200, used)):
        stamp = path.stat().st_mtime - age
        import os

        os.utime(path, (stamp, stamp))
    assert store.get("used") == (True, b"y" * 1000)  # used now: the newest
    with mock.patch.object(memo, "LIMIT_BYTES", 3500):  # two results of 1,000 bytes (base64, sealed)
        fresh = Memo(tmp_path)
        fresh.put("new", b"z" * 1000)
    assert sorted(path.name for path in fresh.folder.iterdir()) == [f"new{memo.SUFFIX}", f"used{memo.SUFFIX}"]


def test_results_of_another_code_version_go_once_stale(tmp_path: Path) -> None:
    stale = tmp_path / "results-v1-0000"
    stale.mkdir(mode=0o700)
    (stale / f"k{memo.SUFFIX}").write_bytes(b"x")
    recent = tmp_path / "results-v1-1111"
    recent.mkdir(mode=0o700)
    import os

    old = stale.stat().st_mtime - memo.STALE_S - 60
    os.utime(stale, (old, old))
    Memo(tmp_path).put("k", 1)
    assert not stale.exists()
    assert recent.exists()


def test_no_file_is_removed_through_a_symbolic_link_in_the_cache_folder(tmp_path: Path) -> None:
    """A link someone else put in a cache folder they may write in (named as another version's results, or
    as this version's) never leads the trim into the folder it points to: its files stay."""
    import os

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    for index in range(3):
        (elsewhere / f"file{index}").write_bytes(b"x" * 1000)
    old = elsewhere.stat().st_mtime - memo.STALE_S - 60
    os.utime(elsewhere, (old, old))
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "results-v1-0000").symlink_to(elsewhere)
    Memo(cache).put("k", 1)
    other = tmp_path / "other"
    other.mkdir()
    Memo(other).folder.symlink_to(elsewhere)
    with mock.patch.object(memo, "LIMIT_BYTES", 1500):
        Memo(other).put("k", 1)
    assert {f"file{index}" for index in range(3)} <= {path.name for path in elsewhere.iterdir()}


def test_compare_with_the_memo_prints_what_it_prints_without(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def compare(*cache: str) -> str:
        assert main(["compare", str(fleet), "--include-quick", "--no-samples", *cache]) == 0
        return capsys.readouterr().out

    bare = compare("--no-cache")
    assert compare("--cache", str(tmp_path)) == bare
    with mock.patch.object(fits, "fit_host", _refuse), mock.patch("analysis.compare.figure_table", _refuse):
        assert compare("--cache", str(tmp_path)) == bare


def test_the_parsed_run_cache_keeps_each_repeated_text_once_and_every_value_as_it_was() -> None:
    from analysis.cache import Fresh, Key, _index, _runs
    from analysis.sealed import dumps, loads

    def text(value: str) -> str:  # a new object each time, as parsing JSON makes them
        return "".join(list(value))

    files = [
        Fresh(
            Key(f"/r/{i}.json", f"r/{i}.json", 1, 2, 3, 4, 5),
            0,
            1,
            {
                text("machine_id"): text(f"box {i % 2}"),
                text("flag"): True,
                text("count"): 1,
                text("zero"): -0.0,
                text("families"): (text("a"), text("b")),
            },
            [],
            (text("k"),),
        )
        for i in range(4)
    ]
    index = loads(dumps(_index(files, 0, "")))
    runs = _runs(index["runs"], len(files))
    assert runs == [f.run for f in files]
    assert all(type(run["flag"]) is bool and type(run["count"]) is int for run in runs)
    assert all(str(run["zero"]) == "-0.0" for run in runs)
    assert runs[0]["machine_id"] is runs[2]["machine_id"]
    assert runs[0]["families"] is runs[3]["families"]
    names = [next(iter(run)) for run in runs]
    assert all(name is names[0] for name in names)  # the field names too
    keys = index["keys"]
    assert keys["distinct"] == [("k",)] and keys["codes"] == [0, 0, 0, 0]


def test_a_matplotlib_settings_file_is_part_of_a_kept_figures_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept figure is drawn anew when a settings file matplotlib reads appears or changes (its look may)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "config"))
    before = figures._matplotlib_settings()
    (tmp_path / "matplotlibrc").write_text("font.size: 30\n", encoding="utf-8")
    with_local = figures._matplotlib_settings()
    assert with_local != before
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "matplotlibrc").write_text("lines.linewidth: 4\n", encoding="utf-8")
    assert figures._matplotlib_settings() not in (before, with_local)


def test_the_settings_file_in_a_matplotlibrc_folder_is_part_of_a_kept_figures_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$MATPLOTLIBRC`` may name a folder, whose ``matplotlibrc`` matplotlib reads: editing that file leaves
    the folder's size and time as they were, so the file's own are in the key."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "rc"
    folder.mkdir()
    (folder / "matplotlibrc").write_text("font.size: 30\n", encoding="utf-8")
    monkeypatch.setenv("MATPLOTLIBRC", str(folder))
    before = figures._matplotlib_settings()
    (folder / "matplotlibrc").write_text("font.size: 300\n", encoding="utf-8")  # edited in place
    assert figures._matplotlib_settings() != before


@pytest.mark.parametrize("library", ["numpy", "pandas", "scipy", "matplotlib", "pillow"])
def test_another_version_of_a_library_results_depend_on_is_another_code_version(library: str) -> None:
    """Results kept by one version of numpy, pandas, SciPy (a fit's numbers), matplotlib or Pillow (a
    figure's pixels and PNG bytes) are never read back under another."""
    real = memo.metadata.version
    memo.code_version.cache_clear()
    try:
        before = memo.code_version()
        other = mock.patch.object(
            memo.metadata, "version", lambda name: "0.0.other" if name == library else real(name)
        )
        with other:
            memo.code_version.cache_clear()
            assert memo.code_version() != before
        memo.code_version.cache_clear()
        assert memo.code_version() == before
    finally:
        memo.code_version.cache_clear()
