"""analysis.load on the real saved runs under tests/data/ and on generated bad files (in tmp_path).

Bad inputs are made from a real run (truncated, stripped of its launchbench tags, rewritten in older
pytest-benchmark layouts), so the good and the bad differ only in what each test says.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from analysis.load import STAT_COLUMNS, SUITE, load_runs, machine_identity
from analysis.steady import STEADY_COLUMNS, round_statistics

DATA = Path(__file__).parent / "data"
CPU_RUNS = sorted(DATA.glob("cpu-*.json"))


@pytest.fixture(scope="module")
def cpu_run_path() -> Path:
    assert CPU_RUNS, f"no real CPU run (cpu-*.json) under {DATA}"
    return CPU_RUNS[0]


@pytest.fixture
def cpu_doc(cpu_run_path: Path) -> dict:
    return json.loads(cpu_run_path.read_text(encoding="utf-8"))


def write_json(path: Path, doc: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def as_other_machine(doc: dict, host: str) -> dict:
    """The same run, as if measured on machine ``host`` (same OS and Python, so the same storage folder)."""
    other = copy.deepcopy(doc)
    ours = other["machine_info"].setdefault(SUITE, {})
    ours["host"] = host
    ours["machine_id"] = f"{host} / {ours.get('cpu_model', 'cpu')} / no GPU"
    other["machine_info"]["node"] = host
    return other


def tree_digest(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` (relative path -> digest), and every folder (-> "dir")."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


def test_real_run_loads_one_row_per_launchbench_case(cpu_run_path: Path, cpu_doc: dict) -> None:
    result = load_runs([cpu_run_path], samples=True)
    ours = [b for b in cpu_doc["benchmarks"] if (b.get("extra_info") or {}).get("suite") == SUITE]
    assert result.problems == ()
    assert result.files_used == (cpu_run_path,)
    frame = result.frame
    assert len(frame) == len(ours) > 0
    assert set(frame["suite"]) == {SUITE}
    assert list(frame["name"]) == [b["name"] for b in ours]
    assert frame["machine_id"].nunique() == 1
    assert frame["machine_id"].iloc[0] == machine_identity(cpu_doc["machine_info"])["machine_id"]
    assert str(frame["run_datetime"].dt.tz) == "UTC"
    # Stats are seconds per iteration, as saved but for a warm-up's rounds (``analysis.steady``); the raw
    # samples are saved by default and match the rounds kept.
    assert (frame["steady"] == "warm-up").any()
    for row, bench in zip(frame.itertuples(), ours, strict=True):
        saved = bench["stats"]
        left_out = int(row.warm_up_rounds) if row.steady == "warm-up" else 0
        expected = round_statistics(np.asarray(saved["data"][left_out:])) if left_out else saved
        assert row.median == pytest.approx(expected["median"], rel=1e-12) and row.median > 0
        assert row.min <= row.median <= row.max
        assert len(row.data) == row.rounds == saved["rounds"] - left_out
        assert row.case == bench["extra_info"]["case"]


def test_two_machines_in_one_storage_folder_are_told_apart(tmp_path: Path, cpu_doc: dict) -> None:
    folder = tmp_path / ".benchmarks" / "Linux-CPython-3.11-64bit"
    write_json(folder / "0001_laptop.json", cpu_doc)
    write_json(folder / "0002_server.json", as_other_machine(cpu_doc, "server-b"))
    result = load_runs([tmp_path / ".benchmarks"], samples=True)
    assert result.problems == ()
    assert len(result.files_used) == 2
    counts = result.frame.groupby("machine_id").size()
    assert len(counts) == 2
    assert counts.nunique() == 1
    assert "server-b" in set(result.frame["host"])


def test_machine_identity_falls_back_to_pytest_benchmarks_fields() -> None:
    new = {"node": "box", "system": "Linux", "cpu": {"brand_raw": "Fast CPU"}}
    old = {"node": "box", "system": "Linux", "cpu": {"brand": "Fast CPU"}}  # py-cpuinfo < 6 (pb < 3.4)
    expected = {
        "machine_id": "box / Linux / Fast CPU / no GPU",
        "host": "box",
        "system": "Linux",
        "cpu_model": "Fast CPU",
        "gpu_name": None,
    }
    for info in (new, old):
        identity = machine_identity(info)
        assert {key: identity[key] for key in expected} == expected
    ours = {
        "system": "Linux",
        SUITE: {"machine_id": "m1", "host": "h", "cpu_model": "c", "gpu": {"name": "H200"}},
    }
    assert machine_identity(ours)["machine_id"] == "h / Linux / c / H200"  # composed, not taken as stored
    assert machine_identity(ours)["stored_machine_id"] == "m1"
    assert machine_identity(ours)["gpu_name"] == "H200"


def test_old_and_new_runs_of_one_machine_share_an_id_and_two_oses_do_not(cpu_doc: dict) -> None:
    """The real run stored its id without the OS; saved today it would carry "system" and the new id."""
    info = cpu_doc["machine_info"]
    old = machine_identity(info)
    assert old["stored_machine_id"] == info[SUITE]["machine_id"]
    assert " / Linux / " not in old["stored_machine_id"]
    new_info = copy.deepcopy(info)
    new_info[SUITE]["system"] = "Linux"
    new_info[SUITE]["machine_id"] = old["machine_id"]  # as benchmarks.provenance composes it now
    assert machine_identity(new_info)["machine_id"] == old["machine_id"]
    assert f" / {info['system']} / " in old["machine_id"]
    windows = copy.deepcopy(info)
    windows["system"] = "Windows"  # the same laptop's Windows install: another machine
    assert machine_identity(windows)["machine_id"] != old["machine_id"]
    assert machine_identity(windows)["stored_machine_id"] == old["stored_machine_id"]


def test_pytest_benchmark_3x_layout_is_read(tmp_path: Path, cpu_doc: dict) -> None:
    """3.1.0a2 saved extra_info but not ops; 3.x-4.x wrote a naive UTC datetime and cpuinfo's 'brand'."""
    old = copy.deepcopy(cpu_doc)
    old["version"] = "3.1.0a2"
    old["datetime"] = "2017-05-01T12:00:00.123456"
    cpu = old["machine_info"].get("cpu") or {}
    old["machine_info"]["cpu"] = {"brand": cpu.get("brand_raw", "Old CPU")}
    old["machine_info"].pop(SUITE, None)
    for bench in old["benchmarks"]:
        bench["stats"].pop("ops", None)
        for key in ("params", "param", "options"):
            bench.pop(key, None)
    result = load_runs([write_json(tmp_path / "old.json", old)], samples=True)
    assert result.problems == ()
    frame = result.frame
    assert (frame["pb_version"] == "3.1.0a2").all()
    assert frame["run_datetime"].iloc[0].isoformat() == "2017-05-01T12:00:00.123456+00:00"
    for row in frame.itertuples():
        assert math.isclose(row.ops, 1 / row.mean)
    assert frame["cpu_model"].iloc[0] == old["machine_info"]["cpu"]["brand"]


