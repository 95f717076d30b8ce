"""Hostile inputs and faults, round two (issue 21): one test per defect, each on real runs of tests/data
altered in the test, each holding what the issue asks: one line, the good data still used, nothing lost,
nothing written or deleted outside the output folder, no hang past a few seconds.

The numbers in the test names are the issue's. Subprocesses and signals are handled with the helpers of
``tests/test_signals.py`` (a fleet of runs, a command's loading workers) and ``tests/test_run_record.py``
(a child pytest measuring a tiny selection of the suite).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.foreign import load_cases
from analysis.load import load_runs
from analysis.output import MANIFEST_NAME, OutputError, locked, publish, read_manifest
from analysis.runs import select_runs, selection_lines
from analysis.trust import verdict
from benchmarks.outputs import write_run
from tests.test_load import write_json
from tests.test_run_record import TINY_CASES, environment, measure_and_signal, pytest_command, saved
from tests.test_signals import children, fleet, gone  # noqa: F401 (fleet: a fixture)
from tests.test_trust import with_record

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
FULL = DATA / "cpu-2core-full.json"
EPYC = DATA / "cpu-2core-epyc-full.json"
QUICK = DATA / "cpu-2core-quick.json"
PROG = "python -m analysis"


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``python -m analysis`` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def command(*args: str, **popen: object) -> subprocess.CompletedProcess:
    """``python -m analysis`` as a child process (as a shell starts it), with a time limit: a hang fails."""
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **popen}
    return subprocess.run(
        [sys.executable, "-m", "analysis", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        text=True,
        timeout=120,
        check=False,
        **streams,
    )


@contextlib.contextmanager
def pipes_released(pipes: list[Path], after_s: float = 60.0) -> Iterator[None]:
    """Run the body in this process with a guard against the defect a pipe invites: a read of it blocks until
    someone writes. After ``after_s``, each pipe is opened for writing and closed again, over and over, so a
    reader waiting on one gets end of file (and the test fails on what it read) instead of hanging the
    session; a command that never opens a pipe never sees this."""
    done = threading.Event()

    def release() -> None:
        if done.wait(after_s):
            return
        while not done.is_set():
            for pipe in pipes:
                with contextlib.suppress(OSError):  # ENXIO: no reader waiting on it
                    os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
            done.wait(0.05)

    guard = threading.Thread(target=release, daemon=True)
    guard.start()
    try:
        yield
    finally:
        done.set()
        guard.join()


def one_error_line(err: str) -> str:
    """The one error line of a failed command (no traceback, no other line)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith(f"{PROG}: error: "), err
    return lines[0]


def foreign(path: Path) -> dict:
    """A real run of tests/data as another suite's: its cases without launchbench's coordinates."""
    doc = saved(path)
    for bench in doc["benchmarks"]:
        bench["extra_info"] = {}
    return doc


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- 1: the manifest is input -------------------------------------------------------------------------------


