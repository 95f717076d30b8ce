"""Values kept on disk by the caches (``analysis.cache``, ``analysis.memo``) in a format that holds data
only, each file sealed with the SHA-256 of its bytes: what is read back is what was written, or nothing.

A cache file lives in a user's folder, where a disk, a copy or a hand may change any byte. Pickle, which the
caches used before, runs code named in its bytes and crashed the interpreter (SIGSEGV) on some single
flipped bits, and Parquet's page checksums are not verified unless asked, nor do they cover its footer: a
flipped bit changed a figure ×1.03 into ×4.12 (issue 32). Here:

- ``dumps`` writes a value as JSON text in which every JSON object is a tag naming one of a closed set of
  data types — texts, numbers (float bits exact: -0.0, NaN, ±∞), None, booleans, tuples, lists, dicts,
  bytes, numpy arrays and scalars of numbers, booleans and times, pandas frames, series, indexes,
  categoricals, text and time-zone arrays, and the dataclasses of ``analysis`` and ``model`` — so ``loads``
  (Python's JSON parser and a small table of builders) can build nothing else and runs no code the bytes
  name; any other value is ``TypeError`` (the caller keeps nothing);
- ``seal`` puts one header line before the bytes: the format, their length and their SHA-256; ``unseal``
  gives the bytes back only when both match (``Damaged`` otherwise), so a flipped bit costs a recompute,
  never a number, and the parser never meets bytes that were not written as they are;
- ``read_regular`` opens a file without blocking and reads it only when it is a regular file (a FIFO put
  in place of a cache file made a command wait forever), never through a symbolic link.

SHA-256 (OpenSSL's, with the CPU's SHA instructions where it has them) hashes 1-2 GB/s: a fleet's 10⁵-run
cache of a few hundred MB costs a fraction of a second of a warm command that reads it (docs/speed.md).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import importlib
import json
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np

#: The first bytes of every sealed file, then its version.
MAGIC = b"launchbench-sealed"
VERSION = 1
#: A header line is at most this long (the magic, the version, a length and 64 hex digits).
_HEADER_MAX = 160
#: numpy dtype kinds an array or scalar may have: booleans, integers, floats, complex numbers, times.
_ARRAY_KINDS = frozenset("biufcmM")
#: The packages whose dataclasses may be kept (only their own data classes, built field by field).
_DATACLASS_PACKAGES = ("analysis", "model")
#: pandas' masked (nullable) array types by dtype name.
_MASKED = frozenset(
    [
        "Int8",
        "Int16",
        "Int32",
        "Int64",
        "UInt8",
        "UInt16",
        "UInt32",
        "UInt64",
        "Float32",
        "Float64",
        "boolean",
    ]
)


class Damaged(ValueError):
    """A sealed file whose header, length or digest does not match its bytes (or that cannot be read)."""


# --- the seal -----------------------------------------------------------------------------------------------


def seal(body: bytes) -> bytes:
    """``body`` with its header line: ``launchbench-sealed 1 <length> <SHA-256>``."""
    digest = hashlib.sha256(body).hexdigest()
    return b"%s %d %d %s\n" % (MAGIC, VERSION, len(body), digest.encode()) + body


def unseal(data: bytes) -> bytes:
    """The body of ``data`` (``seal``'s output), once its length and SHA-256 match; else ``Damaged``."""
    end = data.find(b"\n", 0, _HEADER_MAX)
    if end < 0:
        raise Damaged("no header line")
    parts = data[:end].split(b" ")
    if len(parts) != 4 or parts[0] != MAGIC or parts[1] != b"%d" % VERSION or not parts[2].isdigit():
        raise Damaged("not a launchbench-sealed header")
    body = data[end + 1 :]
    if len(body) != int(parts[2]):
        raise Damaged(f"{len(body)} bytes where the header says {int(parts[2])}")
    if hashlib.sha256(body).hexdigest().encode() != parts[3]:
        raise Damaged("its SHA-256 does not match its bytes")
    return body


def read_regular(path: Path) -> bytes:
    """The bytes of ``path``, read only when it is a regular file (opened without blocking, so a FIFO in its
    place is refused at once, and not through a symbolic link); ``OSError`` otherwise."""
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    )
    handle = os.open(path, flags)
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        chunks = []
        while True:
            chunk = os.read(handle, 1 << 24)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(handle)