def test_run_saved_without_raw_data_has_none(tmp_path: Path, cpu_doc: dict) -> None:
    for bench in cpu_doc["benchmarks"]:
        bench["stats"].pop("data", None)
    result = load_runs([write_json(tmp_path / "nodata.json", cpu_doc)], samples=True)
    assert result.problems == ()
    assert result.frame["data"].isna().all()
    assert (result.frame["median"] > 0).all()


@pytest.mark.parametrize("samples", [True, False])
def test_bad_files_are_reported_one_line_each_and_good_ones_used(
    tmp_path: Path, cpu_run_path: Path, cpu_doc: dict, samples: bool
) -> None:
    storage = tmp_path / "storage"
    good = write_json(storage / "plat" / "0001_good.json", cpu_doc)
    raw = cpu_run_path.read_bytes()
    truncated = storage / "plat" / "0002_truncated.json"
    truncated.write_bytes(raw[: len(raw) // 2])
    not_json = storage / "plat" / "0003_notes.json"
    not_json.write_text("these are my notes, not a run\n", encoding="utf-8")
    empty = storage / "plat" / "0004_empty.json"
    empty.write_bytes(b"")
    not_run = write_json(storage / "plat" / "0005_config.json", {"name": "something else"})
    a_list = write_json(storage / "plat" / "0006_list.json", [1, 2, 3])
    other_suite = copy.deepcopy(cpu_doc)
    for bench in other_suite["benchmarks"]:
        bench["extra_info"] = {}
    other = write_json(storage / "plat" / "0007_other_suite.json", other_suite)
    no_benchmarks = write_json(storage / "plat" / "0008_none.json", {**cpu_doc, "benchmarks": []})
    binary = storage / "plat" / "0009_binary.json"
    binary.write_bytes(bytes(range(256)))
    (storage / "empty-platform").mkdir()

    result = load_runs([storage], samples=samples)

    assert result.files_used == (good,)
    assert len(result.frame) == len(load_runs([good], samples=samples).frame)
    bad = {
        truncated: "ends early (truncated?): ",
        not_json: "is not valid JSON: Expecting value at line 1 column 1",
        empty: "file is empty",
        not_run: "JSON but not a pytest-benchmark run (no 'benchmarks' list)",
        a_list: "JSON but not a pytest-benchmark run (no 'benchmarks' list)",
        other: f"no launchbench case among its {len(cpu_doc['benchmarks'])} benchmarks (another suite's run",
        no_benchmarks: "saved run holds no benchmarks",
        binary: "not a text file (not UTF-8: byte 128), so not a saved run",
    }
    assert len(result.problems) == len(bad)
    for path, what in bad.items():
        (line,) = [p for p in result.problems if p.startswith(f"{path}:")]
        assert line.startswith(f"{path}: {what}")
        assert "\n" not in line


def test_case_without_stats_is_skipped_with_a_line(tmp_path: Path, cpu_doc: dict) -> None:
    broken = copy.deepcopy(cpu_doc)
    ours = [b for b in broken["benchmarks"] if (b.get("extra_info") or {}).get("suite") == SUITE]
    ours[0]["stats"] = {"rounds": 0}
    path = write_json(tmp_path / "partial.json", broken)
    result = load_runs([path], samples=True)
    assert len(result.frame) == len(ours) - 1
    (problem,) = result.problems
    expected = "dropped: stats.min is missing"
    assert problem == f"{path}: case {ours[0]['fullname']}: {expected}"


def test_empty_folder_missing_path_and_unmatched_glob_are_problems(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = tmp_path / "missing"
    pattern = str(tmp_path / "nothing-*.json")
    result = load_runs([empty, missing, pattern], samples=True)
    assert result.frame.empty
    assert {"source", "machine_id", "median", "data"} <= set(result.frame.columns)
    assert result.files_used == ()
    assert result.problems == (
        f"{empty}: folder holds no saved run (no .json file under it)",
        f"{missing}: no such file or folder",
        f"{pattern}: the pattern matches no file",
    )


def test_globs_and_repeated_paths_load_each_file_once(tmp_path: Path, cpu_doc: dict) -> None:
    first = write_json(tmp_path / "runs" / "a" / "0001_x.json", cpu_doc)
    second = write_json(tmp_path / "runs" / "b" / "0001_y.json", as_other_machine(cpu_doc, "other"))
    result = load_runs([str(tmp_path / "runs" / "**" / "*.json"), first, tmp_path / "runs"], samples=True)
    assert result.problems == ()
    assert result.files_used == (first, second)


def test_loading_changes_nothing_under_the_input_folder(tmp_path: Path, cpu_doc: dict) -> None:
    storage = tmp_path / ".benchmarks"
    write_json(storage / "Linux-CPython-3.11-64bit" / "0001_a.json", cpu_doc)
    (storage / "Linux-CPython-3.11-64bit" / "0002_bad.json").write_text("{", encoding="utf-8")
    before = tree_digest(storage)
    load_runs([storage, str(storage / "*" / "*.json"), storage / "does-not-exist"], samples=True)
    assert tree_digest(storage) == before
    assert not (storage / "does-not-exist").exists()


def test_fanout_copies_load_as_a_fleet_of_marked_machines(tmp_path: Path, cpu_run_path: Path) -> None:
    """tools/fanout_runs.py (the scale measurement's input): copies load, spread over the machines asked."""
    spec = importlib.util.spec_from_file_location(
        "fanout_runs", DATA.parent.parent / "tools" / "fanout_runs.py"
    )
    fanout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fanout)
    before = tree_digest(cpu_run_path.parent)
    assert fanout.main([str(cpu_run_path), str(tmp_path / "fleet"), "--copies", "5", "--machines", "2"]) == 0
    assert tree_digest(cpu_run_path.parent) == before
    result = load_runs([tmp_path / "fleet"], samples=True)
    assert result.problems == ()
    assert len(result.files_used) == 5
    counts = result.frame.groupby("machine_id")["source"].nunique()
    assert sorted(counts) == [2, 3]
    original = load_runs([cpu_run_path], samples=True).frame
    copy_rows = result.frame[result.frame["source"] == str(result.files_used[1])]
    # Machine 1 is 5 % slower than machine 0, with 2 % jitter per sample: a median moves by 5 % ± 3σ at most.
    ratio = copy_rows["median"].to_numpy() / original["median"].to_numpy()
    assert np.all((ratio > 1.05 * 0.94) & (ratio < 1.05 * 1.06))
    assert np.median(ratio) == pytest.approx(1.05, rel=0.01)
    for row in copy_rows.itertuples():
        assert row.median == pytest.approx(float(np.median(row.data)))


def test_parallel_loading_gives_the_serial_frame(
    tmp_path: Path, cpu_doc: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    import analysis.load

    for index in range(4):
        write_json(tmp_path / f"{index:04d}_run.json", as_other_machine(cpu_doc, f"host-{index % 2}"))
    (tmp_path / "0009_bad.json").write_text("[", encoding="utf-8")
    serial = load_runs([tmp_path], samples=True)
    monkeypatch.setattr(analysis.load, "PARALLEL_MIN_FILES", 2)
    parallel = load_runs([tmp_path], samples=True)
    assert parallel.problems == serial.problems
    assert len(parallel.problems) == 1
    assert parallel.files_used == serial.files_used
    assert parallel.runs.equals(serial.runs)
    assert parallel.frame.drop(columns="data").equals(serial.frame.drop(columns="data"))
    for a, b in zip(parallel.frame["data"], serial.frame["data"], strict=True):
        assert np.array_equal(a, b)


def test_without_samples_the_frame_is_the_same_but_for_data(cpu_run_path: Path, tmp_path: Path) -> None:
    with_samples = load_runs([cpu_run_path], samples=True)
    without = load_runs([cpu_run_path], samples=False)
    assert without.problems == ()
    assert without.frame["data"].isna().all()
    # Without the rounds no case is classified (``analysis.steady``), and a warm-up's statistics are then
    # pytest-benchmark's over every round: the statistics of the other cases, and every other column, match.
    assert without.frame[list(STEADY_COLUMNS)].isna().all().all()
    others = [column for column in without.frame if column not in ("data", *STEADY_COLUMNS, *STAT_COLUMNS)]
    assert without.frame[others].equals(with_samples.frame[others])
    warm = (with_samples.frame["steady"] == "warm-up").to_numpy()
    stats = list(STAT_COLUMNS)
    assert without.frame.loc[~warm, stats].equals(with_samples.frame.loc[~warm, stats])
    assert (without.frame.loc[warm, "rounds"] > with_samples.frame.loc[warm, "rounds"]).all()
    # A broken file is reported the same way on both paths.
    broken = tmp_path / "broken.json"
    broken.write_bytes(cpu_run_path.read_bytes()[:-200])
    assert load_runs([broken], samples=False).problems == load_runs([broken], samples=True).problems
