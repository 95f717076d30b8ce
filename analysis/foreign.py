"""Any pytest-benchmark suite's saved runs -> one frame of cases, for comparing them by name.

launchbench's own cases are read by ``analysis.load`` (coordinates from ``extra_info``, fitted by family);
every other suite's cases are only named (``fullname``: the test's node id, parameters included) and timed
(pytest-benchmark's statistics, and the raw samples where the run saved them), so this is all a comparison
of them can stand on: ``analysis.compare.case_table`` lines the cases up by ``fullname`` and sets each
group's min and median beside the baseline's, judged on the raw samples.

What differs between the layouts pytest-benchmark has written, and is handled here:

- files written by 3.0 pre-releases say version "2.5.0"; they have no ``ops``, ``param`` or ``extra_info``
  (2.5 itself wrote no JSON);
- machine identity: ``machine_info["node"]`` and ``["system"]`` in every version; the CPU name is
  ``["cpu"]["brand_raw"]`` from 3.4 on (py-cpuinfo 6), ``["cpu"]["brand"]`` in 3.1–3.2, and only
  ``["processor"]`` before 3.1 (``analysis.load.machine_identity`` reads them in that order). A Windows and a
  Linux run of one laptop are two machines: the OS is part of the id;
- ``datetime`` is naive UTC up to 4.x and timezone-aware from 5.0 on: both are read as UTC;
- ``stats["data"]`` is there when the run was saved with its samples (``--benchmark-json`` always,
  ``--benchmark-save`` with ``--benchmark-save-data``).

A launchbench run never stands in for another suite's: one that reaches this loader (``analysis.load``
dropped it, or every case of it) is left out with its loader's lines, so a run saved under a machine name
analysis cannot tell is never compared as "another suite than launchbench". Every case is checked before it
is used: a case without a name, or whose ``min`` or ``median`` is not a
time within ``analysis.schema.TIME_RANGE_S`` (or min > median), is dropped with one line naming the file,
the case and the value; a ``mean`` or ``max`` outside it is left empty; raw samples that are not all times
within it are left out of their case (its statistics stay). An integer too large for a float (``1e400``
written out) is such a value, never an error. Every text from the file (names, machine, source) is
escaped for one line (``analysis.schema.printable``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.facts import fact_text
from analysis.load import expand_paths, fact_column, machine_identity, map_batches, read_run
from analysis.schema import TIME_RANGE_S, check_run, is_ours, printable

#: Why a launchbench run analysis' loader dropped is not compared case by case as another suite's.
NOT_FOREIGN = "a launchbench run (its cases name the suite), left out: not compared as another suite's run"

#: Columns of ``CaseLoad.frame``: run, case, statistics (s per iteration; ``rounds``, ``iterations``
#: counts) and the raw samples (float64 array, or None).
CASE_COLUMNS = (
    "source",
    "run_datetime",
    "machine_id",
    "fullname",
    "name",
    "group",
    "min",
    "median",
    "mean",
    "max",
    "rounds",
    "iterations",
    "data",
)

#: Columns of ``CaseLoad.runs``, one row per run file (``fact:<name>`` columns follow when asked for).
CASE_RUN_COLUMNS = (
    "source",
    "run_datetime",
    "machine_id",
    "host",
    "system",
    "cpu_model",
    "pb_version",
    "commit",
    "cases",
    "digest",
    "has_samples",
    "has_record",
)


@dataclass(frozen=True)
class CaseLoad:
    """What ``load_cases`` found: ``frame`` (``CASE_COLUMNS``, every usable case of every run), ``runs``
    (``CASE_RUN_COLUMNS``, one row per run with a usable case) and ``problems`` (one line per file skipped
    and per case dropped or trimmed)."""

    frame: pd.DataFrame
    runs: pd.DataFrame
    problems: tuple[str, ...]


def load_cases(paths: Iterable[str | Path], samples: bool, facts: Sequence[str] = ()) -> CaseLoad:
    """Read the cases of every pytest-benchmark run under ``paths`` (files, folders searched recursively,
    globs, as ``analysis.load.load_runs``); never raises for a bad file. ``samples``: keep the raw samples;
    ``facts``: read these run facts (``analysis.facts``) into ``runs`` as ``fact:<name>`` columns."""
    files, problems = expand_paths(paths)
    rows: list[dict[str, object]] = []
    runs: list[dict[str, object]] = []
    for batch in map_batches(_read_batch, files, samples, tuple(facts)):
        for file_rows, run, file_problems in batch:
            problems.extend(file_problems)
            if run is not None:
                rows.extend(file_rows)
                runs.append(run)
    frame = pd.DataFrame(rows, columns=list(CASE_COLUMNS))
    return CaseLoad(
        frame=frame,
        runs=pd.DataFrame(runs, columns=[*CASE_RUN_COLUMNS, *(fact_column(name) for name in facts)]),
        problems=tuple(problems),
    )


def _read_batch(paths: list[Path], samples: bool, facts: Sequence[str]) -> list[FileCases]:
    return [_read_cases(path, samples, facts) for path in paths]


#: One file's (case rows, run row or None, problem lines).
FileCases = tuple[list[dict[str, object]], dict[str, object] | None, list[str]]


def _read_cases(
    path: Path, samples: bool, facts: Sequence[str]
) -> tuple[list[dict[str, object]], dict[str, object] | None, list[str]]:
    """(case rows, run row or None, problem lines) of one file."""
    doc = read_run(path, samples)
    if isinstance(doc, str):
        return [], None, [doc]
    if any(map(is_ours, doc["benchmarks"])):
        # launchbench's own run, which its loader dropped (a machine name it cannot tell, every case
        # unusable): why, in its own lines, never compared as another suite's run (issue 32).
        checked = check_run(doc, str(path))
        dropped = checked.run is None and checked.problems  # the run's own line says it all
        return [], None, [*checked.problems, *([] if dropped else [f"{printable(path)}: {NOT_FOREIGN}"])]
    source = printable(path)
    machine_info = doc.get("machine_info") if isinstance(doc.get("machine_info"), Mapping) else {}
    identity = machine_identity(machine_info)
    parts = (identity["host"], identity["system"], identity["cpu_model"], identity["gpu_name"])
    run = {
        "source": source,
        "run_datetime": _text(doc.get("datetime")),
        # The GPU only where launchbench recorded one: other suites' runs say nothing about it.
        "machine_id": " / ".join(str(part) for part in parts if part),
        **{key: identity[key] for key in ("host", "system", "cpu_model")},
        "pb_version": _text(doc.get("version")),
        "commit": _shown(fact_text(doc, "commit")),
        "has_record": isinstance(doc.get("launchbench_run"), Mapping),
        **{fact_column(name): _shown(fact_text(doc, name)) for name in facts},
    }
    rows: list[dict[str, object]] = []
    problems: list[str] = []
    seen: set[str] = set()
    for bench in doc["benchmarks"]:
        row, problem = _case_row(bench)
        if row is not None and row["fullname"] in seen:
            row, problem = None, f"case {row['fullname']}: dropped: a second case of that name in the run"
        if problem is not None:
            problems.append(f"{source}: {problem}")
        if row is not None:
            seen.add(str(row["fullname"]))
            rows.append(
                {
                    "source": source,
                    "run_datetime": run["run_datetime"],
                    "machine_id": run["machine_id"],
                    **row,
                }
            )
    if not rows:
        count = len(doc["benchmarks"])
        return [], None, [*problems, f"{source}: none of its {count} benchmark(s) is a usable case"]
    run.update(
        cases=len(rows),
        digest=_digest(rows),
        has_samples=any(row["data"] is not None for row in rows),
    )
    return rows, run, problems


def _case_row(bench: object) -> tuple[dict[str, object] | None, str | None]:
    """(the case's columns, or None when it is dropped; a line saying what was dropped or left out)."""
    if not isinstance(bench, Mapping):
        return None, f"a benchmark that is not an object ({type(bench).__name__}): dropped"
    name = _text(bench.get("fullname")) or _text(bench.get("name"))
    if name is None:
        return None, "a benchmark without fullname or name: dropped"
    stats = bench.get("stats")
    if not isinstance(stats, Mapping):
        return None, f"case {name}: dropped: no stats"
    times = {key: _time(stats.get(key)) for key in ("min", "median", "mean", "max")}
    for key in ("min", "median"):
        if math.isnan(times[key]):
            low, high = TIME_RANGE_S
            return (
                None,
                f"case {name}: dropped: stats.{key} = {_value(stats.get(key))} (must be a time from {low:g} "
                f"to {high:g} s)",
            )
    if times["min"] > times["median"]:
        shown = f"{_value(stats['min'])} > stats.median {_value(stats['median'])}"
        return None, f"case {name}: dropped: stats.min {shown}"
    data, problem = _samples(stats.get("data"))
    row = {
        "fullname": name,
        "name": _text(bench.get("name")) or name,
        "group": _text(bench.get("group")),
        **times,
        **{key: stats[key] if _count(stats.get(key)) else None for key in ("rounds", "iterations")},
        "data": data,
    }
    return row, None if problem is None else f"case {name}: {problem}"


def _samples(data: object) -> tuple[np.ndarray | None, str | None]:
    """The raw samples as float64 seconds, or None with the reason they were left out."""
    if data is None:
        return None, None
    if not isinstance(data, list) or not data:
        return None, "raw samples left out: stats.data is not a non-empty list"
    if any(isinstance(value, bool) or not isinstance(value, int | float) for value in data):
        return None, "raw samples left out: stats.data holds something other than numbers"
    values = np.array([_time(value) for value in data], dtype=float)
    bad = np.isnan(values)
    if bad.any():
        count, first = int(bad.sum()), data[int(np.flatnonzero(bad)[0])]
        low, high = TIME_RANGE_S
        return (
            None,
            f"raw samples left out: {count} of {values.size} are not times from {low:g} to {high:g} s "
            f"(first: {_value(first)})",
        )
    return values, None


def _digest(rows: list[dict[str, object]]) -> str:
    """SHA-256 of the cases' names and statistics (raw samples left out): a run saved twice has one."""
    summary = [
        [row["fullname"], *(row[key] for key in ("min", "median", "mean", "max", "rounds"))] for row in rows
    ]
    return hashlib.sha256(json.dumps(summary, default=str).encode()).hexdigest()


def _text(value: object) -> str | None:
    """Non-empty text from the file, escaped for one line (``printable``); else None."""
    return printable(value) if isinstance(value, str) and value else None


def _shown(value: str | None) -> str | None:
    return None if value is None else printable(value)


def _time(value: object) -> float:
    """``value`` as seconds when it is a number within ``TIME_RANGE_S``, else NaN (text, a bool, NaN, an
    integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        seconds = float(value)
    except OverflowError:
        return math.nan
    low, high = TIME_RANGE_S
    return seconds if low <= seconds <= high else math.nan


def _value(value: object) -> str:
    """A value from the file for a line: a number as written, shortened when absurdly long (an integer of
    400 digits); anything else as its repr."""
    text = repr(value) if not isinstance(value, str) else printable(repr(value))
    return text if len(text) <= 24 else f"{text[:10]}…{text[-6:]} ({len(text)} characters)"


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
