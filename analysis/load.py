"""Saved pytest-benchmark runs -> one tidy DataFrame, one row per launchbench case per run.

Everything downstream (fits, predictions, machine comparison, the terminal summary) reads this frame, so
this is the single place that knows the layout of pytest-benchmark's JSON. Coordinates come from
``extra_info`` (see ``benchmarks/records.py``), machine identity from ``machine_info["launchbench"]``;
test names and storage folder names are never parsed.

Files written by ``--benchmark-json``, ``--benchmark-save`` and ``--benchmark-autosave`` share one layout.
What differs between pytest-benchmark 3.x and 5.x, and is handled here:

- ``extra_info`` exists from 3.1.0a2 on (older runs cannot hold launchbench cases);
- ``stats["ops"]`` exists from 3.1.0 on; it is filled by pytest-benchmark's own ``normalize_stats``;
- ``datetime`` is naive UTC up to 4.x and timezone-aware from 5.0 on: both are read as UTC;
- the CPU name is ``machine_info["cpu"]["brand_raw"]`` from 3.4 (py-cpuinfo 6) on, ``["brand"]`` before;
- ``stats["data"]`` (raw per-iteration samples) is there only when the run was saved with data (the default).

Storage is only ever read: nothing here opens a file for writing or creates a folder (pytest-benchmark's
``FileStorage`` creates its folder, so its query code is not reused; its ``normalize_stats`` is).
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pytest_benchmark.stats import normalize_stats

SUITE = "launchbench"

#: pytest-benchmark statistics kept as columns; all are seconds per iteration except rounds/iterations/ops.
STAT_COLUMNS = ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ops", "rounds", "iterations")

#: Run-level columns, first in every frame.
RUN_COLUMNS = (
    "source",
    "run_datetime",
    "machine_id",
    "host",
    "cpu_model",
    "gpu_name",
    "commit",
    "pb_version",
)

#: Columns of every frame, also of an empty one: run columns, benchmark identity, stats and raw samples.
BASE_COLUMNS = (*RUN_COLUMNS, "name", "fullname", "group", *STAT_COLUMNS, "data")

_GLOB_CHARS = frozenset("*?[")

#: From this many files on, files are parsed in worker processes (one per usable CPU).
PARALLEL_MIN_FILES = 48


@dataclass(frozen=True)
class LoadResult:
    """What ``load_runs`` found.

    ``frame``: every usable run's launchbench rows (``frame_from_run``'s columns), all files concatenated;
    ``problems``: one line per file skipped or partly skipped, naming the file and what is wrong;
    ``files_used``: the files whose cases are in ``frame``, in load order.
    """

    frame: pd.DataFrame
    problems: tuple[str, ...]
    files_used: tuple[Path, ...]


def machine_identity(machine_info: Mapping) -> dict[str, object]:
    """Return host, CPU model, GPU name, the stable ``machine_id`` and the CPU's cache sizes of one run.

    ``machine_info["launchbench"]`` is authoritative; runs saved without it (older code, other tools) fall
    back to pytest-benchmark's own fields, composed the same way, so the id stays comparable.
    """
    ours = machine_info.get(SUITE) or {}
    host = ours.get("host") or machine_info.get("node") or "unknown-host"
    cpu_info = machine_info.get("cpu") or {}
    cpu_model = (
        ours.get("cpu_model")
        or cpu_info.get("brand_raw")
        or cpu_info.get("brand")  # py-cpuinfo < 6, i.e. pytest-benchmark < 3.4
        or machine_info.get("processor")
        or "unknown-cpu"
    )
    gpu = ours.get("gpu") or {}
    gpu_name = gpu.get("name") if isinstance(gpu, Mapping) else None
    machine_id = ours.get("machine_id") or f"{host} / {cpu_model} / {gpu_name or 'no GPU'}"
    # Cache sizes (bytes, None when unknown) tell analysis which sizes were served from cache or DRAM.
    return {
        "machine_id": machine_id,
        "host": host,
        "cpu_model": cpu_model,
        "gpu_name": gpu_name,
        "llc_bytes": ours.get("llc_bytes"),
        "core_cache_bytes": ours.get("core_cache_bytes"),
    }


def frame_from_run(doc: Mapping, source: str) -> pd.DataFrame:
    """Return the launchbench rows of one parsed pytest-benchmark run (``--benchmark-json``/``-save`` output).

    Columns: ``RUN_COLUMNS``, then ``name``, ``fullname``, ``group``, every ``extra_info`` key, the
    ``STAT_COLUMNS`` and ``data`` (the raw per-iteration samples in seconds as a float64 numpy array, or None
    when not saved). Benchmarks of other suites are left out; a run with none of ours gives an empty frame.
    """
    return _frame(_rows_from_run(doc, source))


def load_runs(paths: Iterable[str | Path], samples: bool) -> LoadResult:
    """Read every saved run under ``paths`` into one frame; never raises for a bad file.

    ``samples``: keep the raw per-iteration samples (``data``); False leaves them unparsed (``data`` None),
    which makes loading a fleet of runs several times faster: raw samples are most of a run's bytes, and
    parsing their text is nearly all of the loading time.

    Each path is a file, a folder (searched recursively for ``*.json``, as pytest-benchmark's storage nests
    runs in one folder per platform) or a glob (``**`` allowed). A file that cannot be read, is not JSON, is
    not a pytest-benchmark run or holds no launchbench case adds one line to ``problems`` and is skipped; so
    does a path that matches nothing.
    """
    files, problems = _expand(paths)
    rows: list[dict[str, object]] = []
    used: list[Path] = []
    for path, (file_rows, problem) in zip(files, _read_files(files, samples), strict=True):
        if problem:
            problems.append(f"{path}: {problem}")
        if file_rows:
            rows.extend(file_rows)
            used.append(path)
    return LoadResult(frame=_frame(rows), problems=tuple(problems), files_used=tuple(used))


def _expand(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """Return the JSON files ``paths`` name (each once, in the order given, folders sorted) and the problems
    of paths that name none."""
    files: list[Path] = []
    problems: list[str] = []
    seen: set[Path] = set()

    def add(path: Path) -> None:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            files.append(path)

    for raw in paths:
        text = str(raw)
        if Path(text).exists():
            matches = [Path(text)]
        elif _GLOB_CHARS & set(text):
            matches = [Path(match) for match in sorted(glob.glob(text, recursive=True))]  # noqa: PTH207 (absolute patterns)
            if not matches:
                problems.append(f"{text}: the pattern matches no file")
                continue
        else:
            problems.append(f"{text}: no such file or folder")
            continue
        for match in matches:
            if match.is_dir():
                found = sorted(p for p in match.rglob("*.json") if p.is_file())
                if not found:
                    problems.append(f"{match}: folder holds no saved run (no .json file under it)")
                for path in found:
                    add(path)
            else:
                add(match)
    return files, problems


def _read_files(files: list[Path], samples: bool) -> list[tuple[list[dict[str, object]], str | None]]:
    """``_read_file`` of each file, in order; in worker processes when there are many files and CPUs (JSON
    parsing is the whole cost of loading a fleet of runs, and it is CPU-bound)."""
    workers = min(
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8
    )
    if len(files) < PARALLEL_MIN_FILES or workers < 2:
        return [_read_file(path, samples) for path in files]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        chunksize = max(1, len(files) // (4 * workers))
        return list(pool.map(_read_file, files, [samples] * len(files), chunksize=chunksize))


def _read_file(path: Path, samples: bool) -> tuple[list[dict[str, object]], str | None]:
    """Return (launchbench rows, problem or None) of one file; no rows when the file is unusable."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return [], f"cannot be read ({exc.strerror or exc})"
    if not raw.strip():
        return [], "file is empty"
    try:
        doc = _parse(raw, samples)
    except UnicodeDecodeError:
        return [], "not a text file (not UTF-8), so not a saved run"
    except json.JSONDecodeError as exc:
        where = "ends early (truncated?)" if exc.pos >= len(raw.rstrip()) else "is not valid JSON"
        return [], f"{where}: {exc.msg} at line {exc.lineno} column {exc.colno}"
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        return [], "JSON but not a pytest-benchmark run (no 'benchmarks' list)"
    benchmarks = doc["benchmarks"]
    if not benchmarks:
        return [], "saved run holds no benchmarks"
    ours = [b for b in benchmarks if isinstance(b, dict) and _is_ours(b)]
    if not ours:
        return [], f"no launchbench case among its {len(benchmarks)} benchmarks (another suite's run?)"
    broken = [b for b in ours if not _normalized(b)]
    rows = _rows_from_run({**doc, "benchmarks": [b for b in ours if b not in broken]}, str(path))
    if broken:
        names = ", ".join(str(b.get("name")) for b in broken[:3]) + (", ..." if len(broken) > 3 else "")
        return rows, f"{len(broken)} launchbench case(s) without usable stats skipped ({names})"
    return rows, None


