"""How fast the machine itself was during a run: its speed sentinel (``benchmarks.sentinel``), read back.

A run saved with a run record of today's code holds the sentinel's checkpoints: three fixed workloads (a
pure-Python loop, one-element ``np.add`` calls, a 32 MiB copy) timed at its start, before each family and at
its end. From them:

- **drift within the run** (``drift``, ``drift_line``): the later half of its checkpoints against the
  earlier half; past ``DRIFT_LIMIT`` the run's figures mix two speeds of the machine, said where the busy
  verdict is said;
- **an unsteady machine** (``spread``, ``unsteady_line``): the CPU workloads' slowest checkpoint against
  their fastest; past ``SPREAD_LIMIT`` the machine hopped between speeds during the run, which halves do not
  see (a run that hops is as often as not equal in its two halves), said in place of the drift;
- **speed against the machine's history** (``speed_ratios``, ``speed_line``): the CPU workloads' fastest
  checkpoint against the median of the same over the machine's runs in the storage, the geometric mean over
  the workloads (``SPEED_WORKLOADS``): "ran 1.25× slower than this machine's usual";
- **normalised figures** (``normalized``, ``compare --normalize``): each run's times divided by its speed
  ratio, so that a slower VM and slower code are told apart.

Runs saved before the sentinel simply have none: no line, and ``--normalize`` leaves them as they are and
names them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from model.units import fmt_percent

#: The run-info column (``analysis.load.RUN_INFO_COLUMNS``) holding a run's sentinel as JSON text:
#: ``{"at": [checkpoint names], "seconds": {workload: [seconds per checkpoint]}, "cost_s": total}``.
SENTINEL_COLUMN = "sentinel"
#: A run whose speed moved by this fraction or more during it drifted (``drift``). Measured on this project's
#: 2-vCPU VM: its six quiet runs with a sentinel (tests/data/runs-xeon, tests/data/sentinel/quiet-*) drifted
#: 0.0–4.3 %, the run with two spinning processes from its middle on 14 % (``tests/test_sentinel.py``).
DRIFT_LIMIT = 0.10
#: A run whose speed ratio to the machine's usual is off by this fraction or more is named as slow or fast:
#: the same seven runs' ratios lay within 0.935–1.046.
SPEED_LIMIT = 0.10
#: The workloads a run's speed ratio is read from, each at its fastest checkpoint, as the figures it divides
#: are fastest rounds. Over the ten quiet quick runs of tests/data/aa-sentinel the ratio so read spreads
#: 0.8 % (standard deviation of its log); by each workload's median over checkpoints, 2.7 %; with the 32 MiB
#: copy as well, 3.9 % (median) and 6.5 % (fastest): the copy's checkpoints on this VM spread 2.5–5.0 ms,
#: more than the slowdowns the ratio is there to correct, so it informs the drift only. The 17 quiet runs
#: with a sentinel (aa-sentinel, runs-xeon, sentinel) lie within 0.977–1.084 of their machine's usual.
SPEED_WORKLOADS = ("python", "numpy_call")
#: A run whose CPU workloads' checkpoints (``SPEED_WORKLOADS``, geometric mean per checkpoint) spread by this
#: factor or more, slowest ÷ fastest, ran at more than one speed. Measured: the 17 quiet runs with a sentinel
#: on the Xeon VM (aa-sentinel, runs-xeon, sentinel) spread 1.06–1.19×; the 11 quick runs on the EPYC VM of
#: 2026-12-07 (tests/data/sentinel-epyc/quiet-*), every record quiet, 1.72–1.97×, hopping between two speeds
#: (one-element ``np.add`` 0.49–0.53 µs or 0.85–1.17 µs a call) while the n = 1 case's fastest round was
#: 32–35 µs in five of them, 51 µs in one and 63–68 µs in the other five.
SPREAD_LIMIT = 1.30
#: The time statistics of a frame that ``normalized`` divides by a run's speed ratio (the raw rounds too).
TIME_COLUMNS = ("min", "max", "mean", "median", "stddev", "iqr", "q1", "q3")


def from_record(record: Mapping) -> str | None:
    """The run record's sentinel as ``SENTINEL_COLUMN``'s JSON text; None where the run took none or it is
    not the shape ``benchmarks.sentinel`` saves (a damaged or foreign record: no sentinel, not an error)."""
    sentinel = record.get("sentinel")
    if not isinstance(sentinel, Mapping) or not isinstance(sentinel.get("checkpoints"), list):
        return None
    at: list[str] = []
    seconds: dict[str, list[float]] = {}
    cost = 0.0
    for point in sentinel["checkpoints"]:
        values = point.get("seconds") if isinstance(point, Mapping) else None
        if not isinstance(values, Mapping) or not all(_positive(v) for v in values.values()):
            return None
        at.append(str(point.get("at")))
        for name, value in values.items():
            seconds.setdefault(str(name), []).append(float(value))
        cost += float(point["cost_s"]) if _positive(point.get("cost_s")) else 0.0
    if not at or any(len(values) != len(at) for values in seconds.values()):
        return None
    return json.dumps({"at": at, "seconds": seconds, "cost_s": cost}, sort_keys=True)


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    )


def _parsed(text: object) -> dict | None:
    return json.loads(text) if isinstance(text, str) else None


def drift(text: object) -> tuple[float, str, str] | None:
    """How far a run's speed moved during it (``SENTINEL_COLUMN`` text): the geometric mean over the
    workloads of the median of the later half of its checkpoints ÷ the median of the earlier half, as
    (that ratio − 1, the earlier half's span, the later half's span), > 0 slower later; None without two
    checkpoints. Halves and medians, never two single checkpoints: one checkpoint of a workload moves by up
    to ±20 % on a quiet 2-vCPU VM (the sibling vCPU's state), a sustained change of the machine moves all
    three workloads for the rest of the run."""
    sentinel = _parsed(text)
    if sentinel is None or len(sentinel["at"]) < 2:
        return None
    half = len(sentinel["at"]) // 2
    logs = [
        math.log(float(np.median(values[-half:])) / float(np.median(values[:half])))
        for values in sentinel["seconds"].values()
    ]
    at = sentinel["at"]
    earlier = at[0] if half == 1 else f"{at[0]} … {at[half - 1]}"
    later = at[-1] if half == 1 else f"{at[-half]} … {at[-1]}"
    return math.exp(float(np.mean(logs))) - 1, earlier, later


def spread(text: object) -> tuple[float, str, str] | None:
    """How far apart the machine's speeds lay during a run (``SENTINEL_COLUMN`` text): the CPU workloads'
    (``SPEED_WORKLOADS``) slowest checkpoint ÷ their fastest, each checkpoint the geometric mean over the
    workloads, as (that factor, where the fastest was, where the slowest was); None without two checkpoints
    of them. The memory copy is left out: its checkpoints spread 2.5–5.0 ms on a quiet VM
    (``SPEED_WORKLOADS``)."""
    sentinel = _parsed(text)
    if sentinel is None or len(sentinel["at"]) < 2:
        return None
    logs = [np.log(values) for name, values in sentinel["seconds"].items() if name in SPEED_WORKLOADS]
    if not logs:
        return None
    speed = np.mean(logs, axis=0)
    fastest, slowest = int(np.argmin(speed)), int(np.argmax(speed))
    return math.exp(float(speed[slowest] - speed[fastest])), sentinel["at"][fastest], sentinel["at"][slowest]


def unsteady_line(run: Mapping) -> str | None:
    """One line when a run's CPU sentinel checkpoints spread by ``SPREAD_LIMIT`` or more (``spread``;
    ``run``: a ``LoadResult.runs`` row); None otherwise."""
    found = spread(run.get(SENTINEL_COLUMN))
    if found is None or found[0] < SPREAD_LIMIT:
        return None
    factor, fastest, slowest = found
    return (
        f"Machine speed unsteady: the speed sentinel's CPU workloads ran {factor:.2f}× slower at {slowest} "
        f"than at {fastest} (limit {SPREAD_LIMIT:.2f}×): its figures mix the machine's speeds"
    )


def drift_line(run: Mapping) -> str | None:
    """One line when a run's speed moved by ``DRIFT_LIMIT`` or more during it (``drift``; ``run``: a
    ``LoadResult.runs`` row), either way; None otherwise."""
    found = drift(run.get(SENTINEL_COLUMN))
    if found is None or abs(math.log1p(found[0])) < math.log1p(DRIFT_LIMIT):
        return None
    ratio, earlier, later = found
    how = f"{1 + ratio:.2f}× slower" if ratio > 0 else f"{1 / (1 + ratio):.2f}× faster"
    moved = math.exp(abs(math.log1p(ratio))) - 1  # either way: 1.10× faster is 10 %, as 1.10× slower
    return (
        f"Machine speed drifted {fmt_percent(moved)} during this run (the speed sentinel {how} at "
        f"{later} than at {earlier}; limit {fmt_percent(DRIFT_LIMIT)}): its figures mix two speeds of the "
        "machine"
    )


def speed_ratios(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run with a sentinel (``runs``: ``LoadResult.runs``), its speed against the machine's usual:
    columns ``source``, ``machine_id``, ``ratio`` (this run's time ÷ the machine's usual, the geometric mean
    over ``SPEED_WORKLOADS`` of each workload's fastest checkpoint in the run ÷ the median of the same over
    all the machine's runs: one reference for every run of it, which one slow run among three does not
    move; > 1 slower) and ``others`` (the machine's other runs). Runs whose machine has no other run with a
    sentinel are left out."""
    columns = ["source", "machine_id", "ratio", "others"]
    if SENTINEL_COLUMN not in runs:
        return pd.DataFrame(columns=columns)
    fastest = []
    for run in runs[["source", "machine_id", SENTINEL_COLUMN]].itertuples(index=False):
        sentinel = _parsed(run[2])
        if sentinel is not None:
            per = {
                name: float(np.min(values))
                for name, values in sentinel["seconds"].items()
                if name in SPEED_WORKLOADS and len(values)
            }
            fastest.append({"source": run[0], "machine_id": run[1], **per})
    table = pd.DataFrame(fastest)
    rows: list[list[object]] = []
    if table.empty:
        return pd.DataFrame(columns=columns)
    for machine_id, machine in table.groupby("machine_id", sort=False):
        others = len(machine) - 1
        if not others:
            continue
        workloads = [column for column in machine if column not in ("source", "machine_id")]
        usual = [float(machine[name].median()) for name in workloads]  # once a machine, not a run
        # Row by row as plain values (a Series a row cost 40 µs, a fleet's 1,000 runs 0.04 s).
        for source, *values in machine[["source", *workloads]].itertuples(index=False, name=None):
            logs = [
                math.log(value / base) for value, base in zip(values, usual, strict=True) if _positive(value)
            ]
            if logs:
                rows.append([source, machine_id, math.exp(float(np.mean(logs))), others])
    return pd.DataFrame(rows, columns=columns)


