"""``.ci/gpu-run``, the one prepared GPU run, checked where no GPU is: a GPU session has minutes, not hours,
so a shell error, a step that runs when it must not, or a check that crashes instead of saying why must be
caught here. The script runs whole, with CuPy hidden (every step after the first says why it did not run)
and with ``tests/fake_gpu``'s GPU that fails after the probe (its correctness tests fail, so nothing is
benchmarked), as the GPU machine will run it: a copy of the tree without ``.git``, no git, no orjson, the
commit passed in ``LAUNCHBENCH_COMMIT``; and as a dry run, every step whatever the one before did, so the
bench step and the read-back run there too. Its read-back, ``.ci/gpu_check.py``, runs on a real CPU run and
on a SYNTHETIC GPU run built here (tests/test_report.py's made-up GPU, never saved as data), intact and with
planted defects."""

from __future__ import annotations

import copy
import importlib.metadata
import json
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
NOT_BENCHMARKED = (
    "bench not run: the GPU correctness tests did not pass (see status.txt): no benchmark of a GPU whose "
    "results are wrong"
)
NO_LADDER = "frameworks not run: the GPU correctness tests did not pass (see status.txt)"
#: The commit the image-like runs are told they measure (made up: the copy has no .git to ask).
COMMIT = "0123456789abcdef0123456789abcdef01234567"
#: What the copy of the tree leaves out, as the GPU machine's copy does (.git) or as .gitignore does.
NOT_COPIED = (".git", ".venv", "__pycache__", "*.egg-info", ".benchmarks", ".hypothesis", ".pytest_cache")
NOT_COPIED += (".ruff_cache", "gpu-run-out", "build")
#: The dry run's selection: the spin tests and cases (GPU, failing on the fake GPU) and one CPU case.
DRY_RUN = ("--dry-run", "--quick", "-k", "spin or test_copy")


def _header(dry_run: str = "no", options: str = "none") -> str:
    return f"gpu-run: step limits 480 s of 480 s; dry run: {dry_run}; options: {options}"


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
    imported (``image``: the GPU image has none) and a ``git`` that fails as a missing command does
    (``bin``). Made once for the module's runs: the GPU machine too keeps a copy's ignored outputs (Python's
    bytecode caches) from one call to the next, and no run writes anything else into the tree (their
    outputs go to $OUT and a temporary folder)."""
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
    return root


def _image_like(
    image: Path, tmp_path: Path, *arguments: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run the script as the GPU machine will, on the fake GPU: in ``image``'s copy of the tree without
    ``.git``, with ``git`` failing as a missing command does, orjson unimportable (the image has none) and the
    commit in ``LAUNCHBENCH_COMMIT``; return it and its $OUT (in ``tmp_path``)."""
    tree, hidden, tools = image / "tree", image / "image" / "orjson", image / "bin"
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", str(tree / ".ci" / "gpu-run"), *arguments],
        cwd=tree,
        env={
            "PATH": f"{tools}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "LANG": "C.UTF-8",
            "OUT": str(out),
            "PYTHON": sys.executable,
            "PYTHONPATH": f"{FAKE_GPU_PATH}:{hidden.parent}",
            "LAUNCHBENCH_COMMIT": f"{COMMIT}-dirty",
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done, out


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


def test_script_parses() -> None:
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_step_limits_fit_one_call_with_room() -> None:
    """The limits add up to at most 480 s: with SIGKILL 10 s after each, the script ends within 530 s, inside
    one 600 s call of the GPU machine (docs/gpu.md, "The first window")."""
    text = SCRIPT.read_text(encoding="utf-8")
    match = re.search(r"^declare -A LIMIT=\((.*)\)$", text, re.MULTILINE)
    assert match, f"{SCRIPT}: no LIMIT table"
    limits = {name: int(seconds) for name, seconds in re.findall(r"\[([\w-]+)\]=(\d+)", match.group(1))}
    assert set(limits) == {"environment", "gpu-tests", "bench", "frameworks", "gpu-check"}
    assert sum(limits.values()) <= 480 and "BUDGET=480" in text
    assert sum(limits.values()) + 10 * len(limits) + 10 <= 600 - 60


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
        f"gpu-check not run: no {out}/gpu-run.json to read back",
    ]
    environment = (out / "environment.txt").read_text(encoding="utf-8")
    assert "CUDA: CuPy is not installed" in environment
    assert "CUDA unusable: CuPy is not installed" in environment
    assert _listed_files(out) == ["environment.txt", "status.txt"]


