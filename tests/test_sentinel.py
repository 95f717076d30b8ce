"""The speed sentinel (issue 34): its checkpoints in the run record, the drift within a run, the speed against
the machine's other runs, and ``compare --normalize``, which tells a slower machine from slower code.

The runs here are the committed full runs (tests/data/runs) with a sentinel written into their records: the
semi-synthetic part is said where it is made (a machine slowed by a factor, a code change by another)."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.__main__ import main
from analysis.load import load_runs
from analysis.sentinel import (
    DRIFT_LIMIT,
    SPEED_LIMIT,
    SPREAD_LIMIT,
    drift,
    drift_line,
    from_record,
    normalized,
    speed_line,
    speed_ratios,
    spread,
    unsteady_line,
)
from analysis.trust import condition_lines
from benchmarks.sentinel import DESCRIPTIONS, Sentinel

RUNS = Path(__file__).parent / "data" / "runs"
#: A quiet checkpoint's fastest times, s (the order of this VM's: 0.4 ms, 0.24 ms, 4.8 ms).
BASE = {"python": 4e-4, "numpy_call": 2.4e-4, "memory_copy": 4.8e-3}


def _record(factors: list[float], at: list[str] | None = None) -> dict:
    """A run record's sentinel: one checkpoint per factor, every workload at ``BASE`` × that factor."""
    at = at or ["start", *(f"before benchmarks/test_{i}.py" for i in range(len(factors) - 2)), "end"]
    return {
        "sentinel": {
            "version": 1,
            "workloads": dict(DESCRIPTIONS),
            "checkpoints": [
                {
                    "at": name,
                    "time": "2026-12-05T00:00:00+00:00",
                    "seconds": {k: v * f for k, v in BASE.items()},
                }
                | {"cost_s": 0.04}
                for name, f in zip(at, factors, strict=True)
            ],
        }
    }


def test_a_checkpoint_times_every_workload_and_its_own_cost() -> None:
    sentinel = Sentinel()
    sentinel.check("start")
    sentinel.check("end")
    sentinel.release()
    saved = sentinel.as_json()
    assert [point["at"] for point in saved["checkpoints"]] == ["start", "end"]
    for point in saved["checkpoints"]:
        assert set(point["seconds"]) == set(DESCRIPTIONS)
        assert all(seconds > 0 for seconds in point["seconds"].values())
        assert point["cost_s"] >= sum(point["seconds"].values())
    text = from_record({"sentinel": saved})
    assert json.loads(text)["at"] == ["start", "end"]


@pytest.mark.parametrize(
    "damaged",
    [
        {"sentinel": "fast"},
        {"sentinel": {"checkpoints": [{"at": "start", "seconds": {"python": -1.0}}]}},
        {"sentinel": {"checkpoints": [{"at": "start", "seconds": {"python": "x"}}]}},
        {"sentinel": {"checkpoints": []}},
        {},
    ],
)
def test_a_record_without_a_usable_sentinel_has_none(damaged: dict) -> None:
    assert from_record(damaged) is None


def test_drift_is_the_later_half_against_the_earlier_and_a_single_spike_is_none() -> None:
    text = from_record(_record([1.0, 1.02, 0.99, 1.2, 1.21, 1.19]))
    ratio, earlier, later = drift(text)
    assert ratio == pytest.approx(0.2, rel=0.05)
    assert earlier == "start … before benchmarks/test_1.py"
    assert later == "before benchmarks/test_2.py … end"
    line = drift_line({"sentinel": text})
    assert line.startswith("Machine speed drifted 20% during this run (the speed sentinel 1.20× slower at")
    faster = drift_line({"sentinel": from_record(_record([1.2, 1.2, 1.0, 1.0]))})
    assert faster.startswith("Machine speed drifted 20% during this run") and "1.20× faster" in faster
    assert drift(from_record(_record([1.0, 1.0, 1.5, 1.0, 1.0, 1.0])))[0] == pytest.approx(0.0)  # one spike
    assert drift_line({"sentinel": from_record(_record([1.0, 1.0, 1.0 + DRIFT_LIMIT / 2]))}) is None
    assert drift_line({"sentinel": None}) is None


def test_a_machine_that_hops_between_speeds_is_unsteady_though_its_halves_agree() -> None:
    hopping = from_record(_record([1.0, 1.8, 1.0, 1.8, 1.8, 1.0, 1.8, 1.0]))
    assert drift(hopping)[0] == pytest.approx(0.0)  # the halves see nothing
    factor, fastest, slowest = spread(hopping)
    assert factor == pytest.approx(1.8)
    assert (fastest, slowest) == ("start", "before benchmarks/test_0.py")
    line = unsteady_line({"sentinel": hopping})
    assert line.startswith("Machine speed unsteady: the speed sentinel's CPU workloads ran 1.80× slower at")
    # the 32 MiB copy is not a CPU workload: its spread alone is no hop
    text = json.loads(from_record(_record([1.0, 1.0, 1.0])))
    text["seconds"]["memory_copy"] = [4.8e-3, 9.6e-3, 4.8e-3]
    assert spread(json.dumps(text))[0] == pytest.approx(1.0)
    assert unsteady_line({"sentinel": from_record(_record([1.0, SPREAD_LIMIT * 0.95, 1.0]))}) is None
    assert spread(from_record(_record([1.0], at=["start"]))) is None


