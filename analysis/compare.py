"""Groups of runs side by side — machines, single runs, or the values of a fact such as the numpy version —
each fitted figure (or measured case) per group with its ratio to a baseline group (new ÷ baseline as times:
a rate inverted), and whether it changed, judged run against run (``analysis.verdicts``: each run's own
figure is one value, the ratio's interval against an equivalence band after a Benjamini–Hochberg correction
over every figure of the table).

Every family's headline figure is compared: the fitted CPU figures and bandwidths, the GPU launch figures,
and the measured ones no fit gives (``measured_figures``: many vs one at the most pieces, the decode step's
overhead floor, each numpy op's fixed cost, the decode step itself). Groups are ordered, and the default
baseline chosen, by the time of each group's first run (``in_time_order``), never by the order the runs were
named in, so swapping two paths never flips a ratio.

Groups take the machines' place: the frame's ``machine_id`` is replaced by each run's group label
(``Groups.relabel``), so every family fits, predicts and compares per group with the code that serves
machines; the verdicts read each run of a group apart (its ``source``), so run-to-run variation is the
noise a difference is judged against.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import ops, verdicts
from analysis.cache import text_categorical
from analysis.decode import STATISTIC as DECODE_STATISTIC
from analysis.facts import BY_MACHINE, BY_RUN
from analysis.fits import Fits
from analysis.host import BANDWIDTH_OPS
from analysis.host import STATISTIC as HOST_STATISTIC
from analysis.memo import Memo
from analysis.steady import CLASSES, NO_STEADY_STATE, STEADY_COLUMNS, WARM_UP, warm_up_text
from analysis.trust import unstable_flags, worst_unstable
from analysis.verdicts import (
    MARK_BASELINE,
    MARK_CHANGED,
    MARK_INCONCLUSIVE,
    MARK_NO_BASELINE_POINT,
    MARK_NO_DATA,
    MARK_SAME,
)
from model.units import fmt_percent

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
#: says it), which test, the statistics no figure is taken from (the IQR is read: it tells unstable rounds). A
#: fleet's frame holds 10⁶ rows of each.
UNREAD_COLUMNS = frozenset(
    {
        "host",
        "system",
        "cpu_model",
        "gpu_name",
        "gpu_attributes",
        "pb_version",
        "name",
        "group",
        "max",
        "mean",
        "stddev",
        "q1",
        "q3",
        "ops",
        "iterations",
    }
)


def point_columns(frame: pd.DataFrame) -> list[str]:
    """The ``POINT_KEYS`` present in ``frame``, in that order."""
    return [key for key in POINT_KEYS if key in frame.columns]


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
        labels = run_labels([str(source) for source in runs["source"]], list(runs["run_datetime"]))
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


#: pytest-benchmark's names of saved runs: ``NNNN_<commit>[_uncommitted-changes]_<date>_<time>.json``
#: (--benchmark-autosave) or ``NNNN_<name>.json`` (--benchmark-save=NAME).
_SAVED_NAME = re.compile(
    r"^\d{4}_(?:(?P<commit>[0-9a-f]{40})(?P<dirty>_uncommitted-changes)?_\d{8}_\d{6}|(?P<save>.+))$"
)


def run_labels(sources: list[str], when: Sequence[object]) -> list[str]:
    """Each run's short label, as groups, legends and axes show it: a run pytest-benchmark saved is named by
    its start (UTC, month-day hour:minute) and commit, "12-05 04:42 ca1e63c" ("+" for uncommitted
    changes), or its save name where it has one; any other file by its name. Where two labels would be one,
    the seconds are added, then the run's number in its storage, then its file."""
    times = pd.to_datetime(pd.Series(list(when), dtype=object), utc=True, format="ISO8601", errors="coerce")
    names = [Path(source).name for source in sources]
    counts = pd.Series(names).value_counts()
    files = [name if counts[name] == 1 else source for name, source in zip(names, sources, strict=True)]
    choices = []  # each run's labels, shortest first
    for name, file, time in zip(names, files, times, strict=True):
        match = _SAVED_NAME.match(Path(name).stem)
        if match is None or pd.isna(time):
            choices.append([file])
            continue
        what = match["commit"][:7] + ("+" if match["dirty"] else "") if match["commit"] else match["save"]
        minute, second = time.strftime("%m-%d %H:%M"), time.strftime("%m-%d %H:%M:%S")
        choices.append([f"{minute} {what}", f"{second} {what}", f"{second} {what} #{name[:4]}", file])
    level = [0] * len(choices)
    while True:
        labels = [options[min(at, len(options) - 1)] for options, at in zip(choices, level, strict=True)]
        taken = pd.Series(labels).value_counts()
        clashes = [i for i, label in enumerate(labels) if taken[label] > 1 and level[i] < len(choices[i]) - 1]
        if not clashes:
            return labels
        for i in clashes:
            level[i] += 1


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
CASE_TABLE_COLUMNS = ("machine_id", "runs", "rounds", "ratio", "ratio_low", "ratio_high", "mark", "p_value")


