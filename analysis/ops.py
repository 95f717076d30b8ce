"""The numpy ops of the CPU decode step: each op's fixed cost, the step's overhead floor, a call list's price.

From a frame of ``analysis.load``, per ``machine_id`` (``benchmarks/test_numpy_ops.py``,
``benchmarks/test_decode_step.py``):

- ``op_costs``: ``numpy_op`` cases: the fixed cost of one call of each op (``op``, e.g.
  ``"np.max(3d, axis, keepdims, out=3d)"``), the fastest round over its ``n_calls`` calls;
- ``floor_table``: ``decode_floor`` cases: the whole step of a model so small that data costs nothing, its
  fastest round, beside what its call list (``op_counts``) costs priced by ``op_costs`` (``op_sum_s``) and
  by the seed's one t0 per call (``t0_sum_s``); ``left_out_s`` = floor − ``op_sum_s`` is the Python work
  between the calls that no op's figure holds (op bodies, views, reshapes, transposes, slices);
- ``attention_terms``: the decode step's attention ops timed alone at the step's shapes (``decode_step``
  cases with ``op == "attention"``), a measured term of the per-op model in ``analysis.decode``;
- ``price``: a call list's cost at the measured per-op costs.

Every figure is a case's fastest round (``STATISTIC``, the median of that over runs where several), as
``analysis.host`` takes t0 and the bandwidths, so that a prediction built from these figures and the
measurement it is held against use one statistic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

#: The per-case statistic (a pytest-benchmark stats column, seconds per timed call): the fastest round.
STATISTIC = "min"

OP_COST_COLUMNS = (
    "machine_id",
    "op",
    "cost_s",  # fixed cost of one call, s
    "runs",  # rows (saved runs) the cost is the median of
)

FLOOR_COLUMNS = (
    "machine_id",
    "plan",
    "config",
    "ctx",
    "n_calls",
    "op_counts",  # the floor step's call list: op -> count
    "floor_s",  # the floor step measured, s
    "op_sum_s",  # its call list at the measured per-op costs, s (NaN when an op has no measured cost)
    "missing_ops",  # ops of the call list without a measured cost
    "t0_sum_s",  # its call list at the seed's one t0 per call, s
    "left_out_s",  # floor_s − op_sum_s: the Python work between the calls, s
    "runs",
)

ATTENTION_COLUMNS = (
    "machine_id",
    "plan",
    "config",
    "ctx",
    "attention_s",  # the step's attention ops, every layer's, measured, s
    "bytes",  # KV cache they read, B
    "op_counts",  # their calls by op
    "runs",
)
PROBE_COLUMNS = (
    "machine_id",
    "plan",
    "config",
    "ctx",
    "probe_case_s",  # the step's matrix-vector products, every weight matrix's, measured as a case, s
    "bytes",  # the weights they read, B
    "op_counts",  # their calls by op
    "runs",
)


def _rows(frame: pd.DataFrame, case: str, op: str | None = None) -> pd.DataFrame:
    """The CPU rows of ``case`` (and ``op``) in ``frame``; empty when there are none."""
    if frame.empty or not {"case", "device", "op"} <= set(frame.columns):
        return frame.iloc[0:0]
    keep = (frame["case"] == case) & (frame["device"] == "cpu")
    if op is not None:
        keep &= frame["op"] == op
    return frame[keep]


def _is_counts(value: object) -> bool:
    return isinstance(value, Mapping)


def op_costs(frame: pd.DataFrame) -> pd.DataFrame:
    """Return ``OP_COST_COLUMNS``: per machine and op, the fixed cost of one call (fastest round / calls per
    timed call; the median of that over runs)."""
    rows = _rows(frame, "numpy_op")
    if rows.empty:
        return pd.DataFrame(columns=list(OP_COST_COLUMNS))
    per_call = rows[STATISTIC] / rows["n_calls"]
    grouped = per_call.groupby([rows["machine_id"], rows["op"]], sort=True)
    table = pd.DataFrame({"cost_s": grouped.median(), "runs": grouped.size()}).reset_index()
    return table[list(OP_COST_COLUMNS)]


def costs_of(costs: pd.DataFrame, machine_id: str) -> dict[str, float]:
    """``op_costs`` of one machine as a mapping op -> seconds per call (empty when it has none)."""
    mine = costs[costs["machine_id"] == machine_id]
    return dict(zip(mine["op"], mine["cost_s"], strict=True))


def price(op_counts: Mapping[str, int], costs: Mapping[str, float]) -> tuple[float, tuple[str, ...]]:
    """Return (Σ count × cost over ``op_counts``, the ops with calls but no cost in ``costs``), seconds; the
    sum is NaN when an op is missing, never a sum that silently leaves calls out."""
    missing = tuple(sorted(op for op, count in op_counts.items() if count > 0 and op not in costs))
    if missing:
        return math.nan, missing
    return float(sum(count * costs[op] for op, count in op_counts.items() if count > 0)), ()


def subtract_counts(whole: Mapping[str, int], part: Mapping[str, int]) -> dict[str, int]:
    """``whole`` less ``part``, op by op (a call list without some of its calls); raises ``ValueError`` when
    ``part`` holds calls that ``whole`` does not."""
    result = {op: count - part.get(op, 0) for op, count in whole.items()}
    extra = sorted(op for op in part if result.get(op, -1) < 0)
    if extra:
        raise ValueError(f"call list part has calls the whole lacks: {', '.join(extra)}")
    return result


def floor_table(
    frame: pd.DataFrame, t0_by_machine: Mapping[str, float] | None = None, costs: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Return ``FLOOR_COLUMNS``: per machine, plan and floor configuration, the measured floor step (fastest
    round, median over runs) beside its call list priced by ``op_costs`` of the same machine (``costs``:
    ``op_costs(frame)`` where the caller has it) and by the seed's t0 (``t0_by_machine``, e.g.
    ``analysis.host.fit_host``'s ``t0_s``; NaN where absent)."""
    rows = _rows(frame, "decode_floor")
    if rows.empty:
        return pd.DataFrame(columns=list(FLOOR_COLUMNS))
    costs = op_costs(frame) if costs is None else costs
    by_machine = {machine: costs_of(costs, machine) for machine in rows["machine_id"].unique()}
    t0_by_machine = t0_by_machine or {}
    table = []
    for (machine_id, plan, config, ctx), group in rows.groupby(
        ["machine_id", "plan", "config", "ctx"], sort=True
    ):
        counts = group["op_counts"].iloc[0] if "op_counts" in group else None
        counts = dict(counts) if _is_counts(counts) else {}
        floor_s = float(group[STATISTIC].median())
        op_sum_s, missing = price(counts, by_machine[machine_id]) if counts else (math.nan, ())
        n_calls = int(group["n_calls"].iloc[0])
        t0_s = t0_by_machine.get(machine_id, math.nan)
        table.append(
            {
                "machine_id": machine_id,
                "plan": plan,
                "config": config,
                "ctx": int(ctx),
                "n_calls": n_calls,
                "op_counts": counts,
                "floor_s": floor_s,
                "op_sum_s": op_sum_s,
                "missing_ops": missing,
                "t0_sum_s": n_calls * t0_s,
                "left_out_s": floor_s - op_sum_s,
                "runs": len(group),
            }
        )
    return pd.DataFrame(table, columns=list(FLOOR_COLUMNS))