def test_1_a_manifest_entry_outside_the_folder_is_refused_and_nothing_outside_is_removed(
    tmp_path: Path,
) -> None:
    keep = tmp_path / "keep.txt"
    keep.write_text("mine\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "old.png").write_text("figure\n")
    out = tmp_path / "rep"
    code, _, err = run_cli(["report", str(FULL), "--out", str(out)])
    assert code == 0, err
    (out / "linked").symlink_to(elsewhere)  # a folder of the output that leads out of it
    manifest = saved(out / MANIFEST_NAME)
    entries = {
        "../keep.txt": sha256(keep),
        str(keep): sha256(keep),
        "figures/../../keep.txt": sha256(keep),
        "..\\keep.txt": sha256(keep),
        "linked/old.png": sha256(elsewhere / "old.png"),
        "figures/x.png": "not a digest",
    }
    manifest["owners"]["report"].update(entries)
    manifest["owners"]["intruder"] = ["../keep.txt"]
    write_json(out / MANIFEST_NAME, manifest)
    checked = read_manifest(out)
    assert not set(entries) - {"linked/old.png"} & set(checked.owners["report"])
    code, out_text, err = run_cli(["report", str(FULL), "--out", str(out)])
    assert code == 0, err
    assert keep.read_text() == "mine\n" and (elsewhere / "old.png").read_text() == "figure\n"
    assert "removed" not in out_text
    warnings = err.splitlines()
    assert sum("refused" in line for line in warnings) == 6, err  # 5 entries and the owner that is no object
    assert all(line.startswith(f"{PROG}: warning: ") for line in warnings)
    rewritten = saved(out / MANIFEST_NAME)["owners"]
    assert "intruder" not in rewritten and not set(entries) & set(rewritten["report"])


# --- 2: a full disk at save ---------------------------------------------------------------------------------

SABOTAGE = """
import shutil
from pathlib import Path


def pytest_collection_finish(session):
    # After the start-up check: the storage and the JSON's folder become files, as a disk that fills up
    # while the cases run makes every write at the end fail.
    for name in ("store", "jsondir"):
        folder = Path.cwd() / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.write_text("in the way\\n")
"""


def test_2_a_save_that_fails_keeps_the_run_elsewhere_and_leaves_no_partial_file(tmp_path: Path) -> None:
    (tmp_path / "sabotage.py").write_text(SABOTAGE)
    (tmp_path / "jsondir").mkdir()
    fallback = tmp_path / "fallback"
    fallback.mkdir()
    done = subprocess.run(
        pytest_command(
            "-p",
            "sabotage",
            "--benchmark-only",
            "--benchmark-min-time=0.00001",
            "--benchmark-max-time=0.005",
            "--benchmark-autosave",
            f"--benchmark-storage={tmp_path / 'store'}",
            f"--benchmark-json={tmp_path / 'jsondir' / 'run.json'}",
        ),
        cwd=tmp_path,
        env={**environment(tmp_path), "TMPDIR": str(fallback)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    text = done.stdout + done.stderr
    assert "Traceback" not in text and "OSError" not in text, text
    assert done.returncode == 1, text  # every case passed, but the run is not where it was asked to be
    lines = [line for line in text.splitlines() if "launchbench: the run could not be saved" in line]
    assert len(lines) == 2, text
    kept = sorted(fallback.glob("launchbench-unsaved-*.json"))
    assert len(kept) == 2 and all(str(path) in text for path in kept)
    for path in kept:
        record = saved(path)["launchbench_run"]
        assert record["status"] == "completed" and record["cases"]["measured"] == TINY_CASES
    assert not list(fallback.glob(".*partial"))


def test_2_a_write_cut_short_leaves_nothing_under_the_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC in the middle of the write: no truncated file under the run's name, the run in the fallback."""
    target = tmp_path / "store" / "0001_run.json"
    target.parent.mkdir()
    fallback = tmp_path / "fallback"
    fallback.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(fallback))
    real_fsync = os.fsync
    calls = []

    def full_disk(handle: int) -> None:
        calls.append(handle)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        real_fsync(handle)

    monkeypatch.setattr(os, "fsync", full_disk)
    said: list[str] = []
    where = write_run(target, b'{"benchmarks": []}' * 1000, said.append)
    assert list(target.parent.iterdir()) == []
    assert where is not None and where.parent == fallback and where.read_bytes().startswith(b'{"bench')
    (line,) = said
    assert f"could not be saved to {target} (No space left on device)" in line and str(where) in line


def test_a_saved_run_gets_the_permissions_of_any_new_file(tmp_path: Path) -> None:
    """Written through a private temporary file, the run still ends up readable as the umask allows."""
    old = os.umask(0o022)
    try:
        where = write_run(tmp_path / "run.json", b"{}", lambda line: None)
    finally:
        os.umask(old)
    assert where == tmp_path / "run.json" and stat.S_IMODE(where.stat().st_mode) == 0o644


def test_2_a_file_size_limit_at_save_is_one_line_and_no_partial_file(tmp_path: Path) -> None:
    """``ulimit -f 16``: every write of the run fails (the fallback too, the limit is the process's): one
    line says the run is lost, and no truncated file is left under the storage's name."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))

    done = subprocess.run(
        pytest_command("--benchmark-only", "--benchmark-max-time=0.005", "--benchmark-json=run.json"),
        cwd=tmp_path,
        env={**environment(), "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        preexec_fn=limited,
    )
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text
    assert [line for line in text.splitlines() if "it is lost" in line], text
    assert not (tmp_path / "run.json").exists()
    assert not [path for path in tmp_path.iterdir() if "partial" in path.name or "unsaved" in path.name]


# --- 3 and 11: signals during a benchmark run ---------------------------------------------------------------


def test_3_sighup_saves_an_interrupted_run(tmp_path: Path) -> None:
    code, out = measure_and_signal(tmp_path, [signal.SIGHUP], 0)
    assert code == 2, out
    record = saved(tmp_path / "run.json")["launchbench_run"]
    assert (record["status"], record["interrupted_by"]) == ("interrupted", "SIGHUP")
    assert 1 <= record["cases"]["measured"] < record["cases"]["planned"]


def test_11_ctrl_c_twice_saves_the_run_once_marked_and_without_a_traceback(tmp_path: Path) -> None:
    code, out = measure_and_signal(tmp_path, [signal.SIGINT, signal.SIGINT], 0.3)
    assert "Traceback" not in out, out
    assert code == 2, out
    record = saved(tmp_path / "run.json")["launchbench_run"]
    assert (record["status"], record["interrupted_by"], record["exit_status"]) == (
        "interrupted",
        "SIGINT (Ctrl-C)",
        2,
    )


# --- 4: a dead loading worker -------------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from Linux /proc")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="workers start only with 2 or more CPUs")
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["kill -KILL", "kill -TERM"])
def test_4_a_killed_loading_worker_ends_the_command_with_one_line(fleet: Path, signum: int) -> None:  # noqa: F811
    process = subprocess.Popen(
        [sys.executable, "-m", "analysis", "compare", str(fleet), "--include-quick"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while time.monotonic() < deadline and process.poll() is None and len(workers) < 2:
        workers = children(process.pid)
        time.sleep(0.005)
    assert len(workers) >= 2, process.communicate()
    os.kill(workers[0], signum)
    try:
        _, err = process.communicate(timeout=60)  # a hang fails here
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    line = one_error_line(err.decode())
    assert "a loading worker process" in line and signal.Signals(signum).name in line
    assert process.returncode == 1
    assert gone(workers, within_s=10) == []


# --- 5: pipes, links, loops ---------------------------------------------------------------------------------


def test_5_a_pipe_a_broken_link_and_a_folder_named_json_are_named_and_skipped(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p.json")
    runs = tmp_path / "runs"
    runs.mkdir()
    write_json(runs / "good.json", saved(FULL))
    os.mkfifo(runs / "q.json")
    (runs / "broken.json").symlink_to(tmp_path / "nowhere")
    (runs / "dir.json").mkdir()
    with pipes_released([tmp_path / "p.json", runs / "q.json"]):  # a pipe read would block: released
        code, out, err = run_cli(["compare", str(tmp_path / "p.json"), str(runs)])
    assert code == 0, err
    warnings = err.splitlines()
    for name, what in [
        ("p.json", "a pipe"),
        ("runs/q.json", "a pipe"),
        ("runs/broken.json", "broken link"),
        ("runs/dir.json", "a folder"),
    ]:
        assert any(str(tmp_path / name) in line and what in line for line in warnings), (name, warnings)
    assert f"Runs used: 1 (1 machine): {runs / 'good.json'}" in out


def test_5_a_recursive_glob_does_not_follow_link_loops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "gl"
    (tree / "a" / "b").mkdir(parents=True)
    write_json(tree / "a" / "b" / "run.json", saved(FULL))
    for index, up in enumerate(["..", "../..", "../../.."]):
        (tree / "a" / "b" / f"loop{index}").symlink_to(up)
    by_glob = load_runs([f"{tree}/**/*.json"], samples=False)
    by_folder = load_runs([tree], samples=False)
    assert by_glob.files_used == by_folder.files_used == (tree / "a" / "b" / "run.json",)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["compare", "gl/**/*.json"])
    assert code == 0 and "Runs used: 1" in out, err


# --- 6: two commands into one folder ------------------------------------------------------------------------


def test_6_a_second_command_into_a_folder_being_written_is_refused_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    out.mkdir()
    with locked(out):
        code, _, err = run_cli(["report", str(FULL), "--out", str(out)])
    assert code == 1
    assert "is being written by another command right now" in one_error_line(err)
    code, _, err = run_cli(["report", str(FULL), "--out", str(out)])
    assert code == 0, err


def test_6_two_reports_at_once_never_raise(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "analysis", "report", str(FULL), "--out", str(out)],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(process.wait(timeout=120), process.communicate()[1]) for process in started]
    assert all("Traceback" not in err for _, err in results), results
    assert 0 in [code for code, _ in results]
    for code, err in results:
        if code:
            assert "being written by another command" in one_error_line(err)
    assert (out / "report.md").is_file() and not list(out.glob(".launchbench-staging-*"))


# --- 7 and 13: another suite's absurd numbers ---------------------------------------------------------------


def test_7_13_another_suites_absurd_numbers_are_one_line_each_and_the_good_run_is_used(
    tmp_path: Path,
) -> None:
    bad = foreign(FULL)
    absurd = {0: ("min", 10**400), 1: ("median", 10**400), 2: ("mean", 10**400), 4: ("min", 1e300)}
    for index, (key, value) in absurd.items():
        bad["benchmarks"][index]["stats"][key] = value
    bad["benchmarks"][3]["stats"]["data"][0] = 10**400
    bad["benchmarks"][5]["stats"]["min"] = 5e-324
    bad_path = write_json(tmp_path / "runs" / "bad.json", bad)
    good_path = write_json(tmp_path / "runs" / "good.json", foreign(EPYC))
    cases = load_cases([good_path, bad_path], samples=True)
    assert len(cases.frame[cases.frame["source"] == str(good_path)]) == len(saved(EPYC)["benchmarks"])
    bad_rows = cases.frame[cases.frame["source"] == str(bad_path)]
    assert len(bad_rows) == len(bad["benchmarks"]) - 4  # min, median, 1e300 and 5e-324 dropped
    assert bad_rows["mean"].isna().sum() == 1  # an absurd mean is left empty, the case stays
    assert all(len(line) < 400 and "\n" not in line for line in cases.problems)
    assert sum("dropped" in line for line in cases.problems) == 4
    code, out, err = run_cli(["compare", str(good_path), str(bad_path)])
    assert code == 0, err
    assert max(map(len, out.splitlines())) < 400
    code, out, err = run_cli(["plot", str(good_path), str(bad_path), "--out", str(tmp_path / "plot")])
    assert code == 0, err


def test_13_a_share_of_the_cpus_time_above_one_is_not_printed(tmp_path: Path) -> None:
    for share in (3.0, 1e300):
        run = {"other_cpu_share": share, "steal_share": share, "usable_cpus": 2}
        assert verdict(run) is None
    assert "%" in (verdict({"other_cpu_share": 0.5, "usable_cpus": 2}) or "")


# --- 8: a grouping that names no fact -----------------------------------------------------------------------


@pytest.mark.parametrize("by", [".", "", "..."])
def test_8_a_by_that_names_no_fact_is_a_usage_line(by: str) -> None:
    code, _, err = run_cli(["compare", str(FULL), "--by", by])
    assert code == 2
    assert err.strip().startswith(f"{PROG} compare: error: argument --by: ") and "names no fact" in err
    assert len(err.strip().splitlines()) == 1


# --- 9 and 10: writes and paths the OS refuses --------------------------------------------------------------


def test_9_stdout_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    with Path("/dev/full").open("w") as full:
        done = command("compare", str(FULL), stdout=full)
    assert done.returncode == 1
    assert "writing to standard output failed (No space left on device)" in one_error_line(done.stderr)
    closed = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m analysis compare "{FULL}" >&-'],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert closed.returncode == 1
    assert "standard output is closed" in one_error_line(closed.stderr)


def test_9_a_file_size_limit_while_writing_the_report_is_one_line_and_keeps_the_earlier_one(
    tmp_path: Path,
) -> None:
    """The earlier report's figures are SVG, the one cut short writes PNG (another report.md, other figure
    files): had any of it been published, the files would differ. Its run is the one the tests before
    reported in this process (their results kept by ``analysis.memo``), so the command spends its time
    starting and writing rather than recomputing them."""
    out = tmp_path / "rep"
    assert run_cli(["report", str(FULL), "--formats", "svg", "--out", str(out)])[0] == 0
    before = {path: sha256(path) for path in out.rglob("*") if path.is_file()}

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (50 * 1024, 50 * 1024))  # ulimit -f 50

    done = command("report", str(FULL), "--out", str(out), preexec_fn=limited)
    assert done.returncode == 1
    assert "failed (File too large)" in one_error_line(done.stderr)
    assert {path: sha256(path) for path in out.rglob("*") if path.is_file()} == before


def test_10_paths_the_os_refuses_are_one_line(tmp_path: Path) -> None:
    long_name = str(tmp_path / ("x" * 300))
    code, _, err = run_cli(["report", str(FULL), "--out", long_name])
    assert code == 1 and "File name too long" in one_error_line(err)
    code, _, err = run_cli(["compare", long_name + ".json", str(FULL)])
    assert code == 0 and "File name too long" in err and "Traceback" not in err
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    code, _, err = run_cli(["report", str(FULL), "--out", str(tmp_path / "loop" / "rep")])
    assert code == 1
    one_error_line(err)


# --- 12: a case's samples are its own -----------------------------------------------------------------------


@pytest.mark.parametrize("samples", [False, True, "predicate"])
def test_12_an_extra_info_data_list_never_stands_in_for_the_samples(tmp_path: Path, samples: object) -> None:
    doc = saved(FULL)
    for bench in doc["benchmarks"]:
        bench["stats"]["data"] = None
        bench["extra_info"]["data"] = [0.001, 0.002, 0.00781]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc, indent=4), encoding="utf-8")
    wanted = (lambda bench: True) if samples == "predicate" else samples
    loaded = load_runs([path], samples=wanted)
    assert len(loaded.frame) == len(doc["benchmarks"])
    assert loaded.frame["data"].isna().all()
    code, out, err = run_cli(["compare", str(path), str(EPYC)])
    assert code == 0, err
    assert "changed" in out or "inconclusive" in out  # no samples: judged on each run's statistics


# --- 14: control characters from a file ---------------------------------------------------------------------


def test_14_control_characters_from_a_file_never_reach_the_terminal_raw(tmp_path: Path) -> None:
    launchbench = saved(FULL)
    launchbench["machine_info"]["node"] = "host\nFAKE line"
    launchbench["machine_info"]["launchbench"] = {}
    runs = write_json(tmp_path / "new\nline\x1b[2J.json", launchbench)
    code, out, err = run_cli(["compare", str(runs), str(EPYC), "--by", "host"])
    assert code == 0, err
    assert "\x1b" not in out + err
    assert not any(line.startswith(("FAKE", "line")) for line in (out + err).splitlines())
    other, good_doc = foreign(FULL), foreign(EPYC)
    for doc in (other, good_doc):  # one case of both runs named with an escape sequence
        (bench,) = [bench for bench in doc["benchmarks"] if bench["name"] == other["benchmarks"][0]["name"]]
        bench["fullname"] = "test_x\x1b[2J\x1b[31m"
    other["machine_info"]["node"] = "host\nFAKE line"
    good = write_json(tmp_path / "good.json", good_doc)
    code, out, err = run_cli(["compare", str(write_json(tmp_path / "other.json", other)), str(good)])
    assert code == 0, err
    assert "test_x" in out  # the case is shown, escaped
    assert "\x1b" not in out + err
    assert not any(line.startswith(("FAKE", "line")) for line in (out + err).splitlines())


# --- 15: a link into the storage ----------------------------------------------------------------------------


def test_15_a_linked_input_is_rooted_where_it_points(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_json(store / "Linux-CPython-3.11-64bit" / "0001_run.json", saved(FULL))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "link.json").symlink_to(store / "Linux-CPython-3.11-64bit" / "0001_run.json")
    before = sorted(store.rglob("*"))
    code, _, err = run_cli(["report", str(elsewhere / "link.json"), "--out", str(store / "rep")])
    assert code == 1
    assert "the run storage" in one_error_line(err)
    assert sorted(store.rglob("*")) == before


# --- 16: small ----------------------------------------------------------------------------------------------


def test_16_counts_are_whole_and_an_interrupted_selection_is_not_complete(tmp_path: Path) -> None:
    doc = saved(FULL)
    names = [bench["fullname"] for bench in doc["benchmarks"]]
    interrupted = with_record(
        doc,
        status="interrupted",
        interrupted_by="SIGINT (Ctrl-C)",
        selection={"args": [], "keyword": "decode", "markexpr": None, "deselected": 3},
        cases={"planned": 35, "measured": 10, "unfinished": names[:2]},
    )
    legacy = saved(EPYC)  # no run record: its counts are missing, so the column holds floats
    paths = [write_json(tmp_path / "a.json", interrupted), write_json(tmp_path / "b.json", legacy)]
    selection = select_runs(load_runs(paths, samples=False))
    (line,) = [line for line in selection.left_out if "a.json" in line]
    assert ": 10 of 35 planned cases measured" in line
    pooled = select_runs(load_runs(paths, samples=False), include_partial=True)
    assert not any("complete for what it selected" in line for line in selection_lines(pooled))


def test_publish_never_acts_on_a_refused_manifest_entry(tmp_path: Path) -> None:
    """``publish`` itself: a stale entry outside the folder is refused in ``kept``, never removed."""
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("x")
    write_json(out / MANIFEST_NAME, {"version": 1, "owners": {"report": {"../victim.txt": sha256(victim)}}})
    stage = tmp_path / "stage"
    (stage / "a.txt").parent.mkdir()
    (stage / "a.txt").write_text("a")
    done = publish(stage, out, "report", force=False)
    assert victim.exists() and done.removed == ()
    assert any("../victim.txt" in line and "refused" in line for line in done.kept)
    (out / "a.txt").write_text("edited")
    (stage / "a.txt").write_text("a")
    with pytest.raises(OutputError, match="changed since this command wrote it"):
        publish(stage, out, "report", force=False)


def test_16_a_path_on_an_ascii_terminal_is_escaped_never_spelled_as_another_name(tmp_path: Path) -> None:
    """µ has an ASCII spelling for units (u); in a file's name it must stay tellable: a backslash escape."""
    missing = tmp_path / "µs.json"
    done = subprocess.run(
        [sys.executable, "-m", "analysis", "compare", str(missing), str(FULL), "--no-samples"],
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "ascii"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0
    assert f"{tmp_path}/\\xb5s.json: no such file or folder" in done.stderr
    assert f"{tmp_path}/us.json" not in done.stderr + done.stdout