# --- values as tagged JSON ----------------------------------------------------------------------------------


def dumps(value: object) -> bytes:
    """``value`` as tagged JSON (ASCII bytes); ``TypeError`` for a value of a type ``loads`` does not build
    (or nested past the recursion limit)."""
    try:
        return json.dumps(_tagged(value), ensure_ascii=True, allow_nan=True, separators=(",", ":")).encode()
    except RecursionError as exc:
        raise TypeError("nested too deep to keep") from exc


def loads(data: bytes) -> object:
    """The value ``dumps`` wrote; ``ValueError`` (never anything else of the bytes' making) when ``data`` is
    not such a value."""
    try:
        return json.loads(data, object_hook=_built)
    except (
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        OverflowError,
        RecursionError,
        ImportError,
        AttributeError,
    ) as exc:
        raise ValueError(f"not a kept value ({type(exc).__name__})") from exc


def _tagged(value: object) -> object:
    """``value`` as JSON data: JSON's own scalars as they are, everything else a one-key object (the tag)."""
    kind = type(value)
    if value is None or kind in (str, bool, int, float):
        return value
    if kind is tuple:
        return {"t": [_tagged(item) for item in value]}
    if kind is list:
        return {"l": [_tagged(item) for item in value]}
    if kind is dict:
        return {"d": [_tagged(part) for item in value.items() for part in item]}
    if kind is bytes:
        return {"b": base64.b64encode(value).decode()}
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, np.generic) and value.dtype.kind in _ARRAY_KINDS:
        return {"g": [value.dtype.str, base64.b64encode(value.tobytes()).decode()]}
    tagged = _pandas(value)
    if tagged is not None:
        return tagged
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        module = kind.__module__
        if module.split(".")[0] in _DATACLASS_PACKAGES:
            fields = [
                _tagged(part) for f in dataclasses.fields(value) for part in (f.name, getattr(value, f.name))
            ]
            return {"c": [module, kind.__qualname__, fields]}
    raise TypeError(f"a {kind.__module__}.{kind.__qualname__} cannot be kept")


def _array(array: np.ndarray) -> dict:
    if array.dtype == object:
        if array.ndim != 1:
            raise TypeError("an object array of more than one dimension cannot be kept")
        return {"o": [_tagged(item) for item in array.tolist()]}
    if array.dtype.kind not in _ARRAY_KINDS or array.dtype.fields is not None:
        raise TypeError(f"a numpy array of {array.dtype} cannot be kept")
    raw = base64.b64encode(np.ascontiguousarray(array).tobytes()).decode()
    return {"a": [array.dtype.str, list(array.shape), raw]}


def _pandas(value: object) -> dict | None:
    """A pandas frame, series, index or array as tagged data; None for anything else (pandas imported only
    when the value's module says it is pandas')."""
    if not type(value).__module__.startswith("pandas"):
        return None
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        columns = [_values(value.iloc[:, i].array) for i in range(value.shape[1])]
        attrs = _tagged(dict(value.attrs))
        return {"F": [_index(value.columns), _index(value.index), columns, attrs]}
    if isinstance(value, pd.Series):
        return {
            "S": [_values(value.array), _index(value.index), _tagged(value.name), _tagged(dict(value.attrs))]
        }
    if isinstance(value, pd.Index):
        return _index(value)
    if isinstance(value, pd.api.extensions.ExtensionArray):
        return _values(value)
    return None


def _index(index: object) -> dict:
    import pandas as pd

    if type(index) is pd.RangeIndex:
        return {"R": [index.start, index.stop, index.step, _tagged(index.name)]}
    if type(index) is pd.MultiIndex:
        raise TypeError("a MultiIndex cannot be kept")
    return {"I": [_values(index.array), _tagged(index.name)]}


