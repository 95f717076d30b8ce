"""What is computed from saved runs — each machine's fits, the frame's fits and comparison table, each
figure's files — kept on disk under the digest of the rows it was computed from, so that a second
``report``, ``compare`` or ``plot`` of the same runs computes none of it again.

The parsed-run cache (``analysis.cache``) makes loading a fleet cheap the second time; what follows the
loading then costs the most: the bootstrap intervals of every machine's fits (50 machines of 2,000 runs:
40 CPU-s), the comparison table, matplotlib drawing every figure. Each of them depends only on the rows it
reads, on the analysis code and on the libraries that compute it, and each is deterministic (the fits'
generators are seeded per machine), so a result is kept under

- a digest of its input rows: every row hashed once (pandas' ``hash_pandas_object`` column by column, raw
  samples by their bytes), the rows it reads taken in order, with the columns' names and types; a fit of
  one machine is keyed by that machine's rows alone, so a new run refits its own machine only;
- in a folder named for the source of ``analysis`` and ``model`` and the versions of numpy, pandas, SciPy
  and matplotlib: any edit or upgrade starts anew.

Keyed by content, not by the files' ``stat`` as the parsed-run cache is: a result can never be served for
other rows, whatever happened to the files in between. The results live beside the parsed runs (``--cache
DIR``, ``$LAUNCHBENCH_CACHE``, ...; ``--no-cache`` bypasses both) and, as there, are read only from a folder
this user owns and no one else may write. Each result is a file of ``analysis.sealed``'s tagged JSON sealed
with its SHA-256 (never pickle, which runs code its bytes name and crashed on flipped bits, issue 32): a
result whose bytes are not those written (or that is no regular file: a FIFO in its place is refused
without waiting) is deleted and computed again, with one line on stderr. Past ``LIMIT_BYTES`` the least
recently used go first; the folders of other code versions go once unused for ``STALE_S``, and temporary
files a killed command left once ``analysis.cache.LEFTOVER_S`` old. A result that cannot be read or written
costs a computation, never a wrong result or a failed command.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib
import itertools
import operator
import os
import pickle
import sys
import time
import uuid
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from analysis.cache import LEFTOVER_S, _trusted, say, untrusted, write_whole
from analysis.schema import printable
from analysis.sealed import dumps, loads, read_regular, seal, unseal

#: Bumped when what a kept result means changes in a way the code's source does not show.
MEMO_VERSION = 2
#: The name of a kept result's file: its key and this.
SUFFIX = ".kept"
#: The packages whose source decides every result.
_PACKAGES = ("analysis", "model")
#: The libraries whose versions decide the results (a fit's numbers, a figure's pixels; Pillow, with the zlib
#: its wheel bundles, writes the PNG bytes matplotlib draws).
_LIBRARIES = ("numpy", "pandas", "scipy", "matplotlib", "pillow")
#: At most this many bytes of results are kept per code version (a 10-figure report of a fleet: 1-2 MB).
LIMIT_BYTES = 256 * 2**20
#: The results of another code version unused for this long are removed.
STALE_S = 7 * 86400.0

T = TypeVar("T")


class Memo:
    """The results kept under ``folder`` for this code version: ``cached`` computes a result only when it
    is not kept; ``key`` makes a result's key from its inputs."""

    def __init__(self, folder: Path) -> None:
        self.root = folder
        self.folder = folder / f"results-v{MEMO_VERSION}-{code_version()}"
        self._rows: dict[int, tuple[pd.DataFrame, np.ndarray, bytes]] = {}  # by id: the frame held alive
        self._pruned = False
        self._refused = False

    def key(self, kind: str, *inputs: object) -> str:
        """The key of a result of ``kind`` computed from ``inputs`` (frames, tables, texts, numbers)."""
        digest = hashlib.sha256(kind.encode())
        for value in inputs:
            self._feed(digest, value)
        return f"{kind}-{digest.hexdigest()[:40]}"

    def rows_key(self, kind: str, frame: pd.DataFrame, positions: np.ndarray) -> str:
        """The key of a result of ``kind`` computed from the rows of ``frame`` at ``positions``, in order."""
        hashes, header = self._row_hashes(frame)
        digest = hashlib.sha256(kind.encode())
        digest.update(header)
        digest.update(np.ascontiguousarray(hashes[positions]).tobytes())
        return f"{kind}-{digest.hexdigest()[:40]}"

    def cached(self, key: str, compute: Callable[[], T]) -> T:
        """The result kept under ``key``, else ``compute()``, kept."""
        found, value = self.get(key)
        if found:
            return value
        value = compute()
        self.put(key, value)
        return value

    def get(self, key: str) -> tuple[bool, object]:
        """(True, the result kept under ``key``) or (False, None) when none is kept or it cannot be read;
        one that is damaged (its seal does not match, it is no regular file) is deleted, with one line."""
        path = self.folder / f"{key}{SUFFIX}"
        if not self._usable():
            return False, None
        try:
            kept = loads(unseal(read_regular(path)))
            if type(kept) is not tuple or len(kept) != 2 or kept[0] != key:
                raise ValueError("it holds no result of its key")
            value = kept[1]
            os.utime(path)  # recently used: kept longest when the folder is trimmed
        except FileNotFoundError:
            return False, None
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            say(f"kept result {printable(path)} cannot be used ({why}): deleted, computed again")
            with contextlib.suppress(OSError):
                path.unlink()
            return False, None
        return True, value

    def put(self, key: str, value: object) -> None:
        """Keep ``value`` under ``key`` (written aside: a command running at the same time never reads half
        a result); a value ``analysis.sealed`` cannot hold is not kept."""
        try:
            data = seal(dumps((key, value)))  # the key too: a file copied under another key is not served
        except TypeError:
            return
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            if self._usable():
                write_whole(self.folder / f"{key}{SUFFIX}", data)
        if not self._pruned:
            self._pruned = True
            self._prune()

    def _usable(self) -> bool:
        """Whether the folder is trusted (``analysis.cache._trusted``) or not there yet; said once when an
        existing folder is not."""
        refused = untrusted(self.folder)
        if refused and not self._refused:
            self._refused = True
            say(refused)
        return refused is None

    def _prune(self) -> None:
        """Trim this version's results to ``LIMIT_BYTES`` (least recently used first) and remove other
        versions' folders unused for ``STALE_S``, and temporary files of a command killed while it wrote
        (``LEFTOVER_S`` old): once per command, when it keeps something new. Files are
        removed only from a folder this user owns and no one else may write in that is no symbolic link: a
        link put in the cache folder by someone else would lead the removals into another folder."""
        now = time.time()
        with contextlib.suppress(OSError):
            kept = sorted(((path.lstat(), path) for path in self.folder.iterdir()), reverse=True, key=_used)
            total = 0
            for info, path in kept:
                total += info.st_size
                leftover = not path.name.endswith(SUFFIX) and now - info.st_mtime > LEFTOVER_S
                if (total > LIMIT_BYTES or leftover) and _removable(self.folder):
                    path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            for other in self.root.glob("results-*"):
                if other != self.folder and now - other.stat().st_mtime > STALE_S and _removable(other):
                    for path in other.iterdir():
                        path.unlink(missing_ok=True)
                    other.rmdir()

    def _feed(self, digest: hashlib._Hash, value: object) -> None:
        """Add ``value`` to ``digest``: a frame by its rows' hashes and columns, a dataclass field by field,
        a tuple or list item by item, anything else by its type and ``repr``."""
        if isinstance(value, pd.DataFrame):
            hashes, header = self._row_hashes(value)
            digest.update(b"frame")
            digest.update(header)
            digest.update(hashes.tobytes())
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            digest.update(type(value).__qualname__.encode())
            for field in dataclasses.fields(value):
                digest.update(field.name.encode())
                self._feed(digest, getattr(value, field.name))
        elif isinstance(value, tuple | list):
            digest.update(f"{type(value).__name__}{len(value)}".encode())
            for item in value:
                self._feed(digest, item)
        else:
            digest.update(f"{type(value).__qualname__}:{value!r}".encode())

    def _row_hashes(self, frame: pd.DataFrame) -> tuple[np.ndarray, bytes]:
        """A 64-bit hash of every row of ``frame`` (every column, ``column_hashes``) and its columns' names
        and types: computed once per frame and command."""
        held = self._rows.get(id(frame))
        if held is not None and held[0] is frame:
            return held[1], held[2]
        hashes = np.zeros(len(frame), dtype=np.uint64)
        for name in frame.columns:
            hashes = hashes * np.uint64(1_000_003) ^ column_hashes(frame[name])
        header = repr([(str(name), str(dtype)) for name, dtype in frame.dtypes.items()]).encode()
        self._rows[id(frame)] = (frame, hashes, header)
        return hashes, header


