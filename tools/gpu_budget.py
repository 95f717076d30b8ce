"""The GPU run's time budget, from the cases each step collects: docs/gpu.md's budget table is generated here.

``.ci/gpu-run --plan`` names each step, its limit and its pytest selection; each selection is collected here
as the step collects it (full sweeps), and its estimate is a fixed part (start-up, imports, first compiles)
plus an estimate per collected case, both below with what they count. The estimates are for an H200 with
every compile cache empty (the script makes them in a new temporary folder); no GPU has run them yet, so
the first window's ``status.txt`` ("used") is what replaces them. Each limit must be at least
``HEADROOM`` × its estimate and the limits at most the script's budget (``check``).

``python tools/gpu_budget.py`` prints the table and any problem (``--json``: the figures, the table and the
problems as one JSON document); ``--write`` rewrites docs/gpu.md's block
between ``<!-- generated: gpu_budget -->`` and ``<!-- end generated -->``; ``tests/test_gpu_budget.py``
fails when the block, the collected cases or the limits drift apart.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "gpu-run"
DOCUMENT = ROOT / "docs" / "gpu.md"
#: A limit is at least this many times its step's estimate.
HEADROOM = 1.5
#: The script's budget, seconds (its ``BUDGET``).
BUDGET_S = 480
#: A full CPU run of this project's VMs: its wall time over its measured cases prices a CPU case.
CPU_RUN = ROOT / "tests" / "data" / "runs" / "epyc-2core-full-1.json"

#: What each step pays whatever its cases, seconds, and what that counts.
FIXED_S = {
    "environment": (
        15.0,
        "nvidia-smi, the imports, CuPy's probe (a CUDA context, its first NVRTC compile "
        "with the runtime headers, a cuBLAS handle), the package versions",
    ),
    "gpu-tests": (
        20.0,
        "collecting the test modules (7-9 s on a 2-core VM), compiling `launch.cu`, "
        "`decode.cu` and CuPy's own kernels on first use, the clock's warm-up (0.55 s)",
    ),
    "gpu-bench": (
        26.0,
        "pytest's start-up and collection ≈ 5 s, two clock calibrations ≤ 3.5 s each, the "
        "queue depth ≈ 1 s, compiling the kernels ≈ 3 s, the decode step's weights (2.5 GB drawn "
        "on the GPU), reference and graph captures ≈ 6 s, the summary and the save ≈ 5 s",
    ),
    "frameworks": (
        63.0,
        "first starts, as under gVisor: torch's import and CUDA context ≈ 15 s, Triton's "
        "`cuda_utils` and five launchers built with the C compiler ≈ 15 s and five kernels "
        "compiled ≈ 5 s, JAX's GPU client and jit compiles ≈ 15 s, the torch decode step's "
        "weights, reference and graph capture ≈ 8 s, pytest's start-up ≈ 5 s",
    ),
    "cpu-bench": (10.0, "pytest's start-up, the CPU decode model's weights and reference, the summary"),
    "gpu-check": (7.0, "pandas' and SciPy's imports, reading the runs back, the fits and the ladder"),
}


def cpu_case_s(run: Path = CPU_RUN) -> float:
    """Seconds per CPU case: the wall time of ``run`` (a full CPU run's record) over its measured cases."""
    record = json.loads(run.read_text(encoding="utf-8"))["launchbench_run"]
    return float(record["conditions"]["during"]["wall_s"]) / int(record["cases"]["measured"])


#: Seconds per collected case by the start of its node id (the longest that matches), and what it counts.
CASE_S = {
    "tests/": (0.5, "a GPU correctness test: its kernels launched and checked against numpy references"),
    "benchmarks/test_cuda_launch.py": (
        0.6,
        "a launch case: 0.4 s of timed rounds (`_FULL.case_s`) and ≤ 50 CUDA-event rounds ≈ 0.2 s",
    ),
    "benchmarks/test_decode_step.py::test_cuda_decode_step": (
        1.0,
        "a GPU decode step: 5 warm-up, 200 timed and 50 event rounds of a ≈ 1 ms step, its check",
    ),
    "benchmarks/test_decode_step.py::test_cuda_matvec": (
        0.5,
        "a matrix-vector shape: its copies beyond 4 × L2, the queue-time probe, timed and event rounds",
    ),
    "benchmarks/test_framework_gpu.py": (
        0.5,
        "a framework case: 3 warm-up, 50 timed and 20 event calls of 256 launches or one step",
    ),
    "benchmarks/": (None, f"a CPU case: the wall time over the measured cases of {CPU_RUN.name}"),
}


@dataclass(frozen=True)
class Step:
    """One step of ``.ci/gpu-run``: its limit, its pytest selection (empty: not a pytest step), the node ids
    it collects, and its estimate (s)."""

    name: str
    limit_s: int
    selection: tuple[str, ...]
    cases: tuple[str, ...]
    estimate_s: float


def plan(script: Path = SCRIPT) -> list[tuple[str, int, tuple[str, ...]]]:
    """``script --plan``: (step, limit in s, pytest arguments) per step, in the order the script runs them."""
    done = subprocess.run(["bash", str(script), "--plan"], capture_output=True, text=True, check=True)
    rows = []
    for line in done.stdout.splitlines():
        name, limit, *selection = line.split("\t")
        rows.append((name, int(limit), tuple(selection)))
    return rows


class _Collector:
    """A pytest plugin keeping the node ids a session selected."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def pytest_collection_finish(self, session: object) -> None:
        self.ids = [item.nodeid for item in session.items]  # type: ignore[attr-defined]


def collect(selection: Sequence[str]) -> tuple[str, ...]:
    """The node ids pytest selects for ``selection`` (full sweeps), collected in this process."""
    import pytest

    collector = _Collector()
    arguments = [*selection, "--collect-only", "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT)]
    with contextlib.redirect_stdout(io.StringIO()):
        code = pytest.main(arguments, plugins=[collector])
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise RuntimeError(f"collecting {' '.join(selection)} failed (pytest exit code {int(code)})")
    return tuple(collector.ids)


def case_cost_s(node_id: str) -> float:
    """The estimate of one collected case (``CASE_S``'s longest matching start), s."""
    start = max((key for key in CASE_S if node_id.startswith(key)), key=len, default=None)
    if start is None:
        raise ValueError(f"no estimate for the case {node_id}: add its file to CASE_S")
    seconds = CASE_S[start][0]
    return cpu_case_s() if seconds is None else seconds


#: The ``ufunc_size`` case past a last-level cache larger than 2^24 elements' working set covers
#: (``benchmarks.test_numpy_calls.dram_size``): collected where the machine's cache asks for it, which a GPU
#: server's does (hundreds of MiB) and a laptop's or this VM's (32 MiB) does not.
DRAM_CASE = "benchmarks/test_numpy_calls.py::test_ufunc_size[dram]"


def with_dram_case(cases: tuple[str, ...]) -> tuple[str, ...]:
    """``cases`` of a selection that holds ``ufunc_size``, with its DRAM size counted where this machine's
    cache left it out: the budget is the GPU server's, and the same table wherever it is generated."""
    from benchmarks.test_numpy_calls import SIZES  # the full sweep's sizes, the DRAM size aside

    sizes = [case for case in cases if case.startswith("benchmarks/test_numpy_calls.py::test_ufunc_size[")]
    if len(sizes) != len(SIZES):  # none, or the DRAM size collected already
        return cases
    return (*cases, DRAM_CASE)


def steps() -> list[Step]:
    """Every step of the script with its collected cases (``with_dram_case``) and estimate."""
    result = []
    for name, limit_s, selection in plan():
        cases = with_dram_case(collect(selection)) if selection else ()
        estimate = FIXED_S[name][0] + sum(case_cost_s(case) for case in cases)
        result.append(Step(name, limit_s, selection, cases, estimate))
    return result


def check(rows: Sequence[Step]) -> list[str]:
    """What breaks the budget's rules: a limit under ``HEADROOM`` × its estimate, limits over the budget."""
    problems = [
        f"{row.name}: limit {row.limit_s} s is under {HEADROOM} × its estimate {row.estimate_s:.0f} s"
        for row in rows
        if row.limit_s < HEADROOM * row.estimate_s
    ]
    total = sum(row.limit_s for row in rows)
    if total > BUDGET_S:
        problems.append(f"the limits add up to {total} s, over the {BUDGET_S} s budget")
    return problems


def _kinds(cases: Sequence[str]) -> str:
    """``cases`` counted by test function (benchmarks) or module (tests), e.g. "20 test_enqueue"."""

    def kind(case: str) -> str:
        path, _, function = re.sub(r"\[.*$", "", case).partition("::")
        return Path(path).name if path.startswith("tests/") else function

    counts = Counter(kind(case) for case in cases)
    return ", ".join(f"{count} {name}" for name, count in sorted(counts.items()))


def table(rows: Sequence[Step]) -> str:
    """The generated block of docs/gpu.md: the budget table, then what each step's estimate counts."""
    lines = [
        "| step | limit | share | estimate | limit ÷ estimate | cases collected |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        cases = f"{len(row.cases)}" if row.selection else "—"
        lines.append(
            f"| {row.name} | {row.limit_s} s | {100 * row.limit_s // BUDGET_S} % | ≈ {row.estimate_s:.0f} s "
            f"| {row.limit_s / row.estimate_s:.2f} | {cases} |"
        )
    total_limit = sum(row.limit_s for row in rows)
    total_estimate = sum(row.estimate_s for row in rows)
    lines.append(
        f"| total | {total_limit} s | {100 * total_limit // BUDGET_S} % | ≈ {total_estimate:.0f} s "
        f"| {total_limit / total_estimate:.2f} | {sum(len(row.cases) for row in rows)} |"
    )
    lines.append("")
    for row in rows:
        parts = [f"{FIXED_S[row.name][0]:.0f} s fixed ({FIXED_S[row.name][1]})"]
        per_start = Counter(
            max((key for key in CASE_S if case.startswith(key)), key=len) for case in row.cases
        )
        for start, count in sorted(per_start.items()):
            seconds = CASE_S[start][0] or cpu_case_s()
            parts.append(f"{count} × {seconds:.2f} s ({CASE_S[start][1]})")
        kinds = f"; collected: {_kinds(row.cases)}" if row.cases and row.name != "cpu-bench" else ""
        lines.append(f"- **{row.name}** ≈ {row.estimate_s:.0f} s: {' + '.join(parts)}{kinds}.")
    return "\n".join(lines) + "\n"


_BLOCK = re.compile(r"(<!-- generated: gpu_budget -->\n)(.*?)(<!-- end generated -->)", re.DOTALL)


def regenerated(text: str, block: str) -> str:
    """``text`` (docs/gpu.md) with its gpu_budget block replaced by ``block``; ValueError without one."""
    if not _BLOCK.search(text):
        raise ValueError(f"{DOCUMENT}: no <!-- generated: gpu_budget --> block")
    return _BLOCK.sub(lambda match: match.group(1) + block + match.group(3), text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/gpu.md's generated block")
    parser.add_argument("--json", action="store_true", help="print each step's figures as JSON")
    options = parser.parse_args(argv)
    os.chdir(ROOT)  # the selections are the script's, relative to the repository root
    rows = steps()
    problems = check(rows)
    block = table(rows)
    text = DOCUMENT.read_text(encoding="utf-8")
    if options.write:
        DOCUMENT.write_text(regenerated(text, block), encoding="utf-8")
    elif regenerated(text, block) != text:
        problems.append(f"{DOCUMENT.name}'s budget block differs: run python tools/gpu_budget.py --write")
    if options.json:
        figures = [
            {"name": row.name, "limit_s": row.limit_s, "cases": list(row.cases), "estimate_s": row.estimate_s}
            for row in rows
        ]
        print(json.dumps({"steps": figures, "table": block, "problems": problems}))
    else:
        print(block, end="")
    for problem in problems:
        print(f"gpu_budget: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
