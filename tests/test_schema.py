"""analysis.schema through analysis.load: every field analysis reads is checked; a bad case is dropped with
one line naming file, case and field, a bad file with one line, and the good run beside it is still used.

Each bad file is one of tests/data's real runs with one field changed here (or cut, or nested), loaded beside
the real run of another machine.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from analysis.load import load_doc, load_runs
from analysis.schema import CASE_FIELDS, RUN_RECORD_KEY, SUITE, first_problem
from tests.test_load import write_json
from tests.test_trust import with_record

DATA = Path(__file__).parent / "data"
XEON = DATA / "cpu-2core-full.json"
EPYC = DATA / "cpu-2core-epyc-full.json"
ROOT = Path(__file__).resolve().parent.parent


def real(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def first_case(doc: dict, family: str = "many_vs_one") -> dict:
    return next(b for b in doc["benchmarks"] if b["extra_info"]["case"] == family)


def load_beside_good(tmp_path: Path, bad: Path) -> tuple[object, Path]:
    """``load_runs`` of the good EPYC run and ``bad``; the good run must be there whole."""
    good = write_json(tmp_path / "good.json", real(EPYC))
    result = load_runs([good, bad], samples=True)
    alone = load_runs([good], samples=True)
    assert str(good) in set(result.frame["source"])
    assert (result.frame["source"] == str(good)).sum() == len(alone.frame)
    return result, good


# --- a bad case is dropped, the rest of its run used --------------------------------------------------------

BAD_CASES = [
    ("stats", "median", "fast", "stats.median = 'fast' (a time must be a finite number > 0 s)"),
    ("stats", "min", 1e-15, "stats.min = 1e-15 (a time must lie within 1e-12 s … 1e+06 s)"),
    ("stats", "max", 2e6, "stats.max = 2000000.0 (a time must lie within 1e-12 s … 1e+06 s)"),
    ("stats", "rounds", 0, "stats.rounds = 0 (must be a finite number > 0)"),
    ("stats", "iterations", 2.5, "stats.iterations = 2.5 (must be a whole number)"),
    ("stats", "stddev", None, "stats.stddev = None (a spread must be a finite number ≥ 0 s)"),
    ("stats", "ops", "many", "stats.ops = 'many' (must be a finite number > 0)"),
    ("extra_info", "n", "x", "extra_info.n = 'x' (must be a finite number > 0)"),
    ("extra_info", "n", 2**60, "extra_info.n = 1152921504606846976 (must be at most 2^53)"),
    (
        "extra_info",
        "pieces",
        10**400,
        f"extra_info.pieces = {repr(10**400)[:59]}… (must be a finite number > 0)",
    ),
    ("extra_info", "flops", -1, "extra_info.flops = -1 (must be a finite number ≥ 0)"),
    ("extra_info", "case", 5, "extra_info.case = 5 (must be text)"),
    ("extra_info", "op", "np.add\nrm -rf", "extra_info.op = 'np.add\\nrm -rf' (must be printable text)"),
    ("extra_info", "variant", "", "extra_info.variant = '' (must not be empty)"),
    ("extra_info", "variant", ["views"], "extra_info.variant = a list of 1 (must be text)"),
    ("extra_info", "n_args", -1, "extra_info.n_args = -1 (must be a finite number ≥ 0)"),
    ("extra_info", "achieved_ns", float("nan"), "extra_info.achieved_ns = nan (must be a finite number ≥ 0)"),
    ("extra_info", "layer", 3, "extra_info.layer = 3 (must be text)"),
    (
        "extra_info",
        "op_counts",
        {"np.add(1d, 1d)": 0},
        "extra_info.op_counts = an object (must map each op to a count ≥ 1 (bad entry: 'np.add(1d, 1d)': 0))",
    ),
    (
        "extra_info",
        "op_counts",
        [],
        "extra_info.op_counts = a list of 0 (must be a non-empty object of op -> count)",
    ),
    ("extra_info", "probe_s", [], "extra_info.probe_s = a list of 0 (must not be empty)"),
    (
        "extra_info",
        "probe_s",
        [0.01, -1],
        "extra_info.probe_s = a list of 2 (must be a list of times, each a finite number > 0 s)",
    ),
    (None, "name", None, "name = None (must be text)"),
    (None, "stats", "fast", "stats = 'fast' (must be an object)"),
    (None, "options", [], "options = a list of 0 (must be an object)"),
]


@pytest.mark.parametrize(("part", "key", "value", "said"), BAD_CASES)
def test_a_bad_field_drops_its_case_with_one_line(
    tmp_path: Path, part: str | None, key: str, value: object, said: str
) -> None:
    doc = real(XEON)
    bench = first_case(doc)
    (bench if part is None else bench[part])[key] = value
    bad = write_json(tmp_path / "bad.json", doc)
    result, _ = load_beside_good(tmp_path, bad)
    assert result.problems == (f"{bad}: case {bench['fullname']}: dropped: {said}",)
    assert (result.frame["source"] == str(bad)).sum() == len(doc["benchmarks"]) - 1


def test_every_checked_field_of_every_case_is_checked_and_named() -> None:
    """``first_problem`` misses no field: every checked field of every case of today's full run, set to a
    value no check accepts, is the one problem named; a case left whole has none."""
    doc = real(DATA / "runs-xeon" / "xeon-2core-full-1.json")
    named = 0
    bad_value = "bad\n"  # no check accepts it: a text must be printable, a number is no text
    for bench in doc["benchmarks"]:
        assert first_problem(bench, CASE_FIELDS) is None
        for part in ("extra_info", "stats"):
            checks = CASE_FIELDS.checks[part].checks
            for key in [key for key in bench[part] if key in checks]:
                bad = copy.deepcopy(bench)
                bad[part][key] = bad_value
                assert (
                    first_problem(bad, CASE_FIELDS)
                    == f"{part}.{key} = {bad_value!r} ({checks[key](bad_value)})"
                )
                named += 1
        for part in ("extra_info", "stats"):
            assert first_problem({**bench, part: None}, CASE_FIELDS) == f"{part} is missing"
    assert named > 1000


def test_a_call_list_by_op_is_carried_as_a_mapping(tmp_path: Path) -> None:
    doc = real(XEON)
    first_case(doc)["extra_info"]["op_counts"] = {"np.add(1d, 1d)": 3, "np.copyto(1d, 1d)": 1}
    result = load_runs([write_json(tmp_path / "counts.json", doc)], samples=False)
    assert not result.problems
    (counts,) = [c for c in result.frame["op_counts"] if isinstance(c, dict)]
    assert counts == {"np.add(1d, 1d)": 3, "np.copyto(1d, 1d)": 1}


def test_the_probes_rounds_are_carried_as_a_tuple_of_times(tmp_path: Path) -> None:
    doc = real(XEON)
    first_case(doc)["extra_info"]["probe_s"] = [0.012, 0.0115]
    result = load_runs([write_json(tmp_path / "probe.json", doc)], samples=False)
    assert not result.problems
    (rounds,) = [r for r in result.frame["probe_s"] if isinstance(r, tuple)]
    assert rounds == (0.012, 0.0115)


def test_a_missing_coordinate_or_statistic_is_named(tmp_path: Path) -> None:
    doc = real(XEON)
    first, second = doc["benchmarks"][:2]
    del first["extra_info"]["case"]
    del second["stats"]["mean"]
    bad = write_json(tmp_path / "bad.json", doc)
    result, _ = load_beside_good(tmp_path, bad)
    assert result.problems == (
        f"{bad}: case {first['fullname']}: dropped: extra_info.case is missing",
        f"{bad}: case {second['fullname']}: dropped: stats.mean is missing",
    )


@pytest.mark.parametrize(
    ("family", "key"),
    [
        ("many_vs_one", "pieces"),
        ("ufunc_size", "n_calls"),
        ("decode_step", "ctx"),
        ("decode_step", "n_calls"),
    ],
)
def test_a_coordinate_its_family_always_records_is_required(tmp_path: Path, family: str, key: str) -> None:
    """Without it the family's analysis would compute with a gap (a NaN count of pieces, of numpy calls)."""
    doc = real(XEON)
    bench = first_case(doc, family)
    del bench["extra_info"][key]
    bad = write_json(tmp_path / "bad.json", doc)
    result, _ = load_beside_good(tmp_path, bad)
    said = f"extra_info.{key} is missing (every {family} case records it)"
    assert result.problems == (f"{bad}: case {bench['fullname']}: dropped: {said}",)


