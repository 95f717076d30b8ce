"""The decode-step family: measured steps held against the roofline-plus-per-call-cost prediction.

Rows of ``case == "decode_step"`` (``benchmarks/test_decode_step.py``). For each measured step, per machine:

- CPU (numpy), every figure a fastest round (``min``):
  - the prediction, from other cases only (never the step's own rounds): the weights (bytes − KV cache) at
    the bandwidth of the probe case (the step's matrix-vector products timed as a case of their own, apart
    from the step's rounds, ``op == "probe"``), else, in runs saved before it, of ``host_bandwidth``'s read
    case (one ``np.matmul`` of a float32 matrix past the LLC), the attention ops from their own case (``op
    == "attention"``: batched products of a few query rows are not bandwidth-bound), every other call at its
    op's measured fixed cost (``numpy_op``, ``analysis.ops``) and the overhead floor's remainder
    (``decode_floor``: the Python work between the calls that no op's figure holds). Its 95 % interval: each
    term's run-to-run spread on this kind of machine (``analysis.verdicts.SPREAD``), since a fastest round's
    rounds say nothing of its uncertainty; the headline is measured ÷ predicted with its interval;
  - beside it the seed's model: bytes at the same bandwidth + calls × t0 (fitted ``np.add``);
  - the consistency check, not a prediction: the same sum with the step's bandwidth probe (``probe_s``: its
    own matrix-vector products over every weight matrix, alone, one probe round before each of the step's
    timed rounds) in place of the probe case;
  - the probe estimate, the probe's fastest round + the overhead floor's work outside the probe's calls
    (numpy runs its calls one after another): held round by round, each step round against the probe round
    before it, the rounds that beat it counted (``rounds_below``): an estimate, not a bound, since a probe
    round is as noisy as a step round.
  A run without either case uses the best of copy and triad and says so. A step whose bytes are under 2 ×
  the machine's LLC is labelled cache-resident.
- GPU (CuPy): work = ``model.roofline.decode_step`` of the step's configuration on the GPU's spec
  (``model.hardware.resolve_gpu_spec``: the datasheet entry, a MIG slice's share of it, or a spec derived
  from the device attributes the run recorded; ``spec_from`` says which, or why there is none), the seed's
  roofline at the spec's bandwidth, in FP16 as the step runs; and beside it the calibrated roofline, an
  estimate and never a bound: the same step at the bandwidth the largest matrix-vector shape achieved in the
  same run (event-timed, ``matvec_table``), which one kernel's bandwidth sets, so a step can beat it. Per
  launch cost from ``analysis.launch.fit_launch`` of the same run: the launch-cost ladder's line a + b·n_args
  at the step's own mean arguments per kernel (``n_args_total`` / ``n_kernels``) where the run has the
  ladder, else the 0-argument slopes (``launch_s``, ``graph_node_s``); ``per_op_from`` says which. The
  compositions are ``model.launch``'s as the hardware works. Eager: ``compose(work, kernels, per launch, g)``
  with g the GPU's own gap per kernel (``analysis.launch.gpu_gap``: ``gpu_gap_s`` of the same run, else the
  documented default; ``gap_from`` says which): overlapped max(work + n·g, n·launch), serial work + n·(launch
  + g), both plus the synchronise round trip that every timed step ends with (as
  ``analysis.launch.predict_spin`` does). Graph: ``compose_graph(work, kernels, per node, graph_launch_s)``,
  one launch then a synchronise, a sum (its two bounds are one figure; the graph launch intercept already
  holds the synchronise; a node's measured cost holds its gap). Beside each, the same step with its kernels
  launched with programmatic dependent launch (``pdl_*``): the gap cut by the same run's ``launch_pdl``
  ratio, or by the share ``model.launch`` assumes (``pdl_from``). Beside them the model's estimate
  (``estimate_*``): ``model.gpu_terms.estimate_step`` with the machine's own terms (``analysis.gpu_terms``:
  the run's matvec line for bandwidth and ramp, its gaps; the sourced defaults where it lacks them,
  ``terms_from`` says which), an estimate, not a bound. The measured step is the pytest-benchmark median of
  its rounds.

``position`` (GPU) says where the measurement falls: 0 at the overlapped bound, 1 at the serial bound, below 0
faster than the overlapped bound, above 1 slower than the serial one. Times are seconds per step (one timed
call = one step; ``statistic`` names the pytest-benchmark statistic, the median of it over runs where
several), bandwidths B/s.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis import ops
from analysis.gpu_terms import machine_terms
from analysis.host import BANDWIDTH_OPS, DRAM_LLC_FACTOR, fit_host
from analysis.launch import fit_launch, fitted, gpu_gap, ladder_cost_s, pdl_gap, usable_cost
from model.gpu_terms import GpuTerms, estimate_step
from model.hardware import GPUSpec, resolve_gpu_spec
from model.launch import compose, compose_graph
from model.llm import MODELS
from model.roofline import DecodeStep, decode_step

#: Columns of ``decode_table``'s frame, one row per machine / device / config / plan / mode / batch / ctx.
DECODE_COLUMNS = (
    "machine_id",
    "device",
    "config",
    "plan",
    "mode",
    "batch",
    "ctx",
    "ops_per_step",  # GPU kernels (n_kernels) or numpy calls (n_calls) per step
    "bytes",  # weights + KV cache read per step, B
    "measured_s",  # host time per step (the statistic below: CPU fastest round, GPU median), s
    "gpu_time_s",  # CUDA-event time per step (GPU only), s
    "work_s",  # bytes at the reference bandwidth (GPU: the roofline step time), s
    "per_op_s",  # cost charged per op: t0 (CPU), launch_s (eager), graph_node_s (graph), s
    "fixed_s",  # charged once per step: synchronise (eager), graph launch + synchronise (graph), 0 (CPU)
    "serial_s",
    "overlapped_s",
    "position",  # (measured − overlapped) / (serial − overlapped)
    "within_bounds",
    "achieved_bytes_per_s",  # bytes / measured_s
    "reference_bytes_per_s",  # GPU: the spec's bandwidth (spec_from); CPU: best measured host bandwidth
    "bandwidth_fraction",  # achieved / reference
    "runs",  # rows (saved runs) the measurement is the median of
    "per_op_from",  # GPU: which fit gave per_op_s (the ladder at the step's arguments, or a 0-argument slope)
    "calibrated_bytes_per_s",  # GPU: the largest matvec shape's event-timed bandwidth, same machine, B/s
    "calibrated_work_s",  # GPU: the roofline step at calibrated_bytes_per_s, s
    "calibrated_serial_s",
    "calibrated_overlapped_s",
    "calibrated_position",  # (measured − calibrated overlapped) / (calibrated serial − calibrated overlapped)
    "statistic",  # the pytest-benchmark statistic of measured_s and of the figures predicted from it
    "predicted_s",  # CPU: the prediction from other cases: weights at the probe case's bandwidth + attention
    #   (its own case) + every other call at its op's cost (numpy_op) + the floor's remainder, s
    "predicted_low_s",  # CPU: its 95 % interval, from each term's run-to-run spread (_prediction_interval)
    "predicted_high_s",
    "measured_over_predicted",  # CPU: measured_s ÷ predicted_s, the headline
    "ratio_low",  # CPU: its 95 % interval
    "ratio_high",
    "predicted_weights_s",  # CPU: (bytes − KV) at the reference bandwidth (bandwidth_from), s
    "predicted_calls_s",  # CPU: every call but attention's at its op's measured fixed cost, s
    "attention_s",  # CPU: the step's attention ops measured alone (their own case), s (NaN: not measured)
    "attention_bytes",  # CPU: the KV cache those ops read, B
    "unpriced_ops",  # CPU: ops of the call list without a measured cost (the prediction is NaN then)
    "floor_s",  # CPU: the overhead floor, the same call list where data costs nothing, s
    "floor_left_s",  # CPU: floor − its calls at their ops' costs: the Python work between the calls, s (≥ 0)
    "bandwidth_from",  # CPU: the case the reference bandwidth comes from: the probe case (the step's
    #   matvecs timed as a case of their own), else host_bandwidth's read (or copy/triad in older runs)
    "read_bytes_per_s",  # CPU: host_bandwidth's read case, B/s (beside the probe case's)
    "check_s",  # CPU: the consistency check, the same rounds' probe in place of the read bandwidth, s
    "op_calls_s",  # CPU: the check's calls outside the probe and attention at their ops' costs, s
    "probe_s",  # CPU: the bandwidth probe's fastest round (the step's own matvecs, same rounds), s
    "probe_rounds",  # CPU: its rounds (= the step's timed rounds, interleaved)
    "probe_bytes_per_s",  # CPU: the probe's bandwidth at its fastest round, B/s
    "probe_median_bytes_per_s",  # CPU: the probe's bandwidth at its median round, B/s (the spread)
    "probe_iqr_fraction",  # CPU: the probe rounds' IQR ÷ their median
    "probe_estimate_s",  # CPU: the probe's fastest round + the floor's work outside the probe's calls, s
    "rounds_paired",  # CPU: step rounds held against the probe round before each (summed over runs)
    "rounds_below",  # CPU: of those, rounds faster than their probe round + the floor's outside work
    "llc_bytes",  # CPU: the machine's last-level cache, B
    "cache_resident",  # CPU: bytes < 2 × LLC: the step may run from cache, not DRAM
    "gap_s",  # GPU: the GPU's own gap per kernel charged (eager: g; graph: the node cost already holds it), s
    "gap_from",  # GPU: where gap_s came from (gpu_gap_s of the same run, or model.launch's default)
    "pdl_overlapped_s",  # GPU: the same step with its kernels launched with PDL, overlapped (graph: the sum)
    "pdl_serial_s",  # GPU: the same, serial
    "pdl_from",  # GPU: what PDL hides of the gap: the same run's launch_pdl ratio, or the stated assumption
    "spec_from",  # GPU: the roofline spec and where it came from (datasheet, MIG share, derived), or why none
    "estimate_s",  # GPU: model.gpu_terms' estimate with this machine's terms (analysis.gpu_terms), s
    "estimate_no_overlap_s",  # GPU: the same with host and GPU one after the other (eager; graph: the same)
    "estimate_ratio",  # GPU: measured ÷ estimate
    "achievable_bytes_per_s",  # GPU: the bandwidth the estimate streams at (the run's, else the source's)
    "ramp_s",  # GPU: the estimate's ramp per kernel, s
    "terms_from",  # GPU: where the estimate's bandwidth, ramp and gaps came from
)

#: Columns of ``matvec_table``'s frame: the GPU matrix-vector kernel alone, per machine and shape.
MATVEC_COLUMNS = (
    "machine_id",
    "rows",
    "cols",
    "bytes",  # per timed call: n_kernels launches, each reading the whole matrix
    "n_kernels",
    "matrix_bytes",  # bytes / n_kernels
    "gpu_time_s",  # per timed call
    "time_per_kernel_s",  # gpu_time_s / n_kernels
    "achieved_bytes_per_s",
    "spec_bytes_per_s",
    "bandwidth_fraction",
)

_GROUP = ["machine_id", "device", "config", "plan", "mode", "batch", "ctx"]
#: The pytest-benchmark statistic each device's step is measured and predicted with (module docstring).
STATISTIC = {"cpu": ops.STATISTIC, "cuda": "median"}


@dataclass(frozen=True)
class _CpuTerms:
    """The figures of the per-op model, per machine: ``analysis.ops``' op costs, attention terms, floors."""

    costs: pd.DataFrame
    attention: pd.DataFrame
    floors: pd.DataFrame
    probes: pd.DataFrame


