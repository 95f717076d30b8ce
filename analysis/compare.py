"""Machines side by side: each fitted figure per machine with its ratio to a baseline machine, and whether the
difference is more than noise, judged by a Mann-Whitney U test on the raw samples behind the figure.

The test is hand-written (no scipy in the dependencies): U from mid-ranks, normal approximation with the tie
correction and a continuity correction of 1/2 — the textbook large-sample form, which is also what
``scipy.stats.mannwhitneyu(method="asymptotic")`` computes.

Samples of several runs of one machine are pooled, so the test asks whether the machines' samples differ, not
whether a difference would survive a fresh run of each (run-to-run drift counts as a difference). A side with
more than ``MAX_SAMPLES`` samples is thinned to evenly spaced order statistics (keeps the distribution's
shape, bounds the sort), so a fleet of runs is compared in bounded time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.decode import decode_table
from analysis.host import BANDWIDTH_OPS, fit_host, predict_many_vs_one
from analysis.launch import CUDA_CASES, decode_with_measured, fit_launch, predict_spin

#: Two-sided p-value below which a difference is marked significant.
ALPHA = 0.01
#: Largest pooled sample per side fed to the test (see the module docstring).
MAX_SAMPLES = 20_000

#: ``extra_info`` coordinates that together name one measured point, the same on every machine.
POINT_KEYS = (
    "case",
    "device",
    "op",
    "dtype",
    "n",
    "pieces",
    "variant",
    "mode",
    "n_kernels",
    "n_calls",
    "kernel_ns",
    "plan",
    "config",
    "batch",
    "ctx",
)

#: Mark texts, for tables and their legends.
MARK_SIGNIFICANT = "significant"
MARK_NOT_SIGNIFICANT = "within noise"
MARK_BASELINE = "baseline"
MARK_NO_DATA = "not judged: no raw samples (not saved, or skipped)"


@dataclass(frozen=True)
class MannWhitney:
    """Result of a two-sided Mann-Whitney U test of samples ``x`` against ``y``.

    ``u`` is U of ``x`` (the number of (x, y) pairs with x > y, ties counting 1/2), ``z`` its normal score
    (continuity-corrected, tie-corrected variance), ``p_value`` two-sided, ``n_x``/``n_y`` the sample sizes.
    ``effect`` is U / (n_x·n_y), the probability that a random x exceeds a random y (0.5: no shift).
    """

    u: float
    z: float
    p_value: float
    n_x: int
    n_y: int

    @property
    def effect(self) -> float:
        return self.u / (self.n_x * self.n_y)


def mann_whitney_u(x: npt.ArrayLike, y: npt.ArrayLike) -> MannWhitney:
    """Two-sided Mann-Whitney U test of ``x`` against ``y`` (any units, the same for both).

    Normal approximation: z = (U − n_x·n_y/2 ∓ 1/2) / σ with σ² = n_x·n_y/12 · ((n+1) − Σ(t³−t)/(n(n−1))),
    t the size of each group of tied values, n = n_x + n_y. When every value is tied σ = 0 and p = 1.
    Raises ``ValueError`` for an empty sample or a non-finite value.
    """
    xs = np.asarray(x, dtype=float).ravel()
    ys = np.asarray(y, dtype=float).ravel()
    if xs.size == 0 or ys.size == 0:
        raise ValueError(f"Mann-Whitney U needs two non-empty samples, got sizes {xs.size} and {ys.size}")
    if not (np.isfinite(xs).all() and np.isfinite(ys).all()):
        raise ValueError("Mann-Whitney U needs finite samples")
    n_x, n_y = xs.size, ys.size
    n = n_x + n_y
    pooled = np.concatenate([xs, ys])
    order = np.argsort(pooled, kind="mergesort")
    ordered = pooled[order]
    # Mid-ranks: every member of a run of ties gets the mean of the ranks the run spans.
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    counts = np.diff(np.r_[starts, n])
    mid_ranks = starts + (counts + 1) / 2.0  # 1-based
    ranks = np.empty(n)
    ranks[order] = np.repeat(mid_ranks, counts)
    u = float(ranks[:n_x].sum() - n_x * (n_x + 1) / 2.0)
    mean_u = n_x * n_y / 2.0
    tie_term = float(np.sum(counts.astype(float) ** 3 - counts)) / (n * (n - 1)) if n > 1 else 0.0
    variance = n_x * n_y / 12.0 * ((n + 1) - tie_term)
    if variance <= 0:
        return MannWhitney(u=u, z=0.0, p_value=1.0, n_x=n_x, n_y=n_y)
    shift = u - mean_u
    corrected = math.copysign(max(abs(shift) - 0.5, 0.0), shift)
    z = corrected / math.sqrt(variance)
    p_value = min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))
    return MannWhitney(u=u, z=z, p_value=p_value, n_x=n_x, n_y=n_y)


def point_columns(frame: pd.DataFrame) -> list[str]:
    """The ``POINT_KEYS`` present in ``frame``, in that order."""
    return [key for key in POINT_KEYS if key in frame.columns]


def pooled_samples(rows: pd.DataFrame, as_rate: bool = False) -> np.ndarray:
    """Raw per-iteration samples (s) of ``rows`` (one measured point, any number of runs) in one sorted array,
    thinned to at most ``MAX_SAMPLES``; empty when no row saved its samples. ``as_rate``: each sample as its
    row's ``bytes`` over the sample, B/s, so that rows of different sizes pool and compare."""
    parts = [
        row.bytes / np.asarray(row.data, dtype=float) if as_rate else np.asarray(row.data, dtype=float)
        for row in rows.itertuples(index=False)
        if isinstance(row.data, list | np.ndarray)
    ]
    if not parts:
        return np.empty(0)
    pooled = np.sort(np.concatenate(parts))
    if pooled.size > MAX_SAMPLES:
        pooled = pooled[np.linspace(0, pooled.size - 1, MAX_SAMPLES).round().astype(int)]
    return pooled