def test_a_gpu_that_fails_its_correctness_tests_is_not_benchmarked_on_the_image(
    image: Path, tmp_path: Path
) -> None:
    """As the GPU machine will run it (no .git, no git, no orjson): the GPU tests are collected (no module
    fails to import for want of orjson), fail with the fake GPU's error, and nothing is benchmarked."""
    done, out = _image_like(image, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert _status(out) == [
        _header(),
        "environment rc=0 seconds=N",
        "gpu-tests rc=1 seconds=N",
        NOT_BENCHMARKED,
        NO_LADDER,
        f"gpu-check not run: no {out}/gpu-run.json to read back",
    ]
    log = (out / "gpu-tests.log").read_text(encoding="utf-8")
    assert "cudaErrorLaunchFailure" in log and "errors during collection" not in log
    assert re.search(r"^\d+ failed", log, re.MULTILINE) and " passed" not in log
    # The JUnit report is read in a temporary folder: $OUT brings back only what a reader needs.
    assert _listed_files(out) == ["environment.txt", "gpu-tests.log", "status.txt"]


def test_the_dry_run_on_the_image_runs_every_step_and_leaves_seven_files(image: Path, tmp_path: Path) -> None:
    """The whole script as the GPU machine will run it, on the fake GPU, every step run (``--dry-run``, a
    quick selection): no orjson, no .git, no git; each step's limit, share and time printed; at most seven
    files, each named in the run's listing; the commit passed in is the saved run's."""
    done, out = _image_like(image, tmp_path, *DRY_RUN)
    assert done.returncode == 1, done.stdout + done.stderr
    assert _status(out) == [
        _header("yes", "--quick -k spin or test_copy"),
        "environment rc=0 seconds=N",
        "gpu-tests rc=1 seconds=N",
        "bench runs although gpu-tests did not pass: dry run",
        "bench rc=1 seconds=N",
        "frameworks runs although gpu-tests did not pass: dry run",
        "frameworks rc=5 seconds=N",  # pytest's "no test selected": the selection names no framework case
        "gpu-check rc=1 seconds=N",
    ]
    table = re.findall(r"^(\S+) +(\d+)s +(\d+)% +(\d+)s$", done.stdout, re.MULTILINE)
    assert [(name, limit, share) for name, limit, share, _ in table] == [
        ("environment", "40", "8"),
        ("gpu-tests", "90", "18"),
        ("bench", "230", "47"),
        ("frameworks", "90", "18"),
        ("gpu-check", "30", "6"),
        ("total", "480", "100"),
    ]
    assert _listed_files(out) == [
        "bench.log",
        "environment.txt",
        "gpu-check.log",
        "gpu-run.json",
        "gpu-tests.log",
        "status.txt",
    ]
    environment = (out / "environment.txt").read_text(encoding="utf-8")
    assert f"commit: {COMMIT}-dirty (LAUNCHBENCH_COMMIT; no git checkout here)" in environment
    assert "orjson: not importable (orjson is not in the GPU image)" in environment
    assert re.search(r"^torch(: not installed| \S+)$", environment, re.MULTILINE)
    run = json.loads((out / "gpu-run.json").read_text(encoding="utf-8"))
    commit = run["commit_info"]
    assert (commit["id"], commit["dirty"], commit["id_from"]) == (COMMIT, True, "LAUNCHBENCH_COMMIT")
    assert set(run["machine_info"]["launchbench"]["frameworks"]) == {"torch", "triton", "jax"}
    assert any(case["extra_info"].get("case") == "host_bandwidth" for case in run["benchmarks"]), (
        "the CPU case ran"
    )
    check = (out / "gpu-check.log").read_text(encoding="utf-8")
    assert "host bandwidth (STREAM)" in check, "the read-back's summary: analysis imported without orjson"
    assert "fits not computed" not in check and "no GPU cases" in check
    for log in ("gpu-tests.log", "bench.log", "gpu-check.log"):
        assert "orjson" not in (out / log).read_text(encoding="utf-8"), log


@pytest.mark.parametrize(
    ("arguments", "environment", "message"),
    [
        (["--fast"], {}, "gpu-run: unknown argument '--fast'"),
        (["-k"], {}, "usage: OUT=DIR"),
        ([], {"LAUNCHBENCH_COMMIT": "main"}, "gpu-run: LAUNCHBENCH_COMMIT='main' is not a commit"),
    ],
)
def test_the_script_refuses_bad_input_in_one_line(
    tmp_path: Path, arguments: list[str], environment: dict[str, str], message: str
) -> None:
    out = tmp_path / "out"
    done = run_in_root(["bash", str(SCRIPT), *arguments], OUT=str(out), PYTHON=sys.executable, **environment)
    assert done.returncode == 2
    assert done.stderr.startswith(message) and "Traceback" not in done.stderr, done.stderr
    assert not out.exists(), "nothing runs"


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