def decode_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The whole-step rows of ``frame`` (``case == "decode_step"``, ``op == "decode_step"``); may be empty."""
    if frame.empty or "case" not in frame.columns or "op" not in frame.columns:
        return frame.iloc[0:0]
    return frame[(frame["case"] == "decode_step") & (frame["op"] == "decode_step")]


def decode_table(
    frame: pd.DataFrame, host_fits: pd.DataFrame | None = None, launch_fits: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Return ``DECODE_COLUMNS``: every measured decode step of ``frame`` beside its predicted bounds.

    ``host_fits`` / ``launch_fits`` default to ``analysis.host.fit_host(frame)`` /
    ``analysis.launch.fit_launch(frame)``: the per-call costs of the same run(s). A step whose machine lacks
    a fit (or whose GPU spec or configuration is unknown to ``model``) keeps its measurement and has NaN
    predictions. Several runs of one machine are summarised by the median of their medians.
    """
    steps = decode_rows(frame)
    if steps.empty:
        return pd.DataFrame(columns=list(DECODE_COLUMNS))
    steps = steps.copy()
    for column in (
        "mode",
        "gpu_name",
        "n_calls",
        "n_kernels",
        "gpu_time_s",
        "spec_bytes_per_s",
        "n_args_total",
    ):
        if column not in steps.columns:
            steps[column] = np.nan
    if host_fits is None:
        host_fits = fit_host(frame)
    if launch_fits is None:
        launch_fits = fit_launch(frame)
    host = host_fits.set_index("machine_id") if not host_fits.empty else None
    matvec = matvec_table(frame)
    calibrated = calibrated_bandwidths(matvec)
    terms = _CpuTerms(
        costs=ops.op_costs(frame),
        attention=ops.attention_terms(frame),
        floors=ops.floor_table(frame),
        probes=ops.probe_terms(frame),
    )
    rows = []
    for key, group in steps.groupby(_GROUP, sort=True, dropna=False):
        row = dict(zip(_GROUP, key, strict=True))
        row.update(batch=int(row["batch"]), ctx=int(row["ctx"]))
        first = group.iloc[0]
        on_gpu = row["device"] == "cuda"
        n_ops = first["n_kernels"] if on_gpu else first["n_calls"]
        statistic = STATISTIC["cuda" if on_gpu else "cpu"]
        row.update(
            ops_per_step=int(n_ops),
            bytes=float(first["bytes"]),
            measured_s=float(group[statistic].median()),
            gpu_time_s=float(group["gpu_time_s"].median()) if on_gpu else math.nan,
            runs=len(group),
            statistic=statistic,
        )
        if on_gpu:
            row.update(_gpu_prediction(row, first, launch_fits, calibrated.get(row["machine_id"]), matvec))
        else:
            row.update(_cpu_prediction(row, group, host, terms))
        rows.append(_finish(row))
    return pd.DataFrame(rows, columns=list(DECODE_COLUMNS))