def _removable(folder: Path) -> bool:
    """Whether ``_prune`` may remove files in ``folder``: trusted (``analysis.cache._trusted``), and itself
    a folder, not a symbolic link to one (which ``_trusted`` follows)."""
    return not folder.is_symlink() and _trusted(folder)


def _used(item: tuple[os.stat_result, Path]) -> float:
    return item[0].st_mtime


def column_hashes(column: pd.Series) -> np.ndarray:
    """A 64-bit hash of each value of ``column``, equal only for values equal and of one type.

    Numbers and times by their bits (pandas' own hash makes -0.0 and 0.0 one value); texts and categories by
    pandas' hash (a category by its text, not its code; one missing value); any other object column value by
    value (``_value_hash``): pandas hashes a mixed column's values as text (1 and "1" alike) and values that
    compare equal alike (1, 1.0 and True; None and NaN). A fleet's object columns repeat a few objects (or
    hold None alone), so each distinct object is hashed once."""
    times = getattr(column.array, "asi8", None)  # datetimes (with or without a zone) as int64 ticks
    if isinstance(column.dtype, pd.CategoricalDtype | pd.StringDtype):
        return pd.util.hash_pandas_object(column, index=False).to_numpy(dtype=np.uint64)
    values = times if times is not None else column.to_numpy()
    if values.dtype.kind in "biuf" and values.dtype.itemsize in (1, 2, 4, 8):
        return pd.util.hash_array(
            np.ascontiguousarray(values).view(f"u{values.dtype.itemsize}").astype(np.uint64)
        )
    items = values.tolist()
    if not any(map(operator.is_not, items, itertools.repeat(None))):  # C speed: 4·10⁶ rows of None are common
        return np.zeros(len(items), dtype=np.uint64)
    samples = _samples_hashes(items)
    if samples is not None:
        return samples
    hashed: dict[int, int] = {}  # by id: every object is alive in ``items`` meanwhile
    floats: dict[str, int] = {}  # by ``repr``, as ``_value_hash`` hashes them

    def one(value: object) -> int:
        if type(value) is float:  # most rows of a fleet's object column hold NaN, each its own object
            text = repr(value)
            if text not in floats:
                floats[text] = _value_hash(value)
            return floats[text]
        key = id(value)
        if key not in hashed:
            hashed[key] = _value_hash(value)
        return hashed[key]

    return np.fromiter(map(one, items), dtype=np.uint64, count=len(items))


