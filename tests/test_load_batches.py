"""analysis.load's fast paths give what the plain ones give: the frame built from batches of files (rows sent
as one array or list per column, in worker processes from ``PARALLEL_MIN_FILES`` files on) equals the frame
of one dict per row, value for value and dtype for dtype; raw samples parsed only for the cases a predicate
picks are those of a full parse; orjson and json read a run alike."""

from __future__ import annotations

import json
import math
import os
import signal
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np
import pytest

import analysis.load as load
from analysis.fits import SAMPLED_CASES, uses_samples
from analysis.load import PARALLEL_MIN_FILES, SUITE, load_runs

DATA = Path(__file__).parent / "data"
RUNS = sorted(DATA.glob("cpu-*.json"))


def _same(x: object, y: object) -> bool:
    if x is None or y is None:
        return x is None and y is None
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and np.array_equal(x, y)
    return type(x) is type(y) and x == y


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real runs, copied round-robin into more files than ``PARALLEL_MIN_FILES`` (so that workers read
    them in batches), each a machine of its own; some copies carry an ``extra_info`` key no other case has
    (a column that is missing in most rows, text in some, numbers in others), some lack their samples, some
    hold a warm-up, and some an ``extra_info`` key that names a run's column or a row's own."""
    folder = tmp_path_factory.mktemp("many")
    docs = [json.loads(path.read_text(encoding="utf-8")) for path in RUNS]
    for index in range(PARALLEL_MIN_FILES + 5):
        doc = json.loads(json.dumps(docs[index % len(docs)]))
        doc["machine_info"][SUITE]["host"] = f"host-{index % 7}"
        bench = doc["benchmarks"][index % len(doc["benchmarks"])]
        if index % 5 == 1:
            bench["extra_info"]["note"] = f"text {index}"
        elif index % 5 == 3:
            bench["extra_info"]["note"] = index
        if index % 4 == 2:
            for case in doc["benchmarks"]:
                case["stats"].pop("data", None)
        other = doc["benchmarks"][(index + 1) % len(doc["benchmarks"])]
        if index % 6 == 1:  # a warm-up: its row's rounds, statistics and probe trimmed
            other["stats"]["data"] = [2e-5] * 6 + [1e-5] * 10
        elif index % 6 == 3:  # a key of the run's (left out) or of every row's (read as rows are)
            other["extra_info"]["host"] = "not the run's host"
            other["extra_info"]["name"] = "not the case's name"
        (folder / f"{index:04d}.json").write_text(json.dumps(doc, indent=4), encoding="utf-8")
    return folder


def _rows_of(path: Path, samples: load.Samples) -> list[dict[str, object]]:
    """A file's rows made one dict per row (``load._rows``), as ``load_doc`` makes them: what the batches'
    columns (``load._columns``) are held to."""
    name = load.printable(path)
    checked = load.check_run(load._parsed(path, samples), name)
    if checked.run is None:
        return []
    return load.joined_rows(load._shared_columns(checked, name), load._rows(checked))


@pytest.mark.parametrize("samples", [True, False])
def test_batched_frame_equals_the_frame_of_one_dict_per_row(many_runs: Path, samples: bool) -> None:
    files = sorted(many_runs.glob("*.json"))
    rows = [row for path in files for row in _rows_of(path, samples)]
    expected = load._frame(rows)
    frame = load_runs([many_runs], samples=samples).frame
    assert list(frame.columns) == list(expected.columns)
    assert "note" in frame.columns
    assert (frame["steady"] == "warm-up").any() == samples  # rounds are classified only where read
    assert not {"not the run's host", "not the case's name"} & {*frame["host"], *frame["name"]}
    for column in expected.columns:
        assert frame[column].dtype == expected[column].dtype, column
        wrong = [(a, b) for a, b in zip(frame[column], expected[column], strict=True) if not _same(a, b)]
        assert not wrong, (column, wrong[:3])


def test_samples_of_the_picked_cases_only(many_runs: Path) -> None:
    full = load_runs([many_runs], samples=True).frame
    picked = load_runs([many_runs], samples=uses_samples).frame
    assert len(full) == len(picked)
    sampled = 0
    for case, every, some in zip(full["case"], full["data"], picked["data"], strict=True):
        if case in SAMPLED_CASES:
            assert _same(every, some)
            sampled += every is not None
        else:
            assert some is None
    assert sampled > 100


@pytest.mark.parametrize("samples", [False, uses_samples], ids=["none", "picked"])
def test_samples_cut_out_before_parsing_or_dropped_after_give_the_same_rows(
    many_runs: Path, samples: load.Samples, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Raw samples a load does not ask for are cut out of a file's text before it is parsed where its lists
    are long (``_CUT_MIN_BYTES`` a list), else dropped once it is parsed whole: the same rows either way."""
    files = sorted(many_runs.glob("*.json"))

    def rows() -> list[dict[str, object]]:
        return [row for path in files for row in _rows_of(path, samples)]

    cut_out = []
    without_samples = load._without_samples
    monkeypatch.setattr(load, "_without_samples", lambda raw: cut_out.append(raw) or without_samples(raw))
    monkeypatch.setattr(load, "_CUT_MIN_BYTES", 2**40)
    dropped = rows()
    assert cut_out == []
    monkeypatch.setattr(load, "_CUT_MIN_BYTES", 0)
    cut = rows()
    assert len(cut_out) == sum(load._SAMPLES_KEY in path.read_bytes() for path in files) > 0
    assert len(cut) == len(dropped)
    for one, other in zip(cut, dropped, strict=True):
        assert one.keys() == other.keys()
        assert all(_same(one[key], other[key]) for key in one), one["fullname"]
    if samples is False:
        assert all(row["data"] is None for row in cut)


