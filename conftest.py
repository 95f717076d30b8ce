"""Root pytest configuration: launchbench's options, machine metadata and terminal summary.

Kept thin: provenance lives in ``benchmarks/provenance.py`` and the summary in ``analysis/summary.py``,
so saved runs and the terminal agree and each piece is testable on its own.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("launchbench")
    group.addoption(
        "--quick",
        action="store_true",
        default=False,
        help="launchbench: fewer sizes and rounds (a smoke run; the full run is the one to save and compare)",
    )


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    """Add ``machine_info["launchbench"]``: the provenance a reader of a saved run needs to trust it."""
    from benchmarks.provenance import collect_machine_info

    machine_info["launchbench"] = collect_machine_info()


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print launchbench's summary of the run just measured, below pytest-benchmark's table."""
    session = getattr(terminalreporter.config, "_benchmarksession", None)
    if session is None or session.disabled or not session.benchmarks:
        return
    from analysis.load import frame_from_run
    from analysis.summary import summary_lines

    config = terminalreporter.config
    doc = config.hook.pytest_benchmark_generate_json(
        config=config,
        benchmarks=session.benchmarks,
        include_data=True,
        machine_info=session.get_machine_info(),
        commit_info={},
    )
    lines = summary_lines(frame_from_run(doc, source="this run"))
    if lines:
        terminalreporter.write_sep("-", "launchbench summary")
        for line in lines:
            terminalreporter.write_line(line)
