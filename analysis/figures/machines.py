"""``machines``: every fitted figure of each machine against the baseline machine (``analysis.compare``'s
figure table), one row per figure.

A ratio is drawn as the comparison table states it (``analysis.compare.time_ratio``), so that text and figure
say one thing: new ÷ baseline as times, > 1 = slower (a rate inverted); n½ has no better side and is drawn as
this group ÷ baseline, its row says so. Filled markers: figures the verdict marks changed
(``analysis.verdicts``); hollow: the same, inconclusive or not judged. The groups are machines, runs or a
fact's values, as compare grouped them, and are called groups. Figures a group has no ratio for (not
measured, not fitted, the baseline lacks them) are listed under the figure, never dropped silently.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from analysis.figures.style import (
    TICK_PT,
    DirectLabel,
    Machines,
    direct_label,
    finish,
    panels,
    ratio_axis,
    side_legend,
)
from analysis.verdicts import MARK_CHANGED, MARK_INCONCLUSIVE, MARK_SAME

#: unit -> what its drawn ratio means.
_DIRECTION = {"s": "time", "B/s": "rate, inverted", "elem/s": "rate, inverted"}
_NEITHER = "count: neither side is better"
_ROW_IN = 0.34


def machines(table: pd.DataFrame) -> Figure | None:
    """The machine comparison as a dot plot (log x, 1 = equal to the baseline); nothing without a second
    machine that shares a figure with the baseline."""
    if table.empty:
        return None
    baseline = table.attrs["baseline"]
    others = table[table["machine_id"] != baseline].copy()
    ratio = others["ratio"].astype(float)
    others["oriented"] = [r if math.isfinite(r) and r > 0 else math.nan for r in ratio]
    drawn = others[np.isfinite(others["oriented"])]
    if drawn.empty:
        return None
    names = Machines.of([baseline, *others["machine_id"]])
    others_ids = [m for m in names.ids if m != baseline]
    figures = list(dict.fromkeys(drawn["figure"]))
    units = drawn.groupby("figure", sort=False)["unit"].first()
    figure, (ax,) = panels(1, 0.9 + _ROW_IN * len(figures) * (1 + 0.15 * min(len(others_ids), 6)))
    spread = 0.6 / max(1, len(others_ids))
    value_labels: list[DirectLabel] = []
    for k, machine in enumerate(others_ids):
        color, marker = names.style(machine)
        mine = drawn[drawn["machine_id"] == machine]
        rows = dict(zip(mine["figure"], zip(mine["oriented"], mine["mark"], strict=True), strict=True))
        # One line per machine and fill (changed or not): a fleet's figure has hundreds of points, and a
        # line per point made building and drawing it most of its cost, on the report's last step.
        points: dict[bool, tuple[list[float], list[float]]] = {False: ([], []), True: ([], [])}
        for position, name in enumerate(figures):
            if name not in rows:
                continue
            oriented, mark = rows[name]
            y = position + (k - (len(others_ids) - 1) / 2) * spread
            xs, ys = points[mark == MARK_CHANGED]
            xs.append(oriented)
            ys.append(y)
            if not names.panels:  # a few machines: each ratio also as a number, where it fits
                places = [(6, 0, "left", "center_baseline"), (-6, 0, "right", "center_baseline")]
                value_labels.append(direct_label(ax, f"{oriented:.2g}×", (oriented, y), places))
        for changed, (xs, ys) in points.items():
            if xs:
                face = color if changed else "white"
                ax.plot(xs, ys, marker, color=color, markerfacecolor=face, ms=6, zorder=3)
    ax.axvline(1.0, color="0.3", linewidth=1, zorder=1)
    labels = [f"{name}\n({_DIRECTION.get(units[name], _NEITHER)})" for name in figures]
    ax.set_yticks(range(len(figures)), labels, fontsize=TICK_PT)
    ax.set_ylim(len(figures) - 0.5, -0.5)
    for position in range(len(figures) - 1):
        ax.axhline(position + 0.5, color="0.9", linewidth=0.8, zorder=0)
    ratio_axis(ax, drawn["oriented"], "this group ÷ the baseline as times (rates inverted): > 1 = slower")
    _legend(figure, names, others_ids)
    caption = (
        f"Baseline: {names.label(baseline)}. Ratios as the compare table gives them: new ÷ baseline times, "
        "rates inverted, n½ plain. " + _left_out(table, others, baseline, names) + names.caption()
    )
    return finish(figure, _title(drawn, names, baseline, others_ids), caption, value_labels)


def _legend(figure: Figure, names: Machines, ids: list[str]) -> None:
    """The side legend: each group's marker, then filled = changed, hollow = not."""
    handles = [
        Line2D([], [], color=names.color(m), marker=names.marker(m), linestyle="none", ms=6) for m in ids
    ]
    texts = [names.label(m) for m in ids]
    handles += [
        Line2D([], [], color="0.3", marker="o", linestyle="none", ms=6),
        Line2D([], [], color="0.3", marker="o", markerfacecolor="white", linestyle="none", ms=6),
    ]
    texts += ["changed (outside the band)", "the same, inconclusive, or not judged"]
    side_legend(figure, handles, texts)


