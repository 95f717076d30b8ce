"""Which saved runs may be pooled: unlike runs are never averaged together.

A quick run (fewer sizes and rounds), a partial one (interrupted: cases cut off or never run) and a
second copy of one run (same measurements: a copy, a hard link, ``--benchmark-json`` beside
``--benchmark-autosave``) would each bias a pooled figure or narrow its confidence interval without
cause. ``select_runs`` keeps the complete full runs, counts duplicates once, and names every run it leaves
out in one line with the flag that would include it. A machine that has only quick runs is reported from
them rather than not at all: its id carries "(quick)" (``QUICK_MARK``) into every table, figure and report,
and a full run of it, once there is one, replaces them. A run of a ``-k`` / ``-m`` selection is complete for
what it selected: it is pooled, and the families it lacks are named. A completed run's failed cases are set
aside one by one and the rest of it is pooled.

Machines: ``analysis.load`` composes each run's ``machine_id`` from its facts (host, OS, CPU, GPU). Runs
whose ids agree but whose logical CPU counts differ (a resized VM), or that differ in a recorded setting (BLAS
threads, a thread variable, numpy or Python version, governor: ``--pool`` pools those, naming what differs),
are kept apart here, and a stored ``machine_id`` that covers several machines by their facts is named.
"""

from __future__ import annotations

import json
from collections import namedtuple
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from analysis.load import LoadResult
from analysis.schema import printable
from analysis.trust import condensed_conditions, condition_lines

#: At most this many file names in the line that lists the runs used.
LISTED_RUNS = 8
#: What a machine id carries when its figures come from quick runs only, or from quick runs pooled with
#: full ones (``--include-quick``).
QUICK_MARK = " (quick)"
QUICK_POOLED_MARK = " (with quick runs)"


@dataclass(frozen=True)
class Selection:
    """What ``select_runs`` decided.

    ``result``: the pooled runs only (frame, files, runs; the load problems as loaded), machine ids with
    conflicting facts told apart; ``left_out``: one line per run left out, naming the file, why, and the flag
    that includes it; ``notes``: machines kept apart, unfinished cases set aside, selections that lack
    families, runs whose conditions are unknown, busy machines and faults of the runs used; ``conditions``:
    ``analysis.trust.condition_lines`` of the runs used, which the notes hold and a report puts first (taken
    once: a fleet's 10³ runs took half a second).
    """

    result: LoadResult
    left_out: tuple[str, ...]
    notes: tuple[str, ...]
    conditions: Mapping[str, list[str]]


def select_runs(
    result: LoadResult,
    include_quick: bool = False,
    include_partial: bool = False,
    apart: str | None = None,
    pool: bool = False,
) -> Selection:
    """Keep the runs of ``result`` that may be pooled; see the module docstring. ``include_quick`` /
    ``include_partial`` pool quick / partial runs too (a partial run's unfinished cases are always set
    aside); duplicates are always counted once. ``apart``: a column of ``result.runs`` whose values are
    kept apart (a comparison's groups, e.g. a fact): equal measurements with different values there are
    not duplicates. ``pool``: pool runs of one machine that differ in a recorded setting (named in a note)
    instead of keeping them apart (``_split_by_settings``)."""
    runs = result.runs.reset_index(drop=True)
    frame = result.frame
    notes: list[str] = []
    runs, frame = _split_by_core_count(runs, frame, notes)
    notes.extend(_stored_id_conflicts(runs))  # before the settings split: that one names its own reason
    runs, frame = _split_by_settings(runs, frame, notes, pool)
    left_out: list[str] = []
    keep: list[str] = []
    candidates = without_duplicates(runs, left_out, apart)
    with_full = set(candidates.loc[~candidates["quick"].fillna(False).astype(bool), "machine_id"])
    for run in _rows(candidates):
        if run.quick and not include_quick and run.machine_id in with_full:
            left_out.append(
                f"{run.source}: left out: a quick run (--quick; {run.quick_basis}) of a machine with full "
                "runs: fewer sizes and rounds than a full run; --include-quick pools it"
            )
            continue
        partial = _partial(run)
        if partial and not include_partial:
            left_out.append(f"{run.source}: left out: a partial run ({partial}); --include-partial pools it")
            continue
        keep.append(run.source)
    used = runs[runs["source"].isin(keep)].reset_index(drop=True)
    kept = set(keep)
    every = len(kept) == len(result.files_used)  # each file is one run: all kept (a fleet's usual case)
    frame = frame.copy(deep=False) if every else frame[frame["source"].isin(keep)]  # no copy of 10⁶ rows
    used, frame = _mark_quick(used, frame, notes)
    frame, set_aside = without_unfinished(frame, used)
    notes.extend(set_aside)
    notes.extend(_lacking_families(used))
    conditions = condition_lines(used)
    notes.extend(_run_notes(used, conditions))
    files = result.files_used if every else tuple(p for p in result.files_used if printable(p) in kept)
    pooled = replace(result, frame=frame.reset_index(drop=True), files_used=files, runs=used)
    return Selection(result=pooled, left_out=tuple(left_out), notes=tuple(notes), conditions=conditions)


