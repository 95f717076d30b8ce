"""The decode-step family: measured steps held against the roofline-plus-per-call-cost prediction.

Rows of ``case == "decode_step"`` (``benchmarks/test_decode_step.py``). For each measured step, per machine:

- CPU (numpy), from the same run's own figures, every one a fastest round (``min``):
  - the lower bound: the step's bandwidth probe (``probe_s``: its own matrix-vector products over every
    weight matrix, alone, one probe round before each of the step's timed rounds, so the two see the same
    conditions and as many rounds) plus the overhead floor's work outside the probe's calls (``decode_floor``
    less the probe's calls at their ops' measured costs). numpy runs its calls one after another, so the two
    add: nothing overlaps, and a CPU "overlapped" figure would mean nothing. A step measured below it is a
    defect of the bound (``bound_defect``), named with its figures in the summary and the report, never
    drawn as a result;
  - the per-op model, an estimate with its 95 % interval: (bytes − KV) at the probe's bandwidth + the
    attention ops measured alone (``op == "attention"``: batched products of a few query rows are not
    bandwidth-bound) + the other calls outside the probe at their ops' measured fixed costs (``numpy_op``,
    ``analysis.ops``) + the floor's remainder (the Python work between the calls that no op's figure holds);
    the interval is a percentile bootstrap (as scipy's) over the probe's and the attention term's rounds;
  - beside them the seed's model: bytes at that bandwidth + calls × t0 (fitted ``np.add``).
  A run older than the probe has no bound: the seed's model and the per-op model then use the best host
  bandwidth (``analysis.host.fit_host``: copy, triad or read), measured by another case at another time, and
  say so. A step whose bytes are under 2 × the machine's LLC is labelled cache-resident.
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
import math
from collections.abc import Callable, Mapping
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
    "attention_s",  # CPU: the step's attention ops measured alone, s (NaN: not measured)
    "attention_bytes",  # CPU: the KV cache those ops read, B
    "op_calls_s",  # CPU: the calls outside attention at their ops' measured fixed costs, s
    "op_model_s",  # CPU: the per-op model, (bytes − KV) / bandwidth + attention_s + op_calls_s, s
    "unpriced_ops",  # CPU: ops of the call list without a measured cost (the per-op model is NaN then)
    "floor_s",  # CPU: the overhead floor, the same call list where data costs nothing, s
    "floor_left_s",  # CPU: floor − its calls at their ops' costs: the Python work between the calls, s (≥ 0)
    "bandwidth_from",  # CPU: "probe" (the step's own matvecs, same rounds) or "host_bandwidth" (older runs)
    "probe_s",  # CPU: the bandwidth probe's fastest round, s
    "probe_rounds",  # CPU: its rounds (= the step's timed rounds, interleaved)
    "probe_median_bytes_per_s",  # CPU: the probe's bandwidth at its median round, B/s (the spread)
    "probe_iqr_fraction",  # CPU: the probe rounds' IQR ÷ their median
    "bound_s",  # CPU: the lower bound, probe + the floor's work outside the probe's calls, s
    "bound_defect",  # CPU: the step measured below its lower bound (a defect of the bound, never a result)
    "op_model_low_s",  # CPU: the per-op model's 95 % interval (bootstrap of the probe's, attention's rounds)
    "op_model_high_s",
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
    #: (machine_id, plan, config, ctx, source) -> the attention term's raw rounds in that run, s (runs saved
    #: with their samples)
    attention_samples: dict[tuple[str, str, str, object, str], np.ndarray]


def _attention_samples(frame: pd.DataFrame) -> dict[tuple[str, str, str, object, str], np.ndarray]:
    """The raw rounds of each CPU attention term (``decode_step`` cases with ``op == "attention"``) whose
    run saved them, keyed as ``_CpuTerms.attention_samples``: each run's own, so that a run's interval
    resamples the rounds measured beside its own probe."""
    if frame.empty or not {"case", "op", "device", "data", "source"} <= set(frame.columns):
        return {}
    rows = frame[(frame["case"] == "decode_step") & (frame["op"] == "attention") & (frame["device"] == "cpu")]
    result: dict[tuple[str, str, str, object, str], np.ndarray] = {}
    for row in rows.itertuples(index=False):
        if isinstance(row.data, np.ndarray) and len(row.data) >= 2:
            key = (str(row.machine_id), str(row.plan), str(row.config), row.ctx, str(row.source))
            result.setdefault(key, np.asarray(row.data, dtype=float))
    return result


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
        attention_samples=_attention_samples(frame),
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
_RUN_COLUMNS = ("probe_s", "probe_bytes", "probe_op_counts", "llc_bytes", "op_counts", "source")


def _cpu_prediction(
    row: dict[str, object], group: pd.DataFrame, host: pd.DataFrame | None, terms: _CpuTerms
) -> dict[str, object]:
    """CPU predictions (module docstring) of one step, per saved run of it (``group``'s rows), then the
    median over runs of each figure: the lower bound from the same run's probe, the per-op model with its
    interval, and the seed's model."""
    machine_id = str(row["machine_id"])
    fit = host.loc[machine_id] if host is not None and machine_id in host.index else None
    # Plain dicts, and the machine's fit looked up once: a fleet's step has thousands of runs.
    used = [column for column in _RUN_COLUMNS if column in group]
    per_run = [_cpu_run_prediction(row, run, fit, terms) for run in group[used].to_dict("records")]
    per_run = [result for result in per_run if result]
    if not per_run:
        return {}
    result: dict[str, object] = {}
    for key in dict.fromkeys(key for run in per_run for key in run):
        values = [run.get(key) for run in per_run]
        numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if numbers and len(numbers) == len(values):
            result[key] = float(np.median(numbers))
        else:
            result[key] = values[0]
    if "bound_s" in result:
        result["bound_defect"] = bool(float(row["measured_s"]) < float(result["bound_s"]))
    return result


def _cpu_run_prediction(
    row: dict[str, object], run: Mapping[str, object], fit: pd.Series | None, terms: _CpuTerms
) -> dict[str, object]:
    """The CPU predictions of one saved run of the step (``run``: its frame row; ``fit``: its machine's
    ``fit_host`` row, None where the law was not fitted)."""
    machine_id = str(row["machine_id"])
    t0_s = float(fit["t0_s"]) if fit is not None else math.nan
    probe = run.get("probe_s")
    probe_bytes = _number(run.get("probe_bytes"))
    result: dict[str, object] = {"fixed_s": 0.0}
    llc = _number(run.get("llc_bytes"))
    if math.isfinite(llc) and llc > 0:
        result.update(llc_bytes=float(llc), cache_resident=bool(float(row["bytes"]) < DRAM_LLC_FACTOR * llc))
    if isinstance(probe, tuple) and probe and math.isfinite(probe_bytes):
        rounds = np.asarray(probe, dtype=float)
        probe_s = float(rounds.min())
        q1, median, q3 = np.quantile(rounds, [0.25, 0.5, 0.75])
        bandwidth = probe_bytes / probe_s
        result.update(
            bandwidth_from="probe",
            probe_s=probe_s,
            probe_rounds=len(rounds),
            probe_median_bytes_per_s=probe_bytes / median,
            probe_iqr_fraction=(q3 - q1) / median,
        )
    else:  # saved before the probe: the best host bandwidth, measured by another case at another time
        rounds = None
        bandwidths = [float(fit[f"{op}_bytes_per_s"]) for op in BANDWIDTH_OPS] if fit is not None else []
        bandwidths = [value for value in bandwidths if math.isfinite(value) and value > 0]
        if not bandwidths:
            return {}
        bandwidth = max(bandwidths)
        result["bandwidth_from"] = "host_bandwidth"
    work_s = float(row["bytes"]) / bandwidth
    result.update(
        work_s=work_s,
        per_op_s=t0_s,
        serial_s=work_s + row["ops_per_step"] * t0_s,
        reference_bytes_per_s=bandwidth,
    )
    counts = run.get("op_counts")
    if not isinstance(counts, Mapping):  # saved before the call list was recorded
        return result
    costs = ops.costs_of(terms.costs, machine_id)
    floors = terms.floors[(terms.floors["machine_id"] == machine_id) & (terms.floors["plan"] == row["plan"])]
    floors = floors[[floor == dict(counts) for floor in floors["op_counts"]]]  # the same call list
    floor_s = float(floors["floor_s"].median()) if not floors.empty else math.nan
    floor_left_s = max(0.0, float(floors["left_out_s"].median())) if not floors.empty else math.nan
    result.update(floor_s=floor_s, floor_left_s=floor_left_s)
    probe_counts = run.get("probe_op_counts")
    probe_calls_s = ops.price(probe_counts, costs)[0] if isinstance(probe_counts, Mapping) else math.nan
    if rounds is not None:
        # The step runs the probe's products and then more; numpy's calls run one after another, so the
        # floor's work outside the probe's calls adds to the probe's time. Unpriced: the probe alone.
        outside_probe_s = floor_s - probe_calls_s
        result["bound_s"] = result["probe_s"] + (outside_probe_s if outside_probe_s > 0 else 0.0)
    same = (terms.attention["machine_id"] == machine_id) & (terms.attention["plan"] == row["plan"])
    same &= (terms.attention["config"] == row["config"]) & (terms.attention["ctx"] == row["ctx"])
    attention = terms.attention[same]
    outside = dict(counts)
    if isinstance(probe_counts, Mapping):  # the probe's calls are in its time already
        outside = ops.subtract_counts(outside, probe_counts)
    if attention.empty:  # no attention term: its KV bytes at the bandwidth, its calls at their costs
        attention_s, attention_bytes, data_s = math.nan, math.nan, work_s
    else:
        term = attention.iloc[0]
        attention_s, attention_bytes = float(term["attention_s"]), float(term["bytes"])
        data_s = (float(row["bytes"]) - attention_bytes) / bandwidth
        outside = ops.subtract_counts(outside, term["op_counts"])
    op_calls_s, unpriced = ops.price(outside, costs)
    known_attention_s = 0.0 if math.isnan(attention_s) else attention_s
    left_s = 0.0 if math.isnan(floor_left_s) else floor_left_s
    op_model_s = data_s + known_attention_s + op_calls_s + left_s
    result.update(
        attention_s=attention_s,
        attention_bytes=attention_bytes,
        op_calls_s=op_calls_s,
        op_model_s=op_model_s,
        unpriced_ops=unpriced,
    )
    if rounds is not None and math.isfinite(op_model_s):
        scale = (
            float(row["bytes"]) - (0.0 if math.isnan(attention_bytes) else attention_bytes)
        ) / probe_bytes
        key = (machine_id, str(row["plan"]), str(row["config"]), row["ctx"], str(run.get("source")))
        samples = terms.attention_samples.get(key)
        if samples is None:  # the attention term's rounds were not saved: its fastest round, as a constant
            low, high = _model_interval(rounds, scale, None, op_model_s - data_s)
        else:
            low, high = _model_interval(rounds, scale, samples, op_model_s - data_s - known_attention_s)
        # the point is the interval's lower end up to rounding (the fastest resampled round): kept inside
        result.update(op_model_low_s=min(low, op_model_s), op_model_high_s=max(high, op_model_s))
    return result


def _number(value: object) -> float:
    """``value`` as a float; NaN for a missing or non-numeric one (a run saved without the field)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return math.nan
    return float(value)


def _model_interval(
    probe_s: np.ndarray, scale: float, attention_s: np.ndarray | None, rest_s: float
) -> tuple[float, float]:
    """The per-op model's 95 % interval, s: a percentile bootstrap (``_percentile_interval``) of scale × the
    probe's fastest round + the attention term's fastest round (``attention_s``: its rounds, where they were
    saved; None: ``rest_s`` holds its fastest round) + ``rest_s``, resampling the rounds of each. The
    fastest of resampled rounds is never faster than the fastest round, so the interval starts at the
    estimate and says how much slower the fastest round of another set of as many rounds would likely be."""

    def estimate(probe: np.ndarray, *attention: np.ndarray, axis: int = -1) -> np.ndarray:
        total = scale * np.min(probe, axis=axis) + rest_s
        return total + (np.min(attention[0], axis=axis) if attention else 0.0)

    samples = (probe_s,) if attention_s is None else (probe_s, attention_s)
    if len(probe_s) < 2:
        point = float(estimate(*samples))
        return point, point
    return _percentile_interval(samples, estimate)


#: The bootstrap's resamples and seed (``_percentile_interval``).
_RESAMPLES = 2_000
_SEED = 0


def _percentile_interval(
    samples: tuple[np.ndarray, ...], estimate: Callable[..., np.ndarray], level: float = 0.95
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``estimate`` over ``samples``, each resampled on its own: what
    ``scipy.stats.bootstrap(samples, estimate, paired=False, vectorized=True, method="percentile",
    n_resamples=2000, random_state=default_rng(0))`` returns, bit for bit (the same draws, then its
    quantile, Hyndman and Fan's type 7, in its arithmetic; tested against it), without importing
    scipy.stats: 0.8 s of every benchmark session's summary, which shows this interval."""
    rng = np.random.default_rng(_SEED)
    resampled = [sample[rng.integers(0, sample.size, (_RESAMPLES, sample.size))] for sample in samples]
    replicates = np.sort(estimate(*resampled, axis=-1))
    alpha = (1 - level) / 2
    p = np.array([alpha, 1 - alpha])
    position = p * replicates.size + (1 - p)  # 1-based: the type 7 quantile's m = 1 - p
    above = position // 1
    below = above - 1
    weight = position % 1
    weight[below < 0] = 0
    last = replicates.size - 1
    low_high = (1 - weight) * replicates[np.clip(below, 0, last).astype(np.int64)] + weight * replicates[
        np.clip(above, 0, last).astype(np.int64)
    ]
    return float(low_high[0]), float(low_high[1])


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
    """Fill the derived columns: position between the bounds (GPU), whether the step respects its bounds
    (GPU: between them; CPU: at or above its lower bound), achieved bandwidth and its fraction."""
    full = dict.fromkeys(DECODE_COLUMNS, math.nan) | row
    measured = float(full["measured_s"])
    serial, overlapped = float(full["serial_s"]), float(full["overlapped_s"])
    width = serial - overlapped
    full["position"] = (measured - overlapped) / width if width > 0 else math.nan
    full["within_bounds"] = bool(overlapped <= measured <= serial) if math.isfinite(serial) else None
    if full["device"] == "cpu":  # one bound, from below: the seed's serial model is an estimate, not a bound
        bound = float(full["bound_s"])
        full["position"] = math.nan
        full["within_bounds"] = bool(measured >= bound) if math.isfinite(bound) else None
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
