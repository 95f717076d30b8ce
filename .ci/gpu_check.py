"""Read a GPU run back (``.ci/gpu-run``'s last step): every GPU check is a printed fact or a failure line.

Usage: ``python .ci/gpu_check.py RUN.json [FRAMEWORKS.json]`` from the repository root (``PYTHONPATH=.``);
FRAMEWORKS.json is the framework ladder's run (``.ci/gpu-run``'s frameworks step): its record, that its GPU
cases ran, and the ladder (cost per launch per layer, the decode steps, demo 2 per layer) are checked too.
Reads the saved run with the standard library first, so what needs no fitting is always checked: the run
record (completed, nothing failed, unfinished or skipped, no fault), the facts the GPU cases recorded (spin
clock at start and end with its warm-up and calibration tries, timer tick, queue depth, the decode step's
error against its float32 reference), the GPU's conditions at start and end (throttling from NVML's violation
counters), the stable GPU facts, and every spin case's achieved duration against its request and against the
timer. Then the fits, through ``analysis`` (the terminal summary, and every launch fit with the points it used
and set aside); where ``analysis`` cannot be imported on this machine (a missing package), one line says so
and the rest still counts.

Exit status: 0 when nothing failed, 1 otherwise, 2 when the file cannot be read as a run.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from benchmarks.nvml import throttled_between
from benchmarks.run_record import RUN_RECORD_KEY

#: Facts every run of the launch suite records (``benchmarks/test_cuda_launch.py``).
LAUNCH_FACTS = ("gpu.spin_clock", "gpu.spin_clock_end", "gpu.timer_tick_ns", "gpu.enqueue_depth")
#: The SM clock may move this much (relative) between the calibrations at the start and end of the suite.
CLOCK_DRIFT_MAX = 0.02
#: A spin's achieved duration may exceed its request by this fraction (plus SPIN_SLACK_NS) at most.
SPIN_OVERSHOOT = 0.05
SPIN_SLACK_NS = 50.0
#: How every reason of ``benchmarks.cuda``'s probe begins: a case skipped for it means CUDA was unusable
#: (other skips, e.g. an enqueue case longer than the measured queue, are by design).
PROBE_REASON_START = "CuPy "
LAUNCH_CASES = ("launch_batch", "launch_sync_each", "graph_replay", "spin", "enqueue", "sync", "launch_args")


def _cuda_cases(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        case.get("extra_info") or {}
        for case in run.get("benchmarks") or []
        if (case.get("extra_info") or {}).get("device") == "cuda"
    ]


def check_record(record: dict[str, Any], failures: list[str]) -> None:
    """The run as a whole: completed, every planned case measured, no fault."""
    cases = record.get("cases") or {}
    print(
        f"run {record.get('status')}: {cases.get('measured')} measured, {cases.get('failed')} failed, "
        f"{cases.get('skipped')} skipped of {cases.get('planned')} planned"
    )
    if record.get("status") != "completed":
        failures.append(f"the run did not complete (interrupted by {record.get('interrupted_by')})")
    for name in cases.get("unfinished") or []:
        failures.append(f"case did not finish: {name}")
    for reason, count in (cases.get("skip_reasons") or {}).items():
        print(f"skipped ({count}): {reason}")
        if reason.startswith(PROBE_REASON_START):
            failures.append(f"{count} cases skipped on a GPU run: {reason}")
    for fault in record.get("faults") or []:
        failures.append(f"fault: {fault}")


def check_facts(facts: dict[str, Any], cases: list[dict[str, Any]], failures: list[str]) -> None:
    """The facts the GPU cases recorded: printed, and each one their cases promise present."""
    for name in sorted(name for name in facts if name.startswith("gpu.")):
        print(f"fact {name} = {json.dumps(facts[name])}")
    expected: list[str] = []
    if any(case.get("case") in LAUNCH_CASES for case in cases):
        expected += LAUNCH_FACTS
    steps = [case for case in cases if case.get("case") == "decode_step" and case.get("op") == "decode_step"]
    expected += [f"gpu.decode_reference_error.{case.get('plan')}.{case.get('mode')}" for case in steps]
    failures.extend(f"fact missing: {name}" for name in expected if name not in facts)
    start, end = facts.get("gpu.spin_clock") or {}, facts.get("gpu.spin_clock_end") or {}
    for name, clock in (("gpu.spin_clock", start), ("gpu.spin_clock_end", end)):
        warmup, tries = clock.get("warmup"), clock.get("tries")
        if warmup and tries:
            spreads = ", ".join(f"{each['spread']:.2%}" for each in tries)
            print(
                f"{name}: warmed up for {warmup['ns'] / 1e9:.2f} s "
                f"({'steady' if warmup['stable'] else 'STILL MOVING'} at the end), {len(tries)} calibration "
                f"tries (spreads {spreads}), {clock['cycles_per_ns']:.4f} cycles per ns kept"
            )
    if start.get("cycles_per_ns") and end.get("cycles_per_ns"):
        drift = end["cycles_per_ns"] / start["cycles_per_ns"] - 1
        print(f"SM clock moved by {drift:+.2%} between the start and the end of the launch suite")
        if abs(drift) > CLOCK_DRIFT_MAX:
            failures.append(
                f"the SM clock moved by {drift:+.1%} during the launch suite (more than "
                f"{CLOCK_DRIFT_MAX:.0%}): spin durations converted at the start's rate are off by as much"
            )


def check_conditions(record: dict[str, Any]) -> None:
    """The GPU's conditions at start and end, and whether NVML's counters say it was held back between."""
    conditions = record.get("conditions") or {}
    start, end = (conditions.get(when) or {} for when in ("start", "end"))
    for when, snapshot in (("start", start), ("end", end)):
        gpu = snapshot.get("gpu")
        if not gpu or "nvml_error" in gpu:
            print(f"GPU conditions at {when}: {(gpu or {}).get('nvml_error', 'none recorded')}")
            continue
        shown = ("sm_clock_hz", "memory_clock_hz", "power_w", "temperature_c", "pstate", "throttle_reasons")
        print(f"GPU conditions at {when}: " + ", ".join(f"{key} {gpu.get(key)}" for key in shown))
    held = throttled_between(start.get("gpu"), end.get("gpu"))
    if held is None:
        print("throttling: unknown (no NVML violation counters at both ends)")
    elif held:
        spans = ", ".join(f"{policy} {seconds:.3f} s" for policy, seconds in held.items())
        print(f"throttling: the GPU was held back during the run ({spans}): its figures may read slow")
    else:
        print("throttling: none (NVML violation counters unchanged)")


def check_gpu_info(run: dict[str, Any], failures: list[str]) -> None:
    gpu = ((run.get("machine_info") or {}).get("launchbench") or {}).get("gpu")
    print(f"GPU: {json.dumps(gpu)}")
    if not gpu:
        failures.append("machine_info holds no GPU: CUDA was not usable when the run was saved")
    for key, error in ((gpu or {}).get("query_errors") or {}).items():
        failures.append(f"GPU query {key} failed: {error}")


def check_spins(cases: list[dict[str, Any]], tick_ns: float | None, failures: list[str]) -> None:
    """Every spin case by what it achieved: at least its request, at most 5 % (+50 ns) more, and its
    %globaltimer mean within half a tick (or 5 %) of its cycle count. The tick itself is never a failure."""
    for case in sorted(
        (c for c in cases if c.get("case") == "spin"), key=lambda c: (c["mode"], c["kernel_ns"])
    ):
        requested, cycles_ns, timer_ns = (
            case["kernel_ns"],
            case.get("achieved_ns"),
            case.get("achieved_timer_ns"),
        )
        what = f"spin {case['mode']} {requested} ns"
        if cycles_ns is None or timer_ns is None:
            failures.append(f"{what}: no achieved duration recorded")
            continue
        print(f"{what}: achieved {cycles_ns:.0f} ns by SM cycles, {timer_ns:.0f} ns by %globaltimer")
        if not requested <= cycles_ns <= requested * (1 + SPIN_OVERSHOOT) + SPIN_SLACK_NS:
            failures.append(f"{what}: achieved {cycles_ns:.0f} ns")
        tolerance = max(SPIN_OVERSHOOT * cycles_ns, (tick_ns or 0) / 2, SPIN_SLACK_NS)
        if not math.isclose(timer_ns, cycles_ns, abs_tol=tolerance):
            failures.append(
                f"{what}: {cycles_ns:.0f} ns by SM cycles but {timer_ns:.0f} ns by %globaltimer (more than "
                f"{tolerance:.0f} ns apart): the calibrated clock does not hold"
            )


def check_fits(path: Path, failures: list[str]) -> None:
    """The terminal summary of the saved run and every launch fit, through ``analysis``; one line where
    ``analysis`` cannot be imported here."""
    try:
        import scipy.stats  # noqa: F401  (analysis imports it only when it fits: ask for it here)

        from analysis.launch import cuda_rows, fit_launch
        from analysis.load import load_runs
        from analysis.summary import summary_lines
    except ImportError as error:
        print(
            f"fits not computed: analysis cannot be imported here ({type(error).__name__}: {error}); "
            f"{path} is complete: read it where it can (python -m analysis report {path} --out report)"
        )
        return
    result = load_runs([path], samples=True)
    for problem in result.problems:
        failures.append(f"loading: {problem}")
    for line in summary_lines(result.frame):
        print(line)
    fits = fit_launch(cuda_rows(result.frame))
    if fits.empty:
        return
    columns = ["quantity", "value_s", "ci_low_s", "ci_high_s", "n_points", "n_set_aside", "note"]
    print(fits[columns].to_string(index=False))
    for row in fits.itertuples(index=False):
        if not math.isfinite(row.value_s):
            failures.append(f"fit {row.quantity}: no value ({row.note})")


def check_ladder(path: Path, run: dict[str, Any], failures: list[str]) -> None:
    """The framework ladder's run: complete, its GPU cases measured, and its tables through ``analysis``."""
    print(f"framework ladder: {path}")
    check_record(run.get(RUN_RECORD_KEY) or {}, failures)
    if not any(case.get("case") == "framework_launch" for case in _cuda_cases(run)):
        failures.append(
            f"{path}: no framework_launch case ran (torch, Triton and JAX each skipped: see bench.log)"
        )
    try:
        from analysis.frameworks import summary_lines
        from analysis.load import load_runs
    except ImportError as error:
        print(f"ladder not computed: analysis cannot be imported here ({type(error).__name__}: {error})")
        return
    result = load_runs([path], samples=False)
    for problem in result.problems:
        failures.append(f"loading: {problem}")
    for line in summary_lines(result.frame):
        print(line)