def case_table(
    frame: pd.DataFrame,
    keys: Sequence[str],
    baseline: str | None,
    statistics: Sequence[str] = ("median",),
    threshold: float = verdicts.THRESHOLD,
) -> pd.DataFrame:
    """One row per measured case (the rows of ``frame`` that agree on ``keys``) and group (``machine_id``):
    each of ``statistics`` ("median": median over the group's runs of each run's median; "min": the
    fastest round of any run) in seconds as ``<statistic>_s``, the baseline group's as
    ``<statistic>_baseline_s``, their ratio as ``<statistic>_ratio``; ``ratio`` = the first statistic's;
    ``runs``, ``rounds`` (summed over runs); the verdict on the first statistic (``analysis.verdicts``:
    each run's statistic is one value) as ``mark``, ``ratio_low``/``ratio_high`` and the corrected
    ``p_value``; ``ratio`` then is the verdict's own estimate (the mean over runs), which its interval holds.

    Cases the baseline did not measure get ratio NaN and mark ``MARK_NO_BASELINE_POINT``.
    """
    keys = list(keys)
    groups = frame_groups(frame)
    base = choose_baseline(groups, baseline)
    frame = _with_sources(frame)
    stat_columns = [
        column for stat in statistics for column in (f"{stat}_s", f"{stat}_baseline_s", f"{stat}_ratio")
    ]
    judge = _Judge(frame, threshold)
    rows = []
    for case, rows_case in frame.groupby(keys, dropna=False, sort=True, observed=True):
        by_group = dict(tuple(rows_case.groupby("machine_id", sort=False, observed=True)))
        base_rows = by_group.get(base)
        base_values = {stat: _statistic(base_rows, stat) for stat in statistics}
        values, rounds = _run_values(rows_case, statistics[0], per_call=False)
        kind = verdicts.kind_of(str(rows_case["case"].iat[0])) if "case" in rows_case else "other"
        for group in groups:
            own = by_group.get(group)
            if own is None:
                continue
            verdict = -1
            if group == base:
                mark = MARK_BASELINE
            elif base_rows is None:
                mark = MARK_NO_BASELINE_POINT
            else:
                mark, verdict = judge.add(values, rounds, group, base, kind, _fewest_rounds(own, base_rows))
            row = dict(zip(keys, case if isinstance(case, tuple) else (case,), strict=True))
            row.update(machine_id=group, runs=int(own["source"].nunique()), rounds=_rounds(own))
            for stat in statistics:
                value = _statistic(own, stat)
                base_value = base_values[stat]
                row[f"{stat}_s"] = value
                row[f"{stat}_baseline_s"] = base_value
                row[f"{stat}_ratio"] = value / base_value if base_value > 0 else math.nan
            row.update(ratio=row[f"{statistics[0]}_ratio"], mark=mark, p_value=math.nan, _verdict=verdict)
            rows.append(row)
    table = pd.DataFrame(
        rows, columns=[*keys, *CASE_TABLE_COLUMNS[:3], *stat_columns, *CASE_TABLE_COLUMNS[3:], "_verdict"]
    )
    table = judge.apply(table, ratio_columns=(f"{statistics[0]}_ratio",))
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


def point_table(
    frame: pd.DataFrame, baseline: str | None, threshold: float = verdicts.THRESHOLD
) -> pd.DataFrame:
    """``case_table`` of launchbench's measured points (``POINT_KEYS``): median time per call (s, median over
    runs of each run's median) per group, ``median_s``, with its ratio and mark."""
    return case_table(frame, point_columns(frame), baseline, ("median",), threshold)


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
    """The rows of a ``case_table`` other than the baseline's, most telling first: changes, then the
    inconclusive, then the same, then those not judged, each by how far the ratio is from 1 (either way)."""
    others = table[table["mark"] != MARK_BASELINE]
    order = others["mark"].map({MARK_CHANGED: 0, MARK_INCONCLUSIVE: 1, MARK_SAME: 2}).fillna(3)
    distance = np.abs(np.log(pd.to_numeric(others["ratio"], errors="coerce").astype(float)))
    return (
        others.assign(_order=order, _distance=distance.fillna(-1.0))
        .sort_values(["_order", "_distance"], ascending=[True, False], kind="stable")
        .drop(columns=["_order", "_distance"])
    )


@dataclass(frozen=True)
class FigureSpec:
    """How one fitted figure is shown and judged across groups.

    ``column`` (and ``low``/``high``, its confidence bounds, or None) of the wide fit table ``table``;
    ``unit``: "s", "B/s", "elem/s" or "count"; ``unjudged``: why the figure is not judged (one derived from
    others), empty for a figure judged from each run's own fit (``analysis.verdicts``).
    """

    table: str
    column: str
    low: str | None
    high: str | None
    label: str
    unit: str
    unjudged: str = ""


#: Why n½ is not judged: it is t0·r∞, both judged.
DERIVED = "not judged: derived from the figures above"
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
    ),
    FigureSpec(
        "host",
        "cache_s_per_element",
        "cache_s_per_element_low",
        "cache_s_per_element_high",
        "per element, in cache",
        "s",
    ),
    FigureSpec(
        "host",
        "r_inf_per_s",
        "r_inf_low_per_s",
        "r_inf_high_per_s",
        "r∞, in cache",
        "elem/s",
    ),
    FigureSpec("host", "n_half", "n_half_low", "n_half_high", "n½ = t0·r∞", "count", DERIVED),
    FigureSpec(
        "host",
        "dram_s_per_element",
        "dram_s_per_element_low",
        "dram_s_per_element_high",
        "per element, from DRAM",
        "s",
    ),
    *(
        FigureSpec(
            "host",
            f"{op}_bytes_per_s",
            None,
            None,
            f"{op} bandwidth",
            "B/s",
        )
        for op in BANDWIDTH_OPS
    ),
)


