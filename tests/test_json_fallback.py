"""Where orjson is missing (the GPU machine's image), ``analysis.load`` reads every run with
``analysis.json_fallback``: the same documents, the same problems in the same words, the same frame, only
slower. Each file below is read both ways and compared, the odd ones included (NaN, a byte-order mark,
integers past 64 bits, UTF-16, not UTF-8, truncated, nested too deeply, empty)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import analysis.load as load
from analysis import json_fallback
from tests.test_load_batches import RUNS

ROOT = Path(__file__).resolve().parents[1]


def _odd_files(tmp_path: Path) -> list[Path]:
    raw = RUNS[0].read_bytes()
    doc = json.loads(raw)
    doc["benchmarks"][0]["stats"]["stddev"] = float("nan")
    big = json.loads(raw)
    big["benchmarks"][0]["extra_info"]["n_bytes"] = 2**70
    contents = {
        "run.json": raw,
        "nan.json": json.dumps(doc).encode(),
        "bom.json": b"\xef\xbb\xbf" + raw,
        "big-int.json": json.dumps(big).encode(),
        "huge-numbers.json": b'{"benchmarks": [1' + b"0" * 400 + b", 1e400, -9223372036854775809, 1.5e-400]}",
        "utf16.json": raw.decode("utf-8").encode("utf-16"),
        "latin1.json": b'{"benchmarks": ["caf\xe9"]}',
        "truncated.json": raw[: len(raw) // 2],
        "deep.json": b"[" * 100_000 + b"]" * 100_000,
        "empty.json": b"  \n",
        "list.json": b"[1, 2]",
        "cut-inside-a-character.json": '{"benchmarks": ["é'.encode()[:-1],
    }
    paths = []
    for name, content in contents.items():
        path = tmp_path / name
        path.write_bytes(content)
        paths.append(path)
    return paths


def _both_ways(monkeypatch: pytest.MonkeyPatch, read) -> tuple[object, object]:
    """``read()`` with orjson, then with the fallback in its place."""
    with_orjson = read()
    monkeypatch.setattr(load, "orjson", json_fallback)
    without = read()
    monkeypatch.undo()
    return with_orjson, without


@pytest.mark.parametrize(
    "samples", [True, False, lambda bench: bench["extra_info"].get("case") == "ufunc_size"]
)
def test_every_file_reads_the_same_without_orjson(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, samples
) -> None:
    assert load.orjson is not json_fallback, "orjson is installed here: both ways are compared"
    for path in _odd_files(tmp_path):
        with_orjson, without = _both_ways(monkeypatch, lambda path=path: load.read_run(path, samples))
        # json.dumps writes NaN alike on both sides, where == would call two NaNs different
        assert json.dumps(without, sort_keys=True) == json.dumps(with_orjson, sort_keys=True), path.name


def test_the_frame_and_problems_are_the_same_without_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    with_orjson, without = _both_ways(monkeypatch, lambda: load.load_runs(RUNS, samples=True))
    pd.testing.assert_frame_equal(without.frame, with_orjson.frame)
    assert without.problems == with_orjson.problems
    pd.testing.assert_frame_equal(
        without.runs.drop(columns="digest"), with_orjson.runs.drop(columns="digest")
    )


def test_the_digest_is_the_text_load_writes_with_json() -> None:
    summary = [["b", {"x": 1.5, "a": None}], ["a", {"s": "\ud800"}]]  # a lone surrogate too
    expected = json.dumps(summary, sort_keys=True, default=str, allow_nan=True).encode(
        "utf-8", "surrogatepass"
    )
    assert json_fallback.dumps(summary, default=str, option=json_fallback.OPT_SORT_KEYS) == expected


def test_without_orjson_analysis_imports_the_fallback() -> None:
    """As on the GPU machine: ``import orjson`` fails, ``analysis.load`` imports, and reads a run."""
    code = (
        "import sys; sys.modules['orjson'] = None\n"
        "import analysis.load as load\n"
        "from analysis import json_fallback\n"
        "assert load.orjson is json_fallback\n"
        f"result = load.load_runs([{str(RUNS[0])!r}], samples=True)\n"
        "print(len(result.frame), len(result.problems))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    rows, problems = map(int, done.stdout.split())
    assert rows > 0 and problems == 0
