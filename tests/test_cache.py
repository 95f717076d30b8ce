"""The cache of parsed runs (``analysis.cache``): a second load gives exactly what parsing gives, reads no
unchanged file again, and is never wrong after a file changes, is removed or is replaced; it is optional
(no pyarrow: no cache, no crash) and the CLI's ``--cache`` / ``--no-cache`` / ``$LAUNCHBENCH_CACHE`` move or
bypass it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import cache as run_cache
from analysis import load
from analysis.__main__ import main
from analysis.fits import uses_samples

pytest.importorskip("pyarrow")

DATA = Path(__file__).parent / "data"
RUNS = sorted((DATA / "runs").glob("*.json"))
QUICK = DATA / "cpu-2core-quick.json"

#: Modification time given to the copies: older than ``RACY_S``, so that the cache keeps them.
OLD = time.time() - 3600


def _storage(folder: Path) -> Path:
    """A run storage of three runs (two machines' full runs and a quick one) and one file that is no run."""
    storage = folder / "storage" / "Linux-CPython-3.11-64bit"
    storage.mkdir(parents=True)
    for index, source in enumerate([*RUNS[:2], QUICK]):
        shutil.copy(source, storage / f"000{index + 1}_run.json")
    (storage / "0009_broken.json").write_text('{"benchmarks": [', encoding="utf-8")
    for path in storage.iterdir():
        os.utime(path, (OLD, OLD))
    return storage.parent


def _same(expected: load.LoadResult, got: load.LoadResult) -> None:
    """``got`` holds what ``expected`` holds: frame (raw samples value by value), runs, problems, files."""
    pd.testing.assert_frame_equal(expected.frame.drop(columns="data"), got.frame.drop(columns="data"))
    for want, have in zip(expected.frame["data"], got.frame["data"], strict=True):
        assert (want is None and have is None) or np.array_equal(want, have)
    pd.testing.assert_frame_equal(expected.runs, got.runs)
    assert got.problems == expected.problems
    assert got.files_used == expected.files_used


@pytest.fixture
def no_parsing(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files parsed while the test runs (``load._read_file`` counted)."""
    parsed: list[Path] = []
    read_file = load._read_file

    def counted(path: Path, *args: object) -> load.FileResult:
        parsed.append(path)
        return read_file(path, *args)

    monkeypatch.setattr(load, "_read_file", counted)
    return parsed


@pytest.mark.parametrize("samples", [True, False, uses_samples], ids=["all", "none", "picked"])
def test_second_load_reads_no_file_and_gives_the_same(
    tmp_path: Path, samples: load.Samples, no_parsing: list[Path]
) -> None:
    storage = _storage(tmp_path)
    folder = tmp_path / "cache"
    expected = load.load_runs([storage], samples=samples)
    first = load.load_runs([storage], samples=samples, cache=folder)
    no_parsing.clear()
    second = load.load_runs([storage], samples=samples, cache=folder)
    assert no_parsing == []  # the broken file's problem line too comes from the cache
    _same(expected, first)
    _same(expected, second)
    assert any("0009_broken.json" in line for line in second.problems)
    writable = [data for data in second.frame["data"] if data is not None]
    assert writable or samples is False
    for data in writable:
        data[:1] = data[:1]  # the arrays stay writable, as parsed ones are


def test_a_store_behind_is_waited_for_by_the_next_load(
    tmp_path: Path, no_parsing: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``store_behind`` (the command line's first load, issue 33) returns before its segment is written; the
    next load in the process waits for it and parses nothing, and gives what parsing gives."""
    storage = _storage(tmp_path)
    folder = tmp_path / "cache"
    writing = threading.Event()
    store = run_cache.RunCache.store

    def slow_store(self: run_cache.RunCache, *args: object) -> None:
        writing.wait(10)  # the segment is written only once the first load has returned
        store(self, *args)

    monkeypatch.setattr(run_cache.RunCache, "store", slow_store)
    monkeypatch.setattr(run_cache, "may_fork", lambda: False)  # the thread (the child: the next test)
    first = load.load_runs([storage], samples=uses_samples, cache=folder, store_behind=True)
    assert not list(folder.rglob("*.index"))  # not yet written
    writing.set()
    no_parsing.clear()
    second = load.load_runs([storage], samples=uses_samples, cache=folder)
    assert no_parsing == []
    _same(load.load_runs([storage], samples=uses_samples), second)
    _same(first, second)


#: Run in a fresh process of one thread, as the command line is: ``store_behind`` forks its child there.
_FORKED_STORE = """
import os, sys
from pathlib import Path
from analysis import cache, load
from analysis.fits import uses_samples
assert cache.may_fork()
load.load_runs([Path(sys.argv[1])], samples=uses_samples, cache=Path(sys.argv[2]), store_behind=True)
(child,) = cache._STORING
assert isinstance(child, cache._StoringChild) and child.pid != os.getpid()
cache.wait_for_stores()
try:
    os.waitpid(child.pid, os.WNOHANG)
    print("not reaped")
except ChildProcessError:
    print("reaped")
"""


def test_a_store_behind_in_a_forked_child_is_written_and_reaped(
    tmp_path: Path, no_parsing: list[Path]
) -> None:
    """In a process of one thread (the command line), ``store_behind`` writes the segment from a forked
    child: ``wait_for_stores`` waits for it and reaps it, and the segment gives what parsing gives."""
    storage = _storage(tmp_path)
    folder = tmp_path / "cache"
    done = subprocess.run(
        [sys.executable, "-c", _FORKED_STORE, str(storage), str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "reaped", "")
    second = load.load_runs([storage], samples=uses_samples, cache=folder)
    assert no_parsing == []
    _same(load.load_runs([storage], samples=uses_samples), second)


def test_no_child_is_forked_beside_a_thread_or_a_threaded_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork copies only the calling thread: with another thread running, or JAX or PyTorch loaded, the
    segment is written by a thread instead (``may_fork``)."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert run_cache.may_fork()
    monkeypatch.setitem(sys.modules, "torch", sys)  # as if PyTorch were loaded
    assert not run_cache.may_fork()
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert not run_cache.may_fork()


def test_changed_removed_and_replaced_files_are_read_again(tmp_path: Path, no_parsing: list[Path]) -> None:
    storage = _storage(tmp_path)
    folder = tmp_path / "cache"
    files = sorted(storage.rglob("*.json"))
    load.load_runs([storage], samples=False, cache=folder)

    # Changed in place, to the same size and modification time (only the status-change time tells).
    changed = files[0]
    text = changed.read_text(encoding="utf-8")
    assert '"host": "' in text
    changed.write_text(text.replace('"host": "', '"host": "X', 1).replace("    ", "   ", 1), encoding="utf-8")
    os.utime(changed, (OLD, OLD))
    assert changed.stat().st_size == len(text.encode())
    # Replaced by another file of the same size and time (a new inode), and one removed.
    replaced = files[1]
    substitute = tmp_path / "substitute.json"
    shutil.copy(files[2], substitute)
    os.utime(substitute, (OLD, OLD))
    substitute.replace(replaced)
    files[3].unlink()

    no_parsing.clear()
    got = load.load_runs([storage], samples=False, cache=folder)
    assert sorted(no_parsing) == [changed, replaced]
    _same(load.load_runs([storage], samples=False), got)
    assert any(str(host).startswith("X") for host in got.frame["host"])
    assert not any("0009_broken" in line for line in got.problems)
    assert files[3] not in got.files_used


def test_a_file_newer_than_the_clock_tick_is_not_trusted(tmp_path: Path, no_parsing: list[Path]) -> None:
    storage = _storage(tmp_path)
    fresh = next(storage.rglob("0001_run.json"))
    os.utime(fresh)  # just written: may still change within its modification time's tick
    folder = tmp_path / "cache"
    load.load_runs([storage], samples=False, cache=folder)
    no_parsing.clear()
    load.load_runs([storage], samples=False, cache=folder)
    assert no_parsing == [fresh]


def test_cached_and_new_files_keep_the_order_of_a_plain_load(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    folder = tmp_path / "cache"
    files = sorted(storage.rglob("*.json"))
    load.load_runs(files[1:3], samples=True, cache=folder)  # the middle ones cached, the others not
    _same(load.load_runs(files, samples=True), load.load_runs(files, samples=True, cache=folder))
    _same(load.load_runs(files, samples=True), load.load_runs(files, samples=True, cache=folder))


def test_options_and_facts_have_their_own_entries(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    folder = tmp_path / "cache"
    for samples, facts in [(False, ()), (True, ()), (False, ("numpy",)), (True, ("numpy",))]:
        expected = load.load_runs([storage], samples=samples, facts=facts)
        load.load_runs([storage], samples=samples, facts=facts, cache=folder)
        _same(expected, load.load_runs([storage], samples=samples, facts=facts, cache=folder))
    assert len(list(folder.iterdir())) == 4


def test_a_damaged_cache_costs_a_parse_not_a_wrong_row(tmp_path: Path, no_parsing: list[Path]) -> None:
    storage = _storage(tmp_path)
    folder = tmp_path / "cache"
    load.load_runs([storage], samples=True, cache=folder)
    for segment in folder.rglob("*.rows.parquet"):
        segment.write_bytes(segment.read_bytes()[:100])
    expected = load.load_runs([storage], samples=True)
    no_parsing.clear()
    _same(expected, load.load_runs([storage], samples=True, cache=folder))
    assert len(no_parsing) == 4
    for segment in folder.rglob("*.index"):
        segment.write_bytes(b"not an index")
    _same(load.load_runs([storage], samples=True), load.load_runs([storage], samples=True, cache=folder))


def test_segments_of_removed_files_are_deleted(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    folder = tmp_path / "cache"
    load.load_runs([storage], samples=False, cache=folder)
    for path in storage.rglob("*.json"):
        path.unlink()
    (storage / "Linux-CPython-3.11-64bit" / "0005_run.json").write_bytes(QUICK.read_bytes())
    load.load_runs([storage], samples=False, cache=folder)
    assert not list(folder.rglob("*.parquet"))  # the only file left is too new to be kept


def test_without_pyarrow_there_is_no_cache_and_no_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = _storage(tmp_path)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    assert not run_cache.available()
    folder = tmp_path / "cache"
    _same(load.load_runs([storage], samples=False), load.load_runs([storage], samples=False, cache=folder))
    assert not folder.exists()


def test_a_folder_others_may_write_is_not_read(tmp_path: Path, no_parsing: list[Path]) -> None:
    storage = _storage(tmp_path)
    folder = tmp_path / "cache"
    load.load_runs([storage], samples=False, cache=folder)
    for variant in folder.iterdir():
        variant.chmod(0o777)
    no_parsing.clear()
    load.load_runs([storage], samples=False, cache=folder)
    assert len(no_parsing) == 4


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``python -m analysis ARGS`` run in-process (``analysis.__main__.main``, which reads ``--cache`` and
    ``$LAUNCHBENCH_CACHE`` at each call, as a fresh process does): its exit code, stdout and stderr."""
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_cache_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = _storage(tmp_path)
    from_env, from_option = tmp_path / "from-env", tmp_path / "from-option"
    monkeypatch.setenv(run_cache.CACHE_ENV, str(from_env))
    with pytest.raises(SystemExit) as stop:
        main(["compare", "--help"])
    assert stop.value.code == 0
    help_text = capsys.readouterr().out
    assert "--cache DIR" in help_text and "--no-cache" in help_text and "LAUNCHBENCH_CACHE" in help_text
    plain = _cli(capsys, "compare", str(storage), "--no-cache")
    assert plain[0] == 0, plain[2]
    assert not from_env.exists()
    first = _cli(capsys, "compare", str(storage))
    assert first[0] == 0 and list(from_env.rglob("*.rows.parquet"))
    assert first == plain
    second = _cli(capsys, "compare", str(storage), "--cache", str(from_option))
    assert second == plain
    assert list(from_option.rglob("*.rows.parquet"))
    again = _cli(capsys, "compare", str(storage))
    assert again == plain
