"""Saved pytest-benchmark runs -> one tidy DataFrame, one row per launchbench case per run.

Everything downstream (fits, predictions, machine comparison, the terminal summary) reads this frame, so
this is the single place that knows the layout of pytest-benchmark's JSON. Coordinates come from
``extra_info`` (see ``benchmarks/records.py``), machine identity from ``machine_info["launchbench"]``;
test names and storage folder names are never parsed.

Files written by ``--benchmark-json``, ``--benchmark-save`` and ``--benchmark-autosave`` share one layout.
What differs between pytest-benchmark 3.x and 5.x, and is handled here:

- ``extra_info`` exists from 3.1.0a2 on (older runs cannot hold launchbench cases);
- ``stats["ops"]`` exists from 3.1.0 on; it is filled as 1 / mean (as pytest-benchmark's ``normalize_stats``
  does) for older runs;
- ``datetime`` is naive UTC up to 4.x and timezone-aware from 5.0 on: both are read as UTC;
- the CPU name is ``machine_info["cpu"]["brand_raw"]`` from 3.4 (py-cpuinfo 6) on, ``["brand"]`` before;
- ``stats["data"]`` (raw per-iteration samples) is there only when the run was saved with data (the default).

Every run is checked field by field before any of it is used (``analysis.schema``, the one place that
knows what a valid run holds): a case with a wrong statistic or coordinate is dropped with one line naming
the file, the case and the field; raw samples that are not finite times are left out of their case; a file
whose run-level fields (machine, run record) are wrong, or that cannot be read or parsed at all (not UTF-8,
not JSON, truncated, nested too deeply, too large for the memory available), is skipped with one line. So
no impossible number (a negative time, an infinite bandwidth, a prediction for zero pieces) reaches a fit
or a table, and the good files beside a bad one are still used.

Beside the rows, ``LoadResult.runs`` holds one row per run file (``RUN_INFO_COLUMNS``): what its run record
says (``benchmarks/run_record.py``: quick, completed or interrupted, unfinished cases, the selection, the
machine's conditions) and a digest of its measurements, so ``analysis.runs`` can decide which runs may be
pooled. Runs saved before the record existed are read as "legacy": quick or full is decided from the file
(``LEGACY_QUICK_MAX_TIME_S``), their conditions are unknown.

Storage is only ever read: nothing here opens a file for writing or creates a folder (pytest-benchmark's
``FileStorage`` creates its folder, so its query code is not reused), and the parsed documents are not
changed (``load_doc``'s caller keeps its run as it was).
"""

from __future__ import annotations

import contextlib
import fnmatch
import gc
import glob
import hashlib
import itertools
import json
import math
import multiprocessing
import multiprocessing.context
import os
import signal
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from analysis.cache import (
    THREADED_RUNTIMES,
    Entry,
    Fresh,
    Key,
    RunCache,
    open_cache,
    text_categorical,
    texts_or_missing,
)
from analysis.facts import fact_text, run_settings
from analysis.schema import RUN_RECORD_KEY as RUN_RECORD_KEY  # the data contract's keys, re-exported
from analysis.schema import SUITE, CheckedRun, check_run, printable
from analysis.sentinel import from_record as sentinel_from_record
from analysis.signals import WorkerLost, held, lost_line, process_alive, release
from analysis.steady import STEADY_COLUMNS, WARM_UP, classify, steady_rounds
from model.hardware import ATTRIBUTE_KEYS

try:
    import orjson
except ImportError:  # the GPU machine's image has none: json reads every run alike, only slower
    from analysis import json_fallback as orjson

#: pytest-benchmark statistics kept as columns; all are seconds per iteration except rounds/iterations/ops.
STAT_COLUMNS = ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "ops", "rounds", "iterations")

#: Run-level columns, first in every frame.
RUN_COLUMNS = (
    "source",
    "run_datetime",
    "machine_id",
    "host",
    "system",
    "cpu_model",
    "gpu_name",
    "commit",
    "pb_version",
)

#: Columns of ``LoadResult.runs``, one row per run file: identity; the record's quick / status /
#: interrupted_by / planned / measured / unfinished (node ids) / selection; ``quick_basis`` (how quick was
#: decided); ``digest`` (SHA-256 of the launchbench cases' names, coordinates and statistics, raw samples
#: left out: equal digests are one measurement saved twice); the conditions (``usable_cpus``,
#: ``other_cpu_share``, ``steal_share`` of the CPUs' time during the run, ``load_start``: 1-minute load
#: average at start; ``load_saved``: legacy runs' 1-minute load average when saved, from ``machine_info``;
#: ``gpu_slowdown``: NVML throttle reasons); ``faults``; ``families`` measured; ``settings``: the recorded
#: settings its figures depend on (``analysis.facts.run_settings``) as JSON text, name → text; ``sentinel``:
#: the speed sentinel's checkpoints (``analysis.sentinel``), JSON text, None for a run saved before it.
RUN_INFO_COLUMNS = (
    "source",
    "machine_id",
    "stored_machine_id",
    "host",
    "system",
    "cpu_model",
    "gpu_name",
    "logical_cpus",
    "run_datetime",
    "has_record",
    "quick",
    "quick_basis",
    "status",
    "interrupted_by",
    "planned",
    "measured",
    "unfinished",
    "selected_by",
    "digest",
    "has_samples",
    "families",
    "usable_cpus",
    "other_cpu_share",
    "steal_share",
    "load_start",
    "load_saved",
    "gpu_slowdown",
    "faults",
    "settings",
    "sentinel",
)

#: A run saved without a run record is quick when its ``ufunc_size`` and ``many_vs_one`` cases ran with
#: pytest-benchmark's ``options.max_time`` = 0.1 s: the budget ``--quick`` gave them before the record
#: existed (``benchmarks/test_numpy_calls.py``, ``QUICK_MAX_TIME_S``; a full run gave 0.5 s).
LEGACY_QUICK_MAX_TIME_S = 0.1
LEGACY_QUICK_CASES = ("ufunc_size", "many_vs_one")

#: Columns of every frame, also of an empty one: run columns, benchmark identity, stats and raw samples,
#: and the steady state of the rounds (``analysis.steady.steady_rounds``).
BASE_COLUMNS = (*RUN_COLUMNS, "name", "fullname", "group", *STAT_COLUMNS, "data", *STEADY_COLUMNS)

_GLOB_CHARS = frozenset("*?[")

T = TypeVar("T")

#: From this many files on, files are parsed in worker processes (one per usable CPU).
PARALLEL_MIN_FILES = 48
#: At most this many files in one worker's batch: a stop (Ctrl-C, SIGTERM) waits for each worker's batch
#: in hand and the one queued behind it, and a saved run takes 4-6 ms to parse (30 ms where its raw samples
#: are read on a busy machine), so about a second at most; 100,000 files split four ways per CPU made
#: batches of 12,500 files, a minute each.
MAX_BATCH_FILES = 32


@dataclass(frozen=True)
class LoadResult:
    """What ``load_runs`` found.

    ``frame``: every usable run's launchbench rows (``load_doc``'s columns), all files concatenated;
    ``problems``: one line per file skipped, and per case dropped, naming the file and what is wrong;
    ``files_used``: the files whose cases are in ``frame``, in load order; ``runs``: one row per file used
    (``RUN_INFO_COLUMNS``), whose ``source`` matches the frame's.
    """

    frame: pd.DataFrame
    problems: tuple[str, ...]
    files_used: tuple[Path, ...]
    runs: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(RUN_INFO_COLUMNS)))


#: The GPU part of a machine id when the run's GPU metadata holds an error instead of a name.
GPU_UNREADABLE = "GPU unreadable"