def speed_line(ratio: float, others: int) -> str | None:
    """ "Ran 1.25× slower than this machine's usual …" where ``ratio`` is off by ``SPEED_LIMIT`` or more."""
    if not math.isfinite(ratio) or abs(math.log(ratio)) < math.log1p(SPEED_LIMIT):
        return None
    how = f"{ratio:.2f}× slower" if ratio > 1 else f"{1 / ratio:.2f}× faster"
    return (
        f"Machine speed: this run ran {how} than this machine's usual (its speed sentinel against the median "
        f"of the machine's runs, {others + 1} in all); --normalize divides its figures by that"
    )


def normalized(frame: pd.DataFrame, runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` with the times of each run named slow or fast (its speed ratio, ``speed_ratios``, off by
    ``SPEED_LIMIT`` or more) divided by that ratio, and the lines that say so. Runs within the limit are
    left as measured: there the ratio is the sentinel's own noise, and dividing by it added more than it
    removed (``tools/verdict_rates.py``, A/A one run a side over aa-sentinel and runs-xeon: every run
    divided, 1.7 % of the figures flagged; the named ones only, as measured, 0.7 %). The lines also name
    the runs that could not be normalised (no sentinel, or no other run of their machine)."""
    ratios = speed_ratios(runs)
    named = ratios[np.abs(np.log(ratios["ratio"].astype(float))) >= math.log1p(SPEED_LIMIT)]
    scale = dict(zip(named["source"], 1 / named["ratio"], strict=True))
    factor = frame["source"].astype(str).map(scale).astype(float)
    known = factor.notna()
    out = frame.copy()
    for column in TIME_COLUMNS:  # the host's clock; the GPU's own time (gpu_time_s) is not the host's speed
        if column in out:
            out.loc[known, column] = out.loc[known, column].astype(float) * factor[known]
    for column in ("data", "probe_s"):
        if column in out:
            out[column] = [
                _scaled(value, f) if math.isfinite(f) else value
                for value, f in zip(out[column], factor.fillna(math.nan), strict=True)
            ]
    lines = []
    if not ratios.empty:
        low, high = float(ratios["ratio"].min()), float(ratios["ratio"].max())
        divided = (
            f"{len(named)} run(s) ≥ {SPEED_LIMIT:.0%} off divided by it "
            f"({', '.join(f'{ratio:.3f}' for ratio in sorted(named['ratio'])[:5])})"
            if len(named)
            else f"no run ≥ {SPEED_LIMIT:.0%} off, none divided"
        )
        lines.append(
            f"--normalize: speed ratios to each machine's usual (the speed sentinel) {low:.3f}–{high:.3f} "
            f"over {len(ratios)} run(s); {divided}; the others are within the sentinel's own noise, left "
            "as measured"
        )
    missing = sorted(set(runs["source"].astype(str)) - set(ratios["source"].astype(str)))
    if missing:
        lines.append(
            f"--normalize: {len(missing)} run(s) left as measured (no speed sentinel, or no other run of "
            f"their machine): {', '.join(missing[:3])}{', …' if len(missing) > 3 else ''}"
        )
    return out, lines


def _scaled(value: object, factor: float) -> object:
    if isinstance(value, np.ndarray):
        return value * factor
    if isinstance(value, tuple | list):
        return type(value)(float(v) * factor for v in value)
    return value