def _parse(raw: bytes, samples: bool) -> object:
    """``json.loads`` of ``raw``, with its raw samples cut out first unless ``samples``; an error is always
    the one of the text as written, so its position points into the file."""
    if not samples:
        try:
            return json.loads(_without_samples(raw))
        except ValueError:
            pass
    return json.loads(raw)


def _without_samples(raw: bytes) -> bytes:
    """``raw`` with every raw-sample list (``"data": [...]``, flat numbers as pytest-benchmark writes them)
    replaced by ``null``; ``raw`` itself when its text does not look like that, so JSON errors stay exact."""
    key = b'"data": ['
    parts = []
    position = 0
    while (start := raw.find(key, position)) >= 0:
        end = raw.find(b"]", start)
        if end < 0 or raw.find(b"{", start, end) >= 0 or raw.find(b'"', start + len(key), end) >= 0:
            return raw
        parts += [raw[position : start + len(key) - 1], b"null"]
        position = end + 1
    return b"".join([*parts, raw[position:]]) if parts else raw


def _is_ours(bench: dict) -> bool:
    """True for a benchmark that launchbench's ``record`` tagged (its ``extra_info`` names the suite)."""
    extra = bench.get("extra_info")
    return isinstance(extra, dict) and extra.get("suite") == SUITE


