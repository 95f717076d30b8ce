"""Comparison tables for people (aligned text, Markdown) and for scripts (CSV, JSON).

One table reads well at 2 groups and at 20: the groups are columns while there are at most
``WIDE_MAX_GROUPS`` of them (each cell the figure with its interval, its ratio to the baseline and one mark
symbol), and rows past that (each cell the ratio and the mark; the baseline's row holds the values; the
figures wrapped into blocks of at most ``LINE_WIDTH`` characters). Groups are named by a letter and listed
once above the table; each mark is one symbol (``SYMBOLS``), explained once below it, with every reason a
cell was not judged. Cases (any suite's, or launchbench's measured points) are one row per case and group,
the telling ones first (``analysis.compare.ranked``), ``top`` of them.

CSV and JSON carry the same tables in SI units (seconds, B/s, elements/s) with the p-values, NaN as empty
(CSV) or null (JSON); numbers are formatted only for people, through ``model.units``.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis import verdicts
from analysis.compare import Group, ranked
from analysis.intervals import positive_interval
from analysis.trust import STABILITY_RULE
from analysis.verdicts import MARK_BASELINE, MARK_CHANGED, MARK_INCONCLUSIVE, MARK_SAME
from model.tables import format_table
from model.units import fmt_count, fmt_rate, fmt_si, fmt_time

#: Up to this many groups are columns; past it, rows.
WIDE_MAX_GROUPS = 2
#: Widest line a rows-layout block may take, characters.
LINE_WIDTH = 110

#: One symbol per mark; every other mark ("not judged: …", "not fitted: …") shows as ``SYMBOL_UNJUDGED``.
SYMBOLS = {MARK_CHANGED: "*", MARK_SAME: "=", MARK_INCONCLUSIVE: "~", MARK_BASELINE: ""}
SYMBOL_UNJUDGED = "?"

#: Formatter of each unit a figure table uses.
FORMATTERS: dict[str, Callable[[float], str]] = {
    "s": fmt_time,
    "B/s": fmt_rate,
    "elem/s": lambda value: fmt_si(value, "elem/s"),
    "count": fmt_count,
}


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Lines of a Markdown table; ``|`` inside a cell is escaped."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    return [line(header), "|" + "|".join("---" for _ in header) + "|", *(line(row) for row in rows)]


def with_interval(value: float, low: float, high: float, unit: str) -> str:
    """A positive figure with its interval in brackets (``analysis.intervals.positive_interval``: a bound the
    fit could not set is said, never printed as a negative number); "n/a" for a value that is not a finite
    number > 0, which no figure of these tables can be."""
    fmt = FORMATTERS[unit]
    if not (math.isfinite(value) and value > 0):
        return "n/a"
    if math.isnan(low) or math.isnan(high):
        return fmt(value)
    return f"{fmt(value)} [{positive_interval(low, high, fmt)}]"


def symbol(mark: str) -> str:
    """The one-symbol form of a mark."""
    return SYMBOLS.get(mark, SYMBOL_UNJUDGED)


def _ratio(ratio: float) -> str:
    return "× n/a" if not math.isfinite(ratio) else f"×{ratio:#.3g}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> list[str]:
    return markdown_table(header, rows) if markdown else format_table(header, rows).splitlines()


def group_lines(groups: Sequence[Group], by: str, markdown: bool, rule: str = "") -> list[str]:
    """The groups, once: letter, label, and how many runs (of how many machines) each pools; which is the
    baseline and by what ``rule`` it was chosen (``analysis.compare.Groups.rule``); with one group only,
    how to get more."""
    if len(groups) == 1:
        hint = "; --by run sets its runs side by side" if by != "run" and len(groups[0].runs) > 1 else ""
        return [f"One group only (by {by}): {groups[0].label}, nothing to compare it with{hint}."]
    chosen = f": {rule}" if rule else ""
    lines = [f"Groups (by {by}; ratios are to {groups[0].code}, the baseline{chosen}):"]
    bullet = "- " if markdown else "  "
    for group in groups:
        machines = f" of {len(group.machines)} machines" if len(group.machines) > 1 else ""
        runs = f"{len(group.runs)} run{'s' if len(group.runs) != 1 else ''}{machines}"
        lines.append(f"{bullet}{group.code}  {group.label} ({runs})")
    return lines


def legend_lines(
    marks: pd.Series, names: pd.Series, markdown: bool, judged: verdicts.Judged | None = None
) -> list[str]:
    """What each symbol in use means, once, with how the verdicts were reached (``judged``: the
    correction's counts); for "?" every reason, with the rows it applies to."""
    bullet = "- " if markdown else "  "
    used = set(marks)
    lines = []
    if judged is not None and judged.judged:
        band = f"±{judged.threshold:.0%}"
        lines.append(
            f"{bullet}ratios: new ÷ baseline as times (a rate inverted), > 1 slower; a verdict rests on each "
            f"run's own figure, the run the unit of evidence: {judged.judged} figures judged, "
            f"{judged.changed} changed (Benjamini–Hochberg, false discovery rate "
            f"{verdicts.FALSE_DISCOVERY:.0%}; band {band}, --threshold)"
        )
    if MARK_CHANGED in used:
        lines.append(
            f"{bullet}* changed: the ratio's interval lies wholly outside the band (false-coverage-adjusted "
            "level, Benjamini & Yekutieli 2005)"
        )
    if MARK_SAME in used:
        lines.append(f"{bullet}= the same: the ratio's 95 % interval lies wholly inside the band")
    if MARK_INCONCLUSIVE in used:
        lines.append(
            f"{bullet}~ inconclusive: the ratio's interval reaches past the band's edge: more runs a side "
            "would tell"
        )
    reasons: dict[str, list[str]] = {}
    for mark, name in zip(marks, names, strict=True):
        if symbol(mark) == SYMBOL_UNJUDGED:
            reasons.setdefault(mark, [])
            if name not in reasons[mark]:
                reasons[mark].append(name)
    for reason, where in reasons.items():
        lines.append(f"{bullet}? {reason} ({', '.join(where)})")
    return lines


def change_lines(table: pd.DataFrame, groups: Sequence[Group], markdown: bool) -> list[str]:
    """The largest change from the baseline of each kind of figure (``analysis.verdicts.kind_of``: t0, op
    costs, decode steps, GPU launches, …), largest first (by how far the ratio is from 1, either way), each
    with its direction in words, its interval and, where its rounds were unstable, how much: what a reader
    looks for first, above the table that holds every figure in family order. One line saying so when no
    judged figure changed; none when nothing was judged or there is no second group."""
    if len(groups) < 2:
        return []
    codes = {group.label: group.code for group in groups}
    others = table[table["machine_id"].isin(codes) & (table["machine_id"] != groups[0].label)]
    judged = int(others["mark"].isin([MARK_CHANGED, MARK_SAME, MARK_INCONCLUSIVE]).sum())
    if not judged:
        return []
    changed = others[others["mark"] == MARK_CHANGED]
    if changed.empty:
        same = int((others["mark"] == MARK_SAME).sum())
        return [
            f"No change: none of the {judged} judged figures lies outside the band ({same} the same, "
            f"{judged - same} inconclusive)."
        ]
    distance = np.abs(np.log(pd.to_numeric(changed["ratio"], errors="coerce").astype(float)))
    by_size = changed.loc[distance.sort_values(ascending=False, kind="stable").index]
    shown = by_size.drop_duplicates("kind") if "kind" in by_size else by_size.head(1)
    base = table[table["machine_id"] == groups[0].label].drop_duplicates("figure").set_index("figure")
    bullet = "- " if markdown else "  "
    kinds = f"{len(shown)} kind{'s' if len(shown) != 1 else ''}"
    lines = [
        f"Largest change of each kind of figure ({kinds}; {len(changed)} changed in all, every figure below):"
    ]
    for row in shown.itertuples(index=False):
        fmt = FORMATTERS[row.unit]
        before = float(base["value"].get(row.figure, math.nan))
        who = f"{codes[row.machine_id]}  " if len(groups) > 2 else ""
        was = f"{fmt(before)} → " if math.isfinite(before) else ""
        interval = f" [{row.ratio_low:#.3g}–{row.ratio_high:#.3g}]" if math.isfinite(row.ratio_low) else ""
        unstable = _unstable_note(table, row.figure, row.machine_id, groups[0].label, codes)
        moved = f"{was}{fmt(row.value)} {verdicts.direction(row.ratio)}{interval}"
        lines.append(f"{bullet}{who}{row.figure}: {moved}{unstable}")
    return lines


def _unstable_note(table: pd.DataFrame, figure: str, group: str, base: str, codes: Mapping[str, str]) -> str:
    """ "; unstable in B: 3.01× median/min, …" for each of the two groups whose rounds of ``figure`` were."""
    if "unstable" not in table:
        return ""
    rows = table[(table["figure"] == figure) & table["machine_id"].isin([base, group])]
    notes = [
        f"unstable in {codes[str(row.machine_id)]}: {row.unstable}"
        for row in rows.itertuples(index=False)
        if row.unstable
    ]
    return f"; {'; '.join(notes)}" if notes else ""


#: Most unstable measurements named above a comparison's table (``unstable_lines``).
UNSTABLE_SHOWN = 6


def unstable_lines(table: pd.DataFrame, groups: Sequence[Group], markdown: bool) -> list[str]:
    """The compared figures whose rounds were unstable in a group (``analysis.trust``'s rule), worst
    first: a verdict on them rests on rounds that did not settle. (A figure unsteady only, with no
    median/min to rank it by, sorts last.)"""
    title = f"Unstable measurements ({{}}; {STABILITY_RULE}; or rounds with no steady state):"
    return _noted_figures(table, groups, markdown, "unstable", r"^([0-9.]+)×", title)


def warm_up_lines(table: pd.DataFrame, groups: Sequence[Group], markdown: bool) -> list[str]:
    """The measured figures some of whose runs in a group began with a warm-up (``analysis.steady``): its
    rounds were left out of the figure at loading, counted here, most first."""
    title = "Warm-ups left out of measured figures ({}; the rounds before their level settled):"
    return _noted_figures(table, groups, markdown, "warm_up", r"^([0-9]+) ", title)


def _noted_figures(
    table: pd.DataFrame, groups: Sequence[Group], markdown: bool, column: str, rank: str, title: str
) -> list[str]:
    """The rows of ``table`` (groups' figures) with a note in ``column``, at most ``UNSTABLE_SHOWN``, the
    largest first by the number the regular expression ``rank`` takes from the note, under ``title`` (its
    ``{}``: how many)."""
    if column not in table:
        return []
    codes = {group.label: group.code for group in groups}
    rows = table[(table[column] != "") & table["machine_id"].isin(codes)]
    if rows.empty:
        return []
    bullet = "- " if markdown else "  "
    ranked = rows.assign(_rank=rows[column].str.extract(rank, expand=False).astype(float))
    ranked = ranked.sort_values("_rank", ascending=False, kind="stable")
    lines = [title.format(len(rows))]
    lines += [
        f"{bullet}{codes[machine]}  {figure}: {note}"
        for machine, figure, note in ranked.head(UNSTABLE_SHOWN)[["machine_id", "figure", column]].itertuples(
            index=False
        )
    ]
    if len(rows) > UNSTABLE_SHOWN:
        lines.append(f"{bullet}and {len(rows) - UNSTABLE_SHOWN} more")
    return lines


def figure_lines(
    table: pd.DataFrame, groups: Sequence[Group], by: str, markdown: bool, rule: str = ""
) -> list[str]:
    """The fitted figures of ``analysis.compare.figure_table`` (groups in ``machine_id``) for people: the
    groups (``group_lines``), the largest changes (``change_lines``), then every figure."""
    if table.empty:
        return ["No fitted figure to compare (no case that a family could fit)."]
    labels = {group.label: group.code for group in groups}
    table = table[table["machine_id"].isin(labels)]
    lines = [*group_lines(groups, by, markdown, rule), ""]
    changes = change_lines(table, groups, markdown)
    if changes:
        lines += [*changes, ""]
    unstable = unstable_lines(table, groups, markdown)
    if unstable:
        lines += [*unstable, ""]
    warm_ups = warm_up_lines(table, groups, markdown)
    if warm_ups:
        lines += [*warm_ups, ""]
    if len(groups) <= WIDE_MAX_GROUPS:
        lines += _figures_as_columns(table, groups, markdown)
    else:
        lines += _figures_as_rows(table, groups, markdown)
    figure_names = table["short"] if len(groups) > WIDE_MAX_GROUPS else table["figure"]
    lines += ["", *legend_lines(table["mark"], figure_names, markdown, table.attrs.get("verdicts"))]
    evidence = table.loc[table["evidence"] != "", "evidence"].drop_duplicates()
    if not evidence.empty:
        lines.append(f"{'- ' if markdown else '  '}evidence:")
        indent = "  - " if markdown else "      "
        lines += [f"{indent}{text}" for text in evidence]
    lines.append(
        f"{'- ' if markdown else '  '}figures' intervals: 95 % bootstrap over runs (over the points of one "
        "run); CPU figures from each case's fastest round (min), never resampled, GPU launch figures from "
        "the median of the rounds"
    )
    return lines


def _figures_as_columns(table: pd.DataFrame, groups: Sequence[Group], markdown: bool) -> list[str]:
    header = ["figure", *(f"{g.code} (baseline)" if i == 0 else g.code for i, g in enumerate(groups))]
    rows = []
    for figure, rows_figure in table.groupby("figure", sort=False):
        by_group = rows_figure.set_index("machine_id")
        cells = [f"{figure} ({rows_figure['unit'].iloc[0]})"]
        for index, group in enumerate(groups):
            if group.label not in by_group.index:
                cells.append("—")
                continue
            row = by_group.loc[group.label]
            if math.isnan(row["value"]):  # a figure the fit could not give: its mark says why
                cells.append(SYMBOL_UNJUDGED)
                continue
            text = with_interval(row["value"], row["low"], row["high"], row["unit"])
            if index > 0:
                text += f" {_ratio(row['ratio'])} {symbol(row['mark'])}"
            cells.append(text)
        rows.append(cells)
    return _table(header, rows, markdown)


def _figures_as_rows(table: pd.DataFrame, groups: Sequence[Group], markdown: bool) -> list[str]:
    """One row per group, one column per figure: the baseline's values, the others' ratios and marks; the
    figures wrapped into blocks that fit ``LINE_WIDTH`` (one table in Markdown, which does not wrap)."""
    figures = list(dict.fromkeys(table["short"]))
    # Each (figure, group) row's cells read once from the columns: a lookup per cell through pandas cost a
    # fleet's report a tenth of a second.
    found = {
        (short, group): (value, unit, ratio, mark)
        for short, group, value, unit, ratio, mark in zip(
            table["short"],
            table["machine_id"],
            table["value"],
            table["unit"],
            table["ratio"],
            table["mark"],
            strict=True,
        )
    }
    cells: dict[str, list[str]] = {}
    for short in figures:
        column = []
        for index, group in enumerate(groups):
            if (short, group.label) not in found:
                column.append("—")
                continue
            value, unit, ratio, mark = found[short, group.label]
            if math.isnan(value):
                column.append(SYMBOL_UNJUDGED)
            elif index == 0:
                column.append(FORMATTERS[unit](value))
            else:
                column.append(f"{_ratio(ratio)} {symbol(mark)}")
        cells[short] = column
    units = dict(zip(table["short"], table["unit"], strict=True))
    header_of = {short: f"{short} ({units[short]})" for short in figures}
    codes = [f"{g.code} (base)" if i == 0 else g.code for i, g in enumerate(groups)]
    blocks = [figures] if markdown else _blocks(figures, cells, header_of, max(len(c) for c in codes))
    lines: list[str] = []
    for block in blocks:
        rows = [[code, *(cells[short][i] for short in block)] for i, code in enumerate(codes)]
        lines += [
            *([""] if lines else []),
            *_table(["group", *(header_of[s] for s in block)], rows, markdown),
        ]
    names = table[["short", "figure"]].drop_duplicates()
    lines += ["", "Figures: " + "; ".join(f"{r.short}: {r.figure}" for r in names.itertuples(index=False))]
    return lines


def _blocks(
    figures: list[str], cells: dict[str, list[str]], header_of: dict[str, str], label_width: int
) -> list[list[str]]:
    """``figures`` in consecutive blocks whose columns fit ``LINE_WIDTH`` beside the group column."""
    blocks: list[list[str]] = [[]]
    width = label_width
    for short in figures:
        column = max(len(header_of[short]), *(len(cell) for cell in cells[short])) + 2
        if blocks[-1] and width + column > LINE_WIDTH:
            blocks.append([])
            width = label_width
        blocks[-1].append(short)
        width += column
    return blocks


def case_lines(
    table: pd.DataFrame,
    groups: Sequence[Group],
    by: str,
    keys: Sequence[str],
    statistics: Sequence[str],
    markdown: bool,
    top: int | None,
    rule: str = "",
) -> list[str]:
    """The cases of ``analysis.compare.case_table`` for people: one row per case and group other than the
    baseline, changes first, then by how far the ratio is from 1 (``ranked``); the first
    ``top`` rows (all when None). Each statistic shows as "baseline → this ×ratio"."""
    codes = {group.label: group.code for group in groups}
    rows_ranked = ranked(table)
    shown = rows_ranked if top is None else rows_ranked.head(top)
    several = len(groups) > 2
    header = ["case", *(["group"] if several else []), *statistics, "runs", ""]
    rows = []
    for row in shown.to_dict("records"):
        cells = [case_name(row, keys)]
        if several:
            cells.append(codes.get(row["machine_id"], "?"))
        for stat in statistics:
            before, value = row[f"{stat}_baseline_s"], row[f"{stat}_s"]
            text = f"{fmt_time(before)} → {fmt_time(value)}" if math.isfinite(before) else fmt_time(value)
            cells.append(f"{text} {_ratio(row[f'{stat}_ratio'])}")
        cells += [str(row["runs"]), symbol(row["mark"])]
        rows.append(cells)
    lines = [*group_lines(groups, by, markdown, rule), ""]
    if not rows:
        return (
            lines
            if len(groups) == 1
            else [*lines, "No case measured in both the baseline and another group."]
        )
    lines += _table(header, rows, markdown)
    if len(shown) < len(rows_ranked):
        lines.append(
            f"… and {len(rows_ranked) - len(shown)} more rows (shown: the first {len(shown)}, changes "
            "first, then by how far the ratio is from 1; --top N)"
        )
    names = [case_name(row, keys) for row in shown.to_dict("records")]
    lines += [
        "",
        *legend_lines(shown["mark"], pd.Series(names, dtype=object), markdown, table.attrs.get("verdicts")),
    ]
    return lines


def case_name(row: dict[str, object], keys: Sequence[str]) -> str:
    """A case's name in a table: its fullname, or launchbench's point coordinates."""
    if list(keys) == ["fullname"]:
        return str(row["fullname"])
    parts = []
    for key in keys:
        value = row.get(key)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if key == "case":
            parts.append(str(value))
        elif key != "device" or value != "cpu":
            text = fmt_count(value) if isinstance(value, float) and value.is_integer() else str(value)
            parts.append(f"{key}={text}")
    return " ".join(parts)


def with_codes(table: pd.DataFrame, groups: Sequence[Group]) -> pd.DataFrame:
    """A comparison table for scripts: the group's label as ``group`` and its letter as ``code``, the
    baseline's label as ``baseline``; SI values as they are."""
    codes = {group.label: group.code for group in groups}
    out = table.rename(columns={"machine_id": "group"})
    position = list(out.columns).index("group")
    out.insert(position + 1, "code", out["group"].map(codes))
    return out.assign(baseline=groups[0].label)


def csv_text(table: pd.DataFrame) -> str:
    """``table`` as CSV (NaN as an empty field; tuples and lists as JSON)."""
    buffer = io.StringIO()
    _scriptable(table).to_csv(buffer, index=False, lineterminator="\n")
    return buffer.getvalue()


def json_text(document: dict[str, object]) -> str:
    """``document`` as JSON; DataFrames become lists of records, NaN becomes null."""
    return json.dumps(
        _plain(document), indent=1, allow_nan=False
    )  # ASCII: µ as \u00b5, whatever the terminal


def _scriptable(table: pd.DataFrame) -> pd.DataFrame:
    return table.apply(lambda column: column.map(_cell) if column.dtype == object else column)


def _cell(value: object) -> object:
    if isinstance(value, tuple | list | np.ndarray):
        return json.dumps(_plain(list(value)))
    return value


def _plain(value: object) -> object:
    """``value`` with DataFrames as records, numpy scalars as Python numbers and NaN as None."""
    if isinstance(value, pd.DataFrame):
        return [_plain(record) for record in value.to_dict("records")]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NaT or (not isinstance(value, str | int | float | bool) and pd.isna(value)):
        return None
    return value
