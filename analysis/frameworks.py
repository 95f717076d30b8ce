"""The dispatch ladder across frameworks: one call's fixed cost, one launch's cost, and the decode step, per
framework, from the ``framework_call``, ``framework_launch`` and ``framework_step`` cases.

- ``fit_calls``: the fixed-overhead law t(n) = t0 + n/r∞ per machine and caller (numpy; PyTorch with one
  intra-op thread and with its default; JAX's jitted add), fitted by ``analysis.host.fit_host`` itself: each
  caller's rows are ``ufunc_size`` rows in all but the caller (the same sizes, calls per timed call, bytes
  and FLOPs), so the caller's law is the one numpy's is, at the same cache limits and with the same
  statistic and intervals. ``t0_ratio`` is the caller's t0 over numpy's on the same machine.
- ``launch_costs``: cost per launch per machine, layer and argument count: the host time of a timed call
  (``median``) over its launches, and the CUDA-event time over them where recorded (torch, Triton, torch's
  graph replay; JAX offers no events); ``fit_torch_graph`` splits torch's graph replay into the graph's
  launch and the cost per node (a line through its two sizes).
- ``step_times``: each decode step's time per framework and compiler, against the same machine's numpy
  step of the same code (CPU) and against the same framework's eager step (the compiler's saving).
- ``demo2_by_layer``: the lecture's demo 2 (``model.launch``'s compositions, the seed's GPU and shapes as
  ``analysis.launch.decode_with_measured`` uses) with each framework layer's measured cost per launch: the
  share of Llama-3.2-1B's step that launches take with PyTorch eager, its CUDA graph, Triton, JAX.
- ``summary_lines``: those tables as text.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis.fit import DEFAULT_LEVEL
from analysis.host import fit_host
from analysis.launch import DEMO2_BATCH, DEMO2_CTX, DEMO2_GPU
from model.launch import FUSED, SEED_GAP_S, UNFUSED, compose, compose_graph
from model.llm import LLAMA32_1B, ModelConfig
from model.roofline import decode_step
from model.units import fmt_percent, fmt_time

if TYPE_CHECKING:  # analysis.fits fits the ladder's law with this module's ``fit_calls``
    from analysis.fits import Fits

CALL_CASE, LAUNCH_CASE, STEP_CASE = "framework_call", "framework_launch", "framework_step"
#: The reference caller of ``t0_ratio`` and the reference step of ``step_times``.
NUMPY = "numpy"
#: Layers timed as a CUDA graph replay (``fit_torch_graph``).
GRAPH_LAYER = "torch_graph"

CALL_COLUMNS = (
    "machine_id",
    "framework",
    "threads",
    "caller",
    "t0_s",
    "t0_low_s",
    "t0_high_s",
    "r_inf_per_s",
    "n_half",
    "cache_points",
    "ci_method",
    "fit_error",
    "t0_ratio",
)
LAUNCH_COLUMNS = ("machine_id", "framework", "layer", "n_args", "n_kernels", "host_s", "gpu_s")
STEP_COLUMNS = (
    "machine_id",
    "device",
    "framework",
    "compiler",
    "config",
    "median_s",
    "min_s",
    "bytes",
    "vs_numpy",
    "vs_eager",
    "predicted_s",
    "vs_predicted",
)
#: The statistic the step ratios compare, by device (``step_times``).
STEP_STATISTIC = {"cpu": "min_s", "cuda": "median_s"}
DEMO2_COLUMNS = ("machine_id", "layer", "config", "plan", "launch_s", "step_s", "launch_share")


def caller(framework: object, threads: object) -> str:
    """A caller's label: the framework, and its intra-op threads where the case set them."""
    if threads is None or (isinstance(threads, float) and math.isnan(threads)):
        return str(framework)
    return f"{framework} ({int(threads)} thread{'s' if int(threads) != 1 else ''})"


def _rows(frame: pd.DataFrame, case: str) -> pd.DataFrame:
    if frame.empty or "case" not in frame:
        return frame.iloc[0:0]
    return frame[frame["case"] == case]


