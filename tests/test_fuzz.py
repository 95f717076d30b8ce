"""Property-based fuzz of analysis' loading and CLI (Hypothesis) on mutated copies of the committed real runs.

A mutated run is one of tests/data's real CPU runs, or the SYNTHETIC GPU run of ``tests/test_report.py``
(labelled so; no real GPU run is saved yet, and the GPU families' analysis must be fuzzed too), given a run
record as ``benchmarks/run_record.py`` writes it (``tests.test_trust.with_record``), with up to four fields
changed: a value replaced by another type, a number made NaN, ±∞, negative, zero, tiny or huge, text made
empty or unprintable, a key deleted, a key launchbench never writes added (some named like the frame's own
columns), a value nested 10⁵ lists deep; and then the file itself perhaps truncated, a byte flipped,
encoded as UTF-16 or nested. Whatever the mutation:

- ``load_runs`` and ``load_doc`` never raise, every problem is one line, and neither changes its input (the
  files' SHA-256 and the parsed document are the same after);
- every case they keep has finite times within ``analysis.schema.TIME_RANGE_S``;
- a good run (the other real machine) loaded beside the mutated one gives the same rows, and through
  ``python -m analysis compare`` (run in-process, ``analysis.__main__.main``) the same figures, as alone;
- ``compare`` and ``report`` exit 0 with the good run beside (1 at most for the mutated run alone) and never
  raise.

Beyond launchbench's own runs (issue 21):

- another suite's run (a real run with launchbench's coordinates taken out), mutated the same way, never
  makes ``analysis.foreign.load_cases`` raise; the good suite run beside it keeps its rows, every time kept
  lies within ``TIME_RANGE_S`` (an integer of 400 digits included) and no text kept holds a control
  character;
- an output folder's manifest holding any entries (paths out of the folder, absolute, through a link,
  control characters, junk digests, owners of the wrong type) never makes ``publish`` write or remove
  anything outside the folder, nor raise anything but one ``OutputError`` line;
- any path text (globs, "..", a link loop, a pipe, a name too long, control characters) loads or is one
  line, and as ``--out`` is created or refused in one line.

Beyond the runs, the caches (issue 32): any change to the bytes of a cached rows file, a cache
segment's index or a kept result (a flipped bit, a cut, an inserted or zeroed run of bytes, an empty file, a
pickle that would run a command, a sealed value of another shape, an unknown tag, nesting past any parser's
limit) serves the rows parsing gives and the result computed, or nothing, and runs no code; any bytes are a
sealed value or one ValueError.

Bounded for CI by the shared profiles of ``tests/conftest.py`` (derandomized; the CLI tests draw a share of
the profile's examples); ``LAUNCHBENCH_HYPOTHESIS=deep`` for a longer local hunt.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("hypothesis", reason="needs hypothesis, of the dev extra: pip install -e '.[dev]'")
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.__main__ import main
from analysis.foreign import load_cases
from analysis.load import expand_paths, load_doc, load_runs
from analysis.output import MANIFEST_NAME, OutputError, check_out, publish, remove_created
from analysis.schema import TIME_RANGE_S
from tests.test_report import synthetic_gpu_run
from tests.test_trust import with_record

DATA = Path(__file__).parent / "data"
#: Loaded beside every mutated run; its rows and figures must not move.
GOOD = DATA / "cpu-2core-epyc-full.json"
#: Mutated (other machines than GOOD's): the full run for the CLI, the quick run (smaller) for loading, and
#: the SYNTHETIC GPU run for both.
FULL = DATA / "cpu-2core-full.json"
QUICK = DATA / "cpu-2core-quick.json"

#: GOOD's machine, the baseline of every comparison beside a mutated run.
GOOD_MACHINE = str(load_runs([GOOD], samples=False).frame["machine_id"].iloc[0])

#: Nesting deeper than any JSON parser's recursion limit.
DEEP = 100_000
_SENTINEL = "\x00fuzz-{}\x00"


def _base(path: Path) -> dict:
    return with_record(json.loads(path.read_text(encoding="utf-8")))


def _foreign(path: Path) -> dict:
    """A real run as another pytest-benchmark suite's: its cases without launchbench's coordinates."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    for bench in doc["benchmarks"]:
        bench["extra_info"] = {}
    return doc


