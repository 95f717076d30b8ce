"""Each run's own CPU figures, for every run of a fleet at once: the per-run values a verdict rests on
(``analysis.compare``), which read the estimates alone.

``analysis.host.fit_host`` fits one group at a time, and a verdict's per-run figures are a group per run: a
thousand runs are a thousand fits of the host law and three thousand of the callers' (``framework_call``),
whose checks, selections and small arrays cost a millisecond each in Python, where the arithmetic is
microseconds. Here the points of every run are arrays taken once, the checks and the arithmetic run
column-wise on runs grouped by their number of points, and each run's least squares is the same
``numpy.linalg.lstsq`` of the same scaled design as ``analysis.fit.weighted_least_squares``: the estimates
are ``fit_host(frame, intervals=False)``'s bit for bit (``tests/test_run_fits.py``). A run whose points
need one of ``fit_host``'s rarer paths (a size that is not finite, raw samples that are not) is fitted by
``fit_host``'s own code.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis import host
from analysis.fit import DEFAULT_LEVEL
from analysis.frameworks import CALL_CASE, caller
from analysis.host import BANDWIDTH_OPS, DRAM_LLC_FACTOR

#: The estimates ``host_estimates`` gives per run: ``analysis.host.HOST_COLUMNS``' figures.
ESTIMATE_COLUMNS = (
    "t0_s",
    "cache_s_per_element",
    "r_inf_per_s",
    "n_half",
    "dram_s_per_element",
    *(f"{op}_bytes_per_s" for op in BANDWIDTH_OPS),
)


def host_estimates(frame: pd.DataFrame) -> pd.DataFrame:
    """``fit_host(frame, intervals=False)``'s ``ESTIMATE_COLUMNS``, indexed by ``machine_id`` (one row per
    group, in its order): NaN where ``fit_host`` gives NaN, an unfitted law included."""
    cpu = host._cpu_rows(frame)
    empty = pd.DataFrame(columns=list(ESTIMATE_COLUMNS), dtype=float, index=pd.Index([], name="machine_id"))
    if cpu.empty:
        return empty
    grouped = cpu.groupby("machine_id", sort=True, observed=True)
    number = grouped.ngroup().to_numpy()
    order = np.argsort(number, kind="stable")[np.count_nonzero(number < 0) :]
    if order.size == 0:
        return empty
    rows = host._HostColumns.of(cpu).take(order)
    group = number[order]
    names = grouped.size().index
    starts = np.searchsorted(group, np.arange(len(names)))
    out = {column: np.full(len(names), math.nan) for column in ESTIMATE_COLUMNS}
    for op in BANDWIDTH_OPS:
        _bandwidth(rows, group, op, out[f"{op}_bytes_per_s"])
    aside = _fit_laws(rows, group, starts, out)
    for index in aside:  # fit_host's own code, for the runs the column-wise path leaves to it
        members = np.flatnonzero(group == index)
        row = host._host_row(names[index], rows.take(members), DEFAULT_LEVEL, intervals=False)
        for column in ESTIMATE_COLUMNS:
            out[column][index] = row[column]
    return pd.DataFrame(out, index=pd.Index(names.to_numpy(dtype=object), name="machine_id"))


def call_estimates(frame: pd.DataFrame) -> pd.DataFrame:
    """Each caller's t0 of ``analysis.frameworks.fit_calls(frame, intervals=False)`` per machine, one column
    ``t0_s <caller>`` each as ``analysis.compare.wide_calls`` names them, indexed by ``machine_id``
    (sorted): ``fit_calls`` fits each caller's rows as ``ufunc_size`` rows, so does this."""
    rows = frame[frame["case"] == CALL_CASE] if not frame.empty and "case" in frame else frame.iloc[0:0]
    rows = rows[rows["device"] == "cpu"] if not rows.empty else rows
    if rows.empty:
        return pd.DataFrame(index=pd.Index([], name="machine_id"))
    if "threads" not in rows:
        rows = rows.assign(threads=np.nan)
    columns = {
        f"t0_s {caller(framework, threads)}": host_estimates(group.assign(case="ufunc_size"))["t0_s"]
        for (framework, threads), group in rows.groupby(["framework", "threads"], dropna=False, sort=True)
    }
    return pd.concat(columns, axis=1).sort_index().rename_axis("machine_id")