def test_quartiles_out_of_order_drop_the_case(tmp_path: Path) -> None:
    doc = real(XEON)
    bench = first_case(doc)
    stats = bench["stats"]
    stats["q1"] = stats["median"] * 1.5
    bad = write_json(tmp_path / "bad.json", doc)
    result, _ = load_beside_good(tmp_path, bad)
    chain = " ≤ ".join(f"{key} {stats[key]!r}" for key in ("min", "q1", "median", "q3", "max"))
    assert result.problems == (
        f"{bad}: case {bench['fullname']}: dropped: stats out of order: {chain} does not hold (q1 > median)",
    )


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (["x", None], "stats.data is not a list of numbers"),
        ("fast", "stats.data is not a list of numbers"),
        ([], "stats.data is empty"),
        ([1e-6, 2e6], "1 of 2 lie outside 1e-12 s … 1e+06 s (first: 2000000.0); its statistics are used"),
        ([1e-6, 10**400], "stats.data holds a number beyond float64"),
    ],
)
def test_bad_raw_samples_are_left_out_and_the_case_kept(tmp_path: Path, data: object, said: str) -> None:
    doc = real(XEON)
    bench = first_case(doc)
    bench["stats"]["data"] = data
    bad = write_json(tmp_path / "bad.json", doc)
    result, _ = load_beside_good(tmp_path, bad)
    assert result.problems == (f"{bad}: case {bench['fullname']}: raw samples left out: {said}",)
    kept = result.frame.set_index("fullname").loc[bench["fullname"]]
    kept = kept[kept["source"] == str(bad)].iloc[0]
    assert kept["data"] is None
    assert kept["median"] == bench["stats"]["median"]