def matvec_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Return ``MATVEC_COLUMNS``: the GPU matrix-vector kernel's achieved bandwidth per machine and shape,
    bytes over its CUDA-event time (median over runs), and the fraction of the datasheet bandwidth. A timed
    call holds ``n_kernels`` launches (one in runs older than the K-launch timing); per-kernel figures are
    divided here."""
    if frame.empty or "case" not in frame.columns or "op" not in frame.columns:
        return pd.DataFrame(columns=list(MATVEC_COLUMNS))
    cases = frame[(frame["case"] == "decode_step") & (frame["op"] == "matvec")]
    if cases.empty:
        return pd.DataFrame(columns=list(MATVEC_COLUMNS))
    # One launch per timed call where the run predates the K-launch timing (no n_kernels for the case).
    launches = pd.to_numeric(cases["n_kernels"], errors="coerce") if "n_kernels" in cases.columns else 1
    cases = cases.assign(n_kernels=pd.Series(launches, index=cases.index).fillna(1).astype(int))
    rows = []
    keys = ["machine_id", "rows", "cols", "n_kernels"]
    for (machine_id, n_rows, n_cols, n_kernels), group in cases.groupby(keys, sort=True):
        gpu_time_s = float(group["gpu_time_s"].median())
        n_bytes = float(group["bytes"].iloc[0])
        spec = float(group["spec_bytes_per_s"].iloc[0]) if "spec_bytes_per_s" in group else math.nan
        achieved = n_bytes / gpu_time_s
        rows.append(
            {
                "machine_id": machine_id,
                "rows": int(n_rows),
                "cols": int(n_cols),
                "bytes": n_bytes,
                "n_kernels": int(n_kernels),
                "matrix_bytes": n_bytes / n_kernels,
                "gpu_time_s": gpu_time_s,
                "time_per_kernel_s": gpu_time_s / n_kernels,
                "achieved_bytes_per_s": achieved,
                "spec_bytes_per_s": spec,
                "bandwidth_fraction": achieved / spec,
            }
        )
    return pd.DataFrame(rows, columns=list(MATVEC_COLUMNS))


def calibrated_bandwidths(matvec: pd.DataFrame) -> dict[str, float]:
    """machine_id -> the achieved bandwidth of its largest matrix-vector shape (most bytes per matrix), B/s:
    the calibrated roofline's bandwidth. Machines whose figure is not finite and > 0 are left out."""
    result = {}
    for machine_id, machine in matvec.groupby("machine_id", sort=True):
        largest = machine.loc[machine["matrix_bytes"].idxmax()]
        bandwidth = float(largest["achieved_bytes_per_s"])
        if math.isfinite(bandwidth) and bandwidth > 0:
            result[str(machine_id)] = bandwidth
    return result