def judge(samples: np.ndarray, baseline_samples: np.ndarray) -> tuple[str, float]:
    """(mark, p-value) of one machine's samples against the baseline's; p is NaN when it cannot be judged."""
    if samples.size == 0 or baseline_samples.size == 0:
        return MARK_NO_DATA, math.nan
    result = mann_whitney_u(samples, baseline_samples)
    return (MARK_SIGNIFICANT if result.p_value < ALPHA else MARK_NOT_SIGNIFICANT), result.p_value


def choose_baseline(machines: list[str], baseline: str | None) -> str:
    """Return ``baseline`` if it names one of ``machines`` (exactly, or as the only machine id containing it),
    the first machine when it is None; raise ``ValueError`` naming the choices otherwise."""
    if not machines:
        raise ValueError("no machine to compare")
    if baseline is None:
        return machines[0]
    if baseline in machines:
        return baseline
    matches = [m for m in machines if baseline in m]
    if len(matches) == 1:
        return matches[0]
    known = "; ".join(machines)
    what = "matches several machines" if matches else "names no machine"
    raise ValueError(f"--baseline {baseline!r} {what}; machines: {known}")


def point_table(frame: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    """One row per measured point (``POINT_KEYS``) and machine: median time per call (s, median over runs of
    each run's median), ratio to the baseline machine's, and the significance mark with its p-value.

    Columns: the point columns, ``machine_id``, ``runs``, ``median_s``, ``ratio``, ``mark``, ``p_value``.
    Points the baseline did not measure get ratio NaN and mark "not judged: baseline lacks this point".
    """
    machines = list(dict.fromkeys(frame["machine_id"]))
    base = choose_baseline(machines, baseline)
    keys = point_columns(frame)
    rows = []
    for point, group in frame.groupby(keys, dropna=False, sort=True):
        by_machine = {m: g for m, g in group.groupby("machine_id", sort=False)}
        base_rows = by_machine.get(base)
        base_median = float(base_rows["median"].median()) if base_rows is not None else math.nan
        base_samples = pooled_samples(base_rows) if base_rows is not None else np.empty(0)
        for machine in machines:
            rows_m = by_machine.get(machine)
            if rows_m is None:
                continue
            median = float(rows_m["median"].median())
            if machine == base:
                mark, p_value = MARK_BASELINE, math.nan
            elif base_rows is None:
                mark, p_value = "not judged: baseline lacks this point", math.nan
            else:
                mark, p_value = judge(pooled_samples(rows_m), base_samples)
            rows.append(
                {
                    **dict(zip(keys, point if isinstance(point, tuple) else (point,), strict=True)),
                    "machine_id": machine,
                    "runs": int(rows_m["source"].nunique()),
                    "median_s": median,
                    "ratio": median / base_median if base_median > 0 else math.nan,
                    "mark": mark,
                    "p_value": p_value,
                }
            )
    return pd.DataFrame(rows, columns=[*keys, "machine_id", "runs", "median_s", "ratio", "mark", "p_value"])


@dataclass(frozen=True)
class Fits:
    """Every family's fitted and predicted tables for one frame (each empty when its cases are absent).

    ``host``: ``analysis.host.fit_host``; ``many_vs_one``: ``analysis.host.predict_many_vs_one``;
    ``launch``: ``analysis.launch.fit_launch``; ``spin``: ``analysis.launch.predict_spin``;
    ``decode_demo``: ``analysis.launch.decode_with_measured`` (the seed's demo 2 with measured launch costs);
    ``decode_steps``: ``analysis.decode.decode_table`` (measured decode steps against their bounds).
    """

    host: pd.DataFrame
    many_vs_one: pd.DataFrame
    launch: pd.DataFrame
    spin: pd.DataFrame
    decode_demo: pd.DataFrame
    decode_steps: pd.DataFrame


def has_cases(frame: pd.DataFrame, cases: tuple[str, ...], device: str | None = None) -> bool:
    """Whether ``frame`` holds any of ``cases`` (measured on ``device``, when given)."""
    if frame.empty or "case" not in frame or "device" not in frame:
        return False
    rows = frame["case"].isin(cases)
    if device is not None:
        rows &= frame["device"] == device
    return bool(rows.any())


def fit_all(frame: pd.DataFrame) -> Fits:
    """Fit every family present in ``frame`` once, so the table, the figures and the report agree."""
    empty = pd.DataFrame()
    host = fit_host(frame)
    many = predict_many_vs_one(frame, host) if not host.empty else empty
    launch = fit_launch(frame) if has_cases(frame, CUDA_CASES, "cuda") else empty
    return Fits(
        host=host,
        many_vs_one=many,
        launch=launch,
        spin=predict_spin(frame, launch) if not launch.empty else empty,
        decode_demo=decode_with_measured(launch) if not launch.empty else empty,
        decode_steps=decode_table(frame, host, launch if not launch.empty else None)
        if has_cases(frame, ("decode_step",))
        else empty,
    )


@dataclass(frozen=True)
class Anchor:
    """The measured point whose raw samples judge a difference in a figure between two machines: the rows
    of ``case`` (and ``op``/``mode`` when given) at the ``pick`` ("smallest" or "largest") value of
    ``size`` ("n" or "n_kernels") that both machines measured, among the sizes listed in the fit column
    ``within`` when given (e.g. the sizes the in-cache law was fitted on). ``as_rate``: the samples are
    compared as bytes per second, so each machine's own point counts even where the sizes differ (the
    bandwidth cases size their arrays by each machine's last-level cache)."""

    case: str
    size: str | None = None
    pick: str = "largest"
    op: str | None = None
    mode: str | None = None
    within: str | None = None
    as_rate: bool = False


@dataclass(frozen=True)
class FigureSpec:
    """How one fitted figure is shown and judged across machines.

    ``column`` (and ``low``/``high``, its confidence bounds, or None) of the wide fit table ``table``;
    ``unit``: "s", "B/s", "elem/s" or "count"; ``anchor``: the point that judges a difference, or None with
    ``unjudged`` saying why (a figure derived from others, or measured without raw samples).
    """

    table: str
    column: str
    low: str | None
    high: str | None
    label: str
    unit: str
    anchor: Anchor | None
    unjudged: str = ""


_DERIVED = "not judged: derived from the figures above"
#: The host figures that come from the fixed-overhead law: when it cannot be fitted, their rows say why.
LAW_FIGURES = frozenset({"t0_s", "cache_s_per_element", "r_inf_per_s", "n_half", "dram_s_per_element"})

#: The host family's figures (``analysis.host.HOST_COLUMNS``), in table order.
HOST_FIGURES = (
    FigureSpec(
        "host",
        "t0_s",
        "t0_low_s",
        "t0_high_s",
        "t0, fixed cost per call",
        "s",
        Anchor("ufunc_size", "n", "smallest"),
    ),
    FigureSpec(
        "host",
        "cache_s_per_element",
        "cache_s_per_element_low",
        "cache_s_per_element_high",
        "per element, in cache",
        "s",
        Anchor("ufunc_size", "n", within="cache_sizes"),
    ),
    FigureSpec(
        "host",
        "r_inf_per_s",
        "r_inf_low_per_s",
        "r_inf_high_per_s",
        "r∞, in cache",
        "elem/s",
        Anchor("ufunc_size", "n", within="cache_sizes"),
    ),
    FigureSpec("host", "n_half", "n_half_low", "n_half_high", "n½ = t0·r∞", "count", None, _DERIVED),
    FigureSpec(
        "host",
        "dram_s_per_element",
        "dram_s_per_element_low",
        "dram_s_per_element_high",
        "per element, from DRAM",
        "s",
        Anchor("ufunc_size", "n", within="dram_sizes"),
    ),
    *(
        FigureSpec(
            "host",
            f"{op}_bytes_per_s",
            None,
            None,
            f"{op} bandwidth",
            "B/s",
            Anchor("host_bandwidth", op=op, as_rate=True),
        )
        for op in BANDWIDTH_OPS
    ),
)


def _launch_spec(quantity: str, label: str, anchor: Anchor | None, unjudged: str = "") -> FigureSpec:
    return FigureSpec("launch", quantity, f"{quantity}_low", f"{quantity}_high", label, "s", anchor, unjudged)


#: The GPU launch family's figures (``analysis.launch.QUANTITIES``), in table order. Slopes are judged at the
#: largest batch (where the per-kernel cost dominates a call), intercepts at the smallest.
LAUNCH_FIGURES = (
    _launch_spec("launch_s", "cost per launch", Anchor("launch_batch", "n_kernels")),
    _launch_spec(
        "sync_round_trip_s", "synchronise round trip", Anchor("launch_batch", "n_kernels", "smallest")
    ),
    _launch_spec(
        "launch_sync_s", "launch + synchronise, per kernel", Anchor("launch_sync_each", "n_kernels")
    ),
    _launch_spec("graph_node_s", "cost per graph node", Anchor("graph_replay", "n_kernels")),
    _launch_spec(
        "graph_launch_s", "graph launch + synchronise", Anchor("graph_replay", "n_kernels", "smallest")
    ),
    _launch_spec("enqueue_s", "host enqueue per launch", Anchor("enqueue", "n_kernels", mode="eager")),
    _launch_spec(
        "graph_enqueue_s", "host enqueue per graph", Anchor("enqueue", "n_kernels", "smallest", mode="graph")
    ),
    _launch_spec(
        "gpu_gap_s", "GPU time per queued kernel", None, "not judged: CUDA-event medians, no raw samples"
    ),
    _launch_spec("sync_s", "synchronise, idle stream", Anchor("sync")),
    _launch_spec(
        "knee_s", "knee kernel duration", None, "not judged: fitted over a sweep of kernel durations"
    ),
)


def wide_launch(launch: pd.DataFrame) -> pd.DataFrame:
    """``analysis.launch.fit_launch``'s long table (one row per machine and quantity) as one row per machine:
    columns ``machine_id``, then per quantity q: ``q``, ``q_low``, ``q_high`` (s)."""
    if launch.empty:
        return pd.DataFrame(columns=["machine_id"])
    values = launch.pivot(index="machine_id", columns="quantity", values="value_s")
    low = launch.pivot(index="machine_id", columns="quantity", values="ci_low_s").add_suffix("_low")
    high = launch.pivot(index="machine_id", columns="quantity", values="ci_high_s").add_suffix("_high")
    wide = pd.concat([values, low, high], axis=1).reset_index()
    wide.columns.name = None
    return wide


FIGURE_TABLE_COLUMNS = (
    "figure",
    "unit",
    "machine_id",
    "value",
    "low",
    "high",
    "ratio",
    "mark",
    "p_value",
    "judged_on",
)


def _anchor_rows(frame: pd.DataFrame, anchor: Anchor, base_fit: pd.Series, fit: pd.Series) -> pd.DataFrame:
    """The rows (every machine) of the one point ``anchor`` names for the pair (baseline, other machine)."""
    rows = frame[frame["case"] == anchor.case]
    for key, value in (("op", anchor.op), ("mode", anchor.mode)):
        if value is not None and key in rows:
            rows = rows[rows[key] == value]
    if anchor.size is None or rows.empty:
        return rows
    machines = (base_fit["machine_id"], fit["machine_id"])
    common = set.intersection(*(set(rows.loc[rows["machine_id"] == m, anchor.size]) for m in machines))
    if anchor.within is not None:
        common &= set(base_fit[anchor.within]) & set(fit[anchor.within])
    if not common:
        return rows.iloc[0:0]
    size = min(common) if anchor.pick == "smallest" else max(common)
    rows = rows[rows[anchor.size] == size]
    # One point measured alike on both machines (e.g. the same numpy calls per timed call), so their samples
    # compare as they are.
    for _, point in rows.groupby(point_columns(rows), dropna=False, sort=True):
        if set(machines) <= set(point["machine_id"]):
            return point
    return rows.iloc[0:0]


def _point_text(rows: pd.DataFrame, as_rate: bool) -> str:
    """How a judged point is named in the table: its case and coordinates (sizes left out, and the samples
    said to be rates, where ``as_rate`` compares each machine's own size)."""
    if rows.empty:
        return ""
    row = rows.iloc[0]
    parts = [str(row["case"])]
    keys = ("op", "variant", "mode") if as_rate else ("op", "n", "pieces", "variant", "mode", "n_kernels")
    for key in (*keys, "kernel_ns"):
        value = row.get(key)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            parts.append(f"{key}={int(value) if isinstance(value, float) else value}")
    if as_rate:
        parts.append("as B/s (each machine's own size)")
    return " ".join(parts)


def figure_table(frame: pd.DataFrame, fits: Fits, baseline: str | None) -> pd.DataFrame:
    """The machine table, long form: one row per fitted figure and machine (``FIGURE_TABLE_COLUMNS``).

    ``value``/``low``/``high`` in the figure's SI ``unit``; ``ratio`` = value / the baseline's value;
    ``mark`` from a Mann-Whitney U test of the raw samples at the point that measures the figure most
    directly (``judged_on``), against the baseline's samples at that point. ``attrs["baseline"]`` names
    the baseline machine.
    """
    tables = {"host": fits.host, "launch": wide_launch(fits.launch)}
    specs = [spec for spec in (*HOST_FIGURES, *LAUNCH_FIGURES) if spec.column in tables[spec.table].columns]
    machines = list(dict.fromkeys(frame["machine_id"]))
    base = choose_baseline(machines, baseline)
    rows = []
    for spec in specs:
        table = tables[spec.table].set_index("machine_id", drop=False)
        if spec.column not in table.columns:
            continue
        base_fit = table.loc[base] if base in table.index else None
        base_value = float(base_fit[spec.column]) if base_fit is not None else math.nan
        for machine in machines:
            if machine not in table.index:
                continue
            fit = table.loc[machine]
            value = float(fit[spec.column])
            fit_error = fit.get("fit_error") if spec.column in LAW_FIGURES else None
            if math.isnan(value) and not isinstance(fit_error, str):
                continue
            judged_on = ""
            if math.isnan(value):  # the law could not be fitted: the row stays and says why
                mark, p_value = f"not fitted: {fit_error}", math.nan
            elif machine == base:
                mark, p_value = MARK_BASELINE, math.nan
            elif math.isnan(base_value):
                mark, p_value = "not judged: the baseline has no such figure", math.nan
            elif spec.anchor is None:
                mark, p_value = spec.unjudged, math.nan
            else:
                point = _anchor_rows(frame, spec.anchor, base_fit, fit)
                judged_on = _point_text(point, spec.anchor.as_rate)
                if point.empty:
                    mark, p_value = "not judged: no point measured on both machines", math.nan
                else:
                    mark, p_value = judge(
                        pooled_samples(point[point["machine_id"] == machine], spec.anchor.as_rate),
                        pooled_samples(point[point["machine_id"] == base], spec.anchor.as_rate),
                    )
            rows.append(
                {
                    "figure": spec.label,
                    "unit": spec.unit,
                    "machine_id": machine,
                    "value": value,
                    "low": float(fit[spec.low]) if spec.low in fit.index else math.nan,
                    "high": float(fit[spec.high]) if spec.high in fit.index else math.nan,
                    "ratio": value / base_value if base_value else math.nan,
                    "mark": mark,
                    "p_value": p_value,
                    "judged_on": judged_on,
                }
            )
    table = pd.DataFrame(rows, columns=list(FIGURE_TABLE_COLUMNS))
    table.attrs["baseline"] = base
    return table