def test_unknown_extra_info_keys_never_replace_a_column_or_hold_a_list(tmp_path: Path) -> None:
    """Keys launchbench never writes are not checked (saved runs outlive code) but cannot move a row to
    another run or machine, and a list or object (no frame cell) is not carried."""
    doc = real(XEON)
    for bench in doc["benchmarks"]:
        bench["extra_info"].update(machine_id="someone else", source="elsewhere", note="kept", shape=[2, 3])
    bad = write_json(tmp_path / "bad.json", doc)
    result, _ = load_beside_good(tmp_path, bad)
    assert result.problems == ()
    rows = result.frame[result.frame["source"] == str(bad)]
    assert len(rows) == len(doc["benchmarks"])
    assert "someone else" not in set(result.frame["machine_id"])
    assert set(rows["note"]) == {"kept"}
    assert "shape" not in result.frame.columns


# --- a bad run-level field drops the file -------------------------------------------------------------------

MACHINE = "the machine that measured the run cannot be told"
POOLING = "whether the run may be pooled with others cannot be told"
SAVED = "when and by what the run was saved cannot be told"


def _set(doc: dict, path: tuple[str, ...], value: object) -> None:
    *parents, last = path
    for key in parents:
        doc = doc[key]
    if value is _DELETE:
        del doc[last]
    else:
        doc[last] = value


_DELETE = object()

