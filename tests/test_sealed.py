"""The caches' data-only format (``analysis.sealed``, issue 32): every kind of value the caches keep comes
back exactly (type, dtype, index, attributes, float bits), anything else is refused when written, a damaged
seal is ``Damaged``, and a report of real CPU runs and of the SYNTHETIC GPU run keeps every result it
computes (none is left out for a type the format cannot hold)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest

from analysis import memo as memo_module
from analysis.__main__ import main
from analysis.fits import Fits
from analysis.sealed import Damaged, dumps, loads, read_regular, seal, unseal
from analysis.verdicts import Judged
from tests.test_report import synthetic_gpu_run

DATA = Path(__file__).parent / "data"


def _same(one: object, other: object) -> None:
    """``one`` and ``other`` are the same value: types, dtypes, labels, attributes and float bits."""
    assert type(one) is type(other), (type(one), type(other))
    if isinstance(one, pd.DataFrame):
        pd.testing.assert_frame_equal(
            one, other, check_exact=True, check_column_type=True, check_index_type=True
        )
        _same(one.attrs, other.attrs)
    elif isinstance(one, pd.Series):
        pd.testing.assert_series_equal(one, other, check_exact=True, check_index_type=True)
    elif isinstance(one, pd.Index):
        pd.testing.assert_index_equal(one, other, exact=True)
    elif isinstance(one, pd.api.extensions.ExtensionArray):
        pd.testing.assert_extension_array_equal(one, other, check_exact=True)
    elif isinstance(one, np.ndarray):
        assert one.dtype == other.dtype and one.shape == other.shape
        if one.dtype == object:
            for a, b in zip(one.tolist(), other.tolist(), strict=True):
                _same(a, b)
        else:
            assert one.tobytes() == other.tobytes()
            assert other.flags.writeable
    elif dataclasses.is_dataclass(one):
        for field in dataclasses.fields(one):
            _same(getattr(one, field.name), getattr(other, field.name))
    elif isinstance(one, dict):
        assert list(one) == list(other)
        for key in one:
            _same(one[key], other[key])
    elif isinstance(one, tuple | list):
        assert len(one) == len(other)
        for a, b in zip(one, other, strict=True):
            _same(a, b)
    elif isinstance(one, float | np.floating):
        assert np.array([one]).tobytes() == np.array([other]).tobytes()  # -0.0 and NaN by their bits
    else:
        assert one == other


def _frame() -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "f": [1.5, -0.0, math.nan],
            "i": np.array([1, -2, 2**62], dtype=np.int64),
            "u": np.array([0, 1, 255], dtype=np.uint8),
            "b": [True, False, True],
            "objects": pd.Series([(1, "a"), None, {"k": [1.0, math.inf]}], dtype=object),
            "text": pd.Series(["a", None, "µ"], dtype=pd.StringDtype("python", na_value=math.nan)),
            "arrow text": pd.Series(["x", "y", None], dtype=pd.StringDtype("pyarrow", na_value=pd.NA)),
            "category": pd.Categorical(["b", "a", None], categories=["b", "a"], ordered=True),
            "when": pd.to_datetime(
                ["2026-12-03T10:00:00.5Z", None, "2026-12-04T11:30:00.000001Z"], format="ISO8601"
            ),
            "naive": np.array(["2026-01-01", "NaT", "2026-01-02"], dtype="datetime64[us]"),
            "span": np.array([1, 2, 3], dtype="timedelta64[ns]"),
            "nullable": pd.array([1, None, 3], dtype="Int64"),
            "nullable float": pd.array([0.5, None, 1.0], dtype="Float64"),
            "flag": pd.array([True, None, False], dtype="boolean"),
        },
        index=pd.Index([10, 20, 30], name="row"),
    )
    frame.attrs = {"baseline": "m", "verdicts": Judged(["="], [0.9], [1.1], [0.2], 1, 0, 0.95, 0.03)}
    return frame


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        2**100,
        -0.0,
        math.nan,
        -math.inf,
        "\ud800 unpaired, µ, \x1b",
        b"\x00\xff" * 3,
        (1, (2.5, "x"), [None, {"a": (1,)}]),
        {(1, "k"): 1, 2: "two", None: [], "": {}},
        [],
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.array(3 + 4j),
        np.array([True, False]),
        np.array([(1, 2), None, "x", 1.5], dtype=object),
        np.float64(-0.0),
        np.int16(-7),
        np.datetime64("2026-12-03T10:00:00", "ns"),
        _frame(),
        _frame().iloc[:0],
        pd.DataFrame(),
        pd.DataFrame(columns=["a", "b"]),
        pd.DataFrame({0: [1.0], 1: [2.0]}, index=pd.RangeIndex(5, 6, name="r")),
        pd.Series([1.0, 2.0], index=["a", "b"], name=("tuple", "name")),
        pd.Index(["a", "b"], dtype=object, name="objects"),
        pd.Categorical(["x", "y", "x"]),
        Fits(*(pd.DataFrame({"x": [1.0]}) for _ in range(7))),
    ],
    ids=lambda value: type(value).__name__,
)
def test_every_value_the_caches_keep_comes_back_exactly(value: object) -> None:
    back = loads(unseal(seal(dumps(value))))
    _same(value, back)
    assert dumps(back) == dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        lambda: None,
        object(),
        Path("/tmp"),
        pd.DataFrame({"x": [1]}, index=pd.MultiIndex.from_tuples([(1, 2)])),
        np.zeros(2, dtype=[("a", "f8")]),
        dataclasses.make_dataclass("Elsewhere", ["x"])(1),  # not analysis' or model's
    ],
    ids=["set", "function", "object", "path", "multiindex", "structured", "foreign dataclass"],
)
def test_anything_else_is_refused_when_written(value: object) -> None:
    with pytest.raises(TypeError):
        dumps(value)


def test_the_seal_catches_every_change_and_the_reader_never_blocks(tmp_path: Path) -> None:
    sealed = seal(dumps({"k": [1.0, 2.0]}))
    assert loads(unseal(sealed)) == {"k": [1.0, 2.0]}
    for index in range(len(sealed)):
        for bit in (0, 7):
            changed = bytearray(sealed)
            changed[index] ^= 1 << bit
            with pytest.raises(Damaged):
                unseal(bytes(changed))
    for cut in (0, 10, len(sealed) - 1):
        with pytest.raises(Damaged):
            unseal(sealed[:cut])
    pipe = tmp_path / "pipe"
    import os

    os.mkfifo(pipe)
    with pytest.raises(OSError, match="not a regular file"):
        read_regular(pipe)
    (tmp_path / "link").symlink_to(tmp_path / "target")
    (tmp_path / "target").write_bytes(sealed)
    with pytest.raises(OSError):
        read_regular(tmp_path / "link")


@pytest.mark.parametrize(
    "body",
    [
        b'{"zz":[1]}',
        b'{"c":["os","system",["x",1]]}',
        b'{"c":["analysis.fits","Fits",["host",1]]}',
        b'{"c":["analysis.no_such_module","X",[]]}',
        b'{"a":["O",[1],"AA=="]}',
        b'{"a":["<f8",[3],"AA=="]}',
        b'{"C":[{"R":[0,1,1,null]},{"a":["<i1",[1],"BQ=="]},false]}',
        b'{"F":[{"R":[0,2,1,null]},{"R":[0,1,1,null]},[],{"d":[]}]}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"t":1}',
    ],
)
def test_a_sealed_body_of_another_making_is_one_value_error(body: bytes) -> None:
    with pytest.raises(ValueError):
        loads(body)


def test_a_report_keeps_every_result_it_computes(tmp_path: Path) -> None:
    """Of real CPU runs and the SYNTHETIC GPU run: every ``Memo.put`` of the report is kept (the format holds
    each value: a type it cannot hold would cost a recompute at every report)."""
    gpu = tmp_path / "gpu" / "gpu.json"  # a storage of its own: the output and the cache lie outside it
    gpu.parent.mkdir()
    gpu.write_text(json.dumps(synthetic_gpu_run()), encoding="utf-8")
    refused: list[str] = []
    real = memo_module.dumps

    def recorded(value: object) -> bytes:
        try:
            return real(value)
        except TypeError as error:
            refused.append(str(error))
            raise

    with mock.patch.object(memo_module, "dumps", recorded):
        argv = [
            "report",
            str(DATA / "runs"),
            str(gpu),
            "--out",
            str(tmp_path / "out"),
            "--cache",
            str(tmp_path / "c"),
        ]
        assert main(argv) == 0
    assert refused == []
    assert len(list((tmp_path / "c").glob("results-*/*.kept"))) >= 8
