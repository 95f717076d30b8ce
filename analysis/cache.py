"""A cache of parsed saved runs, so that each saved file is parsed once: a second ``compare`` or ``report`` of
the same storage reads only the files that are new or changed since.

Parsing JSON is nearly all of the cost of loading a fleet of runs (``analysis.load``); the rows a file gives
depend only on its bytes, on which raw samples are read (``Samples``), on the run facts asked for and on the
loader's code. So each load writes what it parsed (rows as columns, run infos, problem lines) as one
*segment*: ``<id>.rows.parquet`` (the rows), ``<id>.infos.pickle`` (each file's run info, problem lines and
row keys, one pickle for all: texts the files repeat are stored once) and ``<id>.files.parquet`` (each
file's path, ``stat`` and rows; written last), in a folder named for the loader's version and those
options. A later load ``stat``\\s every file and takes a file's rows from the newest segment whose entry has
the same absolute path, shown name, size, modification time, inode, device and status-change time; every
other file is parsed, and a new segment written. Files written less than
``RACY_S`` before the load are not stored (a file rewritten within its clock's tick keeps its size and
time), so an entry is never trusted for a file that may still change unseen. A segment none of whose
entries is current any more is deleted.

Parquet through pyarrow, not DuckDB (``tools/cache_formats.py`` measures both; docs/speed.md): the rows
of 1,000 runs (40,000 rows) were written in 0.24-0.34 s against DuckDB's 1.0 s and read back into Arrow in
0.10-0.17 s against 0.39-0.49 s, the imports cost about the same, and one database file shared by commands
running at once needs locking, where segments written under unique names and renamed into place need none.
A column is stored as numbers, as dictionary-encoded text, as lists of float64 (raw samples) or, for
anything else, as pickled values (``_encode``): the rows come back exactly as parsed.

The cache lives outside every run storage: ``--cache DIR``, else ``$LAUNCHBENCH_CACHE``, else
``$XDG_CACHE_HOME/launchbench`` or ``~/.cache/launchbench``; ``--no-cache`` bypasses it. Pickled values are
read only from a folder this user owns and no one else may write. Without pyarrow (the GPU machine's image
may lack it) there is no cache, silently: every file is parsed, as before. Any problem with the cache (a
damaged segment, a full disk, a read-only folder) costs a parse, never a wrong row or a failed command.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import math
import os
import pickle
import stat
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

#: Bumped when what a cached file's entry means changes; the loader's source is hashed in beside it.
LOADER_VERSION = 2

#: The environment variable that moves the cache (``--cache`` wins over it).
CACHE_ENV = "LAUNCHBENCH_CACHE"

#: A file modified less than this many seconds before it was read is parsed again next time: within a
#: clock tick a rewrite keeps size and modification time (git's "racy" index entries).
RACY_S = 2.0

#: The modules whose code decides a file's rows (their source is part of the cache's version).
_LOADER_MODULES = ("analysis.load", "analysis.schema", "analysis.facts", "analysis.cache", "model.hardware")

# Column encodings (``_encode``), kept in the rows table's schema metadata.
_NUMBERS, _TEXT, _ARRAYS, _PICKLED = "numbers", "text", "arrays", "pickled"
_KINDS_KEY = b"launchbench.kinds"


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
        self._rows: dict[str, dict[str, object]] = {}
        self._kinds: dict[str, dict[str, str]] = {}
        #: Columns ``columns`` leaves unread (``analysis.load.load_runs``' ``unread``).
        self.unread: frozenset[str] = frozenset()

    def lookup(self, paths: Sequence[Path]) -> tuple[list[Key | None], dict[int, Entry]]:
        """Every path's key, and the entries (by position in ``paths``) that stand for their file now."""
        keys = [file_key(path) for path in paths]
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
        encoding."""
        if segment not in self._rows:
            import pyarrow.parquet as pq

            with pq.ParquetFile(self.folder / f"{segment}.rows.parquet") as file:
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

    def store(self, columns: Mapping[str, object], files: Sequence[Fresh]) -> None:
        """Write one segment: ``columns`` (the rows of ``files``, as ``analysis.load`` joined them) and the
        entries of those ``files`` old enough to be trusted (``RACY_S``). Any failure leaves no segment."""
        now_ns = time.time_ns()
        kept = [f for f in files if f.key is not None and f.key.mtime_ns < now_ns - RACY_S * 1e9]
        if not kept:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        name = f"{now_ns:020d}-{uuid.uuid4().hex[:12]}"
        rows_path = self.folder / f"{name}.rows.parquet"
        infos_path = self.folder / f"{name}.infos.pickle"
        files_path = self.folder / f"{name}.files.parquet"
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            encoded = {key: _encode(values) for key, values in columns.items()}
            table = pa.table({key: array for key, (array, _) in encoded.items()})
            kinds = json.dumps({key: kind for key, (_, kind) in encoded.items()})
            table = table.replace_schema_metadata({_KINDS_KEY: kinds.encode()})
            _write(pq, table, rows_path)
            _write_infos([(f.run, f.problems, f.keys) for f in kept], infos_path)
            entries = {
                "absolute": [f.key.absolute for f in kept],
                "shown": [f.key.shown for f in kept],
                "size": [f.key.size for f in kept],
                "mtime_ns": [f.key.mtime_ns for f in kept],
                "inode": [f.key.inode for f in kept],
                "device": [f.key.device for f in kept],
                "ctime_ns": [f.key.ctime_ns for f in kept],
                "first": [f.first for f in kept],
                "count": [f.count for f in kept],
            }
            _write(pq, pa.table(entries), files_path)  # written last: its presence makes the segment
        except (OSError, ValueError, TypeError, pickle.PicklingError, pa.ArrowException):
            for path in (rows_path, infos_path, files_path):
                with contextlib.suppress(OSError):
                    path.unlink()

    def _read_segments(self) -> None:
        """Every complete segment's entries; a segment that cannot be read is left out (and parsed anew)."""
        if not _trusted(self.folder):
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        for path in sorted(self.folder.glob("*.files.parquet")):
            name = path.name.removesuffix(".files.parquet")
            try:
                table = pq.read_table(path).to_pydict()
                with (self.folder / f"{name}.infos.pickle").open("rb") as file:
                    infos = pickle.load(file)
                entries = []
                for values, (run, problems, keys) in zip(
                    zip(*(table[column] for column in _ENTRY_COLUMNS), strict=True), infos, strict=True
                ):
                    *key, first, count = values
                    entries.append((Key(*key), Entry(name, first, count, run, problems, keys)))
            except (*_UNREADABLE, pa.ArrowException):
                continue
            self._segments[name] = entries

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
            for suffix in (".files.parquet", ".infos.pickle", ".rows.parquet"):
                with contextlib.suppress(OSError):
                    (self.folder / f"{name}{suffix}").unlink()


