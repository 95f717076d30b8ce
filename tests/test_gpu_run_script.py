"""``.ci/gpu-run``, the one prepared GPU run, checked where no GPU is: a GPU session has minutes, not hours,
so a shell error, a step that runs when it must not, or a check that crashes instead of saying why must be
caught here. The script runs whole, with CuPy hidden (every step after the first says why it did not run)
and with ``tests/fake_gpu``'s GPU that fails after the probe (its correctness tests fail, so nothing is
benchmarked), as the GPU machine will run it: a copy of the tree without ``.git``, no git, no orjson, a HOME
no one can write into (a file: the fake GPU's compile needs CuPy's kernel cache folder, as CuPy's does), the
commit passed in ``LAUNCHBENCH_COMMIT``; and as a dry run, every step whatever the one before did, so the
benchmark steps and the read-back run there too. What it refuses before its first step (a bad PYTHON, OUT or
commit) is refused in one line, and nothing of a user's is removed. Its read-back, ``.ci/gpu_check.py``, runs
on a real CPU run and on a SYNTHETIC GPU run built here (tests/test_report.py's made-up GPU, never saved as
data), intact and with planted defects."""

from __future__ import annotations

import copy
import importlib.metadata
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from analysis.launch import cuda_rows, fit_launch
from analysis.load import load_runs
from benchmarks import provenance
from benchmarks.nvml import VIOLATION_POLICIES
from benchmarks.run_record import RUN_RECORD_KEY
from tests.fake_gpu import FAKE_GPU_PATH, run_in_root
from tests.test_load import DATA
from tests.test_report import synthetic_gpu_run

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "gpu-run"
CHECK = ROOT / ".ci" / "gpu_check.py"
STEPS = ("environment", "gpu-tests", "gpu-bench", "frameworks", "cpu-bench", "gpu-check")
NOT_TESTED = "the GPU correctness tests did not pass (see status.txt)"
NOT_BENCHMARKED = f"gpu-bench not run: {NOT_TESTED}: no benchmark of a GPU whose results are wrong"
NO_LADDER = f"frameworks not run: {NOT_TESTED}"
NO_CPU_CASES = f"cpu-bench not run: {NOT_TESTED}"
#: The commit the image-like runs are told they measure (made up: the copy has no .git to ask).
COMMIT = "0123456789abcdef0123456789abcdef01234567"
#: What the copy of the tree leaves out, as the GPU machine's copy does (.git) or as .gitignore does.
NOT_COPIED = (".git", ".venv", "__pycache__", "*.egg-info", ".benchmarks", ".hypothesis", ".pytest_cache")
NOT_COPIED += (".ruff_cache", "gpu-run-out", "build")
#: The dry run's selection: the spin tests and cases (GPU, failing on the fake GPU) and one CPU case.
DRY_RUN = ("--dry-run", "--quick", "-k", "spin or test_copy")


def _limits() -> dict[str, int]:
    """The script's LIMIT table: step -> seconds."""
    text = SCRIPT.read_text(encoding="utf-8")
    match = re.search(r"^declare -A LIMIT=\((.*)\)$", text, re.MULTILINE)
    assert match, f"{SCRIPT}: no LIMIT table"
    return {name: int(seconds) for name, seconds in re.findall(r"\[([\w-]+)\]=(\d+)", match.group(1))}


def _header(dry_run: str = "no", options: str = "none") -> str:
    total = sum(_limits().values())
    return f"gpu-run: step limits {total} s of 480 s; dry run: {dry_run}; options: {options}"


def _status(out: Path) -> list[str]:
    """The status lines of the run in ``out``, seconds as N (the budget table and file listing left out)."""
    lines = (out / "status.txt").read_text(encoding="utf-8").splitlines()
    lines = lines[: next(index for index, line in enumerate(lines) if line.startswith("step "))]
    return [re.sub(r"seconds=\d+", "seconds=N", line) for line in lines]