#: The columns of a step's row that its per-run CPU prediction reads (``_cpu_run_prediction``).
_RUN_COLUMNS = ("probe_s", "probe_bytes", "probe_op_counts", "llc_bytes", "op_counts", "source", "data")
#: The per-run figures ``_cpu_prediction`` sums over runs (counts of rounds); every other is the median.
_SUMMED = frozenset({"rounds_paired", "rounds_below"})


def _cpu_prediction(
    row: dict[str, object], group: pd.DataFrame, host: pd.DataFrame | None, terms: _CpuTerms
) -> dict[str, object]:
    """CPU predictions (module docstring) of one step, per saved run of it (``group``'s rows), then the
    median over runs of each figure: the lower bound from the same run's probe, the per-op model with its
    interval, and the seed's model."""
    machine_id = str(row["machine_id"])
    fit = host.loc[machine_id] if host is not None and machine_id in host.index else None
    # Plain dicts, and the machine's fit and the step's terms looked up once: a fleet's step has thousands
    # of runs.
    used = [column for column in _RUN_COLUMNS if column in group]
    step = _StepTerms(row, terms, fit)
    runs = group[used].to_dict("records")
    quartiles = _probe_quartiles(runs)
    per_run = [_cpu_run_prediction(row, run, step, quartiles[index]) for index, run in enumerate(runs)]
    per_run = [result for result in per_run if result]
    if not per_run:
        return {}
    result: dict[str, object] = {}
    for key in dict.fromkeys(key for run in per_run for key in run):
        values = [run.get(key) for run in per_run]
        numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if numbers and len(numbers) == len(values):
            result[key] = int(sum(numbers)) if key in _SUMMED else float(np.median(numbers))
        else:
            result[key] = values[0]
    if "predicted_s" in result:
        result.update(_prediction_interval(result, row, per_run, quick=bool(row.get("quick"))))
    return result


def _prediction_interval(
    result: Mapping[str, object], row: Mapping[str, object], per_run: list[dict[str, object]], quick: bool
) -> dict[str, float]:
    """The prediction's 95 % interval and measured ÷ predicted with its own, normal on the log scale.

    Each term of the prediction is a fastest-round figure of another case, whose rounds say nothing of its
    uncertainty (a resample's minimum is never below the sample's); its uncertainty comes from the runs:
    the machine kind's run-to-run spread of that kind of figure (``analysis.verdicts.SPREAD``: read
    bandwidth for the weights, the decode-step case for attention, op costs for the calls, the overhead
    floor for its remainder), each weighted by its share of the prediction, over √(runs); never below the
    spread of the runs' own predictions where there are several. The ratio adds the step's own spread."""
    from analysis.verdicts import SPREAD, SPREAD_MIN_RUNS

    predicted = float(result["predicted_s"])
    if not (math.isfinite(predicted) and predicted > 0):
        return {}
    shares = {
        "bandwidth": _number(result.get("predicted_weights_s")),
        "decode step, CPU": _number(result.get("attention_s")),
        "op cost": _number(result.get("predicted_calls_s")),
        "overhead floor": _number(result.get("floor_left_s")),
    }
    runs = len(per_run)
    sigma = math.sqrt(
        sum((value / predicted * SPREAD[(kind, quick)]) ** 2 for kind, value in shares.items() if value > 0)
    )
    own = [float(run["predicted_s"]) for run in per_run if _number(run.get("predicted_s")) > 0]
    if len(own) >= SPREAD_MIN_RUNS:
        sigma = max(sigma, float(np.std(np.log(own), ddof=1)))
    sigma /= math.sqrt(runs)
    step_sigma = SPREAD[("decode step, CPU", quick)] / math.sqrt(runs)
    ratio = float(row["measured_s"]) / predicted
    ratio_sigma = math.hypot(sigma, step_sigma)
    z = statistics.NormalDist().inv_cdf(0.975)  # scipy.stats.norm.ppf's, without scipy.stats' import
    return {
        "predicted_low_s": predicted * math.exp(-z * sigma),
        "predicted_high_s": predicted * math.exp(z * sigma),
        "measured_over_predicted": ratio,
        "ratio_low": ratio * math.exp(-z * ratio_sigma),
        "ratio_high": ratio * math.exp(z * ratio_sigma),
    }