BAD_RUNS = [
    (("machine_info",), "a string", f"machine_info = 'a string' (must be an object); {MACHINE}"),
    (("machine_info",), _DELETE, f"machine_info is missing; {MACHINE}"),
    (("machine_info", SUITE), 7, f"machine_info.launchbench = 7 (must be an object); {MACHINE}"),
    (("machine_info", SUITE, "host"), 5, f"machine_info.launchbench.host = 5 (must be text); {MACHINE}"),
    (
        ("machine_info", SUITE, "host"),
        "\ud800",
        f"machine_info.launchbench.host = '\\ud800' (must be printable text); {MACHINE}",
    ),
    (
        ("machine_info", SUITE, "logical_cpus"),
        "2",
        f"machine_info.launchbench.logical_cpus = '2' (must be a finite number > 0); {MACHINE}",
    ),
    (
        ("machine_info", "cpu", "brand_raw"),
        ["Xeon"],
        f"machine_info.cpu.brand_raw = a list of 1 (must be text); {MACHINE}",
    ),
    (("machine_info", "node"), None, None),  # null: "not known", the run is used
    ((RUN_RECORD_KEY,), [], f"launchbench_run = a list of 0 (must be an object); {POOLING}"),
    (
        (RUN_RECORD_KEY, "status"),
        5,
        f"launchbench_run.status = 5 (must be 'completed' or 'interrupted'); {POOLING}",
    ),
    ((RUN_RECORD_KEY, "quick"), "no", f"launchbench_run.quick = 'no' (must be true or false); {POOLING}"),
    ((RUN_RECORD_KEY, "quick"), _DELETE, f"launchbench_run.quick is missing; {POOLING}"),
    ((RUN_RECORD_KEY, "cases"), "x", f"launchbench_run.cases = 'x' (must be an object); {POOLING}"),
    (
        (RUN_RECORD_KEY, "cases", "unfinished"),
        [1],
        f"launchbench_run.cases.unfinished = a list of 1 (must be a list of text); {POOLING}",
    ),
    (
        (RUN_RECORD_KEY, "conditions", "during", "other_cpu_share"),
        "high",
        "launchbench_run.conditions.during.other_cpu_share = 'high' (must be a finite number ≥ 0); "
        + POOLING,
    ),
    ((RUN_RECORD_KEY, "faults"), 7, f"launchbench_run.faults = 7 (must be a list of text); {POOLING}"),
    ((RUN_RECORD_KEY, "status"), _DELETE, None),  # a record without a status is read as none (legacy)
    (("datetime",), "yesterday", f"datetime = 'yesterday' (must be an ISO 8601 time); {SAVED}"),
    (("version",), 5.2, f"version = 5.2 (must be text); {SAVED}"),
    (("commit_info",), "abc", f"commit_info = 'abc' (must be an object); {SAVED}"),
]


@pytest.mark.parametrize(("path", "value", "said"), BAD_RUNS)
def test_a_bad_run_field_drops_the_file_with_one_line(
    tmp_path: Path, path: tuple[str, ...], value: object, said: str | None
) -> None:
    doc = with_record(real(XEON))
    _set(doc, path, value)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc), encoding="utf-8", errors="surrogatepass")
    result, good = load_beside_good(tmp_path, bad)
    if said is None:
        assert result.problems == ()
        assert str(bad) in set(result.frame["source"])
        return
    assert result.problems == (f"{bad}: dropped: {said}",)
    assert result.files_used == (good,)


def test_a_case_name_that_would_break_the_line_is_quoted(tmp_path: Path) -> None:
    doc = real(XEON)
    bench = first_case(doc)
    bench["fullname"] = "test_x[a\nb]"
    bench["stats"]["min"] = -1.0
    bad = write_json(tmp_path / "bad.json", doc)
    result, _ = load_beside_good(tmp_path, bad)
    (line,) = result.problems
    assert line.startswith(f"{bad}: case 'test_x[a\\nb]': dropped: ")
    assert "\n" not in line


# --- files that cannot be parsed ----------------------------------------------------------------------------