def test_a_quick_run_of_today_is_parsed_whole_and_a_run_of_long_sample_lists_is_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where cutting raw samples out pays (``_CUT_MIN_BYTES``): not for today's quick run (67 short lists),
    yes for a run whose lists hold thousands of samples each."""
    cut_out: list[bytes] = []
    without_samples = load._without_samples
    monkeypatch.setattr(load, "_without_samples", lambda raw: cut_out.append(raw) or without_samples(raw))
    quick = DATA / "sentinel-epyc" / "quiet-quick-01.json"
    assert load._parsed(quick, uses_samples) == json.loads(quick.read_bytes())  # every list wanted
    assert cut_out == []
    doc = json.loads(quick.read_bytes())
    for bench in doc["benchmarks"]:
        bench["stats"]["data"] = [1e-3] * 20_000
    raw = json.dumps(doc).encode()
    assert load._SAMPLES_KEY in raw
    parsed = load._parsed(_written(tmp_path / "long.json", raw), samples=False)
    assert cut_out == [raw]
    assert all(bench["stats"]["data"] is None for bench in parsed["benchmarks"])


def test_orjson_and_json_read_a_run_alike() -> None:
    raw = RUNS[0].read_bytes()
    assert load._parsed(RUNS[0], samples=True) == json.loads(raw)
    cut = json.loads(raw)
    for bench in cut["benchmarks"]:
        bench["stats"]["data"] = None
    assert load._parsed(RUNS[0], samples=False) == cut


def test_what_orjson_refuses_json_reads_or_words(tmp_path: Path) -> None:
    doc = json.loads(RUNS[0].read_text(encoding="utf-8"))
    doc["benchmarks"][0]["stats"]["stddev"] = math.nan  # json writes NaN, which is not JSON
    nan = _written(tmp_path / "nan.json", json.dumps(doc).encode())
    assert math.isnan(load._parsed(nan, samples=False)["benchmarks"][0]["stats"]["stddev"])
    bom = _written(tmp_path / "bom.json", b"\xef\xbb\xbf" + RUNS[0].read_bytes())  # a byte-order mark
    assert load._parsed(bom, samples=True) == json.loads(RUNS[0].read_bytes())
    problem = load.read_run(_written(tmp_path / "cut.json", b'{"benchmarks": [1, 2'), samples=False)
    assert problem.endswith("ends early (truncated?): Expecting ',' delimiter at line 1 column 21")


def _written(path: Path, raw: bytes) -> Path:
    path.write_bytes(raw)
    return path


def test_workers_start_from_a_fork_server_once_a_threaded_runtime_is_loaded(monkeypatch) -> None:
    """Forking after JAX or PyTorch started their threads may deadlock the child: the pool avoids it."""
    import sys
    import types

    from analysis import load

    monkeypatch.delitem(sys.modules, "jax", raising=False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert load.pool_context() is None
    monkeypatch.setitem(sys.modules, "jax", types.ModuleType("jax"))
    assert load.pool_context().get_start_method() == "forkserver"


def _killed_by_sigkill(paths: list[Path], *args: object) -> None:
    """A loading worker's batch that ends its own process as ``kill -KILL`` would."""
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="workers start only with 2 or more CPUs")
def test_a_worker_lost_is_named_with_its_signal_once_the_pool_has_broken() -> None:
    """The pool forgets its workers once it sees one die (BrokenProcessPool); the line still names the
    worker and its signal, from the workers kept when they started (CI once printed neither)."""
    files = [Path(f"/nonexistent/{i}.json") for i in range(PARALLEL_MIN_FILES)]
    for _ in range(3):
        with pytest.raises(load.WorkerLost) as lost:
            load.map_batches(_killed_by_sigkill, files)
        assert "ended by SIGKILL" in str(lost.value)


