"""The CPU suite end to end (pytest runs of the real benchmark modules) and its analysis on synthetic frames.

Correctness only: what is printed and saved, never how fast anything ran.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.fit import CI_NOT_ASKED
from analysis.host import (
    BASIS_LAW,
    BASIS_WHOLE,
    HOST_COLUMNS,
    PREDICTION_COLUMNS,
    fit_host,
    predict_many_vs_one,
)
from analysis.summary import host_section as summary_section
from analysis.summary import summary_lines
from benchmarks.records import CONTRACT, SUITE
from benchmarks.test_numpy_calls import calls_per_round, case_id
from model.laws import fixed_overhead_time

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
NUMPY_CALLS = str(REPO / "benchmarks" / "test_numpy_calls.py")
SUMMARY_HEADER = "launchbench summary"
#: Small in-cache sizes and one many-vs-one case: enough for the law, a fraction of a second to measure.
TINY_SIZES = (1, 16, 256, 4096, 65536)
TINY_SUBSET = f"({' or '.join(case_id(n) for n in TINY_SIZES)}) or (many_vs_one and pieces16])"
TINY_CASES = 7  # five sizes, 16 pieces as views and as slices


@pytest.mark.parametrize("mode", ["--benchmark-disable", "--benchmark-skip"])
def test_no_summary_when_nothing_was_measured(pytester: pytest.Pytester, mode: str) -> None:
    result = pytester.runpytest_subprocess(
        NUMPY_CALLS, "--quick", mode, "-k", TINY_SUBSET, "-p", "no:cacheprovider"
    )
    if mode == "--benchmark-disable":
        result.assert_outcomes(passed=TINY_CASES)
    else:
        result.assert_outcomes(skipped=TINY_CASES)
    assert SUMMARY_HEADER not in result.stdout.str()


#: A plugin that writes, at the session's very end, which of the costly imports the session made.
IMPORTS_PLUGIN = """
import json, sys
def pytest_unconfigure(config):
    names = ("hypothesis", "scipy.special", "scipy.stats")
    with open("imported.json", "w") as out:
        json.dump([name for name in names if name in sys.modules], out)