class _StepTerms:
    """The terms of one step (``row``) that every run of it shares, from ``_CpuTerms``: its machine's op
    costs, its attention and probe cases, its overhead floor per call list. Looked up once per step, not
    once per run: each lookup filters a table, and a fleet's step has thousands of runs (the lookups were
    a third of a first ``report`` of 1,000 quick runs)."""

    def __init__(self, row: Mapping[str, object], terms: _CpuTerms, fit: pd.Series | None) -> None:
        machine_id = str(row["machine_id"])
        self.t0_s = float(fit["t0_s"]) if fit is not None else math.nan
        self.read = _host_read_bandwidth(fit)
        self.bandwidth = _probe_case_bandwidth(row, terms.probes) or self.read
        self.costs = ops.costs_of(terms.costs, machine_id)
        same = (terms.attention["machine_id"] == machine_id) & (terms.attention["plan"] == row["plan"])
        same &= (terms.attention["config"] == row["config"]) & (terms.attention["ctx"] == row["ctx"])
        attention = terms.attention[same]
        self.has_attention = not attention.empty
        if attention.empty:  # no attention case: its KV bytes at the bandwidth, its calls at their costs
            self.attention_s, self.attention_bytes, self._attention_calls = math.nan, 0.0, {}
        else:
            term = attention.iloc[0]
            self.attention_s, self.attention_bytes = float(term["attention_s"]), float(term["bytes"])
            self._attention_calls = term["op_counts"]
        self._floors = terms.floors[
            (terms.floors["machine_id"] == machine_id) & (terms.floors["plan"] == row["plan"])
        ]
        self._floor: dict[object, tuple[float, float]] = {}
        self._calls: dict[object, tuple[float, tuple[str, ...]]] = {}

    @functools.cached_property
    def attention_counts(self) -> dict[str, int]:
        """The attention case's calls; read only for a run that records its own call list."""
        return dict(self._attention_calls)

    def calls(self, counts: Mapping[str, object]) -> tuple[float, tuple[str, ...]]:
        """(seconds, unpriced ops) of the call list ``counts`` less the attention case's calls, at the
        machine's op costs (``ops.price``)."""
        key = _counts_key(counts)
        if key is not None and key in self._calls:
            return self._calls[key]
        priced = ops.price(ops.subtract_counts(dict(counts), self.attention_counts), self.costs)
        if key is not None:
            self._calls[key] = priced
        return priced

    def floor(self, counts: Mapping[str, object]) -> tuple[float, float]:
        """(floor s, the floor's remainder s: never below 0) of the decode_floor cases of the same call
        list; NaN, NaN where there is none."""
        key = _counts_key(counts)
        if key is not None and key in self._floor:
            return self._floor[key]
        floors = self._floors[[floor == dict(counts) for floor in self._floors["op_counts"]]]
        floor_s = float(floors["floor_s"].median()) if not floors.empty else math.nan
        floor_left_s = max(0.0, float(floors["left_out_s"].median())) if not floors.empty else math.nan
        if key is not None:
            self._floor[key] = (floor_s, floor_left_s)
        return floor_s, floor_left_s


def _counts_key(counts: Mapping[str, object]) -> object:
    """A call list as a key of ``_StepTerms``' lookups; None for one that cannot be hashed (looked up each
    time)."""
    try:
        return frozenset(counts.items())
    except TypeError:
        return None


def _probe_quartiles(runs: list[dict[str, object]]) -> list[tuple[float, float, float] | None]:
    """Each run's probe rounds' (``probe_s``) quartiles (q1, median, q3), None where it has none: the runs of
    one round count at once, as ``np.quantile`` of each row (a fleet's step has thousands of runs, and a
    call per run was a third of predicting it)."""
    found: list[tuple[float, float, float] | None] = [None] * len(runs)
    by_count: dict[int, list[int]] = {}
    for index, run in enumerate(runs):
        probe = run.get("probe_s")
        if isinstance(probe, tuple) and probe:
            by_count.setdefault(len(probe), []).append(index)
    for indices in by_count.values():
        rounds = np.array([runs[index]["probe_s"] for index in indices], dtype=float)
        q1, median, q3 = np.quantile(rounds, [0.25, 0.5, 0.75], axis=1).tolist()
        for index, quartiles in zip(indices, zip(q1, median, q3, strict=True), strict=True):
            found[index] = quartiles
    return found


