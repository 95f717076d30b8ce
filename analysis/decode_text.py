"""The decode step's text: its section of the terminal summary and the cells that the report and the figures
print of a measured step (``where``, ``where_calibrated``, ``prediction_cell``, ``ratio_cell``).

``analysis.decode`` computes the steps against their predictions and ``analysis.ops`` the CPU's per-op costs
and overhead floor (frames of SI values); this module, one floor above them, turns those frames into lines,
so that the families import nothing that prints and the summary, the report and the figures say one thing.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd

from analysis.decode import matvec_table
from analysis.fits import Fits, fit_all
from analysis.host import DRAM_LLC_FACTOR
from analysis.ops import floor_table, op_costs
from model.tables import format_table
from model.units import fmt_bytes, fmt_count, fmt_percent, fmt_rate, fmt_time


def summary_section(frame: pd.DataFrame, fitted: Fits | None = None) -> list[str]:
    """The decode-step lines of the terminal summary (with the CPU's per-op costs and overhead floor,
    ``analysis.ops``); empty when ``frame`` holds none of these cases. ``fitted``:
    ``analysis.fits.fit_all(frame)``, fitted here when not given."""
    if fitted is None:
        fitted = fit_all(frame)
    host_fits, table = fitted.host, fitted.decode_steps
    matvec = matvec_table(frame)
    op_machines = set(op_costs(frame)["machine_id"]) | set(floor_table(frame)["machine_id"])
    if table.empty and matvec.empty and not op_machines:
        return []
    t0 = dict(zip(host_fits["machine_id"], host_fits["t0_s"], strict=True))
    lines: list[str] = []
    for machine_id in sorted(set(table["machine_id"]) | op_machines):
        lines.append(f"Decode step (one token) against bytes/bandwidth + per-op cost — {machine_id}")
        for device, rows in table[table["machine_id"] == machine_id].groupby("device", sort=True):
            lines.extend(_cpu_lines(rows) if device == "cpu" else _device_lines(str(device), rows))
        lines.extend(_op_lines(frame, machine_id, t0.get(machine_id, math.nan)))
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


def _op_lines(frame: pd.DataFrame, machine_id: str, t0_s: float) -> list[str]:
    """The per-op lines of one machine's CPU decode summary: the floor step against its two prices, then
    each op's fixed cost with its calls per step; none when the machine has neither case."""
    floors = floor_table(frame, {machine_id: t0_s})
    floors = floors[floors["machine_id"] == machine_id]
    costs = op_costs(frame)
    costs = costs[costs["machine_id"] == machine_id]
    lines: list[str] = []
    if not floors.empty:
        lines.extend(_floor_lines(floors))
    if not costs.empty:
        lines.extend(_cost_lines(costs, floors))
    return lines


def _floor_lines(floors: pd.DataFrame) -> list[str]:
    first = floors.iloc[0]
    lines = [
        f"  overhead floor: the same call list on {first['config']}, ctx {fmt_count(first['ctx'])}, where "
        "data costs nothing (fastest round)",
        "    Σ per-op: each call at its op's measured fixed cost; calls × t0: the seed's one t0 per call",
    ]
    cells = [
        [
            str(row.plan),
            fmt_count(row.n_calls),
            fmt_time(row.floor_s),
            _time(row.op_sum_s),
            _share(row.op_sum_s, row.floor_s),
            _time(row.t0_sum_s),
            _share(row.t0_sum_s, row.floor_s),
            _time(row.left_out_s),
        ]
        for row in floors.itertuples(index=False)
    ]
    headers = ["plan", "numpy calls", "floor", "Σ per-op", "of floor", "calls × t0", "of floor"]
    headers.append("left out (floor − Σ per-op)")
    lines.extend(f"    {line}" for line in format_table(headers, cells).splitlines())
    lines.append(
        "    left out: the Python work between the calls (op bodies, views, reshapes, transposes, slices), "
        "which no op's figure holds"
    )
    for row in floors.itertuples(index=False):
        if row.missing_ops:
            lines.append(f"    {row.plan}: no measured cost for {', '.join(row.missing_ops)}: no Σ per-op")
    return lines