def _run_script(out: Path, pythonpath: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run the whole script with ``pythonpath`` first on PYTHONPATH; return it and its status lines."""
    done = run_in_root(["bash", str(SCRIPT)], OUT=str(out), PYTHON=sys.executable, PYTHONPATH=str(pythonpath))
    return done, _status(out)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The GPU machine's copy of the tree, without ``.git`` (``tree``), a folder whose ``orjson`` cannot be
    imported (``image``: the GPU image has none), a ``git`` that fails as a missing command does (``bin``)
    and a HOME no one, root included, can write into (``home``: a file). Made once for the module's runs:
    the GPU machine too keeps a copy's ignored outputs (Python's bytecode caches) from one call to the next,
    and no run writes anything else into the tree (their outputs go to $OUT and a temporary folder)."""
    root = tmp_path_factory.mktemp("gpu-image")
    shutil.copytree(ROOT, root / "tree", ignore=shutil.ignore_patterns(*NOT_COPIED), symlinks=True)
    hidden = root / "image" / "orjson"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        'raise ImportError("orjson is not in the GPU image")\n', encoding="utf-8"
    )
    tools = root / "bin"
    tools.mkdir()
    (tools / "git").write_text("#!/bin/sh\necho 'git: not on this machine' >&2\nexit 127\n", encoding="utf-8")
    (tools / "git").chmod(0o755)
    (root / "home").write_text("a HOME that is a file: nothing can be made under it\n", encoding="utf-8")
    return root


def _image_environment(image: Path, tmp_path: Path, **changes: str | None) -> dict[str, str]:
    """The GPU machine's environment for a run in ``image`` on the fake GPU, its $OUT and TMPDIR in
    ``tmp_path``; ``changes`` set (or, None, remove) variables."""
    environment = {
        "PATH": f"{image / 'bin'}:/usr/bin:/bin",
        "HOME": str(image / "home"),
        "LANG": "C.UTF-8",
        "OUT": str(tmp_path / "out"),
        "TMPDIR": str(tmp_path),
        "PYTHON": sys.executable,
        "PYTHONPATH": f"{FAKE_GPU_PATH}:{image / 'image'}",
        "LAUNCHBENCH_COMMIT": f"{COMMIT}-dirty",
    }
    for name, value in changes.items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    return environment