BASES = {
    "full": _base(FULL),
    "quick": _base(QUICK),
    "gpu": with_record(synthetic_gpu_run()),
    "foreign": _foreign(QUICK),
}


def _paths(value: object, prefix: tuple = ()) -> Iterator[tuple]:
    """Every path (keys and indices) into ``value``; of a raw-sample list only its first and last entry."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        indices = [0, len(value) - 1] if prefix and prefix[-1] == "data" and value else range(len(value))
        for index in indices:
            yield (*prefix, index)
            yield from _paths(value[index], (*prefix, index))


PATHS = {name: list(_paths(doc)) for name, doc in BASES.items()}

#: JSON texts put in place of a field: other types, impossible numbers, odd text, deep nesting.
_RAW = st.one_of(
    st.sampled_from(
        [
            "NaN",
            "Infinity",
            "-Infinity",
            "1e400",
            "-1e400",
            "0",
            "-0.0",
            "-1",
            "-2.5e-05",
            "1e-320",
            "1.5",
            "1e30",
            "9" * 5000,  # more digits than Python turns into an int
            "1" + "0" * 400,  # an integer past the float range, written as one
            "1e300",
            "5e-324",
            str(2**64),
            "true",
            "false",
            "null",
            '""',
            '"x"',
            '"a\\nb"',
            '"\\ud800"',  # an unpaired surrogate
            '"\\u0000"',
            '"x\\u001b[2J\\u001b[31m"',  # an escape sequence: clears and recolours a terminal
            "[]",
            "{}",
            '["x", null]',
            "[1, 2, 3]",
            '{"a": 1}',
            "[" * 900 + "]" * 900,
            "[" * DEEP + "]" * DEEP,
        ]
    ),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
        max_leaves=6,
    ).map(lambda value: json.dumps(value)),
)


_MUTATION = st.one_of(
    st.tuples(st.just("set"), st.integers(min_value=0), _RAW),
    st.tuples(  # a key launchbench never writes, some named like the frame's own columns
        st.just("add"),
        st.integers(min_value=0),
        st.tuples(st.sampled_from(["machine_id", "source", "data", "median", "unknown"]), _RAW),
    ),
    st.tuples(st.just("delete"), st.integers(min_value=0), st.none()),
    st.tuples(st.just("scale"), st.integers(min_value=0), st.sampled_from([-1.0, 0.0, 1e-30, 1e30, 1e300])),
)
#: What happens to the file's bytes after the fields are changed.
_FILE = st.one_of(
    st.just(("keep", 0.0)),
    st.tuples(st.just("truncate"), st.floats(min_value=0, max_value=1)),
    st.tuples(st.just("flip"), st.floats(min_value=0, max_value=1)),
    st.just(("utf-16", 0.0)),
    st.just(("bom", 0.0)),
    st.just(("wrap", 0.0)),
)


def mutated_text(base: str, mutations: list[tuple], file_change: tuple[str, float]) -> bytes:
    """The bytes of base run ``base`` with ``mutations`` applied (each on the path at its index modulo the
    number of paths), then ``file_change``. Only the containers on a mutated path are copied."""
    doc = dict(BASES[base])
    paths = PATHS[base]
    raw: dict[str, str] = {}
    for kind, index, value in mutations:
        path = paths[index % len(paths)]
        parent = _copied_parent(doc, path)
        if parent is None:
            continue  # the path went through a value an earlier mutation replaced
        key = path[-1]
        if kind == "add":
            if not isinstance(parent[key], dict):
                continue
            parent[key] = dict(parent[key])
            parent, (key, value) = parent[key], value
        elif kind == "delete":
            if isinstance(parent, dict):
                del parent[key]
            continue
        elif kind == "scale":
            if isinstance(parent[key], int | float) and not isinstance(parent[key], bool):
                parent[key] = parent[key] * value
            continue
        sentinel = _SENTINEL.format(len(raw))
        raw[json.dumps(sentinel)] = value
        parent[key] = sentinel
    text = json.dumps(doc)
    for sentinel, value in raw.items():
        text = text.replace(sentinel, value)
    data = text.encode("utf-8", "surrogatepass")
    change, where = file_change
    cut = int(where * len(data))
    if change == "truncate":
        return data[:cut]
    if change == "flip":
        at = min(cut, len(data) - 1)
        return data[:at] + bytes([data[at] ^ 0xA5]) + data[at + 1 :]
    if change == "utf-16":
        return text.encode("utf-16", "surrogatepass")
    if change == "bom":
        return b"\xef\xbb\xbf" + data
    if change == "wrap":
        return b"[" * DEEP + data + b"]" * DEEP
    return data


def _copied_parent(doc: dict, path: tuple) -> dict | list | None:
    """The container holding ``path``'s last step, with every container on the way copied into ``doc``."""
    node: object = doc
    for step in path[:-1]:
        if (isinstance(node, dict) and step in node) or (isinstance(node, list) and step < len(node)):
            child = node[step]
        else:
            return None
        if not isinstance(child, dict | list):
            return None
        child = copy.copy(child)
        node[step] = child
        node = child
    last = path[-1]
    if (isinstance(node, dict) and last in node) or (isinstance(node, list) and last < len(node)):
        return node
    return None


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    """A folder for the mutated files and outputs (Hypothesis runs many examples per test call)."""
    folder = Path(tempfile.mkdtemp(prefix="launchbench-fuzz-"))
    (folder / "runs").mkdir()
    shutil.copy(GOOD, folder / "runs" / "good.json")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _inputs(workdir: Path, content: bytes) -> tuple[Path, Path, dict[Path, str]]:
    """The good run and the mutated one (written with ``content``), and both files' SHA-256."""
    good = workdir / "runs" / "good.json"
    bad = workdir / "runs" / "mutated.json"
    bad.write_bytes(content)
    return good, bad, {good: _digest(good), bad: _digest(bad)}


