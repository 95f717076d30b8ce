"""Hostile inputs and faults, round three (issue 32): one test per finding (7 and 16, ``.ci/gpu-run``, are
``tests/test_gpu_run_script.py``'s), each on real runs of tests/data altered in the test, each holding what
the issue asks: a damaged cache or kept result never changes a number (it costs a recompute and one line),
no save overwrites or loses another, a report is replaced whole or not at all, and every other finding is
one line or the right behaviour.

The numbers in the test names are the issue's. Each of these tests failed on the code before the fixes
(b047f1f; the closing note, /work/notes/32.md, says how each failed), so the modules of the fixes are
imported by the tests that use them, not here: on that code each test fails alone, not the whole file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis import cache as run_cache
from analysis.__main__ import main
from analysis.fits import uses_samples
from analysis.load import LoadResult, load_runs
from tests.test_hostile_round2 import PROG, foreign, one_error_line, run_cli
from tests.test_load import write_json
from tests.test_run_record import environment, pytest_command, saved

pytest.importorskip("pyarrow")

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
RUNS = sorted((DATA / "runs").glob("*.json"))
QUICK = DATA / "cpu-2core-quick.json"
#: Modification time given to the copies: older than ``analysis.cache.RACY_S``, so that the cache keeps them.
OLD = time.time() - 3600


def storage(folder: Path, sources: list[Path] | None = None) -> Path:
    """A run storage holding copies of ``sources`` (the quick run and the first full run), old enough to be
    cached."""
    platform = folder / "storage" / "Linux-CPython-3.11-64bit"
    platform.mkdir(parents=True)
    for index, source in enumerate(sources or [QUICK, RUNS[0]]):
        path = platform / f"{index + 1:04d}_run.json"
        shutil.copy(source, path)
        os.utime(path, (OLD, OLD))
    return platform.parent


def same(expected: LoadResult, got: LoadResult) -> None:
    """``got`` holds what ``expected`` holds: frame (raw samples value by value), runs, problems."""
    pd.testing.assert_frame_equal(expected.frame.drop(columns="data"), got.frame.drop(columns="data"))
    for want, have in zip(expected.frame["data"], got.frame["data"], strict=True):
        assert (want is None and have is None) or np.array_equal(want, have)
    pd.testing.assert_frame_equal(expected.runs, got.runs)
    assert got.problems == expected.problems


def flipped(path: Path, rng: random.Random) -> int:
    """Flip one random bit of ``path``; the offset."""
    data = bytearray(path.read_bytes())
    offset = rng.randrange(len(data))
    data[offset] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    return offset


def cache_files(folder: Path, rows: bool) -> list[Path]:
    """The cache's rows files (``rows``), or every other file of its segments."""
    files = [path for path in folder.rglob("*") if path.is_file() and not path.name.startswith(".")]
    return sorted(path for path in files if path.name.endswith(".rows.parquet") == rows)


def cache_copies(
    tmp_path: Path, samples: object
) -> tuple[Path, LoadResult, Path, Callable[[int], Iterator[Path]]]:
    """A storage of the runs, what parsing it gives (``samples`` as ``load_runs``'), the cache its load
    filled, and ``copies(count)``: that many fresh copies of the cache, one at a time, each removed once the
    next is asked for."""
    runs = storage(tmp_path)
    expected = load_runs([runs], samples=samples)
    pristine = tmp_path / "cache"
    load_runs([runs], samples=samples, cache=pristine)

    def copies(count: int) -> Iterator[Path]:
        for attempt in range(count):
            copy = tmp_path / f"cache{attempt}"
            shutil.copytree(pristine, copy)
            yield copy
            shutil.rmtree(copy)

    return runs, expected, pristine, copies


def warnings_of(err: str) -> list[str]:
    return [line for line in err.splitlines() if "warning" in line]


# --- 1: a flipped bit in the cached rows --------------------------------------------------------------------


