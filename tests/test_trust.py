"""How far analysis trusts what it reads: the busy-machine verdict, unstable cases, which runs it pools
(quick, partial, duplicate, conflicting machines, selections) and impossible numbers, which never reach
a table.

Every run here is a real saved run from tests/data, altered inside the test as each test says (a run record
added with the conditions a test needs, a case's value replaced, a fact changed); nothing is saved as data.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.compare import Group, figure_table, group_code
from analysis.fits import fit_all
from analysis.host import fit_host
from analysis.intervals import positive_interval
from analysis.load import RUN_RECORD_KEY, SUITE, load_doc, load_runs
from analysis.render import figure_lines
from analysis.runs import select_runs, selection_lines
from analysis.summary import host_section as summary_section
from analysis.summary import summary_lines
from analysis.trust import (
    CONDENSE_ABOVE,
    IQR_OVER_MEDIAN_LIMIT,
    MEDIAN_OVER_MIN_LIMIT,
    condensed_conditions,
    stability,
    unstable_line,
    verdict,
)
from model.units import fmt_time
from tests.test_load import write_json as write
from tests.test_plots_collisions import _fanout

DATA = Path(__file__).parent / "data"
XEON_FULL = DATA / "cpu-2core-full.json"
XEON_QUICK = DATA / "cpu-2core-quick.json"
EPYC_FULL = DATA / "cpu-2core-epyc-full.json"
#: A number printed with a minus sign in front of a digit: no interval of a time, rate or count may hold one.
NEGATIVE_NUMBER = re.compile(r"(?<![\w+])-\d|−\d")


def real(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def with_record(doc: dict, **changes: object) -> dict:
    """``doc`` with a run record as ``benchmarks/run_record.py`` writes it for a completed full run of every
    case it holds, quiet machine; ``changes`` replace top-level keys, ``conditions``/``cases`` merge."""
    doc = copy.deepcopy(doc)
    names = [bench["fullname"] for bench in doc["benchmarks"]]
    record = {
        "version": 1,
        "quick": False,
        "selection": {"args": ["benchmarks"], "keyword": None, "markexpr": None, "deselected": 0},
        "benchmark_options": {},
        "status": "completed",
        "interrupted_by": None,
        "exit_status": 0,
        "started": doc["datetime"],
        "ended": doc["datetime"],
        "cases": {
            "planned": len(names),
            "measured": len(names),
            "failed": 0,
            "skipped": 0,
            "not_run": 0,
            "skip_reasons": {},
            "unfinished": [],
        },
        "conditions": {
            "usable_cpus": 2,
            "start": {"load_avg": [0.1, 0.1, 0.1]},
            "end": {"load_avg": [0.9, 0.3, 0.1]},
            "during": {
                "wall_s": 30.0,
                "other_cpu_s": 0.6,
                "other_cpu_share": 0.01,
                "steal_s": 0.0,
                "steal_share": 0.0,
            },
            "gpu_slowdown": [],
        },
        "facts": {},
        "faults": [],
    }
    for key, value in changes.items():
        if key in ("conditions", "cases", "during"):
            target = record["conditions"]["during"] if key == "during" else record[key]
            target.update(value)
        else:
            record[key] = value
    doc[RUN_RECORD_KEY] = record
    return doc


# --- the run judges itself ---------------------------------------------------------------------------------


def test_a_quiet_run_has_no_verdict_and_a_busy_one_says_what_was_seen() -> None:
    quiet = load_doc(with_record(real(XEON_FULL)), "quiet.json")
    assert verdict(quiet.runs.iloc[0].to_dict()) is None
    assert not any("Busy machine" in line for line in summary_lines(quiet.frame, quiet.runs))

    busy_doc = with_record(
        real(XEON_FULL),
        during={"other_cpu_share": 0.48, "steal_share": 0.07},
        conditions={"start": {"load_avg": [2.01, 1.5, 1]}},
    )
    busy = load_doc(busy_doc, "busy.json")
    line = verdict(busy.runs.iloc[0].to_dict())
    assert line == (
        "Busy machine: other processes took 48% of the 2 usable CPUs' time (limit 10%); the hypervisor stole "
        "7% of their time (limit 5%); load average 2.01 at start on 2 usable CPUs: figures may be inflated"
    )
    lines = summary_lines(busy.frame, busy.runs)
    assert lines[0] == line  # the first line of the summary
    throttled = load_doc(
        with_record(real(XEON_FULL), conditions={"gpu_slowdown": ["hw_slowdown"]}), "gpu.json"
    )
    assert "the GPU slowed down (hw_slowdown)" in verdict(throttled.runs.iloc[0].to_dict())


def test_a_run_without_a_record_says_its_conditions_are_unknown_once() -> None:
    legacy = load_doc(real(XEON_FULL), "legacy.json")
    lines = summary_lines(legacy.frame, legacy.runs)
    assert lines[0] == "Conditions unknown: the run was saved without a run record"
    assert sum("Conditions unknown" in line for line in lines) == 1
    selection = select_runs(load_runs([XEON_FULL, EPYC_FULL], samples=False))
    (note,) = [line for line in selection.notes if "without a run record" in line]
    assert str(XEON_FULL) in note and str(EPYC_FULL) in note


def test_a_legacy_run_whose_load_when_saved_reached_the_cpus_is_busy() -> None:
    doc = real(XEON_FULL)
    doc["machine_info"][SUITE]["load_avg"] = [2.01, 1.2, 0.8]  # as the contended run saved it
    run = load_doc(doc, "loaded.json").runs.iloc[0].to_dict()
    assert (
        verdict(run) == "Busy machine: load average 2.01 when saved on 2 usable CPUs: figures may be inflated"
    )


def test_an_interrupted_run_says_so_in_its_summary() -> None:
    doc = real(XEON_FULL)
    cut = doc["benchmarks"][-1]["fullname"]
    doc = with_record(
        doc,
        status="interrupted",
        interrupted_by="SIGINT (Ctrl-C)",
        cases={"measured": 39, "unfinished": [cut]},
    )
    loaded = load_doc(doc, "cut.json")
    lines = summary_lines(loaded.frame, loaded.runs)
    assert (
        "Interrupted by SIGINT (Ctrl-C): 39 of 40 planned cases measured; the figures below cover those only"
        in lines
    )
    assert f"1 case(s) did not finish (set aside): {cut}" in lines


def test_stability_figures_are_the_stats_ratios_and_unstable_cases_are_named() -> None:
    frame = load_runs([XEON_FULL], samples=False).frame
    table = stability(frame)
    doc = real(XEON_FULL)
    by_name = {bench["name"]: bench["stats"] for bench in doc["benchmarks"]}
    for row in table.itertuples(index=False):
        stats = by_name[row.name]
        assert row.median_over_min == pytest.approx(stats["median"] / stats["min"])
        assert row.iqr_over_median == pytest.approx(stats["iqr"] / stats["median"])
        assert row.unstable == (
            stats["median"] / stats["min"] >= MEDIAN_OVER_MIN_LIMIT
            or stats["iqr"] / stats["median"] >= IQR_OVER_MEDIAN_LIMIT
        )
    assert list(table.loc[table["unstable"], "name"]) == ["test_ufunc_size[n4096-x16]"]  # IQR 46 % of median
    line = unstable_line(table)
    assert line.startswith(
        "Unstable cases: 1 of 40 case measurements (unstable: the median of its rounds ≥ 1.5 ×"
    )
    assert "IQR ≥ 30% of the median" in line
    assert "test_ufunc_size[n4096-x16] (1.07× median/min, IQR 46% of median)" in line
    assert line in summary_lines(frame)


# --- analysis never pools unlike runs ----------------------------------------------------------------------


def test_compare_of_tests_data_names_the_runs_it_used_and_left_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["compare", str(DATA), "--no-samples"]) == 0
    out = capsys.readouterr().out.splitlines()
    # The full runs of today's code (tests/data/runs-xeon, tests/data/sentinel) are of the machine of the
    # quick runs of tests/data/aa and aa-sentinel: those are left out now, each named with the flag that
    # pools it. So are the EPYC VM's quick runs of 2026-12-07 (sentinel-epyc, numpy 2.4.6): a full run of the
    # same setting (tests/data/fanout, the fleets' source) is beside them, unlike tests/data/runs' setting.
    assert out[0].startswith(f"Runs used: 10 (5 machines): {DATA / 'cpu-2core-epyc-full.json'}, ")
    quick = [line for line in out if "left out: a quick run (--quick;" in line]
    # aa, aa-sentinel, cpu-2core-quick.json, sentinel/quiet-quick-*, sentinel-epyc
    assert len(quick) == 12 + 10 + 1 + 3 + 13
    assert all(line.endswith("--include-quick pools it") for line in quick)
    assert (
        f"{XEON_QUICK}: left out: a quick run (--quick; no run record: ufunc_size/many_vs_one max_time "
        "0.1 s) of a machine with full runs: fewer sizes and rounds than a full run; --include-quick pools it"
    ) in out
    assert any(line.startswith("2 run(s) saved without a run record") for line in out)
    assert any("loaded-from-midway-full.json: Busy machine" in line for line in out)
    assert main(["compare", str(DATA), "--no-samples", "--include-quick"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("Runs used: 49 (5 machines)")


def test_the_legacy_quick_rule_reads_the_cpu_cases_time_budget() -> None:
    runs = load_runs([XEON_FULL, XEON_QUICK, EPYC_FULL], samples=False).runs.set_index("source")
    assert runs.loc[str(XEON_QUICK), "quick"] and not runs.loc[str(XEON_FULL), "quick"]
    assert not runs.loc[str(EPYC_FULL), "quick"]
    only_decode = real(XEON_QUICK)
    only_decode["benchmarks"] = [
        b for b in only_decode["benchmarks"] if b["extra_info"]["case"] == "decode_step"
    ]
    run = load_doc(only_decode, "decode-only.json").runs.iloc[0]
    assert not run["quick"] and "taken as full" in run["quick_basis"]


def test_a_copy_and_a_hard_link_count_once_and_change_no_figure(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(XEON_FULL, folder / "a.json")
    shutil.copy(XEON_FULL, folder / "b-copy.json")
    os.link(folder / "a.json", folder / "c-link.json")
    selection = select_runs(load_runs([folder], samples=True))
    assert list(selection.result.runs["source"]) == [str(folder / "a.json")]
    assert len(selection.left_out) == 2
    assert all(
        "left out: the same measurements as" in line and "counted once" in line for line in selection.left_out
    )
    alone = fit_host(load_runs([XEON_FULL], samples=True).frame)
    pooled = fit_host(selection.result.frame)
    for column in ("t0_s", "t0_low_s", "t0_high_s"):
        assert pooled[column].iloc[0] == alone[column].iloc[0]


def test_one_stored_machine_id_with_two_oses_or_core_counts_is_kept_apart(tmp_path: Path) -> None:
    linux = real(XEON_FULL)
    windows = copy.deepcopy(linux)
    windows["machine_info"]["system"] = "Windows"  # the same host name and CPU under another OS
    resized = copy.deepcopy(linux)
    resized["machine_info"][SUITE]["logical_cpus"] = 4  # the VM given two more CPUs
    resized["benchmarks"][0]["stats"]["min"] *= 0.999  # a different measurement, not a copy
    files = [
        write(tmp_path / name, doc)
        for name, doc in (("l.json", linux), ("w.json", windows), ("r.json", resized))
    ]
    selection = select_runs(load_runs(files, samples=False))
    ids = set(selection.result.frame["machine_id"])
    stored = linux["machine_info"][SUITE]["machine_id"]
    assert ids == {
        "vm / Linux / Intel(R) Xeon(R) Processor / no GPU (2 logical CPUs)",
        "vm / Linux / Intel(R) Xeon(R) Processor / no GPU (4 logical CPUs)",
        "vm / Windows / Intel(R) Xeon(R) Processor / no GPU",
    }
    (split,) = [note for note in selection.notes if note.startswith("machine ")]
    assert "runs with 2, 4 logical CPUs are kept apart as 2 machines" in split
    (conflict,) = [note for note in selection.notes if note.startswith("stored machine_id")]
    assert conflict.startswith(
        f"stored machine_id {stored!r} covers 3 machines by their facts (OS Linux vs Windows;"
    )
    assert "logical CPUs 2 vs 4" in conflict


def test_partial_runs_are_left_out_and_pooled_without_their_unfinished_cases(tmp_path: Path) -> None:
    doc = real(XEON_FULL)
    cut = [bench["fullname"] for bench in doc["benchmarks"][:2]]
    partial = write(
        tmp_path / "partial.json",
        with_record(
            doc,
            status="interrupted",
            interrupted_by="SIGINT (Ctrl-C)",
            cases={"measured": 38, "planned": 52, "not_run": 12, "unfinished": cut},
        ),
    )
    full = write(tmp_path / "full.json", with_record(real(EPYC_FULL)))
    result = load_runs([partial, full], samples=False)
    selection = select_runs(result)
    assert list(selection.result.runs["source"]) == [str(full)]
    (line,) = selection.left_out
    assert line == (
        f"{partial}: left out: a partial run (interrupted by SIGINT (Ctrl-C): 38 of 52 planned cases "
        "measured); --include-partial pools it"
    )
    pooled = select_runs(result, include_partial=True)
    kept = pooled.result.frame[pooled.result.frame["source"] == str(partial)]
    assert len(kept) == len(doc["benchmarks"]) - 2 and not set(cut) & set(kept["fullname"])
    assert (
        f"{partial}: 2 unfinished case(s) set aside (cut off or failed): {cut[0]}, {cut[1]}" in pooled.notes
    )


def test_a_completed_run_with_failed_cases_is_pooled_without_them(tmp_path: Path) -> None:
    """One failing case (say a CUDA case on a faulty GPU) does not hide the rest of the run."""
    doc = real(XEON_FULL)
    failed = [doc["benchmarks"][0]["fullname"]]
    path = write(tmp_path / "failed.json", with_record(doc, cases={"failed": 1, "unfinished": failed}))
    selection = select_runs(load_runs([path], samples=False))
    assert not selection.left_out
    assert list(selection.result.runs["source"]) == [str(path)]
    assert failed[0] not in set(selection.result.frame["fullname"])
    assert f"{path}: 1 unfinished case(s) set aside (cut off or failed): {failed[0]}" in selection.notes


def test_a_selection_is_pooled_and_says_which_families_it_lacks(tmp_path: Path) -> None:
    doc = real(XEON_FULL)
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["extra_info"]["case"] == "ufunc_size"]
    subset = with_record(
        doc, selection={"args": ["benchmarks"], "keyword": "ufunc_size", "markexpr": None, "deselected": 22}
    )
    files = [write(tmp_path / "k.json", subset), write(tmp_path / "all.json", with_record(real(XEON_FULL)))]
    selection = select_runs(load_runs(files, samples=False))
    assert len(selection.result.runs) == 2
    assert (
        f"{files[0]}: a selection of the suite (-k 'ufunc_size'), complete for what it selected; it lacks "
        "decode_step, host_bandwidth, many_vs_one"
    ) in selection.notes
    assert selection_lines(selection)[0].startswith("Runs used: 2 (1 machine)")


def test_every_run_left_out_is_one_error_naming_the_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    partial = write(
        tmp_path / "partial.json",
        with_record(real(XEON_FULL), status="interrupted", cases={"measured": 38, "planned": 52}),
    )
    assert main(["compare", str(partial), "--no-samples"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"python -m analysis: {partial}: left out: a partial run")
    assert err[1] == (
        "python -m analysis: error: every run was left out (1, each named above); --include-quick and "
        "--include-partial pool quick and partial runs"
    )


def test_busy_runs_head_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    busy = write(
        tmp_path / "runs" / "busy.json", with_record(real(XEON_FULL), during={"other_cpu_share": 0.5})
    )
    assert main(["report", str(tmp_path / "runs"), "--no-samples", "--out", str(tmp_path / "out")]) == 0
    lines = (tmp_path / "out" / "report.md").read_text(encoding="utf-8").splitlines()
    assert lines[2].startswith(f"**{busy}: Busy machine: other processes took 50% of the 2 usable CPUs' time")
    assert f"- Runs used: 1 (1 machine): {busy}" in lines
    assert any(
        line.startswith("- vm / Linux / Intel(R) Xeon(R) Processor / no GPU: Unstable cases: 1 of 40")
        for line in lines
    )
    assert "1 run(s) used, 0 left out" in capsys.readouterr().out


# --- no impossible number reaches the user -----------------------------------------------------------------

IMPOSSIBLE = [
    ("stats", "min", 0.0, "stats.min = 0.0 (a time must be a finite number > 0 s)"),
    ("stats", "min", -1e-9, "stats.min = -1e-09 (a time must be a finite number > 0 s)"),
    ("stats", "median", math.nan, "stats.median = nan (a time must be a finite number > 0 s)"),
    ("stats", "mean", math.inf, "stats.mean = inf (a time must be a finite number > 0 s)"),
    ("stats", "max", "fast", "stats.max = 'fast' (a time must be a finite number > 0 s)"),
    ("stats", "iqr", -1.0, "stats.iqr = -1.0 (a spread must be a finite number ≥ 0 s)"),
    ("extra_info", "n", 0, "extra_info.n = 0 (must be a finite number > 0)"),
    ("extra_info", "pieces", 0, "extra_info.pieces = 0 (must be a finite number > 0)"),
    ("extra_info", "bytes", -8, "extra_info.bytes = -8 (must be a finite number > 0)"),
    ("extra_info", "n_calls", True, "extra_info.n_calls = True (must be a finite number > 0)"),
]


@pytest.mark.parametrize(("part", "key", "value", "said"), IMPOSSIBLE)
def test_an_impossible_value_drops_its_case_with_one_line(
    tmp_path: Path, part: str, key: str, value: object, said: str
) -> None:
    doc = real(XEON_FULL)
    many = [b for b in doc["benchmarks"] if b["extra_info"]["case"] == "many_vs_one"]
    bench = many[0]
    bench[part][key] = value
    path = write(tmp_path / "bad.json", doc)
    result = load_runs([path], samples=True)
    assert result.problems == (f"{path}: case {bench['fullname']}: dropped: {said}",)
    assert len(result.frame) == len(doc["benchmarks"]) - 1
    assert bench["fullname"] not in set(result.frame["fullname"])
    for column in ("min", "median", "mean", "max"):
        assert (result.frame[column] > 0).all() and result.frame[column].map(math.isfinite).all()


def test_statistics_out_of_order_and_bad_raw_samples(tmp_path: Path) -> None:
    doc = real(XEON_FULL)
    first, second = doc["benchmarks"][4], doc["benchmarks"][5]
    first["stats"]["min"] = first["stats"]["median"] * 2  # the fastest round slower than the median
    second["stats"]["data"][3] = -2.5e-5
    path = write(tmp_path / "odd.json", doc)
    result = load_runs([path], samples=True)
    disorder, samples = result.problems
    assert disorder.startswith(f"{path}: case {first['fullname']}: dropped: stats out of order: min ")
    count = len(second["stats"]["data"])
    assert samples == (
        f"{path}: case {second['fullname']}: raw samples left out: 1 of {count} are not finite and > 0 s "
        "(first: -2.5e-05); its statistics are used"
    )
    kept = result.frame.set_index("fullname").loc[second["fullname"]]
    assert kept["data"] is None and kept["min"] == second["stats"]["min"]


def test_a_nan_point_never_removes_the_t0_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = real(XEON_FULL)
    smallest = next(b for b in doc["benchmarks"] if b["extra_info"].get("n") == 4)
    smallest["stats"]["min"] = math.nan
    path = write(tmp_path / "runs" / "nan.json", doc)
    assert main(["compare", str(path), "--no-samples", "--format", "markdown"]) == 0
    captured = capsys.readouterr()
    assert f"case {smallest['fullname']}: dropped: stats.min = nan" in captured.err
    assert any(line.startswith("| t0, fixed cost per call (s) | ") for line in captured.out.splitlines())


def compared(frame) -> str:
    """The machine table of ``frame`` (machines as groups, in load order) as Markdown."""
    table = figure_table(frame, fit_all(frame), baseline=None)
    labels = list(dict.fromkeys(table["machine_id"]))
    groups = [Group(group_code(i), label, (), ()) for i, label in enumerate(labels)]
    return "\n".join(figure_lines(table, groups, "machine", markdown=True))


def test_a_law_that_cannot_be_fitted_keeps_its_rows_and_says_why() -> None:
    doc = real(XEON_FULL)
    del doc["machine_info"][SUITE]["llc_bytes"]  # a run saved without its cache sizes
    frame = load_doc(doc, "no-caches.json").frame
    table = figure_table(frame, fit_all(frame), baseline=None)
    t0 = table[table["figure"] == "t0, fixed cost per call"].iloc[0]
    assert math.isnan(t0["value"]) and t0["mark"].startswith("not fitted: cache sizes unknown")
    text = compared(frame)
    assert "| t0, fixed cost per call (s) | ? |" in text
    assert "- ? not fitted: cache sizes unknown (run saved without them)" in text


def test_a_bound_the_fit_cannot_set_is_said_not_printed_negative() -> None:
    """The AMD run fitted on its four smallest sizes only: the per-element cost is lost in the fixed cost,
    its bootstrap interval reaches below zero, r∞'s above any bound, and a third of the replicates fall
    outside the law."""
    frame = load_runs([EPYC_FULL], samples=False).frame
    frame = frame[(frame["case"] != "ufunc_size") | (frame["n"] <= 256)]
    fit = fit_host(frame).iloc[0]
    assert fit["cache_s_per_element_low"] < 0 and math.isinf(fit["r_inf_high_per_s"])
    assert fit["n_outside_law"] > 0
    lines = summary_section(frame)
    text = "\n".join(lines)
    per_element = next(line for line in lines if "per element, in cache" in line)
    assert (
        f"CI ≤ {fmt_time(fit['cache_s_per_element_high'])} (the fit cannot bound it from below)"
        in per_element
    )
    assert f"{fit['n_outside_law']:,} of 1,000 replicates outside the law (t0 < 0 or r∞ ≤ 0)" in text
    compared_text = compared(frame)
    assert "(the fit cannot bound it from above)" in compared_text
    intervals = [line.split(" CI ", 1)[1] for line in lines if " CI " in line]
    intervals += re.findall(r"\[([^]]*)\]", compared_text)
    assert len(intervals) >= 6
    for interval in intervals:  # signed errors (-59 %) are fine elsewhere; no interval holds a negative
        assert not NEGATIVE_NUMBER.search(interval), interval


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (1e-9, 2e-9, "1.00 ns – 2.00 ns"),
        (-5e-10, 2e-9, "≤ 2.00 ns (the fit cannot bound it from below)"),
        (1e-9, math.inf, "≥ 1.00 ns (the fit cannot bound it from above)"),
        (-1e-9, -5e-10, "n/a (the fit cannot bound it)"),
        (math.nan, 1e-9, "n/a"),
    ],
)
def test_positive_interval(low: float, high: float, expected: str) -> None:
    assert positive_interval(low, high, fmt_time) == expected


# --- a fleet's conditions, condensed -----------------------------------------------------------------------

UNSTEADY = (
    "Machine speed unsteady: the speed sentinel's CPU workloads ran {:.2f}× slower at end than at start"
)
BUSY = (
    "Busy machine: other processes took 30% of the 2 usable CPUs' time (limit 10%): figures may be inflated"
)


def test_a_condition_of_many_runs_is_said_once_and_one_of_few_runs_per_run() -> None:
    runs = CONDENSE_ABOVE + 5
    conditions = {f"run-{i:02d}.json": [UNSTEADY.format(1.5 + i / 100)] for i in range(runs)}
    conditions["run-03.json"].insert(0, BUSY)
    said, left = condensed_conditions(conditions, runs + 2)
    assert said == [
        f"Machine speed unsteady in {runs} of the {runs + 2} runs; the first, run-00.json: "
        f"{UNSTEADY.format(1.5)}; the others: run-01.json, run-02.json, run-03.json, and {runs - 4} more "
        "(`python -m analysis summary FILE`: one run's lines)"
    ]
    assert left == {"run-03.json": [BUSY]}  # the busy run alone: said as it is


def test_conditions_of_up_to_the_limit_of_runs_are_said_run_by_run() -> None:
    conditions = {f"run-{i:02d}.json": [UNSTEADY.format(1.5)] for i in range(CONDENSE_ABOVE)}
    assert condensed_conditions(conditions, CONDENSE_ABOVE) == ([], conditions)


def test_a_fleet_report_opens_with_one_line_for_its_unsteady_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fleet: ``tools/fanout_runs.py`` copies of an EPYC quick run whose speed hopped (each copy keeps its
    sentinel, so each is named unsteady)."""
    runs = CONDENSE_ABOVE + 1
    _fanout(DATA / "sentinel-epyc" / "quiet-quick-01.json", tmp_path / "runs", machines=2, copies=runs)
    out = tmp_path / "report"
    assert main(["report", str(tmp_path / "runs"), "--include-quick", "--out", str(out), "--no-cache"]) == 0
    lines = (tmp_path / "report" / "report.md").read_text().splitlines()
    unsteady = [line for line in lines if "Machine speed unsteady" in line]
    assert len(unsteady) == 1
    assert unsteady[0].startswith(f"**Machine speed unsteady in {runs} of the {runs} runs; the first, ")
    capsys.readouterr()
    for command in (
        ["summary", str(tmp_path / "runs")],
        ["compare", str(tmp_path / "runs"), "--include-quick", "--no-cache"],
    ):
        assert main(command) == 0
        said = [line for line in capsys.readouterr().out.splitlines() if "Machine speed unsteady" in line]
        assert len(said) == 1 and said[0].startswith(f"Machine speed unsteady in {runs} of the {runs} runs")


def test_the_worst_unstable_row_is_the_one_the_stability_table_names() -> None:
    """``worst_unstable`` (no table built) picks what ``stability``'s table would: among the rows marked
    unstable, the largest median/min (NaN as 0, the first of equals), with its IQR/median."""
    import numpy as np
    import pandas as pd

    from analysis.trust import stability, worst_unstable

    rng = np.random.default_rng(5)
    for _ in range(200):
        size = int(rng.integers(1, 8))
        low = rng.uniform(1e-7, 2e-7, size)
        frame = pd.DataFrame(
            {
                "min": low,
                "median": low * rng.choice([1.0, 1.2, 3.0, 3.0, np.nan], size),
                "iqr": low * rng.choice([0.01, 0.6, 2.0, np.nan], size),
            }
        )
        table = stability(frame)
        unstable = table[table["unstable"]]
        found = worst_unstable(frame)
        if unstable.empty:
            assert found is None
            continue
        worst = unstable.loc[unstable["median_over_min"].fillna(0).idxmax()]
        expected = (worst["median_over_min"], worst["iqr_over_median"])
        assert found is not None
        for got, want in zip(found, expected, strict=True):
            assert (math.isnan(got) and math.isnan(want)) or got == want