def _bandwidth(rows: host._HostColumns, group: np.ndarray, op: str, out: np.ndarray) -> None:
    """``host._bandwidths``' rate of ``op`` per group, into ``out``: the median of its finite rates > 0 (for
    an even count the mean of the middle two, as ``numpy.median`` takes it)."""
    cases = np.flatnonzero((rows["case"] == "host_bandwidth") & (rows["op"] == op))
    if cases.size == 0:
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = rows["bytes"][cases] / rows["statistic"][cases]
    usable = np.isfinite(rates) & (rates > 0)
    rates, owner = rates[usable], group[cases][usable]
    if rates.size == 0:
        return
    order = np.lexsort((rates, owner))
    rates, owner = rates[order], owner[order]
    ids, first, counts = np.unique(owner, return_index=True, return_counts=True)
    middle = first + (counts - 1) // 2
    even = counts % 2 == 0
    medians = rates[middle].copy()
    medians[even] = (rates[middle[even]] + rates[middle[even] + 1]) / 2
    out[ids] = medians


def _fit_laws(rows: host._HostColumns, group: np.ndarray, starts: np.ndarray, out: dict) -> list[int]:
    """The law (t0, per element, r∞, n½) and the DRAM cost per element of each group, into ``out``; return
    the groups left to ``host._host_row``."""
    sizes = np.flatnonzero(rows["case"] == "ufunc_size")
    if sizes.size == 0:
        return []
    core_cache = np.array([_known(value) for value in rows["core_cache_bytes"][starts]], dtype=float)
    llc = np.array([_known(value) for value in rows["llc_bytes"][starts]], dtype=float)
    owner = group[sizes]
    n, calls = rows["n_float"][sizes], rows["calls"][sizes]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        seconds = rows["statistic"][sizes] / calls
        working_set = rows["bytes"][sizes] / calls
    usable = np.isfinite(seconds) & (seconds > 0) & np.isfinite(working_set) & (n > 0)
    in_cache = usable & (working_set <= core_cache[owner])
    from_dram = usable & (working_set >= DRAM_LLC_FACTOR * llc[owner])
    known = ~np.isnan(core_cache) & ~np.isnan(llc)
    used = (in_cache | from_dram) & known[owner]
    # fit_host's rarer paths: a used size that is not finite, or raw samples it must check (all or none)
    odd = (used & ~np.isfinite(n)) | _odd_samples(rows["data"][sizes], calls, owner, used)
    aside = sorted(set(owner[odd].tolist()))
    fitted = known.copy()
    fitted[aside] = False
    law = in_cache & fitted[owner]
    t0 = _laws(owner[law], n[law], seconds[law], out)
    dram = from_dram & fitted[owner] & ~np.isnan(t0[owner])
    _dram_costs(owner[dram], n[dram], seconds[dram], t0, out["dram_s_per_element"])
    return aside


def _known(value: object) -> float:
    """``host._known``'s number, NaN for None."""
    number = host._known(value)
    return math.nan if number is None else number