def _launch_spec(quantity: str, label: str) -> FigureSpec:
    return FigureSpec("launch", quantity, f"{quantity}_low", f"{quantity}_high", label, "s")


#: The GPU launch family's figures (``analysis.launch.QUANTITIES``), in table order.
LAUNCH_FIGURES = (
    _launch_spec("launch_s", "cost per launch"),
    _launch_spec("sync_round_trip_s", "synchronise round trip"),
    _launch_spec("launch_sync_s", "launch + synchronise, per kernel"),
    _launch_spec("graph_node_s", "cost per graph node"),
    _launch_spec("graph_launch_s", "graph launch + synchronise"),
    _launch_spec("enqueue_s", "host enqueue per launch"),
    _launch_spec("graph_enqueue_s", "host enqueue per graph"),
    _launch_spec("gpu_gap_s", "GPU time per queued kernel"),
    _launch_spec("sync_s", "synchronise, idle stream"),
    _launch_spec("knee_s", "knee kernel duration"),
    _launch_spec(
        "ladder_cupy_s",
        "RawKernel launch, 0 arguments",
    ),
    _launch_spec("ladder_cupy_per_arg_s", "RawKernel cost per argument"),
    _launch_spec(
        "ladder_driver_s",
        "cuLaunchKernel, 0 arguments",
    ),
    _launch_spec(
        "ladder_driver_per_arg_s",
        "cuLaunchKernel cost per argument",
    ),
    _launch_spec("ladder_graph_s", "graph node, 0 arguments"),
    _launch_spec(
        "ladder_graph_per_arg_s",
        "graph node cost per argument",
    ),
)


def wide_calls(calls: pd.DataFrame) -> pd.DataFrame:
    """``analysis.frameworks.fit_calls``' table (one row per machine and caller) as one row per machine:
    columns ``machine_id``, then per caller c: ``t0_s c``, ``t0_s c_low``, ``t0_s c_high`` (s)."""
    if calls.empty:
        return pd.DataFrame(columns=["machine_id"])
    named = calls.assign(column="t0_s " + calls["caller"].astype(str))
    return _wide(named, "column", ("t0_s", "t0_low_s", "t0_high_s"))


def _wide(long: pd.DataFrame, names: str, values: tuple[str, str, str]) -> pd.DataFrame:
    """``long`` (one row per machine and figure, the figure's name in ``names``, its value, low and high in
    ``values``) as one row per machine: ``machine_id``, then per figure q: ``q``, ``q_low``, ``q_high``."""
    value, low, high = (long.pivot(index="machine_id", columns=names, values=column) for column in values)
    wide = pd.concat([value, low.add_suffix("_low"), high.add_suffix("_high")], axis=1).reset_index()
    wide.columns.name = None
    return wide


def _call_figures(wide: pd.DataFrame) -> list[FigureSpec]:
    """The dispatch ladder's figures: each caller's t0 (``wide_calls``), numpy's first."""
    callers = sorted(
        (column.removeprefix("t0_s ") for column in wide.columns if column.startswith("t0_s ")),
        key=lambda name: (not name.startswith("numpy"), name),
    )
    callers = [name for name in callers if not name.endswith(("_low", "_high"))]
    return [
        FigureSpec("calls", f"t0_s {name}", f"t0_s {name}_low", f"t0_s {name}_high", f"t0, {name} call", "s")
        for name in callers
    ]


def wide_launch(launch: pd.DataFrame) -> pd.DataFrame:
    """``analysis.launch.fit_launch``'s long table (one row per machine and quantity) as one row per machine:
    columns ``machine_id``, then per quantity q: ``q``, ``q_low``, ``q_high`` (s)."""
    if launch.empty:
        return pd.DataFrame(columns=["machine_id"])
    return _wide(launch, "quantity", ("value_s", "ci_low_s", "ci_high_s"))


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
    "kind",
    "machine_id",
    "value",
    "low",
    "high",
    "ratio",
    "ratio_low",
    "ratio_high",
    "mark",
    "p_value",
    "evidence",
    "unstable",
    "warm_up",
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
    figures += _framework_steps(frame)
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
#: The coordinates that tell one framework's decode step from another's (``analysis.frameworks``).
_FRAMEWORK_STEP_KEYS = ("device", "framework", "compiler", "threads", "config")


