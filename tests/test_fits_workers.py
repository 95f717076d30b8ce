"""The machines' fits made side by side (``analysis.fits``): in forked worker processes, which inherit the
frame, where the command may fork (no JAX or PyTorch loaded), else in threads; the tables are those of
fitting the machines one after another, the comparison table started by a worker beside them is the table
made after them, and a worker killed while it fits is one line, not a hang.

Each check runs in a fresh interpreter: JAX, which other tests of a session load, makes the command fit in
threads, and the forked path is the one a user's command takes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_plots_collisions import DATA, _fanout

#: A fleet of full runs of today's layout, three machines of four runs each: every family fitted per machine.
MACHINES = 3


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _fanout(
        DATA / "fanout" / "epyc-full-5ed37fa.json",
        tmp_path_factory.mktemp("fleet") / "fleet",
        MACHINES,
        MACHINES * 4,
    )


def _run(program: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", program, *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).resolve().parents[1],
        check=False,
    )


#: Fits the fleet with forked workers (counting the forked calls) and one machine after another (a single
#: usable CPU), with and without a memo; prints "same" when every table is equal.
_SAME_FITS = """
import sys
from pathlib import Path
from unittest import mock
import pandas as pd
import analysis.fits as fits
from analysis.load import forks, load_runs, pool_context
from analysis.memo import Memo
from analysis.runs import select_runs

fleet, folder = sys.argv[1:]
assert forks(pool_context()), "a fresh interpreter forks"
frame = select_runs(load_runs([fleet], samples=True), include_quick=True).result.frame
forked = []
real = fits._forked_fits
with mock.patch.object(fits, "_forked_fits", lambda *args: forked.append(len(args[1])) or real(*args)):
    side_by_side = fits.fit_all(frame, predictions=False)
    kept = fits.fit_all(frame, predictions=False, memo=Memo(Path(folder)))
with mock.patch.object(fits, "usable_cpus", lambda: 1):
    serial = fits.fit_all(frame, predictions=False)
assert forked == [6, 6], forked  # two families of three machines, each time in one pool
for name in ("host", "calls"):
    assert not getattr(serial, name).empty, name
    pd.testing.assert_frame_equal(getattr(side_by_side, name), getattr(serial, name))
    pd.testing.assert_frame_equal(getattr(kept, name), getattr(serial, name))
# The call beside the fits is made by a forked worker, and only there.
import os
forked_beside, serial_beside = fits.Beside((os.getpid, ())), fits.Beside((os.getpid, ()))
fits.fit_all(frame, predictions=False, beside=forked_beside)
with mock.patch.object(fits, "usable_cpus", lambda: 1):
    fits.fit_all(frame, predictions=False, beside=serial_beside)
assert len(forked_beside.result) == 1 and forked_beside.result[0] != os.getpid(), forked_beside.result
assert serial_beside.result == [], serial_beside.result
# The table started beside the machines' fits (its measured figures' evidence first) is the same table.
from analysis.compare import figure_table, fitted_and_started
plain = figure_table(frame, serial, None)
assert plain.attrs["verdicts"].judged > 0
started_fits, start = fitted_and_started(frame, plain.attrs["baseline"])
assert start is not None and start.measured
started = figure_table(frame, started_fits, None, start=start)
pd.testing.assert_frame_equal(started, plain)
pd.testing.assert_frame_equal(figure_table(frame, started_fits, None, start=start), plain)  # a start twice
assert started.attrs["verdicts"].marks == plain.attrs["verdicts"].marks
assert started.attrs["verdicts"].adjusted_p == plain.attrs["verdicts"].adjusted_p
print("same")
"""


#: A fitting worker killed (the OOM killer, by hand): ``fit_all`` raises ``WorkerLost``, printed here.
_KILLED_FITTING = """
import os, signal, sys
from unittest import mock
import analysis.fits as fits
from analysis.load import load_runs
from analysis.runs import select_runs
from analysis.signals import WorkerLost

frame = select_runs(load_runs([sys.argv[1]], samples=False), include_quick=True).result.frame

def killed(rows):
    os.kill(os.getpid(), signal.SIGKILL)

with mock.patch.object(fits, "fit_host", killed):
    try:
        fits.fit_all(frame, predictions=False)
    except WorkerLost as lost:
        print(lost)
        sys.exit(0)
sys.exit("no WorkerLost: the killed worker went unnoticed")
"""


def test_a_fitting_worker_killed_is_one_line_not_a_hang(fleet: Path) -> None:
    done = _run(_KILLED_FITTING, str(fleet))
    assert done.returncode == 0, done.stdout + done.stderr
    line = done.stdout.strip()
    assert line.startswith("a fitting worker process") and "\n" not in line
    assert "ended before its machines were fitted (killed? out of memory?)" in line
    assert "fork() was called" not in done.stderr


#: Where the platform starts workers by "spawn" (macOS; "forkserver" on Linux from Python 3.14) they inherit
#: nothing: the machines are fitted in threads and the figures' workers are sent their data. Prints "same"
#: when the fits equal those fitted one after another and every figure was written.
_SPAWNED = """
import multiprocessing, sys
from pathlib import Path
from unittest import mock
import pandas as pd
multiprocessing.set_start_method("spawn")
import analysis.fits as fits
from analysis.compare import figure_table
from analysis.figures import write_figures
from analysis.load import forks, load_runs, pool_context
from analysis.runs import select_runs

fleet, out = sys.argv[1:]
assert not forks(pool_context())
frame = select_runs(load_runs([fleet], samples=True), include_quick=True).result.frame
with mock.patch.object(fits, "_forked_fits", side_effect=AssertionError("forked where nothing is inherited")):
    side_by_side = fits.fit_all(frame)
with mock.patch.object(fits, "usable_cpus", lambda: 1):
    serial = fits.fit_all(frame)
for name in ("host", "calls", "many_vs_one"):
    pd.testing.assert_frame_equal(getattr(side_by_side, name), getattr(serial, name))
table = figure_table(frame, side_by_side, None)
paths = write_figures(frame, side_by_side, table, Path(out), ("png",), workers=2)
assert paths and all(path.stat().st_size > 0 for path in paths), paths
print("same")
"""


@pytest.mark.parametrize("program", [_SAME_FITS, _SPAWNED], ids=["forked", "spawned"])
def test_machines_fitted_side_by_side_give_the_tables_fitted_one_after_another(
    fleet: Path, tmp_path: Path, program: str
) -> None:
    done = _run(program, str(fleet), str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "same"