def _values(array: object) -> dict:
    """A column's (or index's) values: a numpy array as it is, else one of pandas' own arrays."""
    import pandas as pd

    dtype = array.dtype
    if isinstance(dtype, pd.StringDtype):  # before numpy's: Python-stored texts are a NumpyExtensionArray too
        texts = [item if type(item) is str else None for item in array]
        return {"T": [dtype.storage, "NA" if dtype.na_value is pd.NA else "nan", _tagged(texts)]}
    if isinstance(array, pd.arrays.NumpyExtensionArray):
        return _array(array.to_numpy())
    if isinstance(dtype, np.dtype):  # datetime64/timedelta64 arrays without a zone
        return _array(np.asarray(array))
    if isinstance(array, pd.Categorical):
        return {"C": [_index(array.categories), _array(array.codes), bool(array.ordered)]}
    if isinstance(dtype, pd.DatetimeTZDtype):
        return {"Z": [str(dtype.tz), dtype.unit, _array(array.asi8)]}
    if str(dtype) in _MASKED:
        return {"K": [str(dtype), _array(array._data), _array(array._mask)]}
    raise TypeError(f"a pandas column of {dtype} cannot be kept")


# --- building the values back -------------------------------------------------------------------------------


def _built(tag: dict) -> object:
    """One tagged object of ``_tagged``'s as its value (called by the JSON parser, innermost first)."""
    if len(tag) != 1:
        raise ValueError("a tag holds one key")
    ((name, payload),) = tag.items()
    builder = _BUILDERS.get(name)
    if builder is None:
        raise ValueError(f"unknown tag {name!r}")
    return builder(payload)


def _list(payload: object) -> list:
    if type(payload) is not list:
        raise ValueError("a list was expected")
    return payload


def _dict(payload: object) -> dict:
    items = iter(_list(payload))
    return dict(zip(items, items, strict=True))


def _bytes(payload: object) -> bytes:
    if type(payload) is not str:
        raise ValueError("bytes are base64 text")
    return base64.b64decode(payload, validate=True)


def _dtype(text: object) -> np.dtype:
    if type(text) is not str:
        raise ValueError("a dtype is text")
    dtype = np.dtype(text)
    if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise ValueError(f"dtype {text!r} is not kept")
    return dtype


def _numbers(payload: object) -> np.ndarray:
    text, shape, raw = _list(payload)
    dtype = _dtype(text)
    shape = tuple(_list(shape))
    if not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError("a shape is counts")
    data = _bytes(raw)
    if len(data) != math.prod(shape) * dtype.itemsize:
        raise ValueError("an array's bytes do not fill its shape")
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()  # writable, as computed


def _objects(payload: object) -> np.ndarray:
    items = _list(payload)
    array = np.empty(len(items), dtype=object)
    for index, item in enumerate(items):  # one by one: numpy would make a tuple of tuples a 2-D array
        array[index] = item
    return array


def _scalar(payload: object) -> object:
    text, raw = _list(payload)
    dtype = _dtype(text)
    data = _bytes(raw)
    if len(data) != dtype.itemsize:
        raise ValueError("a scalar's bytes do not fit its dtype")
    return np.frombuffer(data, dtype=dtype)[0]


def _dataclass(payload: object) -> object:
    module, name, fields = _list(payload)
    if type(module) is not str or type(name) is not str or module.split(".")[0] not in _DATACLASS_PACKAGES:
        raise ValueError("only analysis' and model's dataclasses are kept")
    kind = functools.reduce(getattr, name.split("."), importlib.import_module(module))
    if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
        raise ValueError(f"{module}.{name} is not a dataclass")
    values = _dict(fields)
    if set(values) != {f.name for f in dataclasses.fields(kind)}:
        raise ValueError(f"{module}.{name}'s fields differ")
    built = object.__new__(kind)  # field by field: no __init__ or __post_init__ of the bytes' choosing runs
    for key, item in values.items():
        object.__setattr__(built, key, item)
    return built


