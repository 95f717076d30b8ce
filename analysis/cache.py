"""A cache of parsed saved runs, so that each saved file is parsed once: a second ``compare`` or ``report`` of
the same storage reads only the files that are new or changed since.

Parsing JSON is nearly all of the cost of loading a fleet of runs (``analysis.load``); the rows a file gives
depend only on its bytes, on which raw samples are read (``Samples``), on the run facts asked for and on the
loader's code. So each load writes what it parsed as one *segment*: ``<id>.rows.parquet`` (the rows) and
``<id>.index`` (each file's path, ``stat``, rows, run info, problem lines and row keys, and the rows file's
length and SHA-256; written last), in a folder named for the loader's version and those options. A later
load ``stat``\\s every file and takes a file's rows from the newest segment whose entry has the same absolute
path, shown name, size, modification time, inode, device and status-change time; every other file is
parsed, and a new segment written. Files written less than ``RACY_S`` before the load are not stored (a file
rewritten within its clock's tick keeps its size and time), so an entry is never trusted for a file that may
still change unseen. A segment none of whose entries is current any more is deleted.

Nothing read back is trusted unchecked (issue 32): the index is sealed with its own SHA-256
(``analysis.sealed``: tagged JSON, a format that holds data only, never pickle), and the rows file is read
only when its length and SHA-256 are those the index recorded, so the rows served are, byte for byte, those
parsed and checked when the segment was written; a segment that fails either check is deleted and its files
are parsed again, with one line on stderr. Files a store killed halfway left behind (a rows file without an
index, a temporary file) are deleted once ``LEFTOVER_S`` old.

Parquet through pyarrow, not DuckDB (``tools/cache_formats.py`` measures both; docs/speed.md): the rows
of 1,000 runs (40,000 rows) were written in 0.24-0.34 s against DuckDB's 1.0 s and read back into Arrow in
0.10-0.17 s against 0.39-0.49 s, the imports cost about the same, and one database file shared by commands
running at once needs locking, where segments written under unique names and renamed into place need none.
A column is stored as numbers, as dictionary-encoded text, as lists of float64 (raw samples) or, for
anything else, as each distinct value in ``analysis.sealed``'s tagged JSON (``_encode``): the rows come back
exactly as parsed.

The cache lives outside every run storage: ``--cache DIR``, else ``$LAUNCHBENCH_CACHE``, else
``$XDG_CACHE_HOME/launchbench`` or ``~/.cache/launchbench``; ``--no-cache`` bypasses it, and a folder inside
the storage of an input (``command_folder``), not this user's or one others may write in (``untrusted``)
is not used: one line says why. Without pyarrow (the GPU machine's image may lack it) there is no cache,
silently: every file is parsed, as before. Any problem with the cache (a damaged segment, a full disk, a
read-only folder) costs a parse, never a wrong row or a failed command.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import inspect
import json
import math
import os
import stat
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NoReturn

#: Bumped when what a cached file's entry means changes; the loader's source is hashed in beside it.
LOADER_VERSION = 4

#: The environment variable that moves the cache (``--cache`` wins over it).
CACHE_ENV = "LAUNCHBENCH_CACHE"

#: A file modified less than this many seconds before it was read is parsed again next time: within a
#: clock tick a rewrite keeps size and modification time (git's "racy" index entries).
RACY_S = 2.0

#: A rows file without its index, or a temporary file, this many seconds old is a store's leftover (killed
#: halfway): deleted. A store writes its files within seconds; an hour leaves any slow disk its time.
LEFTOVER_S = 3600.0

#: The modules whose code decides a file's rows (their source is part of the cache's version).
_LOADER_MODULES = (
    "analysis.load",
    "analysis.schema",
    "analysis.facts",
    "analysis.steady",
    "analysis.cache",
    "analysis.sealed",
    "model.hardware",
)

# Column encodings (``_encode``), kept in the rows table's schema metadata.
_NUMBERS, _TEXT, _ARRAYS, _VALUES = "numbers", "text", "arrays", "values"
_KINDS_KEY = b"launchbench.kinds"
_ROWS, _INDEX = ".rows.parquet", ".index"


#: Multithreaded runtimes after whose import a forked process may deadlock on a lock one of their threads held
#: (JAX warns so at every fork): where one is loaded, nothing is forked (``analysis.load.pool_context``,
#: ``RunCache.store_behind``).
THREADED_RUNTIMES = ("jax", "torch")


class _StoringChild:
    """A child process forked to write one segment (``RunCache.store_behind``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def join(self) -> None:
        """Wait for the child to end (and reap it)."""
        with contextlib.suppress(ChildProcessError):  # reaped already
            os.waitpid(self.pid, 0)


#: The segments this process is writing (``RunCache.store_behind``).
_STORING: list[threading.Thread | _StoringChild] = []


def wait_for_stores() -> None:
    """Wait until every segment this process started to write (``RunCache.store_behind``) is written."""
    while _STORING:
        _STORING.pop().join()


def may_fork() -> bool:
    """Whether this process may fork a child that runs Python: a POSIX process with one thread (a fork copies
    the calling thread alone, and any lock another thread held stays held in the child) and no
    ``THREADED_RUNTIMES`` loaded."""
    return (
        hasattr(os, "fork")
        and threading.active_count() == 1
        and not any(name in sys.modules for name in THREADED_RUNTIMES)
    )


#: How much lower the storing child's CPU priority is than the command's (``os.nice``): it gets what the
#: command and its workers leave.
_STORE_NICENESS = 10


def _store_in_child(cache: RunCache, columns: Mapping[str, object], files: Sequence[Fresh]) -> NoReturn:
    """The forked child of ``RunCache.store_behind``: write the segment and end, whatever happens (as
    ``store``, a problem or a stop signal leaves no segment), without the parent's exit handlers. It writes
    nothing to the command's streams (a reader of its output sees them end with the command), and collects
    no garbage: a collection would touch every object inherited, copying the parent's memory page by page."""
    try:
        gc.disable()
        # Behind the command, on a CPU it leaves idle: at its priority the child took a CPU from the
        # command's fitting workers.
        os.nice(_STORE_NICENESS)
        quiet = os.open(os.devnull, os.O_RDWR)
        for stream in (0, 1, 2):
            os.dup2(quiet, stream)
        with contextlib.suppress(Exception):
            cache.store(columns, files)
    finally:
        os._exit(0)


def default_folder() -> Path | None:
    """Where the cache lives unless ``--cache`` says: ``$LAUNCHBENCH_CACHE``, else the user's cache folder;
    None (no cache) for a user without a home (no ``$HOME`` and no password entry, as in some containers)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "launchbench"
    try:
        return Path.home() / ".cache" / "launchbench"
    except RuntimeError:
        return None


def available() -> bool:
    """Whether pyarrow (which reads and writes the cache's Parquet files) can be imported."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Key:
    """What a cached entry must match to stand for a file: its absolute and shown path and its ``stat``."""

    absolute: str
    shown: str
    size: int
    mtime_ns: int
    inode: int
    device: int
    ctime_ns: int


def file_key(path: Path) -> Key | None:
    """``path``'s key, or None when it cannot be stat'ed (the loader then parses it and names the problem)."""
    try:
        info = os.stat(path)  # noqa: PTH116 (os.stat and abspath: a fleet has 10⁵ files, pathlib is slow)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return Key(
        os.path.abspath(path),  # noqa: PTH100
        str(path),
        info.st_size,
        info.st_mtime_ns,
        info.st_ino,
        info.st_dev,
        info.st_ctime_ns,
    )


@dataclass
class Entry:
    """One file as a segment holds it: its rows ``first`` to ``first + count`` of the segment's rows, its
    run info (None when it gave no rows), its problem lines and its rows' keys in order of appearance."""

    segment: str
    first: int
    count: int
    run: dict | None
    problems: list[str]
    keys: tuple[str, ...]


@dataclass
class Fresh:
    """One file parsed by this load, for ``RunCache.store``: its key and what it gave (as ``Entry``)."""

    key: Key | None
    first: int
    count: int
    run: dict | None
    problems: list[str]
    keys: tuple[str, ...]


class RunCache:
    """The cache folder of one loader version, ``Samples`` and facts: ``lookup`` then ``store``."""

    def __init__(self, folder: Path, variant: str) -> None:
        self.folder = folder / variant
        self._segments: dict[str, list[tuple[Key, Entry]]] = {}
        self._rows_seals: dict[str, tuple[int, str]] = {}  # the rows file's length and SHA-256, by segment
        self._rows: dict[str, dict[str, object]] = {}
        self._kinds: dict[str, dict[str, str]] = {}
        #: Columns ``columns`` leaves unread (``analysis.load.load_runs``' ``unread``).
        self.unread: frozenset[str] = frozenset()

    def lookup(self, paths: Sequence[Path]) -> tuple[list[Key | None], dict[int, Entry]]:
        """Every path's key, and the entries (by position in ``paths``) that stand for their file now; none
        from a folder that is not trusted (``_trusted``: one line says so). Segments this process is still
        writing (``store_behind``) are waited for first."""
        wait_for_stores()
        keys = [file_key(path) for path in paths]
        refused = untrusted(self.folder)
        if refused:
            say(refused)
        else:
            self._read_segments()
        newest: dict[Key, Entry] = {}
        for name in sorted(self._segments):  # names start with the time written: later ones win
            for key, entry in self._segments[name]:
                newest[key] = entry
        hits = {index: newest[key] for index, key in enumerate(keys) if key is not None and key in newest}
        self._drop_stale(keys, hits)
        return keys, hits

    def columns(self, segment: str) -> tuple[dict[str, object], dict[str, str]]:
        """The rows of ``segment`` as ``analysis.load`` columns (but those ``unread``), and each column's
        encoding; ``Damaged`` (the segment deleted, one line said) when the rows file is not, byte for
        byte, the one its index sealed."""
        if segment not in self._rows:
            import pyarrow as pa
            import pyarrow.parquet as pq

            from analysis.sealed import Damaged, read_regular

            path = self.folder / f"{segment}{_ROWS}"
            size, digest = self._rows_seals[segment]
            try:
                data = read_regular(path)
            except OSError as exc:
                self._damaged(segment, f"its rows cannot be read ({exc.strerror or exc})")
                raise Damaged(str(exc)) from exc
            if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
                self._damaged(segment, "its rows file is not the one its index sealed (SHA-256)")
                raise Damaged("rows digest")
            with pq.ParquetFile(pa.BufferReader(data)) as file:
                kinds = _kinds(file.schema_arrow.metadata)
                kinds = {name: kind for name, kind in kinds.items() if name not in self.unread}
                # One column read and decoded at a time: a fleet's whole table in Arrow is a gigabyte, which
                # Arrow's allocator may keep after it is freed (10⁵ runs: 1.6-2.0 GB at most, whole).
                rows = {name: _decode(file.read(columns=[name]).column(0), kinds[name]) for name in kinds}
            self._rows[segment] = rows
            self._kinds[segment] = kinds
        return self._rows[segment], self._kinds[segment]

    def release(self) -> None:
        """Forget the segments' columns read (``columns``): the frame holds its own copy of them."""
        self._rows.clear()

    def store_behind(self, columns: Mapping[str, object], files: Sequence[Fresh]) -> None:
        """``store``, behind the command's work, which goes on meanwhile: in a child process forked for it
        where this process may fork (``may_fork``), else in a thread. Encoding the rows is Python, so a
        thread held the GIL the command needed: filling the cache cost a first ``compare`` of 1,000 quick
        runs +1 – +17 % (median +11 %, six rounds); a child, which inherits the columns without a copy and
        runs on a CPU the command leaves idle, −8 – +14 % (median −3 %, the VM's noise; docs/speed.md).
        ``wait_for_stores`` waits for either (a later ``lookup`` in this process does, and so does the
        command line before it exits)."""
        if may_fork():
            pid = os.fork()
            if pid == 0:
                _store_in_child(self, columns, files)
            _STORING.append(_StoringChild(pid))
            return

        def store() -> None:
            with contextlib.suppress(Exception):  # as ``store``'s own: a problem costs a parse next time
                self.store(columns, files)

        thread = threading.Thread(target=store, name="cache-store")
        _STORING.append(thread)
        thread.start()

    def store(self, columns: Mapping[str, object], files: Sequence[Fresh]) -> None:
        """Write one segment: ``columns`` (the rows of ``files``, as ``analysis.load`` joined them) and the
        entries of those ``files`` old enough to be trusted (``RACY_S``). Any failure, an interrupt
        included, leaves no segment; nothing is written into a folder that is not trusted (``_trusted``:
        nothing would ever be read from it)."""
        now_ns = time.time_ns()
        kept = [f for f in files if f.key is not None and f.key.mtime_ns < now_ns - RACY_S * 1e9]
        if not kept:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        from analysis.sealed import dumps, seal

        name = f"{now_ns:020d}-{uuid.uuid4().hex[:12]}"
        rows_path = self.folder / f"{name}{_ROWS}"
        index_path = self.folder / f"{name}{_INDEX}"
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not _trusted(self.folder):
                return
            encoded = {key: _encode(values) for key, values in columns.items()}
            table = pa.table({key: array for key, (array, _) in encoded.items()})
            kinds = json.dumps({key: kind for key, (_, kind) in encoded.items()})
            table = table.replace_schema_metadata({_KINDS_KEY: kinds.encode()})
            sink = pa.BufferOutputStream()
            pq.write_table(table, sink, compression="lz4")
            rows = sink.getvalue().to_pybytes()
            del sink, table, encoded
            write_whole(rows_path, rows)
            index = _index(kept, len(rows), hashlib.sha256(rows).hexdigest())
            write_whole(index_path, seal(dumps(index)))  # written last: its presence makes the segment
        except (OSError, ValueError, TypeError, pa.ArrowException):
            _remove(rows_path, index_path)
        except BaseException:  # an interrupt (Ctrl-C, SIGTERM) while writing: no half segment left either
            _remove(rows_path, index_path)
            raise

    def _read_segments(self) -> None:
        """Every complete segment's entries; a segment whose index is damaged is deleted (one line: its
        files are parsed anew), and a store's leftovers are deleted once ``LEFTOVER_S`` old."""
        if not _trusted(self.folder):
            return
        try:
            names = sorted(entry.name for entry in os.scandir(self.folder))
        except OSError:
            return
        complete = {name.removesuffix(_INDEX) for name in names if name.endswith(_INDEX)}
        for name in names:
            if name.endswith(_INDEX):
                segment = name.removesuffix(_INDEX)
                try:
                    self._segments[segment] = self._entries(segment)
                except OSError as exc:
                    self._damaged(segment, f"its index cannot be read ({exc.strerror or exc})")
                except (ValueError, KeyError, IndexError, TypeError) as exc:  # Damaged, or another shape
                    self._damaged(segment, f"its index is damaged ({exc})")
            elif not name.endswith(_ROWS) or name.removesuffix(_ROWS) not in complete:
                _remove_leftover(self.folder / name)

    def _entries(self, segment: str) -> list[tuple[Key, Entry]]:
        """The entries of ``segment``'s index (``_index``), after its seal is checked."""
        from analysis.sealed import loads, read_regular, unseal

        index = loads(unseal(read_regular(self.folder / f"{segment}{_INDEX}")))
        if type(index) is not dict or index.get("version") != LOADER_VERSION:
            raise ValueError("not an index of this version")
        rows = index["rows"]
        self._rows_seals[segment] = (int(rows["size"]), str(rows["sha256"]))
        files = index["files"]
        runs = _runs(index["runs"], len(files["absolute"]))
        keys = _decoded_column(index["keys"])
        problems = index["problems"]
        entries = []
        for values, run, lines, row_keys in zip(
            zip(*(files[column] for column in _ENTRY_COLUMNS), strict=True), runs, problems, keys, strict=True
        ):
            *key, first, count = values
            entries.append((Key(*key), Entry(segment, first, count, run, lines, row_keys)))
        return entries

    def _damaged(self, segment: str, why: str) -> None:
        """Delete ``segment`` and say so in one line: its files are parsed again."""
        from analysis.schema import printable

        _remove(self.folder / f"{segment}{_ROWS}", self.folder / f"{segment}{_INDEX}")
        self._segments.pop(segment, None)
        say(f"cache segment {printable(self.folder / segment)}: {why}; deleted, its files are parsed again")

    def _drop_stale(self, keys: Sequence[Key | None], hits: Mapping[int, Entry]) -> None:
        """Delete the segments of this load's files of which no entry is current any more (each file is
        gone, has changed, or is served by a newer segment), so that the cache does not grow with every
        change. Segments of other storages are left alone."""
        looked = {key.absolute for key in keys if key is not None}
        used = {entry.segment for entry in hits.values()}
        for name, entries in self._segments.items():
            if name in used or not entries:
                continue
            first = entries[0][0].absolute
            if not any(key.absolute in looked for key, _ in entries) and Path(first).exists():
                continue  # another storage's segment whose first file is still there: one stat, not one each
            if any(key.absolute not in looked and _unchanged(key) for key, _ in entries):
                continue
            _remove(self.folder / f"{name}{_INDEX}", self.folder / f"{name}{_ROWS}")


def say(line: str) -> None:
    """One warning line about the cache on stderr (a damaged file, a folder not used): the command goes on."""
    with contextlib.suppress(OSError, ValueError):
        print(f"warning: {line}".encode("ascii", "backslashreplace").decode(), file=sys.stderr, flush=True)


def _remove(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()


def _remove_leftover(path: Path) -> None:
    """Delete ``path``, a file no complete segment holds, once ``LEFTOVER_S`` old (a store in progress may
    be writing it now)."""
    with contextlib.suppress(OSError):
        if time.time() - path.lstat().st_mtime > LEFTOVER_S:
            path.unlink()


def _unchanged(key: Key) -> bool:
    """Whether the file ``key`` was taken from is still there as it was."""
    now = file_key(Path(key.absolute))
    return now is not None and replace(now, shown=key.shown) == key


_ENTRY_COLUMNS = (
    "absolute",
    "shown",
    "size",
    "mtime_ns",
    "inode",
    "device",
    "ctime_ns",
    "first",
    "count",
)


def _index(files: Sequence[Fresh], rows_size: int, rows_sha256: str) -> dict:
    """A segment's index: the rows file's seal, each file's key and place among the rows, and its run
    info, problem lines and row keys as columns (``_column``): a fleet's 10⁵ run infos repeat a few texts
    and key lists, each stored once and read back as one object."""
    return {
        "version": LOADER_VERSION,
        "rows": {"size": rows_size, "sha256": rows_sha256},
        "files": {column: [getattr(f.key, column, None) for f in files] for column in _ENTRY_COLUMNS[:7]}
        | {"first": [f.first for f in files], "count": [f.count for f in files]},
        "runs": _run_columns([f.run for f in files]),
        "problems": [list(f.problems) for f in files],
        "keys": _column([f.keys for f in files]),
    }


def _run_columns(runs: Sequence[dict | None]) -> dict:
    """The run infos (None for a file that gave no rows) as one column per field when every run has the
    same fields in the same order (``analysis.load`` makes them so), else as they are."""
    present = [run for run in runs if run is not None]
    names = list(present[0]) if present else []
    if any(list(run) != names for run in present):
        return {"whole": runs}
    return {
        "present": [run is not None for run in runs],
        "names": names,
        "columns": [_column([run[name] for run in present]) for name in names],
    }


def _runs(encoded: dict, count: int) -> list[dict | None]:
    """``_run_columns`` read back: ``count`` run infos."""
    if "whole" in encoded:
        runs = encoded["whole"]
    else:
        names = encoded["names"]
        rows = iter(zip(*(_decoded_column(column) for column in encoded["columns"]), strict=True))
        runs = [
            dict(zip(names, next(rows), strict=True)) if present else None for present in encoded["present"]
        ]
    if len(runs) != count or not all(run is None or type(run) is dict for run in runs):
        raise ValueError("the run infos do not match the files")
    return runs


def _column(values: list) -> dict:
    """One column of values: texts (or None) and tuples of texts as the distinct ones and a code per value
    (so each is stored, and read back, once); anything else as it is."""
    if all(type(value) is str or value is None for value in values) or all(
        type(value) is tuple and all(type(item) is str for item in value) for value in values
    ):
        distinct: dict[object, int] = {}
        codes = [-1 if value is None else distinct.setdefault(value, len(distinct)) for value in values]
        return {"distinct": list(distinct), "codes": codes}
    return {"values": values}


def _decoded_column(column: dict) -> list:
    if "values" in column:
        return column["values"]
    distinct = column["distinct"]
    return [None if code < 0 else distinct[code] for code in column["codes"]]


def open_cache(folder: Path | None, samples: object, facts: Sequence[str]) -> RunCache | None:
    """The cache for loads with ``samples`` (``analysis.load.Samples``) and ``facts`` under ``folder``; None
    when there is to be none (no folder, or no pyarrow)."""
    if folder is None or not available():
        return None
    return RunCache(Path(folder), _variant(samples, facts))


def _variant(samples: object, facts: Sequence[str]) -> str:
    """The folder name of one loader version and options: a file's rows depend on all of them."""
    digest = hashlib.sha256(f"v{LOADER_VERSION}".encode())
    for module in _LOADER_MODULES:
        digest.update(_source(module))
    if callable(samples):
        digest.update(f"samples={samples.__module__}.{samples.__qualname__}".encode())
        digest.update(_source(samples.__module__))
    else:
        digest.update(f"samples={bool(samples)}".encode())
    digest.update(repr(tuple(facts)).encode())
    return f"runs-v{LOADER_VERSION}-{digest.hexdigest()[:24]}"


def _source(module: str) -> bytes:
    """The source of ``module`` (imported already by the loader), so that any edit of it starts anew."""
    import importlib

    try:
        return Path(inspect.getsourcefile(importlib.import_module(module)) or "").read_bytes()
    except (OSError, TypeError, ImportError):
        return f"unknown {module} {time.time_ns()}".encode()  # unreadable: never reuse an entry


def untrusted(folder: Path) -> str | None:
    """The line that says the existing folder ``folder`` is not used as it is not trusted (``_trusted``),
    or None (trusted, or not there yet: it is then made this user's alone)."""
    from analysis.schema import printable

    if _trusted(folder) or not (folder.exists() or folder.is_symlink()):
        return None
    return (
        f"cache folder {printable(folder)} is not a folder of this user's that only they may write in: "
        "nothing is read from it or written to it (choose one of yours with --cache DIR, or --no-cache)"
    )


def _trusted(folder: Path) -> bool:
    """Whether ``folder`` is this user's and no one else may write in it: only there is anything read back
    (another user could put there a segment sealed with a digest that matches) or written."""
    try:
        info = folder.stat()
    except OSError:
        return False
    owner_ok = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return stat.S_ISDIR(info.st_mode) and owner_ok and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


@contextlib.contextmanager
def written_aside(path: Path) -> Iterator[Path]:
    """A temporary name beside ``path`` to write the file under; renamed to ``path`` when the block ends
    without an error, removed in any case (an interrupt included): a reader (another command at the same
    time) never meets half a file."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield temporary
        temporary.replace(path)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


def write_whole(path: Path, data: bytes) -> None:
    """``data`` at ``path``, written aside (``written_aside``) in a new file of this user's alone."""
    with written_aside(path) as temporary:
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
        with os.fdopen(handle, "wb") as file:
            file.write(data)


def texts_or_missing(values: Sequence[object]) -> bool:
    """Whether every one of ``values`` is a text or NaN (a row without it): the types taken at C speed, a
    fleet's column holds 10⁵ rows."""
    kinds = set(map(type, values))
    if not kinds <= {str, float}:
        return all(isinstance(value, str) or (type(value) is float and math.isnan(value)) for value in values)
    return float not in kinds or all(math.isnan(value) for value in values if type(value) is float)


def _encode(values: object) -> tuple[object, str]:
    """One column of ``analysis.load``'s rows (a numpy array or a list of values) as an Arrow array and its
    encoding: numbers as they are; text (NaN where a row lacks it) dictionary-encoded, as a fleet repeats a
    few texts; raw samples (arrays or None) as lists of float64; anything else as each distinct value's
    tagged JSON (``analysis.sealed.dumps``; ``TypeError`` for a value it cannot hold) and a code per row."""
    import numpy as np
    import pyarrow as pa

    from analysis.sealed import dumps

    def is_samples(value: object) -> bool:
        return value is None or (isinstance(value, np.ndarray) and value.dtype == float and value.ndim == 1)

    if isinstance(values, np.ndarray):
        return pa.array(values), _NUMBERS
    if texts_or_missing(values):
        return pa.array(values, type=pa.string(), from_pandas=True).dictionary_encode(), _TEXT
    if all(map(is_samples, values)):
        lengths = np.array([0 if v is None else len(v) for v in values], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        flat = np.concatenate([v for v in values if v is not None]) if lengths.any() else np.zeros(0)
        mask = pa.array([v is None for v in values])
        return pa.LargeListArray.from_arrays(offsets, flat, mask=mask), _ARRAYS
    # Distinct values by type and ``repr`` (the loader's values are JSON's: texts, numbers, None, tuples and
    # dicts of them, whose ``repr`` tells apart 1, 1.0, True and -0.0), each encoded once.
    distinct: dict[tuple[type, str], int] = {}
    # The same object again (NaN where a row lacks the key, None, a run's value in each of its rows, a text
    # the loader shared) is told by its identity, without its ``repr``: ``values`` holds every one of them
    # alive meanwhile, so no identity is reused.
    by_id: dict[int, int] = {}
    firsts: list[object] = []
    codes = np.empty(len(values), dtype=np.int32)
    for row, value in enumerate(values):
        code = by_id.get(id(value))
        if code is None:
            code = by_id[id(value)] = distinct.setdefault((type(value), repr(value)), len(distinct))
            if code == len(firsts):
                firsts.append(value)
        codes[row] = code
    dictionary = pa.array([dumps(value) for value in firsts], pa.binary())
    return pa.DictionaryArray.from_arrays(pa.array(codes), dictionary), _VALUES


def _decode(column: object, kind: str) -> object:
    """The column ``_encode`` wrote, as ``analysis.load`` holds it: texts as a ``Categorical``
    (``text_categorical``: the codes as stored, no Python object per row), raw samples as writable float64
    arrays, other values decoded once per distinct value (a fleet's 4·10⁶ rows repeat a few)."""
    import numpy as np
    import pyarrow as pa

    from analysis.sealed import loads

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if kind == _NUMBERS:
        return array.to_numpy(zero_copy_only=False)
    if kind == _TEXT:
        if not isinstance(array, pa.DictionaryArray):
            array = array.dictionary_encode()
        codes = array.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        return text_categorical(codes, array.dictionary.to_pylist())
    if kind == _ARRAYS:
        offsets = array.offsets.to_numpy()
        flat = np.array(array.values.to_numpy(zero_copy_only=False), dtype=np.float64)  # a writable copy
        missing = array.is_null().to_numpy(zero_copy_only=False)
        return [None if missing[i] else flat[offsets[i] : offsets[i + 1]] for i in range(len(array))]
    if kind != _VALUES:
        raise ValueError(f"unknown column encoding {kind!r}")
    if not isinstance(array, pa.DictionaryArray):
        array = array.dictionary_encode()
    texts = array.dictionary.to_pylist()
    codes = array.indices.to_numpy(zero_copy_only=False)
    values = [loads(text) for text in texts]
    mutable = [not _immutable(value) for value in values]
    if any(mutable):  # rows must not share a list or a dict: one object per row (the rest may share theirs)
        return [loads(texts[code]) if mutable[code] else values[code] for code in codes.tolist()]
    distinct = np.empty(len(values), dtype=object)
    for index, value in enumerate(values):  # one by one: numpy would make a tuple of tuples a 2-D array
        distinct[index] = value
    return distinct[codes].tolist()


def _immutable(value: object) -> bool:
    """Whether ``value`` cannot be changed in place (so rows may share it)."""
    if isinstance(value, tuple | frozenset):
        return all(map(_immutable, value))
    return value is None or isinstance(value, str | bytes | bool | int | float | complex)


def text_categorical(codes: object, texts: Sequence[str]) -> object:
    """The texts ``codes`` (numpy integers; -1: missing) point into as a ``pandas.Categorical`` whose
    categories are the distinct ``texts``, sorted and of Python strings, so that sorting, grouping and
    comparing it behave as on the texts themselves."""
    import numpy as np
    import pandas as pd

    codes = np.asarray(codes)
    unique, inverse = np.unique(np.array(list(texts), dtype=object), return_inverse=True)
    if unique.size:
        codes = np.where(codes >= 0, inverse.reshape(-1)[np.clip(codes, 0, None)], -1)
    else:
        codes = np.full(codes.shape, -1)
    dtype = pd.CategoricalDtype(pd.Index(unique, dtype=object))
    return pd.Categorical.from_codes(codes, dtype=dtype)


def _kinds(metadata: Mapping[bytes, bytes] | None) -> dict[str, str]:
    """The column encodings a rows table's metadata names (``store``), by column."""
    return json.loads((metadata or {})[_KINDS_KEY])