def machine_identity(machine_info: Mapping) -> dict[str, object]:
    """Return host, OS, CPU model, GPU name, the ``machine_id`` they compose, and the facts that tell one
    machine from another (logical CPUs, the machine id the run stored), its cache sizes and the GPU's
    recorded attributes (``gpu_attributes``: (key, value) pairs of ``model.hardware.ATTRIBUTE_KEYS``).

    ``machine_id`` is always composed from the facts, "who / OS / CPU model / GPU name or 'no GPU'" (as
    ``benchmarks.provenance.machine_id`` composes it when saving; who: the ``machine_name`` the user gave the
    machine, else "host#``machine_fingerprint``", else the host alone: runs saved before either existed keep
    the id they had), never taken as stored: ids stored before
    the OS was part of them, and runs saved without ``machine_info["launchbench"]``, get the same id as new
    runs of the same machine, and a Windows and a Linux run of one laptop get two. OS = pytest-benchmark's
    ``machine_info["system"]`` (``platform.system()``).
    """
    ours = _mapping(machine_info.get(SUITE))
    host = _text(ours.get("host")) or _text(machine_info.get("node")) or "unknown-host"
    system = _text(ours.get("system")) or _text(machine_info.get("system"))
    cpu_info = _mapping(machine_info.get("cpu"))
    cpu_model = (
        _text(ours.get("cpu_model"))
        or _text(cpu_info.get("brand_raw"))
        or _text(cpu_info.get("brand"))  # py-cpuinfo < 6, i.e. pytest-benchmark < 3.4
        or _text(machine_info.get("processor"))
        or "unknown-cpu"
    )
    gpu = ours.get("gpu")
    gpu_name = _text(gpu.get("name")) if isinstance(gpu, Mapping) else None
    gpu_label = gpu_name or (GPU_UNREADABLE if isinstance(gpu, Mapping) else "no GPU")
    # The device's recorded attributes, for a roofline spec where the name is not in the datasheet table.
    gpu_attributes = (
        tuple((key, gpu[key]) for key in ATTRIBUTE_KEYS if _is_attribute_value(gpu.get(key)))
        if isinstance(gpu, Mapping)
        else ()
    )
    logical = ours.get("logical_cpus", cpu_info.get("count"))
    name, fingerprint = _text(ours.get("machine_name")), _text(ours.get("machine_fingerprint"))
    who = name or (f"{host}#{fingerprint}" if fingerprint else host)
    # Cache sizes (bytes, None when unknown) tell analysis which sizes were served from cache or DRAM.
    return {
        "machine_id": " / ".join(part for part in (who, system, cpu_model, gpu_label) if part),
        "host": host,
        "system": system,
        "cpu_model": cpu_model,
        "gpu_name": gpu_name,
        "gpu_attributes": gpu_attributes,
        "logical_cpus": logical if isinstance(logical, int) and not isinstance(logical, bool) else None,
        "stored_machine_id": _text(ours.get("machine_id")),
        "llc_bytes": ours.get("llc_bytes"),
        "core_cache_bytes": ours.get("core_cache_bytes"),
    }


def load_doc(doc: Mapping, source: str) -> LoadResult:
    """Check and load one parsed pytest-benchmark run (``--benchmark-json``/``-save`` output, or the run in
    memory at the end of a pytest session): ``load_runs``'s result for that one run, ``source`` naming it.

    Frame columns: ``RUN_COLUMNS``, then ``name``, ``fullname``, ``group``, every ``extra_info`` key, the
    ``STAT_COLUMNS`` and ``data`` (the raw per-iteration samples in seconds as a float64 numpy array, or None
    when not saved). Benchmarks of other suites are left out; a run with none of ours gives an empty frame.
    ``doc`` is not changed.
    """
    checked = check_run(doc, source)
    shared, _, run, problems = _loaded(checked, source)
    rows = joined_rows(shared, _rows(checked)) if run is not None else []
    runs = pd.DataFrame([run] if rows else [], columns=list(RUN_INFO_COLUMNS))
    return LoadResult(
        frame=_frame(rows), problems=tuple(problems), files_used=(Path(source),) if rows else (), runs=runs
    )


def load_runs(
    paths: Iterable[str | Path],
    samples: Samples,
    facts: Sequence[str] = (),
    meanwhile: Callable[[], object] | None = None,
    cache: Path | None = None,
    categorical: bool = False,
    unread: Collection[str] = (),
    store_behind: bool = False,
) -> LoadResult:
    """Read every saved run under ``paths`` into one frame; never raises for a bad file.

    ``samples``: keep the raw per-iteration samples (``data``): of every case (True), of none (False: ``data``
    None, which makes loading a fleet of runs several times faster: raw samples are most of a run's bytes,
    and parsing their text is nearly all of the loading time), or of the cases a predicate of the saved
    benchmark picks (``Samples``; a module-level function, as it may be sent to worker processes).
    ``facts``: names of run facts (``analysis.facts``) to read into ``runs`` as text, one column
    ``fact:<name>`` each (None where a run does not record it), so a comparison can group by them.
    ``meanwhile``: called here while the files are parsed (``map_batches``). ``cache``: the folder of the
    cache of parsed files (``analysis.cache``): files unchanged since a load with the same ``samples`` and
    ``facts`` are read from it instead of parsed; None (the default) parses every file.

    ``categorical``: the frame's text columns (every value text or missing) as pandas ``Categorical``
    columns whose categories are the distinct texts, sorted (so sorting and grouping order them as plain
    text), for a caller that only reads the frame: a fleet of 10⁵ runs repeats a few texts in 4·10⁶ rows,
    which then take a byte or two a row instead of eight, and group without hashing every row's text
    (``python -m analysis compare``). ``unread``: frame columns the caller never reads, left out of the
    frame and not even read from the cache (``analysis.compare.UNREAD_COLUMNS``: half of a fleet's
    columns). ``store_behind``: the files parsed are written into the cache by a thread
    (``RunCache.store_behind``), and this returns before they are: the caller goes on with its work and
    waits for them with ``analysis.cache.wait_for_stores`` (the command line does, before it exits).

    Each path is a file, a folder (searched recursively for ``*.json``, as pytest-benchmark's storage nests
    runs in one folder per platform) or a glob (``**`` allowed). A file that cannot be read, is not JSON, is
    not a pytest-benchmark run or holds no usable launchbench case adds one line to ``problems`` and is
    skipped; so does a path that matches nothing, and a folder under a path that cannot be read.
    """
    files, problems = _expand(paths)
    store = open_cache(cache, samples, facts) if cache is not None else None
    unread = frozenset(unread)
    if store is not None:
        store.unread = unread
    keys, hits = store.lookup(files) if store is not None else ([], {})
    reading = _Reading(store, hits) if hits else None  # segments read while the rest parse and import
    fresh = [index for index in range(len(files)) if index not in hits]
    batches = map_batches(_read_batch, [files[i] for i in fresh], samples, tuple(facts), meanwhile=meanwhile)
    parts = reading.parts() if reading is not None else {}
    if len(parts) < len(hits):  # a segment that cannot be read: its files are parsed now
        lost = [index for index in hits if index not in parts]
        batches += map_batches(_read_batch, [files[i] for i in lost], samples, tuple(facts))
        fresh += lost
    columns: dict[str, list[Column | int]] = {}
    count = 0
    for batch in batches:
        count = _append_columns(columns, count, batch.columns)
    fresh_columns = {key: _joined(parts_) for key, parts_ in columns.items()}
    parsed = _fresh_entries(fresh, keys, batches)
    if store is not None and parsed:
        (store.store_behind if store_behind else store.store)(fresh_columns, list(parsed.values()))
    if hits:  # cached and parsed files, in the order of ``files``
        del columns, batches  # the parsed rows' parts: joined into fresh_columns
        return _assembled(store, files, problems, parts, fresh_columns, parsed, facts, categorical)
    runs = [run for batch in batches for run in batch.runs]
    kept = {key: values for key, values in fresh_columns.items() if key not in unread}
    del fresh_columns
    return LoadResult(
        frame=_frame(kept, categorical),
        problems=tuple(problems + [line for batch in batches for line in batch.problems]),
        files_used=tuple(path for batch in batches for path in batch.used),
        runs=pd.DataFrame(runs, columns=[*RUN_INFO_COLUMNS, *(fact_column(name) for name in facts)]),
    )


def _slice(values: Column, first: int, end: int, kind: str | None) -> Column:
    """Rows ``first`` to ``end`` of a cached or fresh column, packed as a batch of those rows would be
    (``_packed``); texts stay a list or a cached ``Categorical`` (``_packed`` keeps a list of texts as it
    is, so it is skipped)."""
    if isinstance(values, np.ndarray | pd.Categorical):
        return values if first == 0 and end == len(values) else values[first:end]
    part = values if first == 0 and end == len(values) else values[first:end]  # all rows: no copy
    return part if kind == "text" else _packed(part)


def _fresh_entries(fresh: list[int], keys: list[Key | None], batches: list[_Batch]) -> dict[int, Fresh]:
    """The files parsed now (by position in the files loaded, ``fresh`` in the order parsed), with their
    cache keys (``keys``, empty without a cache) and their rows' place among the rows joined."""
    runs = iter(run for batch in batches for run in batch.runs)
    files = (entry for batch in batches for entry in batch.files)
    entries = {}
    first = 0
    for index, (count, lines, row_keys) in zip(fresh, files, strict=True):
        key = keys[index] if keys else None
        entries[index] = Fresh(key, first, count, next(runs) if count else None, lines, row_keys)
        first += count
    return entries