def test_a_batch_travels_with_its_raw_samples_joined_and_arrives_as_it_left() -> None:
    """A worker's batch is pickled with its raw samples as one array (``_JoinedSamples``) and unpickled into
    the column it was: arrays (empty ones too) of the same values and dtype, None and NaN in their rows; a
    column holding anything else travels as it is."""
    import pickle

    rows = [np.array([1e-6, 2e-6]), None, math.nan, np.zeros(0), np.array([3e-6])]
    batch = load._Batch(columns={"data": rows, "n": np.arange(5)}, runs=[], problems=[], used=[])
    state = batch.__getstate__()
    assert isinstance(state["columns"]["data"], load._JoinedSamples)
    back = pickle.loads(pickle.dumps(batch))
    assert np.array_equal(back.columns["n"], np.arange(5))
    assert [_same(x, y) for x, y in zip(back.columns["data"], rows, strict=True)] == [True] * 5
    assert all(x.dtype == np.float64 for x in back.columns["data"] if isinstance(x, np.ndarray))
    odd = [np.arange(3), None]  # int64 samples: not joined
    assert load._joined_samples(odd) is None
    kept = pickle.loads(pickle.dumps(load._Batch(columns={"data": odd}, runs=[], problems=[], used=[])))
    assert kept.columns["data"][1] is None and kept.columns["data"][0].dtype == np.int64


def test_a_pool_broken_while_its_calls_are_submitted_fails_the_rest_alike(monkeypatch) -> None:
    """A worker that dies while the command still submits calls (the first call kills it at once) breaks
    the pool mid-way: ``start_workers`` returns every call's future, the rest failed with the pool's
    ``BrokenProcessPool``, so that the caller's wait names the lost worker instead of raising from submit."""
    submitted = []
    real = load.ProcessPoolExecutor.submit

    def breaking(pool, function, *args):
        if len(submitted) == 2:
            raise BrokenProcessPool("a child process terminated abruptly")
        submitted.append(function)
        return real(pool, function, *args)

    monkeypatch.setattr(load.ProcessPoolExecutor, "submit", breaking)
    pool, futures = load.start_workers(2, load.pool_context(), [(math.sqrt, (float(x),)) for x in range(5)])
    try:
        assert len(futures) == 5
        assert [future.result(timeout=30) for future in futures[:2]] == [0.0, 1.0]
        for future in futures[2:]:
            assert isinstance(future.exception(timeout=0), BrokenProcessPool)
    finally:
        load.stop_workers(pool)