def _storage(tmp_path: Path, machine: list[float], code: dict[str, float] | None = None) -> Path:
    """The committed full runs, the i-th run's sentinel at ``machine[i]`` × ``BASE`` and (SYNTHETIC) every
    time of that run × ``machine[i]``, as a slower VM makes them; ``code``: case → factor applied to the
    last run only, as a slower build (another commit) of one case would."""
    storage = tmp_path / "runs"
    storage.mkdir(parents=True)
    sources = sorted(RUNS.glob("*.json"))
    for index, (source, factor) in enumerate(zip(sources, machine, strict=False)):
        doc = json.loads(source.read_text(encoding="utf-8"))
        doc["launchbench_run"].update(_record([factor, factor, factor]))
        changes = {case: 1.0 for case in (code or {})} if index < len(machine) - 1 else (code or {})
        if code and index == len(machine) - 1:  # another build: another commit
            doc["commit_info"]["id"] = "f" * 40
        for bench in doc["benchmarks"]:
            scale = factor * changes.get(bench["extra_info"].get("case"), 1.0)
            stats = bench["stats"]
            for key in ("min", "max", "mean", "stddev", "median", "iqr", "q1", "q3"):
                stats[key] *= scale
            if stats.get("data"):
                stats["data"] = [value * scale for value in stats["data"]]
            if isinstance(bench["extra_info"].get("probe_s"), list):
                bench["extra_info"]["probe_s"] = [value * scale for value in bench["extra_info"]["probe_s"]]
        (storage / source.name).write_text(json.dumps(doc), encoding="utf-8")
    return storage


def test_a_run_on_a_slower_machine_is_named_with_its_ratio(tmp_path: Path) -> None:
    runs = load_runs([_storage(tmp_path, [1.0, 1.0, 1.25])], samples=False).runs
    ratios = speed_ratios(runs).set_index("source")
    slow = ratios["ratio"].idxmax()
    assert slow.endswith("epyc-2core-full-3.json")
    assert ratios.loc[slow, "ratio"] == pytest.approx(1.25) and ratios.loc[slow, "others"] == 2
    assert ratios.drop(slow)["ratio"].tolist() == pytest.approx([1.0, 1.0])  # the usual: the median
    assert "ran 1.25× slower than this machine's usual" in speed_line(1.25, 2)
    assert speed_line(1.08, 2) is None
    assert "1.25× faster" in speed_line(0.8, 2)


def test_normalize_divides_each_runs_times_by_its_speed_ratio(tmp_path: Path) -> None:
    loaded = load_runs([_storage(tmp_path, [1.0, 1.0, 1.25])], samples=True)
    frame, lines = normalized(loaded.frame, loaded.runs)
    slow = frame["source"].str.endswith("epyc-2core-full-3.json")
    before = loaded.frame.loc[slow, "min"].to_numpy()
    assert frame.loc[slow, "min"].to_numpy() == pytest.approx(before / 1.25)
    assert frame.loc[~slow, "min"].to_numpy() == pytest.approx(loaded.frame.loc[~slow, "min"].to_numpy())
    assert any(
        "1.000–1.250 over 3 run(s); 1 run(s) ≥ 10% off divided by it (1.250)" in line for line in lines
    )


def test_normalize_leaves_runs_within_the_sentinels_noise_as_measured(tmp_path: Path) -> None:
    """A run 4 % off its machine's usual is within the sentinel's own spread on a quiet VM: left as
    measured, and said."""
    loaded = load_runs([_storage(tmp_path, [1.0, 1.0, 1.04])], samples=True)
    frame, lines = normalized(loaded.frame, loaded.runs)
    assert frame["min"].tolist() == loaded.frame["min"].tolist()
    assert any("no run ≥ 10% off, none divided" in line for line in lines), lines


def _ratios(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, float]:
    """``compare --by run --format csv`` of ``args``: the last run's ratio to the first, per figure."""
    assert main(["compare", *args, "--by", "run", "--no-cache", "--format", "csv"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out), comment="#")
    last = table[table["group"] == table["group"].iloc[-1]]
    return dict(zip(last["figure"], last["ratio"], strict=True))