def _image_like(
    image: Path, tmp_path: Path, *arguments: str, **changes: str | None
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run the script as the GPU machine will, on the fake GPU: in ``image``'s copy of the tree without
    ``.git``, with ``git`` failing as a missing command does, orjson unimportable (the image has none), a
    HOME no one can write into and the commit in ``LAUNCHBENCH_COMMIT``; return it and its $OUT (in
    ``tmp_path``)."""
    environment = _image_environment(image, tmp_path, **changes)
    done = subprocess.run(
        ["bash", str(image / "tree" / ".ci" / "gpu-run"), *arguments],
        cwd=image / "tree",
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done, Path(environment["OUT"])


def _listed_files(out: Path) -> list[str]:
    """The files the run's own status names, checked against what is in ``out``."""
    (listing,) = [
        line
        for line in (out / "status.txt").read_text(encoding="utf-8").splitlines()
        if line.startswith("files")
    ]
    named = listing.split(": ", 1)[1].split()
    assert sorted(path.name for path in out.iterdir()) == named, listing
    assert listing.startswith(f"files in $OUT ({len(named)} of at most 7)")
    return named


def _git(*arguments: str) -> str:
    return subprocess.run(
        ["git", *arguments], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_script_parses() -> None:
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_step_limits_fit_one_call_with_room() -> None:
    """The limits add up to at most 480 s: with SIGKILL 10 s after each, the script ends within 540 s, inside
    one 600 s call of the GPU machine (docs/gpu.md, "The first window")."""
    limits = _limits()
    assert tuple(limits) == STEPS
    assert sum(limits.values()) <= 480 and "BUDGET=480" in SCRIPT.read_text(encoding="utf-8")
    assert sum(limits.values()) + 10 * len(limits) + 10 <= 600 - 60


def test_the_plan_names_each_step_its_limit_and_selection() -> None:
    done = subprocess.run(["bash", str(SCRIPT), "--plan"], capture_output=True, text=True, check=True)
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert [(row[0], int(row[1])) for row in rows] == list(_limits().items())
    selections = {row[0]: row[2:] for row in rows}
    assert selections["gpu-tests"] == ["-m", "gpu", "tests"]
    assert selections["gpu-bench"][0] == "benchmarks/test_cuda_launch.py"
    assert selections["environment"] == selections["gpu-check"] == []


def test_without_cupy_no_step_after_the_first_runs_and_each_says_why(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden" / "cupy"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text('raise ImportError("CuPy hidden for this test")\n', encoding="utf-8")
    out = tmp_path / "out"
    done, status = _run_script(out, hidden.parent)
    assert done.returncode == 1
    assert status == [
        _header(),
        "environment rc=1 seconds=N",
        "gpu-tests not run: CUDA is unusable (see environment.txt)",
        NOT_BENCHMARKED,
        NO_LADDER,
        NO_CPU_CASES,
        f"gpu-check not run: no {out}/gpu-run.json to read back",
    ]
    environment = (out / "environment.txt").read_text(encoding="utf-8")
    assert "CUDA: CuPy is not installed" in environment
    assert "CUDA unusable: CuPy is not installed" in environment
    dirty = "-dirty" if _git("status", "--porcelain") else ""
    assert f"commit: {_git('rev-parse', 'HEAD')}{dirty} (git)" in environment, "a checkout: git says"
    assert _listed_files(out) == ["environment.txt", "status.txt"]


def test_a_gpu_that_fails_its_correctness_tests_is_not_benchmarked_on_the_image(
    image: Path, tmp_path: Path
) -> None:
    """As the GPU machine will run it (no .git, no git, no orjson, no writable HOME): the probe compiles (its
    cache is the script's), the GPU tests are collected (no module fails to import for want of orjson), fail
    with the fake GPU's error, and nothing is benchmarked."""
    done, out = _image_like(image, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert _status(out) == [
        _header(),
        "environment rc=0 seconds=N",
        "gpu-tests rc=1 seconds=N",
        NOT_BENCHMARKED,
        NO_LADDER,
        NO_CPU_CASES,
        f"gpu-check not run: no {out}/gpu-run.json to read back",
    ]
    log = (out / "gpu-tests.log").read_text(encoding="utf-8")
    assert "cudaErrorLaunchFailure" in log and "errors during collection" not in log
    assert re.search(r"^\d+ failed", log, re.MULTILINE) and " passed" not in log
    # The JUnit report is read in a temporary folder: $OUT brings back only what a reader needs.
    assert _listed_files(out) == ["environment.txt", "gpu-tests.log", "status.txt"]


def test_the_fake_gpu_cannot_compile_under_that_home_without_the_scripts_cache(image: Path) -> None:
    """The control of the runs above: the same HOME, no ``CUPY_CACHE_DIR``, and the probe fails as CuPy's
    would (its kernel cache under HOME cannot be made)."""
    environment = {**os.environ, "HOME": str(image / "home"), "PYTHONPATH": f"{FAKE_GPU_PATH}:{ROOT}"}
    environment.pop("CUPY_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", "from benchmarks.cuda import unavailable_reason; print(unavailable_reason())"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    assert (
        "failed to compile, load and run a trivial kernel: OSError: CuPy's kernel cache cannot be written"
        in (done.stdout)
    )
    assert f"{image / 'home'} is a file, not a folder" in done.stdout


def test_the_dry_run_on_the_image_runs_every_step_and_leaves_its_files(image: Path, tmp_path: Path) -> None:
    """The whole script as the GPU machine will run it, on the fake GPU, every step run (``--dry-run``, a
    quick selection): no orjson, no .git, no git, no writable HOME; every compile cache in one temporary
    folder, removed at the end; each step's limit, share and time printed; at most seven files, each named in
    the run's listing; the commit passed in is the saved run's."""
    done, out = _image_like(image, tmp_path, *DRY_RUN)
    assert done.returncode == 1, done.stdout + done.stderr
    assert _status(out) == [
        _header("yes", "--quick -k spin or test_copy"),
        "environment rc=0 seconds=N",
        "gpu-tests rc=1 seconds=N",
        "gpu-bench runs although gpu-tests did not pass: dry run",
        "gpu-bench rc=1 seconds=N",  # every spin case fails on the fake GPU: nothing to save
        "frameworks runs although gpu-tests did not pass: dry run",
        "frameworks rc=5 seconds=N",  # pytest's "no test selected": the selection names no framework case
        "cpu-bench runs although gpu-tests did not pass: dry run",
        "cpu-bench rc=0 seconds=N",
        "gpu-check reads back cpu-run.json, no gpu-run.json being saved: dry run",
        "gpu-check rc=1 seconds=N",
    ]
    table = re.findall(r"^(\S+) +(\d+)s +(\d+)% +(\d+)s$", done.stdout, re.MULTILINE)
    limits = _limits()
    assert [(name, int(limit), int(share)) for name, limit, share, _ in table] == [
        *((name, seconds, 100 * seconds // 480) for name, seconds in limits.items()),
        ("total", sum(limits.values()), 100 * sum(limits.values()) // 480),
    ]
    assert _listed_files(out) == [
        "bench.log",
        "cpu-run.json",
        "environment.txt",
        "gpu-tests.log",
        "status.txt",
    ]
    environment = (out / "environment.txt").read_text(encoding="utf-8")
    assert f"commit: {COMMIT}-dirty (LAUNCHBENCH_COMMIT; no git checkout here)" in environment
    assert "orjson: not importable (orjson is not in the GPU image)" in environment
    assert re.search(r"^torch(: not installed| \S+)$", environment, re.MULTILINE)
    for what in ("C compiler", "Python headers", "libcuda"):
        assert re.search(rf"^{what}: \S", environment, re.MULTILINE), what
    caches = dict(re.findall(r"^cache: (\w+)=(\S+)$", environment, re.MULTILINE))
    assert {
        "CUPY_CACHE_DIR",
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "JAX_COMPILATION_CACHE_DIR",
    } <= set(caches)
    (folder,) = {Path(path).relative_to(tmp_path).parts[0] for path in caches.values()}
    assert folder.startswith("gpu-run.") and not (tmp_path / folder).exists(), (
        "one folder, removed at the end"
    )
    run = json.loads((out / "cpu-run.json").read_text(encoding="utf-8"))
    commit = run["commit_info"]
    assert (commit["id"], commit["dirty"], commit["id_from"]) == (COMMIT, True, "LAUNCHBENCH_COMMIT")
    assert set(run["machine_info"]["launchbench"]["frameworks"]) == {"torch", "triton", "jax"}
    assert any(case["extra_info"].get("case") == "host_bandwidth" for case in run["benchmarks"]), (
        "the CPU case ran"
    )
    bench = (out / "bench.log").read_text(encoding="utf-8")
    check = bench[bench.index("=== gpu-check") :]
    assert "host bandwidth (STREAM)" in check, "the read-back's summary: analysis imported without orjson"
    assert "fits not computed" not in check and "no GPU cases" in check
    for log in ("gpu-tests.log", "bench.log"):
        assert "orjson" not in (out / log).read_text(encoding="utf-8"), log


@pytest.mark.parametrize(
    ("arguments", "environment", "message", "lines"),
    [
        (["--fast"], {}, "gpu-run: unknown argument '--fast'", 2),  # then the usage
        (["-k"], {}, "usage: OUT=DIR", 1),
        ([], {"LAUNCHBENCH_COMMIT": "main"}, "gpu-run: LAUNCHBENCH_COMMIT='main' is not a commit", 1),
        ([], {"PYTHON": "/bin/false"}, "gpu-run: PYTHON=/bin/false cannot run the steps", 1),
        ([], {"PYTHON": "no-such-python"}, "gpu-run: PYTHON=no-such-python cannot run the steps", 1),
        (
            [],
            {"PYTHON": "/bin/true"},
            "gpu-run: PYTHON=/bin/true is not a Python: it exits 0 but does not",
            1,
        ),
    ],
)
def test_the_script_refuses_bad_input_in_one_line(
    tmp_path: Path, arguments: list[str], environment: dict[str, str], message: str, lines: int
) -> None:
    out = tmp_path / "out"
    options = {"PYTHON": sys.executable, **environment}
    done = run_in_root(["bash", str(SCRIPT), *arguments], OUT=str(out), **options)
    assert done.returncode == 2
    assert done.stderr.startswith(message) and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == lines, done.stderr
    assert not out.exists(), "nothing runs"


def test_python_false_says_so_in_one_line_before_any_step(tmp_path: Path) -> None:
    done = run_in_root(["bash", str(SCRIPT)], OUT=str(tmp_path / "out"), PYTHON="/bin/false")
    assert done.stderr == (
        "gpu-run: PYTHON=/bin/false cannot run the steps (Python >= 3.10 with numpy, pytest and "
        "pytest-benchmark): exit code 1, no output\n"
    )
    assert done.stdout == ""


def test_a_tree_without_git_and_without_a_commit_is_refused(image: Path, tmp_path: Path) -> None:
    done, out = _image_like(image, tmp_path, LAUNCHBENCH_COMMIT=None)
    assert done.returncode == 2
    assert done.stderr == (
        "gpu-run: no .git here to say which commit this tree is, and no LAUNCHBENCH_COMMIT: run "
        "`python tools/gpu_command.py` in the checkout and use the command it prints\n"
    )
    assert not out.exists(), "nothing runs"


def _refused(tmp_path: Path, out: Path) -> str:
    """The script's one line for ``out`` (its exit code 2 checked, nothing else printed)."""
    done = run_in_root(["bash", str(SCRIPT)], OUT=str(out), PYTHON=sys.executable)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and not done.stdout, done.stderr
    return done.stderr.rstrip("\n")


def test_an_out_that_is_a_file_or_cannot_be_made_is_refused(tmp_path: Path) -> None:
    a_file = tmp_path / "out.txt"
    a_file.write_text("mine\n", encoding="utf-8")
    assert _refused(tmp_path, a_file) == f"gpu-run: OUT={a_file} is not a folder"
    below = a_file / "out"
    assert _refused(tmp_path, below).startswith(f"gpu-run: OUT={below} cannot be made: mkdir:")
    assert a_file.read_text(encoding="utf-8") == "mine\n"


def test_a_users_files_in_out_are_never_removed(tmp_path: Path) -> None:
    """An OUT holding files (a user's status.txt and bench.log, named as the run's own) is refused before
    any step, and every file stays as it was."""
    out = tmp_path / "out"
    out.mkdir()
    mine = {"status.txt": "my notes\n", "bench.log": "my log\n"}
    for name, text in mine.items():
        (out / name).write_text(text, encoding="utf-8")
    assert _refused(tmp_path, out) == (
        f"gpu-run: OUT={out} already holds 2 file(s) (bench.log status.txt ...): give an empty or new "
        "folder; the run removes and overwrites nothing"
    )
    assert {path.name: path.read_text(encoding="utf-8") for path in out.iterdir()} == mine


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root writes into a read-only folder: no read-only OUT for root"
)
def test_a_read_only_out_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir(mode=0o555)
    assert _refused(tmp_path, out).startswith(f"gpu-run: OUT={out} cannot be written: mktemp:")
    assert list(out.iterdir()) == []


@pytest.mark.parametrize(
    ("given", "environ", "expected"),
    [
        (
            {"id": "unversioned"},
            {"LAUNCHBENCH_COMMIT": f"{COMMIT}-dirty"},
            (COMMIT, True, "LAUNCHBENCH_COMMIT"),
        ),
        ({"id": "unknown"}, {"LAUNCHBENCH_COMMIT": COMMIT[:12]}, (COMMIT[:12], False, "LAUNCHBENCH_COMMIT")),
        ({"id": "unversioned"}, {}, ("unversioned", None, None)),
        ({"id": "fedcba9"}, {"LAUNCHBENCH_COMMIT": COMMIT}, ("fedcba9", None, None)),  # git said: it stands
    ],
)
def test_the_commit_comes_from_the_environment_where_git_cannot_say(given, environ, expected) -> None:
    commit_info = dict(given)
    provenance.fill_commit_info(commit_info, environ)
    assert (commit_info["id"], commit_info.get("dirty"), commit_info.get("id_from")) == expected


def test_a_commit_variable_that_is_not_a_commit_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"^LAUNCHBENCH_COMMIT='HEAD~1' is not a commit"):
        provenance.fill_commit_info({"id": "unversioned"}, {"LAUNCHBENCH_COMMIT": "HEAD~1"})


def test_framework_versions_are_read_from_metadata_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    versions = {"torch": "2.11.0", "jax": "0.11.2"}

    def version(name: str) -> str:
        if name not in versions:
            raise importlib.metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(importlib.metadata, "version", version)
    info: dict[str, object] = {}
    provenance.collect_frameworks(info)
    assert info == {"frameworks": {"torch": "2.11.0", "triton": None, "jax": "0.11.2"}}


# ------------------------------------------------------------------------------------------------------------
# The read-back: .ci/gpu_check.py
# ------------------------------------------------------------------------------------------------------------

LADDER = {"cupy": (3e-6, 0.15e-6), "driver": (1.5e-6, 0.02e-6), "graph": (0.8e-6, 0.05e-6)}
TICK_NS = 1024.0


def _case(name: str, seconds: float, **extra: object) -> dict[str, object]:
    stats = {"min": seconds, "max": seconds, "mean": seconds, "median": seconds, "stddev": 0.0, "rounds": 1}
    stats |= {"iterations": 1, "q1": seconds, "q3": seconds, "iqr": 0.0, "ops": 1 / seconds}
    info = {"suite": "launchbench", "device": "cuda", **extra}
    return {"name": name, "fullname": f"synthetic::{name}", "group": None, "extra_info": info, "stats": stats}


def synthetic_complete_gpu_run() -> dict:
    """SYNTHETIC: tests/test_report.py's made-up GPU run plus what a full GPU run adds (achieved spin
    durations, the launch-cost ladder, a run record with the GPU facts and NVML conditions)."""
    run = synthetic_gpu_run()
    for case in run["benchmarks"]:
        info = case["extra_info"]
        if info["case"] == "spin":
            info |= {"achieved_ns": info["kernel_ns"] + 12.0, "achieved_timer_ns": info["kernel_ns"] + 300.0}
    for layer, (base_s, per_arg_s) in LADDER.items():
        for n_args in (0, 1, 4, 8, 13):
            per_call_s = 256 * (base_s + per_arg_s * n_args)
            timing = {"gpu_time_s": per_call_s} if layer == "graph" else {"gpu_time_s": 1e-3}
            run["benchmarks"].append(
                _case(
                    f"launch_args[{layer}-{n_args}]",
                    20e-6 + per_call_s if layer == "graph" else per_call_s,
                    case="launch_args",
                    op="empty_kernel",
                    mode="graph" if layer == "graph" else "eager",
                    layer=layer,
                    n_args=n_args,
                    n_kernels=256,
                    **timing,
                )
            )
    gpu = {"sm_clock_hz": 1.98e9, "memory_clock_hz": 3.2e9, "power_w": 120.0, "temperature_c": 40}
    gpu |= {"pstate": 0, "throttle_reasons": [], "violation_time_ns": dict.fromkeys(VIOLATION_POLICIES, 5)}
    clock = {"cycles_per_ns": 1.98, "spread": 0.001}
    clock |= {
        "warmup": {"ns": 500_000_000, "slice_ns": 50_000_000, "stable": True, "rates": [0.4] + [1.98] * 9}
    }
    clock |= {"tries": [{"cycles_per_ns": 1.97, "spread": 0.015}, {"cycles_per_ns": 1.98, "spread": 0.001}]}
    run[RUN_RECORD_KEY] = {
        "version": 1,
        "quick": False,
        "status": "completed",
        "cases": {
            "planned": 40,
            "measured": 40,
            "failed": 0,
            "skipped": 0,
            "unfinished": [],
            "skip_reasons": {},
        },
        "facts": {
            "gpu.spin_clock": clock,
            "gpu.spin_clock_end": clock | {"cycles_per_ns": 1.985},
            "gpu.timer_tick_ns": TICK_NS,
            "gpu.enqueue_depth": 1022,
        },
        "faults": [],
        "conditions": {"start": {"gpu": gpu}, "end": {"gpu": copy.deepcopy(gpu)}},
    }
    return run


def _check(run: Path, *, hide: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the read-back on ``run``; ``hide``: a module made unimportable first (as on a box without it)."""
    prelude = f"import sys; sys.modules[{hide!r}] = None; " if hide else "import sys; "
    code = prelude + f"sys.argv = [{str(CHECK)!r}, {str(run)!r}]; import runpy; "
    code += "runpy.run_path(sys.argv[0], run_name='__main__')"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def gpu_check() -> Callable[[list[str]], int]:
    """``main`` of the read-back, loaded into this process once (run as ``python .ci/gpu_check.py``, it
    starts with nothing imported; here its imports are warm)."""
    return runpy.run_path(str(CHECK), run_name="gpu_check")["main"]


def _check_here(
    main: Callable[[list[str]], int], run: Path, capsys: pytest.CaptureFixture[str]
) -> subprocess.CompletedProcess[str]:
    """The read-back on ``run`` in this process: its exit code and output, as ``_check``'s subprocess gives
    them (which is still run where a module must be hidden, and by the dry run's gpu-check step)."""
    capsys.readouterr()
    code = main([str(run)])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess([str(CHECK), str(run)], code, out, err)


def _write(tmp_path: Path, run: dict, name: str = "synthetic-gpu.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(run), encoding="utf-8")
    return path


def test_check_passes_a_complete_gpu_run_and_prints_every_fact_and_fit(
    tmp_path: Path, gpu_check: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, synthetic_complete_gpu_run())
    done = _check_here(gpu_check, path, capsys)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("gpu-check: every check passed")
    assert "fact gpu.timer_tick_ns = 1024.0" in done.stdout and "fact gpu.enqueue_depth = 1022" in done.stdout
    assert "SM clock moved by +0.25% between the start and the end" in done.stdout
    assert (
        "gpu.spin_clock: warmed up for 0.50 s (steady at the end), 2 calibration tries (spreads 1.50%, "
        "0.10%), 1.9800 cycles per ns kept"
    ) in done.stdout
    assert "throttling: none (NVML violation counters unchanged)" in done.stdout
    assert "spin eager 1000 ns: achieved 1012 ns by SM cycles, 1300 ns by %globaltimer" in done.stdout
    fits = fit_launch(cuda_rows(load_runs([path], samples=True).frame))
    assert {"ladder_cupy_per_arg_s", "ladder_graph_s", "knee_s"} <= set(fits["quantity"])
    for quantity in fits["quantity"]:  # every fit is printed, with its points used and set aside
        assert re.search(rf"^\s*{quantity}\s", done.stdout, re.MULTILINE), quantity
    assert "launch cost per launch by argument count" in done.stdout  # the terminal summary


def test_check_names_each_planted_defect(
    tmp_path: Path, gpu_check: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    run = synthetic_complete_gpu_run()
    spin = next(case["extra_info"] for case in run["benchmarks"] if case["extra_info"]["case"] == "spin")
    spin["achieved_timer_ns"] = spin["kernel_ns"] + 5_000.0  # the timer disagrees with the cycles by 5 µs
    record = run[RUN_RECORD_KEY]
    del record["facts"]["gpu.enqueue_depth"]
    record["facts"]["gpu.spin_clock_end"]["cycles_per_ns"] = 1.5  # the SM clock fell by a quarter
    record["faults"].append("GPU: setting up the decode step: CUDARuntimeError: cudaErrorIllegalAddress")
    record["cases"]["skip_reasons"] = {
        "CuPy sees no CUDA driver or device: …": 3,
        "the launch queue holds …": 2,
    }
    record["conditions"]["end"]["gpu"]["violation_time_ns"]["power"] = 2_000_000_005
    done = _check_here(gpu_check, _write(tmp_path, run), capsys)
    assert done.returncode == 1
    failures = [line.removeprefix("FAILED: ") for line in done.stderr.splitlines()]
    assert f"spin eager {spin['kernel_ns']} ns: {spin['kernel_ns'] + 12} ns by SM cycles but" in "\n".join(
        failures
    )
    assert "fact missing: gpu.enqueue_depth" in failures
    assert any(line.startswith("the SM clock moved by -24.2% during the launch suite") for line in failures)
    assert "fault: GPU: setting up the decode step: CUDARuntimeError: cudaErrorIllegalAddress" in failures
    assert "3 cases skipped on a GPU run: CuPy sees no CUDA driver or device: …" in failures
    assert not any("launch queue" in line for line in failures), "a skip by design is no failure"
    assert "throttling: the GPU was held back during the run (power 2.000 s)" in done.stdout
    assert len(failures) == 5 and "gpu-check: 5 failures" in done.stdout


def test_check_without_analysis_still_checks_the_run_and_says_why_in_one_line(tmp_path: Path) -> None:
    done = _check(_write(tmp_path, synthetic_complete_gpu_run()), hide="analysis.fit")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("fits not computed")]
    assert len(lines) == 1
    assert "analysis cannot be imported here (ModuleNotFoundError: import of analysis.fit halted" in lines[0]
    assert "fact gpu.spin_clock" in done.stdout and "Traceback" not in done.stderr


def test_check_without_scipy_says_so_in_one_line(tmp_path: Path) -> None:
    """The GPU box's Python may lack SciPy, which analysis imports only when it fits: the read-back asks for
    it up front, so its absence is the one line, not a traceback halfway through the fits."""
    done = _check(_write(tmp_path, synthetic_complete_gpu_run()), hide="scipy")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("fits not computed")]
    assert len(lines) == 1 and "No module named 'scipy.stats'" in lines[0]
    assert "Traceback" not in done.stderr


def test_check_fails_with_reasons_on_a_run_without_gpu_cases(
    gpu_check: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    run = DATA / "cpu-2core-quick.json"
    done = _check_here(gpu_check, run, capsys)
    assert done.returncode == 1
    assert (
        f"FAILED: {run}: no GPU cases (every CUDA case was skipped or failed: see bench.log)" in done.stderr
    )
    assert f"FAILED: {run}: no run record ({RUN_RECORD_KEY})" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("content", ["{not json", "[1, 2]"], ids=["truncated", "a list"])
def test_check_refuses_a_file_that_is_not_a_run_in_one_line(
    tmp_path: Path, content: str, gpu_check: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.json"
    path.write_text(content, encoding="utf-8")
    done = _check_here(gpu_check, path, capsys)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(f"{path}: ")