def test_deep_nesting_and_absurd_numbers_drop_the_file(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"benchmarks": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    digits = tmp_path / "digits.json"
    text = json.dumps(real(XEON)).replace('"rounds": ', '"rounds": ' + "9" * 5000 + ', "was": ', 1)
    digits.write_text(text, encoding="utf-8")
    deep_value = real(XEON)
    deep_value["machine_info"]["launchbench"]["env"] = "NESTED"
    nested = tmp_path / "nested.json"
    nested.write_text(
        json.dumps(deep_value).replace('"NESTED"', "[" * 100_000 + "]" * 100_000), encoding="utf-8"
    )
    good = write_json(tmp_path / "good.json", real(EPYC))
    for samples in (True, False):
        result = load_runs([deep, digits, nested, good], samples=samples)
        assert result.problems == (
            f"{deep}: nested too deeply to be a saved run (RecursionError)",
            f"{digits}: is not valid JSON for Python: Exceeds the limit (4300 digits) for integer string "
            "conversion: value has 5000 digits; use sys.set_int_max_str_digits() to increase the limit",
            f"{nested}: nested too deeply to be a saved run (RecursionError)",
        )
        assert result.files_used == (good,)


def test_a_file_cut_anywhere_is_one_line(tmp_path: Path) -> None:
    doc = real(XEON)
    first_case(doc)["extra_info"]["op"] = "np.add µ"  # a two-byte character to cut through
    raw = json.dumps(doc, ensure_ascii=False).encode("utf-8")
    inside = raw.index("µ".encode()) + 1
    number = raw.index(b"e-0") + 1  # inside a number: "2.7e" of "2.7e-07" fails before its end
    cuts = {"start": 1, "middle": len(raw) // 2, "number": number, "character": inside, "end": len(raw) - 1}
    for name, cut in cuts.items():
        path = tmp_path / f"cut-{name}.json"
        path.write_bytes(raw[:cut])
    result = load_runs(sorted(tmp_path.glob("cut-*.json")), samples=True)
    assert result.frame.empty
    lines = {line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in result.problems}
    assert lines[str(tmp_path / "cut-character.json")] == "ends early inside a character (truncated?)"
    for name in ("start", "middle", "number", "end"):
        assert lines[str(tmp_path / f"cut-{name}.json")].startswith("ends early (truncated?): ")


_MEMORY_CHILD = """
import resource, sys
from analysis.load import load_runs
def vm_bytes():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
limit = vm_bytes() + 150 * 2**20  # 150 MiB beyond what is mapped now; the big file needs ~500 MiB
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
result = load_runs(sys.argv[1:], samples=True)
for line in result.problems:
    print(line)
print("used", *result.files_used)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc to size the limit")
def test_a_file_too_large_for_memory_is_one_line_and_the_rest_is_used(tmp_path: Path) -> None:
    """Under an address-space limit (as ``ulimit -v``), a run whose parse needs more memory than is left
    (60 MB of zeros: ~500 MiB as Python objects) is skipped with one line; the good run is still loaded."""
    big = tmp_path / "big.json"
    with big.open("w", encoding="utf-8") as file:
        file.write('{"benchmarks": [], "padding": [')
        file.write("0," * 30_000_000)
        file.write("0]}")
    good = write_json(tmp_path / "good.json", real(EPYC))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _MEMORY_CHILD, str(big), str(good)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"{big}: too large to load in the memory available (MemoryError)",
        f"used {good}",
    ]


_UNREADABLE_CHILD = """
import codecs, os, sys
from analysis.load import load_runs
if os.geteuid() == 0:  # root reads every folder: load as user 'nobody' ...
    codecs.lookup("utf-8-sig")  # ... with what it imports lazily imported first (Python may be root's own)
    os.setgid(65534)
    os.setuid(65534)
result = load_runs([sys.argv[1]], samples=False)
for line in result.problems:
    print(line)
print("used", *result.files_used)
"""


@pytest.mark.skipif(os.name != "posix", reason="folder permissions as POSIX has them")
def test_an_unreadable_subfolder_is_one_line() -> None:
    """A folder under a storage that cannot be listed is named (its runs would be missed in silence). Root
    reads every folder, so as root the child process loads as user 'nobody'."""
    with tempfile.TemporaryDirectory() as shared:
        storage = Path(shared) / "storage"
        readable = storage / "Linux-CPython-3.11-64bit"
        write_json(readable / "0001_good.json", real(EPYC))
        locked = storage / "Linux-CPython-3.12-64bit"
        write_json(locked / "0002_hidden.json", real(XEON))
        for folder in (Path(shared), storage, readable):
            folder.chmod(0o755)
        (readable / "0001_good.json").chmod(0o644)
        locked.chmod(0o000)
        try:
            done = subprocess.run(
                [sys.executable, "-c", _UNREADABLE_CHILD, str(storage)],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                timeout=120,
                check=False,
            )
        finally:
            locked.chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"{locked}: folder cannot be read (Permission denied): the runs in it are not loaded",
        f"used {readable / '0001_good.json'}",
    ]


def test_load_doc_never_changes_the_run_it_is_given() -> None:
    """The terminal summary hands pytest-benchmark's own document in: checking it must not change it (raw
    samples dropped, ops filled, bad cases removed are all in the result only)."""
    doc = with_record(real(XEON))
    benches = doc["benchmarks"]
    benches[0]["stats"]["data"][0] = -1.0
    benches[1]["stats"].pop("ops")
    benches[2]["stats"]["median"] = "fast"
    before = copy.deepcopy(doc)
    result = load_doc(doc, source="this run")
    assert doc == before
    assert len(result.problems) == 2
    assert len(result.frame) == len(benches) - 1
    assert result.frame.set_index("fullname").loc[benches[1]["fullname"], "ops"] == pytest.approx(
        1 / benches[1]["stats"]["mean"]
    )
