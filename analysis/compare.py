"""Groups of runs side by side — machines, single runs, or the values of a fact such as the numpy version —
each fitted figure (or measured case) per group with its ratio to a baseline group, and whether the
difference is more than noise, judged by a Mann-Whitney U test (``scipy.stats.mannwhitneyu``) on the raw
samples behind the figure.

The test is the large-sample form (normal approximation, tie-corrected, continuity-corrected): timings
hold ties and thousands of samples, where the exact null distribution is neither needed nor affordable.

Every family's headline figure is compared: the fitted CPU figures and bandwidths, the GPU launch figures,
and the measured ones no fit gives (``measured_figures``: many vs one at the most pieces, the decode step's
overhead floor, each numpy op's fixed cost, the decode step itself). Groups are ordered, and the default
baseline chosen, by the time of each group's first run (``in_time_order``), never by the order the runs were
named in, so swapping two paths never flips a ratio.

Groups take the machines' place: the frame's ``machine_id`` is replaced by each run's group label
(``Groups.relabel``), so every family fits, predicts and compares per group with the code that serves
machines. Samples of several runs of one group are pooled, so the test asks whether the groups' samples
differ, not whether a difference would survive a fresh run of each (run-to-run drift counts as a
difference: compare ``--by run`` to see it). A side with more than ``MAX_SAMPLES`` samples is thinned to
evenly spaced order statistics (keeps the distribution's shape, bounds the sort), so a fleet of runs is
compared in bounded time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis import ops
from analysis.cache import text_categorical
from analysis.decode import STATISTIC as DECODE_STATISTIC
from analysis.facts import BY_MACHINE, BY_RUN
from analysis.fits import Fits
from analysis.host import BANDWIDTH_OPS
from analysis.host import STATISTIC as HOST_STATISTIC
from analysis.memo import Memo

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
    "layer",
    "n_args",
    "plan",
    "config",
    "batch",
    "ctx",
    "framework",
    "threads",
    "compiler",
)

#: Frame columns no comparison reads (``analysis.load.load_runs``' ``unread``): who ran it (the machine id
#: says it), which test, the statistics no figure is taken from. A fleet's frame holds 10⁶ rows of each.
UNREAD_COLUMNS = frozenset(
    {
        "host",
        "system",
        "cpu_model",
        "gpu_name",
        "gpu_attributes",
        "commit",
        "pb_version",
        "name",
        "group",
        "max",
        "mean",
        "stddev",
        "iqr",
        "q1",
        "q3",
        "ops",
        "iterations",
    }
)

#: Mark texts, for tables and their legends.
MARK_SIGNIFICANT = "significant"
MARK_NOT_SIGNIFICANT = "within noise"
MARK_BASELINE = "baseline"
MARK_NO_DATA = "not judged: no raw samples (not saved, or skipped)"
MARK_NO_BASELINE_POINT = "not judged: the baseline lacks this case"


@dataclass(frozen=True)
class MannWhitney:
    """Result of a two-sided Mann-Whitney U test of samples ``x`` against ``y``.

    ``u`` is U of ``x`` (the number of (x, y) pairs with x > y, ties counting 1/2), ``p_value`` two-sided,
    ``n_x``/``n_y`` the sample sizes. ``effect`` is U / (n_x·n_y), the probability that a random x exceeds
    a random y (0.5: no shift).
    """

    u: float
    p_value: float
    n_x: int
    n_y: int

    @property
    def effect(self) -> float:
        return self.u / (self.n_x * self.n_y)


def mann_whitney(x: npt.ArrayLike, y: npt.ArrayLike) -> MannWhitney:
    """Two-sided Mann-Whitney U test of ``x`` against ``y`` (any units, the same for both), by
    ``scipy.stats.mannwhitneyu`` in its asymptotic form with the continuity correction; p = 1 when every
    value is tied. Raises ``ValueError`` for an empty sample or a non-finite value."""
    xs = np.asarray(x, dtype=float).ravel()
    ys = np.asarray(y, dtype=float).ravel()
    if xs.size == 0 or ys.size == 0:
        raise ValueError(f"Mann-Whitney U needs two non-empty samples, got sizes {xs.size} and {ys.size}")
    if not (np.isfinite(xs).all() and np.isfinite(ys).all()):
        raise ValueError("Mann-Whitney U needs finite samples")
    import scipy.stats  # here: a comparison without raw samples judges nothing, and scipy.stats takes 0.5 s

    result = scipy.stats.mannwhitneyu(
        xs, ys, alternative="two-sided", method="asymptotic", use_continuity=True
    )
    p_value = float(result.pvalue)
    return MannWhitney(
        u=float(result.statistic), p_value=1.0 if math.isnan(p_value) else p_value, n_x=xs.size, n_y=ys.size
    )


def point_columns(frame: pd.DataFrame) -> list[str]:
    """The ``POINT_KEYS`` present in ``frame``, in that order."""
    return [key for key in POINT_KEYS if key in frame.columns]


def pooled_samples(rows: pd.DataFrame, as_rate: bool = False) -> np.ndarray:
    """Raw per-iteration samples (s) of ``rows`` (one measured point, any number of runs) in one sorted array,
    thinned to at most ``MAX_SAMPLES``; empty when no row saved its samples. ``as_rate``: each sample as its
    row's ``bytes`` over the sample, B/s, so that rows of different sizes pool and compare."""
    data = rows["data"].tolist()
    if as_rate:
        sizes = rows["bytes"].tolist()
        parts = [size / values for size, values in zip(sizes, data, strict=True) if _has_samples(values)]
    else:
        parts = [values for values in data if _has_samples(values)]
    if not parts:
        return np.empty(0)
    pooled = np.sort(np.concatenate(parts).astype(float, copy=False))
    if pooled.size > MAX_SAMPLES:
        pooled = pooled[np.linspace(0, pooled.size - 1, MAX_SAMPLES).round().astype(int)]
    return pooled