def _cpu_run_prediction(
    row: dict[str, object],
    run: Mapping[str, object],
    step: _StepTerms,
    quartiles: tuple[float, float, float] | None,
) -> dict[str, object]:
    """The CPU predictions of one saved run of the step (``run``: its frame row; ``step``: the terms its
    runs share, its machine's ``fit_host`` figures among them; ``quartiles``: its probe rounds',
    ``_probe_quartiles``): the prediction from other cases, the seed's model, and the consistency check
    and probe estimate from the step's own rounds (module docstring)."""
    t0_s = step.t0_s
    result: dict[str, object] = {"fixed_s": 0.0}
    llc = _number(run.get("llc_bytes"))
    if math.isfinite(llc) and llc > 0:
        result.update(llc_bytes=float(llc), cache_resident=bool(float(row["bytes"]) < DRAM_LLC_FACTOR * llc))
    read, _ = step.read
    bandwidth, bandwidth_from = step.bandwidth
    if not math.isfinite(bandwidth):
        return {}
    work_s = float(row["bytes"]) / bandwidth
    result.update(
        bandwidth_from=bandwidth_from,
        reference_bytes_per_s=bandwidth,
        read_bytes_per_s=read,
        work_s=work_s,
        per_op_s=t0_s,
        serial_s=work_s + row["ops_per_step"] * t0_s,
    )
    probe = run.get("probe_s")
    probe_bytes = _number(run.get("probe_bytes"))
    rounds = None
    if isinstance(probe, tuple) and probe and math.isfinite(probe_bytes) and quartiles is not None:
        rounds = np.asarray(probe, dtype=float)
        q1, median, q3 = quartiles
        result.update(
            probe_s=float(rounds.min()),
            probe_rounds=len(rounds),
            probe_bytes_per_s=probe_bytes / float(rounds.min()),
            probe_median_bytes_per_s=probe_bytes / median,
            probe_iqr_fraction=(q3 - q1) / median,
        )
    counts = run.get("op_counts")
    if not isinstance(counts, Mapping):  # saved before the call list was recorded
        return result
    costs = step.costs
    floor_s, floor_left_s = step.floor(counts)  # the same call list's floor
    left_s = 0.0 if math.isnan(floor_left_s) else floor_left_s
    result.update(floor_s=floor_s, floor_left_s=floor_left_s)
    attention_s, attention_bytes, attention_counts = (
        step.attention_s,
        step.attention_bytes,
        step.attention_counts,
    )
    # The prediction: every term from another case (host_bandwidth's read, numpy_op's costs, the attention
    # case, decode_floor's remainder), none from the step's own rounds.
    weights_s = (float(row["bytes"]) - attention_bytes) / bandwidth
    calls_s, unpriced = step.calls(counts)
    predicted_attention_s = 0.0 if math.isnan(attention_s) else attention_s
    predicted_s = weights_s + predicted_attention_s + calls_s + left_s
    result.update(
        attention_s=attention_s,
        attention_bytes=attention_bytes if step.has_attention else math.nan,
        predicted_weights_s=weights_s,
        predicted_calls_s=calls_s,
        predicted_s=predicted_s,
        unpriced_ops=unpriced,
    )
    if rounds is None:
        return result
    # The consistency check: the same rounds' probe in place of the probe case's bandwidth. The step runs the
    # probe's products and then more, one call after another, so the floor's work outside the probe's calls
    # adds to the probe's time: the probe estimate, held against each step round after its own probe round.
    probe_counts = run.get("probe_op_counts")
    probe_calls_s = ops.price(probe_counts, costs)[0] if isinstance(probe_counts, Mapping) else math.nan
    outside_probe_s = max(0.0, floor_s - probe_calls_s) if math.isfinite(floor_s - probe_calls_s) else 0.0
    result["probe_estimate_s"] = float(rounds.min()) + outside_probe_s
    steps = run.get("data")
    if isinstance(steps, np.ndarray | list | tuple) and len(steps) == len(rounds):
        below = np.asarray(steps, dtype=float) < rounds + outside_probe_s
        result.update(rounds_paired=len(rounds), rounds_below=int(np.count_nonzero(below)))
    outside = dict(counts)
    if isinstance(probe_counts, Mapping):  # the probe's calls are in its time already
        outside = ops.subtract_counts(outside, probe_counts)
    outside = ops.subtract_counts(outside, attention_counts)
    check_calls_s = ops.price(outside, costs)[0]
    scale = (float(row["bytes"]) - attention_bytes) / probe_bytes
    attention_check_s = attention_s if math.isfinite(attention_s) else attention_bytes / bandwidth
    result.update(
        op_calls_s=check_calls_s,
        check_s=scale * float(rounds.min()) + attention_check_s + check_calls_s + left_s,
    )
    return result


def _probe_case_bandwidth(row: Mapping[str, object], probes: pd.DataFrame) -> tuple[float, str] | None:
    """The bandwidth of the step's matrix-vector products timed as a case of their own (``op == "probe"``,
    same machine, plan, model and context): its weight bytes over its fastest round, B/s; None where the
    run has no such case (saved before it)."""
    same = (probes["machine_id"] == row["machine_id"]) & (probes["plan"] == row["plan"])
    same &= (probes["config"] == row["config"]) & (probes["ctx"] == row["ctx"])
    if not same.any():
        return None
    probe = probes[same].iloc[0]
    seconds = float(probe["probe_case_s"])
    if not (math.isfinite(seconds) and seconds > 0):
        return None
    return float(probe["bytes"]) / seconds, "probe case"