def _frame(payload: object) -> object:
    import pandas as pd

    columns, index, arrays, attrs = _list(payload)
    arrays = _list(arrays)
    if len(arrays) != len(columns) or not all(len(array) == len(index) for array in arrays):
        raise ValueError("a frame's columns do not match its labels")
    frame = pd.DataFrame(
        {position: _series(array, index) for position, array in enumerate(arrays)}, index=index, copy=False
    )
    frame.columns = columns
    frame.attrs = _attrs(attrs)
    return frame


def _series(array: object, index: object) -> object:
    import pandas as pd

    return pd.Series(array, index=index, dtype=array.dtype, copy=False)


def _attrs(attrs: object) -> dict:
    if type(attrs) is not dict:
        raise ValueError("attrs are a dict")
    return attrs


def _series_built(payload: object) -> object:
    array, index, name, attrs = _list(payload)
    if len(array) != len(index):
        raise ValueError("a series' values do not match its labels")
    series = _series(array, index)
    series.name = name
    series.attrs = _attrs(attrs)
    return series


def _range(payload: object) -> object:
    import pandas as pd

    start, stop, step, name = _list(payload)
    if not all(type(n) is int for n in (start, stop, step)) or step == 0:
        raise ValueError("a range is three integers")
    return pd.RangeIndex(start, stop, step, name=name)


def _index_built(payload: object) -> object:
    import pandas as pd

    array, name = _list(payload)
    if not hasattr(array, "dtype"):
        raise ValueError("an index holds an array")
    return pd.Index(array, dtype=array.dtype, name=name, copy=False)


def _categorical(payload: object) -> object:
    import pandas as pd

    categories, codes, ordered = _list(payload)
    if not isinstance(codes, np.ndarray) or codes.dtype.kind != "i" or codes.ndim != 1:
        raise ValueError("categorical codes are integers")
    if len(codes) and (codes.max() >= len(categories) or codes.min() < -1):
        raise ValueError("a categorical code points past its categories")
    dtype = pd.CategoricalDtype(categories, ordered=bool(ordered))
    return pd.Categorical.from_codes(codes, dtype=dtype)


def _texts(payload: object) -> object:
    import pandas as pd

    storage, missing, texts = _list(payload)
    if storage not in ("python", "pyarrow") or missing not in ("nan", "NA"):
        raise ValueError("not a text column")
    texts = _list(texts)
    if not all(text is None or type(text) is str for text in texts):
        raise ValueError("a text column holds texts")
    dtype = pd.StringDtype(storage, na_value=np.nan if missing == "nan" else pd.NA)
    return pd.array(texts, dtype=dtype)


def _zoned(payload: object) -> object:
    import pandas as pd

    zone, unit, ticks = _list(payload)
    if type(zone) is not str or unit not in ("s", "ms", "us", "ns"):
        raise ValueError("not a zoned time column")
    if not isinstance(ticks, np.ndarray) or ticks.dtype != np.int64 or ticks.ndim != 1:
        raise ValueError("zoned times are int64 ticks")
    return pd.Series(ticks.view(f"M8[{unit}]")).dt.tz_localize("UTC").dt.tz_convert(zone).array


def _masked(payload: object) -> object:
    import pandas as pd

    name, data, mask = _list(payload)
    if name not in _MASKED:
        raise ValueError(f"{name!r} is not a masked dtype")
    if not isinstance(data, np.ndarray) or not isinstance(mask, np.ndarray) or mask.dtype != bool:
        raise ValueError("a masked column is values and a mask")
    dtype = pd.api.types.pandas_dtype(name)
    if data.dtype != dtype.numpy_dtype or data.shape != mask.shape or data.ndim != 1:
        raise ValueError("a masked column's values do not fit its dtype")
    return dtype.construct_array_type()(data, mask)


_BUILDERS: dict[str, Callable[[object], object]] = {
    "t": lambda payload: tuple(_list(payload)),
    "l": _list,
    "d": _dict,
    "b": _bytes,
    "a": _numbers,
    "o": _objects,
    "g": _scalar,
    "c": _dataclass,
    "F": _frame,
    "S": _series_built,
    "R": _range,
    "I": _index_built,
    "C": _categorical,
    "T": _texts,
    "Z": _zoned,
    "K": _masked,
}