def attention_terms(frame: pd.DataFrame) -> pd.DataFrame:
    """Return ``ATTENTION_COLUMNS``: per machine, plan, configuration and context, the decode step's attention
    ops measured alone (fastest round, median over runs), with the KV bytes and calls they hold."""
    return _part_table(frame, "attention", ATTENTION_COLUMNS)


def probe_terms(frame: pd.DataFrame) -> pd.DataFrame:
    """Return ``PROBE_COLUMNS``: per machine, plan, configuration and context, the decode step's matrix-vector
    products measured alone as a case of their own (``op == "probe"``; fastest round, median over runs), with
    the weight bytes and calls they hold."""
    return _part_table(frame, "probe", PROBE_COLUMNS)


def _part_table(frame: pd.DataFrame, op: str, columns: tuple[str, ...]) -> pd.DataFrame:
    """A part of the decode step timed alone (its ``op`` rows of ``decode_step``), per machine, plan,
    configuration and context; its time in ``columns[4]``."""
    rows = _rows(frame, "decode_step", op=op)
    if rows.empty:
        return pd.DataFrame(columns=list(columns))
    table = []
    for (machine_id, plan, config, ctx), group in rows.groupby(
        ["machine_id", "plan", "config", "ctx"], sort=True
    ):
        counts = group["op_counts"].iloc[0] if "op_counts" in group else None
        table.append(
            {
                "machine_id": machine_id,
                "plan": plan,
                "config": config,
                "ctx": int(ctx),
                columns[4]: float(group[STATISTIC].median()),
                "bytes": float(group["bytes"].iloc[0]),
                "op_counts": dict(counts) if _is_counts(counts) else {},
                "runs": len(group),
            }
        )
    return pd.DataFrame(table, columns=list(columns))