"""


def test_a_measured_run_prints_the_summary_and_saves_the_contract(pytester: pytest.Pytester) -> None:
    """...and imports neither Hypothesis (its plugin's end-of-session search for failing examples) nor
    SciPy's special functions or statistics: the summary needs none, and each costs 0.3–0.8 s to import."""
    saved = pytester.path / "run.json"
    pytester.makepyfile(imports_seen=IMPORTS_PLUGIN)
    result = pytester.runpytest_subprocess(
        "-p",
        "imports_seen",
        NUMPY_CALLS,
        "--quick",
        "--benchmark-only",
        "--benchmark-min-time=0.00001",
        "--benchmark-max-time=0.001",
        f"--benchmark-json={saved}",
        "-k",
        TINY_SUBSET,
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=TINY_CASES)
    out = result.stdout.str()
    assert SUMMARY_HEADER in out
    assert "CPU: numpy per-call cost and host bandwidth" in out
    # Whether the law fits depends on timing; that the section reports one outcome or the other does not.
    assert "t0, fixed cost per call" in out or "fixed-overhead law not fitted" in out

    doc = json.loads(saved.read_text())
    info = doc["machine_info"][SUITE]
    assert {"machine_id", "cpu_model", "logical_cpus", "llc_bytes", "numpy", "blas", "env", "gpu"} <= set(
        info
    )
    benches = doc["benchmarks"]
    assert len(benches) == TINY_CASES
    for bench in benches:
        extra = bench["extra_info"]
        assert set(extra) <= {"suite", "case", "device", *CONTRACT}
        assert extra["suite"] == SUITE
        assert extra["device"] == "cpu"
        assert extra["op"] == "np.add"
        assert extra["dtype"] == "float32"
        assert extra["bytes"] == 8 * extra["n"] * extra["n_calls"]  # float32: read a, write o, every call
        assert extra["flops"] == extra["n"] * extra["n_calls"]
        if extra["case"] == "many_vs_one":
            assert extra["n"] == 262_144 // 16
            assert extra["n_calls"] == extra["pieces"] == 16
            assert extra["variant"] in ("views", "slices")
        else:
            assert extra["case"] == "ufunc_size"
            assert extra["n_calls"] == calls_per_round(extra["n"])
            assert "pieces" not in extra  # absent, not 0
        assert bench["stats"]["median"] > 0
    assert {
        bench["extra_info"]["n"] for bench in benches if bench["extra_info"]["case"] == "ufunc_size"
    } == set(TINY_SIZES)
    assert json.loads((pytester.path / "imported.json").read_text()) == []


# --- analysis.host on synthetic frames ---

T0_S = 5e-7
CACHE_S_PER_ELEMENT = 2.5e-10
DRAM_S_PER_ELEMENT = 9e-10
CORE_CACHE = 2 * 2**20
LLC = 32 * 2**20
MACHINE = "box / Fast CPU / no GPU"


def _row(case: str, fastest: float, **coords: object) -> dict[str, object]:
    """One frame row as ``analysis.load`` makes it: 51 raw samples, the fastest ``fastest`` s, the rest slower
    (as other work on a machine makes them)."""
    data = fastest * (1 + np.random.default_rng(int(coords["n"])).exponential(0.05, 51))
    data[0] = fastest
    return {
        "machine_id": MACHINE,
        "core_cache_bytes": CORE_CACHE,
        "llc_bytes": LLC,
        "suite": SUITE,
        "case": case,
        "device": "cpu",
        "min": fastest,
        "median": float(np.median(data)),
        "data": data,
        **coords,
    }


def _frame() -> pd.DataFrame:
    """A run as the law says: in-cache sizes up to 2 MiB, a DRAM size past 2 × LLC, many-vs-one, STREAM."""
    rows = []
    for n in (4**k for k in range(10)):  # small sizes time 64 calls per timed call, as the suite does
        calls = 64 if n <= 1024 else 1
        per_call = float(fixed_overhead_time(n, T0_S, 1 / CACHE_S_PER_ELEMENT))
        rows.append(
            _row("ufunc_size", calls * per_call, n=n, n_calls=calls, bytes=8 * n * calls, op="np.add")
        )
    rows.append(_row("ufunc_size", 1.0, n=4**11, n_calls=1, bytes=8 * 4**11, op="np.add"))  # between: unused
    rows.append(
        _row(
            "ufunc_size", T0_S + DRAM_S_PER_ELEMENT * 2**24, n=2**24, n_calls=1, bytes=8 * 2**24, op="np.add"
        )
    )
    for pieces in (1, 16, 128):
        n = 262_144 // pieces
        per_call = float(fixed_overhead_time(n, T0_S, 1 / CACHE_S_PER_ELEMENT))
        for variant, extra_s in (("views", 0.0), ("slices", 2e-7)):
            rows.append(
                _row("many_vs_one", pieces * (per_call + extra_s), n=n, n_calls=pieces, pieces=pieces,
                     variant=variant, bytes=8 * 262_144, op="np.add")
            )  # fmt: skip
    rows.append(_row("host_bandwidth", 0.1, n=2**25, bytes=2 * 10**9, op="copy"))
    rows.append(_row("host_bandwidth", 0.2, n=2**25, bytes=3 * 10**9, op="triad"))
    rows.append(_row("host_bandwidth", 0.04, n=2**25, bytes=10**9, op="read", dtype="float32"))
    return pd.DataFrame(rows)


def test_fit_host_recovers_the_law_the_dram_cost_and_the_bandwidth() -> None:
    fits = fit_host(_frame())
    assert list(fits.columns) == list(HOST_COLUMNS)
    assert len(fits) == 1
    fit = fits.iloc[0]
    assert fit["fit_error"] is None
    assert fit["t0_s"] == pytest.approx(T0_S, rel=1e-6)
    assert fit["cache_s_per_element"] == pytest.approx(CACHE_S_PER_ELEMENT, rel=1e-6)
    assert fit["t0_low_s"] <= T0_S <= fit["t0_high_s"]
    assert fit["n_half"] == pytest.approx(T0_S / CACHE_S_PER_ELEMENT, rel=1e-6)
    assert fit["cache_sizes"] == tuple(4**k for k in range(10))  # working set ≤ 2 MiB core cache
    assert fit["dram_sizes"] == (2**24,)  # 128 MiB ≥ 2 × 32 MiB LLC; 4^11's 32 MiB is in neither
    assert fit["dram_s_per_element"] == pytest.approx(DRAM_S_PER_ELEMENT, rel=1e-6)
    assert fit["copy_bytes_per_s"] == pytest.approx(2e10)
    assert fit["triad_bytes_per_s"] == pytest.approx(1.5e10)
    assert fit["read_bytes_per_s"] == pytest.approx(2.5e10)


def test_a_fit_without_intervals_has_the_same_estimates_and_no_interval() -> None:
    """``intervals=False`` (the per-run fits a verdict reads, ``analysis.compare``) skips the bootstrap only:
    every estimate is the fit's with intervals, bit for bit, every interval NaN, no replicate drawn."""
    full = fit_host(_frame()).iloc[0]
    bare = fit_host(_frame(), intervals=False).iloc[0]
    estimates = {
        "t0_s": ("t0_low_s", "t0_high_s"),
        "cache_s_per_element": ("cache_s_per_element_low", "cache_s_per_element_high"),
        "r_inf_per_s": ("r_inf_low_per_s", "r_inf_high_per_s"),
        "n_half": ("n_half_low", "n_half_high"),
    }
    for column, bounds in estimates.items():
        assert bare[column] == full[column], column
        for name in bounds:
            assert math.isnan(bare[name]) and math.isfinite(full[name]), name
    for column in (
        "dram_s_per_element",
        "copy_bytes_per_s",
        "triad_bytes_per_s",
        "read_bytes_per_s",
        "cache_sizes",
    ):
        assert bare[column] == full[column], column
    assert (bare["n_boot"], bare["ci_method"]) == (0, CI_NOT_ASKED)
    assert full["n_boot"] > 0


def test_many_vs_one_prediction_is_pieces_times_the_law() -> None:
    frame = _frame()
    predictions = predict_many_vs_one(frame, fit_host(frame))
    assert list(predictions.columns) == list(PREDICTION_COLUMNS)
    assert len(predictions) == 6
    views = predictions[predictions["variant"] == "views"]
    assert np.allclose(views["rel_error"], 0, atol=1e-6)  # the views cost what the law says
    slices = predictions[predictions["variant"] == "slices"].set_index("pieces")
    # the slices pay 200 ns more per piece, which the law does not know about
    assert np.allclose(slices["rel_error"], -(slices.index * 2e-7) / slices["measured_s"], rtol=1e-5)
    assert list(slices["predicted_s"]) == pytest.approx(list(views["predicted_s"]))


def test_many_vs_one_takes_the_per_element_rate_where_all_n_elements_live() -> None:
    """When one call on all N elements is slower per element than the in-cache law (its data sits in a
    slower cache), the pieces pay that too: predicted = t(N) + (pieces − 1)·t0."""
    frame = _frame()
    whole = (frame["case"] == "ufunc_size") & (frame["n"] == 262_144)
    slower_s = 2 * float(frame.loc[whole, "min"].iloc[0])
    frame.loc[whole, ["min", "median"]] = slower_s
    fits = fit_host(frame)
    t0_s = fits.iloc[0]["t0_s"]  # the law's fit sees the slower point too
    predictions = predict_many_vs_one(frame, fits).set_index(["variant", "pieces"])
    assert set(predictions["basis"]) == {BASIS_WHOLE}
    for pieces in (1, 16, 128):
        assert predictions.loc[("views", pieces), "predicted_s"] == pytest.approx(
            slower_s + (pieces - 1) * t0_s
        )


def test_many_vs_one_falls_back_to_the_law_without_a_call_on_all_n_elements() -> None:
    frame = _frame()
    frame = frame[~((frame["case"] == "ufunc_size") & (frame["n"] == 262_144))]
    predictions = predict_many_vs_one(frame, fit_host(frame))
    assert set(predictions["basis"]) == {BASIS_LAW}
    views = predictions[predictions["variant"] == "views"]
    assert np.allclose(views["rel_error"], 0, atol=1e-6)


def test_summary_section_reports_every_figure() -> None:
    lines = summary_section(_frame())
    text = "\n".join(lines)
    assert lines[0] == f"CPU: numpy per-call cost and host bandwidth — {MACHINE}"
    assert "t0, fixed cost per call" in text
    assert "500 ns" in text  # t0 through model.units
    assert "per element, in cache" in text
    assert "per element, from DRAM" in text
    assert "n½ = t0·r∞" in text
    assert "copy 20.0 GB/s, triad 15.0 GB/s" in text
    assert "read bandwidth (BLAS)    25.0 GB/s" in text
    assert "many small vs one big" in text
    summary = summary_lines(_frame())
    assert summary[-len(lines) :] == lines  # registered in analysis.summary
    # a frame built here, not by the loader, has no steady-state classes (``analysis.steady``): said so
    assert [line.split(" (")[0] for line in summary[: -len(lines)]] == [
        "Steady state: 21 case measurements not classified"
    ]


def test_summary_section_is_empty_without_cpu_cases() -> None:
    other_family = pd.DataFrame(
        [{"machine_id": MACHINE, "suite": SUITE, "case": "launch_batch", "device": "cuda", "median": 1e-3}]
    )
    assert summary_section(other_family) == []
    assert summary_section(_frame().iloc[0:0]) == []
    assert summary_section(pd.DataFrame()) == []


def test_unknown_cache_sizes_say_why_there_is_no_law() -> None:
    frame = _frame().assign(core_cache_bytes=None, llc_bytes=None)
    fit = fit_host(frame).iloc[0]
    assert "cache sizes unknown" in fit["fit_error"]
    assert math.isnan(fit["t0_s"])
    assert fit["copy_bytes_per_s"] == pytest.approx(2e10)  # bandwidth needs no cache sizes
    assert predict_many_vs_one(frame, fit_host(frame)).empty
    assert any(
        "fixed-overhead law not fitted: cache sizes unknown" in line for line in summary_section(frame)
    )