def _cost_lines(costs: pd.DataFrame, floors: pd.DataFrame) -> list[str]:
    plans = [str(plan) for plan in floors["plan"]]
    counts = [row.op_counts for row in floors.itertuples(index=False)]
    lines = ["  fixed cost per numpy call, by op: the step's own calls replayed where data costs nothing"]
    cells = []
    for row in costs.sort_values("cost_s", ascending=False).itertuples(index=False):
        cells.append([str(row.op), fmt_time(row.cost_s), *(fmt_count(c.get(row.op, 0)) for c in counts)])
    headers = ["op", "per call", *(f"calls/step {plan}" for plan in plans)]
    lines.extend(f"    {line}" for line in format_table(headers, cells).splitlines())
    return lines


def where(row: object) -> str:
    """Where a ``decode_table`` row's measurement falls. GPU: "inside (position)" between the bounds (0 = at
    the overlapped one, 1 = at the serial one), else how many times the nearer bound it is ("above: 4.3×
    serial", "below: 0.8× overlapped"). CPU: measured ÷ predicted with its interval ("1.15× predicted
    [1.08–1.23]"). The terminal summary and the report both print this."""
    if getattr(row, "device", None) == "cpu":
        return (
            f"{ratio_cell(row)} predicted" if math.isfinite(row.measured_over_predicted) else "no prediction"
        )
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


def prediction_cell(row: object) -> str:
    """The CPU prediction from other cases and its interval: "7.66 ms [7.33 ms – 8.00 ms]"."""
    if not math.isfinite(row.predicted_s):
        return "n/a"
    if not (math.isfinite(row.predicted_low_s) and math.isfinite(row.predicted_high_s)):
        return fmt_time(row.predicted_s)
    return f"{fmt_time(row.predicted_s)} [{fmt_time(row.predicted_low_s)} – {fmt_time(row.predicted_high_s)}]"


def ratio_cell(row: object) -> str:
    """Measured ÷ predicted (CPU) with its interval: "1.15× [1.08–1.23]"."""
    if not math.isfinite(row.measured_over_predicted):
        return "n/a"
    if not (math.isfinite(row.ratio_low) and math.isfinite(row.ratio_high)):
        return f"{row.measured_over_predicted:.2f}×"
    return f"{row.measured_over_predicted:.2f}× [{row.ratio_low:.2f}–{row.ratio_high:.2f}]"


def rounds_below_text(row: object) -> str:
    """How many step rounds ran faster than their own probe round plus the floor's work outside it."""
    paired = getattr(row, "rounds_paired", math.nan)
    if not (isinstance(paired, int | float) and math.isfinite(paired) and paired > 0):
        return "n/a"
    return f"{int(row.rounds_below)} of {int(paired)}"


def _device_lines(device: str, rows: pd.DataFrame) -> list[str]:
    """One table per device: the measured step beside its bounds and bandwidth."""
    first = rows.iloc[0]
    spec_from = first["spec_from"] if isinstance(first["spec_from"], str) else "no GPU name recorded"
    head = (
        f"  GPU, {first['config']}, batch {int(first['batch'])}, ctx {fmt_count(first['ctx'])} "
        f"(work: the roofline on {spec_from}; per op: the launch-cost ladder at the step's arguments per "
        "kernel where measured, else the 0-argument launch or graph-node slope; g: the GPU's own gap per "
        "kernel. Eager: overlapped max(work + n·g, n·launch), serial work + n·(launch + g), each + a "
        "synchronise; graph: launch + work + n·node, a sum, one figure)"
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
                _time(getattr(row, "gap_s", math.nan)),
                _time(row.overlapped_s),
                _time(row.serial_s),
                where(row),
                _pdl_cell(row),
                fmt_rate(row.achieved_bytes_per_s),
                _fraction(row.bandwidth_fraction),
            ]
        )
    headers = ["plan", "mode", n_ops, "bytes", "measured", "work", "per op", "g", "overlapped", "serial"]
    headers += ["where", "with PDL", "achieved", reference]
    lines = [head, *(f"    {line}" for line in format_table(headers, cells).splitlines())]
    if device == "cuda":
        lines.extend(_gap_lines(rows))
        lines.extend(_calibrated_lines(rows))
        lines.extend(_estimate_lines(rows))
    if rows["work_s"].isna().any():
        lines.append(f"    no roofline: {spec_from}")
    elif rows["serial_s"].isna().any():
        lines.append(
            "    no prediction: the per-op cost and bandwidth come from the launch suite "
            "(test_cuda_launch.py) of the same machine"
        )
    return lines


