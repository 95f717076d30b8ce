"""``analysis.schema``'s fast tests decide nothing themselves: where one says a field is right, the check
itself finds nothing wrong (``first_problem`` then reports exactly what the field-by-field walk reports),
and on real runs they say so for every field (the fast path is the one taken). Raw samples checked in Python
(a few) give what numpy's checks give.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from analysis import schema
from analysis.schema import (
    CASE_FIELDS,
    MACHINE_FIELDS,
    PROVENANCE_FIELDS,
    RECORD_FIELDS,
    RUN_RECORD_KEY,
    Fields,
    _first_problem,
    _passes,
    _samples,
    first_problem,
)

DATA = Path(__file__).parent / "data"
RUNS = [DATA / "sentinel" / "quiet-quick-1.json", DATA / "runs-xeon" / "xeon-2core-full-1.json"]
#: Values of every odd kind a JSON field may hold (what json and orjson give).
ODD_VALUES = (
    None,
    True,
    False,
    0,
    1,
    -1,
    0.0,
    -0.0,
    1.0,
    5.0,
    2.5,
    -2.5,
    1e-13,
    1e-12,
    1e6,
    1e6 + 1,
    1e7,
    2**53,
    2**53 + 1,
    2**60,
    10**400,
    math.nan,
    math.inf,
    -math.inf,
    "",
    "x",
    "a\nb",
    "\ud800",
    [],
    [1e-6],
    [1e-6, math.nan],
    [0],
    ["x"],
    {},
    {"add": 3},
    {"add": 0},
    {"": 1},
    {"add": 2.0},
)


def _docs() -> list[dict]:
    return [json.loads(path.read_text(encoding="utf-8")) for path in RUNS]


def _fields(fields: Fields, value: dict, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every checked field's path in ``value`` (and each checked key it lacks)."""
    paths = []
    for key, check in fields.checks.items():
        paths.append((*path, key))
        if isinstance(check, Fields) and isinstance(value.get(key), dict):
            paths += _fields(check, value[key], (*path, key))
    return paths


def _with(value: dict, path: tuple[str, ...], new: object) -> dict:
    """``value`` with the field at ``path`` set to ``new`` (a copy; parents made where missing)."""
    out = json.loads(json.dumps(value))
    node = out
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = new
    return out


def _assert_sound(value: dict, fields: Fields) -> None:
    if _passes(value, fields):
        assert _first_problem(value, fields) is None, value
    assert first_problem(value, fields) == _first_problem(value, fields)


@pytest.mark.parametrize("run", range(len(RUNS)))
def test_every_real_case_and_run_passes_fast(run: int) -> None:
    doc = _docs()[run]
    record_doc = {**doc, RUN_RECORD_KEY: doc.get(RUN_RECORD_KEY)}
    for fields in (MACHINE_FIELDS, RECORD_FIELDS, PROVENANCE_FIELDS):
        assert _passes(record_doc, fields)
    cases = [bench for bench in doc["benchmarks"] if schema.is_ours(bench)]
    assert len(cases) > 20
    for bench in cases:
        assert _passes(bench, CASE_FIELDS), bench["name"]


def test_a_fast_pass_is_never_wrong_for_any_odd_value_of_any_field() -> None:
    """Each checked field of each kind of case, and of the run, set to each odd value in turn."""
    doc = _docs()[1]
    families = {}
    for bench in doc["benchmarks"]:
        if schema.is_ours(bench):
            families.setdefault(bench["extra_info"]["case"], bench)
    checked = 0
    for bench in families.values():
        for path in _fields(CASE_FIELDS, bench):
            for value in ODD_VALUES:
                _assert_sound(_with(bench, path, value), CASE_FIELDS)
                checked += 1
    run = {key: doc[key] for key in ("machine_info", "datetime", "version", "commit_info", RUN_RECORD_KEY)}
    for fields in (MACHINE_FIELDS, RECORD_FIELDS, PROVENANCE_FIELDS):
        for path in _fields(fields, run):
            for value in ODD_VALUES:
                _assert_sound(_with(run, path, value), fields)
                checked += 1
    assert checked > 10_000


@pytest.mark.parametrize(
    "data",
    [
        [1e-6, 2e-6],
        [1, 2],
        [1e-12, 1e6],
        [1e-13],
        [1e6 + 1],
        [0],
        [-1e-6],
        [math.nan, 1e-6],
        [1e-6, math.inf],
        [10**400],
        [2**60],
        [1e-6] * 64,
        [1e-6] * 63 + [math.nan],
    ],
)
def test_few_samples_checked_in_python_as_numpy_checks_them(data: list) -> None:
    fast_values, fast_problem = _samples(data)
    with mock.patch.object(schema, "_FEW_SAMPLES", 0):
        values, problem = _samples(data)
    assert fast_problem == problem
    if values is None:
        assert fast_values is None
    else:
        assert fast_values.dtype == values.dtype and np.array_equal(fast_values, values)