def _host_read_bandwidth(fit: pd.Series | None) -> tuple[float, str]:
    """The bandwidth the prediction reads the weights at, B/s, and where it comes from: the machine's
    ``host_bandwidth`` read case (the step's own ``np.matmul`` of a float32 matrix past the LLC,
    ``benchmarks/test_host_bandwidth.py``), else, for a run saved before it, the best of copy and triad."""
    if fit is None:
        return math.nan, ""
    read = _number(fit.get("read_bytes_per_s"))
    if math.isfinite(read) and read > 0:
        return read, "host_bandwidth read"
    others = {op: _number(fit.get(f"{op}_bytes_per_s")) for op in BANDWIDTH_OPS if op != "read"}
    others = {op: value for op, value in others.items() if math.isfinite(value) and value > 0}
    if not others:
        return math.nan, ""
    best = max(others, key=others.__getitem__)
    return others[best], f"host_bandwidth {best} (no read case in the run)"


def _number(value: object) -> float:
    """``value`` as a float; NaN for a missing or non-numeric one (a run saved without the field)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return math.nan
    return float(value)


def _gpu_prediction(
    row: dict[str, object],
    first: pd.Series,
    launch_fits: pd.DataFrame,
    calibrated_bytes_per_s: float | None,
    matvec: pd.DataFrame,
) -> dict[str, object]:
    """GPU bounds: the roofline step of the configuration on the GPU's spec (and at the calibrated bandwidth,
    an estimate, where the run measured one), composed as the hardware works with the launch costs that
    ``fit_launch`` measured on the same machine (``_launch_costs``: eager or graph, as the row's mode) and
    the GPU's own gap per kernel (``_gpu_gaps``); beside them the same step launched with PDL, and the model's
    estimate with the machine's own terms (``_estimate``)."""
    recorded_spec = pd.to_numeric(pd.Series([first["spec_bytes_per_s"]]), errors="coerce").iloc[0]
    result: dict[str, object] = {"reference_bytes_per_s": float(recorded_spec)}
    attributes = first.get("gpu_attributes")
    lookup = resolve_gpu_spec(first["gpu_name"], dict(attributes) if isinstance(attributes, tuple) else None)
    spec = lookup.spec
    result["spec_from"] = f"{spec.name} ({lookup.source})" if spec is not None else lookup.reason
    cfg = MODELS.get(str(row["config"]))
    if spec is None or cfg is None:
        return result
    batch, ctx = int(row["batch"]), int(row["ctx"])
    try:  # the GPU step stores and computes in FP16 (benchmarks/decode_cuda.py)
        step = decode_step(cfg, spec, batch, ctx, dtype="fp16")
        work_s = step.t_step
    except ValueError as error:  # a context past the model's max_position_embeddings
        result["spec_from"] = f"{spec.name} ({lookup.source}), no roofline: {error}"
        return result
    result.update(work_s=work_s, reference_bytes_per_s=spec.mem_bytes_per_s)
    if calibrated_bytes_per_s is not None:
        calibrated_spec = dataclasses.replace(spec, mem_bytes_per_s=calibrated_bytes_per_s)
        result.update(
            calibrated_bytes_per_s=calibrated_bytes_per_s,
            calibrated_work_s=decode_step(cfg, calibrated_spec, batch, ctx, dtype="fp16").t_step,
        )
    costs = _launch_costs(row, first, launch_fits)
    if costs is None:
        return result
    per_op_s, fixed_s, source = costs
    n_kernels = int(row["ops_per_step"])
    graph = row["mode"] == "graph"
    gaps = _gpu_gaps(launch_fits, str(row["machine_id"]), per_op_s, graph)

    def bounds(work: float, gap_s: float) -> tuple[float, float]:
        if graph:  # one launch, then a synchronise: a sum; the graph launch intercept holds the synchronise
            composition = compose_graph(work, n_kernels, gap_s, fixed_s)
            return composition.serial_s, composition.overlapped_s
        composition = compose(work, n_kernels, per_op_s, gap_s)
        return composition.serial_s + fixed_s, composition.overlapped_s + fixed_s

    serial_s, overlapped_s = bounds(work_s, gaps.gap_s)
    pdl_serial_s, pdl_overlapped_s = bounds(work_s, gaps.pdl_gap_s)
    result.update(
        per_op_s=per_op_s,
        fixed_s=fixed_s,
        per_op_from=source,
        serial_s=serial_s,
        overlapped_s=overlapped_s,
        gap_s=gaps.gap_s,
        gap_from=gaps.gap_from,
        pdl_serial_s=pdl_serial_s,
        pdl_overlapped_s=pdl_overlapped_s,
        pdl_from=gaps.pdl_from,
    )
    terms = machine_terms(matvec, launch_fits, str(row["machine_id"]), spec)
    result.update(_estimate(step, spec, terms, row, per_op_s, fixed_s, source))
    if "calibrated_work_s" in result:
        serial_s, overlapped_s = bounds(float(result["calibrated_work_s"]), gaps.gap_s)
        width = serial_s - overlapped_s
        measured = float(row["measured_s"])
        result.update(
            calibrated_serial_s=serial_s,
            calibrated_overlapped_s=overlapped_s,
            calibrated_position=(measured - overlapped_s) / width if width > 0 else math.nan,
        )
    return result


def _estimate(
    step: DecodeStep,
    spec: GPUSpec,
    terms: GpuTerms,
    row: dict[str, object],
    per_op_s: float,
    fixed_s: float,
    per_op_from: str,
) -> dict[str, object]:
    """``model.gpu_terms.estimate_step`` of the measured step with the machine's ``terms``: eager, its
    launches at ``per_op_s`` and the synchronise ``fixed_s`` after them; a graph, its launch + synchronise
    ``fixed_s`` and each node's cost ``per_op_s`` as the node's gap (what the run measured at the step's
    arguments)."""
    graph = row["mode"] == "graph"
    if graph:
        terms = dataclasses.replace(
            terms, graph_gap_s=per_op_s, gap_from=f"graph: the node cost, {per_op_from}"
        )
    host_s = fixed_s if graph else per_op_s
    estimate = estimate_step(
        step, spec, terms, "graph" if graph else "eager", int(row["ops_per_step"]), host_s
    )
    after_s = 0.0 if graph else fixed_s
    return {
        "estimate_s": estimate.step_s + after_s,
        "estimate_no_overlap_s": estimate.no_overlap_s + after_s,
        "estimate_ratio": float(row["measured_s"]) / (estimate.step_s + after_s),
        "achievable_bytes_per_s": spec.mem_bytes_per_s * terms.bandwidth_fraction,
        "ramp_s": terms.ramp_s,
        "terms_from": f"bandwidth: {terms.bandwidth_from}; ramp: {terms.ramp_from}; gap: {terms.gap_from}",
    }


def _launch_costs(
    row: dict[str, object], first: pd.Series, launch_fits: pd.DataFrame
) -> tuple[float, float, str] | None:
    """(cost per launch or graph node, cost once per step, where the first came from), s, for the row's mode;
    None when the run lacks the fits. Per launch: the ladder's line (layer "cupy" eager, "graph" for a
    graph) at the step's mean arguments per kernel where the run has the ladder and the step its
    ``n_args_total``; else the 0-argument slope (``launch_s``, ``graph_node_s``). Once per step: the
    synchronise round trip (eager) or the graph launch + synchronise (graph)."""
    machine_id, n_kernels = str(row["machine_id"]), int(row["ops_per_step"])
    n_args_total = float(pd.to_numeric(pd.Series([first["n_args_total"]]), errors="coerce").iloc[0])
    graph = row["mode"] == "graph"
    layer, slope, fixed = (
        ("graph", "graph_node_s", "graph_launch_s") if graph else ("cupy", "launch_s", "sync_round_trip_s")
    )
    fixed_s = fitted(launch_fits, machine_id, fixed)
    per_op_s = ladder_cost_s(launch_fits, machine_id, layer, n_kernels, n_args_total)
    source = f"ladder ({layer}) at {n_args_total / n_kernels:.1f} args/kernel"
    if not usable_cost(per_op_s):
        per_op_s = fitted(launch_fits, machine_id, slope)
        source = f"{'graph_replay' if graph else 'launch_batch'} slope (0 args)"
    if not (usable_cost(per_op_s) and usable_cost(fixed_s)):
        return None
    return per_op_s, fixed_s, source


def _finish(row: dict[str, object]) -> dict[str, object]:
    """Fill the derived columns: position between the bounds and whether the step lies between them (GPU; the
    CPU has a prediction with its interval, no bounds), achieved bandwidth and its fraction."""
    full = dict.fromkeys(DECODE_COLUMNS, math.nan) | row
    measured = float(full["measured_s"])
    serial, overlapped = float(full["serial_s"]), float(full["overlapped_s"])
    width = serial - overlapped
    full["position"] = (measured - overlapped) / width if width > 0 else math.nan
    full["within_bounds"] = bool(overlapped <= measured <= serial) if math.isfinite(serial) else None
    if full["device"] == "cpu":  # no bound: the seed's serial model and the prediction are estimates
        full["position"] = math.nan
        full["within_bounds"] = None
    full["achieved_bytes_per_s"] = float(full["bytes"]) / measured
    full["bandwidth_fraction"] = full["achieved_bytes_per_s"] / float(full["reference_bytes_per_s"])
    return full


@dataclass(frozen=True)
class _GpuGaps:
    """The GPU's own gap per kernel a GPU step is charged, s, and where it came from; and the same gap once
    its kernels are launched with programmatic dependent launch, and where that came from."""

    gap_s: float
    gap_from: str
    pdl_gap_s: float
    pdl_from: str


def _gpu_gaps(launch_fits: pd.DataFrame, machine_id: str, per_op_s: float, graph: bool) -> _GpuGaps:
    """Eager: g = ``analysis.launch.gpu_gap`` (the same run's ``gpu_gap_s``, else the documented default).
    Graph: the node cost ``per_op_s`` itself, measured on the GPU with its gap in it. With PDL: that gap as
    ``analysis.launch.pdl_gap`` cuts it (the same run's ``launch_pdl`` ratio, else the stated assumption)."""
    if graph:
        gap_s, gap_from = per_op_s, "the graph node cost (per op) holds it"
    else:
        gap_s, gap_from = gpu_gap(launch_fits, machine_id)
    pdl_s, pdl_from = pdl_gap(launch_fits, machine_id, gap_s, "graph" if graph else "eager")
    return _GpuGaps(gap_s, gap_from, pdl_s, pdl_from)
