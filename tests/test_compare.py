"""analysis.compare: the machine comparison on a real saved run (a second machine made from it by a known
factor), its verdicts (``analysis.verdicts``) read from each run's own figures."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from analysis.__main__ import main
from analysis.compare import choose_baseline, figure_table, point_table, run_labels
from analysis.fits import fit_all
from analysis.load import SUITE, load_runs
from analysis.render import LINE_WIDTH
from analysis.verdicts import MARK_BASELINE, MARK_CHANGED, MARK_INCONCLUSIVE, MARK_SAME

#: The verdicts of a judged figure.
JUDGED = (MARK_CHANGED, MARK_SAME, MARK_INCONCLUSIVE)

DATA = Path(__file__).parent / "data"
CPU_RUNS = sorted(DATA.glob("cpu-*.json"))


def test_choose_baseline() -> None:
    machines = ["laptop / i7 / no GPU", "server / Xeon / NVIDIA H200"]
    assert choose_baseline(machines, None) == machines[0]
    assert choose_baseline(machines, "server") == machines[1]
    with pytest.raises(ValueError, match="names no machine"):
        choose_baseline(machines, "desktop")
    with pytest.raises(ValueError, match="matches several"):
        choose_baseline(machines, " / ")


def slower_copy(doc: dict, host: str, factor: float) -> dict:
    """``doc`` as if measured on ``host``, every sample and statistic multiplied by ``factor``."""
    other = copy.deepcopy(doc)
    ours = other["machine_info"].setdefault(SUITE, {})
    ours["host"] = host
    ours["machine_id"] = f"{host} / cpu / no GPU"
    for bench in other["benchmarks"]:
        stats = bench["stats"]
        for key in ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3"):
            stats[key] *= factor
        if stats.get("data"):
            stats["data"] = [x * factor for x in stats["data"]]
    return other


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert CPU_RUNS, f"no real CPU run (cpu-*.json) under {DATA}"
    doc = json.loads(CPU_RUNS[0].read_text(encoding="utf-8"))
    folder = tmp_path_factory.mktemp("storage")
    (folder / "0001_a.json").write_text(json.dumps(doc), encoding="utf-8")
    (folder / "0002_b.json").write_text(json.dumps(slower_copy(doc, "slow", 1.5)), encoding="utf-8")
    (folder / "0003_c.json").write_text(json.dumps(slower_copy(doc, "same", 1.0)), encoding="utf-8")
    return folder


def test_point_table_ratios_and_marks(two_machines: Path) -> None:
    frame = load_runs([two_machines], samples=True).frame
    base = frame["machine_id"].iloc[0]
    table = point_table(frame, baseline=base)
    assert set(table["machine_id"]) == set(frame["machine_id"])
    assert (table.loc[table["machine_id"] == base, "mark"] == MARK_BASELINE).all()
    slow = table[table["machine_id"].str.startswith("slow")]
    same = table[table["machine_id"].str.startswith("same")]
    assert len(slow) == len(same) == len(frame) // 3
    assert np.allclose(slow["ratio"], 1.5)
    assert np.allclose(same["ratio"], 1.0)
    # Identical runs are never changed; runs 1.5x slower are, at every point timed in 3 rounds or more,
    # each one run a side, judged against the default run-to-run spread.
    assert (slow.loc[slow["rounds"] >= 3, "mark"] == MARK_CHANGED).all()
    assert (same["mark"] != MARK_CHANGED).all() and same["mark"].isin(JUDGED).all()
    assert (same["p_value"] == 1.0).all()
    assert (slow.loc[slow["rounds"] < 3, "mark"].str.startswith("not judged: ")).all()


def test_point_table_judges_runs_without_their_rounds(two_machines: Path) -> None:
    """Each run's statistic is its evidence: a run saved without raw samples is judged all the same."""
    frame = load_runs([two_machines], samples=True).frame
    frame.loc[frame["machine_id"].str.startswith("slow"), "data"] = None
    table = point_table(frame, baseline="slow")
    others = table[~table["machine_id"].str.startswith("slow") & (table["rounds"] >= 3)]
    assert (others["mark"] == MARK_CHANGED).all()
    assert np.allclose(others["ratio"], 1 / 1.5)
    assert ((others["ratio_low"] <= others["ratio"]) & (others["ratio"] <= others["ratio_high"])).all()


