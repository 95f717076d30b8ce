"""Root pytest configuration: launchbench's options, machine metadata, the run record, the terminal summary.

Kept thin: provenance lives in ``benchmarks/provenance.py``, the run record in ``benchmarks/run_record.py``
and the summary in ``analysis/summary.py``, so saved runs and the terminal agree and each piece is testable.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from collections.abc import Callable, Iterator

import pytest

#: py-cpuinfo's figures in pytest-benchmark's ``machine_info["cpu"]`` that change from run to run (the clock
#: of the moment): moved to the run record's start snapshot, so ``machine_info`` stays the machine's.
VOLATILE_CPUINFO = ("hz_actual", "hz_actual_friendly")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("launchbench")
    group.addoption(
        "--quick",
        action="store_true",
        default=False,
        help="launchbench: fewer sizes and rounds (a smoke run; the full run is the one to save and compare)",
    )
    group.addoption(
        "--machine",
        default=None,
        metavar="NAME",
        help="launchbench: this machine's name in saved runs (machine_id), set once as asv's machine name; "
        "default: the LAUNCHBENCH_MACHINE environment variable, else the host name with a fingerprint of "
        "the installation",
    )


def _benchmarking(config: pytest.Config) -> bool:
    """Whether this session times benchmarks (pytest-benchmark loaded and not disabled)."""
    session = getattr(config, "_benchmarksession", None)
    return session is not None and not session.disabled


def pytest_sessionstart(session: pytest.Session) -> None:
    """When benchmarks are timed: refuse outputs that cannot be written and a machine name analysis could
    not read (``benchmarks.provenance.name_problem``) before anything is measured, start the run record
    (its first snapshot of the machine's conditions), read the machine's metadata once
    (so every ``machine_info`` of the session, and of the next session, is the same), turn SIGTERM and
    SIGHUP into an interrupt as Ctrl-C is (a second one ignored while the first is handled), so a stopped
    run still saves what it measured, and make the save itself whole or kept elsewhere
    (``benchmarks.outputs.guard_saving``: a disk that fills up during the run loses nothing). JAX, imported
    later by its cases, keeps its compiled executables for the next session (``_keep_jax_executables``)."""
    from benchmarks.outputs import guard_saving, output_problems
    from benchmarks.provenance import name_problem
    from benchmarks.run_record import RunRecord, stop_as_interrupt
    from benchmarks.sentinel import Sentinel

    config = session.config
    if not _benchmarking(config):
        return
    problems = output_problems(config._benchmarksession)
    name = name_problem(config.getoption("machine"))
    if name:
        problems.append(name)
    if problems:
        raise pytest.UsageError(f"{'; '.join(problems)}: nothing was measured")
    options = config._benchmarksession.options
    config._launchbench_run = RunRecord(
        quick=bool(config.getoption("quick")),
        selection={
            "args": [str(arg) for arg in config.args],
            "keyword": config.option.keyword or None,
            "markexpr": config.option.markexpr or None,
            "deselected": 0,
        },
        benchmark_options=json.loads(json.dumps(options, default=str)),
    )
    config._benchmarksession.get_machine_info()  # calls pytest_benchmark_update_machine_info below
    _pass_machine_notes(config)
    config._launchbench_environment = _keep_jax_executables(config)
    config._launchbench_old_handlers = stop_as_interrupt(config._launchbench_run)
    guard_saving(config._benchmarksession, _sayer(config))
    config._launchbench_run.sentinel = Sentinel()
    config._launchbench_run.sentinel.check("start")


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Count the cases ``-k``/``-m`` left out, for the run record's selection."""
    if items:
        record = getattr(items[0].config, "_launchbench_run", None)
        if record is not None:
            record.selection["deselected"] += len(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The planned cases: every selected test that takes the ``benchmark`` fixture."""
    record = getattr(session.config, "_launchbench_run", None)
    if record is not None:
        record.planned = [item.nodeid for item in session.items if "benchmark" in item.fixturenames]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each planned case's outcome: skipped (with its reason), failed in any phase, or passed."""
    record = getattr(report, "_launchbench_config_run", None)
    if record is None:
        return
    if report.skipped:
        record.outcomes[report.nodeid] = "skipped"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        record.skip_reasons[reason.removeprefix("Skipped: ")] += 1
    elif report.failed:
        record.outcomes[report.nodeid] = "failed"
    elif report.when == "call" and record.outcomes.get(report.nodeid) != "failed":
        record.outcomes[report.nodeid] = "passed"


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the first planned case of each family (test module): a speed sentinel checkpoint
    (``benchmarks.sentinel``), so that the run says how the machine's speed moved during it (a quick run
    too: its start and end alone are two single checkpoints, each ±10 % on a quiet 2-vCPU VM)."""
    record = getattr(item.config, "_launchbench_run", None)
    if record is None or record.sentinel is None or item.nodeid not in record.planned:
        return
    family = item.nodeid.partition("::")[0]
    if not any(point["at"] == f"before {family}" for point in record.sentinel.checkpoints):
        record.sentinel.check(f"before {family}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Hand the run record to ``pytest_runtest_logreport`` for the planned cases only."""
    outcome = yield
    record = getattr(item.config, "_launchbench_run", None)
    if record is not None and item.nodeid in record.planned:
        outcome.get_result()._launchbench_config_run = record


def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Remember what interrupted the run: Ctrl-C (SIGINT) or SIGTERM."""
    from benchmarks.run_record import Terminated

    config = getattr(pytest, "_launchbench_config", None)
    record = getattr(config, "_launchbench_run", None)
    if record is not None and record.interrupted_by is None:  # the stop signals' handler names its own
        record.interrupted_by = "SIGTERM" if excinfo.errisinstance(Terminated) else "SIGINT (Ctrl-C)"


def pytest_configure(config: pytest.Config) -> None:
    """Keep the session's config where ``pytest_keyboard_interrupt`` (which receives none) finds it; in a
    ``--benchmark-only`` session, which runs no Hypothesis test, leave Hypothesis' plugin out: it imports
    all of Hypothesis at every session's end to look for failing examples (0.3–0.7 s of a quick run)."""
    pytest._launchbench_config = config
    if config.getoption("benchmark_only", default=False):
        plugin = config.pluginmanager.get_plugin("hypothesispytest")
        if plugin is not None:
            config.pluginmanager.unregister(plugin)


def pytest_unconfigure(config: pytest.Config) -> None:
    from benchmarks.run_record import restore_handlers

    restore_handlers(getattr(config, "_launchbench_old_handlers", {}))
    for name in getattr(config, "_launchbench_environment", ()):
        os.environ.pop(name, None)
    if getattr(pytest, "_launchbench_config", None) is config:
        del pytest._launchbench_config


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Iterator[None]:
    """Close the run record before pytest-benchmark saves the run (its own wrapper saves before yielding);
    a run that could not be saved where asked (``benchmarks.outputs.guard_saving``) ends the session with
    exit status 1 even when every case passed."""
    record = getattr(session.config, "_launchbench_run", None)
    if record is not None:
        if record.sentinel is not None and record.interrupted_by is None:
            record.sentinel.check("end")
            record.sentinel.release()
        record.finish(exitstatus, session.shouldstop or session.shouldfail or None)
    yield
    if getattr(session.config, "_launchbench_unsaved", False) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    """Add ``machine_info["launchbench"]`` (the provenance a reader of a saved run needs to trust it) and take
    py-cpuinfo's clock of the moment out of ``machine_info["cpu"]`` (to the run record).

    The machine is read once per session (the first call, at session start when benchmarks are timed):
    pytest-benchmark calls this hook again when saving, after the cases may have loaded more libraries
    (threadpoolctl would list them), and compares it with a saved run's at the start of the next session.
    A collector that fails leaves its keys empty and a fault in the run record; it never loses the run.
    """
    from benchmarks.provenance import collect_machine_info

    cpu = machine_info.get("cpu")
    volatile = {key: cpu.pop(key) for key in VOLATILE_CPUINFO if key in cpu} if isinstance(cpu, dict) else {}
    if not hasattr(config, "_launchbench_machine"):
        faults: list[str] = []
        config._launchbench_machine = collect_machine_info(faults, config.getoption("machine"))
        config._launchbench_machine_notes = (volatile, faults)
        _pass_machine_notes(config)
    machine_info["launchbench"] = copy.deepcopy(config._launchbench_machine)
    config._launchbench_machine_info = copy.deepcopy(machine_info)


def pytest_benchmark_update_commit_info(config: pytest.Config, commit_info: dict) -> None:
    """Where the tree has no ``.git`` (the GPU machine's copy of it), the commit measured is the one
    ``LAUNCHBENCH_COMMIT`` names (``benchmarks.provenance.fill_commit_info``); a value that is not a commit
    is a fault of the run, never its loss (``.ci/gpu-run`` refuses it before anything runs)."""
    from benchmarks.provenance import fill_commit_info

    try:
        fill_commit_info(commit_info)
    except ValueError as error:
        record = getattr(config, "_launchbench_run", None)
        if record is not None:
            record.faults.append(f"provenance: {error}")


def _pass_machine_notes(config: pytest.Config) -> None:
    """Hand what the first reading of the machine left over (py-cpuinfo's clock, collector faults) to the run
    record, once there is one (``--benchmark-compare`` reads the machine before the session starts)."""
    record = getattr(config, "_launchbench_run", None)
    notes = getattr(config, "_launchbench_machine_notes", None)
    if record is None or notes is None:
        return
    volatile, faults = notes
    if volatile:
        record.start["cpuinfo_hz_actual"] = volatile.get("hz_actual")
    record.faults.extend(faults)
    del config._launchbench_machine_notes


def pytest_benchmark_update_json(config: pytest.Config, benchmarks: list, output_json: dict) -> None:
    """Save the run record beside ``machine_info`` (``benchmarks.run_record.RUN_RECORD_KEY``); a record that
    cannot be built is saved as the one line saying why, never at the cost of the measured cases."""
    from benchmarks.run_record import RUN_RECORD_KEY, RUN_RECORD_VERSION

    record = getattr(config, "_launchbench_run", None)
    if record is None:
        return
    try:
        output_json[RUN_RECORD_KEY] = record.as_json()
    except Exception as error:
        output_json[RUN_RECORD_KEY] = {
            "version": RUN_RECORD_VERSION,
            "error": f"run record not built: {type(error).__name__}: {error}",
        }


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print launchbench's summary of the run just measured, below pytest-benchmark's table.

    Whatever fails in it (an analysis error, memory), pytest ends normally: one line says what failed, and
    the run is saved already (pytest-benchmark saves before the terminal summary)."""
    session = getattr(terminalreporter.config, "_benchmarksession", None)
    if session is None or session.disabled or not session.benchmarks:
        return
    try:
        lines = _summary(terminalreporter.config, session)
    except Exception as error:
        text = str(error).strip().splitlines()
        lines = [
            f"launchbench summary failed: {type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
        ]
    if lines:
        terminalreporter.write_sep("-", "launchbench summary")
        for line in lines:
            terminalreporter.write_line(line)


def _keep_jax_executables(config: pytest.Config) -> list[str]:
    """Point JAX's persistent compilation cache at launchbench's cache folder (``$LAUNCHBENCH_CACHE``, else
    the user's: ``analysis.cache.default_folder``), keyed by this machine's CPU
    (``benchmarks.frameworks.jax_cache_environment``), unless the caller chose JAX's cache: the JAX cases'
    compiling (seconds, never timed) is then paid once per machine, not once per session. Returns the
    variables set, which ``pytest_unconfigure`` removes."""
    from analysis.cache import default_folder
    from benchmarks.frameworks import jax_cache_environment

    machine_info = getattr(config, "_launchbench_machine_info", None) or {}
    cpu = machine_info.get("cpu") if isinstance(machine_info.get("cpu"), dict) else {}
    added = []
    for name, value in jax_cache_environment(default_folder(), cpu).items():
        if name not in os.environ:
            os.environ[name] = value
            added.append(name)
    return added


def _sayer(config: pytest.Config) -> Callable[[str], None]:
    """``guard_saving``'s voice: a function that prints its one line in the terminal (stderr where pytest
    has none) and marks the session as one whose run was not saved where asked (exit status 1)."""

    def say(line: str) -> None:
        config._launchbench_unsaved = True
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line, red=True, bold=True)
        else:
            sys.stderr.write(line + "\n")

    return say


def _summary(config: pytest.Config, session: object) -> list[str]:
    """The summary lines of the in-memory run: analysis of the same JSON pytest-benchmark saves."""
    from analysis.load import load_doc
    from analysis.summary import summary_lines
    from benchmarks.run_record import RUN_RECORD_KEY

    machine_info = getattr(config, "_launchbench_machine_info", None) or session.get_machine_info()
    doc = config.hook.pytest_benchmark_generate_json(
        config=config,
        benchmarks=session.benchmarks,
        include_data=True,
        machine_info=machine_info,
        commit_info={},
    )
    record = getattr(config, "_launchbench_run", None)
    if record is not None:
        doc[RUN_RECORD_KEY] = record.as_json()
    result = load_doc(doc, source="this run")
    return summary_lines(result.frame, result.runs, result.problems)