def _odd_samples(data: np.ndarray, calls: np.ndarray, owner: np.ndarray, used: np.ndarray) -> np.ndarray:
    """Per point: whether ``fit_host`` reads its group's raw samples (every point of the group has some)
    and they make it take its own path: a point's that cannot be read as numbers (``fit_host`` raises,
    whether the point is used or not), or a used point's that are not a 1-D array of finite seconds per
    call (``analysis.fit`` refuses them)."""
    missing = np.array([values is None or len(values) == 0 for values in data], dtype=bool)
    without = np.zeros(owner.max() + 1, dtype=bool)
    without[owner[missing]] = True
    odd = np.zeros(data.size, dtype=bool)
    checked: list[int] = []  # used points with 1-D samples: their seconds per call checked at once below
    arrays: list[np.ndarray] = []
    for index in np.flatnonzero(~without[owner]).tolist():
        values = data[index]
        if not isinstance(values, np.ndarray) or values.dtype != np.float64:  # the loader's are float64
            try:
                values = np.asarray(values, dtype=float)
            except (TypeError, ValueError):
                odd[index] = True
                continue
        if used[index]:
            if values.ndim != 1:
                odd[index] = True
            else:
                checked.append(index)
                arrays.append(values)
    if checked:  # each point's samples non-empty here (a group with an empty one is not read)
        lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            seconds = np.concatenate(arrays) / np.repeat(calls[checked], lengths)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        odd[checked] = np.add.reduceat(~np.isfinite(seconds), starts) > 0
    return odd


def _by_count(owner: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(groups, positions (groups × points)) of the points ``owner`` assigns to groups (sorted by group),
    for each number of points a group holds: groups of one count are stacked into one array."""
    if owner.size == 0:
        return []
    ids, first, counts = np.unique(owner, return_index=True, return_counts=True)
    stacks = []
    for count in np.unique(counts):
        these = counts == count
        stacks.append((ids[these], first[these][:, None] + np.arange(count)))
    return stacks


def _laws(owner: np.ndarray, n: np.ndarray, seconds: np.ndarray, out: dict) -> np.ndarray:
    """``analysis.fit.fit_fixed_overhead``'s estimates of each group's in-cache points into ``out``; return
    t0 per group (NaN where the law is not fitted: too few points or sizes, or t0 < 0 or r∞ ≤ 0)."""
    t0_all = np.full(out["t0_s"].size, math.nan)
    for ids, positions in _by_count(owner):
        count = positions.shape[1]
        if count <= 2:  # weighted_least_squares needs more points than coefficients
            continue
        x, y = n[positions], seconds[positions]
        ordered = np.sort(x, axis=1)
        distinct = 1 + np.count_nonzero(ordered[:, 1:] != ordered[:, :-1], axis=1)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            weights = 1 / y**2
            root_w = np.sqrt(weights)
            design = np.stack([np.ones_like(x), x], axis=2) * root_w[:, :, None]
            scale = np.linalg.norm(design, axis=1)
            scaled = design / scale[:, None, :]
        ok = (
            (distinct >= 2)
            & np.all(np.isfinite(weights) & (weights > 0), axis=1)
            & np.all(scale != 0, axis=1)
        )
        if ok.any():
            ok[ok] = np.linalg.matrix_rank(scaled[ok]) >= 2
        target = y * root_w
        for row in np.flatnonzero(ok):
            coef_scaled, *_ = np.linalg.lstsq(scaled[row], target[row], rcond=None)
            t0_s, s_per_element = coef_scaled / scale[row]
            if t0_s < 0 or s_per_element <= 0:
                continue
            r_inf_per_s = 1 / s_per_element
            if not math.isfinite(r_inf_per_s):
                continue  # model.laws refuses the law: fit_host's fit_error
            index = ids[row]
            t0_all[index] = t0_s
            out["t0_s"][index] = t0_s
            out["cache_s_per_element"][index] = s_per_element
            out["r_inf_per_s"][index] = r_inf_per_s
            out["n_half"][index] = float(t0_s) * float(r_inf_per_s)
    return t0_all


def _dram_costs(
    owner: np.ndarray, n: np.ndarray, seconds: np.ndarray, t0: np.ndarray, out: np.ndarray
) -> None:
    """``analysis.fit.fit_per_element``'s estimate of each group's DRAM points (t0 fixed at its law's), into
    ``out``: s = Σ w n (t − t0) / Σ w n², w = 1/t²."""
    for ids, positions in _by_count(owner):
        x, y = n[positions], seconds[positions]
        w = 1 / y**2
        out[ids] = np.sum(w * x * (y - t0[ids][:, None]), axis=1) / np.sum(w * x**2, axis=1)