class _Reading:
    """The cached rows of ``hits`` read in a thread (Parquet is read without holding the GIL), while the
    command parses the other files and imports what it needs next."""

    def __init__(self, store: RunCache, hits: dict[int, Entry]) -> None:
        self._hits = hits
        self._store = store
        self._readable: dict[str, bool] = {}
        self._thread = threading.Thread(target=self._read, name="cache-read", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for entry in self._hits.values():
            if entry.segment not in self._readable:
                try:
                    self._store.columns(entry.segment)
                    self._readable[entry.segment] = True
                except Exception:  # a damaged or vanished segment (pyarrow's errors vary): parse its files
                    self._readable[entry.segment] = False

    def parts(self) -> dict[int, Entry]:
        """The hits whose segment could be read."""
        self._thread.join()
        return {i: entry for i, entry in self._hits.items() if self._readable.get(entry.segment, False)}


def _assembled(
    store: RunCache,
    files: list[Path],
    problems: list[str],
    parts: dict[int, Entry],
    fresh_columns: dict[str, Column],
    parsed: dict[int, Fresh],
    facts: Sequence[str],
    categorical: bool,
) -> LoadResult:
    """``load_runs``' result from cached files (``parts``, by position in ``files``) and the files parsed
    now (``parsed``): the rows of consecutive files from one source joined as one part, as a batch's are."""
    pieces: list[list] = []  # [segment (None: parsed now), first row, end row, the keys of each file]
    runs: list[dict[str, object]] = []
    used: list[Path] = []
    lines = list(problems)
    for index, path in enumerate(files):
        entry = parts.get(index) or parsed[index]
        source = entry.segment if isinstance(entry, Entry) else None
        lines.extend(entry.problems)
        if not entry.count:
            continue
        runs.append(entry.run)
        used.append(path)
        if pieces and pieces[-1][0] == source and pieces[-1][2] == entry.first:
            pieces[-1][2] += entry.count
            pieces[-1][3].append(entry.keys)
        else:
            pieces.append([source, entry.first, entry.first + entry.count, [entry.keys]])
    columns: dict[str, list[Column | int]] = {}
    total = 0
    for source, first, end, key_lists in pieces:
        data, kinds = (fresh_columns, {}) if source is None else store.columns(source)
        names = dict.fromkeys(key for keys in key_lists for key in keys if key not in store.unread)
        piece = {name: _slice(data[name], first, end, kinds.get(name)) for name in names}
        total = _append_columns(columns, total, piece)
    joined = {key: _joined(parts_) for key, parts_ in columns.items()}
    del columns, fresh_columns
    store.release()  # the segments' columns: what the frame needs of them is in ``joined``
    return LoadResult(
        frame=_frame(joined, categorical),
        problems=tuple(lines),
        files_used=tuple(used),
        runs=pd.DataFrame(runs, columns=[*RUN_INFO_COLUMNS, *(fact_column(name) for name in facts)]),
    )


def fact_column(name: str) -> str:
    """The column of ``LoadResult.runs`` that holds the fact ``name`` (``load_runs``' ``facts``)."""
    return f"fact:{name}"


def expand_paths(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """The JSON files ``paths`` name, each once, and one line per path that names none (``load_runs``'s
    rules: files, folders searched recursively, globs)."""
    return _expand(paths)


def _expand(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """Return the JSON files ``paths`` name (each once, in the order given, folders sorted) and the problems
    of paths that name none and of folders that cannot be read."""
    files: list[Path] = []
    problems: list[str] = []
    seen: set[str] = set()
    parents: dict[str, str] = {}

    def add(path: Path) -> None:
        key = _resolved(path, parents)
        if key not in seen:
            seen.add(key)
            files.append(path)

    for raw in paths:
        text = str(raw)
        try:
            if Path(text).exists():
                matches = [Path(text)]
            elif _GLOB_CHARS & set(text):
                matches = _globbed(text)
                if not matches:
                    problems.append(f"{printable(text)}: the pattern matches no file")
                    continue
            elif Path(text).is_symlink():
                problems.append(f"{printable(text)}: a link to nothing (broken link): skipped")
                continue
            else:
                problems.append(f"{printable(text)}: no such file or folder")
                continue
            for match in matches:
                if match.is_dir():
                    found, unreadable = _json_files(match)
                    problems.extend(unreadable)
                    if not found and not unreadable:
                        problems.append(
                            f"{printable(match)}: folder holds no saved run (no .json file under it)"
                        )
                    for path in found:
                        add(path)
                elif _regular(match, problems):
                    add(match)
        except (OSError, RuntimeError) as exc:  # a name the OS refuses (too long), a link loop
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            problems.append(f"{printable(text)}: the OS refuses this path ({reason}): skipped")
    return files, problems


def _resolved(path: Path, parents: dict[str, str]) -> str:
    """``path.resolve()`` as text, its folder's resolution taken from ``parents`` (and kept there): resolving
    each of 10⁵ files of one folder component by component, and making a ``Path`` of each step, took most of
    a fleet's expansion time."""
    if os.path.islink(path) or path.name in ("", ".", ".."):  # noqa: PTH114 (no Path object made per file)
        return str(path.resolve())
    folder, name = os.path.split(str(path))
    parent = parents.get(folder)
    if parent is None:
        parent = parents[folder] = str(path.parent.resolve())
    return os.path.join(parent, name)  # noqa: PTH118


def _regular(path: Path, problems: list[str]) -> bool:
    """Whether ``path`` is a regular file (a saved run may be one); else one line in ``problems`` saying what
    it is: a pipe or a device would block or never end when read, a broken link names nothing."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        what = "a link to nothing (broken link)" if path.is_symlink() else f"cannot be read ({exc.strerror})"
        problems.append(f"{printable(path)}: {what}: skipped")
        return False
    if stat.S_ISREG(mode):
        return True
    what = "a folder" if stat.S_ISDIR(mode) else "a pipe" if stat.S_ISFIFO(mode) else "not a regular file"
    problems.append(f"{printable(path)}: {what}, not a saved run file: skipped")
    return False


def _globbed(pattern: str) -> list[Path]:
    """The paths ``pattern`` matches, sorted (``**``: any folders deep). ``**`` does not follow links to
    folders (as ``os.walk``): ``glob.glob`` does, and a link loop under it makes the search run for
    minutes; a folder given as a folder is searched the same way (``_json_files``)."""
    if "**" not in pattern:
        return [Path(match) for match in sorted(glob.glob(pattern))]  # noqa: PTH207 (absolute patterns)
    parts = Path(pattern).parts
    literal = next((index for index, part in enumerate(parts) if _GLOB_CHARS & set(part)), len(parts))
    base = Path(*parts[:literal]) if literal else Path()
    found: list[Path] = []
    _walk_pattern(base, parts[literal:], found, shown=Path(*parts[:literal]) if literal else None)
    return sorted(dict.fromkeys(found))


def _walk_pattern(folder: Path, parts: Sequence[str], found: list[Path], shown: Path | None) -> None:
    """Add to ``found`` what the pattern ``parts`` matches under ``folder`` (named ``shown``, None for the
    current folder), as ``glob`` matches them (a leading "." matched only by a pattern that has one), links
    to folders not entered by ``**``."""
    if not parts:
        found.append(shown if shown is not None else Path())
        return
    head, rest = parts[0], parts[1:]
    if head == "**":
        _walk_pattern(folder, rest, found, shown)
        for entry in _entries(folder):
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                child = shown / entry.name if shown is not None else Path(entry.name)
                _walk_pattern(Path(entry.path), parts, found, child)
        return
    for entry in _entries(folder):
        if entry.name.startswith(".") and not head.startswith("."):
            continue
        if fnmatch.fnmatchcase(entry.name, head) and (not rest or entry.is_dir()):
            child = shown / entry.name if shown is not None else Path(entry.name)
            _walk_pattern(Path(entry.path), rest, found, child)


def _entries(folder: Path) -> list[os.DirEntry]:
    """The entries of ``folder``; none when it cannot be read (the pattern then matches nothing there)."""
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except OSError:
        return []


def _json_files(folder: Path) -> tuple[list[Path], list[str]]:
    """The ``*.json`` files under ``folder`` (sorted; symlinked folders not followed, as ``Path.rglob``),
    and one line per folder under it that cannot be read (its runs would otherwise be missed in silence)
    and per ``*.json`` that is no regular file (a pipe, a broken link, a folder: ``_regular``)."""
    unreadable: list[str] = []

    def note(error: OSError) -> None:
        where = printable(error.filename if error.filename is not None else folder)
        reason = error.strerror or error
        unreadable.append(f"{where}: folder cannot be read ({reason}): the runs in it are not loaded")

    found: list[tuple[tuple[str, ...], Path, str, bool]] = []  # (the path's parts, its folder, name, regular)
    for root, folders, names in _walk(folder, note):
        base = Path(root)
        found += [
            ((*base.parts, name), base, name, regular) for name, regular in names if name.endswith(".json")
        ]
        unreadable += [
            f"{printable(base / name)}: a folder named like a run file: searched as a folder"
            for name in folders
            if name.endswith(".json")
        ]
    found.sort(key=lambda item: item[0])  # as ``Path`` objects sort (part by part), without making them first
    files = [base / name for _, base, name, _ in found]
    return [
        path
        for path, (*_, regular) in zip(files, found, strict=True)
        if regular or _regular(path, unreadable)
    ], unreadable


def _walk(
    top: Path, onerror: Callable[[OSError], None]
) -> Iterable[tuple[str, list[str], list[tuple[str, bool]]]]:
    """``os.walk(top, onerror=onerror)`` (top down, links to folders listed but not entered), each file name
    with whether it is surely a regular file: known from the folder's listing where the file system says
    (no ``stat`` of each of a fleet's 10⁵ files); False where it is a link, a pipe or not said."""
    stack = [os.fspath(top)]
    while stack:
        root = stack.pop()
        folders: list[str] = []
        names: list[tuple[str, bool]] = []
        try:
            with os.scandir(root) as entries:
                for entry in entries:
                    try:
                        is_folder = entry.is_dir()
                    except OSError:
                        is_folder = False
                    if is_folder:
                        folders.append(entry.name)
                    else:
                        try:
                            regular = entry.is_file(follow_symlinks=False)
                        except OSError:
                            regular = False
                        names.append((entry.name, regular))
        except OSError as error:
            onerror(error)
            continue
        yield root, folders, names
        inner = [os.path.join(root, name) for name in folders]  # noqa: PTH118
        stack.extend(reversed([path for path in inner if not os.path.islink(path)]))  # noqa: PTH114


#: What one file gave: the columns its rows share (the run's: ``_shared_columns``), each row's own columns,
#: the run info (None for a file without rows) and the problem lines.
#: One file read (``_read_file``): the columns its rows share (``_shared_columns``), its rows' own columns
#: (``_columns``: one list per key, all of one length), its ``RUN_INFO_COLUMNS`` row (None for a file
#: without a usable case) and its problem lines.
FileResult = tuple[dict[str, object], dict[str, list[object]], dict[str, object] | None, list[str]]


def joined_rows(shared: Mapping[str, object], rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """One dict per row of a file (``_rows``): the shared columns first, then the row's own (no key is in
    both: an ``extra_info`` key may not name a run's column, ``_RESERVED_COLUMNS``)."""
    return [{**shared, **row} for row in rows]


@dataclass(frozen=True)
class _Batch:
    """What ``_read_batch`` read from consecutive files: their launchbench rows as columns (``Column``s of
    equal length), run infos, problem lines and the files used."""

    columns: dict[str, Column]
    runs: list[dict[str, object]]
    problems: list[str]
    used: list[Path]
    #: Per file of the batch, in order: its rows, problem lines and rows' keys (for the cache's entries).
    files: list[tuple[int, list[str], tuple[str, ...]]] = field(default_factory=list)

    def __getstate__(self) -> dict[str, object]:
        """The batch as it travels from a worker: the raw samples (``data``) as one array and each row's
        count (``_joined_samples``), not one array a row (pickling 67 small arrays a quick run, and taking
        them apart in the command, cost five times as much)."""
        state = dict(self.__dict__)
        samples = _joined_samples(self.columns.get("data"))
        if samples is not None:
            state["columns"] = {**self.columns, "data": samples}
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        columns = state["columns"]
        if isinstance(columns.get("data"), _JoinedSamples):
            state = {**state, "columns": {**columns, "data": columns["data"].rows()}}
        self.__dict__.update(state)


@dataclass(frozen=True)
class _JoinedSamples:
    """A batch's raw samples column in transit (``_Batch.__getstate__``): every row's samples end to end in
    ``values``; ``counts`` each row's count, or ``_NO_SAMPLES`` (None) or ``_NAN_SAMPLES`` (NaN: the row's
    case has no such key) for a row without."""

    values: np.ndarray
    counts: np.ndarray

    def rows(self) -> list[np.ndarray | float | None]:
        """The column as it was: one array per row (views into ``values``), None or NaN."""
        present = self.counts >= 0
        out: list[np.ndarray | float | None] = [
            None if count == _NO_SAMPLES else math.nan for count in self.counts.tolist()
        ]
        ends = np.cumsum(self.counts[present]).tolist()
        values = self.values  # sliced in a loop: np.split's per-piece work took 4× as long
        for index, start, end in zip(np.flatnonzero(present).tolist(), [0, *ends][:-1], ends, strict=True):
            out[index] = values[start:end]
        return out


#: ``_JoinedSamples.counts`` of a row whose raw samples are None (not read), and of a row without the key.
_NO_SAMPLES, _NAN_SAMPLES = -1, -2


def _joined_samples(column: Column | None) -> _JoinedSamples | None:
    """``column`` (a batch's ``data``) as ``_JoinedSamples``, or None where it holds anything but 1-D
    float64 arrays, None and NaN (then it travels as it is)."""
    if not isinstance(column, list):
        return None
    counts = []
    arrays = []
    for value in column:
        if type(value) is np.ndarray and value.dtype == np.float64 and value.ndim == 1:
            counts.append(value.size)
            arrays.append(value)
        elif value is None:
            counts.append(_NO_SAMPLES)
        elif type(value) is float and math.isnan(value):
            counts.append(_NAN_SAMPLES)
        else:
            return None
    values = np.concatenate(arrays) if arrays else np.zeros(0)
    return _JoinedSamples(values, np.array(counts, dtype=np.int64))


def _read_batch(paths: list[Path], samples: Samples, facts: Sequence[str]) -> _Batch:
    """``_read_file`` of each of ``paths``, joined: the rows travel from a worker as one array (or list) per
    column, not as one dict per row, which would be most of a fleet's memory and of its transfer time."""
    values: dict[str, list[object]] = {}  # one list per column; a key a row lacks is NaN, as pandas has it
    # One object per distinct text: the rows repeat a few texts (case, op, machine) 10⁵ times, and shared
    # objects travel from a worker once and take memory once.
    texts: dict[str, str] = {}
    count = 0
    batch = _Batch(columns={}, runs=[], problems=[], used=[])
    for path in paths:
        shared, columns, run, problems = _read_file(path, samples, facts)
        batch.problems.extend(problems)
        rows = len(next(iter(columns.values()))) if columns else 0
        keys = tuple(dict.fromkeys(itertools.chain(shared, columns)))  # in order of first appearance
        batch.files.append((rows, problems, keys))
        if not rows:
            continue
        for key in keys:
            if key not in values:
                values[key] = [math.nan] * count
            if key in shared:  # the run's value, the same in each row
                value = shared[key]
                values[key].extend(
                    [texts.setdefault(value, value) if isinstance(value, str) else value] * rows
                )
                continue
            column = columns[key]
            if any(issubclass(kind, str) for kind in set(map(type, column))):
                column = [texts.setdefault(v, v) if isinstance(v, str) else v for v in column]
            values[key].extend(column)
        count += rows
        for column in values.values():
            if len(column) < count:
                column.extend([math.nan] * (count - len(column)))
        batch.runs.append(run)
        batch.used.append(path)
    batch.columns.update((key, _packed(column)) for key, column in values.items())
    return batch


#: A batch's values of one frame column: a numpy array where they are all numbers (they travel from a
#: worker as raw bytes and join without conversion), else a list; texts read from the cache are a
#: ``pandas.Categorical`` (``analysis.cache.text_categorical``).
Column = np.ndarray | list | pd.Categorical


def _packed(values: list[object]) -> Column:
    """``values`` as the array pandas would make of them (int64 for ints only; float64 with NaN for numbers
    and None, at least one a number), or as they are."""
    kinds = set(map(type, values))
    try:
        if kinds == {int}:
            return np.array(values, dtype=np.int64)
        if kinds <= {int, float, type(None)} and kinds & {int, float} and kinds != {int}:
            return np.array([math.nan if value is None else value for value in values], dtype=np.float64)
    except OverflowError:  # an integer past 64 bits: pandas keeps it as an object
        pass
    return values


def _append_columns(columns: dict[str, list[Column | int]], count: int, new: dict[str, Column]) -> int:
    """Append ``new`` (one batch's rows as columns) to ``columns`` (``count`` rows so far, each column a list
    of parts; an int part stands for that many missing values); return the new count."""
    added = len(next(iter(new.values()))) if new else 0
    for key, values in new.items():
        if key not in columns:
            columns[key] = [count] if count else []
        columns[key].append(values)
    count += added
    for key, parts in columns.items():
        if key not in new and added:
            parts.append(added)
    return count


def _joined(parts: list[Column | int]) -> Column:
    """One column of the frame from its parts (``_append_columns``): one array when every part is numeric,
    else one list of Python values; missing values NaN either way."""
    if len(parts) == 1 and isinstance(parts[0], list | pd.Categorical):  # taken as it is (10⁶ rows: no copy)
        return parts[0]
    if any(isinstance(part, pd.Categorical) for part in parts):
        return _joined_texts(parts)
    if all(isinstance(part, np.ndarray | int) for part in parts) and any(
        isinstance(part, np.ndarray) for part in parts
    ):
        return np.concatenate(
            [part if isinstance(part, np.ndarray) else np.full(part, math.nan) for part in parts]
        )
    joined: list[object] = []
    for part in parts:
        joined.extend(
            [math.nan] * part
            if isinstance(part, int)
            else part.tolist()
            if isinstance(part, np.ndarray)
            else part
        )
    return joined


def _joined_texts(parts: list[Column | int]) -> Column:
    """``_joined`` of parts of which some are cached texts (``Categorical``): one ``Categorical`` when every
    part is text or missing, else one list of Python values. (A batch whose values of a text column are all
    missing holds them as a float array of NaN, ``_packed``: a run read without its rounds has no
    ``steady`` class.)"""
    texts = []
    for part in parts:
        if isinstance(part, int):
            part = [math.nan] * part
        if isinstance(part, np.ndarray):
            part = part.tolist()
        if isinstance(part, list):
            if not texts_or_missing(part):
                return _joined([p.to_numpy().tolist() if isinstance(p, pd.Categorical) else p for p in parts])
            part = _text_column(part)
        texts.append(part)
    return union_categoricals(texts, sort_categories=True)


def _text_column(values: list[object]) -> pd.Categorical:
    """A list of texts and missing values (NaN) as ``analysis.cache.text_categorical`` holds them."""
    codes, texts = pd.factorize(np.array(values, dtype=object))
    return text_categorical(codes, list(texts))


def map_batches(
    function: Callable[..., T],
    files: list[Path],
    *args: object,
    meanwhile: Callable[[], object] | None = None,
) -> list[T]:
    """``function(batch, *args)`` of consecutive batches of ``files``, in order: in worker processes, four
    batches per CPU or more (none of more than ``MAX_BATCH_FILES`` files), when there are many files and CPUs
    (JSON parsing is the whole cost of loading a fleet of runs, and it is CPU-bound), else all files in one
    batch here. ``function`` must be a module-level function (it is sent to the workers by name).

    ``meanwhile`` is called in this process once the workers have started (before the batch without
    them): work of its own, such as the imports the caller needs next (SciPy's take half a second), done
    while the workers parse instead of after them; with no file to parse it is not called (every file
    was in the cache: the caller imports what it needs when it needs it, and results kept by
    ``analysis.memo`` may need none of it).

    The workers leave with their parent: on an interrupt (Ctrl-C, SIGTERM turned into one by the CLI) the
    work not started is cancelled and the workers end after their current batch (at most
    ``MAX_BATCH_FILES`` files, so within about a second), before the interrupt goes on; a worker whose
    parent has died (SIGKILL) ends by itself (``_worker_start``)."""
    workers = min(usable_cpus(), 8)
    if len(files) < PARALLEL_MIN_FILES or workers < 2:
        if meanwhile is not None and files:
            meanwhile()
        return [function(files, *args)]
    size = min(-(-len(files) // (4 * workers)), MAX_BATCH_FILES)
    batches = [files[start : start + size] for start in range(0, len(files), size)]
    calls = [(function, (batch, *args)) for batch in batches]
    return run_workers(workers, pool_context(), calls, _lost_line, meanwhile)


def run_workers(
    count: int,
    context: multiprocessing.context.BaseContext | None,
    calls: Sequence[tuple[Callable[..., T], tuple[object, ...]]],
    lost: Callable[[list[object]], str],
    meanwhile: Callable[[], object] | None = None,
) -> list[T]:
    """The results of ``calls`` (module-level functions and their arguments), in order, made in a pool of
    ``count`` workers (``start_workers``); ``meanwhile`` is called here once they have started. A worker
    that ends before its calls are done is ``WorkerLost`` with ``lost`` of the workers started (what
    they were doing, in the caller's words); the pool is ended whatever happens."""
    pool = None
    started: list[object] = []
    try:
        pool, futures = start_workers(count, context, calls)
        started = worker_processes(pool)  # a broken pool forgets its workers: kept to name the one lost
        if meanwhile is not None:
            meanwhile()
        await_workers(pool, futures, lost)
        return [future.result() for future in futures]
    except BrokenProcessPool as exc:
        raise WorkerLost(lost(started)) from exc
    finally:
        if pool is not None:
            stop_workers(pool)


#: How often (s) the command checks that its loading workers are alive while it waits for them.
_WORKER_CHECK_S = 0.1


#: The modules that draw the figures (matplotlib's importers): a report imports them while its files load.
FIGURE_MODULES = tuple(
    f"analysis.figures.{module}" for module in ("cpu", "decode", "gpu", "ladder", "machines")
)
#: The modules a fork server imports once, at its start, before it forks any worker: without them each
#: loading or drawing worker imported pandas, matplotlib and analysis anew, and an in-process ``report`` of
#: two runs with JAX loaded took 2.7-3.7 s instead of 1.0-1.2 s (load 2; docs/speed.md, "The test suite").
#: The workers still start bare of the parent's state.
FORK_SERVER_PRELOAD = ("analysis.load", "analysis.report", *FIGURE_MODULES)


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask where the OS keeps one, else every CPU."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def start_workers(
    count: int,
    context: multiprocessing.context.BaseContext | None,
    calls: Sequence[tuple[Callable[..., object], tuple[object, ...]]],
) -> tuple[ProcessPoolExecutor, list[Future]]:
    """A pool of ``count`` worker processes, started from ``context`` (``pool_context``'s choice) and ending
    with this command (``_worker_start``), with each of ``calls`` (a module-level function and its
    arguments) submitted to it: the loaders' and the figures' pools alike. The stop signals are held
    meanwhile: an interrupt while workers start would leave a pool that cannot be shut down. The caller
    waits (``await_workers``) and, whatever happens, ends the pool (``stop_workers``)."""
    spawned: list[multiprocessing.process.BaseProcess] = []
    context = context or multiprocessing.get_context()
    if context.get_start_method() == "fork":  # a fork server is sent the class: it must be importable
        context = _Recording(context, spawned)
    with held():
        pool = ProcessPoolExecutor(
            max_workers=count, mp_context=context, initializer=_worker_start, initargs=(os.getpid(),)
        )
        if isinstance(context, _Recording):
            _SPAWNED[pool] = spawned
        futures: list[Future] = []
        try:
            for function, args in calls:  # the first starts the workers
                futures.append(pool.submit(function, *args))
        except BrokenProcessPool as exc:  # a worker died while the rest were submitted: theirs fail alike
            for _ in calls[len(futures) :]:
                futures.append(Future())
                futures[-1].set_exception(exc)
        except BaseException:
            stop_workers(pool)
            raise
        return pool, futures


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Keep the objects alive now out of the cyclic garbage collector's reach (``gc.freeze``) until the
    outermost such block ends (then ``gc.unfreeze``): a forked worker then inherits them without its
    collector writing into (and so copying) every page of them, and this process's full collections stop
    walking them (a quick fleet's loaded frame made the command's four full collections 0.2 s).
    ``freeze_more`` adds what is made meanwhile."""
    global _FROZEN_DEPTH
    gc.freeze()
    _FROZEN_DEPTH += 1
    try:
        yield
    finally:
        _FROZEN_DEPTH -= 1
        if not _FROZEN_DEPTH:
            gc.unfreeze()


def freeze_more() -> None:
    """Inside ``frozen_heap``: freeze the objects made since (a command's loaded runs, which live until it
    ends); elsewhere nothing."""
    if _FROZEN_DEPTH:
        gc.freeze()


#: How many ``frozen_heap`` blocks are open in this process.
_FROZEN_DEPTH = 0


def pool_context() -> multiprocessing.context.BaseContext | None:
    """The workers' start method: the platform's default (fork on Linux: the cheapest), or a fork server
    where a multithreaded runtime is loaded in this process (a test session, a notebook with JAX)."""
    threaded = any(name in sys.modules for name in THREADED_RUNTIMES)
    if threaded and "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(FORK_SERVER_PRELOAD))  # read when the server starts, not after
        return context
    return None


def forks(context: multiprocessing.context.BaseContext | None) -> bool:
    """Whether workers started from ``context`` (``pool_context``'s choice; None: the platform's default) are
    forked from this process, and so inherit what it holds: the default is "fork" on Linux before Python
    3.14, "spawn" on macOS and "forkserver" on Linux from 3.14, whose workers must be sent their data."""
    return (context or multiprocessing.get_context()).get_start_method() == "fork"


def await_workers(
    pool: ProcessPoolExecutor, futures: list[Future], lost: Callable[[list[object]], str] | None = None
) -> None:
    """Wait until every one of ``futures`` is done; ``WorkerLost`` (``lost`` of the workers: by default
    the loaders' line) as soon as a worker of ``pool`` has ended.
    ``ProcessPoolExecutor`` alone may wait forever: a worker killed while it sends a batch's result leaves
    half a message in the result pipe, which its manager thread then waits on for good."""
    pending = set(futures)
    while pending:
        _, pending = wait(pending, timeout=_WORKER_CHECK_S, return_when=FIRST_EXCEPTION)
        if any(future.done() and future.exception() is not None for future in futures):
            return  # ``result()`` raises it (BrokenProcessPool when a worker died and the pool noticed)
        workers = worker_processes(pool)  # once: a pool that sees a worker die forgets them all meanwhile
        if pending and any(process.exitcode is not None for process in workers):
            raise WorkerLost((lost or _lost_line)(workers))


def worker_processes(pool: ProcessPoolExecutor) -> list[object]:
    """The worker processes ``pool`` has started (``multiprocessing.Process``), as ``start_workers`` recorded
    them where it forks: the executor's own list forgets them once it sees one die, at times before the
    command could read which one and how (a line without the worker's pid and signal)."""
    spawned = _SPAWNED.get(pool)
    return list(spawned) if spawned is not None else list((getattr(pool, "_processes", None) or {}).values())


#: Each pool's workers as started (``_Recording``), while the pool lives.
_SPAWNED: weakref.WeakKeyDictionary[ProcessPoolExecutor, list] = weakref.WeakKeyDictionary()


class _Recording:
    """A multiprocessing context that records each worker process a pool starts with it in ``spawned``, and is
    ``context`` in all else."""

    def __init__(self, context: multiprocessing.context.BaseContext, spawned: list) -> None:
        self._context = context
        base = context.Process

        class Process(base):  # type: ignore[misc,valid-type]
            def start(self) -> None:
                super().start()
                spawned.append(self)

        self.Process = Process

    def __getattr__(self, name: str) -> object:
        return getattr(self._context, name)


#: The line of a loading worker lost (``WorkerLost``).
_lost_line = lost_line(
    "a loading worker process",
    "its files were read",
    "nothing was loaded; run the command again, or with fewer files at once",
)


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """End ``pool``'s workers: wait for them when all are alive (an interrupt: each ends after its batch);
    when one has died, kill the others and do not wait (the pool's manager thread may never return)."""
    workers = worker_processes(pool)
    if all(process.exitcode is None for process in workers):
        pool.shutdown(wait=True, cancel_futures=True)
        return
    for process in workers:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            process.kill()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            process.join(timeout=5)


#: How often (s) a loading worker checks that its parent is alive.
_ORPHAN_CHECK_S = 0.5


def _worker_start(command_pid: int) -> None:
    """Set up a loading worker: Ctrl-C (sent to the whole process group) is the command's to handle, SIGTERM
    ends the worker at once, and a thread ends it once the command (``command_pid``) is gone, killed
    without a chance to stop its workers, so that no worker outlives it. (Under the "fork" start method the
    worker's parent is the command; under "forkserver" it is multiprocessing's fork server, which outlives
    a killed command: so the command itself is watched, where POSIX tells whether a process exists.)"""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    release()  # started while the command held the stop signals; a Ctrl-C held meanwhile is now ignored
    gc.freeze()  # what it inherited lives as long as it does: its full collections walk only its own objects
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent and process_alive(command_pid):
            time.sleep(_ORPHAN_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def _read_file(path: Path, samples: Samples, facts: Sequence[str] = ()) -> FileResult:
    """Return the ``FileResult`` of one file's launchbench rows; no rows when it is unusable. Memory
    or recursion exhausted by an absurd file (10⁵ nested lists, a gigabyte of numbers) skip that file only.
    ``facts``: as ``load_runs``'."""
    name = printable(path)
    try:
        parsed = _parsed(path, samples)
        if isinstance(parsed, str):
            return {}, [], None, [f"{name}: {parsed}"]
        shared, columns, run, problems = _loaded(check_run(parsed, name), name)  # the name as lines show it
    except RecursionError:
        return {}, [], None, [f"{name}: nested too deeply to be a saved run (RecursionError)"]
    except MemoryError:
        return {}, [], None, [f"{name}: too large to load in the memory available (MemoryError)"]
    if run is not None:
        settings = {printable(name): printable(text) for name, text in run_settings(parsed).items()}
        run["settings"] = json.dumps(settings, sort_keys=True, ensure_ascii=False)
        for fact in facts:
            text = fact_text(parsed, fact)
            run[fact_column(fact)] = None if text is None else printable(text)
    return shared, columns, run, problems


def read_run(path: Path, samples: Samples) -> dict | str:
    """The parsed pytest-benchmark run in ``path`` (``samples`` as ``load_runs``'), or one line naming the
    file and why it is not one (unreadable, empty, not UTF-8, not JSON, absurdly deep or large, no
    'benchmarks' list): what any suite's runs are read with (``analysis.foreign``)."""
    name = printable(path)
    try:
        parsed = _parsed(path, samples)
    except RecursionError:
        return f"{name}: nested too deeply to be a saved run (RecursionError)"
    except MemoryError:
        return f"{name}: too large to load in the memory available (MemoryError)"
    if isinstance(parsed, str):
        return f"{name}: {parsed}"
    if not isinstance(parsed, dict) or not isinstance(parsed.get("benchmarks"), list):
        return f"{name}: JSON but not a pytest-benchmark run (no 'benchmarks' list)"
    return parsed


#: Which raw samples to read: every case's (True), none (False), or those of the cases (benchmarks of the
#: saved JSON) a predicate picks: parsing samples is most of the cost of loading a run, and many cases'
#: samples are never used by a command.
Samples = bool | Callable[[Mapping], bool]


def _parsed(path: Path, samples: Samples) -> object:
    """The parsed JSON document of ``path``, with the raw samples ``samples`` does not ask for cut out, or
    why it has none (text: the problem, without the file name).

    orjson parses a saved run several times faster than ``json`` (numbers are most of its text); where it
    refuses one (NaN, an integer past 64 bits, a byte-order mark, not JSON), ``json`` decides, and words the
    error. Saved runs are UTF-8 (pytest-benchmark writes them so, as RFC 8259 asks); anything else is not a
    run."""
    raw = _read_regular(path)
    if isinstance(raw, str):
        return raw
    if not raw or raw.isspace():  # not ``strip``, which copies the file's bytes
        return "file is empty"
    whole = samples is True or _parse_whole(raw)
    cut, spans = (raw, []) if whole else _without_samples(raw)
    try:
        doc = orjson.loads(cut)
    except orjson.JSONDecodeError:
        doc = _json_parsed(raw, cut)
        if isinstance(doc, str) or doc is _WHOLE:
            return doc if isinstance(doc, str) else _json_parsed(raw, raw)
    if spans:
        try:
            _restore_samples(doc, raw, spans, samples)
        except ValueError:  # a list cut out is not JSON itself (or marker text in the file): read it whole
            return _json_parsed(raw, raw)
    elif whole and samples is not True:
        _drop_samples(doc, samples)
    return doc


#: A saved case's raw samples as pytest-benchmark writes them: what ``_without_samples`` cuts out.
_SAMPLES_KEY = b'"data": ['
#: Raw samples are cut out before parsing (``_without_samples``) only from a file of at least this many bytes
#: per sample list: cutting and putting back costs more than parsing a short list, and today's runs hold
#: short ones (a quick run: 67 lists in 160 kB, 2.4 ms a file cut against 1.5 ms parsed whole, with every
#: list wanted); a run of 10⁵ samples a case is cut, and its unwanted samples never become Python floats.
_CUT_MIN_BYTES = 64 * 1024


def _parse_whole(raw: bytes) -> bool:
    """Whether ``raw`` is parsed whole rather than with its sample lists (``_SAMPLES_KEY``) cut out: it holds
    none, or less than ``_CUT_MIN_BYTES`` a list. The lists are found one by one, not counted: a quick run's
    first lists lie at its start, and counting them all scanned its 160 kB, a tenth of the time of parsing
    it."""
    found, start = 0, -1
    while (start := raw.find(_SAMPLES_KEY, start + 1)) >= 0:
        found += 1
        if len(raw) < _CUT_MIN_BYTES * found:
            return True
    return found == 0


def _drop_samples(doc: object, samples: Samples) -> None:
    """Set each case's raw samples (``stats.data``) that ``samples`` does not ask for to null, in a document
    parsed whole, as ``_restore_samples`` leaves the lists it cut out."""
    benchmarks = doc.get("benchmarks") if isinstance(doc, dict) else None
    for bench in benchmarks if isinstance(benchmarks, list) else ():
        stats = bench.get("stats") if isinstance(bench, dict) else None
        if (
            isinstance(stats, dict)
            and isinstance(stats.get("data"), list)
            and not (samples and samples(bench))
        ):
            stats["data"] = None


def _read_regular(path: Path) -> bytes | str:
    """The bytes of the regular file ``path``, or why it has none (text). Opened without blocking and
    checked before reading: a pipe (``mkfifo``) or a device named like a run would block the command
    forever, or never end."""
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    with os.fdopen(handle, "rb") as file:
        try:
            if not stat.S_ISREG(os.fstat(handle).st_mode):
                return "not a regular file (a pipe or a device), not a saved run"
            return file.read()
        except OSError as exc:
            return f"cannot be read ({exc.strerror or exc})"


def _loads(text: bytes) -> object:
    """``text`` parsed by orjson, or by ``json`` where orjson refuses it; ``ValueError`` when neither can."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text.decode("utf-8-sig"))


#: ``_json_parsed``'s answer when the text with its samples cut out is not JSON but the whole may be.
_WHOLE = object()


def _json_parsed(raw: bytes, cut: bytes) -> object:
    """``json``'s reading of ``cut`` (``raw``, or ``raw`` with its samples cut out): the document, the problem
    of ``raw`` (text), or ``_WHOLE`` when ``cut`` is not JSON but is not all of ``raw`` (read ``raw`` then,
    so that an error's position points into the file)."""
    if cut is not raw:
        try:
            return json.loads(cut.decode("utf-8-sig"))
        except ValueError:
            return _WHOLE
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data":
            return "ends early inside a character (truncated?)"
        return f"not a text file (not UTF-8: byte {exc.start}), so not a saved run"
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = "ends early (truncated?)" if _cut_short(text, exc.pos) else "is not valid JSON"
        return f"{where}: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except ValueError as exc:  # e.g. a number of more digits than Python converts (sys.int_info)
        return f"is not valid JSON for Python: {str(exc).splitlines()[0]}"


def _cut_short(text: str, error_at: int) -> bool:
    """Whether JSON ``text`` that fails to parse at ``error_at`` looks cut short: the error is at its end, or
    it opens an object or list it never closes (a cut inside a number or a name fails a little before)."""
    stripped = text.strip()
    return error_at >= len(text.rstrip()) or (stripped[:1] in ("{", "[") and stripped[-1:] not in ("}", "]"))


#: What a raw-sample list cut out of a file's text is replaced by before parsing (``_without_samples``):
#: text no saved run holds (it starts with a NUL), numbered so each list is put back where it was.
_CUT = "\x00launchbench-cut:"


def _without_samples(raw: bytes) -> tuple[bytes, list[tuple[int, int]]]:
    """``raw`` with every raw-sample list (``"data": [...]``, flat numbers as pytest-benchmark writes them)
    replaced by a numbered marker (``_CUT``), and where in ``raw`` each list was; ``raw`` itself (and no
    places) when its text does not look like that, so JSON errors stay exact. Any ``"data"`` list is cut,
    also one that is not a case's samples (``extra_info.data``): ``_restore_samples`` puts those back."""
    key = _SAMPLES_KEY
    parts = []
    spans = []
    position = 0
    while (start := raw.find(key, position)) >= 0:
        end = raw.find(b"]", start)
        if end < 0 or raw.find(b"{", start, end) >= 0 or raw.find(b'"', start + len(key), end) >= 0:
            return raw, []
        marker = json.dumps(f"{_CUT}{len(spans)}").encode()
        parts += [raw[position : start + len(key) - 1], marker]
        spans.append((start + len(key) - 1, end + 1))
        position = end + 1
    return (b"".join([*parts, raw[position:]]), spans) if parts else (raw, [])


def _restore_samples(doc: object, raw: bytes, spans: list[tuple[int, int]], wanted: Samples) -> None:
    """Put back into ``doc`` what ``_without_samples`` cut out of ``raw`` (at ``spans``): a case's raw
    samples (``stats.data``) where ``wanted`` picks the case (``Samples``), else null; any other list cut
    out (an ``extra_info.data``) always, where it was, so that it never stands in for a case's samples.
    ``ValueError`` when the markers found are not each cut list once (a file that holds marker text
    itself): the caller then reads the whole text."""
    done: set[int] = set()
    benchmarks = doc.get("benchmarks") if isinstance(doc, dict) else None
    for bench in benchmarks if isinstance(benchmarks, list) else ():
        stats = bench.get("stats") if isinstance(bench, dict) else None
        index = _cut_index(stats.get("data") if isinstance(stats, dict) else None, len(spans), done)
        if index is not None:
            start, end = spans[index]
            stats["data"] = _loads(raw[start:end]) if wanted is True or (wanted and wanted(bench)) else None
    if len(done) == len(spans):
        return
    stack = [doc]
    while stack:  # the other lists cut out, wherever they are (no recursion: a document may be deep)
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            index = _cut_index(value, len(spans), done)
            if index is not None:
                node[key] = _loads(raw[slice(*spans[index])])
            elif isinstance(value, dict | list):
                stack.append(value)
    if len(done) != len(spans):
        raise ValueError("cut lists and markers disagree")


def _cut_index(value: object, count: int, done: set[int]) -> int | None:
    """The number of the cut list ``value`` marks (``_CUT``), added to ``done``; None when it marks none;
    ``ValueError`` for a marker out of range or met twice."""
    if not isinstance(value, str) or not value.startswith(_CUT):
        return None
    number = value[len(_CUT) :]
    index = int(number) if number.isdigit() else -1
    if not 0 <= index < count or index in done:
        raise ValueError(f"marker {value!r} of no cut list")
    done.add(index)
    return index


def _loaded(checked: CheckedRun, source: str) -> FileResult:
    """The ``FileResult`` of one checked run."""
    if checked.run is None:
        return {}, {}, None, list(checked.problems)
    columns = _columns(checked)
    return (
        _shared_columns(checked, source),
        columns,
        _run_info(checked, columns, source),
        list(checked.problems),
    )


def _mapping(value: object) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def _is_attribute_value(value: object) -> bool:
    """Whether ``value`` is a number or text (a recorded device attribute; None and odd types are not)."""
    return isinstance(value, (int, float, str)) and not isinstance(value, bool)


def _text(value: object) -> str | None:
    """``value`` when it is non-empty text (its control characters escaped, ``printable``: a host name of
    "host\\nFAKE" or an escape sequence must not split or recolour a line), else None."""
    return printable(value) if isinstance(value, str) and value else None


def _run_info(checked: CheckedRun, columns: dict[str, list[object]], source: str) -> dict[str, object]:
    """One ``RUN_INFO_COLUMNS`` row for a run: identity, what its record says, its digest and conditions."""
    run = checked.run
    machine_info = run["machine_info"]
    identity = machine_identity(machine_info)
    record = run["record"]
    info: dict[str, object] = dict.fromkeys(RUN_INFO_COLUMNS)
    info.update(
        {key: identity[key] for key in ("machine_id", "stored_machine_id", "host", "system", "cpu_model")},
        gpu_name=identity["gpu_name"],
        logical_cpus=identity["logical_cpus"],
        source=source,
        run_datetime=run["datetime"],
        has_record=record is not None,
        digest=_digest(checked.cases),
        has_samples=any(data is not None for data in columns["data"]),
        families=tuple(sorted({str(case["extra_info"].get("case")) for case in checked.cases})),
        unfinished=(),
        gpu_slowdown=(),
        faults=(),
    )
    if record is None:
        ours_info = _mapping(machine_info.get(SUITE))
        load = ours_info.get("load_avg")  # saved in machine_info before the run record existed
        info.update(
            _legacy_quick(checked.cases),
            usable_cpus=ours_info.get("usable_cpus"),
            load_saved=load[0] if load else None,
        )
        return info
    cases = _mapping(record.get("cases"))
    selection = _mapping(record.get("selection"))
    conditions = _mapping(record.get("conditions"))
    during = _mapping(conditions.get("during"))
    load = _mapping(conditions.get("start")).get("load_avg")
    selected = [
        f"-k {selection['keyword']!r}" if selection.get("keyword") else None,
        f"-m {selection['markexpr']!r}" if selection.get("markexpr") else None,
    ]
    info.update(
        quick=record["quick"],
        quick_basis="run record",
        status=record["status"],
        interrupted_by=_text(record.get("interrupted_by")),
        planned=cases.get("planned"),
        measured=cases.get("measured"),
        unfinished=tuple(cases.get("unfinished") or ()),
        selected_by=" ".join(part for part in selected if part) or None,
        usable_cpus=conditions.get("usable_cpus"),
        other_cpu_share=during.get("other_cpu_share"),
        steal_share=during.get("steal_share"),
        load_start=load[0] if load else None,
        gpu_slowdown=tuple(conditions.get("gpu_slowdown") or ()),
        faults=tuple(printable(fault) for fault in record.get("faults") or ()),
        sentinel=sentinel_from_record(record),
    )
    return info


def _legacy_quick(cases: tuple[dict, ...]) -> dict[str, object]:
    """Quick or full for a run without a record, from its CPU cases' time budget (``LEGACY_QUICK_*``)."""
    budgets = {
        case["options"].get("max_time")
        for case in cases
        if case["extra_info"]["case"] in LEGACY_QUICK_CASES and "max_time" in case["options"]
    }
    if not budgets:
        return {
            "quick": False,
            "quick_basis": "no run record and no ufunc_size/many_vs_one case: taken as full",
        }
    seconds = ", ".join(str(budget) for budget in sorted(budgets, key=str))
    return {
        "quick": budgets == {LEGACY_QUICK_MAX_TIME_S},
        "quick_basis": f"no run record: ufunc_size/many_vs_one max_time {seconds} s",
    }


def _digest(cases: tuple[dict, ...]) -> str:
    """SHA-256 of the launchbench cases' names, coordinates and statistics (raw samples left out): a run
    saved twice (a copy, a hard link, ``--benchmark-json`` beside ``--benchmark-autosave``) has one digest."""
    summary = [
        [
            case["fullname"],
            case["extra_info"],
            {key: value for key, value in case["stats"].items() if key not in ("data", "ops")},
        ]
        for case in cases
    ]
    try:
        text = orjson.dumps(summary, default=str, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # text orjson will not encode (a lone surrogate): json's way
        text = json.dumps(summary, sort_keys=True, default=str, allow_nan=True).encode(
            "utf-8", "surrogatepass"
        )
    return hashlib.sha256(text).hexdigest()


#: Frame columns an ``extra_info`` key may not replace (a key launchbench never writes, in a hand-edited or
#: foreign file, must not change which run or machine a row belongs to).
_RESERVED_COLUMNS = frozenset(BASE_COLUMNS) | {
    "machine_id",
    "host",
    "system",
    "cpu_model",
    "gpu_name",
    "gpu_attributes",
    "llc_bytes",
    "core_cache_bytes",
}


def _shared_columns(checked: CheckedRun, source: str) -> dict[str, object]:
    """The columns of a checked run's rows that come from the run, one value for all its rows (a worker
    sends them once a file: ``_read_batch``)."""
    run = checked.run
    identity = machine_identity(run["machine_info"])
    for key in ("logical_cpus", "stored_machine_id"):  # run facts: in ``LoadResult.runs``
        identity.pop(key)
    return {
        "source": source,
        "run_datetime": run["datetime"],  # text here; parsed for all rows at once in ``_frame``
        **identity,
        "commit": run["commit"],
        "pb_version": run["version"],
    }


def _rows(checked: CheckedRun) -> list[dict[str, object]]:
    """One dict per checked launchbench case, the columns of its own (``_shared_columns`` the run's):
    ``extra_info``, stats, raw data; a warm-up's rounds left out of the stats and data
    (``analysis.steady.steady_rounds``; the run's digest is of the saved stats)."""
    rows = []
    for case in checked.cases:
        row = {"name": case["name"], "fullname": case["fullname"], "group": case["group"]}
        extra = case["extra_info"]
        if _RESERVED_COLUMNS.isdisjoint(extra):  # the usual case, told at C speed
            row.update(extra)
        else:
            row.update((key, value) for key, value in extra.items() if key not in _RESERVED_COLUMNS)
        stats = case["stats"]
        row.update({column: stats.get(column) for column in STAT_COLUMNS})
        row["data"] = stats["data"]
        steady_rounds(row)
        rows.append(row)
    return rows


def _columns(checked: CheckedRun) -> dict[str, list[object]]:
    """``_rows(checked)`` as columns: one list per key, the keys in the order of their first appearance in
    the rows, NaN where a row lacks the key (as ``_read_batch`` joins them). Made from the cases without a
    dict per row where no ``extra_info`` holds a reserved key (a dict per row, then taken apart by key, was a
    fifth of a quick run's loading); a warm-up case's row is made as ``_rows`` makes it."""
    cases = checked.cases
    extras = [case["extra_info"] for case in cases]
    if not all(map(_RESERVED_COLUMNS.isdisjoint, extras)):  # a key of the run's or of every row's: rare
        rows = _rows(checked)
        return {
            key: [row.get(key, math.nan) for row in rows] for key in dict.fromkeys(itertools.chain(*rows))
        }
    stats = [case["stats"] for case in cases]
    columns: dict[str, list[object]] = {
        key: [case[key] for case in cases] for key in ("name", "fullname", "group")
    }
    columns.update((key, [extra.get(key, math.nan) for extra in extras]) for key in extras[0])
    columns.update((column, [values.get(column) for values in stats]) for column in STAT_COLUMNS)
    data = columns["data"] = [values["data"] for values in stats]
    found = [classify(rounds) if isinstance(rounds, np.ndarray) else None for rounds in data]
    columns["steady"] = [steadiness.kind if steadiness is not None else math.nan for steadiness in found]
    columns["warm_up_rounds"] = [
        steadiness.warm_up_rounds if steadiness is not None else math.nan for steadiness in found
    ]
    for extra in extras[1:]:
        for key in extra:
            if key not in columns:
                columns[key] = [other.get(key, math.nan) for other in extras]
    for index, steadiness in enumerate(found):
        if steadiness is not None and steadiness.kind == WARM_UP:  # its rounds, stats and probe trimmed
            (row,) = _rows(CheckedRun(run=checked.run, cases=(cases[index],), problems=()))
            for key, value in row.items():
                columns[key][index] = value
    return columns


def _frame(rows: list[dict[str, object]] | dict[str, Column], categorical: bool = False) -> pd.DataFrame:
    """The frame of ``rows``; an empty frame still has ``BASE_COLUMNS`` so callers can select them.
    ``categorical``: text columns as ``Categorical`` ones (``load_runs``), and the columns taken as they are
    (no copy into pandas' blocks: a fleet's frame would be held twice while it is built)."""
    if not rows:
        return pd.DataFrame(columns=list(BASE_COLUMNS))
    if isinstance(rows, dict):
        rows = {key: _stored(values, categorical) for key, values in rows.items()}
    # Text columns keep Python strings (pandas' "python" string storage, its default without pyarrow): the
    # rows share one object per distinct text, where pyarrow's storage copies every row's text (10,000 runs
    # took 1.31 GB instead of 0.76 GB in `compare`).
    with pd.option_context("mode.string_storage", "python"):
        frame = pd.DataFrame(rows, copy=False) if categorical else pd.DataFrame(rows)
    # Naive (pytest-benchmark <= 4.x) and aware (5.x) ISO times are both UTC.
    dates = frame["run_datetime"]
    if isinstance(dates.dtype, pd.CategoricalDtype) and len(dates.cat.categories):  # each text parsed once
        parsed = pd.to_datetime(dates.cat.categories, utc=True, format="ISO8601", errors="coerce")
        frame["run_datetime"] = parsed.take(dates.cat.codes.to_numpy(), allow_fill=True, fill_value=pd.NaT)
    else:
        frame["run_datetime"] = pd.to_datetime(dates, utc=True, format="ISO8601", errors="coerce")
    return frame


def _stored(values: Column, categorical: bool) -> Column:
    """One column of ``_frame`` as the frame keeps it: texts as a ``Categorical`` where ``categorical`` asks,
    else as Python values (pandas then infers the column's type as from parsed rows)."""
    if not categorical:
        return values.to_numpy().tolist() if isinstance(values, pd.Categorical) else values
    texts = isinstance(values, list) and any(isinstance(value, str) for value in values)
    return _text_column(values) if texts and texts_or_missing(values) else values