def selection_lines(selection: Selection) -> list[str]:
    """The runs used (how many, of how many machines, which files), then every left-out line and note."""
    runs = selection.result.runs
    machines = runs["machine_id"].nunique()
    head = f"Runs used: {len(runs)} ({machines} machine{'s' if machines != 1 else ''})"
    if len(runs):
        head += f": {_names(runs['source'], LISTED_RUNS)}"
    return [head, *selection.left_out, *selection.notes]


def _partial(run: object) -> str | None:
    """Why ``run`` is partial (interrupted: cases were cut off or never ran), or None.

    A run that completed with failed cases is not partial: the failed cases are set aside one by one
    (``without_unfinished``) and the rest of the run is pooled, so one failing CUDA case does not hide the
    CPU results measured beside it.
    """
    if run.status != "interrupted":
        return None
    by = f" by {run.interrupted_by}" if run.interrupted_by else ""
    measured, planned = _whole(run.measured), _whole(run.planned)
    known = measured is not None and planned is not None
    counts = f": {measured} of {planned} planned cases measured" if known else ""
    return f"interrupted{by}{counts}"


def _whole(value: object) -> int | None:
    """A count as a whole number (a column of counts with a gap holds floats: 10.0), None when missing."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() else None


def without_duplicates(runs: pd.DataFrame, left_out: list[str], apart: str | None = None) -> pd.DataFrame:
    """``runs`` with each measurement once per machine (equal ``digest``; and per value of the column
    ``apart``, when given): the copy with raw samples, else with a run record, else the first. (A run
    relabelled as another machine is that machine's data, kept.)"""
    key = ["machine_id", "digest", *([apart] if apart else [])]
    ranked = runs.assign(_order=range(len(runs))).sort_values(
        ["has_samples", "has_record", "_order"], ascending=[False, False, True], kind="stable"
    )
    first = ranked.drop_duplicates(key)
    kept = {
        tuple(values): source
        for *values, source in zip(
            *(first[column].tolist() for column in key), first["source"].tolist(), strict=True
        )
    }
    for run in ranked[ranked.duplicated(key)].sort_values("_order").to_dict("records"):
        original = kept[tuple(run[column] for column in key)]
        left_out.append(
            f"{run['source']}: left out: the same measurements as {original} (a copy or a second save of "
            "one run): counted once"
        )
    return first.sort_values("_order").drop(columns="_order")


def _split_by_core_count(
    runs: pd.DataFrame, frame: pd.DataFrame, notes: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Give runs of one ``machine_id`` with different logical CPU counts distinct ids ("… (4 logical CPUs)"),
    with one note per machine split."""
    renamed: dict[str, str] = {}
    for machine_id, group in runs.groupby("machine_id", sort=False):
        counts = sorted({int(c) for c in group["logical_cpus"] if pd.notna(c)})
        if len(counts) < 2:
            continue
        new_ids = []
        for run in group.itertuples(index=False):
            if pd.notna(run.logical_cpus):
                renamed[run.source] = f"{machine_id} ({int(run.logical_cpus)} logical CPUs)"
                new_ids.append(renamed[run.source])
        notes.append(
            f"machine {machine_id}: runs with {', '.join(map(str, counts))} logical CPUs are kept apart as "
            f"{len(counts)} machines: {'; '.join(dict.fromkeys(new_ids))}"
        )
    return _renamed(runs, frame, renamed)


def _split_by_settings(
    runs: pd.DataFrame, frame: pd.DataFrame, notes: list[str], pool: bool
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Give runs of one ``machine_id`` that differ in a recorded setting (``analysis.facts.run_settings``:
    BLAS and its threads, numpy, Python, governor, thread variables) distinct ids, "<id> [OMP_NUM_THREADS=1]",
    named by the settings that differ, with one note per machine split; with ``pool``, keep them together
    and say what the pooled runs differ in. A setting one run records and another does not (saved before
    it was recorded) does not split them."""
    renamed: dict[str, str] = {}
    if "settings" not in runs:
        return runs, frame
    for machine_id, group in runs.groupby("machine_id", sort=False):
        settings = [json.loads(text) if isinstance(text, str) else {} for text in group["settings"]]
        names = sorted({name for setting in settings for name in setting})
        differ = [
            name for name in names if len({setting.get(name) for setting in settings if name in setting}) > 1
        ]
        if not differ:
            continue
        labels = [
            ", ".join(f"{name}={setting.get(name, 'not recorded')}" for name in differ)
            for setting in settings
        ]
        counts = pd.Series(labels).value_counts(sort=False)
        listed = "; ".join(
            f"{label}: {count} run{'s' if count != 1 else ''}" for label, count in counts.items()
        )
        if pool:
            notes.append(
                f"machine {machine_id}: pools runs that differ in {', '.join(differ)} (--pool): {listed}"
            )
            continue
        new_ids = {label: f"{machine_id} [{label}]" for label in counts.index}
        renamed.update(
            (source, new_ids[label]) for source, label in zip(group["source"], labels, strict=True)
        )
        notes.append(
            f"machine {machine_id}: runs that differ in {', '.join(differ)} are kept apart as {len(new_ids)} "
            f"groups ({listed}); --pool pools them"
        )
    return _renamed(runs, frame, renamed)


def _mark_quick(
    runs: pd.DataFrame, frame: pd.DataFrame, notes: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Give each machine whose used runs include quick ones the id "<id> (quick)" (only quick runs) or
    "<id> (with quick runs)" (pooled with full ones), with one note per machine, so that no table, figure or
    report shows figures of quick runs as a full run's."""
    renamed: dict[str, str] = {}
    for machine_id, group in runs.groupby("machine_id", sort=False):
        quick = group["quick"].fillna(False).astype(bool)
        if not quick.any():
            continue
        only = bool(quick.all())
        new_id = f"{machine_id}{QUICK_MARK if only else QUICK_POOLED_MARK}"
        renamed.update(dict.fromkeys(group["source"], new_id))
        what = (
            f"only quick runs ({int(quick.sum())}): its figures come from fewer sizes and rounds; a full run "
            "of it replaces them"
            if only
            else f"{int(quick.sum())} quick run(s) pooled with {int((~quick).sum())} full one(s) "
            "(--include-quick)"
        )
        notes.append(f"machine {machine_id}: {what}; shown as {new_id}")
    return _renamed(runs, frame, renamed)


def _renamed(
    runs: pd.DataFrame, frame: pd.DataFrame, renamed: Mapping[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``runs`` and ``frame`` with the ``machine_id`` of every run in ``renamed`` (source -> new id) replaced,
    in both, so that a run and its rows keep one id."""
    if not renamed:
        return runs, frame

    def ids(table: pd.DataFrame) -> list[str]:
        # As object arrays first: iterating a text column's Series element by element took 50 ms a frame of
        # 67,000 rows (a fleet's report renames every row once).
        sources, machines = (table[key].to_numpy(dtype=object) for key in ("source", "machine_id"))
        return [renamed.get(s, m) for s, m in zip(sources, machines, strict=True)]

    return runs.assign(machine_id=ids(runs)), frame.assign(machine_id=ids(frame))


def _stored_id_conflicts(runs: pd.DataFrame) -> list[str]:
    """One note per ``machine_id`` stored in runs whose facts make them different machines."""
    notes = []
    stored = runs.dropna(subset=["stored_machine_id"])
    for stored_id, group in stored.groupby("stored_machine_id", sort=False):
        ids = list(dict.fromkeys(group["machine_id"]))
        if len(ids) < 2:
            continue
        differ = [
            f"{label} {' vs '.join(map(str, dict.fromkeys(group[column])))}"
            for column, label in (
                ("host", "host"),
                ("system", "OS"),
                ("cpu_model", "CPU"),
                ("gpu_name", "GPU"),
                ("logical_cpus", "logical CPUs"),
            )
            if group[column].nunique(dropna=False) > 1
        ]
        notes.append(
            f"stored machine_id {stored_id!r} covers {len(ids)} machines by their facts "
            f"({'; '.join(differ)}): kept apart as {'; '.join(ids)}"
        )
    return notes


def without_unfinished(frame: pd.DataFrame, runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` without the cases its runs list as unfinished (cut off or failed: their rounds are not the
    ones asked for), and one note per run that had such a case saved."""
    notes = []
    drop = pd.Series(False, index=frame.index)
    for source, unfinished in zip(runs["source"].tolist(), runs["unfinished"].tolist(), strict=True):
        if not unfinished:
            continue
        cases = (frame["source"] == source) & frame["fullname"].isin(unfinished)
        if cases.any():
            drop |= cases
            notes.append(
                f"{source}: {int(cases.sum())} unfinished case(s) set aside (cut off or failed): "
                f"{_names(frame.loc[cases, 'fullname'])}"
            )
    return (frame[~drop] if drop.any() else frame.copy(deep=False)), notes


def _lacking_families(runs: pd.DataFrame) -> list[str]:
    """One note per run of a ``-k``/``-m`` selection that lacks families other runs used hold."""
    every = set().union(*runs["families"].tolist()) if len(runs) else set()
    notes = []
    for run in _rows(runs, ("source", "selected_by", "families", "status")):
        if not run.selected_by:  # the only runs that may lack families (read first: 10⁵ runs of a fleet)
            continue
        lacking = sorted(every - set(run.families))
        if lacking:
            # Only a completed selection is complete for what it selected; a partial one (pooled with
            # --include-partial) is named partial where its cases are set aside.
            complete = ", complete for what it selected" if run.status != "interrupted" else ", interrupted"
            notes.append(
                f"{run.source}: a selection of the suite ({run.selected_by}){complete}; "
                f"it lacks {', '.join(lacking)}"
            )
    return notes


def _run_notes(runs: pd.DataFrame, conditions: Mapping[str, list[str]]) -> list[str]:
    """The runs used whose conditions are unknown (one line); each busy run's verdict, its drift in speed
    and its speed against its machine's other runs (``conditions``: ``condition_lines`` of ``runs``); each
    run's faults."""
    notes = []
    legacy = runs[~runs["has_record"].astype(bool)]
    if not legacy.empty:
        notes.append(
            f"{len(legacy)} run(s) saved without a run record (before it existed): their conditions (load, "
            f"other processes, interruptions) are unknown: {_names(legacy['source'])}"
        )
    said, left = condensed_conditions(conditions, len(runs))
    notes.extend(said)
    for run in _rows(runs, ["source", "faults"]):
        notes.extend(f"{run.source}: {line}" for line in left.get(run.source, ()))
        notes.extend(f"{run.source}: fault during the run: {fault}" for fault in run.faults)
    return notes


def _rows(table: pd.DataFrame, columns: Sequence[str] | None = None) -> list[tuple]:
    """``table.itertuples(index=False)`` (of ``columns``, default all), read column by column: pandas hands
    out a text column's values one call each, which took seconds for a fleet's 10⁵ runs."""
    names = list(table.columns if columns is None else columns)
    row = namedtuple("Pandas", names, rename=True)
    return [row(*values) for values in zip(*(table[name].tolist() for name in names), strict=True)]


def _names(names: Iterable[str], most: int = 3) -> str:
    names = names.tolist() if isinstance(names, pd.Series) else list(names)
    return ", ".join(names[:most]) + (f", and {len(names) - most} more" if len(names) > most else "")
