"""A user's day with ``python -m analysis``, flow by flow (issue 20): report and plot into one folder never
contradict each other; machines that share a host name are told apart; compare leads with what changed most
and names how it chose its baseline, whatever the order of the paths; quick-only machines are reported and
say so; plot groups as compare does; the report holds the busy-machine line once and the per-op tables.

The runs are the committed EPYC run saved before machine names existed (``OLD_RUN``; the committed run with
the most cases, ``tests.test_plots_collisions.REAL_RUN``, where a flow needs today's layout) and copies of it
changed here: other machine facts, a run record, times scaled. Copies with scaled
times are SYNTHETIC and only ever written to a temporary folder.
"""

from __future__ import annotations

import copy
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from analysis.__main__ import main
from analysis.compare import figure_table
from analysis.figures import cpu
from analysis.fits import fit_all
from analysis.load import SUITE, load_runs, machine_identity
from analysis.runs import QUICK_MARK, select_runs
from model.units import fmt_signed_percent
from tests.test_load import write_json
from tests.test_plots_collisions import DATA, REAL_RUN, synthetic_everything_run
from tests.test_trust import with_record

#: A run saved before machine names and fingerprints existed: its id is the one it always had.
OLD_RUN = DATA / "cpu-2core-epyc-full.json"


def _real() -> dict:
    return json.loads(OLD_RUN.read_text(encoding="utf-8"))


def _later(doc: dict, hours: float) -> dict:
    """``doc`` saved ``hours`` later (its ``datetime``)."""
    doc = copy.deepcopy(doc)
    when = datetime.fromisoformat(doc["datetime"]) + timedelta(hours=hours)
    doc["datetime"] = when.isoformat()
    return doc


def _scaled(doc: dict, factor: float, case: str) -> dict:
    """SYNTHETIC: ``doc`` with every time of ``case`` multiplied by ``factor``."""
    doc = copy.deepcopy(doc)
    for bench in doc["benchmarks"]:
        if bench["extra_info"].get("case") != case:
            continue
        stats = bench["stats"]
        for key in ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3"):
            stats[key] *= factor
        if stats.get("data"):
            stats["data"] = [value * factor for value in stats["data"]]
    return doc


def _linked_files(report: Path) -> list[Path]:
    """Every file report.md links (its figures, in each format written)."""
    text = report.read_text(encoding="utf-8")
    return [report.parent / link for link in re.findall(r"\]\(([^)]+)\)", text)]


# --- 1: report and plot into one folder ---------------------------------------------------------------------


