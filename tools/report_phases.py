"""Run ``python -m analysis ARGS`` with the wall time of the report's phases on stderr: when each began and
ended (seconds from the start, imports included), and the command's own CPU seconds in it; at the end the
CPU seconds of the command and of its workers. The phases are functions of ``analysis`` wrapped before the
command runs; ``analysis`` is the one in the current folder, so the same tool times another checkout (a
commit's ``git archive``) from there:

    python tools/report_phases.py report /tmp/first/fleetq --include-quick --out /tmp/r --cache /tmp/c
    cd /tmp/before && python /path/to/tools/report_phases.py report ...

(docs/speed.md, issue 33's fifth pass: "Where the time went").
"""

from __future__ import annotations

import functools
import importlib
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

START = time.perf_counter()  # before analysis is imported: the command's start-up is a phase


def _timed(name: str, function: Callable) -> Callable:
    @functools.wraps(function)
    def timed(*args: object, **kwargs: object) -> object:
        began, cpu = time.perf_counter(), time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            ended = time.perf_counter()
            print(
                f"[{began - START:6.2f} → {ended - START:6.2f}] {name} {ended - began:.2f} s "
                f"(command CPU {time.process_time() - cpu:.2f} s)",
                file=sys.stderr,
            )

    return timed


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path.cwd()))  # the current folder's analysis, not an installed one
    command, figures, load, report = (
        importlib.import_module(f"analysis.{name}") for name in ("__main__", "figures", "load", "report")
    )
    phases = [
        (load, "map_batches", "loading"),
        (command, "_load", "loading and choosing the runs"),
        (report, "fit_all", "fits"),  # the checkouts before the table's start was made beside the fits
        (report, "fitted_and_started", "fits"),
        (report, "compared_table", "table"),
        (figures.Drawing, "beside_result", "waiting for the predictions"),
        (report, "_report_lines", "the report's text"),
        (figures.Drawing, "finish", "machines figure and waiting"),
        (report, "_write_report", "after loading"),
    ]
    for owner, name, what in phases:
        if hasattr(owner, name):  # another checkout may lack one
            setattr(owner, name, _timed(f"{what} ({name})", getattr(owner, name)))
    try:
        return command.main(argv)
    finally:
        own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        print(
            f"[{time.perf_counter() - START:6.2f}] end: command {own.ru_utime + own.ru_stime:.2f} CPU-s, "
            f"workers {workers.ru_utime + workers.ru_stime:.2f} CPU-s",
            file=sys.stderr,
        )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
