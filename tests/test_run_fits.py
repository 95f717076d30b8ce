"""``analysis.run_fits``: every run's CPU laws at once give ``fit_host(frame, intervals=False)``'s and
``fit_calls(frame, intervals=False)``'s estimates bit for bit, NaN where they give NaN, and raise where they
raise: on the committed runs, on fleets fanned out from them (with and without raw samples), per run and
per machine, and on frames that take ``fit_host``'s rarer paths (a size that is not finite, raw samples
that are not, cache sizes unknown, too few points or sizes, a law that does not separate t0, no CPU row).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.compare import UNREAD_COLUMNS, wide_calls
from analysis.fits import uses_samples
from analysis.frameworks import fit_calls
from analysis.host import fit_host
from analysis.load import load_runs
from analysis.run_fits import ESTIMATE_COLUMNS, call_estimates, host_estimates

ROOT = Path(__file__).parent.parent
DATA = ROOT / "tests" / "data"
#: Today's layout of a quick run (the JAX, numpy and torch callers of ``framework_call``) and a full run.
QUICK_RUN = DATA / "sentinel" / "quiet-quick-1.json"
FULL_RUN = DATA / "runs-xeon" / "xeon-2core-full-1.json"


def _by_run(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run its own group, as ``analysis.compare``'s per-run fits have it."""
    return frame.assign(machine_id=frame["source"].astype(str))


def _host_expected(frame: pd.DataFrame) -> pd.DataFrame:
    return fit_host(frame, intervals=False).set_index("machine_id")[list(ESTIMATE_COLUMNS)].astype(float)


def _calls_expected(frame: pd.DataFrame) -> pd.DataFrame:
    wide = wide_calls(fit_calls(frame, intervals=False)).set_index("machine_id")
    return wide[[column for column in wide.columns if not column.endswith(("_low", "_high"))]]


def _assert_same(frame: pd.DataFrame) -> None:
    """Both fits of ``frame`` as it is and of each of its runs alone: the same numbers, bit for bit."""
    for grouped in (frame, _by_run(frame)):
        got, expected = host_estimates(grouped), _host_expected(grouped)
        pd.testing.assert_frame_equal(
            got, expected, check_exact=True, check_names=False, check_index_type=False
        )
        calls, expected_calls = call_estimates(grouped), _calls_expected(grouped)
        if expected_calls.empty:
            assert calls.empty
            continue
        pd.testing.assert_frame_equal(
            calls[sorted(calls.columns)],
            expected_calls[sorted(expected_calls.columns)],
            check_exact=True,
            check_index_type=False,
        )


@pytest.fixture(scope="module")
def committed() -> pd.DataFrame:
    """Every committed run, with the raw samples a comparison parses."""
    return load_runs([DATA], samples=uses_samples).frame


def _fanout(source: Path, out: Path, machines: int, copies: int, data: bool) -> Path:
    """``tools/fanout_runs.py``: ``copies`` perturbed copies of ``source`` over ``machines`` machine ids."""
    spec = importlib.util.spec_from_file_location("fanout_runs", ROOT / "tools" / "fanout_runs.py")
    fanout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fanout)
    args = [str(source), str(out), "--copies", str(copies), "--machines", str(machines)]
    assert fanout.main(args if data else [*args, "--no-data"]) == 0
    return out


def test_the_committed_runs_fit_alike_per_run_and_per_machine(committed: pd.DataFrame) -> None:
    assert committed["source"].nunique() > 30
    _assert_same(committed)
    fitted = host_estimates(_by_run(committed))
    assert fitted["t0_s"].notna().sum() > 30  # the laws were fitted, not NaN alike


@pytest.mark.parametrize(("source", "data"), [(QUICK_RUN, True), (QUICK_RUN, False), (FULL_RUN, False)])
def test_fanned_out_fleets_fit_alike(tmp_path: Path, source: Path, data: bool) -> None:
    fleet = _fanout(source, tmp_path / "fleet", machines=3, copies=24, data=data)
    frame = load_runs([fleet], samples=uses_samples).frame
    assert frame["data"].notna().any() == data
    _assert_same(frame)
    # as ``compare`` loads them: text columns categorical, the columns it never reads left out
    _assert_same(load_runs([fleet], samples=uses_samples, categorical=True, unread=UNREAD_COLUMNS).frame)
    assert call_estimates(_by_run(frame)).notna().all().all()