def _framework_steps(frame: pd.DataFrame) -> list[MeasuredFigure]:
    """One figure per framework's decode step (``framework_step``: device, framework, compiler or eager,
    threads, model), by the statistic ``analysis.frameworks`` compares them by: the fastest round on the
    CPU, the median on the GPU."""
    from analysis.frameworks import STEP_CASE, STEP_STATISTIC, caller

    rows = _rows_of(frame, frame["case"] == STEP_CASE, _FRAMEWORK_STEP_KEYS)
    if rows.empty or "framework" not in rows:
        return []
    keys = [key for key in _FRAMEWORK_STEP_KEYS if key in rows]
    configs = rows["config"].nunique() if "config" in rows else 1
    figures = []
    for values, _ in rows.groupby(keys, dropna=False, sort=True):
        coordinates = dict(zip(keys, values, strict=True))
        device = str(coordinates.get("device"))
        compiler = coordinates.get("compiler")
        words = [
            device.upper().replace("CUDA", "GPU"),
            *([str(coordinates["config"])] if configs > 1 and "config" in coordinates else []),
            caller(coordinates["framework"], coordinates.get("threads")),
            "eager" if pd.isna(compiler) else str(compiler),
        ]
        name = " ".join(words)
        match = tuple((key, None if pd.isna(value) else value) for key, value in coordinates.items())
        statistic = STEP_STATISTIC.get(device, "median_s").removesuffix("_s")
        figures.append(MeasuredFigure(f"framework step, {name}", name, STEP_CASE, match, statistic))
    return figures


def _rows_of(frame: pd.DataFrame, keep: pd.Series | np.ndarray, columns: Sequence[str]) -> pd.DataFrame:
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
    frame: pd.DataFrame,
    figure: MeasuredFigure,
    groups: Sequence[str],
    base: str,
    judge: _Judge,
    masks: dict[tuple[str, object], np.ndarray] | None = None,
) -> list[dict[str, object]]:
    """``FIGURE_TABLE_COLUMNS`` rows of one ``MeasuredFigure``: per group its value, the ratio to the
    baseline's, and its verdict (judged only where both groups measured the point alike: the same
    ``POINT_KEYS`` values). ``masks``: the rows of each (column, value) compared before, kept across the
    figures of one table (a fleet's 25 op figures select the same case's rows among 10⁵)."""
    masks = {} if masks is None else masks

    def rows_where(key: str, value: object) -> np.ndarray:  # as arrays: combined at numpy's cost, not pandas'
        if (key, value) not in masks:
            found = frame[key].isna() if value is None else frame[key] == value
            masks[key, value] = found.to_numpy(dtype=bool)
        return masks[key, value]

    keep = rows_where("case", figure.case)
    for key, value in figure.match:
        keep = keep & rows_where(key, value)
    read = [
        *point_columns(frame),
        "machine_id",
        "source",
        "data",
        "rounds",
        *STEADY_COLUMNS,
        figure.statistic,
        "median",
        "min",
        "iqr",
        *(["n_calls"] * figure.per_call),
    ]
    rows = _rows_of(frame, keep, list(dict.fromkeys(read)))
    points: np.ndarray | None = None  # each row's measured point: computed when a group is judged
    # Each group's row positions, and what each group's rows say, taken for all rows at once: a fleet's
    # figure has 10 groups of 100 runs, and pandas' selections per group were most of the table's time.
    where = rows.groupby("machine_id", sort=False, observed=True).indices
    statistic = pd.to_numeric(rows[figure.statistic], errors="coerce")
    if figure.per_call:
        statistic = statistic / pd.to_numeric(rows["n_calls"], errors="coerce")
    counts = _round_counts(rows)
    machines = rows["machine_id"].to_numpy()
    flagged = set(machines[unstable_flags(rows)])
    # The groups with a run of no steady state, or a warm-up left out (classified at loading), once.
    steady = rows["steady"].to_numpy(dtype=object) if "steady" in rows else np.full(len(rows), None)
    unsteady, warmed = set(machines[steady == NO_STEADY_STATE]), set(machines[steady == WARM_UP])
    base_at = where.get(base)
    numbers = statistic.to_numpy(dtype=float)  # each group's median from it: a Series a group cost 0.3 ms
    base_value = _median(numbers[base_at]) if base_at is not None else math.nan
    values, rounds = _run_values(rows, figure.statistic, figure.per_call)
    device = dict(figure.match).get("device")
    kind = verdicts.kind_of(figure.case, device=str(device) if device is not None else None)
    table = []
    for group in groups:
        at = where.get(group)
        if at is None:
            continue
        value = _median(numbers[at])
        verdict = -1
        if group == base:
            mark = MARK_BASELINE
        elif base_at is None:
            mark = "not judged: the baseline has no such figure"
        else:
            if points is None:  # the first group judged: the points, once
                points = _point_ids(rows).to_numpy()
            if set(points[at]) != set(points[base_at]):
                mark = "not judged: measured with other parameters than the baseline's"
            else:
                fewest = _fewest_of(counts, at, base_at)
                mark, verdict = judge.add(values, rounds, group, base, kind, fewest)
        table.append(
            {
                "figure": figure.label,
                "short": figure.short,
                "unit": "s",
                "kind": kind,
                "machine_id": group,
                "value": value,
                "low": math.nan,
                "high": math.nan,
                "ratio": value / base_value if base_value > 0 else math.nan,
                "mark": mark,
                "_verdict": verdict,
                "unstable": unstable_text(rows.iloc[at]) if group in flagged or group in unsteady else "",
                "warm_up": warm_up_text(rows.iloc[at]) if group in warmed else "",
            }
        )
    return table


def _median(values: np.ndarray) -> float:
    """The median of ``values`` leaving NaN out (NaN where all are), as ``pandas.Series.median`` has it."""
    known = values[~np.isnan(values)]
    return float(np.median(known)) if known.size else math.nan