def _has_samples(values: object) -> bool:
    return isinstance(values, np.ndarray | list) and len(values) > 0


def judge(samples: np.ndarray, baseline_samples: np.ndarray) -> tuple[str, float]:
    """(mark, p-value) of one group's samples against the baseline's; p is NaN when it cannot be judged."""
    if samples.size == 0 or baseline_samples.size == 0:
        return MARK_NO_DATA, math.nan
    result = mann_whitney(samples, baseline_samples)
    return (MARK_SIGNIFICANT if result.p_value < ALPHA else MARK_NOT_SIGNIFICANT), result.p_value


def in_time_order(labels: Sequence[str], when: Sequence[object]) -> list[str]:
    """The distinct ``labels`` ordered by the earliest of their times ``when`` (one per label occurrence;
    unknown times last), ties by the label's text: an order, and so a default baseline (the first), that
    does not depend on the order the runs were named or loaded in."""
    labels = list(labels)
    times = pd.to_datetime(pd.Series(list(when), dtype=object), utc=True, format="ISO8601", errors="coerce")
    first = pd.Series(times.to_numpy(), index=labels).groupby(level=0, sort=False).min()
    # Each label's key once (10⁵ runs grouped by run: one Series lookup per label and comparison was most of
    # the time).
    keys = {label: (pd.isna(time), 0 if pd.isna(time) else time.value) for label, time in first.items()}
    return sorted(dict.fromkeys(labels), key=lambda label: (*keys[label], label))


def frame_groups(frame: pd.DataFrame) -> list[str]:
    """The groups (``machine_id``) of a frame in time order (``in_time_order`` of their runs' times)."""
    if "run_datetime" not in frame:
        return sorted(dict.fromkeys(str(group) for group in frame["machine_id"].unique()))
    # Each group's earliest time first, in one pass over the rows (a fleet's frame holds 4·10⁶ of them), then
    # the groups ordered by those.
    times = frame["run_datetime"]
    if not isinstance(times.dtype, pd.DatetimeTZDtype):
        times = pd.to_datetime(times.astype(object), utc=True, format="ISO8601", errors="coerce")
    first = times.groupby(frame["machine_id"], sort=False, dropna=False, observed=True).min()
    return in_time_order([str(group) for group in first.index], list(first))


def choose_baseline(groups: Sequence[str], baseline: str | None, what: str = "machine") -> str:
    """Return ``baseline`` if it names one of ``groups`` (exactly, or as the only label containing it), the
    first group when it is None (callers order groups by ``in_time_order``); raise ``ValueError`` naming
    the choices otherwise. ``what`` names a group in the message ("machine", "run", "numpy value")."""
    if not groups:
        raise ValueError(f"no {what} to compare")
    if baseline is None:
        return groups[0]
    if baseline in groups:
        return baseline
    matches = [group for group in groups if baseline in group]
    if len(matches) == 1:
        return matches[0]
    known = "; ".join(groups)
    verdict = f"matches several {what}s" if matches else f"names no {what}"
    raise ValueError(f"--baseline {baseline!r} {verdict}; {what}s: {known}")


@dataclass(frozen=True)
class Group:
    """One column of a comparison: ``code`` (its short name in tables: A, B, …), ``label`` (the machine id,
    the run's file, or fact=value), the ``runs`` (sources) it pools and the ``machines`` they were
    measured on."""

    code: str
    label: str
    runs: tuple[str, ...]
    machines: tuple[str, ...]