def _normalized(bench: dict) -> bool:
    """Fill ``ops`` the way pytest-benchmark does for pre-3.1 runs; False when the stats cannot be used."""
    stats = bench.get("stats")
    if not isinstance(stats, dict) or not isinstance(stats.get("mean"), int | float):
        return False
    try:
        normalize_stats(stats)
    except ZeroDivisionError:
        stats["ops"] = float("inf")
    return True


def _rows_from_run(doc: Mapping, source: str) -> list[dict[str, object]]:
    """One dict per launchbench benchmark of ``doc``: run columns, ``extra_info``, stats, raw data."""
    identity = machine_identity(doc.get("machine_info") or {})
    commit_info = doc.get("commit_info") or {}
    run = {
        "source": source,
        "run_datetime": doc.get("datetime"),  # text here; parsed for all rows at once in ``_frame``
        **identity,
        "commit": commit_info.get("id"),
        "pb_version": doc.get("version"),
    }
    rows = []
    for bench in doc.get("benchmarks") or []:
        extra = bench.get("extra_info") or {}
        if extra.get("suite") != SUITE:
            continue
        stats = bench.get("stats") or {}
        row = {
            **run,
            "name": bench.get("name"),
            "fullname": bench.get("fullname"),
            "group": bench.get("group"),
        }
        row.update(extra)
        row.update({column: stats.get(column) for column in STAT_COLUMNS})
        data = stats.get("data")
        row["data"] = None if data is None else np.asarray(data, dtype=float)
        rows.append(row)
    return rows


def _frame(rows: list[dict[str, object]]) -> pd.DataFrame:
    """The frame of ``rows``; an empty frame still has ``BASE_COLUMNS`` so callers can select them."""
    if not rows:
        return pd.DataFrame(columns=list(BASE_COLUMNS))
    frame = pd.DataFrame(rows)
    # Naive (pytest-benchmark <= 4.x) and aware (5.x) ISO times are both UTC.
    frame["run_datetime"] = pd.to_datetime(frame["run_datetime"], utc=True, format="ISO8601", errors="coerce")
    return frame