#: Mixed into each raw sample's bits with its place in the row (``_samples_hashes``): Knuth's multiplicative
#: constant, 2⁶⁴ / φ, so that the same value at another place hashes apart.
_PLACE = np.uint64(0x9E3779B97F4A7C15)
#: Mixed into each row's sum of raw samples' hashes (``_samples_hashes``), so that a row of raw samples
#: never hashes as a value of another column type does.
_SAMPLES_TAG = np.uint64(0x5A3C_96E1_0F87_D2B4)


def _samples_hashes(items: list[object]) -> np.ndarray | None:
    """Each row's hash where every one of ``items`` is None or a one-dimensional float64 array (a column of
    raw samples); None for any other column. A short row (``_SHORT_SAMPLES`` samples at most) is hashed at
    numpy's speed with the other short rows: its length's hash and the sum of its samples' hashes, each
    sample hashed by its bits (``pd.util.hash_array``: -0.0 and 0.0 apart) with its place in the row; a
    longer one by its bytes (``_value_hash``), whose cost per call is then small beside its length; a row of
    None hashes to 0, as ``_value_hash`` has it. Hashing each array on its own was two thirds of hashing a
    quick fleet's frame (67,000 arrays of 5 samples, each a call)."""
    if not all(
        item is None or (type(item) is np.ndarray and item.dtype == np.float64 and item.ndim == 1)
        for item in items
    ):
        return None
    hashes = np.zeros(len(items), dtype=np.uint64)
    lengths = np.fromiter(
        (-1 if item is None else item.size for item in items), dtype=np.int64, count=len(items)
    )
    for row in np.flatnonzero(lengths > _SHORT_SAMPLES):
        hashes[row] = _value_hash(items[row])
    short = np.flatnonzero((lengths >= 0) & (lengths <= _SHORT_SAMPLES))
    if short.size:
        sizes = lengths[short]
        flat = np.concatenate([items[row] for row in short.tolist()])
        starts = np.cumsum(sizes) - sizes
        places = (np.arange(flat.size) - np.repeat(starts, sizes)).astype(np.uint64)
        with np.errstate(over="ignore"):  # sums modulo 2⁶⁴
            each = pd.util.hash_array(flat.view(np.uint64) ^ (places * _PLACE))
            sums = np.concatenate([np.zeros(1, dtype=np.uint64), np.cumsum(each, dtype=np.uint64)])
            rows = sums[starts + sizes] - sums[starts]
            hashes[short] = pd.util.hash_array(
                rows ^ pd.util.hash_array(sizes.view(np.uint64)) ^ _SAMPLES_TAG
            )
    return hashes


