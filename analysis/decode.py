"""The decode-step family: measured steps held against the roofline-plus-per-call-cost prediction.

Rows of ``case == "decode_step"`` (``benchmarks/test_decode_step.py``). For each measured step, per machine:

- CPU (numpy), two predictions from the same run's figures:
  - the seed's model: work = bytes / host bandwidth, the highest of the copy, triad and read bandwidths that
    ``analysis.host.fit_host`` measured (runs older than the read case have copy and triad only), plus
    calls × t0, its fitted per-call cost. Serial bound = work + calls × t0, overlapped bound = max(work,
    calls × t0) (numpy cannot overlap its calls, so the serial bound is the one to expect);
  - the per-op model: the step's actual call list (``op_counts``) priced op by op with the fixed costs that
    ``numpy_op`` measured (``analysis.ops``), the attention ops as their own measured term (``op ==
    "attention"``: batched products of a few query rows are not bandwidth-bound) and the remaining bytes at
    the same bandwidth: (bytes − KV) / bandwidth + attention + Σ other calls × their op's cost. It leaves out
    the Python work between the calls (op bodies, views, reshapes, slices), which the overhead floor
    (``decode_floor``: the same call list where data costs nothing) measures whole, shown beside it.
  Statistic: every CPU figure is a case's fastest round (``min``), the step's as well as t0, the bandwidths
  (best round), the per-op costs, the attention term and the floor: predictions built from best-case figures
  are held against the best-case step, never against its median (on a shared machine a median absorbs
  other programs' work, which no model here holds; the run record says when a machine was busy).
- GPU (CuPy): work = ``model.roofline.decode_step`` of the step's configuration on the GPU's spec
  (``model.hardware.resolve_gpu_spec``: the datasheet entry, a MIG slice's share of it, or a spec derived
  from the device attributes the run recorded; ``spec_from`` says which, or why there is none), the seed's
  roofline at the spec's bandwidth, in FP16 as the step runs; and beside it a
  calibrated roofline, the same step at the bandwidth the largest matrix-vector shape achieved in the same
  run (event-timed, ``matvec_table``): HBM streams below its datasheet rate, so the datasheet bound alone
  puts every real step above it. Per-launch cost from ``analysis.launch.fit_launch`` of the same run: the
  launch-cost ladder's line a + b·n_args at the step's own mean arguments per kernel (``n_args_total`` /
  ``n_kernels``) where the run has the ladder, else the 0-argument slopes (``launch_s``, ``graph_node_s``);
  ``per_op_from`` says which. Eager: ``model.launch.compose(work, kernels, per launch)``, both bounds plus
  the synchronise round trip that every timed step ends with (as ``analysis.launch.predict_spin`` does).
  Graph: ``model.launch.compose_graph(work, kernels, per node, graph_launch_s)`` (the graph launch
  intercept already holds the synchronise). The measured step is the
  pytest-benchmark median of its rounds.

``position`` says where the measurement falls: 0 at the overlapped bound, 1 at the serial bound, below 0
faster than the overlapped bound, above 1 slower than the serial one. Times are seconds per step (one timed
call = one step; ``statistic`` names the pytest-benchmark statistic, the median of it over runs where
several), bandwidths B/s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis import ops
from analysis.host import BANDWIDTH_OPS, fit_host
from analysis.launch import fit_launch, fitted, ladder_cost_s, usable_cost
from model.hardware import resolve_gpu_spec
from model.launch import compose, compose_graph
from model.llm import MODELS
from model.roofline import decode_step
from model.tables import format_table
from model.units import fmt_bytes, fmt_count, fmt_percent, fmt_rate, fmt_time

if TYPE_CHECKING:
    from analysis.fits import Fits

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
    "spec_from",  # GPU: the roofline spec and where it came from (datasheet, MIG share, derived), or why none
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
    calibrated = calibrated_bandwidths(matvec_table(frame))
    terms = _CpuTerms(
        costs=ops.op_costs(frame), attention=ops.attention_terms(frame), floors=ops.floor_table(frame)
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
            row.update(_gpu_prediction(row, first, launch_fits, calibrated.get(row["machine_id"])))
        else:
            row.update(_cpu_prediction(row, first, host, terms))
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


def summary_section(frame: pd.DataFrame, fitted: Fits | None = None) -> list[str]:
    """The decode-step lines of the terminal summary (with the CPU's per-op costs and overhead floor,
    ``analysis.ops``); empty when ``frame`` holds none of these cases. ``fitted``:
    ``analysis.fits.fit_all(frame)``, fitted here when not given."""
    if fitted is None:
        from analysis.fits import fit_all  # a cycle at import time: analysis.fits imports this module

        fitted = fit_all(frame)
    host_fits, table = fitted.host, fitted.decode_steps
    matvec = matvec_table(frame)
    op_machines = set(ops.op_costs(frame)["machine_id"]) | set(ops.floor_table(frame)["machine_id"])
    if table.empty and matvec.empty and not op_machines:
        return []
    t0 = dict(zip(host_fits["machine_id"], host_fits["t0_s"], strict=True))
    lines: list[str] = []
    for machine_id in sorted(set(table["machine_id"]) | op_machines):
        lines.append(f"Decode step (one token) against bytes/bandwidth + per-op cost — {machine_id}")
        for device, rows in table[table["machine_id"] == machine_id].groupby("device", sort=True):
            lines.extend(_cpu_lines(rows) if device == "cpu" else _device_lines(str(device), rows))
        lines.extend(ops.summary_lines(frame, machine_id, t0.get(machine_id, math.nan)))
    for machine_id, machine in matvec.groupby("machine_id", sort=True):
        lines.append(
            f"GPU matrix-vector kernel alone (FP16, CUDA-event time over K launches / K) — {machine_id}"
        )
        cells = [
            [
                f"{fmt_count(row.rows)} × {fmt_count(row.cols)}",
                fmt_bytes(row.matrix_bytes),
                fmt_count(row.n_kernels),
                fmt_time(row.time_per_kernel_s),
                fmt_rate(row.achieved_bytes_per_s),
                _fraction(row.bandwidth_fraction),
            ]
            for row in machine.itertuples(index=False)
        ]
        table_text = format_table(["rows × cols", "weights", "K", "time", "achieved", "of spec"], cells)
        lines.extend(f"  {line}" for line in table_text.splitlines())
    return lines


def _cpu_prediction(
    row: dict[str, object], first: pd.Series, host: pd.DataFrame | None, terms: _CpuTerms
) -> dict[str, object]:
    """CPU predictions from the machine's ``fit_host`` row and ``terms`` (module docstring): the seed's
    bounds (bytes / best host bandwidth, calls × t0) and the per-op model, with the floor beside them."""
    machine_id = str(row["machine_id"])
    if host is None or machine_id not in host.index:
        return {}
    fit = host.loc[machine_id]
    bandwidths = [float(fit[f"{op}_bytes_per_s"]) for op in BANDWIDTH_OPS]
    bandwidths = [value for value in bandwidths if math.isfinite(value) and value > 0]
    t0_s = float(fit["t0_s"])
    if not bandwidths or not math.isfinite(t0_s):
        return {}
    bandwidth = max(bandwidths)
    work_s = float(row["bytes"]) / bandwidth
    calls_s = row["ops_per_step"] * t0_s
    result: dict[str, object] = {
        "work_s": work_s,
        "per_op_s": t0_s,
        "fixed_s": 0.0,
        "serial_s": work_s + calls_s,
        "overlapped_s": max(work_s, calls_s),
        "reference_bytes_per_s": bandwidth,
    }
    counts = first.get("op_counts")
    if not isinstance(counts, Mapping):  # saved before the call list was recorded
        return result
    same = (terms.attention["machine_id"] == machine_id) & (terms.attention["plan"] == row["plan"])
    same &= (terms.attention["config"] == row["config"]) & (terms.attention["ctx"] == row["ctx"])
    attention = terms.attention[same]
    if attention.empty:  # no attention term: its KV bytes at the bandwidth, its calls at their costs
        attention_s, attention_bytes, other_s, outside = math.nan, math.nan, work_s, dict(counts)
    else:
        term = attention.iloc[0]
        attention_s, attention_bytes = float(term["attention_s"]), float(term["bytes"])
        other_s = (float(row["bytes"]) - attention_bytes) / bandwidth
        outside = ops.subtract_counts(counts, term["op_counts"])
    op_calls_s, unpriced = ops.price(outside, ops.costs_of(terms.costs, machine_id))
    floors = terms.floors[(terms.floors["machine_id"] == machine_id) & (terms.floors["plan"] == row["plan"])]
    floors = floors[[floor == dict(counts) for floor in floors["op_counts"]]]  # the same call list
    result.update(
        attention_s=attention_s,
        attention_bytes=attention_bytes,
        op_calls_s=op_calls_s,
        op_model_s=other_s + (0.0 if math.isnan(attention_s) else attention_s) + op_calls_s,
        unpriced_ops=unpriced,
        floor_s=float(floors["floor_s"].median()) if not floors.empty else math.nan,
    )
    return result


def _gpu_prediction(
    row: dict[str, object], first: pd.Series, launch_fits: pd.DataFrame, calibrated_bytes_per_s: float | None
) -> dict[str, object]:
    """GPU bounds: the roofline step of the configuration on the GPU's spec (and at the calibrated bandwidth
    where the run measured one), composed with the launch costs that ``fit_launch`` measured on the same
    machine (``_launch_costs``: eager or graph, as the row's mode)."""
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
        work_s = decode_step(cfg, spec, batch, ctx, dtype="fp16").t_step
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

    def bounds(work: float) -> tuple[float, float]:
        if row["mode"] == "graph":  # the graph launch intercept already holds the synchronise
            composition = compose_graph(work, n_kernels, per_op_s, fixed_s)
            return composition.serial_s, composition.overlapped_s
        composition = compose(work, n_kernels, per_op_s)
        return composition.serial_s + fixed_s, composition.overlapped_s + fixed_s

    serial_s, overlapped_s = bounds(work_s)
    result.update(
        per_op_s=per_op_s, fixed_s=fixed_s, per_op_from=source, serial_s=serial_s, overlapped_s=overlapped_s
    )
    if "calibrated_work_s" in result:
        serial_s, overlapped_s = bounds(float(result["calibrated_work_s"]))
        width = serial_s - overlapped_s
        measured = float(row["measured_s"])
        result.update(
            calibrated_serial_s=serial_s,
            calibrated_overlapped_s=overlapped_s,
            calibrated_position=(measured - overlapped_s) / width if width > 0 else math.nan,
        )
    return result


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
    """Fill the derived columns: position between the bounds, achieved bandwidth and its fraction."""
    full = dict.fromkeys(DECODE_COLUMNS, math.nan) | row
    measured = float(full["measured_s"])
    serial, overlapped = float(full["serial_s"]), float(full["overlapped_s"])
    width = serial - overlapped
    full["position"] = (measured - overlapped) / width if width > 0 else math.nan
    full["within_bounds"] = bool(overlapped <= measured <= serial) if math.isfinite(serial) else None
    full["achieved_bytes_per_s"] = float(full["bytes"]) / measured
    full["bandwidth_fraction"] = full["achieved_bytes_per_s"] / float(full["reference_bytes_per_s"])
    return full


def _fraction(value: float) -> str:
    return "n/a" if not math.isfinite(value) else fmt_percent(value)


def where(row: object) -> str:
    """Where a ``decode_table`` row's measurement falls: "inside (position)" between the bounds (0 = at the
    overlapped one, 1 = at the serial one), else how many times the nearer bound it is ("above: 4.3× serial",
    "below: 0.8× overlapped"). The terminal summary and the report both print this."""
    if not (math.isfinite(row.overlapped_s) and math.isfinite(row.serial_s)):
        return "no prediction"
    if row.within_bounds:
        return f"inside ({row.position:.2f})" if math.isfinite(row.position) else "at the bound"
    if row.measured_s > row.serial_s:
        return f"above: {row.measured_s / row.serial_s:.2f}× serial"
    return f"below: {row.measured_s / row.overlapped_s:.2f}× overlapped"


def where_calibrated(row: object) -> str:
    """``where`` for a GPU step of ``decode_table`` against its calibrated roofline's bounds."""
    return where(
        SimpleNamespace(
            measured_s=row.measured_s,
            serial_s=row.calibrated_serial_s,
            overlapped_s=row.calibrated_overlapped_s,
            position=row.calibrated_position,
            within_bounds=bool(row.calibrated_overlapped_s <= row.measured_s <= row.calibrated_serial_s),
        )
    )


def _device_lines(device: str, rows: pd.DataFrame) -> list[str]:
    """One table per device: the measured step beside its bounds and bandwidth."""
    first = rows.iloc[0]
    spec_from = first["spec_from"] if isinstance(first["spec_from"], str) else "no GPU name recorded"
    head = (
        f"  GPU, {first['config']}, batch {int(first['batch'])}, ctx {fmt_count(first['ctx'])} "
        f"(work: the roofline on {spec_from}; per op: the launch-cost ladder at the step's arguments per "
        "kernel where measured, else the 0-argument launch or graph-node slope)"
    )
    n_ops, reference = "kernels", "of spec"
    cells = []
    for row in rows.itertuples(index=False):
        mode = row.mode if isinstance(row.mode, str) else "-"
        cells.append(
            [
                str(row.plan),
                mode,
                fmt_count(row.ops_per_step),
                fmt_bytes(row.bytes),
                fmt_time(row.measured_s),
                _time(row.work_s),
                _time(row.per_op_s),
                _time(row.overlapped_s),
                _time(row.serial_s),
                where(row),
                fmt_rate(row.achieved_bytes_per_s),
                _fraction(row.bandwidth_fraction),
            ]
        )
    headers = ["plan", "mode", n_ops, "bytes", "measured", "work", "per op", "overlapped", "serial"]
    headers += ["where", "achieved", reference]
    lines = [head, *(f"    {line}" for line in format_table(headers, cells).splitlines())]
    if device == "cuda":
        lines.extend(_calibrated_lines(rows))
    if rows["work_s"].isna().any():
        lines.append(f"    no roofline: {spec_from}")
    elif rows["serial_s"].isna().any():
        lines.append(
            "    no prediction: the per-op cost and bandwidth come from the launch suite "
            "(test_cuda_launch.py) of the same machine"
        )
    return lines


def _calibrated_lines(rows: pd.DataFrame) -> list[str]:
    """The GPU steps against the calibrated roofline (the largest matvec's measured bandwidth), beside the
    datasheet table above them; none where the run measured no matvec."""
    measured = rows[rows["calibrated_work_s"].notna()]
    if measured.empty:
        return []
    first = measured.iloc[0]
    bandwidth = float(first["calibrated_bytes_per_s"])
    spec = float(first["reference_bytes_per_s"])
    head = (
        f"  the same steps against the calibrated roofline: work at the largest matvec's event-timed "
        f"bandwidth, {fmt_rate(bandwidth)} ({_fraction(bandwidth / spec)} of the datasheet's "
        f"{fmt_rate(spec)})"
    )
    cells = []
    for row in measured.itertuples(index=False):
        cells.append(
            [
                str(row.plan),
                row.mode if isinstance(row.mode, str) else "-",
                fmt_time(row.measured_s),
                _time(row.calibrated_work_s),
                _time(row.calibrated_overlapped_s),
                _time(row.calibrated_serial_s),
                where_calibrated(row),
                str(row.per_op_from) if isinstance(row.per_op_from, str) else "n/a",
            ]
        )
    headers = ["plan", "mode", "measured", "work", "overlapped", "serial", "where", "per op from"]
    return [head, *(f"    {line}" for line in format_table(headers, cells).splitlines())]


def _cpu_lines(rows: pd.DataFrame) -> list[str]:
    """The CPU step against the seed's model, then against the per-op model with the floor beside it."""
    first = rows.iloc[0]
    lines = [
        f"  CPU, {first['config']}, batch {int(first['batch'])}, ctx {fmt_count(first['ctx'])}: every time "
        "is its case's fastest round (min), as t0 and the host bandwidths are",
        "    seed's model: work = bytes / best measured host bandwidth, + numpy calls × t0 (fitted np.add)",
    ]
    cells = [
        [
            str(row.plan),
            fmt_count(row.ops_per_step),
            fmt_bytes(row.bytes),
            fmt_time(row.measured_s),
            _time(row.work_s),
            _time(row.serial_s - row.work_s),
            _time(row.serial_s),
            _ratio(row.measured_s, row.serial_s),
            fmt_rate(row.achieved_bytes_per_s),
            _fraction(row.bandwidth_fraction),
        ]
        for row in rows.itertuples(index=False)
    ]
    headers = ["plan", "numpy calls", "bytes", "measured", "work", "calls × t0", "seed's model"]
    headers += ["measured ÷ model", "achieved", "of host"]
    lines.extend(f"    {line}" for line in format_table(headers, cells).splitlines())
    if rows["serial_s"].isna().all():
        lines.append(
            "    no prediction: t0 and the bandwidth come from the CPU suite (ufunc_size, host_bandwidth) "
            "of the same machine"
        )
        return lines
    if rows["op_model_s"].isna().all() and rows["unpriced_ops"].isna().all():
        lines.append("    no per-op model: the run holds no call list (op_counts) of the step")
        return lines
    lines.append(
        "    per-op model: (bytes − KV cache) / that bandwidth, + attention (its ops measured alone), + the "
        "other calls × their op's measured fixed cost"
    )
    cells = [
        [
            str(row.plan),
            _time(row.op_model_s - row.op_calls_s - _or_zero(row.attention_s)),
            _time(row.attention_s),
            _rate(row.attention_bytes, row.attention_s),
            _time(row.op_calls_s),
            _time(row.op_model_s),
            _ratio(row.measured_s, row.op_model_s),
            _time(row.floor_s),
        ]
        for row in rows.itertuples(index=False)
    ]
    headers = ["plan", "(bytes − KV) / bw", "attention", "KV / attention", "other calls", "per-op model"]
    headers += ["measured ÷ model", "floor"]
    lines.extend(f"    {line}" for line in format_table(headers, cells).splitlines())
    lines.append(
        "    left out: the Python work between the calls (the floor holds it, below); activations (in cache)"
    )
    if rows["attention_s"].isna().any():
        lines.append(
            "    attention: not measured in this run: its KV bytes at the bandwidth, its calls at their cost"
        )
    for row in rows.itertuples(index=False):
        if isinstance(row.unpriced_ops, tuple) and row.unpriced_ops:
            lines.append(
                f"    {row.plan}: no measured cost for {', '.join(row.unpriced_ops)}: no per-op model"
            )
    return lines


def _or_zero(seconds: float) -> float:
    return seconds if math.isfinite(seconds) else 0.0


def _ratio(measured: float, predicted: float) -> str:
    return f"{measured / predicted:.2f}×" if math.isfinite(predicted) and predicted > 0 else "n/a"


def _rate(n_bytes: float, seconds: float) -> str:
    return fmt_rate(n_bytes / seconds) if math.isfinite(seconds) and seconds > 0 else "n/a"


def _time(seconds: float) -> str:
    return "n/a" if not math.isfinite(seconds) else fmt_time(seconds)