def test_bandwidth_is_judged_as_a_rate_across_array_sizes(tmp_path: Path) -> None:
    """The bandwidth cases size their arrays by each machine's LLC: a machine with twice the arrays and twice
    the time per pass has the same bandwidth, and must not be judged different on its raw times."""
    doc = json.loads((DATA / "cpu-2core-epyc-full.json").read_text(encoding="utf-8"))
    big = slower_copy(doc, "big-llc", 1.0)
    for bench in big["benchmarks"]:
        info, stats = bench["extra_info"], bench["stats"]
        if info.get("case") == "host_bandwidth":
            info["n"], info["bytes"] = 2 * info["n"], 2 * info["bytes"]
            for key in ("min", "max", "mean", "median", "q1", "q3"):
                stats[key] *= 2
            stats["data"] = [2 * x for x in stats["data"]]
    for name, run in (("a.json", doc), ("b.json", big)):
        (tmp_path / name).write_text(json.dumps(run), encoding="utf-8")
    frame = load_runs([tmp_path], samples=True).frame
    table = figure_table(frame, fit_all(frame), baseline="big-llc")
    rates = table[(table["unit"] == "B/s") & ~table["machine_id"].str.startswith("big-llc")]
    assert set(rates["figure"]) == {"copy bandwidth", "triad bandwidth", "read bandwidth"}
    assert np.allclose(rates["ratio"], 1.0)
    assert rates["mark"].isin([MARK_SAME, MARK_INCONCLUSIVE]).all()
    assert (rates["p_value"] == 1.0).all()


# --- compare by run, by a fact, and at many groups ---