def fit_calls(frame: pd.DataFrame, level: float = DEFAULT_LEVEL, intervals: bool = True) -> pd.DataFrame:
    """The law per machine and caller of the ``framework_call`` rows of ``frame`` (``CALL_COLUMNS``);
    ``intervals`` as ``fit_host``'s."""
    rows = _rows(frame, CALL_CASE)
    rows = rows[rows["device"] == "cpu"] if not rows.empty else rows
    if rows.empty:
        return pd.DataFrame(columns=list(CALL_COLUMNS))
    if "threads" not in rows:
        rows = rows.assign(threads=np.nan)
    fitted = []
    for (framework, threads), group in rows.groupby(["framework", "threads"], dropna=False, sort=True):
        # ufunc_size rows in all but the caller: fit_host selects that case, and fits per machine.
        host = fit_host(group.assign(case="ufunc_size"), level, intervals)
        host = host.assign(framework=framework, threads=threads, caller=caller(framework, threads))
        fitted.append(host)
    table = pd.concat(fitted, ignore_index=True)
    numpy_t0 = table[table["framework"] == NUMPY].set_index("machine_id")["t0_s"]
    table["t0_ratio"] = [
        t0 / numpy_t0[machine] if machine in numpy_t0.index and numpy_t0[machine] > 0 else math.nan
        for machine, t0 in zip(table["machine_id"], table["t0_s"], strict=True)
    ]
    return table[list(CALL_COLUMNS)].sort_values(["machine_id", "t0_s"], ignore_index=True)


def launch_costs(frame: pd.DataFrame) -> pd.DataFrame:
    """Cost per launch of the ``framework_launch`` rows (``LAUNCH_COLUMNS``), median over runs: ``host_s``
    the host-timed call (launches + synchronise) over ``n_kernels``, ``gpu_s`` its CUDA-event time over
    them (NaN where not recorded). ``n_args`` is NaN for layers whose kernel's arguments the caller does not
    set."""
    rows = _rows(frame, LAUNCH_CASE)
    if rows.empty:
        return pd.DataFrame(columns=list(LAUNCH_COLUMNS))
    rows = rows.assign(
        host_s=rows["median"] / rows["n_kernels"],
        gpu_s=rows.get("gpu_time_s", np.nan) / rows["n_kernels"],
        n_args=rows.get("n_args", np.nan),
    )
    keys = ["machine_id", "framework", "layer", "n_args", "n_kernels"]
    table = rows.groupby(keys, dropna=False, sort=True)[["host_s", "gpu_s"]].median().reset_index()
    return table[list(LAUNCH_COLUMNS)]


def fit_torch_graph(costs: pd.DataFrame, machine_id: str) -> tuple[float, float]:
    """(graph launch s, s per node) of torch's graph replay on ``machine_id``: the line t(N) = launch +
    N·node through the host times of its replays of N nodes (``costs`` from ``launch_costs``); NaN, NaN
    with fewer than two sizes."""
    rows = costs[(costs["machine_id"] == machine_id) & (costs["layer"] == GRAPH_LAYER)]
    if rows["n_kernels"].nunique() < 2:
        return math.nan, math.nan
    n = rows["n_kernels"].to_numpy(dtype=float)
    per_call = rows["host_s"].to_numpy(dtype=float) * n
    # Relative errors weighted alike, as every law fit here (np.polyfit's w multiplies the residuals); exact
    # through two sizes, where weighted_least_squares (whose intervals need a spare point) refuses.
    node_s, launch_s = np.polyfit(n, per_call, 1, w=1 / per_call)
    return float(launch_s), float(node_s)