def _fewest_of(counts: np.ndarray | None, *positions: np.ndarray) -> int:
    """``_fewest_rounds`` of the rows at each of ``positions`` (``counts``: every row's rounds, NaN where
    unknown; None where the rows do not say)."""
    return _fewest(counts[at] for at in positions) if counts is not None else _fewest(())


def unstable_text(rows: pd.DataFrame) -> str:
    """How unstable the worst of ``rows`` (a figure's rows in one group) is, "3.01× median/min, IQR 143 %"
    (``analysis.trust``'s rule), and "no steady state in 2 of 3 runs" where the rounds of some never settled
    (``analysis.steady``: classified at loading, rows read with their rounds); "" when neither."""

    parts = []
    worst = worst_unstable(rows)
    if worst is not None:
        median_over_min, iqr = worst
        spread = f", IQR {fmt_percent(iqr)} of the median" if math.isfinite(iqr) else ""
        parts.append(f"{median_over_min:.2f}× median/min{spread}")
    if "steady" in rows:
        unsteady = int((rows["steady"] == NO_STEADY_STATE).sum())
        if unsteady:
            parts.append(f"no steady state in {unsteady} of {int(rows['steady'].isin(CLASSES).sum())} run(s)")
    return "; ".join(parts)


def _run_values(
    rows: pd.DataFrame, statistic: str, per_call: bool
) -> tuple[pd.Series, dict[str, np.ndarray] | None]:
    """Each run's value of one figure measured at ``rows`` (indexed by the run's source): its ``statistic``
    (per numpy call where ``per_call``), the median over the run's rows; and for a median figure each run's
    rounds in the same unit (None for a fastest-round figure, whose rounds are never resampled)."""
    values = pd.to_numeric(rows[statistic], errors="coerce").astype(float)
    calls = pd.to_numeric(rows["n_calls"], errors="coerce").astype(float) if per_call else None
    if calls is not None:
        values = values / calls
    sources = rows["source"].astype(str)
    per_run = values.groupby(sources.to_numpy(), sort=False).median().dropna()
    per_run = per_run[per_run > 0]
    if statistic != "median" or "data" not in rows:
        return per_run, None
    rounds: dict[str, list[np.ndarray]] = {}
    for source, data, call in zip(
        sources, rows["data"], calls if calls is not None else [1.0] * len(rows), strict=True
    ):
        if isinstance(data, np.ndarray | list) and len(data) > 0:
            rounds.setdefault(source, []).append(np.asarray(data, dtype=float) / call)
    if set(rounds) < set(per_run.index):  # a run without its rounds: the run level only
        return per_run, None
    return per_run, {source: np.concatenate(parts) for source, parts in rounds.items()}


def _fewest_rounds(*groups: pd.DataFrame) -> int:
    """The fewest rounds any run of ``groups`` timed the point in (a large number where none says)."""
    return _fewest(counts for counts in map(_round_counts, groups) if counts is not None)


def _round_counts(rows: pd.DataFrame) -> np.ndarray | None:
    """Each row's rounds (NaN where unreadable), None where ``rows`` do not say."""
    return pd.to_numeric(rows["rounds"], errors="coerce").to_numpy(dtype=float) if "rounds" in rows else None


def _fewest(counts: Iterable[np.ndarray]) -> int:
    """The least of ``counts`` (rounds per row, NaN where unknown), or a large number where none is known."""
    known = [float(np.nanmin(part)) for part in counts if not np.isnan(part).all()]
    return int(min(known)) if known else 1 << 30


