"""The CPU family: per-call cost of numpy, many small calls against one big, and host memory bandwidth.

From a frame of ``analysis.load`` (one or several runs), per ``machine_id``:

- ``fit_host``: the fixed-overhead law t(n) = t0 + n/r∞ fitted to ``ufunc_size`` at sizes whose working set
  fits the core's own cache (``core_cache_bytes``), the per-element cost at sizes at least twice the
  last-level cache (``llc_bytes``, i.e. from DRAM), the STREAM copy/triad bandwidth and the read-only
  bandwidth of BLAS's matrix-vector product (``read``);
- ``predict_many_vs_one``: what that law predicts for ``many_vs_one`` beside what was measured.

Its terminal lines are ``analysis.summary``'s (``host_section``): this module computes, the one above it
writes text.

Sizes between the two cache limits are left out of both fits: there the cost per element moves from the
cache's to DRAM's (on VMs even below the reported last-level cache, which the machine shares with others).
pytest-benchmark's figures are per timed call; ``ufunc_size`` times ``n_calls`` numpy calls per timed call
and ``per_numpy_call`` divides by it, the one place this family divides. ``many_vs_one`` stays a whole
timed call (``pieces`` calls of ``n`` elements), held against t(N) + (pieces − 1)·t0 (see
``predict_many_vs_one``); ``host_bandwidth`` is one call.

Each point is the fastest round (``min``): other work on the machine only ever adds time, and on a shared or
small machine it shifts medians by tens of percent (a 2-vCPU VM showed 420 ns and 800 ns modes for one
call). The minimum is what ``python -m timeit`` ("best of 5") and STREAM ("best rate") report too, so the
figures compare with theirs; the bootstrap redraws it from the raw samples.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.fit import DEFAULT_LEVEL, OverheadFit, PerElementFit, fit_fixed_overhead, fit_per_element
from model.laws import fixed_overhead_time
from model.units import fmt_count

#: A size counts as served from DRAM when its working set is at least this many times the last-level cache.
DRAM_LLC_FACTOR = 2
#: The per-point statistic (a pytest-benchmark stats column, seconds per call): see the module docstring.
STATISTIC = "min"
#: The ``host_bandwidth`` ops: STREAM copy and triad, and the read-only stream through BLAS.
BANDWIDTH_OPS = ("copy", "triad", "read")

HOST_COLUMNS = (
    "machine_id",
    "t0_s",
    "t0_low_s",
    "t0_high_s",
    "cache_s_per_element",
    "cache_s_per_element_low",
    "cache_s_per_element_high",
    "r_inf_per_s",
    "r_inf_low_per_s",
    "r_inf_high_per_s",
    "n_half",
    "n_half_low",
    "n_half_high",
    "cache_sizes",
    "cache_points",
    "dram_s_per_element",
    "dram_s_per_element_low",
    "dram_s_per_element_high",
    "dram_sizes",
    "dram_points",
    "copy_bytes_per_s",
    "triad_bytes_per_s",
    "read_bytes_per_s",
    "core_cache_bytes",
    "llc_bytes",
    "ci_method",
    "level",
    "fit_error",
    "set_aside",
    "n_outside_law",
    "n_boot",
)

PREDICTION_COLUMNS = (
    "machine_id",
    "variant",
    "pieces",
    "n",
    "measured_s",
    "predicted_s",
    "rel_error",
    "basis",
)
#: How ``predict_many_vs_one`` predicted a case: from one call on all N elements plus t0 per extra call, or,
#: where N was not measured, from the in-cache law alone.
BASIS_WHOLE = "t(N) + (pieces-1)·t0"
BASIS_LAW = "pieces·(t0 + n/r∞)"


def fit_host(frame: pd.DataFrame, level: float = DEFAULT_LEVEL, intervals: bool = True) -> pd.DataFrame:
    """Return one row per machine with CPU cases in ``frame``: ``HOST_COLUMNS``.

    Seconds (``t0_s``, ``*_s_per_element``), elements per second (``r_inf*``), elements (``n_half*``), B/s
    (bandwidths), bytes (caches). ``*_low``/``*_high`` bound the ``level`` confidence interval;
    ``cache_sizes``/``dram_sizes`` list the n each figure was fitted on. A figure that cannot be had is NaN
    (no such cases, cache sizes unknown), and ``fit_error`` says why the law could not be fitted, else None.
    ``intervals``: False leaves the intervals NaN (``analysis.fit.fit_fixed_overhead``'s), for a caller that
    reads the estimates alone: the per-run fits a verdict rests on (``analysis.compare``).
    """
    cpu = _cpu_rows(frame)
    if cpu.empty:
        return pd.DataFrame(columns=list(HOST_COLUMNS))
    columns = _HostColumns.of(cpu)
    grouped = cpu.groupby("machine_id", sort=True, observed=True)
    number = grouped.ngroup().to_numpy()  # -1: no machine id, a row no group holds
    order = np.argsort(number, kind="stable")[np.count_nonzero(number < 0) :]
    counts = np.bincount(number[number >= 0], minlength=grouped.ngroups)
    stops = np.cumsum(counts)
    rows = [
        _host_row(machine_id, columns.take(order[stop - count : stop]), level, intervals)
        for machine_id, count, stop in zip(grouped.size().index, counts, stops, strict=True)
    ]
    return pd.DataFrame(rows, columns=list(HOST_COLUMNS))


def predict_many_vs_one(frame: pd.DataFrame, fits: pd.DataFrame) -> pd.DataFrame:
    """Return ``PREDICTION_COLUMNS``: each ``many_vs_one`` case's measured seconds per timed call (fastest
    round; the median of that over runs where several) beside the fixed-overhead law's prediction, and
    (predicted − measured)/measured. Machines without a law are left out.

    The pieces together stream the whole ``N = pieces · n`` elements, so their data lives where one call on
    ``N`` elements finds it (for 262,144 float32 elements: the core's L2, not the L1 that small sizes fit):
    the prediction is ``pieces · t0 + N / r(N)``, the fitted t0 per call plus the per-element rate measured
    by ``ufunc_size`` at ``N`` (``r(N) = N / (t(N) − t0)``), i.e. ``t(N) + (pieces − 1) · t0``
    (``basis`` "t(N) + (pieces-1)·t0"). Where ``ufunc_size`` did not measure ``N`` it falls back to the
    in-cache law alone, ``pieces · (t0 + n/r∞)`` (``basis`` "pieces·(t0 + n/r∞)").
    """
    cpu = _cpu_rows(frame)
    if cpu.empty or "pieces" not in cpu:
        return pd.DataFrame(columns=list(PREDICTION_COLUMNS))
    many = cpu[cpu["case"] == "many_vs_one"]
    laws = fits.dropna(subset=["t0_s", "r_inf_per_s"]).set_index("machine_id")
    sizes = cpu[cpu["case"] == "ufunc_size"]
    seconds, _, _ = per_numpy_call(sizes)
    one_call = seconds.groupby([sizes["machine_id"], sizes["n"]]).median()
    rows = []
    for (machine_id, variant, pieces, n), cases in many.groupby(
        ["machine_id", "variant", "pieces", "n"], sort=True
    ):
        if machine_id not in laws.index:
            continue
        law = laws.loc[machine_id]
        measured = float(cases[STATISTIC].median())
        total = int(pieces * n)
        if (machine_id, total) in one_call.index:
            predicted = float(one_call[(machine_id, total)] + (pieces - 1) * law["t0_s"])
            basis = BASIS_WHOLE
        else:
            predicted = float(pieces * fixed_overhead_time(n, law["t0_s"], law["r_inf_per_s"]))
            basis = BASIS_LAW
        rows.append(
            {
                "machine_id": machine_id,
                "variant": variant,
                "pieces": int(pieces),
                "n": int(n),
                "measured_s": measured,
                "predicted_s": predicted,
                "rel_error": (predicted - measured) / measured,
                "basis": basis,
            }
        )
    return pd.DataFrame(rows, columns=list(PREDICTION_COLUMNS))


def _cpu_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of this family (``ufunc_size``, ``many_vs_one``, ``host_bandwidth`` on the CPU)."""
    if frame.empty or "case" not in frame or "device" not in frame:
        return frame.iloc[0:0]
    keep = frame["case"].isin(("ufunc_size", "many_vs_one", "host_bandwidth")) & (frame["device"] == "cpu")
    return frame[keep]


def _known(value: object) -> float | None:
    """``value`` as a float, or None when it is missing (None or NaN)."""
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


def per_numpy_call(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series, list[np.ndarray] | None]:
    """Return (seconds, working-set bytes, raw samples or None) per numpy call of ``ufunc_size`` rows.

    The one place this family divides by ``n_calls`` (numpy calls per timed call; runs saved before it was
    recorded timed one call). Samples are None unless every row saved them.
    """
    calls = rows["n_calls"].fillna(1) if "n_calls" in rows else pd.Series(1, index=rows.index)
    seconds = rows[STATISTIC] / calls
    working_set = rows["bytes"] / calls
    data = list(rows["data"]) if "data" in rows else [None]
    if any(values is None or len(values) == 0 for values in data):
        return seconds, working_set, None
    samples = [np.asarray(values, dtype=float) / count for values, count in zip(data, calls, strict=True)]
    return seconds, working_set, samples


def _select(samples: list[np.ndarray] | None, keep: np.ndarray) -> list[np.ndarray] | None:
    """The samples of the rows ``keep`` marks, or None when there are no samples."""
    return None if samples is None else [values for values, kept in zip(samples, keep, strict=True) if kept]


class _HostColumns:
    """The columns of CPU rows that ``_host_row`` reads, as arrays taken from the frame once: a fleet's
    per-run fits are a thousand groups, and selecting each one's cases through pandas cost milliseconds a
    group, most of a first ``compare``'s time. The arithmetic is ``per_numpy_call``'s, on the same values."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.arrays = arrays

    @classmethod
    def of(cls, rows: pd.DataFrame) -> _HostColumns:
        """The arrays of ``rows`` (every column may be missing: a frame built without it)."""

        def numbers(name: str, missing: float = math.nan) -> np.ndarray:
            if name not in rows:
                return np.full(len(rows), missing)
            return pd.to_numeric(rows[name], errors="coerce").to_numpy(dtype=float, na_value=math.nan)

        def values(name: str) -> np.ndarray:
            if name not in rows:
                return np.full(len(rows), None, dtype=object)
            return rows[name].to_numpy(dtype=object)

        calls = numbers("n_calls", 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            calls = np.where(np.isnan(calls), 1.0, calls)
        return cls(
            {
                "case": values("case"),
                "op": values("op"),
                "n": values("n"),
                "n_float": numbers("n"),
                "statistic": numbers(STATISTIC),
                "calls": calls,
                "bytes": numbers("bytes"),
                "data": values("data"),
                "source": rows["source"].to_numpy(dtype=str) if "source" in rows else np.full(len(rows), ""),
                "core_cache_bytes": values("core_cache_bytes"),
                "llc_bytes": values("llc_bytes"),
            }
        )

    def take(self, positions: np.ndarray) -> _HostColumns:
        """The rows at ``positions``, in order."""
        return _HostColumns({name: array[positions] for name, array in self.arrays.items()})

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]


def _host_row(machine_id: str, rows: _HostColumns, level: float, intervals: bool = True) -> dict[str, object]:
    """One ``fit_host`` row: the law, the DRAM cost and the bandwidths of one machine's rows."""
    core_cache = _known(rows["core_cache_bytes"][0])
    llc = _known(rows["llc_bytes"][0])
    row: dict[str, object] = dict.fromkeys(HOST_COLUMNS, math.nan)
    row.update(
        machine_id=machine_id,
        core_cache_bytes=core_cache,
        llc_bytes=llc,
        cache_sizes=(),
        cache_points=0,
        dram_sizes=(),
        dram_points=0,
        ci_method=None,
        level=level,
        fit_error=None,
        set_aside=(),
        n_outside_law=0,
        n_boot=0,
    )
    bandwidths, set_aside = _bandwidths(rows.take(np.flatnonzero(rows["case"] == "host_bandwidth")))
    row.update(bandwidths)
    sizes = rows.take(np.flatnonzero(rows["case"] == "ufunc_size"))
    if sizes["case"].size == 0:
        row["set_aside"] = tuple(set_aside)
        return row
    if core_cache is None or llc is None:
        row["fit_error"] = "cache sizes unknown (run saved without them): cannot tell cache from DRAM sizes"
        return row
    calls, n = sizes["calls"], sizes["n_float"]
    with np.errstate(divide="ignore", invalid="ignore"):
        seconds = sizes["statistic"] / calls
        working_set = sizes["bytes"] / calls
    data = sizes["data"]
    samples = (
        None
        if any(values is None or len(values) == 0 for values in data)
        else [np.asarray(values, dtype=float) / count for values, count in zip(data, calls, strict=True)]
    )
    # ``analysis.load`` drops impossible points; a frame built another way may still hold some.
    usable = np.isfinite(seconds) & (seconds > 0) & np.isfinite(working_set) & (n > 0)
    if not usable.all():
        set_aside.append(f"{int((~usable).sum())} ufunc_size point(s) without a finite time > 0")
    in_cache = usable & (working_set <= core_cache)
    from_dram = usable & (working_set >= DRAM_LLC_FACTOR * llc)
    between = usable & ~in_cache & ~from_dram
    if between.any():
        set_aside.append(
            f"{int(between.sum())} ufunc_size point(s) between the core cache and {DRAM_LLC_FACTOR} × LLC "
            "(n = " + ", ".join(fmt_count(n) for n in sorted(set(sizes["n"][between]))) + ")"
        )
    row["set_aside"] = tuple(set_aside)
    # the run each point came from: intervals resample runs, where there are two or more (``analysis.fit``)
    runs = sizes["source"]
    try:
        law = fit_fixed_overhead(
            n[in_cache],
            seconds[in_cache],
            _select(samples, in_cache),
            statistic=STATISTIC,
            runs=runs[in_cache],
            level=level,
            intervals=intervals,
        )
    except ValueError as error:
        row["fit_error"] = f"fixed-overhead law on {in_cache.sum()} in-cache points: {error}"
        return row
    row.update(_law_columns(law))
    if from_dram.any():
        dram = fit_per_element(
            n[from_dram],
            seconds[from_dram],
            law.t0_s,
            _select(samples, from_dram),
            statistic=STATISTIC,
            runs=runs[from_dram],
            level=level,
            intervals=intervals,
        )
        row.update(_dram_columns(dram))
    return row


def _law_columns(law: OverheadFit) -> dict[str, object]:
    return {
        "t0_s": law.t0_s,
        "t0_low_s": law.t0_ci.low,
        "t0_high_s": law.t0_ci.high,
        "cache_s_per_element": law.s_per_element,
        "cache_s_per_element_low": law.s_per_element_ci.low,
        "cache_s_per_element_high": law.s_per_element_ci.high,
        "r_inf_per_s": law.r_inf_per_s,
        "r_inf_low_per_s": law.r_inf_ci.low,
        "r_inf_high_per_s": law.r_inf_ci.high,
        "n_half": law.n_half,
        "n_half_low": law.n_half_ci.low,
        "n_half_high": law.n_half_ci.high,
        "cache_sizes": law.sizes,
        "cache_points": law.n_points,
        "ci_method": law.ci_method,
        "n_outside_law": law.n_outside_law,
        "n_boot": law.n_boot,
    }


def _dram_columns(fit: PerElementFit) -> dict[str, object]:
    return {
        "dram_s_per_element": fit.s_per_element,
        "dram_s_per_element_low": fit.ci.low,
        "dram_s_per_element_high": fit.ci.high,
        "dram_sizes": fit.sizes,
        "dram_points": fit.n_points,
    }


def _bandwidths(rows: _HostColumns) -> tuple[dict[str, float], list[str]]:
    """Bandwidth per op (copy, triad, read), B/s: bytes moved per call over the fastest call (median over
    runs); and the points set aside (no finite rate > 0), one text per op."""
    result = {}
    set_aside = []
    for op in BANDWIDTH_OPS:
        cases = np.flatnonzero(rows["op"] == op)
        if cases.size == 0:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            rates = rows["bytes"][cases] / rows["statistic"][cases]
        usable = np.isfinite(rates) & (rates > 0)
        if not usable.all():
            set_aside.append(f"{int((~usable).sum())} {op} point(s) without a finite rate > 0")
        if usable.any():
            result[f"{op}_bytes_per_s"] = float(np.median(rates[usable]))
    return result, set_aside
