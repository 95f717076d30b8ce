"""Comparing another pytest-benchmark suite's runs case by case (analysis.foreign, ``compare`` without any
launchbench case): on real runs of a tiny non-launchbench test module that the test itself benchmarks with
pytest-benchmark in a subprocess (``--benchmark-json``), altered inside the tests into the layouts older
pytest-benchmark versions wrote and into other machines."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.compare import case_ratios, case_table
from analysis.foreign import load_cases
from analysis.verdicts import MARK_CHANGED, MARK_INCONCLUSIVE, MARK_SAME

JUDGED = (MARK_CHANGED, MARK_SAME, MARK_INCONCLUSIVE)

#: A test module of another suite: three cases, two of them one test with a parameter.
SUITE_MODULE = """
import pytest


@pytest.mark.parametrize("n", [10, 1000])
def test_sum(benchmark, n):
    data = list(range(n))
    assert benchmark(sum, data) == n * (n - 1) // 2


def test_sorted(benchmark):
    assert benchmark(sorted, [3, 1, 2] * 50)[0] == 1
"""
CASES = {"test_tiny.py::test_sum[10]", "test_tiny.py::test_sum[1000]", "test_tiny.py::test_sorted"}


def benchmark_suite(folder: Path, name: str) -> Path:
    """Run the suite's benchmarks (briefly) in a fresh pytest process; return its ``--benchmark-json``."""
    out = folder / name
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-c",
        str(folder / "pytest.ini"),  # this folder's empty configuration, not launchbench's
        str(folder / "test_tiny.py"),
        f"--benchmark-json={out}",
        "--benchmark-max-time=0.02",
        "--benchmark-min-rounds=15",
    ]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("suite")
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (folder / "test_tiny.py").write_text(SUITE_MODULE, encoding="utf-8")
    return benchmark_suite(folder, "run1.json"), benchmark_suite(folder, "run2.json")


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def compare_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["compare", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_runs_are_another_suites(two_runs: tuple[Path, Path]) -> None:
    for path in two_runs:
        doc = read(path)
        assert {bench["fullname"] for bench in doc["benchmarks"]} == CASES
        assert all("suite" not in (bench.get("extra_info") or {}) for bench in doc["benchmarks"])
        assert all(len(bench["stats"]["data"]) >= 15 for bench in doc["benchmarks"])


def test_cases_are_matched_by_fullname_and_judged_run_against_run(
    two_runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = two_runs
    document = compare_json([str(second), str(first), "--by", "run"], capsys)
    assert [group["label"] for group in document["groups"]] == [first.name, second.name]  # time order
    assert any("compared case by case (matched by fullname)" in note for note in document["notes"])
    rows = {(row["code"], row["fullname"]): row for row in document["cases"]}
    assert set(rows) == {(code, case) for code in "AB" for case in CASES}
    runs = {path.name: read(path) for path in two_runs}
    for case in CASES:
        base, other = rows[("A", case)], rows[("B", case)]
        stats = {name: {b["fullname"]: b["stats"] for b in doc["benchmarks"]} for name, doc in runs.items()}
        for statistic in ("min", "median"):
            assert base[f"{statistic}_s"] == stats[first.name][case][statistic]
            assert other[f"{statistic}_s"] == stats[second.name][case][statistic]
            ratio = stats[second.name][case][statistic] / stats[first.name][case][statistic]
            assert other[f"{statistic}_ratio"] == pytest.approx(ratio)
        assert other["mark"] in JUDGED
        assert 0 <= other["p_value"] <= 1
        assert other["ratio_low"] <= other["ratio"] <= other["ratio_high"]
        assert base["mark"] == "baseline"


def test_a_run_saved_without_samples_is_judged_on_its_statistics(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = read(two_runs[1])
    for bench in doc["benchmarks"]:
        del bench["stats"]["data"]  # as --benchmark-save writes without --benchmark-save-data
    saved = write(tmp_path / "saved.json", doc)
    document = compare_json([str(two_runs[0]), str(saved), "--by", "run"], capsys)
    others = [row for row in document["cases"] if row["code"] == "B"]
    assert len(others) == 3
    assert all(row["mark"] in JUDGED and row["p_value"] is not None for row in others)
    assert all(math.isfinite(row["median_ratio"]) for row in others)


def test_one_laptop_under_windows_and_linux_is_two_machines(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = read(two_runs[1])
    assert doc["machine_info"]["system"] == "Linux"
    doc["machine_info"].update(system="Windows", release="10")
    windows = write(tmp_path / "windows.json", doc)
    document = compare_json([str(two_runs[0]), str(windows)], capsys)
    labels = [group["label"] for group in document["groups"]]
    assert len(labels) == 2
    host, cpu = doc["machine_info"]["node"], doc["machine_info"]["cpu"]["brand_raw"]
    assert labels == [f"{host} / Linux / {cpu}", f"{host} / Windows / {cpu}"]


def older_layout(doc: dict, version: str) -> dict:
    """``doc`` as pytest-benchmark ``version`` wrote it: "3.2.0" names the CPU ``cpu.brand``; "2.5.0" (the
    3.0 pre-releases) has no ``cpu`` at all, no ``ops``, ``param(s)``, ``extra_info``, and a naive time."""
    old = copy.deepcopy(doc)
    old["version"] = version
    info = old["machine_info"]
    brand = info["cpu"]["brand_raw"]
    if version == "3.2.0":
        info["cpu"] = {"brand": brand, "vendor_id": info["cpu"].get("vendor_id_raw", "unknown")}
        return old
    del info["cpu"]
    info["processor"] = brand  # what platform.processor() says on Windows; 'x86_64' on Linux
    old["datetime"] = old["datetime"].replace("+00:00", "")
    for bench in old["benchmarks"]:
        for key in ("param", "params", "extra_info"):
            bench.pop(key, None)
        bench["stats"].pop("ops", None)
    return old


@pytest.mark.parametrize("version", ["3.2.0", "2.5.0"])
def test_older_layouts_compare_as_the_same_machine(
    version: str, two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = write(tmp_path / f"{version}.json", older_layout(read(two_runs[1]), version))
    document = compare_json([str(two_runs[0]), str(old), "--by", "run"], capsys)
    assert len({tuple(group["machines"]) for group in document["groups"]}) == 1
    others = [row for row in document["cases"] if row["code"] == "B"]
    assert {row["fullname"] for row in others} == CASES
    assert all(row["mark"] in JUDGED for row in others)


def test_a_bad_case_is_one_line_and_the_rest_is_used(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = read(two_runs[1])
    doc["benchmarks"][0]["stats"]["median"] = -1.0
    doc["benchmarks"][1]["stats"]["data"][3] = float("nan")
    bad = write(tmp_path / "bad.json", doc)
    loaded = load_cases([two_runs[0], bad], samples=True)
    first, second = doc["benchmarks"][0]["fullname"], doc["benchmarks"][1]["fullname"]
    assert loaded.problems == (
        f"{bad}: case {first}: dropped: stats.median = -1.0 (must be a time from 1e-12 to 1e+06 s)",
        f"{bad}: case {second}: raw samples left out: 1 of {len(doc['benchmarks'][1]['stats']['data'])} are "
        "not times from 1e-12 to 1e+06 s (first: nan)",
    )
    assert len(loaded.frame) == 5


def test_text_at_many_cases_shows_the_top_rows(
    two_runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(two_runs[0]), str(two_runs[1]), "--by", "run", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "… and 1 more rows (shown: the first 2, changes first" in out
    loaded = load_cases(list(two_runs), samples=True)
    labelled = loaded.frame.assign(machine_id=loaded.frame["source"].map(lambda s: Path(s).name))
    table = case_table(labelled, ["fullname"], "run1.json", ("min", "median"))
    ratios = case_ratios(table, ["fullname"], ("min", "median"))
    assert len(ratios) == 6 and set(ratios["statistic"]) == {"min", "median"}
    shown = [line.split()[0] for line in out.splitlines() if line.startswith("test_tiny.py::")]
    assert shown == list(ratios["case"][:2])


def test_plot_draws_the_cases_of_two_machines(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``plot`` on another suite's runs draws its cases against the baseline machine (figures/cases.*)."""
    doc = read(two_runs[1])
    doc["machine_info"]["node"] = "other-laptop"
    (tmp_path / "runs").mkdir()
    other = write(tmp_path / "runs" / "other.json", doc)
    out = tmp_path / "out"  # outside the runs' folders: storage is only read
    assert main(["plot", str(two_runs[0]), str(other), "--out", str(out), "--formats", "png,svg"]) == 0
    captured = capsys.readouterr()
    assert sorted(path.name for path in (out / "figures").iterdir()) == ["cases.png", "cases.svg"]
    assert "compared case by case (matched by fullname)" in captured.err
    svg = (out / "figures" / "cases.svg").read_text(encoding="utf-8")
    assert "3 cases against the baseline" in svg and "other-laptop" in svg