def test_plot_refuses_a_folder_that_holds_a_report_and_leaves_it_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    assert main(["report", str(REAL_RUN), "--out", str(out), "--no-samples"]) == 0
    links = _linked_files(out / "report.md")
    assert links and all(path.is_file() for path in links)
    before = {path: path.read_bytes() for path in links}
    capsys.readouterr()
    other = write_json(tmp_path / "runs" / "other.json", _scaled(_real(), 2.0, "ufunc_size"))
    assert main(["plot", str(other), "--out", str(out)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"python -m analysis: error: --out {out} holds a report ({out / 'report.md'}) whose figures plot "
        "would replace; plot into another folder, or rerun report to redraw them"
    )
    assert {path: path.read_bytes() for path in links} == before


def test_a_report_after_a_plot_links_only_its_own_figures(tmp_path: Path) -> None:
    """plot first, then report into the same folder: the report redraws the figures from its own runs and
    removes the plot's figures it does not draw; every file it links is there."""
    out = tmp_path / "out"
    fleet = [
        write_json(tmp_path / "runs" / "a.json", _real()),
        write_json(tmp_path / "runs" / "b.json", _fingerprinted(_later(_real(), 1), "b")),
    ]
    assert main(["plot", *map(str, fleet), "--out", str(out), "--no-samples"]) == 0
    assert (out / "figures" / "machines.png").is_file()
    assert main(["report", str(fleet[0]), "--out", str(out), "--no-samples"]) == 0
    assert all(path.is_file() for path in _linked_files(out / "report.md"))
    assert not (out / "figures" / "machines.png").exists()  # one machine: the plot's comparison is gone


# --- 2: machines told apart ---------------------------------------------------------------------------------


def _fingerprinted(doc: dict, fingerprint: str | None, name: str | None = None) -> dict:
    """``doc`` as saved by today's provenance on an installation of ``fingerprint``, named ``name``."""
    doc = copy.deepcopy(doc)
    ours = doc["machine_info"][SUITE]
    ours["machine_fingerprint"] = fingerprint
    ours["machine_name"] = name
    ours["machine_id"] = machine_identity(doc["machine_info"])["machine_id"]
    return doc


def test_vms_that_share_a_host_name_are_told_apart_and_old_runs_keep_their_id(tmp_path: Path) -> None:
    old = write_json(tmp_path / "old.json", _real())
    first = write_json(tmp_path / "vm1.json", _fingerprinted(_later(_real(), 1), "1a2b3c4d"))
    second = write_json(tmp_path / "vm2.json", _fingerprinted(_later(_real(), 2), "5e6f7a8b"))
    named = write_json(tmp_path / "lab.json", _fingerprinted(_later(_real(), 3), "5e6f7a8b", "lab-a"))
    runs = load_runs([old, first, second, named], samples=False).runs.set_index("source")
    host = runs.loc[str(old), "host"]
    rest = " / ".join(str(runs.loc[str(old), key]) for key in ("system", "cpu_model")) + " / no GPU"
    assert runs.loc[str(old), "machine_id"] == f"{host} / {rest}"  # the id it always had
    assert runs.loc[str(first), "machine_id"] == f"{host}#1a2b3c4d / {rest}"
    assert runs.loc[str(second), "machine_id"] == f"{host}#5e6f7a8b / {rest}"
    assert runs.loc[str(named), "machine_id"] == f"lab-a / {rest}"
    assert runs["machine_id"].nunique() == 4


# --- 4 and 7: compare leads with the biggest change; the baseline does not depend on the order --------------


def test_compare_leads_with_the_decode_step_that_got_ten_times_slower(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = write_json(tmp_path / "before.json", _real())
    after = write_json(tmp_path / "after.json", _scaled(_later(_real(), 1), 9.8, "decode_step"))
    assert main(["compare", str(after), str(before), "--by", "run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "Groups (by run; ratios are to A, the baseline: the earliest run):" in lines
    assert lines[lines.index("  A  before.json (1 run)") + 1] == "  B  after.json (1 run)"
    head = lines.index(next(line for line in lines if line.startswith("Largest change of each kind")))
    assert lines[head + 1].startswith("  decode step, CPU ")
    assert "×9.80 slower [" in lines[head + 1]
    table = "\n".join(lines[head:])
    assert "decode step, CPU fused (s)" in table and "decode step, CPU unfused (s)" in table


def test_the_default_table_holds_every_familys_headline_figure(tmp_path: Path) -> None:
    synthetic = write_json(tmp_path / "synthetic.json", synthetic_everything_run())
    frame = load_runs([synthetic, REAL_RUN], samples=False).frame
    table = figure_table(frame, fit_all(frame, predictions=False), None)
    figures = set(table["figure"])
    assert {"t0, fixed cost per call", "copy bandwidth", "cost per launch"} <= figures
    assert any(name.startswith("many vs one, 1,024 pieces") for name in figures)
    assert any(name.startswith("overhead floor of the decode step") for name in figures)
    assert any(name.startswith("op cost: np.") for name in figures)
    assert any(name.startswith("decode step, CPU") for name in figures)
    assert any(name.startswith("decode step, GPU") for name in figures)


def test_the_baseline_does_not_depend_on_the_order_of_the_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    early = write_json(tmp_path / "early.json", _fingerprinted(_real(), "0000aaaa"))
    late = write_json(
        tmp_path / "late.json", _fingerprinted(_scaled(_later(_real(), 5), 1.3, "ufunc_size"), "bbbb")
    )
    outputs = []
    for paths in ([early, late], [late, early]):
        assert main(["compare", *map(str, paths), "--no-samples"]) == 0
        outputs.append(capsys.readouterr().out.replace(f"{late}, {early}", f"{early}, {late}"))
    assert outputs[0] == outputs[1]
    assert "ratios are to A, the baseline: the machine of the earliest run" in outputs[0]
    assert "#0000aaaa" in outputs[0].split("  A  ")[1].splitlines()[0]
    assert main(["compare", str(early), str(late), "--no-samples", "--baseline", "bbbb"]) == 0
    assert "the baseline: named by --baseline bbbb" in capsys.readouterr().out


# --- 5: quick-only machines ---------------------------------------------------------------------------------


def test_a_machine_with_quick_runs_only_is_reported_and_says_quick(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quick = write_json(tmp_path / "runs" / "quick.json", with_record(_real(), quick=True))
    out = tmp_path / "out"
    assert main(["report", str(quick), "--out", str(out), "--no-samples"]) == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    machines = [line for line in text.splitlines() if line.startswith("| ") and QUICK_MARK in line]
    assert machines, "the Machines table names the machine as quick"
    assert f"shown as {load_runs([quick], samples=False).runs['machine_id'][0]}{QUICK_MARK}" in text
    capsys.readouterr()
    full = write_json(
        tmp_path / "runs" / "full.json", with_record(_scaled(_later(_real(), 1), 1.01, "ufunc_size"))
    )
    selection = select_runs(load_runs([quick, full], samples=False))
    assert list(selection.result.runs["source"]) == [str(full)]  # a full run wins
    assert QUICK_MARK not in selection.result.runs["machine_id"][0]
    assert main(["compare", str(quick), "--no-samples"]) == 0
    assert f"{QUICK_MARK}, nothing to compare it with" in capsys.readouterr().out


# --- 6: plot groups as compare does -------------------------------------------------------------------------


def test_plot_by_run_draws_the_runs_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    write_json(runs / "before.json", _real())
    write_json(runs / "after.json", _scaled(_later(_real(), 1), 1.4, "ufunc_size"))
    assert main(["plot", str(runs), "--by", "run", "--out", str(tmp_path / "out"), "--formats", "png"]) == 0
    captured = capsys.readouterr()
    assert str(tmp_path / "out" / "figures" / "machines.png") in captured.out.splitlines()
    assert "python -m analysis: baseline (by run): before.json, the earliest run" in captured.err.splitlines()
    assert main(["plot", str(runs), "--by", "numpy", "--out", str(tmp_path / "by-numpy")]) == 0


# --- 10: smaller --------------------------------------------------------------------------------------------


def test_the_report_says_a_busy_machine_once_and_holds_the_per_op_tables(tmp_path: Path) -> None:
    busy = with_record(synthetic_everything_run(), during={"other_cpu_share": 0.5})
    path = write_json(tmp_path / "runs" / "busy.json", busy)
    assert main(["report", str(path), "--out", str(tmp_path / "out"), "--no-samples"]) == 0
    text = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert sum("Busy machine" in line for line in text.splitlines()) == 1
    assert "## CPU decode step: per-op costs and overhead floor" in text
    assert "| op | per call, " in text and "| machine | plan | floor model |" in text


def test_many_vs_one_title_gives_the_error_as_the_tables_do() -> None:
    frame = select_runs(load_runs([REAL_RUN], samples=False)).result.frame
    predictions = fit_all(frame).many_vs_one
    title = cpu.many_vs_one(predictions).get_suptitle().replace("\n", " ")
    views = predictions.loc[predictions["variant"] == "views", "rel_error"]
    low, high = fmt_signed_percent(views.min()), fmt_signed_percent(views.max())
    assert f"prediction error of views {low} … {high}" in title


def _unsteady(doc: dict, case: str) -> dict:
    """SYNTHETIC: ``doc`` with the rounds of ``case`` spread evenly from its fastest to 5 × it: median/min
    3.00, IQR 2 × the fastest."""
    doc = copy.deepcopy(doc)
    for bench in doc["benchmarks"]:
        if bench["extra_info"].get("case") != case:
            continue
        stats = bench["stats"]
        data = np.linspace(stats["min"], 5 * stats["min"], 101)
        q1, median, q3 = np.quantile(data, [0.25, 0.5, 0.75])
        stats.update(
            data=data.tolist(),
            rounds=data.size,
            max=float(data.max()),
            mean=float(data.mean()),
            stddev=float(data.std(ddof=1)),
            median=float(median),
            q1=float(q1),
            q3=float(q3),
            iqr=float(q3 - q1),
        )
    return doc


def test_compare_by_run_leads_each_kind_with_its_largest_change_framework_rows_included(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 29, point 5: the numpy-eager framework step 108 ms → 22 ms (a framework row) leads its kind in
    ``compare --by run``, beside the decode step's change, with the unstable rounds named."""
    today = json.loads((DATA / "runs" / "epyc-2core-full-1.json").read_text(encoding="utf-8"))
    before = _unsteady(_scaled(today, 4.9, "framework_step"), "framework_step")
    after = _scaled(_later(today, 1), 1.3, "decode_step")
    write_json(tmp_path / "before.json", before)
    write_json(tmp_path / "after.json", after)
    assert main(["compare", str(tmp_path / "after.json"), str(tmp_path / "before.json"), "--by", "run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("Largest change of each kind")))
    leads = lines[head + 1 : lines.index("", head)]
    framework = next(line for line in leads if line.startswith("  framework step, CPU "))
    assert "×0.204 faster [" in framework
    assert "; unstable in A: 3.00× median/min, IQR 67% of the median" in framework
    assert any(line.startswith("  decode step, CPU ") and "×1.30 slower [" in line for line in leads)
    assert len({line.split(",")[0] for line in leads}) == len(leads)  # one line per kind
    unstable = lines.index(next(line for line in lines if line.startswith("Unstable measurements")))
    assert lines[unstable + 1].startswith("  A  framework step, CPU ")
    assert any(line.startswith("t0, numpy call (s)") for line in lines)  # the dispatch ladder's rows
