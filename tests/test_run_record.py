"""The run record and the run's own safety nets: every key of ``launchbench_run``, checked on real pytest runs
of the CPU suite (a few cases, short budgets) in subprocesses: a ``-k`` selection, ``-x`` after a failure,
Ctrl-C and SIGTERM mid-run, a machine made busy by spinning processes this test starts, storage that cannot
be written, a terminal summary that fails, a GPU that fails after the probe. And the pieces underneath, on
files made in ``tmp_path``.

Correctness only: what is recorded and saved, never how fast anything ran.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from analysis.load import load_runs
from analysis.runs import QUICK_MARK, select_runs
from benchmarks import outputs, run_record
from benchmarks.run_record import RUN_RECORD_KEY, RunRecord, between, cpu_frequencies_hz, cpu_ticks

REPO = Path(__file__).resolve().parents[1]
NUMPY_CALLS = str(REPO / "benchmarks" / "test_numpy_calls.py")
CONTRACT_DOC = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
#: Five sizes and one many-vs-one case (views and slices): seven cases, in this order.
TINY = "n1-x64 or n16-x64 or n256-x64 or n4096-x16 or n65536-x1 or pieces16]"
TINY_CASES = 7
#: A fraction of a second per case: the run takes about as long as Python takes to start.
SHORT = ("--benchmark-min-time=0.00001", "--benchmark-max-time=0.005")

RECORD_KEYS = {
    "version",
    "quick",
    "selection",
    "benchmark_options",
    "status",
    "interrupted_by",
    "exit_status",
    "started",
    "ended",
    "cases",
    "conditions",
    "facts",
    "faults",
    "sentinel",
}
CASES_KEYS = {"planned", "measured", "failed", "skipped", "not_run", "skip_reasons", "unfinished"}
CONDITIONS_KEYS = {"usable_cpus", "start", "end", "during", "gpu_slowdown"}
SNAPSHOT_KEYS = {"time", "load_avg", "cpu_freq_hz", "governor", "gpu"}
DURING_KEYS = {"wall_s", "other_cpu_s", "other_cpu_share", "steal_s", "steal_share"}


def pytest_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", NUMPY_CALLS, "-k", TINY, "-p", "no:cacheprovider", *args]


def environment(*extra_paths: Path) -> dict[str, str]:
    """A child pytest's environment: this repository (and ``extra_paths``) importable, output unbuffered."""
    paths = [*map(str, extra_paths), str(REPO)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONUNBUFFERED": "1"}


def run_pytest(cwd: Path, *args: str, extra_paths: tuple[Path, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run(
        pytest_command(*args),
        cwd=cwd,
        env=environment(*extra_paths),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def saved(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def measure_and_signal(tmp_path: Path, signums: list[int], apart_s: float) -> tuple[int, str]:
    """A child pytest measuring the tiny selection, sent ``signums`` (``apart_s`` apart) once its first case
    passed, so that they interrupt the next ones; its exit code and output."""
    process = subprocess.Popen(
        pytest_command("--benchmark-only", "--benchmark-max-time=0.5", "-v", "--benchmark-json=run.json"),
        cwd=tmp_path,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # A shell starts background jobs with SIGINT ignored, and Python then installs no KeyboardInterrupt
        # handler: give the child the default disposition, as a terminal's pytest has.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines = []
    try:
        for line in process.stdout:
            lines.append(line)
            if " PASSED" in line:
                for index, signum in enumerate(signums):
                    if index:
                        time.sleep(apart_s)
                    process.send_signal(signum)
                break
        lines.extend(process.stdout)
        process.wait(timeout=120)
    finally:
        process.kill()
    return process.returncode, "".join(lines)


# --- whole runs -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """A quick run of a -k selection, saved by --benchmark-autosave (./.benchmarks) and --benchmark-json."""
    cwd = tmp_path_factory.mktemp("runs")
    done = run_pytest(
        cwd, "--quick", "--benchmark-only", *SHORT, "--benchmark-autosave", "--benchmark-json=first.json"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return cwd, done


def test_a_selected_quick_run_records_every_key(first_run: tuple[Path, subprocess.CompletedProcess]) -> None:
    cwd, done = first_run
    doc = saved(cwd / "first.json")
    record = doc[RUN_RECORD_KEY]
    assert set(record) == RECORD_KEYS
    assert record["version"] == run_record.RUN_RECORD_VERSION
    assert record["quick"] is True
    # As many deselected as pytest says: 9, or 10 where the LLC is large enough to add a DRAM size.
    deselected = re.findall(r"(\d+) deselected", done.stdout)[-1]  # pytest's closing line
    assert record["selection"] == {
        "args": [NUMPY_CALLS],
        "keyword": TINY,
        "markexpr": None,
        "deselected": int(deselected),
    }
    assert int(deselected) in (9, 10)
    assert record["benchmark_options"]["max_time"] == "5.00ms"  # pytest-benchmark's own text of the option
    assert (record["status"], record["interrupted_by"], record["exit_status"]) == ("completed", None, 0)
    assert record["started"] <= record["ended"]
    cases = record["cases"]
    assert set(cases) == CASES_KEYS
    assert cases == {
        "planned": TINY_CASES,
        "measured": TINY_CASES,
        "failed": 0,
        "skipped": 0,
        "not_run": 0,
        "skip_reasons": {},
        "unfinished": [],
    }
    conditions = record["conditions"]
    assert set(conditions) == CONDITIONS_KEYS
    assert conditions["usable_cpus"] == len(os.sched_getaffinity(0))
    for when in ("start", "end"):
        assert set(conditions[when]) >= SNAPSHOT_KEYS
        assert conditions[when]["gpu"] is None  # no GPU on this machine: the key says so, nothing else
    if hasattr(os, "getloadavg"):
        assert len(conditions["start"]["load_avg"]) == 3
    during = conditions["during"]
    assert set(during) == DURING_KEYS
    assert during["wall_s"] > 0
    if Path("/proc/stat").exists():
        assert during["other_cpu_share"] >= 0 and during["steal_share"] >= 0
    assert conditions["gpu_slowdown"] == []
    assert (record["facts"], record["faults"]) == ({}, [])
    # py-cpuinfo's clock of the moment left machine_info for the record's start snapshot.
    assert not {"hz_actual", "hz_actual_friendly"} & set(doc["machine_info"]["cpu"])
    assert "load_avg" not in doc["machine_info"]["launchbench"]
    assert "launchbench summary" in done.stdout


def test_every_record_key_is_documented_in_the_contract_page() -> None:
    section = CONTRACT_DOC
    for key in RECORD_KEYS | CASES_KEYS | CONDITIONS_KEYS | SNAPSHOT_KEYS | DURING_KEYS:
        assert f"`{key}`" in section, key


def test_a_second_run_has_the_same_machine_info_and_compare_stays_quiet(
    first_run: tuple[Path, subprocess.CompletedProcess],
) -> None:
    """Two autosaved runs on one machine, the second compared with the first by pytest-benchmark: no
    machine_info warning, identical machine_info. The second run is made on a busy machine (one spinning
    process per usable CPU, started and stopped here): its record and its summary say so.

    The spinners run at the lowest priority (nice 19): they take every CPU the run and the machine's other
    work leave idle, so the run still sees other processes' CPU time (the record counts nice time as busy),
    but they neither slow the run down nor take the CPUs of the tests beside it (pytest-xdist's other
    workers), which at normal priority they did for the whole run."""
    cwd, _ = first_run
    spin = "import os; os.nice(19)\nwhile True: pass"
    spinners = [subprocess.Popen([sys.executable, "-c", spin]) for _ in os.sched_getaffinity(0)]
    try:
        time.sleep(0.5)  # let them take their CPUs before the run's first snapshot
        done = run_pytest(
            cwd,
            "--quick",
            "--benchmark-only",
            "--benchmark-min-time=0.00001",
            "--benchmark-max-time=0.1",  # long enough for the scheduler to share the CPUs
            "--benchmark-autosave",
            "--benchmark-compare=0001",
            "--benchmark-json=second.json",
        )
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "Comparing against benchmarks from" in out
    assert "machine_info is different" not in out
    first, second = saved(cwd / "first.json"), saved(cwd / "second.json")
    assert first["machine_info"] == second["machine_info"]
    (autosaved,) = (cwd / ".benchmarks").glob("*/0001_*.json")
    assert saved(autosaved)["machine_info"] == first["machine_info"]
    # The busy machine is measured and judged.
    during = second[RUN_RECORD_KEY]["conditions"]["during"]
    if during["other_cpu_share"] is None:
        pytest.skip("no /proc/stat: other processes' CPU time cannot be measured here")
    assert during["other_cpu_share"] >= 0.25, during
    assert "Busy machine: other processes took" in done.stdout
    assert "figures may be inflated" in done.stdout


def test_a_run_saved_twice_counts_once_and_quick_runs_stay_out(
    first_run: tuple[Path, subprocess.CompletedProcess],
) -> None:
    cwd, _ = first_run
    (autosaved,) = (cwd / ".benchmarks").glob("*/0001_*.json")
    result = load_runs([autosaved, cwd / "first.json"], samples=True)
    selection = select_runs(result)
    # The machine's only (quick) run is used, its id marked quick; a full run of it would win.
    assert list(selection.result.runs["source"]) == [str(cwd / "first.json")]
    assert selection.result.runs["machine_id"][0].endswith(QUICK_MARK)
    duplicate = (
        f"{autosaved}: left out: the same measurements as {cwd / 'first.json'} (a copy or a second save of "
        "one run): counted once"
    )
    assert selection.left_out == (duplicate,)  # the copy with raw samples is the one kept
    selection = select_runs(result, include_quick=True)
    assert list(selection.result.runs["source"]) == [str(cwd / "first.json")]
    assert selection.left_out == (duplicate,)


def test_x_after_a_failure_saves_the_measured_cases_as_a_partial_run(tmp_path: Path) -> None:
    plugin = tmp_path / "fail_one.py"
    plugin.write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.hookimpl(tryfirst=True)
            def pytest_runtest_call(item):
                if "n256-" in item.nodeid:
                    raise AssertionError("made to fail by tests/test_run_record.py")
            """
        )
    )
    done = run_pytest(
        tmp_path, "--benchmark-only", *SHORT, "-x", "-p", "fail_one", "--benchmark-json=run.json",
        extra_paths=(tmp_path,),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    doc = saved(tmp_path / "run.json")
    record = doc[RUN_RECORD_KEY]
    assert record["status"] == "interrupted"
    assert record["interrupted_by"] == "stopping after 1 failures"
    assert record["exit_status"] == 1
    cases = record["cases"]
    assert (cases["planned"], cases["measured"], cases["failed"], cases["not_run"]) == (TINY_CASES, 2, 1, 4)
    failed = [case for case in cases["unfinished"] if "n256-" in case]
    assert len(failed) == 1 and len(cases["unfinished"]) == 5
    assert len(doc["benchmarks"]) == 2
    assert "Interrupted by stopping after 1 failures: 2 of 7 planned cases measured" in done.stdout
    selection = select_runs(load_runs([tmp_path / "run.json"], samples=True), include_partial=True)
    assert len(selection.result.frame) == 2  # its finished cases, pooled only when asked for


@pytest.mark.parametrize(("signum", "by"), [(signal.SIGINT, "SIGINT (Ctrl-C)"), (signal.SIGTERM, "SIGTERM")])
def test_an_interrupted_run_is_saved_and_marked(tmp_path: Path, signum: int, by: str) -> None:
    """Ctrl-C or SIGTERM after the first case: the cases measured so far are saved, the run is marked
    interrupted, and analysis leaves it out unless asked."""
    code, out = measure_and_signal(tmp_path, [signum], 0)
    assert code == 2, out  # pytest's "interrupted"
    record = saved(tmp_path / "run.json")[RUN_RECORD_KEY]
    assert (record["status"], record["interrupted_by"]) == ("interrupted", by)
    cases = record["cases"]
    assert 1 <= cases["measured"] < cases["planned"] == TINY_CASES
    assert cases["unfinished"] and cases["not_run"] >= 1
    assert f"Interrupted by {by}" in out
    result = load_runs([tmp_path / "run.json"], samples=True)
    selection = select_runs(result)
    assert selection.result.frame.empty
    (line,) = selection.left_out
    assert f"left out: a partial run (interrupted by {by}" in line
    assert "--include-partial pools it" in line
    pooled = select_runs(result, include_partial=True).result.frame
    assert not set(pooled["fullname"]) & set(cases["unfinished"])  # a case cut off stays out


def test_unwritable_outputs_stop_the_run_before_anything_is_measured(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    done = run_pytest(
        tmp_path,
        "--benchmark-only",
        "--benchmark-autosave",
        f"--benchmark-storage={blocker / 'storage'}",
        f"--benchmark-json={tmp_path / 'missing' / 'run.json'}",
    )
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert line.startswith("ERROR: --benchmark-json: ")
    assert f"its folder {tmp_path / 'missing'} does not exist" in line
    assert f"{blocker} is a file, not a folder" in line
    assert line.endswith("nothing was measured")
    assert "passed" not in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_a_failing_gpu_collector_and_a_failing_summary_lose_nothing(tmp_path: Path) -> None:
    """A GPU collector that raises (whatever the device did: ``tests/fake_gpu`` covers a GPU failing after
    the probe, in tests/test_cuda_skip.py) and an analysis that raises in the terminal summary: the CPU cases
    are saved, the error is in machine_info and in the record's faults, and pytest ends normally with one
    line about the summary."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "break_gpu_and_summary.py").write_text(
        textwrap.dedent(
            """
            import analysis.summary
            import benchmarks.cuda


            def failing_gpu_info(*args, **kwargs):
                raise RuntimeError("cudaErrorLaunchFailure: made to fail by tests/test_run_record.py")


            def broken(*args, **kwargs):
                raise MemoryError("made by the test")


            benchmarks.cuda.gpu_info = failing_gpu_info
            analysis.summary.summary_lines = broken
            """
        )
    )
    done = run_pytest(
        tmp_path, "--benchmark-only", *SHORT, "-p", "break_gpu_and_summary", "--benchmark-json=run.json",
        extra_paths=(plugins,),
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Traceback" not in out
    assert "launchbench summary failed: MemoryError: made by the test" in done.stdout
    doc = saved(tmp_path / "run.json")
    assert len(doc["benchmarks"]) == TINY_CASES
    gpu = doc["machine_info"]["launchbench"]["gpu"]
    assert gpu == {"error": "RuntimeError: cudaErrorLaunchFailure: made to fail by tests/test_run_record.py"}
    assert doc["machine_info"]["launchbench"]["machine_id"].endswith(" / GPU unreadable")
    faults = doc[RUN_RECORD_KEY]["faults"]
    assert any("collect_gpu failed" in fault for fault in faults), faults


# --- the pieces underneath ----------------------------------------------------------------------------------


def test_cpu_ticks_sum_busy_and_steal_of_the_chosen_cpus(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal (clock ticks), as /proc/stat writes them
    stat.write_text(
        "cpu  300 0 30 900 9 0 3 6 0 0\ncpu0 100 0 10 300 3 0 1 2 0 0\ncpu1 200 0 20 600 6 0 2 4 0 0\n"
        "intr 12345\n"
    )
    hz = os.sysconf("SC_CLK_TCK")
    assert cpu_ticks([1], stat) == {"busy_s": 222 / hz, "steal_s": 4 / hz}
    assert cpu_ticks(None, stat) == {"busy_s": 333 / hz, "steal_s": 6 / hz}
    assert cpu_ticks([7], stat) is None
    assert cpu_ticks(None, tmp_path / "missing") is None


def test_between_charges_other_processes_with_busy_time_not_our_own() -> None:
    start = {"monotonic_s": 10.0, "cpu_ticks": {"busy_s": 100.0, "steal_s": 1.0}, "own_cpu_s": 5.0}
    end = {"monotonic_s": 12.0, "cpu_ticks": {"busy_s": 103.0, "steal_s": 1.2}, "own_cpu_s": 6.5}
    during = between(start, end, n_cpus=2)
    assert during["wall_s"] == pytest.approx(2.0)
    assert during["other_cpu_s"] == pytest.approx(1.5)  # 3 s busy, 1.5 s of it ours
    assert during["other_cpu_share"] == pytest.approx(1.5 / 4)
    assert during["steal_share"] == pytest.approx(0.2 / 4)
    no_proc = between({**start, "cpu_ticks": None}, end, n_cpus=2)
    assert no_proc["other_cpu_share"] is None and no_proc["wall_s"] == pytest.approx(2.0)


def test_cpu_frequency_from_sysfs_or_else_proc_cpuinfo(tmp_path: Path) -> None:
    (tmp_path / "cpu0" / "cpufreq").mkdir(parents=True)
    (tmp_path / "cpu0" / "cpufreq" / "scaling_cur_freq").write_text("2400000\n")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\ncpu MHz\t\t: 2596.124\n\nprocessor\t: 1\ncpu MHz\t\t: 1800.000\n")
    from_sysfs = cpu_frequencies_hz([0], tmp_path, cpuinfo)
    assert from_sysfs == {"min": 2.4e9, "mean": 2.4e9, "max": 2.4e9, "source": "sysfs scaling_cur_freq"}
    from_proc = cpu_frequencies_hz([0, 1], tmp_path / "none", cpuinfo)
    assert from_proc["min"] == pytest.approx(1.8e9) and from_proc["max"] == pytest.approx(2.596124e9)
    assert from_proc["source"] == "/proc/cpuinfo cpu MHz"
    assert cpu_frequencies_hz([1], tmp_path / "none", tmp_path / "none") is None


def test_status_unfinished_cases_and_gpu_slowdown() -> None:
    record = RunRecord(quick=False, selection={}, benchmark_options={}, start={"time": "t0", "gpu": None})
    record.planned = ["a", "b", "c", "d"]
    record.outcomes = {"a": "passed", "b": "skipped", "c": "failed"}
    assert record.status() == "interrupted"  # d never ran
    record.outcomes["d"] = "passed"
    assert record.status() == "completed"
    record.interrupted_by = "SIGTERM"
    assert record.status() == "interrupted"
    end = {"time": "t1", "gpu": {"throttle_reasons": ["gpu_idle", "sw_thermal_slowdown"]}}
    assert run_record.gpu_slowdown({"gpu": None}, end) == ["sw_thermal_slowdown"]  # idle is not a slowdown


def test_a_throttle_between_the_snapshots_shows_in_the_violation_counters() -> None:
    """Clocks and reasons look fine at both ends; NVML's power counter grew by 0.25 s in between."""
    counters = {"power": 1_000_000_000, "thermal": 5, "total_base_clocks": 7}
    start = {"gpu": {"throttle_reasons": ["gpu_idle"], "violation_time_ns": counters}}
    end = {"gpu": {"throttle_reasons": [], "violation_time_ns": {**counters, "power": 1_250_000_000}}}
    assert run_record.gpu_slowdown(start, end) == ["power held clocks back 0.25 s"]
    assert run_record.gpu_slowdown(start, start) == []


def test_a_condition_that_cannot_be_read_is_a_fault_not_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing() -> None:
        raise PermissionError("no access to the load average")

    monkeypatch.setattr(run_record, "load_avg", failing)
    record = RunRecord(quick=False, selection={}, benchmark_options={})
    saved_record = record.as_json()
    assert saved_record["conditions"]["start"]["load_avg"] is None
    assert any("load_avg" in fault and "no access" in fault for fault in saved_record["faults"])
    json.dumps(saved_record)


def test_output_checks_name_what_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert outputs.folder_problem(tmp_path / "new" / "deeper") is None  # creatable
    assert outputs.folder_problem(blocker / "sub") == f"{blocker / 'sub'}: {blocker} is a file, not a folder"
    assert outputs.file_problem(tmp_path / "run.json") is None
    assert outputs.file_problem(tmp_path) == f"{tmp_path} is a folder, not a file"
    assert "does not exist" in outputs.file_problem(tmp_path / "missing" / "run.json")
    if os.geteuid() != 0:  # root writes into read-only folders, so only others can be refused
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert outputs.folder_problem(locked / "sub") == (
            f"{locked / 'sub'}: its nearest existing folder {locked} is not writable"
        )


def test_a_stop_signal_landing_where_no_line_is_known_is_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal whose frame has no line number (CPython 3.11 has such instructions; pytest's interrupt
    report crashed on them) is not raised there: it is sent again a moment later, and raised then."""
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(run_record.os, "kill", lambda pid, signum: sent.append((pid, signum)))
    old = run_record.stop_as_interrupt(None)
    try:
        handler = signal.getsignal(signal.SIGHUP)
        lineless = types.SimpleNamespace(f_lineno=None)
        handler(signal.SIGHUP, lineless)  # no raise here
        deadline = time.monotonic() + 5
        while not sent and time.monotonic() < deadline:
            time.sleep(0.001)
        assert sent == [(os.getpid(), signal.SIGHUP)]
        with pytest.raises(run_record.Terminated, match="signal SIGHUP"):
            handler(signal.SIGHUP, sys._getframe())
    finally:
        run_record.restore_handlers(old)
