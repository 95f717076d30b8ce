"""The decode step's text: its section of the terminal summary and the cells that the report and the figures
print of a measured step (``where``, ``where_calibrated``, ``model_cell``, ``bound_defect_lines``).

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
    serial", "below: 0.8× overlapped"). CPU: how many times its lower bound it is ("1.14× the lower bound"),
    or "bound defect: 0.73× the lower bound" where it is below it. The terminal summary and the report both
    print this."""
    if getattr(row, "device", None) == "cpu":
        bound = float(getattr(row, "bound_s", math.nan))
        if not math.isfinite(bound):
            return "no lower bound"
        ratio = row.measured_s / bound
        return f"bound defect: {ratio:.2f}× the lower bound" if ratio < 1 else f"{ratio:.2f}× the lower bound"
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


def model_cell(row: object) -> str:
    """The per-op model and its interval: "13.5 ms [13.5 ms – 13.8 ms]"."""
    if not math.isfinite(row.op_model_s):
        return "n/a"
    if not (math.isfinite(row.op_model_low_s) and math.isfinite(row.op_model_high_s)):
        return fmt_time(row.op_model_s)
    return f"{fmt_time(row.op_model_s)} [{fmt_time(row.op_model_low_s)} – {fmt_time(row.op_model_high_s)}]"


def bound_defect_lines(rows: pd.DataFrame, indent: str = "") -> list[str]:
    """One line per CPU step measured below its lower bound: a defect of the bound (its figures named), never
    a result. The summary and the report print these."""
    if "bound_defect" not in rows.columns:
        return []
    defects = rows[rows["bound_defect"].eq(True)]
    return [
        f"{indent}BOUND DEFECT: {row.machine_id}, {row.config} {row.plan}: measured "
        f"{fmt_time(row.measured_s)} is below its lower bound {fmt_time(row.bound_s)} "
        f"({row.measured_s / row.bound_s:.2f}×; probe "
        f"{fmt_time(row.probe_s)}, floor {_time(row.floor_s)}): the bound is wrong, not the step"
        for row in defects.itertuples(index=False)
    ]


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
    """The CPU step against its lower bound and the per-op model (with its interval), the seed's model beside
    them; any measurement below its bound named as a defect of the bound; a cache-resident step labelled."""
    first = rows.iloc[0]
    lines = [
        f"  CPU, {first['config']}, batch {int(first['batch'])}, ctx {fmt_count(first['ctx'])}. Statistic: "
        "every time is its case's fastest round (min); the step's and its probe's over the same rounds"
    ]
    if rows["serial_s"].isna().all() and rows["bound_s"].isna().all():
        lines.append(
            "    no prediction: the bandwidth comes from the step's probe (runs of today's code) or from the "
            "CPU suite (host_bandwidth) of the same machine"
        )
        lines.extend(_cpu_step_cells(rows))
        return lines
    lines.extend(_bandwidth_lines(rows))
    lines.extend(_cpu_step_cells(rows))
    lines.append(
        "    lower bound = the probe's fastest round + the overhead floor's work outside the probe's calls "
        "(numpy runs its calls one after another: nothing overlaps)"
    )
    if rows["op_model_s"].notna().any():
        lines.append(
            "    per-op model = (bytes − KV cache) / the probe's bandwidth + attention (its ops measured "
            "alone) + the other calls × their op's measured fixed cost + the floor's remainder (the Python "
            "between the calls)"
        )
        lines.append(
            "      interval: 95 %, percentile bootstrap over the probe's and attention's rounds (scipy)"
        )
    elif rows["unpriced_ops"].isna().all():
        lines.append("    no per-op model: the run holds no call list (op_counts) of the step")
    if rows["attention_s"].isna().any() and rows["op_model_s"].notna().any():
        lines.append(
            "    attention: not measured in this run: its KV bytes at the bandwidth, its calls at their cost"
        )
    for row in rows.itertuples(index=False):
        if isinstance(row.unpriced_ops, tuple) and row.unpriced_ops:
            lines.append(
                f"    {row.plan}: no measured cost for {', '.join(row.unpriced_ops)}: no per-op model"
            )
    lines.extend(bound_defect_lines(rows, indent="    "))
    lines.extend(_cache_lines(rows))
    return lines


def _bandwidth_lines(rows: pd.DataFrame) -> list[str]:
    """Where the CPU step's bandwidth comes from, with its spread over the same run's rounds."""
    lines = []
    for row in rows.itertuples(index=False):
        if row.bandwidth_from == "probe":
            lines.append(
                f"    {row.plan}: bandwidth {fmt_rate(row.reference_bytes_per_s)} (best), "
                f"{fmt_rate(row.probe_median_bytes_per_s)} (median), IQR {_fraction(row.probe_iqr_fraction)} "
                f"of the median: the step's own matrix-vector products alone, one round before each of its "
                f"{fmt_count(row.probe_rounds)} rounds"
            )
        elif isinstance(row.bandwidth_from, str):
            lines.append(
                f"    {row.plan}: bandwidth {fmt_rate(row.reference_bytes_per_s)}: the best host_bandwidth "
                "round, another case at another time (a run older than the probe): an estimate, no bound"
            )
    return lines


def _cpu_step_cells(rows: pd.DataFrame) -> list[str]:
    """The CPU table: measured, lower bound, per-op model with its interval, the seed's model."""
    cells = [
        [
            str(row.plan),
            fmt_count(row.ops_per_step),
            fmt_bytes(row.bytes),
            fmt_time(row.measured_s),
            _time(row.bound_s),
            where(row),
            model_cell(row),
            _ratio(row.measured_s, row.op_model_s),
            _time(row.floor_s),
            _time(row.serial_s),
            fmt_rate(row.achieved_bytes_per_s),
        ]
        for row in rows.itertuples(index=False)
    ]
    headers = ["plan", "numpy calls", "bytes", "measured", "lower bound", "measured vs bound"]
    headers += ["per-op model [95 %]", "measured ÷ model", "floor", "seed's model", "achieved"]
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