#: Rows of at most this many raw samples are hashed together (``_samples_hashes``), longer ones one by one.
_SHORT_SAMPLES = 64


def _value_hash(value: object) -> int:
    """One value's 64-bit hash: raw samples (arrays) by their type, shape and bytes; texts, numbers, None and
    tuples of them by their type and ``repr`` (1, 1.0, True, "1", None and nan each apart; not pickled, whose
    bytes depend on which equal objects are one object); anything else pickled."""
    if value is None:
        return 0
    if isinstance(value, np.ndarray):
        digest = hashlib.blake2b(f"{value.dtype.str}{value.shape}".encode(), digest_size=8)
        digest.update(np.ascontiguousarray(value).tobytes())
    elif _plain(value):
        digest = hashlib.blake2b(
            f"{type(value).__qualname__}:{value!r}".encode("utf-8", "surrogatepass"), digest_size=8
        )
    else:
        digest = hashlib.blake2b(pickle.dumps(value, protocol=5), digest_size=8)
    return int.from_bytes(digest.digest(), "little")


def _plain(value: object) -> bool:
    """Whether ``repr`` spells ``value`` whole: a text, a number, None, or a tuple of them."""
    if type(value) is tuple:
        return all(map(_plain, value))
    return value is None or type(value) in (str, int, float, bool)


@functools.cache
def code_version() -> str:
    """A digest of the source of ``analysis`` and ``model`` (every ``.py`` file, by path) and of the
    versions of Python and of the libraries results depend on: taken once per process, when the first
    ``Memo`` is made (the command line makes it before it loads the runs: code edited while a command loads
    must not be kept as the edit's), not at import (19 ms that every other importer would pay)."""
    digest = hashlib.sha256(f"v{MEMO_VERSION} {sys.version_info[:2]}".encode())
    for package in _PACKAGES:
        root = Path(importlib.import_module(package).__file__ or "").parent
        try:
            for path in sorted(root.rglob("*.py")):
                digest.update(str(path.relative_to(root.parent)).encode())
                digest.update(path.read_bytes())
        except OSError:  # source unreadable: a version of its own, never reused
            digest.update(f"unknown {time.time_ns()} {uuid.uuid4()}".encode())
    for library in _LIBRARIES:
        try:
            digest.update(f"{library}={metadata.version(library)}".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{library}=none".encode())
    return digest.hexdigest()[:24]


def open_memo(folder: Path | None) -> Memo | None:
    """The results kept under ``folder`` (the parsed-run cache's); None without one (``--no-cache``)."""
    return Memo(Path(folder)) if folder is not None else None