@dataclass(frozen=True)
class Groups:
    """The groups of a comparison, baseline first, and which group each run (source) belongs to.

    ``by``: "machine", "run" or the fact grouped by (``analysis.facts``); ``of_source``: source → label;
    ``rule``: how the baseline was chosen, for the output ("the earliest run's machine", "--baseline").
    """

    by: str
    groups: tuple[Group, ...]
    of_source: Mapping[str, str]
    rule: str = ""

    @property
    def baseline(self) -> Group:
        return self.groups[0]

    @property
    def labels(self) -> list[str]:
        return [group.label for group in self.groups]

    def relabel(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with each row's ``machine_id`` replaced by its run's group label (see the module
        docstring), the machine kept as ``machine``."""
        return frame.assign(machine=frame["machine_id"], machine_id=mapped(frame["source"], self.of_source))


def mapped(values: pd.Series, mapping: Mapping[str, str]) -> pd.Series:
    """``values.map(mapping)`` (texts to texts), kept a ``Categorical`` where ``values`` is one: each distinct
    value is looked up once, not each of a fleet's 4·10⁶ rows (``analysis.load``'s ``categorical``)."""
    if not isinstance(values.dtype, pd.CategoricalDtype):
        return values.map(mapping)
    targets = [mapping.get(value) for value in values.cat.categories]
    known = np.array([isinstance(target, str) for target in targets], dtype=bool)
    if not all(known[values.cat.codes[values.cat.codes >= 0].unique()]):  # a value without a text: as map
        return values.astype(object).map(mapping)
    codes = values.cat.codes.to_numpy()
    codes = np.where((codes >= 0) & known[np.clip(codes, 0, None)], codes, -1)
    texts = [target if isinstance(target, str) else "" for target in targets]
    return pd.Series(text_categorical(codes, texts), index=values.index, name=values.name)


def group_code(index: int) -> str:
    """The short name of the ``index``-th group (0-based): A … Z, then G27, G28, …"""
    return chr(ord("A") + index) if index < 26 else f"G{index + 1}"


def group_runs(runs: pd.DataFrame, by: str, baseline: str | None, fact_column: str | None = None) -> Groups:
    """Group ``runs`` (``analysis.load.LoadResult.runs`` of the runs used) ``by`` "machine", "run" (one group
    per run, named by its file) or a fact (the text in ``fact_column``, one group per value; runs without
    it form the group "<fact> not recorded"), in the time order of each group's first run
    (``in_time_order``: never the order the runs were named in). The ``baseline`` group
    (``choose_baseline``; by default the group of the earliest run) comes first; raises ``ValueError`` when
    it names none."""
    runs = runs.reset_index(drop=True)
    if by == BY_MACHINE:
        labels = [str(machine) for machine in runs["machine_id"]]
        what = "machine"
    elif by == BY_RUN:
        labels = _run_labels([str(source) for source in runs["source"]])
        what = "run"
    else:
        assert fact_column is not None, "a grouping by fact needs the column of its values"
        labels = [
            f"{by}={value}" if value is not None else f"{by} not recorded" for value in runs[fact_column]
        ]
        what = f"{by} value"
    order = in_time_order(labels, list(runs["run_datetime"]))
    chosen = choose_baseline(order, baseline, what)
    rule = (
        f"named by --baseline {baseline}"
        if baseline is not None
        else f"the {what} of the earliest run"
        if by != BY_RUN
        else "the earliest run"
    )
    order = [chosen, *(label for label in order if label != chosen)]
    members: dict[str, list[tuple[str, str]]] = {label: [] for label in order}
    for label, source, machine in zip(labels, runs["source"], runs["machine_id"], strict=True):
        members[label].append((str(source), str(machine)))
    groups = [
        Group(
            code=group_code(index),
            label=label,
            runs=tuple(source for source, _ in members[label]),
            machines=tuple(dict.fromkeys(machine for _, machine in members[label])),
        )
        for index, label in enumerate(order)
    ]
    of_source = dict(zip((str(source) for source in runs["source"]), labels, strict=True))
    return Groups(by=by, groups=tuple(groups), of_source=of_source, rule=rule)


def _run_labels(sources: list[str]) -> list[str]:
    """Each run's file name, or its whole path where two runs share a name (storage folders of two
    platforms both hold 0001_….json)."""
    names = [Path(source).name for source in sources]
    counts = pd.Series(names).value_counts()
    return [name if counts[name] == 1 else source for name, source in zip(names, sources, strict=True)]


def group_notes(groups: Groups) -> list[str]:
    """One line per group that pools runs of several machines (grouped by a fact): its figures mix
    machines, so a difference may be the hardware's."""
    return [
        f"group {group.code} ({group.label}) pools runs of {len(group.machines)} machines "
        f"({'; '.join(group.machines)}): a difference from it may be the hardware's, not the {groups.by}'s"
        for group in groups.groups
        if len(group.machines) > 1
    ]