XEON_FULL = DATA / "cpu-2core-full.json"
XEON_QUICK = DATA / "cpu-2core-quick.json"


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    """``python -m analysis compare ARGV --format json``'s document (exit code 0 asserted)."""
    assert main(["compare", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def figures_of(document: dict, code: str) -> dict[str, dict]:
    """The figure rows of group ``code``, by figure."""
    return {row["figure"]: row for row in document["figures"] if row["code"] == code}


def test_two_real_runs_of_one_machine_compared_by_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The full and the quick run of the Xeon VM (two real saved runs, one machine): by machine they would
    pool (with --include-quick); by run each is a column, in time order, judged run against run."""
    document = run_json([str(XEON_QUICK), str(XEON_FULL), "--by", "run", "--include-quick"], capsys)
    assert document["by"] == "run"
    assert [group["label"] for group in document["groups"]] == [XEON_FULL.name, XEON_QUICK.name]
    assert document["groups"][0]["machines"] == document["groups"][1]["machines"]  # one machine
    quick = figures_of(document, "B")
    t0 = quick["t0, fixed cost per call"]
    assert t0["baseline"] == XEON_FULL.name
    assert t0["ratio"] == pytest.approx(t0["value"] / figures_of(document, "A")[t0["figure"]]["value"])
    assert t0["mark"] in JUDGED
    assert 0 <= t0["p_value"] <= 1
    assert t0["evidence"].startswith("1 v 1 run(s); run-to-run spread")
    # The quick run is left out unless included: one group is left, said in the notes.
    document = run_json([str(XEON_QUICK), str(XEON_FULL), "--by", "run"], capsys)
    assert [group["label"] for group in document["groups"]] == [XEON_FULL.name]
    assert any("left out: a quick run" in note for note in document["notes"])
    # A copy of a run is the same measurement: counted once, by run as by machine.
    copy_path = tmp_path / "copy-of-full.json"
    shutil.copy(XEON_FULL, copy_path)
    document = run_json([str(XEON_FULL), str(copy_path), "--by", "run"], capsys)
    assert len(document["groups"]) == 1
    assert any("the same measurements as" in note for note in document["notes"])


def with_fact(path: Path, numpy: str, factor: float = 1.0) -> dict:
    """The saved run at ``path`` with its numpy version set to ``numpy`` (and, when ``factor`` is not 1,
    every time multiplied by it)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["machine_info"][SUITE]["numpy"] = numpy
    if factor != 1.0:
        for bench in doc["benchmarks"]:
            stats = bench["stats"]
            for key in ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3"):
                stats[key] *= factor
            stats["data"] = [x * factor for x in stats["data"]]
    return doc


@pytest.mark.parametrize("by", ["numpy", "launchbench.numpy", "machine_info.launchbench.numpy"])
def test_a_run_pair_differing_only_in_a_version_fact_compared_by_it(
    by: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real run and a copy that differs only in its numpy version: two groups (equal measurements, but
    kept apart by the fact, not counted once), every ratio 1 and no judged figure changed."""
    assert json.loads(XEON_FULL.read_text(encoding="utf-8"))["machine_info"][SUITE]["numpy"] == "2.4.6"
    newer = tmp_path / "newer-numpy.json"
    newer.write_text(json.dumps(with_fact(XEON_FULL, "2.5.0")), encoding="utf-8")
    document = run_json([str(XEON_FULL), str(newer), "--by", by, "--baseline", "2.4.6"], capsys)
    assert [group["label"] for group in document["groups"]] == [f"{by}=2.4.6", f"{by}=2.5.0"]
    other = figures_of(document, "B")
    judged = [row for row in other.values() if row["p_value"] is not None]
    assert len(judged) >= 4
    assert all(row["ratio"] == pytest.approx(1.0) for row in other.values() if row["ratio"] is not None)
    assert all(row["mark"] in (MARK_SAME, MARK_INCONCLUSIVE) and row["p_value"] == 1.0 for row in judged)


def test_a_version_fact_that_moved_the_times_is_judged_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(with_fact(XEON_FULL, "2.5.0", factor=1.5)), encoding="utf-8")
    document = run_json([str(slower), str(XEON_FULL), "--by", "numpy", "--baseline", "numpy=2.4.6"], capsys)
    t0 = figures_of(document, "B")["t0, fixed cost per call"]
    assert t0["group"] == "numpy=2.5.0"
    assert t0["ratio"] == pytest.approx(1.5)
    assert t0["mark"] == MARK_CHANGED
    assert t0["ratio_low"] <= 1.5 <= t0["ratio_high"]


def test_a_fact_no_run_records_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(XEON_FULL), "--by", "cupy"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "python -m analysis: error: --by cupy: no run used records machine_info.launchbench.gpu.cupy_version"
    )


def test_twenty_machines_read_as_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """20 machines made from the real run (each 2 % slower than the one before): one row per machine, every
    table line within the width limit, and each mark explained once below the table."""
    doc = json.loads(XEON_FULL.read_text(encoding="utf-8"))
    for index in range(20):
        run = slower_copy(doc, f"m{index:02d}", 1 + 0.02 * index)
        (tmp_path / f"{index:04d}.json").write_text(json.dumps(run), encoding="utf-8")
    assert main(["compare", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("group "))
    table = lines[start : lines.index("", start)]
    assert len(table) == 2 + 20  # header, rule, one row per machine
    assert table[2].startswith("A (base)")
    assert all(len(line) <= LINE_WIDTH for line in table)
    assert table[-1].startswith("T ") and "*" in table[-1]  # 38 % slower: changed in most figures judged
    assert sum(line.strip().startswith("* changed") for line in lines) == 1
    assert sum(line.strip().startswith("~ inconclusive") for line in lines) <= 1


def test_runs_are_labelled_by_their_time_and_commit() -> None:
    commit = "ca1e63c32a2e6f09886f6394f4b740a0e209290a"
    sources = [
        f"s/0001_{commit}_20261205_044208.json",
        f"s/0002_{commit}_uncommitted-changes_20261205_050000.json",
        "s/0003_baseline.json",
        "s/epyc-2core-full-1.json",
        f"s/0004_{commit}_20261205_044230.json",
    ]
    when = [
        "2026-12-05T04:42:08+00:00",
        "2026-12-05T05:00:00+00:00",
        "2026-12-05T05:10:00+00:00",
        "2026-12-05T05:20:00+00:00",
        "2026-12-05T04:42:30+00:00",
    ]
    assert run_labels(sources, when) == [
        "12-05 04:42:08 ca1e63c",  # two runs in one minute: the seconds tell them apart
        "12-05 05:00 ca1e63c+",
        "12-05 05:10 baseline",
        "epyc-2core-full-1.json",
        "12-05 04:42:30 ca1e63c",
    ]