def test_1_a_flipped_bit_in_the_cached_rows_never_changes_a_row(
    tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    """48 single-bit flips at random offsets of a cached rows file (raw samples kept: most of its bytes are
    numbers), each in a fresh copy of the cache: every load gives the rows parsing gives, a damaged file is
    named in one line. Before, 21 of 40 such flips changed the frame without a word."""
    runs, expected, _, copies = cache_copies(tmp_path, uses_samples)
    rng = random.Random(32)
    for copy in copies(48):
        (rows,) = cache_files(copy, rows=True)
        offset = flipped(rows, rng)
        capfd.readouterr()
        got = load_runs([runs], samples=uses_samples, cache=copy)
        try:
            same(expected, got)
        except AssertionError as error:
            raise AssertionError(
                f"a flipped bit at byte {offset} of the rows changed what was loaded"
            ) from error
        lines = warnings_of(capfd.readouterr().err)
        assert len(lines) <= 1 and all("parsed again" in line for line in lines), lines


def test_1_compare_of_a_damaged_cache_prints_what_no_cache_prints_and_one_line(tmp_path: Path) -> None:
    runs = storage(tmp_path, RUNS)
    cache = tmp_path / "cache"
    bare = run_cli(["compare", str(runs), "--by", "run", "--no-cache"])
    assert run_cli(["compare", str(runs), "--by", "run", "--cache", str(cache)])[:2] == bare[:2]
    for rows in cache_files(cache, rows=True):
        data = bytearray(rows.read_bytes())
        data[len(data) // 2] ^= 0x20
        rows.write_bytes(bytes(data))
    code, out, err = run_cli(["compare", str(runs), "--by", "run", "--cache", str(cache)])
    assert (code, out) == bare[:2]
    assert len(warnings_of(err)) == 1 and "SHA-256" in err, err


# --- 2 and 10: flipped bits in kept results and in the cache's index ----------------------------------------

#: Run in a child process: a flipped bit in a pickle crashed the interpreter (SIGSEGV) before.
_MEMO_FLIPS = """
import random, sys
from pathlib import Path
import pandas as pd
from analysis.fits import fit_all
from analysis.load import load_runs
from analysis.memo import Memo

frame = load_runs([sys.argv[1]], samples=False).frame
value = (fit_all(frame).host, [("a.png", bytes(range(256)) * 4)], {"baseline": "m", "verdicts": [1.5, -0.0]})
folder = Path(sys.argv[2])
rng = random.Random(32)
for attempt in range(int(sys.argv[3])):
    store = Memo(folder / str(attempt))
    store.put("k", value)
    (path,) = [p for p in store.folder.iterdir() if not p.name.startswith(".")]
    data = bytearray(path.read_bytes())
    offset = rng.randrange(len(data))
    data[offset] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    found, back = Memo(folder / str(attempt)).get("k")
    if found:
        try:
            pd.testing.assert_frame_equal(back[0], value[0])
            assert back[1:] == value[1:]
        except AssertionError:
            print(f"a flipped bit at byte {offset} gave another value")
print("done")
"""


def test_2_a_flipped_bit_in_a_kept_result_is_never_served(tmp_path: Path) -> None:
    """300 single-bit flips of a kept result (a fit table, a figure's bytes, a table's attributes): each is
    read back as it was or computed again, never another value, never a crash. Before (pickle): some flips
    served t0 474 ns for 237 ns, others crashed the interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _MEMO_FLIPS, str(QUICK), str(tmp_path / "memo"), "300"],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["done"], done.stdout[:2000]


def test_10_a_damaged_cache_index_costs_a_parse_not_a_traceback(tmp_path: Path) -> None:
    """Flipped bits in each cache file other than the rows (its index: before, the pickle of run infos, where
    one flip made every later command fail with KeyError 'machine_ad' until the cache was removed)."""
    runs, expected, _, copies = cache_copies(tmp_path, False)
    rng = random.Random(10)
    for copy in copies(24):
        for path in cache_files(copy, rows=False):
            flipped(path, rng)
        for _ in range(2):  # the damaged load, then the one after it
            same(expected, load_runs([runs], samples=False, cache=copy))


def test_10_a_cache_file_naming_code_is_never_run(tmp_path: Path) -> None:
    """A pickle that names a module and a class (``os.system`` here would run a command; a module that is
    not there raised ModuleNotFoundError before) in place of every cache file but the rows: parsed again."""
    runs, expected, pristine, copies = cache_copies(tmp_path, False)
    for index, copy in enumerate(copies(len(cache_files(pristine, rows=False)))):  # one file at a time
        cache_files(copy, rows=False)[index].write_bytes(b"cno_such_module_lb32\nThing\n)\x81.")
        same(expected, load_runs([runs], samples=False, cache=copy))


def test_no_cache_or_memo_file_is_a_pickle_and_none_is_unpickled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A warm compare reads its rows and its fits back without pickle, and no file of the cache is one."""
    import pickle

    runs = storage(tmp_path, RUNS)
    cache = tmp_path / "cache"
    argv = ["compare", str(runs), "--by", "run", "--cache", str(cache)]
    first = run_cli(argv)

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("a cache file was unpickled")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    from analysis import fits

    monkeypatch.setattr(fits, "fit_host", refuse)  # served from the memo, or the test fails
    assert run_cli(argv) == first
    for path in cache.rglob("*"):
        if path.is_file():
            assert not path.read_bytes().startswith(b"\x80"), path  # pickle's protocol 2+ mark


# --- 11: a FIFO in place of a kept result -------------------------------------------------------------------


def test_11_a_fifo_in_place_of_a_kept_result_does_not_block(tmp_path: Path) -> None:
    runs = storage(tmp_path)
    cache = tmp_path / "cache"
    argv = [sys.executable, "-m", "analysis", "compare", str(runs), "--include-quick", "--cache", str(cache)]
    first = subprocess.run(argv, capture_output=True, text=True, env=environment(), timeout=120, check=False)
    assert first.returncode == 0, first.stderr
    kept = [path for path in cache.glob("results-*/*") if not path.name.startswith(".")]
    assert kept
    for path in kept:
        path.unlink()
        os.mkfifo(path)
    try:
        again = subprocess.run(
            argv, capture_output=True, text=True, env=environment(), timeout=60, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise AssertionError("compare waited on a FIFO in the cache") from error
    assert (again.returncode, again.stdout) == (0, first.stdout), again.stderr
    lines = warnings_of(again.stderr)
    assert lines and all("kept result" in line and "not a regular file" in line for line in lines), lines


# --- 12: a cache folder that is not the user's --------------------------------------------------------------


def test_12_a_cache_others_may_write_is_neither_read_nor_grown(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A folder others may write in (as a host-owned cache volume is to a container's root: not this user's)
    is never read, so nothing is written there either: before, each compare added a segment (2.3 MB per
    compare of 300 runs) that no command would read."""
    runs = storage(tmp_path)
    cache = tmp_path / "cache"
    argv = ["compare", str(runs), "--include-quick", "--cache", str(cache)]
    assert run_cli(argv)[0] == 0
    for folder in cache.iterdir():
        folder.chmod(0o777)
    before = sorted(path.relative_to(cache) for path in cache.rglob("*"))
    for _ in range(2):
        capsys.readouterr()
        code, _, err = run_cli(argv)
        assert code == 0, err
        assert sorted(path.relative_to(cache) for path in cache.rglob("*")) == before
    assert any("not a folder of this user's" in line for line in warnings_of(err)), err


# --- 13: a store interrupted or killed ----------------------------------------------------------------------


def test_13_ctrl_c_during_a_cache_store_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the rows file is written and before the segment is whole: nothing of it stays (before,
    ``store`` caught no KeyboardInterrupt and its files stayed forever)."""
    runs = storage(tmp_path)
    cache = tmp_path / "cache"
    real = run_cache.written_aside
    calls = []

    @contextlib.contextmanager
    def interrupted(path: Path) -> object:
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        with real(path) as temporary:
            yield temporary

    monkeypatch.setattr(run_cache, "written_aside", interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_runs([runs], samples=False, cache=cache)
    assert len(calls) == 2
    assert [path for path in cache.rglob("*") if path.is_file()] == []


def test_13_files_a_killed_store_left_are_removed_once_old(tmp_path: Path) -> None:
    """What a store killed outright (SIGKILL) leaves — a rows file without its segment's index, a temporary
    file — is deleted by a later load once an hour old; a fresh one (a store at work) is left alone."""
    runs = storage(tmp_path)
    cache = tmp_path / "cache"
    load_runs([runs], samples=False, cache=cache)
    (variant,) = cache.iterdir()
    old = [variant / "00000000000000000001-dead.rows.parquet", variant / ".x.rows.parquet.1234abcd.tmp"]
    fresh = variant / ".y.index.5678abcd.tmp"
    for path in [*old, fresh]:
        path.write_bytes(b"left by a killed store")
    for path in old:
        os.utime(path, (OLD - 86400, OLD - 86400))
    same(load_runs([runs], samples=False), load_runs([runs], samples=False, cache=cache))
    assert not any(path.exists() for path in old)
    assert fresh.exists()


# --- 15: a cache inside the storage -------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["env-inside", "env-storage", "option-empty"])
def test_15_a_cache_inside_the_storage_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, where: str
) -> None:
    runs = storage(tmp_path)
    monkeypatch.chdir(runs)
    before = sorted(runs.rglob("*"))
    argv = ["compare", str(runs), "--include-quick"]
    if where == "env-inside":
        monkeypatch.setenv(run_cache.CACHE_ENV, str(runs / ".cache"))
    elif where == "env-storage":
        monkeypatch.setenv(run_cache.CACHE_ENV, str(runs))
    else:
        argv += ["--cache", ""]
    capsys.readouterr()
    code, out, err = run_cli(argv)
    assert sorted(runs.rglob("*")) == before  # nothing written among the saved runs
    if where == "option-empty":
        assert code == 1 and "names no folder" in one_error_line(err)
    else:
        assert code == 0 and "Runs used" in out, err
        (line,) = warnings_of(err)
        assert "lies inside the run storage" in line


# --- 3 and 8: machine names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "option"),
    [(b"a\nb", None), (b"bad\xffname", None), (None, "c\x1bd")],
    ids=["newline", "not-utf8", "escape"],
)
def test_3_8_a_machine_name_analysis_cannot_read_is_refused_before_measuring(
    tmp_path: Path, variable: bytes | None, option: str | None
) -> None:
    env = {key.encode(): value.encode() for key, value in environment().items()}
    if variable is not None:
        env[b"LAUNCHBENCH_MACHINE"] = variable
    extra = ["--machine", option] if option is not None else []
    done = subprocess.run(
        pytest_command(
            "--benchmark-only", "--benchmark-save=named", f"--benchmark-storage={tmp_path / 's'}", *extra
        ),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        errors="backslashreplace",
        timeout=240,
        check=False,
    )
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-2000:]
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "machine name" in line]
    assert len(lines) == 1 and "nothing was measured" in lines[0], done.stderr
    assert not list(tmp_path.rglob("*.json"))


@pytest.mark.parametrize("name", ["tab\there", "soh\x01", "ok name \u00b5", "  "])
def test_3_8_every_control_character_is_refused_and_a_printable_name_kept(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import provenance

    monkeypatch.delenv(provenance.MACHINE_NAME_VARIABLE, raising=False)
    problem = provenance.name_problem(name)
    assert (problem is None) == name.isprintable()
    if problem:
        assert "--machine" in problem and repr(name) in problem


def test_3_runs_of_names_analysis_cannot_read_are_named_never_another_suite(tmp_path: Path) -> None:
    """Three runs already saved under such names, compared together: each dropped in its own line, exit 1;
    before, "Runs used: 3 of another suite than launchbench", exit 0, and the drop lines were lost."""
    for index, (name, source) in enumerate(zip(["a\nb", "c\x1bd", "e\tf"], RUNS, strict=True)):
        doc = saved(source)
        ours = doc["machine_info"]["launchbench"]
        ours["machine_name"] = name
        ours["machine_id"] = f"{name} / Linux / cpu / no GPU"
        write_json(tmp_path / f"{index + 1:04d}_named.json", doc)
    code, out, err = run_cli(["compare", str(tmp_path), "--no-cache"])
    assert code == 1 and "another suite" not in out + err, out
    dropped = [line for line in err.splitlines() if "dropped: machine_info.launchbench.machine_id" in line]
    assert len(dropped) == 3, err
    assert err.splitlines()[-1].startswith(f"{PROG}: error: ")


# --- 4 and 5: saves -----------------------------------------------------------------------------------------


def _file_storage(folder: Path) -> tuple[SimpleNamespace, Path]:
    """A pytest-benchmark file storage (its own class) guarded as a session's is; its machine folder."""
    from pytest_benchmark.storage.file import FileStorage

    from benchmarks.outputs import guard_saving

    storage = FileStorage(folder, logging.getLogger("test"), default_machine_id="Linux-CPython-3.11-64bit")
    session = SimpleNamespace(storage=storage, json=None)
    guard_saving(session, print)
    machine = folder / "Linux-CPython-3.11-64bit"
    machine.mkdir(parents=True, exist_ok=True)
    return session, machine


@pytest.mark.parametrize("last", ["9999_old.json", "123456_old.json"])
def test_4_saves_past_9999_take_the_next_number_and_never_overwrite(tmp_path: Path, last: str) -> None:
    session, machine = _file_storage(tmp_path / "storage")
    (machine / last).write_text("{}", encoding="utf-8")
    for index in range(2):
        session.storage.save({"run": index}, "base")
    after = int(last.split("_")[0])
    names = sorted(path.name for path in machine.iterdir())
    assert names == sorted([last, f"{after + 1}_base.json", f"{after + 2}_base.json"])
    assert json.loads((machine / f"{after + 2}_base.json").read_text(encoding="utf-8")) == {"run": 1}


#: A pytest plugin for the sessions of test 5: a slow disk, as ``strace -e inject=fsync:delay_enter`` made
#: it, and more: each session's save into the storage waits in ``fsync`` until both sessions are there, so
#: both have counted the runs saved before either renames or links its own.
_BARRIER_PLUGIN = """
import os, time
from pathlib import Path

_real = os.fsync


def _fsync(handle):
    try:
        path = os.readlink(f"/proc/self/fd/{handle}")
    except OSError:
        path = ""
    if path.startswith(os.environ["LB32_STORAGE"]):
        barrier = Path(os.environ["LB32_BARRIER"])
        (barrier / str(os.getpid())).touch()
        deadline = time.monotonic() + 120
        while len(list(barrier.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    _real(handle)


os.fsync = _fsync
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to tell the storage's files")
def test_5_two_sessions_saving_at_once_both_keep_their_run(tmp_path: Path) -> None:
    """Two real pytest sessions measuring the tiny selection and saving into one storage at the same moment
    (``--benchmark-save=base``; autosave in one second is the same race): two runs saved, under two numbers.
    Before, both took 0001 and one run was lost, both sessions exiting 0."""
    (tmp_path / "lb32_barrier.py").write_text(_BARRIER_PLUGIN, encoding="utf-8")
    storage_folder = (tmp_path / "storage").resolve()
    (tmp_path / "barrier").mkdir()
    env = {
        **environment(tmp_path),
        "LB32_STORAGE": str(storage_folder),
        "LB32_BARRIER": str(tmp_path / "barrier"),
    }
    command = pytest_command(
        "--benchmark-only",
        "--benchmark-max-time=0.01",
        "--benchmark-save=base",
        f"--benchmark-storage={storage_folder}",
        "-p",
        "lb32_barrier",
    )
    sessions = [
        subprocess.Popen(
            command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(2)
    ]
    outputs = [session.communicate(timeout=300)[0] for session in sessions]
    assert [session.returncode for session in sessions] == [0, 0], outputs
    saved_runs = sorted(storage_folder.rglob("*_base.json"))
    assert [path.name for path in saved_runs] == ["0001_base.json", "0002_base.json"], outputs
    assert all(saved(path)["benchmarks"] for path in saved_runs)


# --- 6: the report published whole --------------------------------------------------------------------------

#: Run in a child process: a report command killed with SIGKILL at its Nth rename (a staged file or the
#: manifest moved into place) or as the new folder is swapped in (before or after), as ``strace -e
#: inject=rename:signal=KILL:when=N`` did; "renames N" when it ran to the end.
_KILLED_REPORT = """
import os, signal, sys
from pathlib import Path

from analysis import output
from analysis.__main__ import main

at = int(sys.argv[1])
count = 0


def step():
    global count
    count += 1
    if count == at:
        os.kill(os.getpid(), signal.SIGKILL)


real_replace = Path.replace
def replace(self, target):
    step()
    return real_replace(self, target)


Path.replace = replace
real_exchange = getattr(output, "_exchange", None)
if real_exchange is not None:
    def exchange(*args):
        step()
        swapped = real_exchange(*args)
        step()
        return swapped
    output._exchange = exchange
code = main(sys.argv[2:])
print("renames", count)
sys.exit(code)
"""


def _report_files(out: Path) -> dict[str, str]:
    """report.md and the figures in ``out``: relative path -> SHA-256."""
    found = [out / "report.md", *sorted((out / "figures").glob("*"))]
    return {
        str(path.relative_to(out)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in found
        if path.exists()
    }


def _killed_report(at: int, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _KILLED_REPORT, str(at), *argv],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=240,
        check=False,
    )


@pytest.mark.parametrize("others", [False, True], ids=["report-folder", "with-a-file-of-yours"])
def test_6_a_report_killed_at_any_step_leaves_the_old_or_the_new_and_the_next_runs(
    tmp_path: Path, others: bool
) -> None:
    """A report of other runs over an earlier one, killed (SIGKILL) at each step of putting it in place: the
    folder then holds the old report or the new one, whole (where it holds only the report's files: a new
    folder is swapped in), and the next report runs (before: "figures/….png was changed since this command
    wrote it", every time). With a file of the user's in the folder, files are moved one by one: the next
    report still runs and the user's file is left as it was."""
    old_runs, new_runs = storage(tmp_path / "a", [QUICK, RUNS[0]]), storage(tmp_path / "b", RUNS)
    out, cache = tmp_path / "out", tmp_path / "cache"
    common = ["--out", str(out), "--include-quick", "--no-samples", "--cache", str(cache)]
    assert main(["report", str(new_runs), *common]) == 0
    new = _report_files(out)
    shutil.rmtree(out)
    assert main(["report", str(old_runs), *common]) == 0
    old = _report_files(out)
    assert old.keys() != new.keys() or old != new
    if others:
        (out / "notes.md").write_text("mine", encoding="utf-8")
    pristine = tmp_path / "pristine"
    shutil.copytree(out, pristine, symlinks=True)
    whole = _killed_report(0, ["report", str(new_runs), *common])
    assert whole.returncode == 0, whole.stderr
    steps = int(whole.stdout.split()[-1])
    assert _report_files(out) == new
    # The first step, one halfway, the last two (the swap and the old folder's removal, where swapped).
    for at in sorted({steps // 2} if others else {1, steps // 2, steps - 1, steps}):
        shutil.rmtree(out)
        shutil.copytree(pristine, out, symlinks=True)
        killed = _killed_report(at, ["report", str(new_runs), *common])
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        if not others:
            assert _report_files(out) in (old, new), f"killed at step {at} of {steps}: a mix of both reports"
        again = subprocess.run(
            [sys.executable, "-m", "analysis", "report", str(new_runs), *common],
            capture_output=True,
            text=True,
            env=environment(),
            timeout=240,
            check=False,
        )
        assert again.returncode == 0, f"after a kill at step {at} of {steps}: {again.stderr}"
        assert _report_files(out) == new
        assert not others or (out / "notes.md").read_text(encoding="utf-8") == "mine"
        leftovers = [path.name for path in out.parent.iterdir() if path.name.startswith(".out.")]
        assert leftovers == [], leftovers


# --- 9: another suite's run --by framework ------------------------------------------------------------------


def test_9_another_suites_run_by_framework_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "foreign.json"
    write_json(path, foreign(QUICK))
    code, _, err = run_cli(["compare", str(path), "--by", "framework", "--no-cache"])
    assert code == 1 and "Traceback" not in err, err
    assert "--by framework" in err.splitlines()[-1]


# --- 14: an output subfolder that is a link -----------------------------------------------------------------


@pytest.mark.parametrize("command", ["report", "plot"])
def test_14_a_figures_folder_that_is_a_link_is_refused(tmp_path: Path, command: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "figures").symlink_to(elsewhere)
    code, _, err = run_cli([command, str(RUNS[0]), "--out", str(out), "--no-cache"])
    errors = [line for line in err.splitlines() if "error" in line]
    assert code == 1 and len(errors) == 1 and "symbolic link" in errors[0] and "Traceback" not in err, err
    assert list(elsewhere.iterdir()) == []
    assert sorted(path.name for path in out.iterdir()) == ["figures"]


# --- 17: a machine id that is not UTF-8 ---------------------------------------------------------------------


def test_17_a_machine_id_file_that_is_not_utf8_keeps_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import provenance

    broken = tmp_path / "machine-id"
    broken.write_bytes(b"\xff\xfe3c5f\x80not utf-8\n")
    monkeypatch.setattr(provenance, "MACHINE_ID_FILES", (broken,))
    faults: list[str] = []
    info = provenance.collect_machine_info(faults)
    assert not [fault for fault in faults if "collect_host" in fault], faults
    assert info["host"] and info["system"] and info["platform"]
    assert info["machine_fingerprint"] and not info["machine_id"].startswith("unknown-host")
    other = tmp_path / "other-id"
    other.write_bytes(b"\xff\xfe3c5f\x81not utf-8\n")
    monkeypatch.setattr(provenance, "MACHINE_ID_FILES", (other,))
    assert provenance.installation_fingerprint() != info["machine_fingerprint"]


def test_4_a_saved_run_gets_the_permissions_of_any_new_file(tmp_path: Path) -> None:
    session, machine = _file_storage(tmp_path / "storage")
    session.storage.save({"run": 1}, "base")
    (path,) = machine.iterdir()
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


def test_6_where_the_os_cannot_swap_two_folders_files_move_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system without ``RENAME_EXCHANGE`` (or another OS): the new folder's files go back to the
    staging folder and are moved one by one; nothing is left beside the output folder."""
    from analysis import output

    monkeypatch.setattr(output, "_exchange", lambda *_: False)
    out = tmp_path / "out"
    out.mkdir()
    for text in ("one", "two"):
        with output.staging(out) as stage:
            (stage / "figures").mkdir()
            (stage / "figures" / "a.png").write_text(f"A {text}", encoding="utf-8")
            (stage / "report.md").write_text(text, encoding="utf-8")
            published = output.publish_whole(stage, out, {"figures": "figures", "": "report"}, force=False)
        assert published.written == (out / "figures" / "a.png", out / "report.md")
        assert (out / "report.md").read_text(encoding="utf-8") == text
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]
    manifest = output.read_manifest(out)
    assert set(manifest.owners) == {"figures", "report"} and manifest.pending == {}