def _run(committed: pd.DataFrame, copies: int = 4) -> pd.DataFrame:
    """``copies`` runs of the quick layout, each its own source (they are edited one by one below)."""
    one = committed[committed["source"] == str(QUICK_RUN.relative_to(ROOT))]
    if one.empty:
        one = committed[committed["source"].str.endswith(QUICK_RUN.name)]
    assert not one.empty
    parts = [one.assign(source=f"run-{index}", machine_id=f"machine-{index % 2}") for index in range(copies)]
    return pd.concat(parts, ignore_index=True)


def _edit(frame: pd.DataFrame, source: str, case: str, column: str, values: object, at: int = 0) -> None:
    """Set ``column`` of the ``at``-th ``case`` row of run ``source`` (or of all of them: ``at`` None)."""
    rows = frame.index[(frame["source"] == source) & (frame["case"] == case)]
    rows = rows if at is None else rows[at : at + 1]
    for row in rows:
        frame.at[row, column] = values


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # fit_host's, at t = 1e-200 s
def test_rarer_paths_fit_alike(committed: pd.DataFrame) -> None:
    frame = _run(committed, copies=12)
    frame["data"] = frame["data"].astype(object)
    _edit(frame, "run-0", "ufunc_size", "n", math.inf)  # a size that is not finite: fit_host's own path
    _edit(frame, "run-1", "ufunc_size", "data", [1e-5, math.nan, 2e-5])  # samples that are not finite
    _edit(frame, "run-2", "ufunc_size", "data", [[1e-5, 2e-5]])  # samples that are not 1-D
    _edit(frame, "run-3", "ufunc_size", "data", None, at=2)  # one point without samples: none checked
    frame.loc[frame["source"] == "run-4", "core_cache_bytes"] = math.nan  # cache sizes unknown
    _edit(frame, "run-5", "ufunc_size", "n", 1.0, at=None)  # one size only
    # t0 < 0: the smallest sizes far faster than the law through the others
    _edit(frame, "run-6", "ufunc_size", "min", 1e-9, at=0)
    _edit(frame, "run-6", "ufunc_size", "min", 1e-9, at=1)
    _edit(frame, "run-7", "ufunc_size", "min", 1e-200, at=3)  # a weight 1/t² that is not finite
    _edit(frame, "run-8", "ufunc_size", "min", math.nan, at=4)  # a point set aside
    _edit(frame, "run-8", "host_bandwidth", "min", math.nan, at=0)  # an even count of rates: the mean of two
    _edit(frame, "run-9", "ufunc_size", "min", -1.0, at=None)  # no usable point
    frame = frame[~((frame["source"] == "run-10") & (frame["case"] == "ufunc_size") & (frame["n"] > 1))]
    _assert_same(frame)
    fitted = host_estimates(_by_run(frame))
    assert fitted.loc["run-3", "t0_s"] > 0 and math.isnan(fitted.loc["run-4", "t0_s"])
    assert fitted.loc["run-4", "copy_bytes_per_s"] > 0


def test_samples_that_cannot_be_read_raise_as_fit_host_does(committed: pd.DataFrame) -> None:
    """A sample that is not a number, even at a size no law reads: ``fit_host`` raises, and so does this."""
    frame = _run(committed)
    frame["data"] = frame["data"].astype(object)
    between = frame.index[
        (frame["source"] == "run-1") & (frame["case"] == "ufunc_size") & (frame["n"] == 1048576)
    ]
    assert len(between) == 1
    frame.at[between[0], "data"] = ["not a number"]
    with pytest.raises(ValueError) as expected:
        fit_host(_by_run(frame), intervals=False)
    with pytest.raises(ValueError) as got:
        host_estimates(_by_run(frame))
    assert str(got.value) == str(expected.value)


def test_frames_without_cpu_rows_give_empty_tables(committed: pd.DataFrame) -> None:
    gpu_only = committed[committed["case"] == "decode_step"].assign(device="cuda")
    for frame in (gpu_only, committed.iloc[0:0]):
        assert host_estimates(frame).empty and fit_host(frame, intervals=False).empty
        assert call_estimates(frame).empty and fit_calls(frame, intervals=False).empty
    assert list(host_estimates(gpu_only).columns) == list(ESTIMATE_COLUMNS)


def test_callers_with_threads_keep_their_columns(committed: pd.DataFrame) -> None:
    """torch's callers with one and two intra-op threads are two columns, as ``wide_calls`` names them."""
    calls = call_estimates(_by_run(committed))
    assert {"t0_s numpy", "t0_s torch (1 thread)", "t0_s torch (2 threads)"} <= set(calls.columns)
    assert np.isfinite(calls["t0_s numpy"]).any()