def _calibrated_lines(rows: pd.DataFrame) -> list[str]:
    """The GPU steps against the calibrated roofline (the largest matvec's measured bandwidth), an estimate,
    never a bound (one kernel's bandwidth, which a step can beat), beside the datasheet table above them;
    none where the run measured no matvec."""
    measured = rows[rows["calibrated_work_s"].notna()]
    if measured.empty:
        return []
    first = measured.iloc[0]
    bandwidth = float(first["calibrated_bytes_per_s"])
    spec = float(first["reference_bytes_per_s"])
    head = (
        f"  the same steps against the calibrated roofline, an estimate, not a bound: work at the largest "
        f"matvec's event-timed bandwidth, {fmt_rate(bandwidth)} ({_fraction(bandwidth / spec)} of the "
        f"datasheet's {fmt_rate(spec)}): one kernel's bandwidth, which a step can beat"
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
    headers = ["plan", "mode", "measured", "work (estimate)", "overlapped", "serial", "where", "per op from"]
    return [head, *(f"    {line}" for line in format_table(headers, cells).splitlines())]


def _estimate_lines(rows: pd.DataFrame) -> list[str]:
    """The GPU steps against the model's estimate with this machine's terms (``analysis.gpu_terms``: the run's
    bandwidth, ramp and gaps where it measured them, else the sourced defaults), and where each term came
    from; none where no step has an estimate."""
    measured = rows[pd.to_numeric(rows["estimate_s"], errors="coerce").notna()]
    if measured.empty:
        return []
    first = measured.iloc[0]
    head = (
        "  the same steps against the model's estimate (model/gpu_terms.py): the bytes at "
        f"{fmt_rate(first['achievable_bytes_per_s'])}, a ramp of {fmt_time(first['ramp_s'])} and the mode's "
        "gap per kernel; eager: the host queueing ahead, graph: a sum; an estimate, not a bound"
    )
    cells = [
        [
            str(row.plan),
            row.mode if isinstance(row.mode, str) else "-",
            fmt_time(row.measured_s),
            fmt_time(row.estimate_s),
            fmt_time(row.estimate_no_overlap_s),
            f"{row.estimate_ratio:.2f}×",
        ]
        for row in measured.itertuples(index=False)
    ]
    headers = ["plan", "mode", "measured", "estimate", "no overlap", "measured ÷ estimate"]
    terms = dict.fromkeys(measured["terms_from"])
    sources = [f"    terms: {text}" for text in terms if isinstance(text, str)]
    return [head, *(f"    {line}" for line in format_table(headers, cells).splitlines()), *sources]


def _gap_lines(rows: pd.DataFrame) -> list[str]:
    """Where each GPU step's gap per kernel and its PDL figure came from (one line per distinct source)."""
    if "gap_from" not in rows.columns:
        return []
    lines = []
    for column, what in (("gap_from", "g"), ("pdl_from", "with PDL: the gap")):
        sources = [source for source in dict.fromkeys(rows[column]) if isinstance(source, str)]
        if sources:
            lines.append(f"    {what}: {'; '.join(sources)}")
    return lines


def _pdl_cell(row: object) -> str:
    """The step launched with PDL: overlapped–serial (eager), one figure (graph)."""
    low, high = getattr(row, "pdl_overlapped_s", math.nan), getattr(row, "pdl_serial_s", math.nan)
    if not (math.isfinite(low) and math.isfinite(high)):
        return "n/a"
    return _time(high) if low == high else f"{_time(low)}–{_time(high)}"


def _cpu_lines(rows: pd.DataFrame) -> list[str]:
    """The CPU step against its prediction from other cases (with its interval, the headline), the seed's
    model beside it, then the consistency check and the probe estimate from the step's own rounds, each so
    named; a cache-resident step labelled."""
    first = rows.iloc[0]
    lines = [
        f"  CPU, {first['config']}, batch {int(first['batch'])}, ctx {fmt_count(first['ctx'])}. Statistic: "
        "every time is its case's fastest round (min)"
    ]
    if rows["serial_s"].isna().all():
        lines.append(
            "    no prediction: the bandwidth comes from the CPU suite (host_bandwidth) of the same machine"
        )
        lines.extend(_cpu_step_cells(rows))
        return lines
    lines.extend(_bandwidth_lines(rows))
    lines.extend(_cpu_step_cells(rows))
    lines += [
        "    predicted = (bytes − KV cache) at the probe case's bandwidth (the step's matrix-vector products "
        "timed as a case of their own; older runs: the read case's) + attention (its own case, at the "
        "step's context) + every other call at its op's measured fixed cost (numpy_op) + the overhead "
        "floor's remainder (the Python between the calls): other cases only, none of the step's rounds",
        "      interval: 95 %, from each term's run-to-run spread on this kind of machine (a fastest round's "
        "rounds say nothing of it), over √runs; the ratio adds the step's own spread",
        "    seed's model = bytes at the same bandwidth + calls × t0 (fitted np.add), as the lecture has it",
        "    consistency check = the same, with the step's own matrix-vector products (the probe, timed in "
        "the same rounds) in place of the probe case: not a prediction",
        "    probe estimate = the probe's fastest round + the floor's work outside its calls; an estimate, "
        "not a bound: held round by round, a step round can beat the probe round before it",
    ]
    if rows["attention_s"].isna().any() and rows["predicted_s"].notna().any():
        lines.append(
            "    attention: not measured in this run: its KV bytes at the bandwidth, its calls at their cost"
        )
    for row in rows.itertuples(index=False):
        if isinstance(row.unpriced_ops, tuple) and row.unpriced_ops:
            lines.append(f"    {row.plan}: no measured cost for {', '.join(row.unpriced_ops)}: no prediction")
    lines.extend(_cache_lines(rows))
    return lines


def _bandwidth_lines(rows: pd.DataFrame) -> list[str]:
    """Where the CPU prediction's bandwidth comes from, and the probe's beside it."""
    lines = []
    for row in rows.itertuples(index=False):
        if not isinstance(row.bandwidth_from, str):
            continue
        probe = (
            f"; the step's own matrix-vector products (probe) {fmt_rate(row.probe_bytes_per_s)} (best), "
            f"{fmt_rate(row.probe_median_bytes_per_s)} (median), IQR {_fraction(row.probe_iqr_fraction)} of "
            f"the median over its {fmt_count(row.probe_rounds)} rounds"
            if math.isfinite(row.probe_bytes_per_s)
            else ""
        )
        lines.append(
            f"    {row.plan}: bandwidth {fmt_rate(row.reference_bytes_per_s)} ({row.bandwidth_from}){probe}"
        )
    return lines


def _cpu_step_cells(rows: pd.DataFrame) -> list[str]:
    """The CPU table: measured, the prediction with its interval and the ratio, the seed's model, the
    consistency check and the probe estimate with the rounds that beat it."""
    cells = [
        [
            str(row.plan),
            fmt_count(row.ops_per_step),
            fmt_bytes(row.bytes),
            fmt_time(row.measured_s),
            prediction_cell(row),
            ratio_cell(row),
            _time(row.serial_s),
            _ratio(row.measured_s, row.serial_s),
            _ratio(row.measured_s, row.check_s),
            _time(row.probe_estimate_s),
            rounds_below_text(row),
            fmt_rate(row.achieved_bytes_per_s),
        ]
        for row in rows.itertuples(index=False)
    ]
    headers = ["plan", "numpy calls", "bytes", "measured", "predicted [95 %]", "measured ÷ predicted"]
    headers += ["seed's model", "÷ seed", "÷ check", "probe estimate", "rounds below it", "achieved"]
    return [f"    {line}" for line in format_table(headers, cells).splitlines()]


def _cache_lines(rows: pd.DataFrame) -> list[str]:
    """A line for a CPU step whose bytes are under 2 × the machine's LLC: it may run from cache."""
    resident = rows[rows["cache_resident"].eq(True)]
    if resident.empty:
        return []
    row = resident.iloc[0]
    return [
        f"    cache-resident: the step reads {fmt_bytes(row['bytes'])}, under {DRAM_LLC_FACTOR} × this "
        f"machine's {fmt_bytes(row['llc_bytes'])} LLC: part of it may come from cache, not DRAM"
    ]


def _fraction(value: float) -> str:
    return "n/a" if not math.isfinite(value) else fmt_percent(value)


def _ratio(measured: float, predicted: float) -> str:
    return f"{measured / predicted:.2f}×" if math.isfinite(predicted) and predicted > 0 else "n/a"


def _time(seconds: float) -> str:
    return "n/a" if not math.isfinite(seconds) else fmt_time(seconds)


def _share(part: float, whole: float) -> str:
    return fmt_percent(part / whole) if math.isfinite(part) and whole > 0 else "n/a"