def _read_run(path: Path) -> dict[str, Any] | None:
    """The saved run at ``path``; None (and one line on stderr) when it cannot be read as one."""
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"{path}: cannot be read as a saved run: {error}", file=sys.stderr)
        return None
    if not isinstance(run, dict):
        print(f"{path}: not a saved run (a JSON {type(run).__name__})", file=sys.stderr)
        return None
    return run


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python .ci/gpu_check.py RUN.json [FRAMEWORKS.json]", file=sys.stderr)
        return 2
    path = Path(argv[0])
    run = _read_run(path)
    ladder_path = Path(argv[1]) if len(argv) == 2 else None
    ladder = _read_run(ladder_path) if ladder_path is not None else None
    if run is None or (ladder_path is not None and ladder is None):
        return 2
    failures: list[str] = []
    record = run.get(RUN_RECORD_KEY) or {}
    if not record:
        failures.append(f"{path}: no run record ({RUN_RECORD_KEY})")
    cases = _cuda_cases(run)
    if not cases:
        failures.append(f"{path}: no GPU cases (every CUDA case was skipped or failed: see bench.log)")
    check_record(record, failures)
    facts = record.get("facts") or {}
    check_facts(facts, cases, failures)
    check_conditions(record)
    check_gpu_info(run, failures)
    check_spins(cases, facts.get("gpu.timer_tick_ns"), failures)
    check_fits(path, failures)
    if ladder_path is not None and ladder is not None:
        check_ladder(ladder_path, ladder, failures)
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    print(f"gpu-check: {len(failures)} failures" if failures else "gpu-check: every check passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