def test_compare_normalize_tells_a_slower_machine_from_slower_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A/A on a slowed VM (every time and the sentinel ×1.25 in the last run): the plain comparison shows
    every figure of that run ×1.25; --normalize brings them back to ×1.00. A code change (the decode step
    ×1.3 in the last run, the machine as fast as before) stays ×1.3 with --normalize, and is reported."""
    step = "decode step, CPU fused"
    measured = _ratios(capsys, str(_storage(tmp_path / "as measured", [1.0, 1.0, 1.0])))[step]
    slowed = str(_storage(tmp_path / "slowed", [1.0, 1.0, 1.25]))
    assert _ratios(capsys, slowed)[step] == pytest.approx(1.25 * measured, rel=1e-6)
    assert _ratios(capsys, slowed, "--normalize")[step] == pytest.approx(measured, rel=1e-6)
    assert main(["compare", slowed, "--by", "run", "--no-cache", "--normalize"]) == 0
    assert "1 run(s) ≥ 10% off divided by it (1.250)" in capsys.readouterr().out
    code = str(_storage(tmp_path / "code", [1.0, 1.0, 1.0], {"decode_step": 1.3}))
    assert _ratios(capsys, code, "--normalize")[step] == pytest.approx(1.3 * measured, rel=1e-6)
    assert main(["compare", code, "--by", "run", "--no-cache", "--normalize"]) == 0
    found = capsys.readouterr().out
    lead = found.split("Largest change of each kind", 1)[1].splitlines()[1:4]
    assert any(line.lstrip().startswith("C  decode step, CPU") and "slower" in line for line in lead), lead


def test_runs_saved_before_the_sentinel_are_left_as_measured_and_named(tmp_path: Path) -> None:
    loaded = load_runs([RUNS], samples=False)
    frame, lines = normalized(loaded.frame, loaded.runs)
    assert frame["min"].tolist() == loaded.frame["min"].tolist()
    assert lines and lines[-1].startswith("--normalize: 3 run(s) left as measured (no speed sentinel")


def test_the_summary_and_compare_say_a_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(sorted(RUNS.glob("*.json"))[0].read_text(encoding="utf-8"))
    drifted = copy.deepcopy(doc)
    drifted["launchbench_run"].update(_record([1.0, 1.0, 1.2, 1.2]))
    path = tmp_path / "drifted.json"
    path.write_text(json.dumps(drifted), encoding="utf-8")
    assert main(["summary", str(path)]) == 0
    assert "Machine speed drifted 20% during this run" in capsys.readouterr().out
    assert main(["compare", str(path), "--no-cache"]) == 0
    assert "Machine speed drifted 20% during this run" in capsys.readouterr().out


COMMITTED = Path(__file__).parent / "data"


def test_the_limits_hold_on_the_committed_runs_with_a_sentinel() -> None:
    """The quiet runs of today's code (three full, three quick; each record says quiet) stay under both
    limits; the run with two spinning processes from its middle on (its record says busy) drifts past
    DRIFT_LIMIT, and its line says where."""
    loaded = load_runs([COMMITTED / "runs-xeon", COMMITTED / "sentinel"], samples=False)
    runs = loaded.runs.set_index("source")
    quiet = [source for source in runs.index if "loaded" not in source]
    assert len(quiet) == 6
    for source in quiet:
        assert runs.loc[source, "other_cpu_share"] < 0.01  # the record calls it quiet
        ratio = drift(runs.loc[source, "sentinel"])[0]
        assert abs(ratio) < DRIFT_LIMIT / 2, (source, ratio)
        assert drift_line(runs.loc[source].to_dict()) is None
        assert spread(runs.loc[source, "sentinel"])[0] < SPREAD_LIMIT * 0.95, source
    (loaded_run,) = [source for source in runs.index if "loaded" in source]
    line = drift_line(runs.loc[loaded_run].to_dict())
    assert line.startswith("Machine speed drifted 14% during this run")
    ratios = speed_ratios(loaded.runs)
    assert ratios["ratio"].between(1 / (1 + SPEED_LIMIT), 1 + SPEED_LIMIT).all()
    for point in json.loads(runs.loc[quiet[0], "sentinel"])["at"]:
        assert point == "start" or point == "end" or point.startswith("before benchmarks/test_")


def test_a_quiet_record_on_a_machine_that_hops_between_speeds_is_named_unsteady() -> None:
    """tests/data/sentinel-epyc: eleven quick runs on the EPYC VM of 2026-12-07, every record quiet, whose
    machine hopped between two speeds (the n = 1 case's fastest round 32–35 µs in some runs, 63–68 µs in
    others): each is named unsteady, none busy, and no drift line stands beside it. Two runs made inside a
    cgroup with half a CPU's quota (cfs-half-*: a host that gives the VM less CPU, emulated) are named
    busy by their records too: the kernel's tick-sampled /proc/stat charges throttled periods as busy."""
    loaded = load_runs([COMMITTED / "sentinel-epyc"], samples=False)
    lines = condition_lines(loaded.runs)
    quiet = loaded.runs[loaded.runs["source"].str.contains("quiet")]
    assert len(quiet) == 11
    for source, share in zip(quiet["source"], quiet["other_cpu_share"], strict=True):
        assert share < 0.02, source  # the record calls it quiet
        said = lines[source]
        assert [line.split(":")[0] for line in said if not line.startswith("Machine speed: this run")] == [
            "Machine speed unsteady"
        ], said
    n1 = loaded.frame[loaded.frame["name"].eq("test_ufunc_size[n1-x64]")]
    n1 = n1[n1["source"].isin(quiet["source"])]["min"]
    assert n1.max() / n1.min() > SPREAD_LIMIT  # the figures moved with the sentinel
    for source in loaded.runs["source"][loaded.runs["source"].str.contains("cfs-half")]:
        assert lines[source][0].startswith("Busy machine") and "Machine speed unsteady" in lines[source][1]