def _unchanged(key: Key) -> bool:
    """Whether the file ``key`` was taken from is still there as it was."""
    now = file_key(Path(key.absolute))
    return now is not None and replace(now, shown=key.shown) == key


#: What reading a damaged or foreign segment may raise, besides pyarrow's own errors.
_UNREADABLE = (OSError, ValueError, KeyError, TypeError, EOFError, pickle.UnpicklingError)

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


def _trusted(folder: Path) -> bool:
    """Whether ``folder`` is this user's and no one else may write in it: only there are pickles read."""
    try:
        info = folder.stat()
    except OSError:
        return False
    owner_ok = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return stat.S_ISDIR(info.st_mode) and owner_ok and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


@contextlib.contextmanager
def written_aside(path: Path) -> Iterator[Path]:
    """A temporary name beside ``path`` to write the file under; renamed to ``path`` when the block ends
    without an error, removed in any case: a reader (another command at the same time) never meets half a
    file."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield temporary
        temporary.replace(path)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


def _write(pq: object, table: object, path: Path) -> None:
    """``table`` as Parquet at ``path`` (``written_aside``)."""
    with written_aside(path) as temporary:
        pq.write_table(table, temporary, compression="lz4")


def _write_infos(infos: list[tuple[dict | None, list[str], tuple[str, ...]]], path: Path) -> None:
    """The files' run infos, problem lines and row keys as one pickle at ``path`` (``written_aside``), each
    text and tuple of texts the files repeat (a machine's name, the field names, the row
    keys) stored once: pickle writes an object met again as a reference, so loading makes one object for
    all the files that share it. A fleet of 10⁵ files took a gigabyte as one pickle per file, each with
    its own copies."""
    shared: dict[object, object] = {}

    def one(value: object) -> object:  # exact types only: 1 == True and 0.0 == -0.0 must stay apart
        if type(value) is str or (type(value) is tuple and all(type(item) is str for item in value)):
            return shared.setdefault(value, value)
        return value

    kept = [
        (None if run is None else {one(k): one(v) for k, v in run.items()}, problems, one(keys))
        for run, problems, keys in infos
    ]
    with written_aside(path) as temporary, temporary.open("wb") as file:
        pickle.dump(kept, file, protocol=5)


def _is_text_or_missing(value: object) -> bool:
    return isinstance(value, str) or (type(value) is float and math.isnan(value))


def _encode(values: object) -> tuple[object, str]:
    """One column of ``analysis.load``'s rows (a numpy array or a list of values) as an Arrow array and its
    encoding: numbers as they are; text (NaN where a row lacks it) dictionary-encoded, as a fleet repeats a
    few texts; raw samples (arrays or None) as lists of float64; anything else pickled value by value."""
    import numpy as np
    import pyarrow as pa

    def is_samples(value: object) -> bool:
        return value is None or (isinstance(value, np.ndarray) and value.dtype == float and value.ndim == 1)

    if isinstance(values, np.ndarray):
        return pa.array(values), _NUMBERS
    if all(map(_is_text_or_missing, values)):
        return pa.array([v if isinstance(v, str) else None for v in values]).dictionary_encode(), _TEXT
    if all(map(is_samples, values)):
        lengths = np.array([0 if v is None else len(v) for v in values], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        flat = np.concatenate([v for v in values if v is not None]) if lengths.any() else np.zeros(0)
        mask = pa.array([v is None for v in values])
        return pa.LargeListArray.from_arrays(offsets, flat, mask=mask), _ARRAYS
    return pa.array([pickle.dumps(v, protocol=5) for v in values], pa.binary()), _PICKLED


def _decode(column: object, kind: str) -> object:
    """The column ``_encode`` wrote, as ``analysis.load`` holds it: texts as a ``Categorical``
    (``text_categorical``: the codes as stored, no Python object per row), raw samples as writable float64
    arrays, pickled values unpickled once per distinct value (a fleet's 4·10⁶ rows repeat a few)."""
    import numpy as np
    import pyarrow as pa

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
    encoded = array.dictionary_encode()
    values = [pickle.loads(value) for value in encoded.dictionary.to_pylist()]
    if not all(map(_immutable, values)):  # rows must not share a list or a dict: one object per row
        return [pickle.loads(value) for value in array.to_pylist()]
    distinct = np.empty(len(values), dtype=object)
    for index, value in enumerate(values):  # one by one: numpy would make a tuple of tuples a 2-D array
        distinct[index] = value
    return distinct[encoded.indices.to_numpy(zero_copy_only=False)].tolist()


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
