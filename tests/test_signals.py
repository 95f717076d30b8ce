"""Signals during ``python -m analysis``: SIGTERM, SIGINT, Ctrl-C (SIGINT to the whole process group) and a
parent killed outright leave no process behind, and a stopped command says so in one line and leaves no
output folder half-made.

Each test starts ``python -m analysis report`` on 300 run files: 30 runs made by ``tools/fanout_runs.py``
from a real run of tests/data (made-up copies for timing the tools, marked synthetic in their
``machine_info``), each saved ten times under its own name (the loader parses every file, so the load lasts as
long as for 300 distinct runs, without the 300 jittered copies' cost), waits until the loader's worker
processes are there, signals, and then checks that every worker is gone.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QUICK = ROOT / "tests" / "data" / "cpu-2core-quick.json"
#: Distinct runs made by ``tools/fanout_runs.py``, and files saved of each: the files to load (workers start
#: from ``analysis.load.PARALLEL_MIN_FILES`` on; a load of 300 lasts long enough to be signalled).
COPIES = 30
FILES_PER_COPY = 10

pytestmark = [
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from Linux /proc"),
    pytest.mark.skipif(
        len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity") else True,
        reason="the loader starts worker processes only with 2 or more usable CPUs",
    ),
]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = importlib.util.spec_from_file_location("fanout_runs", ROOT / "tools" / "fanout_runs.py")
    fanout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fanout)
    out = tmp_path_factory.mktemp("fleet") / "runs"
    assert fanout.main([str(QUICK), str(out), "--copies", str(COPIES), "--machines", "2"]) == 0
    (folder,) = out.iterdir()
    for index, run in enumerate(sorted(folder.glob("*.json"))):
        for again in range(1, FILES_PER_COPY):
            shutil.copyfile(run, folder / f"{again * COPIES + index + 1:04d}_fleet.json")
    assert len(list(folder.glob("*.json"))) == COPIES * FILES_PER_COPY
    return out


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``: from each of its threads' ``/proc/PID/task/TID/children`` (a few
    small files; the tests poll this every few milliseconds while the command starts), else, on a kernel
    without those files, from every /proc/*/stat (the field after the state is the ppid), which costs a
    CPU-bound scan of every process on each poll."""
    try:
        threads = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []  # the process has ended and been reaped: no child is its own any more
    try:
        return [int(child) for task in threads for child in (task / "children").read_text().split()]
    except OSError:
        pass  # no such files on this kernel, or a thread ended while we looked: the full scan
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue  # ended while we looked
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def start(fleet: Path, out: Path) -> tuple[subprocess.Popen, list[int]]:
    """Start the report on the fleet; return it and its loader workers once they are running."""
    command = [sys.executable, "-m", "analysis", "report", str(fleet), "--include-quick", "--out", str(out)]
    process = subprocess.Popen(
        command,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a shell gives a command: Ctrl-C goes to all
        # A shell starts background jobs with SIGINT ignored, which Python then keeps: give the command the
        # default disposition, as a terminal does, whichever way these tests were started.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        workers = children(process.pid)
        if len(workers) >= 2:
            return process, workers
        time.sleep(0.005)
    process.kill()
    pytest.fail(f"the loader's workers never showed (exit {process.poll()}): {process.communicate()[1]!r}")


def gone(pids: list[int], within_s: float) -> list[int]:
    """The processes of ``pids`` still alive after waiting up to ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


@pytest.mark.parametrize(
    ("name", "send"),
    [
        ("SIGTERM", lambda process: process.send_signal(signal.SIGTERM)),
        ("SIGINT", lambda process: process.send_signal(signal.SIGINT)),
        ("SIGINT", lambda process: os.killpg(process.pid, signal.SIGINT)),  # Ctrl-C in a terminal
    ],
    ids=["kill -TERM", "kill -INT", "Ctrl-C"],
)
def test_a_signal_stops_the_command_and_its_workers(fleet: Path, tmp_path: Path, name: str, send) -> None:
    out = tmp_path / "report"
    process, workers = start(fleet, out)
    send(process)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.Signals[name].value, err
    assert err.decode().splitlines()[-1] == f"python -m analysis: stopped by {name} before it finished"
    assert b"Traceback" not in err
    assert gone(workers, within_s=10) == []
    assert not out.exists()  # created for the command, empty when it stopped: removed


def test_workers_of_a_killed_parent_end_by_themselves(fleet: Path, tmp_path: Path) -> None:
    """SIGKILL gives the parent no chance to end its workers: each notices its parent is gone."""
    process, workers = start(fleet, tmp_path / "report")
    process.kill()
    process.communicate(timeout=120)
    assert gone(workers, within_s=10) == []


def _zombie() -> subprocess.Popen:
    """A child process that has ended and is not yet reaped (its /proc state is Z): what a command killed
    outright is while the process that started it waits for its pipes."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert Path(f"/proc/{child.pid}/stat").exists(), "the child was reaped: no zombie to test"
    return child


def test_a_worker_whose_command_was_killed_before_it_started_ends(tmp_path: Path) -> None:
    """A worker forked just before its command was killed reads its parent's pid after the kill: its parent
    is then already not the command, and the command a zombie until it is reaped, which ``os.kill(pid, 0)``
    still reaches. The worker must end all the same (seen as a 120 s hang of the test above, the command's
    pipes held open by the worker)."""
    from analysis.signals import process_alive

    zombie = _zombie()
    try:
        assert not process_alive(zombie.pid)
        assert process_alive(os.getpid())
        worker = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import time; from analysis.load import _worker_start; _worker_start({zombie.pid}); "
                "time.sleep(60)",
            ],
            cwd=ROOT,
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert worker.returncode == 1, worker.stderr
    finally:
        zombie.wait()
    assert not process_alive(zombie.pid)