#: Columns of ``case_table`` after the case's own key columns.
CASE_TABLE_COLUMNS = ("machine_id", "runs", "rounds", "ratio", "mark", "p_value")


def case_table(
    frame: pd.DataFrame, keys: Sequence[str], baseline: str | None, statistics: Sequence[str] = ("median",)
) -> pd.DataFrame:
    """One row per measured case (the rows of ``frame`` that agree on ``keys``) and group (``machine_id``):
    each of ``statistics`` ("median": median over the group's runs of each run's median; "min": the
    fastest round of any run) in seconds as ``<statistic>_s``, the baseline group's as
    ``<statistic>_baseline_s``, their ratio as ``<statistic>_ratio``; ``ratio`` = the first statistic's;
    ``runs``, ``rounds`` (summed over runs); the significance mark with its p-value from the pooled raw
    samples (``judge``).

    Cases the baseline did not measure get ratio NaN and mark ``MARK_NO_BASELINE_POINT``.
    """
    keys = list(keys)
    groups = frame_groups(frame)
    base = choose_baseline(groups, baseline)
    stat_columns = [
        column for stat in statistics for column in (f"{stat}_s", f"{stat}_baseline_s", f"{stat}_ratio")
    ]
    rows = []
    for case, rows_case in frame.groupby(keys, dropna=False, sort=True):
        by_group = dict(tuple(rows_case.groupby("machine_id", sort=False)))
        base_rows = by_group.get(base)
        base_values = {stat: _statistic(base_rows, stat) for stat in statistics}
        base_samples = pooled_samples(base_rows) if base_rows is not None else np.empty(0)
        for group in groups:
            own = by_group.get(group)
            if own is None:
                continue
            if group == base:
                mark, p_value = MARK_BASELINE, math.nan
            elif base_rows is None:
                mark, p_value = MARK_NO_BASELINE_POINT, math.nan
            else:
                mark, p_value = judge(pooled_samples(own), base_samples)
            row = dict(zip(keys, case if isinstance(case, tuple) else (case,), strict=True))
            row.update(machine_id=group, runs=int(own["source"].nunique()), rounds=_rounds(own))
            for stat in statistics:
                value = _statistic(own, stat)
                base_value = base_values[stat]
                row[f"{stat}_s"] = value
                row[f"{stat}_baseline_s"] = base_value
                row[f"{stat}_ratio"] = value / base_value if base_value > 0 else math.nan
            row.update(ratio=row[f"{statistics[0]}_ratio"], mark=mark, p_value=p_value)
            rows.append(row)
    table = pd.DataFrame(
        rows, columns=[*keys, *CASE_TABLE_COLUMNS[:3], *stat_columns, *CASE_TABLE_COLUMNS[3:]]
    )
    table.attrs["baseline"] = base
    return table


def _statistic(rows: pd.DataFrame | None, statistic: str) -> float:
    """The group's ``statistic`` over its runs, s (see ``case_table``); NaN without rows."""
    if rows is None or rows.empty:
        return math.nan
    values = pd.to_numeric(rows[statistic], errors="coerce")
    return float(values.min() if statistic == "min" else values.median())


def _rounds(rows: pd.DataFrame) -> int:
    rounds = pd.to_numeric(rows["rounds"], errors="coerce") if "rounds" in rows else pd.Series(dtype=float)
    return int(rounds.sum()) if rounds.notna().any() else 0


def point_table(frame: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    """``case_table`` of launchbench's measured points (``POINT_KEYS``): median time per call (s, median over
    runs of each run's median) per group, ``median_s``, with its ratio and mark."""
    return case_table(frame, point_columns(frame), baseline, ("median",))


#: Columns of ``case_ratios``.
CASE_RATIO_COLUMNS = ("case", "machine_id", "statistic", "ratio", "mark", "p_value")


def case_ratios(table: pd.DataFrame, keys: Sequence[str], statistics: Sequence[str]) -> pd.DataFrame:
    """A ``case_table`` (cases named by ``keys``) as one tidy row per case, group other than the baseline
    and statistic: the data of a cases-by-groups figure of ratios (``CASE_RATIO_COLUMNS``; ``case`` is the
    ``fullname``, or the key columns joined), in ``ranked`` order."""
    rows = ranked(table)
    names = (
        rows["fullname"] if list(keys) == ["fullname"] else rows[list(keys)].astype(str).agg(" ".join, axis=1)
    )
    parts = [
        pd.DataFrame(
            {
                "case": names.to_numpy(),
                "machine_id": rows["machine_id"].to_numpy(),
                "statistic": stat,
                "ratio": rows[f"{stat}_ratio"].to_numpy(dtype=float),
                "mark": rows["mark"].to_numpy(),
                "p_value": rows["p_value"].to_numpy(dtype=float),
            }
        )
        for stat in statistics
    ]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(CASE_RATIO_COLUMNS))