def _unchanged(digests: dict[Path, str]) -> bool:
    return {path: _digest(path) for path in digests} == digests


#: A mutated full CPU run or SYNTHETIC GPU run, as the CLI tests draw them.
_CLI_EXAMPLE = {
    "base": st.sampled_from(["full", "gpu"]),
    "mutations": st.lists(_MUTATION, min_size=1, max_size=4),
    "file_change": _FILE,
}


_ALONE: dict[tuple[Path, bool], pd.DataFrame] = {}


def _good_alone(good: Path, samples: bool) -> pd.DataFrame:
    """The good run's frame loaded alone (once per workdir and ``samples``)."""
    if (good, samples) not in _ALONE:
        _ALONE[good, samples] = load_runs([good], samples=samples).frame
    return _ALONE[good, samples]


def _assert_same_rows(combined: pd.DataFrame, alone: pd.DataFrame, source: str) -> None:
    """The rows of ``source`` in ``combined`` hold the values they hold in ``alone`` (a column's dtype may
    widen when another file's rows join it: ints beside a missing value become floats).

    ``DataFrame.equals`` is asked first: without categorical columns (whose categories' order it ignores) it
    holds only where pandas' assertion holds too (the same values, NaN where NaN, the same columns and index,
    and the same dtypes besides) and takes a tenth of its time; where it does not hold (a widened dtype, or a
    real difference) the assertion judges, as before."""
    columns = [column for column in alone.columns if column != "data"]
    rows = (combined["source"] == source).to_numpy()
    mine = combined.loc[rows, columns].reset_index(drop=True)
    theirs = alone[columns].reset_index(drop=True)
    categorical = any(isinstance(dtype, pd.CategoricalDtype) for dtype in theirs.dtypes)
    if categorical or not mine.equals(theirs):
        pd.testing.assert_frame_equal(mine, theirs, check_dtype=False, check_exact=True)
    for a, b in zip(combined.loc[rows, "data"], alone["data"], strict=True):
        assert (a is None and b is None) or np.array_equal(a, b)