def _title(drawn: pd.DataFrame, names: Machines, baseline: str, others_ids: list[str]) -> str:
    directed = drawn[drawn["unit"].isin(list(_DIRECTION))]
    faster = int((directed["oriented"] < 1).sum())
    slower = int((directed["oriented"] > 1).sum())
    changed = int((directed["mark"] == MARK_CHANGED).sum())
    judged = directed["mark"].isin([MARK_CHANGED, MARK_SAME, MARK_INCONCLUSIVE]).sum()
    who = names.label(others_ids[0]) if len(others_ids) == 1 else f"{len(others_ids)} groups"
    pairs = "figures" if len(others_ids) == 1 else "figure–group pairs"
    title = (
        f"{who} against the baseline {names.label(baseline)}: faster on {faster}, slower on {slower} of "
        f"{len(directed)} {pairs}"
    )
    if judged:
        return title + f" ({changed} of {judged} judged changed)"
    return title + " (no difference judged)"


def _left_out(table: pd.DataFrame, others: pd.DataFrame, baseline: str, names: Machines) -> str:
    """The sentence naming each figure left out for a machine, and why."""
    # Plain columns, walked once: grouping the table per figure took a fifth of the figure's time.
    base: dict[str, object] = {}
    for figure, machine, value in zip(table["figure"], table["machine_id"], table["value"], strict=True):
        if machine == baseline:
            base.setdefault(figure, value)
    theirs: dict[str, list[tuple[str, float]]] = {}
    for figure, machine, oriented in zip(
        others["figure"], others["machine_id"], others["oriented"], strict=True
    ):
        theirs.setdefault(figure, []).append((machine, oriented))
    missing = []
    for figure in dict.fromkeys(table["figure"]):
        rows = theirs.get(figure, [])
        if figure not in base or not math.isfinite(float(base[figure])):
            missing.append(f"{figure} (the baseline has none)")
            continue
        present = {machine for machine, _ in rows}
        absent = [m for m in names.ids if m != baseline and m not in present]
        unusable = [machine for machine, oriented in rows if not math.isfinite(oriented)]
        who = [names.label(m) for m in absent] + [names.label(m) for m in unusable]
        if who:
            missing.append(f"{figure} (none on {', '.join(who)})")
    return ("Left out: " + "; ".join(missing) + ". ") if missing else ""


#: Most cases drawn in the cases figure (the text table and ``--top`` hold the rest).
CASES_DRAWN = 30


def cases(
    ratios: pd.DataFrame, baseline: str, statistics: tuple[str, ...] = ("median", "min")
) -> Figure | None:
    """Another suite's cases against the baseline group (``analysis.compare.case_ratios``, in its order: the
    changes first, then the farthest from 1), at most ``CASES_DRAWN`` of them: each group's ratio per case
    as this group ÷ baseline time (> 1 = slower, as the table), the first of ``statistics`` as a marker
    (filled where the verdict marks it changed), the second as a bar from 1. Nothing when no case has a
    ratio."""
    drawn = ratios[np.isfinite(ratios["ratio"].astype(float)) & (ratios["ratio"].astype(float) > 0)]
    if drawn.empty:
        return None
    main, *other = statistics
    names = Machines.of([baseline, *drawn["machine_id"]])
    groups = [m for m in names.ids if m != baseline]
    shown = list(dict.fromkeys(drawn["case"]))[:CASES_DRAWN]
    figure, (ax,) = panels(1, 0.9 + _ROW_IN * len(shown) * (1 + 0.15 * min(len(groups), 6)))
    spread = 0.6 / max(1, len(groups))
    for k, group in enumerate(groups):
        color, marker = names.style(group)
        mine = drawn[drawn["machine_id"] == group]
        for position, case in enumerate(shown):
            y = position + (k - (len(groups) - 1) / 2) * spread
            rows = mine[mine["case"] == case].set_index("statistic")
            if main in rows.index:
                row = rows.loc[main]
                face = color if row["mark"] == MARK_CHANGED else "white"
                ax.plot(row["ratio"], y, marker, color=color, markerfacecolor=face, ms=6, zorder=3)
            for stat in other:
                if stat in rows.index:
                    ax.plot([1.0, rows.loc[stat, "ratio"]], [y, y], color=color, linewidth=2, alpha=0.4)
    ax.axvline(1.0, color="0.3", linewidth=1, zorder=1)
    ax.set_yticks(range(len(shown)), [_short_case(case) for case in shown], fontsize=TICK_PT)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ratio_axis(
        ax, drawn["ratio"].astype(float), f"this group ÷ baseline, {main} time per round: > 1 = slower"
    )
    _legend(figure, names, groups)
    main_rows = drawn[drawn["statistic"] == main]
    faster = int((main_rows["ratio"] < 1).sum())
    slower = int((main_rows["ratio"] > 1).sum())
    changed = int((main_rows["mark"] == MARK_CHANGED).sum())
    total = main_rows["case"].nunique()
    more = f"; the {len(shown)} drawn first" if total > len(shown) else ""
    title = (
        f"{total} cases against the baseline {names.label(baseline)}: faster in {faster}, slower in {slower} "
        f"case–group pairs ({changed} changed){more}"
    )
    caption = (
        f"Markers: the {main} of the rounds; "
        + (f"bars from 1: the {' and '.join(other)}. " if other else "")
        + "Cases matched by their full test name; ordered as the compare table orders them. "
        + names.caption()
    )
    return finish(figure, title, caption)


def _short_case(name: str, most: int = 48) -> str:
    """A case's full test name, cut from the left (the test and its parameters are at the right)."""
    return name if len(name) <= most else "…" + name[-(most - 1) :]