def ranked(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a ``case_table`` other than the baseline's, most telling first: significant differences,
    then those within noise, then those not judged, each by how far the ratio is from 1 (either way)."""
    others = table[table["mark"] != MARK_BASELINE]
    order = others["mark"].map({MARK_SIGNIFICANT: 0, MARK_NOT_SIGNIFICANT: 1}).fillna(2)
    distance = np.abs(np.log(pd.to_numeric(others["ratio"], errors="coerce").astype(float)))
    return (
        others.assign(_order=order, _distance=distance.fillna(-1.0))
        .sort_values(["_order", "_distance"], ascending=[True, False], kind="stable")
        .drop(columns=["_order", "_distance"])
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
    layer: str | None = None
    within: str | None = None
    as_rate: bool = False


@dataclass(frozen=True)
class FigureSpec:
    """How one fitted figure is shown and judged across groups.

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
    _launch_spec(
        "ladder_cupy_s",
        "RawKernel launch, 0 arguments",
        Anchor("launch_args", "n_args", "smallest", layer="cupy"),
    ),
    _launch_spec(
        "ladder_cupy_per_arg_s", "RawKernel cost per argument", Anchor("launch_args", "n_args", layer="cupy")
    ),
    _launch_spec(
        "ladder_driver_s",
        "cuLaunchKernel, 0 arguments",
        Anchor("launch_args", "n_args", "smallest", layer="driver"),
    ),
    _launch_spec(
        "ladder_driver_per_arg_s",
        "cuLaunchKernel cost per argument",
        Anchor("launch_args", "n_args", layer="driver"),
    ),
    _launch_spec(
        "ladder_graph_s", "graph node, 0 arguments", None, "not judged: CUDA-event medians, no raw samples"
    ),
    _launch_spec(
        "ladder_graph_per_arg_s",
        "graph node cost per argument",
        None,
        "not judged: CUDA-event medians, no raw samples",
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


#: Each figure's name in a column header where the groups are the rows (``analysis.render``).
SHORT_NAMES = {
    "t0_s": "t0",
    "cache_s_per_element": "cache/elem",
    "r_inf_per_s": "r∞",
    "n_half": "n½",
    "dram_s_per_element": "DRAM/elem",
    **{f"{op}_bytes_per_s": op for op in BANDWIDTH_OPS},
    "launch_s": "launch",
    "sync_round_trip_s": "sync trip",
    "launch_sync_s": "launch+sync",
    "graph_node_s": "graph node",
    "graph_launch_s": "graph launch",
    "enqueue_s": "enqueue",
    "graph_enqueue_s": "graph enq.",
    "gpu_gap_s": "GPU gap",
    "sync_s": "sync idle",
    "knee_s": "knee",
    "ladder_cupy_s": "RawKernel",
    "ladder_cupy_per_arg_s": "RawK./arg",
    "ladder_driver_s": "driver",
    "ladder_driver_per_arg_s": "driver/arg",
    "ladder_graph_s": "node",
    "ladder_graph_per_arg_s": "node/arg",
}

FIGURE_TABLE_COLUMNS = (
    "figure",
    "short",
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


@dataclass(frozen=True)
class MeasuredFigure:
    """A headline figure that is measured, not fitted: the ``statistic`` of the rows of ``case`` whose
    columns hold the values of ``match`` (per numpy call where ``per_call``: divided by ``n_calls``), the
    median of that over a group's runs, s; judged on the raw samples of those rows."""

    label: str
    short: str
    case: str
    match: tuple[tuple[str, object], ...]
    statistic: str
    per_call: bool = False


def measured_figures(frame: pd.DataFrame) -> list[MeasuredFigure]:
    """The headline measured figures ``frame`` holds, in family order: many small calls vs one big at the
    most pieces (per variant), the decode step's overhead floor (per plan), each numpy op's fixed cost,
    and the decode step itself (per device, model, plan and mode)."""
    if frame.empty or not {"case", "device"} <= set(frame.columns):
        return []
    figures: list[MeasuredFigure] = []
    # Each family's rows, only the columns read here (a fleet's CPU rows are all 4·10⁶ of its frame).
    cpu = frame["device"] == "cpu"
    many = _rows_of(frame, cpu & (frame["case"] == "many_vs_one"), ("pieces", "variant"))
    if not many.empty and {"pieces", "variant"} <= set(many.columns):
        most = int(many["pieces"].max())
        for variant in sorted(set(many["variant"].dropna()), key=lambda v: (v != "views", v)):
            figures.append(
                MeasuredFigure(
                    f"many vs one, {most:,} pieces ({variant})",
                    f"{most:,} {variant}",
                    "many_vs_one",
                    (("device", "cpu"), ("pieces", most), ("variant", variant)),
                    HOST_STATISTIC,
                )
            )
    floors = _rows_of(frame, cpu & (frame["case"] == "decode_floor"), ("plan",))
    if not floors.empty and "plan" in floors:
        for plan in sorted(set(floors["plan"].dropna())):
            figures.append(
                MeasuredFigure(
                    f"overhead floor of the decode step ({plan})",
                    f"floor {plan}",
                    "decode_floor",
                    (("device", "cpu"), ("plan", plan)),
                    ops.STATISTIC,
                )
            )
    op_rows = _rows_of(frame, cpu & (frame["case"] == "numpy_op"), ("n_calls", "op"))
    if not op_rows.empty and "n_calls" in op_rows:
        for op in sorted(set(op_rows["op"].dropna())):
            figures.append(
                MeasuredFigure(
                    f"op cost: {op}", op, "numpy_op", (("device", "cpu"), ("op", op)), ops.STATISTIC, True
                )
            )
    launches = _rows_of(frame, frame["case"] == "framework_launch", ("n_args", "n_calls"))
    if not launches.empty and {"n_args", "n_calls"} <= set(launches.columns):
        # ``analysis.case_groups``: each rung's cost per launch (n_calls = launches per timed call).
        for n_args in sorted(set(launches["n_args"].dropna())):
            figures.append(
                MeasuredFigure(
                    f"cost per launch, {int(n_args)} args",
                    f"launch {int(n_args)} args",
                    "framework_launch",
                    (("n_args", n_args),),
                    "median",
                    True,
                )
            )
    steps = (
        _rows_of(frame, (frame["case"] == "decode_step") & (frame["op"] == "decode_step"), _STEP_KEYS)
        if "op" in frame
        else []
    )
    if len(steps):
        keys = [key for key in _STEP_KEYS if key in steps]
        configs = steps["config"].nunique() if "config" in steps else 1
        for values, _ in steps.groupby(keys, dropna=False, sort=True):
            known = [(key, value) for key, value in zip(keys, values, strict=True) if not pd.isna(value)]
            match = (("op", "decode_step"), *known)
            coordinates = dict(match)
            words = [
                str(coordinates.get("device", "")).upper().replace("CUDA", "GPU"),
                *([str(coordinates["config"])] if configs > 1 and "config" in coordinates else []),
                str(coordinates.get("plan", "")),
                str(coordinates.get("mode", "")),
            ]
            name = " ".join(word for word in words if word)
            statistic = DECODE_STATISTIC.get(str(coordinates.get("device")), "median")
            figures.append(
                MeasuredFigure(f"decode step, {name}", f"step {name}", "decode_step", match, statistic)
            )
    return figures


#: The coordinates that tell one decode step figure from another.
_STEP_KEYS = ("device", "config", "plan", "mode", "batch", "ctx")


def _rows_of(frame: pd.DataFrame, keep: pd.Series, columns: Sequence[str]) -> pd.DataFrame:
    """The rows ``keep`` marks, with those of ``columns`` that ``frame`` has."""
    return frame.loc[keep, [column for column in columns if column in frame]]


def _point_ids(rows: pd.DataFrame) -> pd.Series:
    """Each row's measured point (its ``POINT_KEYS`` values) as a number, equal for equal points; numbered in
    the order of the points' values. Only the keys whose values differ between the rows are read: the
    others cannot tell two points apart (and a fleet's rows hold 10⁵ copies of each)."""
    varying = [key for key in point_columns(rows) if rows[key].nunique(dropna=False) > 1]
    if not varying:
        return pd.Series(0, index=rows.index)
    return rows.groupby(varying, dropna=False, sort=True, observed=True).ngroup()


def _measured_rows(
    frame: pd.DataFrame, figure: MeasuredFigure, groups: Sequence[str], base: str
) -> list[dict[str, object]]:
    """``FIGURE_TABLE_COLUMNS`` rows of one ``MeasuredFigure``: per group its value, the ratio to the
    baseline's, and the mark of its raw samples against the baseline's (judged only where both groups
    measured the point alike: the same ``POINT_KEYS`` values)."""
    keep = frame["case"] == figure.case
    for key, value in figure.match:
        keep &= frame[key] == value
    read = [*point_columns(frame), "machine_id", "data", figure.statistic, *(["n_calls"] * figure.per_call)]
    rows = _rows_of(frame, keep, list(dict.fromkeys(read)))
    points: pd.Series | None = None  # each row's measured point: computed when a group is judged
    by_group = dict(tuple(rows.groupby("machine_id", sort=False)))
    base_rows = by_group.get(base)
    base_value = _measured_value(base_rows, figure) if base_rows is not None else math.nan
    base_samples = np.empty(0)  # the baseline's samples: pooled with the points
    table = []
    for group in groups:
        own = by_group.get(group)
        if own is None:
            continue
        value = _measured_value(own, figure)
        p_value = math.nan
        if group == base:
            mark = MARK_BASELINE
        elif base_rows is None:
            mark = "not judged: the baseline has no such figure"
        else:
            if points is None:  # the first group judged: the points and the baseline's samples, once
                points, base_samples = _point_ids(rows), pooled_samples(base_rows)
            if set(points[own.index]) != set(points[base_rows.index]):
                mark = "not judged: measured with other parameters than the baseline's"
            else:
                mark, p_value = judge(pooled_samples(own), base_samples)
        table.append(
            {
                "figure": figure.label,
                "short": figure.short,
                "unit": "s",
                "machine_id": group,
                "value": value,
                "low": math.nan,
                "high": math.nan,
                "ratio": value / base_value if base_value > 0 else math.nan,
                "mark": mark,
                "p_value": p_value,
                "judged_on": _point_text(own, as_rate=False)
                if mark in (MARK_SIGNIFICANT, MARK_NOT_SIGNIFICANT)
                else "",
            }
        )
    return table


def _measured_value(rows: pd.DataFrame, figure: MeasuredFigure) -> float:
    """The group's value of ``figure``: each run's statistic (per numpy call where asked), the median over
    runs, s."""
    values = pd.to_numeric(rows[figure.statistic], errors="coerce")
    if figure.per_call:
        values = values / pd.to_numeric(rows["n_calls"], errors="coerce")
    return float(values.median())


class _Points:
    """The columns that name and judge a point, split once by case and group, so that finding each figure's
    anchor point for each pair of groups reads only those two groups' rows of that case (a fleet of runs
    holds 10⁵ rows, and selecting from the whole frame copies every column each time)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        columns = [*point_columns(frame), "machine_id", "data", *(["bytes"] if "bytes" in frame else [])]
        self._frame = frame
        self._columns = [frame.columns.get_loc(column) for column in columns] if not frame.empty else []
        # Each (case, group)'s row positions; its rows are taken when asked for (taking every group's up front
        # copied the columns of the whole frame).
        self._where = {} if frame.empty else frame.groupby(["case", "machine_id"], observed=True).indices
        self._rows: dict[tuple, pd.DataFrame] = {}

    def rows(self, case: str, group: str) -> pd.DataFrame | None:
        """The narrow rows of ``case`` measured by ``group`` (each taken once), None when there are none."""
        key = (case, group)
        if key not in self._rows:
            where = self._where.get(key)
            self._rows[key] = None if where is None else self._frame.iloc[where, self._columns]
        return self._rows[key]

    def anchor_rows(self, anchor: Anchor, base_fit: pd.Series, fit: pd.Series) -> pd.DataFrame:
        """The rows (both groups) of the one point ``anchor`` names for the pair (baseline, other group)."""
        groups = (base_fit["machine_id"], fit["machine_id"])
        parts = [rows for group in groups if (rows := self.rows(anchor.case, group)) is not None]
        if len(parts) < len(groups):
            return pd.DataFrame(columns=["machine_id", "data"])
        # Each group's rows narrowed before they are joined: the point is a few of a fleet's 10⁴ rows.
        for key, value in (("op", anchor.op), ("mode", anchor.mode), ("layer", anchor.layer)):
            if value is not None and key in parts[0]:
                parts = [part[part[key] == value] for part in parts]
        if anchor.size is None or all(part.empty for part in parts):
            return pd.concat(parts)
        common = set.intersection(*(set(part[anchor.size].unique()) for part in parts))
        if anchor.within is not None:
            common &= set(base_fit[anchor.within]) & set(fit[anchor.within])
        if not common:
            return pd.concat(parts).iloc[0:0]
        size = min(common) if anchor.pick == "smallest" else max(common)
        rows = pd.concat([part[part[anchor.size] == size] for part in parts])
        # One point measured alike in both groups (e.g. the same numpy calls per timed call), so their
        # samples compare as they are.
        points = _point_ids(rows)
        for number in range(int(points.max()) + 1):  # the points in the order of their values
            point = rows[(points == number).to_numpy()]
            if set(groups) <= set(point["machine_id"].unique()):
                return point
        return rows.iloc[0:0]


def _point_text(rows: pd.DataFrame, as_rate: bool) -> str:
    """How a judged point is named in the table: its case and coordinates (sizes left out, and the samples
    said to be rates, where ``as_rate`` compares each group's own size)."""
    if rows.empty:
        return ""
    row = {key: rows[key].iat[0] for key in rows.columns}  # the first row (``iloc[0]``: slow on a wide frame)
    parts = [str(row["case"])]
    keys = ("op", "variant", "mode") if as_rate else ("op", "n", "pieces", "variant", "mode", "n_kernels")
    keys += ("layer", "n_args")
    for key in (*keys, "kernel_ns"):
        value = row.get(key)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            parts.append(f"{key}={int(value) if isinstance(value, float) else value}")
    if as_rate:
        parts.append("as B/s (each machine's own size)")
    return " ".join(parts)


def compared_table(
    frame: pd.DataFrame, fits: Fits, baseline: str | None, memo: Memo | None = None
) -> pd.DataFrame:
    """``figure_table(frame, fits, baseline)``, read back from ``memo`` (``analysis.memo``) when it was
    computed before from the same rows, fits and baseline."""
    if memo is None:
        return figure_table(frame, fits, baseline)
    key = memo.key("figure_table", frame, fits, baseline)
    return memo.cached(key, lambda: figure_table(frame, fits, baseline))


def figure_table(frame: pd.DataFrame, fits: Fits, baseline: str | None) -> pd.DataFrame:
    """The comparison, long form: one row per headline figure of every family and group
    (``FIGURE_TABLE_COLUMNS``; the group in ``machine_id``, see the module docstring): the fitted CPU figures
    and bandwidths, the measured ones (``measured_figures``: many vs one, the decode step's floor, each
    numpy op's cost, the decode step), then the GPU launch figures.

    ``value``/``low``/``high`` in the figure's SI ``unit``; ``ratio`` = value / the baseline's value;
    ``mark`` from a Mann-Whitney U test of the raw samples at the point that measures the figure most
    directly (``judged_on``), against the baseline's samples at that point. ``attrs["baseline"]`` names
    the baseline group.
    """
    tables = {"host": fits.host, "launch": wide_launch(fits.launch)}
    specs = [spec for spec in (*HOST_FIGURES, *LAUNCH_FIGURES) if spec.column in tables[spec.table].columns]
    groups = frame_groups(frame)
    base = choose_baseline(groups, baseline)
    points = _Points(frame)
    rows = []
    for spec in specs:
        table = tables[spec.table].set_index("machine_id", drop=False)
        base_fit = table.loc[base] if base in table.index else None
        base_value = float(base_fit[spec.column]) if base_fit is not None else math.nan
        base_samples: dict[tuple, np.ndarray] = {}  # the baseline's side of each anchor point, pooled once
        for group in groups:
            if group not in table.index:
                continue
            fit = table.loc[group]
            value = float(fit[spec.column])
            fit_error = fit.get("fit_error") if spec.column in LAW_FIGURES else None
            if math.isnan(value) and not isinstance(fit_error, str):
                continue
            judged_on = ""
            if math.isnan(value):  # the law could not be fitted: the row stays and says why
                mark, p_value = f"not fitted: {fit_error}", math.nan
            elif group == base:
                mark, p_value = MARK_BASELINE, math.nan
            elif math.isnan(base_value):
                mark, p_value = "not judged: the baseline has no such figure", math.nan
            elif spec.anchor is None:
                mark, p_value = spec.unjudged, math.nan
            else:
                point = points.anchor_rows(spec.anchor, base_fit, fit)
                judged_on = _point_text(point, spec.anchor.as_rate)
                if point.empty:
                    mark, p_value = "not judged: no point measured in both groups", math.nan
                else:
                    base_rows = point[point["machine_id"] == base]
                    key = tuple(base_rows.index)
                    if key not in base_samples:
                        base_samples[key] = pooled_samples(base_rows, spec.anchor.as_rate)
                    own = pooled_samples(point[point["machine_id"] == group], spec.anchor.as_rate)
                    mark, p_value = judge(own, base_samples[key])
            rows.append(
                {
                    "figure": spec.label,
                    "short": SHORT_NAMES.get(spec.column, spec.label),
                    "unit": spec.unit,
                    "machine_id": group,
                    "value": value,
                    "low": float(fit[spec.low]) if spec.low in fit.index else math.nan,
                    "high": float(fit[spec.high]) if spec.high in fit.index else math.nan,
                    "ratio": value / base_value if base_value else math.nan,
                    "mark": mark,
                    "p_value": p_value,
                    "judged_on": judged_on,
                }
            )
    launch_labels = {spec.label for spec in LAUNCH_FIGURES}
    fitted = [row for row in rows if row["figure"] not in launch_labels]
    for figure in measured_figures(frame):
        fitted += _measured_rows(frame, figure, groups, base)
    launch_rows = [row for row in rows if row["figure"] in launch_labels]
    table = pd.DataFrame([*fitted, *launch_rows], columns=list(FIGURE_TABLE_COLUMNS))
    table.attrs["baseline"] = base
    return table