def _assert_times_possible(frame: pd.DataFrame) -> None:
    low, high = TIME_RANGE_S
    for column in ("min", "median", "mean"):
        values = frame[column].to_numpy(dtype=float)
        assert np.all(np.isfinite(values) & (values >= low) & (values <= high)), column


def _one_line_each(lines: tuple[str, ...] | list[str]) -> None:
    for line in lines:
        assert "\n" not in line and "\r" not in line, line


#: Per test, the mutated files it has checked and found sound: the SHA-256 of the bytes, with the flags they
#: were checked with. Different draws often give the same bytes (a file truncated to nothing, wrapped, or
#: changed on a field an earlier mutation replaced): 9 of the CLI test's 50 examples and 102 of the loading
#: test's 300 repeat a file already checked (the ``ci`` profile). The same bytes through the same code prove
#: nothing new, so such an example passes at once; a file is recorded only once every assertion on it held (a
#: failing one is never skipped, also when Hypothesis replays or shrinks it).
_PASSED: dict[str, set[tuple[str, bool]]] = {"load": set(), "compare": set()}


def _already_passed(test: str, content: bytes, samples: bool = True) -> tuple[bool, tuple[str, bool]]:
    """Whether ``test`` has passed on ``content`` (with ``samples``) already, and the key to record it by."""
    key = (hashlib.sha256(content).hexdigest(), samples)
    return key in _PASSED[test], key


@given(
    base=st.sampled_from(["quick", "gpu"]),
    mutations=st.lists(_MUTATION, min_size=1, max_size=4),
    file_change=_FILE,
    samples=st.booleans(),
)
def test_loading_a_mutated_run_never_raises_and_keeps_the_good_run(
    workdir: Path, base: str, mutations: list[tuple], file_change: tuple[str, float], samples: bool
) -> None:
    content = mutated_text(base, mutations, file_change)
    seen, key = _already_passed("load", content, samples)
    if seen:
        return
    _check_loading(workdir, content, samples)
    _PASSED["load"].add(key)


def _check_loading(workdir: Path, content: bytes, samples: bool) -> None:
    """The loading test's checks of one mutated file (``content``) beside the good run."""
    good, bad, before = _inputs(workdir, content)
    alone = _good_alone(good, samples)
    result = load_runs([good, bad], samples=samples)
    assert _unchanged(before)
    _one_line_each(result.problems)
    _assert_same_rows(result.frame, alone, str(good))
    _assert_times_possible(result.frame)
    assert set(result.runs["source"]) == set(result.frame["source"])
    # The run in memory (the terminal summary's path): never raises, never changes the document.
    try:
        doc = json.loads(content)
    except (ValueError, RecursionError):
        return
    text_before = json.dumps(doc, sort_keys=True)
    in_memory = load_doc(doc, source="this run")
    assert json.dumps(doc, sort_keys=True) == text_before
    _one_line_each(in_memory.problems)
    _assert_times_possible(in_memory.frame)


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _baseline_cells(out: str) -> dict[str, str]:
    """Figure label -> the baseline machine's cell, from the machine table ``compare`` prints."""
    cells = {}
    for line in out.splitlines():
        if line.startswith("| ") and not line.startswith("| figure"):
            parts = [part.strip() for part in line.strip().strip("|").split(" | ")]
            cells[parts[0]] = parts[1]
    return cells


@pytest.fixture(scope="module")
def good_alone(workdir: Path) -> dict[str, str]:
    code, out, _ = _run(["compare", str(workdir / "runs" / "good.json"), "--format", "markdown"])
    assert code == 0
    cells = _baseline_cells(out)
    assert len(cells) > 5
    return cells