def _with_sources(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a ``source`` for every row: a frame made without one (a table built by hand) counts
    each group as one run."""
    return frame if "source" in frame else frame.assign(source=frame["machine_id"].astype(str))


class _Judge:
    """The verdicts of one table: each figure's evidence collected as its row is made (``add``), then every
    judged row corrected at once (``apply``: ``analysis.verdicts.correct`` across all of them)."""

    def __init__(
        self, frame: pd.DataFrame, threshold: float, evidence: Sequence[verdicts.Evidence] = ()
    ) -> None:
        self.threshold = threshold
        # One row per run: what the verdicts read of a run is the same on all its rows (a fleet's frame holds
        # 4·10⁶ rows, its runs 10⁵).
        runs = frame.drop_duplicates("source")
        sources = runs["source"].astype(str).to_numpy()
        self._group_of = dict(zip(sources, runs["machine_id"].astype(str), strict=True))
        self._sets = (
            pd.Series(runs["run_set"].astype(str).to_numpy(), index=sources) if "run_set" in runs else None
        )
        quick = runs["quick"] if "quick" in runs else pd.Series(False, index=runs.index)
        self._quick = dict(zip(sources, quick.astype(bool), strict=True))
        self._items: list[verdicts.Evidence] = list(evidence)  # collected before (``TablePart``)
        self._labelled: tuple[pd.Index, np.ndarray] | None = None
        self._spread_of: tuple[pd.Series, tuple[float, int, int]] | None = None
        self._read_of: tuple[pd.Series, tuple[np.ndarray, np.ndarray, bool]] | None = None

    @property
    def evidence(self) -> list[verdicts.Evidence]:
        """The evidence collected so far, numbered as ``add`` numbered it."""
        return list(self._items)

    def branch(self) -> _Judge:
        """A judge holding this one's evidence so far, which collects its own from there: a table's start
        (``TableStart``) may begin more than one table, and each corrects its own verdicts alone."""
        judge = copy.copy(self)
        judge._items = list(self._items)
        return judge

    def _labels(self, sources: pd.Index) -> np.ndarray:
        """The group of each of ``sources`` (None where unknown), kept for the next call: a figure's groups
        are judged one after another against the same runs (a fleet: 10³ runs, 10 groups, 400 figures)."""
        if self._labelled is None or self._labelled[0] is not sources:
            labels = np.array([self._group_of.get(source) for source in sources], dtype=object)
            self._labelled = (sources, labels)
        return self._labelled[1]

    def _read(self, values: pd.Series) -> tuple[np.ndarray, np.ndarray, bool]:
        """(each run's group, the runs' values as floats, whether any run is quick) of one figure's
        ``values``, kept for the next call: every group of a figure is judged on the same values."""
        if self._read_of is None or self._read_of[0] is not values:
            quick = any(self._quick.get(source, False) for source in values.index)
            self._read_of = (values, (self._labels(values.index), values.to_numpy(dtype=float), quick))
        return self._read_of[1]

    def _spread(self, values: pd.Series) -> tuple[float, int, int]:
        """``verdicts.spread`` of ``values`` (NaN, 0, 0 without run sets), kept for the next call: every
        group of a figure is judged on the same values."""
        if self._spread_of is None or self._spread_of[0] is not values:
            found = verdicts.spread(values, self._sets) if self._sets is not None else (math.nan, 0, 0)
            self._spread_of = (values, found)
        return self._spread_of[1]

    def add(
        self,
        values: pd.Series,
        rounds: Mapping[str, np.ndarray] | None,
        group: str,
        base: str,
        kind: str,
        fewest_rounds: int = 1 << 30,
        rate: bool = False,
    ) -> tuple[str, int]:
        """Collect the evidence of ``group`` against ``base`` from each run's value of the figure
        (``values``, by source; their ``rounds`` for a median figure): (a provisional mark, its number),
        or (why it is not judged, -1)."""
        if fewest_rounds < verdicts.MIN_ROUNDS:
            return f"not judged: {fewest_rounds} round(s) in a run (fewer than {verdicts.MIN_ROUNDS})", -1
        sides = []
        labels, numbers, quick = self._read(values)
        for label in (group, base):
            at = labels == label
            if not at.any():
                return MARK_NO_DATA, -1
            side_rounds = tuple(rounds[source] for source in values.index[at]) if rounds is not None else None
            sides.append(verdicts.Side(numbers[at], side_rounds))
        default = verdicts.SPREAD.get((kind, quick), verdicts.SPREAD[("op cost", quick)])
        measured, freedom, used = self._spread(values)
        if math.isfinite(measured) and measured > default:
            spread, spread_from = measured, f"{kind}: {used} runs of one commit in the storage, {freedom} df"
        else:
            spread, spread_from = default, f"{kind}: the default of {'quick' if quick else 'full'} runs"
        self._items.append(verdicts.evidence(sides[0], sides[1], spread, spread_from, rate))
        return "pending", len(self._items) - 1

    def apply(self, table: pd.DataFrame, ratio_columns: Sequence[str] = ()) -> pd.DataFrame:
        """``table`` (rows numbered by ``_verdict``) with the corrected marks, the ratio's interval and the
        adjusted p-value of every judged row; its ``ratio`` (and ``ratio_columns``) the verdict's estimate,
        which the interval holds. ``attrs["verdicts"]``: how many were judged and changed, at what level."""
        judged = verdicts.correct(self._items, self.threshold)
        table = table.assign(ratio_low=math.nan, ratio_high=math.nan, p_value=math.nan, evidence="")
        numbers = table.pop("_verdict").to_numpy()
        positions = np.flatnonzero(numbers >= 0)
        judged_rows = [int(numbers[position]) for position in positions]
        # Column by column, not row by row: a fleet's table judges 400 figures.
        for column, values in (
            ("mark", [judged.marks[number] for number in judged_rows]),
            ("ratio_low", [judged.low[number] for number in judged_rows]),
            ("ratio_high", [judged.high[number] for number in judged_rows]),
            ("p_value", [judged.adjusted_p[number] for number in judged_rows]),
            *(
                (column, [self._items[number].ratio for number in judged_rows])
                for column in ("ratio", *ratio_columns)
            ),
            ("evidence", [_evidence_text(self._items[number], self.threshold) for number in judged_rows]),
        ):
            if judged_rows:
                table.iloc[positions, table.columns.get_loc(column)] = values
        table.attrs["verdicts"] = judged
        return table


def _evidence_text(item: verdicts.Evidence, threshold: float) -> str:
    """One verdict's evidence in words: the runs a side, the spread and where it came from."""
    new, base = item.runs
    error = (
        "hierarchical bootstrap of runs and rounds"
        if item.bootstrap
        else f"run-to-run spread {item.spread:.1%} ({item.spread_from})"
    )
    smallest = item.smallest_change(threshold, verdicts.LEVEL)
    return f"{new} v {base} run(s); {error}; changes under {smallest:.0%} not judged"


def compared_table(
    frame: pd.DataFrame,
    fits: Fits,
    baseline: str | None,
    memo: Memo | None = None,
    threshold: float = verdicts.THRESHOLD,
    start: TableStart | None = None,
) -> pd.DataFrame:
    """``figure_table(frame, fits, baseline, threshold, start)``, read back from ``memo`` (``analysis.memo``)
    when it was computed before from the same rows, fits, baseline and threshold."""
    if memo is None:
        return figure_table(frame, fits, baseline, threshold, start)
    key = memo.key("figure_table", frame, fits, baseline, threshold)
    return memo.cached(key, lambda: figure_table(frame, fits, baseline, threshold, start))


def fitted_and_started(
    frame: pd.DataFrame,
    baseline: str,
    memo: Memo | None = None,
    threshold: float = verdicts.THRESHOLD,
    predictions: bool = False,
) -> tuple[Fits, TableStart | None]:
    """``fit_all(frame, predictions, memo)``, with the table's start (``table_part``) made by one of the
    forked workers that fit, beside the fits; None where none was forked (the fits were kept, or made here),
    and ``figure_table`` makes it."""
    from analysis.fits import Beside, fit_all

    beside = Beside((table_part, (frame, baseline, threshold)))
    fits = fit_all(frame, predictions=predictions, memo=memo, beside=beside)
    start = _table_begun(frame, baseline, threshold, beside.result[0]) if beside.result else None
    return fits, start


#: Units of figures that are rates (higher is faster): their time ratio is the baseline's ÷ this group's.
RATE_UNITS = frozenset({"B/s", "elem/s"})


def time_ratio(value: float, base_value: float, unit: str) -> float:
    """The ratio new ÷ baseline of a figure as a time ratio (> 1: slower): a rate is inverted; a count (n½)
    is the plain ratio."""
    if not (base_value > 0 and value > 0):
        return math.nan
    return base_value / value if unit in RATE_UNITS else value / base_value


def figure_table(
    frame: pd.DataFrame,
    fits: Fits,
    baseline: str | None,
    threshold: float = verdicts.THRESHOLD,
    start: TableStart | None = None,
) -> pd.DataFrame:
    """The comparison, long form: one row per headline figure of every family and group
    (``FIGURE_TABLE_COLUMNS``; the group in ``machine_id``, see the module docstring): the fitted CPU figures
    and bandwidths, the measured ones (``measured_figures``: many vs one, the decode step's floor, each
    numpy op's cost, the decode step), then the GPU launch figures.

    ``value``/``low``/``high`` in the figure's SI ``unit``; ``ratio`` new ÷ the baseline's as times (a rate
    inverted: > 1 is slower); ``mark`` the verdict (``analysis.verdicts``) from each run's own figure (its
    own fit, or its statistic), with ``ratio_low``/``ratio_high`` and the corrected ``p_value``;
    ``evidence`` says what it rested on. ``attrs["baseline"]`` names the baseline group,
    ``attrs["verdicts"]`` the correction (``analysis.verdicts.Judged``).

    ``start``: ``table_start(frame, baseline, threshold)``, made before (by a fitting worker,
    ``fitted_and_started``): the same table.
    """
    tables = {"host": fits.host, "launch": wide_launch(fits.launch), "calls": wide_calls(fits.calls)}
    specs = [
        spec
        for spec in (*HOST_FIGURES, *_call_figures(tables["calls"]), *LAUNCH_FIGURES)
        if spec.column in tables[spec.table].columns
    ]
    start = start if start is not None else table_start(frame, baseline, threshold, families=())
    groups, base, frame, judge = start.groups, start.base, start.frame, start.judge.branch()
    needed = {spec.table for spec in specs}
    per_run = {family: start.per_run[family] for family in needed & set(start.per_run)}
    per_run.update(_per_run_fits(frame, needed - set(per_run)))
    rows = []
    for spec in specs:
        table = tables[spec.table].set_index("machine_id", drop=False)
        base_fit = table.loc[base] if base in table.index else None
        base_value = float(base_fit[spec.column]) if base_fit is not None else math.nan
        run_table = per_run[spec.table]
        values = (
            pd.to_numeric(run_table[spec.column], errors="coerce").dropna()
            if spec.column in run_table
            else pd.Series(dtype=float)
        )
        values = values[values > 0]
        kind = verdicts.kind_of(
            {"launch": "launch", "calls": "framework_call"}.get(spec.table, "ufunc_size"),
            None if spec.table == "calls" else spec.column,
            "cuda" if spec.table == "launch" else None,
        )
        for group in groups:
            if group not in table.index:
                continue
            fit = table.loc[group]
            value = float(fit[spec.column])
            fit_error = fit.get("fit_error") if spec.column in LAW_FIGURES else None
            if math.isnan(value) and not isinstance(fit_error, str):
                continue
            verdict = -1
            if math.isnan(value):  # the law could not be fitted: the row stays and says why
                mark = f"not fitted: {fit_error}"
            elif group == base:
                mark = MARK_BASELINE
            elif math.isnan(base_value):
                mark = "not judged: the baseline has no such figure"
            elif spec.unjudged:
                mark = spec.unjudged
            else:
                mark, verdict = judge.add(values, None, group, base, kind, rate=spec.unit in RATE_UNITS)
            rows.append(
                {
                    "figure": spec.label,
                    "short": SHORT_NAMES.get(spec.column, spec.column.replace("t0_s ", "t0 ")),
                    "unit": spec.unit,
                    "kind": kind,
                    "machine_id": group,
                    "value": value,
                    "low": float(fit[spec.low]) if spec.low in fit.index else math.nan,
                    "high": float(fit[spec.high]) if spec.high in fit.index else math.nan,
                    "ratio": time_ratio(value, base_value, spec.unit),
                    "mark": mark,
                    "_verdict": verdict,
                    "unstable": "",  # a fit's points are many cases: their stability is the summary's
                    "warm_up": "",  # and so are their warm-ups
                }
            )
    launch_labels = {spec.label for spec in LAUNCH_FIGURES}
    fitted = [row for row in rows if row["figure"] not in launch_labels]
    fitted += start.measured
    launch_rows = [row for row in rows if row["figure"] in launch_labels]
    columns = [*FIGURE_TABLE_COLUMNS[:9], "mark", "_verdict", "unstable", "warm_up"]
    table = pd.DataFrame([*fitted, *launch_rows], columns=columns)
    table = judge.apply(table)[list(FIGURE_TABLE_COLUMNS)]
    table.attrs["baseline"] = base
    return table


@dataclass(frozen=True)
class TableStart:
    """What ``figure_table`` makes without the fits (``table_start``): the groups and the baseline, the
    frame with its sources, the verdicts' judge holding the measured figures' evidence, those figures'
    rows, and each family's per-run fits (by family)."""

    groups: list[str]
    base: str
    frame: pd.DataFrame
    judge: _Judge
    measured: list[dict[str, object]]
    per_run: dict[str, pd.DataFrame]


@dataclass(frozen=True)
class TablePart:
    """A ``TableStart`` as a worker sends it back (``table_part``): the measured figures' rows, their
    evidence (numbered as the rows' ``_verdict`` says) and the per-run fits; the rest is remade from the
    frame where it is received (``_table_begun``)."""

    measured: list[dict[str, object]]
    evidence: list[verdicts.Evidence]
    per_run: dict[str, pd.DataFrame]


def table_start(
    frame: pd.DataFrame,
    baseline: str | None,
    threshold: float = verdicts.THRESHOLD,
    families: Collection[str] = ("host", "calls"),
) -> TableStart:
    """The part of ``figure_table(frame, …, baseline, threshold)`` that needs no fit: the measured figures'
    rows and evidence, and the per-run fits of ``families``. Made beside the machines' fits
    (``fitted_and_started``), it is most of the table's time taken from after them; the verdicts come out
    the same, as the correction does not depend on the order in which the evidence came."""
    groups, base, frame, judge = _begun(frame, baseline, threshold)
    per_run = _per_run_fits(frame, set(families))
    masks: dict[tuple[str, object], np.ndarray] = {}
    measured = []
    for figure in measured_figures(frame):
        measured += _measured_rows(frame, figure, groups, base, judge, masks)
    return TableStart(groups, base, frame, judge, measured, per_run)


def table_part(frame: pd.DataFrame, baseline: str | None, threshold: float = verdicts.THRESHOLD) -> TablePart:
    """``table_start`` as a worker sends it back (``TablePart``)."""
    start = table_start(frame, baseline, threshold)
    return TablePart(start.measured, start.judge.evidence, start.per_run)


def _table_begun(frame: pd.DataFrame, baseline: str | None, threshold: float, part: TablePart) -> TableStart:
    """The ``TableStart`` of ``part``, received from a worker."""
    groups, base, frame, judge = _begun(frame, baseline, threshold, part.evidence)
    return TableStart(groups, base, frame, judge, part.measured, part.per_run)


def _begun(
    frame: pd.DataFrame, baseline: str | None, threshold: float, evidence: Sequence[verdicts.Evidence] = ()
) -> tuple[list[str], str, pd.DataFrame, _Judge]:
    """A table's groups, baseline, frame with sources and judge (holding ``evidence``, collected before)."""
    groups = frame_groups(frame)
    base = choose_baseline(groups, baseline)
    frame = _with_sources(frame)
    return groups, base, frame, _Judge(frame, threshold, evidence)


def _per_run_fits(frame: pd.DataFrame, families: set[str]) -> dict[str, pd.DataFrame]:
    """Each of ``families``' fit of every run alone (``machine_id`` = the run's source): the per-run figures
    a verdict rests on (``analysis.verdicts``), estimates alone (no verdict reads a run's own interval); the
    CPU laws of every run at once (``analysis.run_fits``: ``fit_host``'s and ``fit_calls``' estimates)."""
    from analysis.launch import fit_launch
    from analysis.run_fits import call_estimates, host_estimates

    if not families:
        return {}
    by_run = frame.assign(machine_id=frame["source"].astype(str))
    out = {}
    if "host" in families:
        out["host"] = host_estimates(by_run)
    if "calls" in families:
        out["calls"] = call_estimates(by_run)
    if "launch" in families:
        out["launch"] = wide_launch(fit_launch(by_run)).set_index("machine_id")
    return out
