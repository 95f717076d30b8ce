"""README's and docs/'s quoted results, regenerated from the committed runs (tests/data/runs).

Two kinds of generated block, each a claim that a test (tests/test_readme_results.py) holds against the runs:

- a command block: a fenced ``text`` block whose first line is ``$ python -m analysis ...``; the rest is what
  that command prints today;
- a named table between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``: ``TABLES[NAME]()``.

``python tools/readme_results.py`` prints what differs; ``--write`` rewrites the blocks in place.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from analysis.fits import Fits

ROOT = Path(__file__).resolve().parents[1]
#: The files whose blocks are generated.
DOCUMENTS = ("README.md", "docs/results.md")
#: Today's committed runs: every quoted figure comes from them.
RUNS = ROOT / "tests" / "data" / "runs"
#: Today's code's full runs (with the probe case, the speed sentinel), on this project's current VM: the CPU
#: decode step's prediction is held against these; ``RUNS`` (an older commit, another CPU) beside them.
TODAY = ROOT / "tests" / "data" / "runs-xeon"
#: Every committed run (each folder of runs, and the single files the older layouts' tests read).
COMMITTED = ROOT / "tests" / "data"

_COMMAND = re.compile(r"```text\n\$ (python -m analysis [^\n]+)\n(.*?)```", re.DOTALL)
_TABLE = re.compile(r"<!-- generated: (\w+) -->\n(.*?)<!-- end generated -->", re.DOTALL)


def command_output(command: str) -> str:
    """What ``python -m analysis ARGS`` prints to stdout, run in-process from the repository root."""
    from analysis.__main__ import main

    argv = shlex.split(command)[3:]
    out, here = io.StringIO(), Path.cwd()
    os.chdir(ROOT)  # the command's paths are the repository's (contextlib.chdir is Python 3.11+)
    try:
        with contextlib.redirect_stdout(out):
            code = main(argv)
    finally:
        os.chdir(here)
    if code != 0:
        raise RuntimeError(f"{command!r} exited {code}")
    return out.getvalue()


@functools.cache
def _fitted_runs(folder: Path = RUNS) -> list[tuple[str, pd.DataFrame, Fits]]:
    """Each committed run's file name, frame (raw samples read) and ``fit_all`` of it, loaded and fitted
    once for every table (each run is fitted alone: the tables hold one row per run)."""
    from analysis.fits import fit_all
    from analysis.load import load_runs

    runs = []
    for path in sorted(folder.glob("*.json")):
        frame = load_runs([path], samples=True).frame
        runs.append((path.name, frame, fit_all(frame)))
    return runs


def _cpu_steps(folders: tuple[Path, ...] = (TODAY, RUNS)) -> Iterator[tuple[str, Any]]:
    """(run file name, its CPU decode step row of ``decode_table``) for every committed run of ``folders``
    and plan: today's code's runs first."""
    for name, _, fits in (run for folder in folders for run in _fitted_runs(folder)):
        steps = fits.decode_steps
        yield from ((name, row) for row in steps[steps["device"] == "cpu"].itertuples(index=False))


def decode_runs_table() -> str:
    """One markdown row per committed run and plan: the CPU decode step against its prediction from other
    cases (with its interval), the seed's model, the consistency check and the probe estimate with the rounds
    that beat it (``analysis.decode.decode_table``)."""
    from analysis.decode_text import prediction_cell, ratio_cell, rounds_below_text
    from model.units import fmt_rate, fmt_time

    rows = [
        "| run | plan | measured | predicted [95 %] | measured ÷ predicted | seed's model | ÷ seed "
        "| ÷ check | rounds below the probe estimate | prediction's bandwidth (its case) "
        "| probe, same rounds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in _cpu_steps():
        rows.append(
            f"| `{name}` | {row.plan} | {fmt_time(row.measured_s)} | {prediction_cell(row)} | "
            f"{ratio_cell(row)} | {fmt_time(row.serial_s)} | {row.measured_s / row.serial_s:.2f}× | "
            f"{row.measured_s / row.check_s:.2f}× | {rounds_below_text(row)} | "
            f"{fmt_rate(row.reference_bytes_per_s)} ({row.bandwidth_from}) | "
            f"{fmt_rate(row.probe_bytes_per_s)} |"
        )
    return "\n".join(rows) + "\n"


def decode_summary_line() -> str:
    """Two sentences: the CPU decode step's measured ÷ predicted and ÷ the seed's model over today's code's
    runs (``TODAY``), then over the older runs of another CPU (``RUNS``; the rows are ``decode_runs``)."""

    def ratio(value: float) -> str:
        return f"{value:.2f}×"

    lines = []
    for folder, who in ((TODAY, "today's code"), (RUNS, "an older commit on an AMD EPYC VM")):
        steps = [row for _, row in _cpu_steps((folder,))]
        predicted = [row.measured_over_predicted for row in steps]
        seed = [row.measured_s / row.serial_s for row in steps]
        sources = ", ".join(sorted({str(row.bandwidth_from) for row in steps}))
        lines.append(
            f"- {who} (`{folder.relative_to(ROOT)}`, {len(steps)} steps): measured {_span(predicted, ratio)} "
            f"its prediction from other cases (weights at the {sources} bandwidth), {_span(seed, ratio)} the "
            "seed's model."
        )
    return "\n".join(lines) + "\n"


def decode_gap_table() -> str:
    """One markdown row per committed run and plan: measured − predicted, itemized: the weights at the
    bandwidth of the step's own matrix-vector products in its own rounds (the probe) instead of the
    prediction's (the probe case's, or the read case's in older runs), and what the consistency check still
    leaves (measured − check)."""
    from model.units import fmt_time

    rows = [
        "| run | plan | measured − predicted | of it: the matvecs in the step's rounds, slower "
        "than predicted "
        "| left by the consistency check |",
        "|---|---|---|---|---|",
    ]
    for name, row in _cpu_steps():
        gap = row.measured_s - row.predicted_s
        matvecs = row.predicted_weights_s * (row.reference_bytes_per_s / row.probe_bytes_per_s - 1)
        rows.append(
            f"| `{name}` | {row.plan} | {fmt_time(gap)} | {fmt_time(matvecs)} | "
            f"{fmt_time(row.measured_s - row.check_s)} |"
        )
    return "\n".join(rows) + "\n"


def steady_counts_line() -> str:
    """The steady-state classes (``analysis.steady``) of the cases of every committed run, counted, with the
    warm-up rounds left out of their figures and the cases too short to classify."""
    from analysis.load import load_runs
    from analysis.steady import (
        CLASSES,
        MIN_SEGMENT,
        NO_STEADY_STATE,
        WARM_UP,
        steadiness_table,
        unclassified_count,
    )

    loaded = load_runs([COMMITTED], samples=True)
    table = steadiness_table(loaded.frame)
    counts = {kind: int((table["kind"] == kind).sum()) for kind in CLASSES}
    left_out = int(table.loc[table["kind"] == WARM_UP, "warm_up_rounds"].sum())
    notes = {
        WARM_UP: f" (their first {left_out:,} rounds left out of the figures)",
        NO_STEADY_STATE: " (unstable)",
    }
    parts = ", ".join(f"{counts[kind]:,} {kind}{notes.get(kind, '')}" for kind in CLASSES)
    return (
        f"Steady state per case over the {len(loaded.files_used)} committed runs (`tests/data`): {parts}; "
        f"{unclassified_count(loaded.frame):,} not classified (under {2 * MIN_SEGMENT} rounds: quick runs' "
        "5).\n"
    )


def ladder_calls_table() -> str:
    """One markdown row per committed run and caller of the framework ladder: t0 with its interval, its
    ratio to numpy's t0 in the same run, and r∞ (``analysis.frameworks.fit_calls``)."""
    from analysis.render import with_interval
    from model.units import fmt_si

    rows = ["| run | caller | t0 [95 %] | × numpy | r∞ |", "|---|---|---|---|---|"]
    for name, _, fits in _fitted_runs():
        for row in fits.calls.itertuples(index=False):
            t0 = with_interval(row.t0_s, row.t0_low_s, row.t0_high_s, "s")
            rows.append(
                f"| `{name}` | {row.caller} | {t0} | {row.t0_ratio:.2f}× | "
                f"{fmt_si(row.r_inf_per_s, 'elem/s')} |"
            )
    return "\n".join(rows) + "\n"