def step_times(frame: pd.DataFrame, decode_steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each ``framework_step`` per machine, device, framework and compiler (``STEP_COLUMNS``; each statistic
    the median over runs): ``vs_numpy`` its time over the numpy step's of the same machine and device,
    ``vs_eager`` over the same framework's eager step (NaN where either is absent). The ratios compare the
    fastest rounds on the CPU (``STEP_STATISTIC``: other work on the machine only adds time, as
    ``analysis.host`` reasons) and the medians on the GPU.

    ``decode_steps`` (``analysis.fits.Fits.decode_steps``): ``predicted_s`` is the prediction of the numpy
    ``decode_step`` of the same machine, device and model in the fused plan (the framework step's
    projections are the fused plan's, ``benchmarks.decode_frameworks``), and ``vs_predicted`` the step over
    it: how far each framework's step is from what numpy's calls, priced one by one, predict."""
    rows = _rows(frame, STEP_CASE)
    if rows.empty:
        return pd.DataFrame(columns=list(STEP_COLUMNS))
    rows = rows.assign(compiler=rows["compiler"].fillna("eager") if "compiler" in rows else "eager")
    keys = ["machine_id", "device", "framework", "compiler", "config"]
    table = (
        rows.groupby(keys, sort=True)
        .agg(median_s=("median", "median"), min_s=("min", "median"), bytes=("bytes", "first"))
        .reset_index()
    )
    seconds = pd.Series(
        [getattr(row, STEP_STATISTIC.get(row.device, "median_s")) for row in table.itertuples(index=False)],
        index=table.index,
    )
    eager = seconds[table["compiler"] == "eager"]
    eager.index = pd.MultiIndex.from_frame(table.loc[eager.index, ["machine_id", "device", "framework"]])
    ratios_numpy, ratios_eager = [], []
    for row, own_s in zip(table.itertuples(index=False), seconds, strict=True):
        ratios_numpy.append(own_s / eager.get((row.machine_id, row.device, NUMPY), math.nan))
        ratios_eager.append(own_s / eager.get((row.machine_id, row.device, row.framework), math.nan))
    models = _predictions(decode_steps)
    predicted_s = [
        models.get((row.machine_id, row.device, row.config), math.nan)
        for row in table.itertuples(index=False)
    ]
    return table.assign(
        vs_numpy=ratios_numpy,
        vs_eager=ratios_eager,
        predicted_s=predicted_s,
        vs_predicted=seconds.to_numpy(dtype=float) / np.asarray(predicted_s, dtype=float),
    )[list(STEP_COLUMNS)]


def _predictions(decode_steps: pd.DataFrame | None) -> dict[tuple[str, str, str], float]:
    """(machine, device, model) → the prediction of its numpy decode step in the fused plan (s)."""
    if decode_steps is None or decode_steps.empty or "predicted_s" not in decode_steps:
        return {}
    fused = decode_steps[(decode_steps["plan"] == FUSED.name) & decode_steps["predicted_s"].notna()]
    return {
        (str(row.machine_id), str(row.device), str(row.config)): float(row.predicted_s)
        for row in fused.itertuples(index=False)
    }


def demo2_by_layer(costs: pd.DataFrame, configs: tuple[ModelConfig, ...] = (LLAMA32_1B,)) -> pd.DataFrame:
    """Demo 2 with each framework layer's measured cost (``DEMO2_COLUMNS``): per machine, layer, model and
    plan, the step's serial composition (``model.launch.compose``, the seed's gap g = 0) of the roofline GPU
    work on ``DEMO2_GPU`` and one launch per kernel at the layer's cost per launch (its smallest argument
    count's host time: the tiny op, or the empty kernel); torch's graph replay as ``compose_graph`` with its
    fitted graph launch and cost per node. ``launch_share`` = 1 − GPU work / step."""
    rows: list[dict[str, object]] = []
    for machine_id in sorted(costs["machine_id"].unique()) if not costs.empty else []:
        mine = costs[costs["machine_id"] == machine_id]
        per_layer: dict[str, float] = {}
        for layer, group in mine[mine["layer"] != GRAPH_LAYER].groupby("layer", sort=True):
            first = group.sort_values("n_args", na_position="first").iloc[0]
            per_layer[str(layer)] = float(first["host_s"])
        graph_launch_s, node_s = fit_torch_graph(costs, machine_id)
        for cfg in configs:
            t_gpu_s = decode_step(cfg, DEMO2_GPU, DEMO2_BATCH, DEMO2_CTX).t_step
            for plan in (UNFUSED, FUSED):
                n_kernels = plan.n_kernels(cfg)
                steps = {
                    layer: (cost, compose(t_gpu_s, n_kernels, cost, SEED_GAP_S, DEMO2_BATCH).serial_s)
                    for layer, cost in per_layer.items()
                    if math.isfinite(cost) and cost >= 0
                }
                if math.isfinite(node_s) and node_s >= 0 and math.isfinite(graph_launch_s):
                    graph = compose_graph(t_gpu_s, n_kernels, node_s, max(graph_launch_s, 0.0), DEMO2_BATCH)
                    steps[GRAPH_LAYER] = (node_s, graph.serial_s)
                rows += [
                    {
                        "machine_id": machine_id,
                        "layer": layer,
                        "config": cfg.name,
                        "plan": plan.name,
                        "launch_s": cost,
                        "step_s": step_s,
                        "launch_share": 1 - t_gpu_s / step_s,
                    }
                    for layer, (cost, step_s) in steps.items()
                ]
    return pd.DataFrame(rows, columns=list(DEMO2_COLUMNS))


def summary_lines(frame: pd.DataFrame, level: float = DEFAULT_LEVEL, fits: Fits | None = None) -> list[str]:
    """The ladder as text: t0 per caller with its interval and ratio to numpy, cost per launch per layer,
    the decode steps per framework (against numpy's predicted step where ``fits`` holds it), and demo 2 per
    layer; nothing for tables without rows. ``fits``: ``analysis.fits.fit_all(frame)``, whose law per caller
    is read (fitted here, at ``level``, when not given)."""
    lines: list[str] = []
    calls = fits.calls if fits is not None else fit_calls(frame, level)
    for machine_id, rows in calls.groupby("machine_id", sort=True):
        lines.append(f"Fixed cost of one call, {machine_id} (t0 of t0 + n/r∞, {level:.0%} interval):")
        for row in rows.itertuples(index=False):
            if row.fit_error:
                lines.append(f"  {row.caller:<22} no fit: {row.fit_error}")
                continue
            lines.append(
                f"  {row.caller:<22} t0 {fmt_time(row.t0_s):>9} [{fmt_time(row.t0_low_s)} – "
                f"{fmt_time(row.t0_high_s)}]   {row.t0_ratio:6.2f} × numpy"
            )
    costs = launch_costs(frame)
    for (machine_id, layer), rows in costs.groupby(["machine_id", "layer"], sort=True):
        points = ", ".join(
            f"{'-' if math.isnan(row.n_args) else int(row.n_args)} args {fmt_time(row.host_s)}"
            for row in rows.itertuples(index=False)
        )
        lines.append(f"Cost per launch, {machine_id}, {layer}: {points}")
    for row in step_times(frame, fits.decode_steps if fits is not None else None).itertuples(index=False):
        model = (
            f"; {row.vs_predicted:.2f} × numpy's predicted step ({fmt_time(row.predicted_s)})"
            if math.isfinite(row.vs_predicted)
            else ""
        )
        lines.append(
            f"Decode step {row.config} on {row.device}, {row.framework} {row.compiler}: fastest "
            f"{fmt_time(row.min_s)}, median {fmt_time(row.median_s)} ({row.vs_numpy:.2f} × numpy's, "
            f"{row.vs_eager:.2f} × eager, by {STEP_STATISTIC.get(row.device, 'median_s')[:-2]}{model})"
        )
    for row in demo2_by_layer(costs).itertuples(index=False):
        lines.append(
            f"Demo 2, {row.machine_id}: with {row.layer} at {fmt_time(row.launch_s)} per launch, "
            f"{row.config} ({row.plan}) loses {fmt_percent(row.launch_share)} of its step to launches"
        )
    return lines


def summary_section(frame: pd.DataFrame, fits: Fits) -> list[str]:
    """The terminal summary's section of the ladder (``analysis.summary.SECTIONS``): ``summary_lines``
    under a heading, empty when ``frame`` holds no framework case."""
    lines = summary_lines(frame, fits=fits)
    if not lines:
        return []
    return ["The dispatch ladder across frameworks (framework_call, framework_step, framework_launch):"] + [
        f"  {line}" for line in lines
    ]