@settings(max_examples=max(10, settings().max_examples // 6))
@given(**_CLI_EXAMPLE)
def test_compare_beside_a_mutated_run_prints_the_good_figures(
    workdir: Path,
    good_alone: dict[str, str],
    base: str,
    mutations: list[tuple],
    file_change: tuple[str, float],
) -> None:
    content = mutated_text(base, mutations, file_change)
    seen, key = _already_passed("compare", content)
    if seen:
        return
    good, bad, before = _inputs(workdir, content)
    # The good run's machine is the baseline by name: by default it is the earliest run's, which a mutated
    # datetime may change.
    argv = ["compare", str(good), str(bad), "--format", "markdown", "--baseline", GOOD_MACHINE]
    code, out, err = _run(argv)
    assert code == 0, err
    assert all(line.startswith("python -m analysis: ") for line in err.splitlines()), err
    cells = _baseline_cells(out)
    assert {label: cells.get(label) for label in good_alone} == good_alone
    code, _, err = _run(["compare", str(bad)])
    assert code in (0, 1), err
    assert all(line.startswith("python -m analysis: ") for line in err.splitlines()), err
    assert _unchanged(before)
    _PASSED["compare"].add(key)


@settings(max_examples=max(5, settings().max_examples // 30))
@given(**_CLI_EXAMPLE)
def test_report_beside_a_mutated_run_is_written(
    workdir: Path, base: str, mutations: list[tuple], file_change: tuple[str, float]
) -> None:
    good, bad, before = _inputs(workdir, mutated_text(base, mutations, file_change))
    out_dir = workdir / "report"
    code, out, err = _run(["report", str(good), str(bad), "--out", str(out_dir)])
    assert code == 0, err
    assert out.startswith(f"wrote {out_dir / 'report.md'} (")
    assert (out_dir / "report.md").read_text(encoding="utf-8").startswith("# launchbench report")
    assert _unchanged(before)


def test_the_mutations_reach_what_analysis_reads() -> None:
    """The fuzz is only as good as its paths: they cover the statistics, coordinates, raw samples, machine
    and run record of every case, so each check of ``analysis.schema`` can be hit."""
    reached = {tuple(step for step in path if not isinstance(step, int)) for path in PATHS["full"]}
    for path in [
        ("benchmarks", "stats", "median"),
        ("benchmarks", "stats", "data"),
        ("benchmarks", "extra_info", "n"),
        ("benchmarks", "extra_info", "case"),
        ("benchmarks", "name"),
        ("machine_info", "launchbench", "host"),
        ("machine_info",),
        ("launchbench_run", "status"),
        ("launchbench_run", "conditions", "during", "other_cpu_share"),
        ("launchbench_run", "cases", "unfinished"),
    ]:
        assert path in reached, path
    where = PATHS["quick"].index(("machine_info",))
    doc = json.loads(mutated_text("quick", [("set", where, '"a string"')], ("keep", 0.0)))
    assert doc["machine_info"] == "a string"
    assert isinstance(BASES["quick"]["machine_info"], dict)  # the base itself is never changed


# --- another suite's runs, the output manifest, paths ---------------------------------------------------


def _no_control(texts: Iterable[object]) -> None:
    """No text shown to a person holds a control character (a newline, an escape sequence) raw."""
    for text in texts:
        if isinstance(text, str):
            assert all(char.isprintable() for char in text), repr(text)


@settings(max_examples=max(10, settings().max_examples // 10))
@given(mutations=st.lists(_MUTATION, min_size=1, max_size=4), file_change=_FILE)
def test_another_suites_mutated_run_never_raises_and_keeps_the_good_run(
    workdir: Path, mutations: list[tuple], file_change: tuple[str, float]
) -> None:
    good = workdir / "runs" / "foreign-good.json"
    if not good.exists():
        good.write_text(json.dumps(_foreign(GOOD)), encoding="utf-8")
    bad = workdir / "runs" / "foreign-mutated.json"
    bad.write_bytes(mutated_text("foreign", mutations, file_change))
    before = {good: _digest(good), bad: _digest(bad)}
    alone = load_cases([good], samples=True).frame.drop(columns="data")
    result = load_cases([good, bad], samples=True)
    assert _unchanged(before)
    _one_line_each(result.problems)
    _no_control(result.problems)
    mine = result.frame[result.frame["source"] == str(good)].drop(columns="data").reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, alone.reset_index(drop=True), check_dtype=False)
    _assert_times_possible(result.frame.assign(mean=result.frame["mean"].fillna(result.frame["min"])))
    for data in result.frame["data"]:
        if data is not None:
            assert np.all((data >= TIME_RANGE_S[0]) & (data <= TIME_RANGE_S[1]))
    _no_control([*result.frame["fullname"], *result.frame["machine_id"], *result.runs["source"]])


#: Names a manifest may hold: sound ones, and every way out of the folder.
_ENTRY = st.one_of(
    st.sampled_from(
        [
            "figures/a.png",
            "report.md",
            "../victim.txt",
            "figures/../../victim.txt",
            "./report.md",
            "..\\victim.txt",
            "figures//a.png",
            "",
            ".",
            "linked/victim.txt",
            "a\nb",
            "C:/victim.txt",
        ]
    ),
    st.builds(str, st.just("VICTIM")),  # the victim's absolute path, filled in by the test
    st.text(alphabet="./\\ab\x00\n", max_size=12),
)


@settings(max_examples=max(10, settings().max_examples // 10))
@given(
    entries=st.dictionaries(_ENTRY, st.sampled_from(["victim", "own", "junk", None, 1]), max_size=6),
    owner_shape=st.sampled_from(["object", "list", "missing", "garbage"]),
    force=st.booleans(),
)
def test_a_mutated_manifest_never_acts_outside_the_folder(
    entries: dict[str, object], owner_shape: str, force: bool
) -> None:
    with tempfile.TemporaryDirectory(prefix="launchbench-manifest-") as folder:
        root = Path(folder)
        victim = root / "victim.txt"
        victim.write_text("not yours\n")
        outside = root / "outside"
        outside.mkdir()
        (outside / "victim.txt").write_text("not yours\n")
        out = root / "out"
        (out / "figures").mkdir(parents=True)
        (out / "linked").symlink_to(outside)
        (out / "report.md").write_text("old\n")
        digests = {
            "victim": hashlib.sha256(b"not yours\n").hexdigest(),
            "own": hashlib.sha256(b"old\n").hexdigest(),
            "junk": "z" * 64,
        }
        files = {
            (str(victim) if name == "VICTIM" else name): digests.get(value, value)
            for name, value in entries.items()
        }
        owners = {
            "object": {"report": files},
            "list": {"report": list(files)},
            "missing": {},
            "garbage": "owners",
        }[owner_shape]
        manifest = out / MANIFEST_NAME
        manifest.write_text(json.dumps({"version": 1, "owners": owners}), encoding="utf-8")
        stage = root / "stage"
        stage.mkdir()
        (stage / "report.md").write_text("new\n")
        try:
            published = publish(stage, out, "report", force)
        except OutputError as error:
            assert "\n" not in str(error)
        else:
            _one_line_each(published.kept)
            _no_control(published.kept)
            kept = json.loads(manifest.read_text(encoding="utf-8"))["owners"]["report"]
            assert set(kept) == {"report.md"}
        assert victim.read_text() == (outside / "victim.txt").read_text() == "not yours\n"


#: Path texts as a command line may hold them: globs, "..", links that loop, a pipe, names too long,
#: control characters.
_PATH_PART = st.one_of(
    st.sampled_from(["runs", "good.json", "*.json", "**", "loop", "pipe.json", "..", ".", "x" * 300]),
    st.text(alphabet="ab*?[]./\n\x1b", min_size=1, max_size=6),
)


@settings(max_examples=max(10, settings().max_examples // 10))
@given(paths=st.lists(st.lists(_PATH_PART, min_size=1, max_size=4).map("/".join), min_size=1, max_size=3))
def test_any_path_loads_or_is_one_line_and_any_out_is_checked(workdir: Path, paths: list[str]) -> None:
    tree = workdir / "paths"
    if not tree.exists():
        (tree / "runs").mkdir(parents=True)
        shutil.copy(QUICK, tree / "runs" / "good.json")
        (tree / "runs" / "loop").symlink_to("..")
        (tree / "loop").symlink_to("loop")
        os.mkfifo(tree / "runs" / "pipe.json")
    here = Path.cwd()
    os.chdir(tree)
    try:
        files, problems = expand_paths(paths)
        _one_line_each(problems)
        _no_control(problems)
        assert all(path.is_file() for path in files)
        result = load_runs(paths, samples=False)
        _one_line_each(result.problems)
        out = "outs/" + paths[0].replace("..", "up")
        try:
            created = check_out(out, paths)
        except OutputError as error:
            assert "\n" not in str(error)
        else:
            remove_created(created)
    finally:
        os.chdir(here)


# --- the caches' bytes (issue 32) ---------------------------------------------------------------------------
#
# A cache file lives in a user's folder, where a disk, a copy or a hand may change any byte: whatever is done
# to the bytes of a cached rows file, a segment's index or a kept result, what is served is what parsing and
# computing give (or the file is set aside and it is parsed or computed again), and nothing else is raised.

#: What is done to a cache file: a bit flipped, the file cut short, a byte inserted, a run of bytes zeroed,
#: or the whole replaced (empty, a pickle that would run a command if unpickled, a sealed value of another
#: shape, a sealed unknown tag, a sealed JSON nested past any parser's limit).
_CACHE_CHANGE = st.one_of(
    st.tuples(st.just("flip"), st.floats(min_value=0, max_value=1), st.integers(min_value=0, max_value=7)),
    st.tuples(st.just("truncate"), st.floats(min_value=0, max_value=1), st.just(0)),
    st.tuples(
        st.just("insert"), st.floats(min_value=0, max_value=1), st.integers(min_value=0, max_value=255)
    ),
    st.tuples(st.just("zero"), st.floats(min_value=0, max_value=1), st.integers(min_value=1, max_value=4096)),
    st.tuples(
        st.just("replace"),
        st.just(0.0),
        st.sampled_from(["empty", "pickle", "other-shape", "unknown-tag", "deep"]),
    ),
)


def _changed_bytes(data: bytes, change: tuple, marker: Path) -> bytes:
    """``data`` with ``change`` (``_CACHE_CHANGE``) done to it; ``marker``: the file the pickle would make."""
    from analysis.sealed import seal

    kind, where, value = change
    at = min(int(where * len(data)), max(len(data) - 1, 0))
    if kind == "flip" and data:
        return data[:at] + bytes([data[at] ^ (1 << value)]) + data[at + 1 :]
    if kind == "truncate":
        return data[:at]
    if kind == "insert":
        return data[:at] + bytes([value]) + data[at:]
    if kind == "zero":
        return data[:at] + bytes(min(value, len(data) - at)) + data[at + value :]
    return {
        "empty": b"",
        "pickle": f"cos\nsystem\n(S'touch {marker}'\ntR.".encode(),
        "other-shape": seal(b'{"l":[1,2,3]}'),
        "unknown-tag": seal(b'{"zz":[1]}'),
        "deep": seal(b"[" * DEEP + b"]" * DEEP),
    }.get(value, data)


@pytest.fixture(scope="module")
def cached_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, object]:
    """A storage of two real runs (old enough to be cached), a cache filled from it (raw samples of the
    fits' cases kept) and what loading them without the cache gives."""
    from analysis.fits import uses_samples

    folder = tmp_path_factory.mktemp("cached-runs")
    runs = folder / "runs"
    runs.mkdir()
    for name, source in (("0001_good.json", GOOD), ("0002_quick.json", QUICK)):
        shutil.copy(source, runs / name)
        os.utime(runs / name, (1e9, 1e9))
    load_runs([runs], samples=uses_samples, cache=folder / "cache")
    return runs, folder / "cache", load_runs([runs], samples=uses_samples)


@settings(max_examples=max(10, settings().max_examples // 10))
@given(rows=st.booleans(), change=_CACHE_CHANGE)
def test_a_mutated_cache_file_never_changes_a_row(
    cached_runs: tuple[Path, Path, object], rows: bool, change: tuple
) -> None:
    from analysis.fits import uses_samples

    runs, pristine, expected = cached_runs
    with tempfile.TemporaryDirectory(prefix="launchbench-fuzz-cache-") as scratch:
        cache = Path(scratch) / "cache"
        shutil.copytree(pristine, cache)
        (target,) = [
            path
            for path in cache.rglob("*")
            if path.is_file()
            and path.name.endswith(".rows.parquet") == rows
            and not path.name.startswith(".")
        ]
        marker = Path(scratch) / "ran"
        target.write_bytes(_changed_bytes(target.read_bytes(), change, marker))
        for _ in range(2):  # the load that meets the damage, and the next one
            got = load_runs([runs], samples=uses_samples, cache=cache)
            pd.testing.assert_frame_equal(expected.frame.drop(columns="data"), got.frame.drop(columns="data"))
            for want, have in zip(expected.frame["data"], got.frame["data"], strict=True):
                assert (want is None and have is None) or np.array_equal(want, have)
            pd.testing.assert_frame_equal(expected.runs, got.runs)
            assert got.problems == expected.problems
        assert not marker.exists()


@pytest.fixture(scope="module")
def kept_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """A memo of the good run's fits and compared table, and each kept result's ``analysis.sealed`` bytes."""
    from analysis.compare import compared_table
    from analysis.fits import fit_all, uses_samples
    from analysis.memo import Memo
    from analysis.sealed import dumps

    folder = tmp_path_factory.mktemp("kept-results")
    frame = load_runs([GOOD, QUICK], samples=uses_samples).frame
    store = Memo(folder / "cache")
    fits = fit_all(frame, memo=store)
    compared_table(frame, fits, None, store)
    originals = {}
    for path in store.folder.iterdir():
        key = path.name.removesuffix(".kept")
        found, value = store.get(key)
        assert found
        originals[key] = dumps(value)
    assert len(originals) >= 3
    return folder / "cache", originals


@settings(max_examples=max(10, settings().max_examples // 3))
@given(which=st.integers(min_value=0), change=_CACHE_CHANGE)
def test_a_mutated_kept_result_is_served_as_kept_or_not_at_all(
    kept_results: tuple[Path, dict[str, bytes]], which: int, change: tuple
) -> None:
    from analysis.memo import Memo
    from analysis.sealed import dumps

    pristine, originals = kept_results
    with tempfile.TemporaryDirectory(prefix="launchbench-fuzz-memo-") as scratch:
        cache = Path(scratch) / "cache"
        shutil.copytree(pristine, cache)
        store = Memo(cache)
        key = sorted(originals)[which % len(originals)]
        path = store.folder / f"{key}.kept"
        marker = Path(scratch) / "ran"
        path.write_bytes(_changed_bytes(path.read_bytes(), change, marker))
        found, value = store.get(key)
        assert not found or dumps(value) == originals[key]
        assert not marker.exists()


@settings(max_examples=settings().max_examples)
@given(data=st.binary(max_size=512) | st.text(max_size=64).map(str.encode))
def test_any_bytes_are_a_sealed_value_or_one_value_error(data: bytes) -> None:
    from analysis.sealed import Damaged, loads, seal, unseal

    with contextlib.suppress(Damaged):
        unseal(data)
    for body in (data, unseal(seal(data))):
        with contextlib.suppress(ValueError):
            loads(body)