def ladder_steps_table() -> str:
    """One markdown row per committed run, framework and compiler: the decode step (fastest round) against
    numpy's step and numpy's predicted step of the same run (``analysis.frameworks.step_times``)."""
    from analysis.frameworks import step_times
    from model.units import fmt_time

    rows = [
        "| run | framework | compiler | fastest | median | × numpy's step | × eager "
        "| × numpy's predicted step |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, frame, fits in _fitted_runs():
        for row in step_times(frame, fits.decode_steps).itertuples(index=False):
            rows.append(
                f"| `{name}` | {row.framework} | {row.compiler} | {fmt_time(row.min_s)} | "
                f"{fmt_time(row.median_s)} | {row.vs_numpy:.2f}× | {row.vs_eager:.2f}× | "
                f"{row.vs_predicted:.2f}× |"
            )
    return "\n".join(rows) + "\n"


def _span(values: list[float], fmt: Callable[[float], str]) -> str:
    """``values`` as "low–high" (one value where they agree when formatted)."""
    low, high = fmt(min(values)), fmt(max(values))
    return low if low == high else f"{low}–{high}"


def ladder_summary_table() -> str:
    """The ladder over every committed run, one row per caller and one per decode step: t0 (its range over
    the runs) and its ratio to numpy's; the step's fastest round, and its ratios to numpy's step and to the
    same framework's eager step. The per-run rows are ``ladder_calls`` and ``ladder_steps``."""
    from analysis.frameworks import step_times
    from model.units import fmt_time

    calls: dict[str, list[tuple[float, float]]] = {}
    steps: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for _, frame, fits in _fitted_runs():
        for row in fits.calls.itertuples(index=False):
            calls.setdefault(row.caller, []).append((row.t0_s, row.t0_ratio))
        for row in step_times(frame, fits.decode_steps).itertuples(index=False):
            steps.setdefault((row.framework, row.compiler), []).append(
                (row.min_s, row.vs_numpy, row.vs_eager)
            )

    def ratio(value: float) -> str:
        return f"{value:.2f}×"

    rows = [
        f"| one call ({len(next(iter(calls.values()), []))} runs) | t0 | × numpy's t0 |",
        "|---|---|---|",
    ]
    for name, values in sorted(calls.items(), key=lambda item: min(v[0] for v in item[1])):
        t0s, ratios = zip(*values, strict=True)
        rows.append(f"| {name} | {_span(list(t0s), fmt_time)} | {_span(list(ratios), ratio)} |")
    rows += ["", "| decode step | fastest | × numpy's step | × its eager step |", "|---|---|---|---|"]
    for (framework, compiler), values in sorted(steps.items()):
        seconds, vs_numpy, vs_eager = zip(*values, strict=True)
        rows.append(
            f"| {framework} {compiler} | {_span(list(seconds), fmt_time)} | {_span(list(vs_numpy), ratio)} | "
            f"{_span(list(vs_eager), ratio)} |"
        )
    return "\n".join(rows) + "\n"


#: Named tables: name -> its generator.
TABLES: dict[str, Callable[[], str]] = {
    "decode_runs": decode_runs_table,
    "decode_summary": decode_summary_line,
    "decode_gap": decode_gap_table,
    "steady_counts": steady_counts_line,
    "ladder_calls": ladder_calls_table,
    "ladder_steps": ladder_steps_table,
    "ladder_summary": ladder_summary_table,
}


def regenerated(text: str) -> str:
    """``text`` with every generated block made anew."""
    text = _COMMAND.sub(lambda m: f"```text\n$ {m[1]}\n{command_output(m[1])}```", text)
    return _TABLE.sub(lambda m: f"<!-- generated: {m[1]} -->\n{TABLES[m[1]]()}<!-- end generated -->", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the blocks in place")
    args = parser.parse_args(argv)
    stale = []
    for name in DOCUMENTS:
        path = ROOT / name
        text = path.read_text(encoding="utf-8")
        fresh = regenerated(text)
        if fresh != text:
            stale.append(name)
            if args.write:
                path.write_text(fresh, encoding="utf-8")
    verb = "rewritten" if args.write else "out of date (python tools/readme_results.py --write)"
    print(f"{verb}: {', '.join(stale)}" if stale else "every generated block is up to date")
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
