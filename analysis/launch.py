"""The GPU launch suite's figures: launch, synchronise and graph costs fitted per machine, and held against
``model.launch``.

Reads the frame of ``analysis.load`` (rows of the cases of ``benchmarks/test_cuda_launch.py``). Timings are
per timed call (pytest-benchmark's stats); a per-kernel figure is per-call time / ``n_kernels``, computed
only by ``per_kernel_s``. Slopes and intercepts come from ``analysis.fit.fit_fixed_overhead`` (t(N) = t0 +
N·slope, weighted by 1/t², bootstrap CIs over points and raw samples where saved); the knee from a fit of
max(L, d + g) to the eager spin kernels, d the duration each spin achieved where the run recorded it; the
launch-cost ladder (``launch_args``) per layer from a weighted least-squares fit of cost per launch =
a + b·n_args (t intervals: five argument counts); the programmatic-dependent-launch case (``launch_pdl``)
as four event-time slopes, the same kernel with and without the attribute, eager and as graph nodes. Every
fit says how many points it used and how many it set aside, and why (``n_points``, ``n_set_aside``,
``note``). All values are SI (seconds).

Compositions are ``model.launch``'s as the hardware works: eager launches with the GPU's own gap per kernel
g (``gpu_gap_s`` of the same run where measured, else ``model.launch.DEFAULT_EAGER_GAP_S``, said in
``gap_from``),
a graph replay as a sum (``compose_graph``), and a graph with programmatic dependent launch, whose node gap
is the graph's × the measured ratio pdl_graph_node_s / pdl_plain_graph_node_s (``pdl_gap``) where the run
has the ``launch_pdl`` case, else cut by the assumed share ``model.launch.DEFAULT_PDL_HIDDEN_SHARE``. The
lecture's assumed rows keep the seed's model (g = 0).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.fit import (
    CI_NONE,
    DEFAULT_LEVEL,
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    bootstrap,
    fit_fixed_overhead,
    weighted_least_squares,
)
from model.hardware import H100, GPUSpec
from model.launch import (
    DEFAULT_EAGER_GAP_S,
    DEFAULT_PDL_HIDDEN_SHARE,
    PLANS,
    SEED_GAP_S,
    Composition,
    compose,
    compose_graph,
    pdl_gap_s,
)
from model.llm import LLAMA31_8B, LLAMA32_1B, ModelConfig
from model.roofline import decode_step

#: The cases of the GPU launch suite (``extra_info["case"]``).
CUDA_CASES = (
    "launch_batch",
    "launch_sync_each",
    "graph_replay",
    "spin",
    "enqueue",
    "sync",
    "launch_args",
    "launch_pdl",
)

#: The launch-cost ladder's layers (``extra_info["layer"]``) -> the timing column whose per-launch value is
#: fitted: the host's time per launch while a blocking kernel holds the GPU ("cupy", "driver"), or the GPU's
#: CUDA-event time per node of a replayed graph ("graph").
LADDER_LAYERS: Mapping[str, str] = {"cupy": "median", "driver": "median", "graph": "gpu_time_s"}

#: Fitted quantity -> what it is and where it comes from; every ``fit_launch`` row names one of these.
QUANTITIES: Mapping[str, str] = {
    "launch_s": "cost per launch (launch_batch slope)",
    "sync_round_trip_s": "synchronise after a batch (launch_batch intercept)",
    "launch_sync_s": "launch + synchronise, per kernel (launch_sync_each slope)",
    "graph_node_s": "cost per graph node (graph_replay slope)",
    "graph_launch_s": "graph launch + synchronise (graph_replay intercept)",
    "enqueue_s": "host enqueue per launch, GPU busy (enqueue eager slope)",
    "graph_enqueue_s": "host graph launch, GPU busy (enqueue graph intercept)",
    "gpu_gap_s": "GPU time per queued empty kernel (enqueue eager, event-time slope)",
    "sync_s": "synchronise an idle stream (sync median)",
    "knee_s": "knee: eager launches hide behind longer kernels (spin eager, max(L, d + g), d achieved)",
    "ladder_cupy_s": "host cost of a RawKernel launch without arguments (launch_args cupy, intercept)",
    "ladder_cupy_per_arg_s": "host cost per kernel argument, RawKernel (launch_args cupy, slope over n_args)",
    "ladder_driver_s": "host cost of cuLaunchKernel without arguments (launch_args driver, intercept)",
    "ladder_driver_per_arg_s": "host cost per kernel argument, cuLaunchKernel (launch_args driver, slope)",
    "ladder_graph_s": "GPU time per graph node without arguments (launch_args graph, intercept)",
    "ladder_graph_per_arg_s": "GPU time per kernel argument of a graph node (launch_args graph, slope)",
    "pdl_gap_s": "GPU time per kernel launched with PDL (launch_pdl eager, event-time slope)",
    "pdl_plain_gap_s": "GPU time per kernel without PDL (launch_pdl eager, event-time slope)",
    "pdl_graph_node_s": "GPU time per graph node captured with PDL (launch_pdl graph, event-time slope)",
    "pdl_plain_graph_node_s": "GPU time per graph node without PDL (launch_pdl graph, event-time slope)",
}

#: Columns of ``fit_launch``'s frame. ``n_points``: points the fit used; ``n_set_aside``: points of its case
#: left out; ``note``: which were set aside and why, and why a quantity has no value (NaN); empty otherwise.
FIT_COLUMNS = (
    "machine_id",
    "quantity",
    "value_s",
    "ci_low_s",
    "ci_high_s",
    "level",
    "ci_method",
    "n_points",
    "n_set_aside",
    "note",
)

#: Columns of ``predict_spin``'s frame.
SPIN_COLUMNS = (
    "machine_id",
    "mode",
    "kernel_ns",
    "achieved_ns",  # the duration the spins achieved, where recorded (else NaN: kernel_ns is used)
    "n_kernels",
    "measured_s",
    "measured_per_kernel_s",
    "gpu_time_s",
    "serial_s",
    "overlapped_s",
    "within_bounds",
    "error_vs_serial",
    "error_vs_overlapped",
    "gap_s",  # the GPU's own gap per kernel charged (eager: g; graph: the fitted graph_node_s), s
    "gap_from",  # where gap_s came from: the same run's fit, or model.launch's documented default
)

#: Columns of ``decode_with_measured``'s frame.
DECODE_COLUMNS = (
    "machine_id",
    "config",
    "plan",
    "n_kernels",
    "t_gpu_s",
    "launch",
    "t_launch_s",
    "t_graph_launch_s",
    "serial_s",
    "overlapped_s",
    "overhead_share",
    "tok_per_s_serial",
    "tok_per_s_overlapped",
    "gap_s",  # the GPU's own gap per kernel (node) charged, s: 0 in the seed's model
    "gap_from",  # where gap_s came from (the same run's fit, model.launch's default, the PDL assumption)
)

#: The lecture's assumed CPU-side cost of one launch (seed, demo 2), s.
ASSUMED_LAUNCH_S = (2e-6, 4e-6, 8e-6)
#: The lecture's demo-2 setting: model shapes, GPU, sequences per step and context length.
DEMO2_CONFIGS = (LLAMA31_8B, LLAMA32_1B)
DEMO2_GPU = H100
DEMO2_BATCH = 1
DEMO2_CTX = 1024

# The linear fits t(N) = t0 + N·slope: quantity of the slope and of the intercept (None: not reported),
# case, mode (None: any) and the timing column (s per call).
_LINEAR_FITS = (
    ("launch_s", "sync_round_trip_s", "launch_batch", None, "median"),
    ("launch_sync_s", None, "launch_sync_each", None, "median"),
    ("graph_node_s", "graph_launch_s", "graph_replay", None, "median"),
    ("enqueue_s", None, "enqueue", "eager", "median"),
    (None, "graph_enqueue_s", "enqueue", "graph", "median"),
    ("gpu_gap_s", None, "enqueue", "eager", "gpu_time_s"),
)
# The PDL case's event-time slopes: quantity, mode, whether launched with the attribute.
_PDL_FITS = (
    ("pdl_gap_s", "eager", True),
    ("pdl_plain_gap_s", "eager", False),
    ("pdl_graph_node_s", "graph", True),
    ("pdl_plain_graph_node_s", "graph", False),
)
#: ``gap_from`` of a gap the same run measured, and of ``model.launch``'s defaults.
GAP_MEASURED = "gpu_gap_s of the same run"
GAP_DEFAULT = "default 2.1 µs (Hazy Research 2025, an H100 on a CUDA stream)"
PDL_MEASURED = "× with / without PDL, launch_pdl of the same run"
PDL_ASSUMED = "× (1 − 0.5): PDL assumed to hide half of g (model.launch)"
GAP_SEED = "the seed's model: g = 0"
_MIN_POINTS_FOR_MEDIAN_CI = 6
_CI_T_INTERVAL = "t interval of a weighted least-squares fit"
_LADDER_TOO_FEW = "needs at least 3 points over at least 2 argument counts"


def per_kernel_s(per_call_s: npt.ArrayLike, n_kernels: npt.ArrayLike) -> np.ndarray:
    """Seconds per kernel from seconds per timed call of ``n_kernels`` kernels: the one place that divides."""
    return np.asarray(per_call_s, dtype=float) / np.asarray(n_kernels, dtype=float)


def cuda_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` that the GPU launch suite measured (empty when there are none)."""
    if frame.empty or "case" not in frame.columns or "device" not in frame.columns:
        return frame.iloc[0:0]
    return frame[(frame["device"] == "cuda") & frame["case"].isin(CUDA_CASES)]


def fit_launch(
    frame: pd.DataFrame, level: float = DEFAULT_LEVEL, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED
) -> pd.DataFrame:
    """Fit the launch-cost figures of every machine in ``frame``: one row per (machine_id, quantity).

    Columns ``FIT_COLUMNS``; quantities are those of ``QUANTITIES`` whose cases were measured. Intervals at
    ``level`` (0–1), by the method ``ci_method`` names: ``analysis.fit``'s seeded (deterministic) bootstrap,
    a t interval where the fixed-overhead law refuses the points (see ``_linear_rows``), or order statistics
    for ``sync_s``. A quantity that cannot be fitted at all (too few points) has NaN values and a ``note``
    saying why.
    """
    rows: list[dict[str, object]] = []
    cuda = cuda_rows(frame)
    for machine_id, machine in cuda.groupby("machine_id", sort=True):
        for slope_name, intercept_name, case, mode, column in _LINEAR_FITS:
            points = _case_rows(machine, case, mode)
            if not points.empty:
                names = (slope_name, intercept_name)
                rows.extend(_linear_rows(machine_id, points, column, names, level, n_boot, seed))
        sync = _case_rows(machine, "sync")
        if not sync.empty:
            rows.append(_median_row(machine_id, sync, level))
        spin = _case_rows(machine, "spin", mode="eager")
        if not spin.empty:
            rows.append(_knee_row(machine_id, spin, level, n_boot, seed))
        ladder = _case_rows(machine, "launch_args")
        for layer in LADDER_LAYERS:
            points = ladder[ladder["layer"] == layer] if "layer" in ladder.columns else ladder.iloc[0:0]
            if not points.empty:
                rows.extend(_ladder_rows(machine_id, layer, points, level))
        pdl = _case_rows(machine, "launch_pdl")
        for quantity, mode, with_pdl in _PDL_FITS:
            points = (
                pdl[(pdl["mode"] == mode) & (pdl["pdl"] == with_pdl)] if "pdl" in pdl.columns else pdl[0:0]
            )
            if not points.empty:
                names = (quantity, None)
                rows.extend(_linear_rows(machine_id, points, "gpu_time_s", names, level, n_boot, seed))
    return pd.DataFrame(rows, columns=list(FIT_COLUMNS))


def fitted(fits: pd.DataFrame, machine_id: str, quantity: str) -> float:
    """The fitted value of ``quantity`` for ``machine_id`` in ``fit_launch``'s frame, s; NaN when absent.

    The rows are found on the columns' arrays (a figure of a few machines asks hundreds of times: selecting
    rows of the frame copied every column each time, a sixth of a GPU figure's cost)."""
    where = np.flatnonzero(
        (fits["machine_id"].to_numpy() == machine_id) & (fits["quantity"].to_numpy() == quantity)
    )
    return float(fits["value_s"].iloc[where[0]]) if where.size else math.nan


def ladder_cost_s(
    fits: pd.DataFrame, machine_id: str, layer: str, n_kernels: int, n_args_total: float
) -> float:
    """Mean cost per launch, s, of ``n_kernels`` launches through ``layer`` carrying ``n_args_total`` kernel
    arguments in all, by the machine's ladder fit: a + b·(n_args_total / n_kernels). NaN where the ladder of
    that layer was not fitted (or ``n_args_total`` is unknown)."""
    base = fitted(fits, machine_id, f"ladder_{layer}_s")
    per_arg = fitted(fits, machine_id, f"ladder_{layer}_per_arg_s")
    if n_kernels < 1 or not all(math.isfinite(value) for value in (base, per_arg, n_args_total)):
        return math.nan
    return base + per_arg * n_args_total / n_kernels


def usable_cost(seconds: float) -> bool:
    """Whether a ``fitted`` cost can enter a composition: finite and >= 0 (NaN = not fitted)."""
    return math.isfinite(seconds) and seconds >= 0


def gpu_gap(fits: pd.DataFrame, machine_id: str) -> tuple[float, str]:
    """The GPU's own gap per kernel boundary for ``machine_id``, s, and where it came from: the same run's
    ``gpu_gap_s`` where fitted (``GAP_MEASURED``), else ``model.launch.DEFAULT_EAGER_GAP_S``
    (``GAP_DEFAULT``), the gap of kernels launched one by one (a graph's nodes have their own:
    ``graph_node_s``)."""
    measured = fitted(fits, machine_id, "gpu_gap_s") if not fits.empty else math.nan
    if usable_cost(measured):
        return measured, GAP_MEASURED
    return DEFAULT_EAGER_GAP_S, GAP_DEFAULT


def pdl_gap(fits: pd.DataFrame, machine_id: str, gap_s: float, mode: str) -> tuple[float, str]:
    """The gap per kernel (``mode`` "eager") or per graph node (``mode`` "graph") once the kernels are
    launched with programmatic dependent launch, s, from the gap ``gap_s`` without it, and where it came from:
    ``gap_s`` × the same run's ``launch_pdl`` ratio with / without the attribute (pdl_gap_s /
    pdl_plain_gap_s eager, pdl_graph_node_s / pdl_plain_graph_node_s graph) where both are fitted
    (``PDL_MEASURED``; a ratio above 1 is kept: PDL then costs), else ``model.launch.pdl_gap_s`` with the
    assumed share ``DEFAULT_PDL_HIDDEN_SHARE`` (``PDL_ASSUMED``)."""
    with_name, plain_name = ("pdl_graph_node_s", "pdl_plain_graph_node_s")
    if mode == "eager":
        with_name, plain_name = ("pdl_gap_s", "pdl_plain_gap_s")
    elif mode != "graph":
        raise ValueError(f"mode must be 'eager' or 'graph', got {mode!r}")
    with_pdl = fitted(fits, machine_id, with_name) if not fits.empty else math.nan
    plain = fitted(fits, machine_id, plain_name) if not fits.empty else math.nan
    if usable_cost(with_pdl) and usable_cost(plain) and plain > 0:
        return gap_s * with_pdl / plain, PDL_MEASURED
    return pdl_gap_s(gap_s, DEFAULT_PDL_HIDDEN_SHARE), PDL_ASSUMED


def predict_spin(frame: pd.DataFrame, fits: pd.DataFrame) -> pd.DataFrame:
    """Hold every ``spin`` row (N kernels of d ns) against ``model.launch``'s serial and overlapped bounds.

    Eager: ``compose(N·d, N, launch_s, g)``, g the GPU's own gap (``gpu_gap``: the same run's ``gpu_gap_s``,
    else the documented default); graph: ``compose_graph(N·d, N, graph_node_s, graph_enqueue_s)``, a sum
    (its two bounds equal: one figure, not a band); both plus the synchronise round trip
    (``sync_round_trip_s``) every timed call ends with. d is the duration the spins achieved (``achieved_ns``)
    where the run recorded it, else the requested one. ``error_vs_*`` = (measured − bound) / bound; a
    measurement ``within_bounds`` lies between overlapped and serial. Rows whose machine lacks a fit they need
    are left out. Columns ``SPIN_COLUMNS``.
    """
    rows: list[dict[str, object]] = []
    spin, _, _ = _usable(_case_rows(cuda_rows(frame), "spin"), positive=("median", "n_kernels"))
    if not spin.empty:
        spin = spin.assign(duration_s=_spin_durations_s(spin))
    for row in spin.itertuples(index=False):
        machine_id, mode = row.machine_id, row.mode
        n_kernels, kernel_ns = int(row.n_kernels), int(row.kernel_ns)
        composition = _spin_composition(fits, machine_id, mode, n_kernels, row.duration_s)
        if composition is None:
            continue
        serial_s, overlapped_s, gap_s, gap_from = composition
        measured_s = float(row.median)
        rows.append(
            {
                "machine_id": machine_id,
                "mode": mode,
                "kernel_ns": kernel_ns,
                "achieved_ns": float(getattr(row, "achieved_ns", math.nan)),
                "n_kernels": n_kernels,
                "measured_s": measured_s,
                "measured_per_kernel_s": float(per_kernel_s(measured_s, n_kernels)),
                "gpu_time_s": float(getattr(row, "gpu_time_s", math.nan)),
                "serial_s": serial_s,
                "overlapped_s": overlapped_s,
                "within_bounds": bool(overlapped_s <= measured_s <= serial_s),
                "error_vs_serial": (measured_s - serial_s) / serial_s,
                "error_vs_overlapped": (measured_s - overlapped_s) / overlapped_s,
                "gap_s": gap_s,
                "gap_from": gap_from,
            }
        )
    return pd.DataFrame(rows, columns=list(SPIN_COLUMNS))


def ladder_by_count(machine: pd.DataFrame) -> pd.DataFrame:
    """The launch-cost ladder of one machine's rows: cost per launch, s, the median over runs; one row per
    layer of ``LADDER_LAYERS`` that was measured (in that order), one column per argument count n measured
    (ascending), NaN where a layer lacks a count; no columns without ``launch_args`` rows."""
    ladder, _, _ = _usable(
        _case_rows(machine, "launch_args"), positive=("n_kernels",), nonnegative=("n_args",)
    )
    if ladder.empty or "layer" not in ladder.columns:
        return pd.DataFrame()
    counts = sorted({int(n) for n in ladder["n_args"]})
    medians = {}
    for layer, column in LADDER_LAYERS.items():
        rows = ladder[ladder["layer"] == layer]
        if rows.empty:
            continue
        cost = pd.Series(per_kernel_s(_numbers(rows, column), rows["n_kernels"]), index=rows.index)
        by_count = cost.groupby(rows["n_args"].astype(int)).median()
        medians[layer] = [float(by_count.get(n, math.nan)) for n in counts]
    return pd.DataFrame.from_dict(medians, orient="index", columns=counts, dtype=float)


def decode_with_measured(
    fits: pd.DataFrame,
    configs: Sequence[ModelConfig] = DEMO2_CONFIGS,
    gpu: GPUSpec = DEMO2_GPU,
    batch: int = DEMO2_BATCH,
    ctx: int = DEMO2_CTX,
    assumed_launch_s: Sequence[float] = ASSUMED_LAUNCH_S,
) -> pd.DataFrame:
    """The lecture's demo 2 (one decode step of each model on ``gpu``: roofline GPU work plus launches, per
    kernel plan) with the assumed launch costs and, per machine in ``fits``, the measured ones.

    ``launch`` says which: ``"assumed"`` (``machine_id`` None; the seed's model, g = 0), ``"measured eager"``
    (``compose`` with the machine's ``launch_s`` and its GPU gap g, ``gpu_gap``), ``"measured graph"``
    (``compose_graph`` with its ``graph_node_s`` and ``graph_enqueue_s``: a sum; ``t_launch_s`` then holds
    the per-node cost) or ``"measured graph + PDL"`` (the same graph with each node's gap as ``pdl_gap``
    gives it: measured where the run has ``launch_pdl``, else assumed). ``gap_s`` / ``gap_from`` say which
    gap each row charged. Columns ``DECODE_COLUMNS``.
    """
    measured = []
    for machine_id in sorted(fits["machine_id"].unique()) if not fits.empty else []:
        launch_s = fitted(fits, machine_id, "launch_s")
        node_s, graph_s = (
            fitted(fits, machine_id, "graph_node_s"),
            fitted(fits, machine_id, "graph_enqueue_s"),
        )
        measured.append((machine_id, launch_s, node_s, graph_s))
    rows: list[dict[str, object]] = []
    for cfg in configs:
        t_gpu_s = decode_step(cfg, gpu, batch, ctx).t_step
        for plan in PLANS.values():
            n_kernels = plan.n_kernels(cfg)

            for t_launch_s in assumed_launch_s:
                composition = compose(t_gpu_s, n_kernels, t_launch_s, SEED_GAP_S, batch)
                rows.append(
                    _decode_row(None, cfg, plan.name, "assumed", t_launch_s, math.nan, composition, GAP_SEED)
                )
            for machine_id, launch_s, node_s, graph_s in measured:
                if usable_cost(launch_s):
                    gap_s, gap_from = gpu_gap(fits, machine_id)
                    composition = compose(t_gpu_s, n_kernels, launch_s, gap_s, batch)
                    rows.append(
                        _decode_row(
                            machine_id,
                            cfg,
                            plan.name,
                            "measured eager",
                            launch_s,
                            math.nan,
                            composition,
                            gap_from,
                        )
                    )
                if usable_cost(node_s) and usable_cost(graph_s):
                    composition = compose_graph(t_gpu_s, n_kernels, node_s, graph_s, batch)
                    rows.append(
                        _decode_row(
                            machine_id,
                            cfg,
                            plan.name,
                            "measured graph",
                            node_s,
                            graph_s,
                            composition,
                            "graph_node_s of the same run",
                        )
                    )
                    pdl_s, pdl_from = pdl_gap(fits, machine_id, node_s, "graph")
                    composition = compose_graph(t_gpu_s, n_kernels, pdl_s, graph_s, batch)
                    rows.append(
                        _decode_row(
                            machine_id,
                            cfg,
                            plan.name,
                            "measured graph + PDL",
                            pdl_s,
                            graph_s,
                            composition,
                            pdl_from,
                        )
                    )
    return pd.DataFrame(rows, columns=list(DECODE_COLUMNS))


def _case_rows(frame: pd.DataFrame, case: str, mode: str | None = None) -> pd.DataFrame:
    """Rows of one case (and ``mode``); ``_usable`` then sets aside those a fit cannot use."""
    rows = frame[frame["case"] == case] if not frame.empty else frame
    if mode is not None:
        rows = rows[rows["mode"] == mode] if "mode" in rows.columns else rows.iloc[0:0]
    return rows


def _numbers(points: pd.DataFrame, column: str) -> np.ndarray:
    """``points[column]`` as floats: NaN where absent or not a number."""
    if column not in points.columns:
        return np.full(len(points), math.nan)
    return pd.to_numeric(points[column], errors="coerce").to_numpy(dtype=float)


def _usable(
    points: pd.DataFrame, positive: Sequence[str] = (), nonnegative: Sequence[str] = ()
) -> tuple[pd.DataFrame, int, str]:
    """The rows of ``points`` whose ``positive`` columns are finite and > 0 and whose ``nonnegative`` ones
    are finite and >= 0; how many rows were set aside; and a note saying which and why ("" when none)."""
    keep = np.ones(len(points), dtype=bool)
    reasons = []
    checks = [(column, "> 0", np.greater) for column in positive]
    checks += [(column, ">= 0", np.greater_equal) for column in nonnegative]
    for column, words, compare in checks:
        values = _numbers(points, column)
        fine = np.isfinite(values) & compare(values, 0)
        if (keep & ~fine).any():
            reasons.append(f"{int((keep & ~fine).sum())} without a finite {column} {words}")
        keep &= fine
    n_aside = int(np.count_nonzero(~keep))
    note = f"{n_aside} of {len(points)} points set aside: {', '.join(reasons)}" if n_aside else ""
    return points[keep], n_aside, note


def _join(*notes: str) -> str:
    return "; ".join(note for note in notes if note)


def _samples(points: pd.DataFrame) -> list[np.ndarray] | None:
    """Every point's raw per-call samples, or None unless every point has them."""
    if "data" not in points.columns:
        return None
    data = points["data"].tolist()
    if not all(isinstance(values, list | tuple | np.ndarray) and len(values) > 0 for values in data):
        return None
    return [np.asarray(values, dtype=float) for values in data]


def _fit_row(
    machine_id: str,
    quantity: str,
    value_s: float,
    ci: tuple[float, float],
    level: float,
    ci_method: str,
    n_points: int,
    note: str = "",
    n_set_aside: int = 0,
) -> dict[str, object]:
    low, high = ci
    return {
        "machine_id": machine_id,
        "quantity": quantity,
        "value_s": value_s,
        "ci_low_s": low,
        "ci_high_s": high,
        "level": level,
        "ci_method": ci_method,
        "n_points": n_points,
        "n_set_aside": n_set_aside,
        "note": note,
    }


def _linear_rows(
    machine_id: str,
    points: pd.DataFrame,
    column: str,
    names: tuple[str | None, str | None],
    level: float,
    n_boot: int,
    seed: int,
) -> list[dict[str, object]]:
    """Fit t(N) = t0 + N·slope to ``points[column]`` (s per call) against ``n_kernels``; rows for the
    quantities ``names`` = (slope's, intercept's), either None when not reported.

    ``analysis.fit.fit_fixed_overhead`` first (bootstrap CIs); it refuses t0 < 0 or slope ≤ 0, which a
    figure near 0 (the intercept of ``launch_sync_each``, the per-node slope of a graph launch) can give, and
    then ``weighted_least_squares`` with the same 1/t² weights gives both, with t intervals. Points without
    a finite ``column`` > 0 or ``n_kernels`` >= 1 are set aside and counted.
    """
    kept, n_aside, aside = _usable(points, positive=(column, "n_kernels"))
    wanted = [name for name in names if name is not None]

    def failed(reason: str) -> list[dict[str, object]]:
        nan = (math.nan, math.nan)
        note = _join(reason, aside)
        return [
            _fit_row(machine_id, name, math.nan, nan, level, CI_NONE, len(kept), note, n_aside)
            for name in wanted
        ]

    if kept.empty:
        return failed("no usable point")
    n = kept["n_kernels"].to_numpy(dtype=float)
    t = kept[column].to_numpy(dtype=float)
    samples = _samples(kept) if column == "median" else None
    try:
        runs = kept["source"].to_numpy(dtype=str) if "source" in kept else None  # intervals resample runs
        fit = fit_fixed_overhead(n, t, samples, runs=runs, level=level, n_boot=n_boot, seed=seed)
        values = (fit.s_per_element, fit.t0_s)
        intervals = (fit.s_per_element_ci, fit.t0_ci)
        method = fit.ci_method
    except ValueError:
        try:
            linear = weighted_least_squares(np.column_stack([np.ones_like(n), n]), t, 1 / t**2, level)
        except ValueError as error:
            return failed(str(error))
        values = (linear.coef[1], linear.coef[0])
        intervals = (linear.ci[1], linear.ci[0])
        method = _CI_T_INTERVAL
    return [
        _fit_row(
            machine_id, name, value, (interval.low, interval.high), level, method, n.size, aside, n_aside
        )
        for name, value, interval in zip(names, values, intervals, strict=True)
        if name is not None
    ]


def _ladder_rows(machine_id: str, layer: str, points: pd.DataFrame, level: float) -> list[dict[str, object]]:
    """``ladder_<layer>_s`` and ``ladder_<layer>_per_arg_s``: cost per launch = a + b·n_args fitted to the
    layer's points (per launch: the ``LADDER_LAYERS`` column / ``n_kernels``), weighted by 1/cost², with t
    intervals. A negative slope is kept as fitted: it says the argument count costs nothing measurable."""
    column = LADDER_LAYERS[layer]
    kept, n_aside, aside = _usable(points, positive=(column, "n_kernels"), nonnegative=("n_args",))
    names = (f"ladder_{layer}_s", f"ladder_{layer}_per_arg_s")
    x = kept["n_args"].to_numpy(dtype=float)
    cost = per_kernel_s(kept[column].to_numpy(dtype=float), kept["n_kernels"].to_numpy(dtype=float))
    if x.size < 3 or np.unique(x).size < 2:
        note = _join(_LADDER_TOO_FEW, aside)
        nan = (math.nan, math.nan)
        return [
            _fit_row(machine_id, name, math.nan, nan, level, CI_NONE, x.size, note, n_aside) for name in names
        ]
    linear = weighted_least_squares(np.column_stack([np.ones_like(x), x]), cost, 1 / cost**2, level)
    return [
        _fit_row(
            machine_id, name, float(value), (ci.low, ci.high), level, _CI_T_INTERVAL, x.size, aside, n_aside
        )
        for name, value, ci in zip(names, linear.coef, linear.ci, strict=True)
    ]


def _median_row(machine_id: str, points: pd.DataFrame, level: float) -> dict[str, object]:
    """``sync_s``: the median of every raw sample of the machine's ``sync`` rows (their medians when no raw
    samples were saved), with the distribution-free order-statistic interval of a median."""
    points, n_aside, aside = _usable(points, positive=("median",))
    if points.empty:
        nan = (math.nan, math.nan)
        return _fit_row(machine_id, "sync_s", math.nan, nan, level, CI_NONE, 0, aside, n_aside)
    samples = _samples(points)
    values = np.sort(
        np.concatenate(samples) if samples is not None else points["median"].to_numpy(dtype=float)
    )
    method = "order statistics of raw samples" if samples is not None else "order statistics of medians"
    count = values.size
    if count < _MIN_POINTS_FOR_MEDIAN_CI:
        return _fit_row(
            machine_id,
            "sync_s",
            float(np.median(values)),
            (math.nan, math.nan),
            level,
            CI_NONE,
            count,
            aside,
            n_aside,
        )
    # Ranks j < k with P(X(j) ≤ median ≤ X(k)) ≈ level, from the normal approximation of Binomial(n, ½).
    half_width = statistics.NormalDist().inv_cdf(0.5 + level / 2) * math.sqrt(count) / 2
    low_rank = max(1, math.floor(count / 2 - half_width))
    high_rank = min(count, math.ceil(count / 2 + half_width + 1))
    ci = (float(values[low_rank - 1]), float(values[high_rank - 1]))
    return _fit_row(
        machine_id, "sync_s", float(np.median(values)), ci, level, method, len(points), aside, n_aside
    )


def knee_parameters(durations_s: np.ndarray, per_kernel: np.ndarray) -> np.ndarray:
    """Fit per-kernel time = max(L, d + g) to each row of ``durations_s``, ``per_kernel`` (s): (B, m) → (B, 3)

    Returns (L, g, knee) per row, knee = L − g: the launch cost L is the flat part (launches slower than
    kernels), g the gap the GPU adds to each kernel of duration d once kernels are the slower side. Least
    squares in relative error over every split of the sorted points into a flat and a rising part (each
    non-empty); the knee is NaN when a row has fewer than two distinct durations.
    """
    order = np.argsort(durations_s, axis=1, kind="stable")
    x = np.take_along_axis(durations_s, order, axis=1)
    y = np.take_along_axis(per_kernel, order, axis=1)
    n_rows, n_points = x.shape
    best = np.full((n_rows, 3), math.nan)
    best_rss = np.full(n_rows, math.inf)
    for split in range(1, n_points):
        flat = y[:, :split].mean(axis=1)
        gap = (y[:, split:] - x[:, split:]).mean(axis=1)
        predicted = np.maximum(flat[:, None], x + gap[:, None])
        rss = (((y - predicted) / y) ** 2).sum(axis=1)
        distinct = x[:, split] > x[:, split - 1]  # a split inside equal durations is no split
        better = distinct & (rss < best_rss)
        best_rss = np.where(better, rss, best_rss)
        best[better] = np.column_stack([flat, gap, flat - gap])[better]
    return best


def _knee_row(
    machine_id: str, points: pd.DataFrame, level: float, n_boot: int, seed: int
) -> dict[str, object]:
    """``knee_s`` from the eager ``spin`` rows, with ``analysis.fit``'s bootstrap CI; each row's duration is
    the one its spins achieved where recorded (``_spin_durations_s``)."""
    points, n_aside, aside = _usable(points, positive=("median", "n_kernels"), nonnegative=("kernel_ns",))
    n_kernels = points["n_kernels"].to_numpy(dtype=float)
    durations_s = _spin_durations_s(points)
    per_kernel = per_kernel_s(points["median"].to_numpy(dtype=float), n_kernels)
    n_points = len(points)
    if np.unique(durations_s).size < 2:
        note = _join("needs spin rows of at least two kernel durations", aside)
        nan = (math.nan, math.nan)
        return _fit_row(machine_id, "knee_s", math.nan, nan, level, CI_NONE, n_points, note, n_aside)
    knee_s = float(knee_parameters(durations_s[None, :], per_kernel[None, :])[0, 2])
    raw = _samples(points)
    samples = None if raw is None else [per_kernel_s(s, n) for s, n in zip(raw, n_kernels, strict=True)]

    def knee_only(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return knee_parameters(x, y)[:, 2:]

    replicates, method = bootstrap(
        durations_s,
        per_kernel,
        samples,
        statistic="median",
        estimator=knee_only,
        n_boot=n_boot,
        seed=seed,
        min_sizes=2,
    )
    finite = replicates[np.isfinite(replicates[:, 0]), 0]
    low, high = np.quantile(finite, [(1 - level) / 2, (1 + level) / 2]) if finite.size else (math.nan,) * 2
    return _fit_row(
        machine_id, "knee_s", knee_s, (float(low), float(high)), level, method, n_points, aside, n_aside
    )


def _spin_durations_s(points: pd.DataFrame) -> np.ndarray:
    """Each spin row's kernel duration, s: the duration its spins achieved (``achieved_ns``: cycles spun at
    the run's calibrated rate) where the run recorded one, else the requested ``kernel_ns``."""
    achieved = _numbers(points, "achieved_ns")
    requested = _numbers(points, "kernel_ns")
    return np.where(np.isfinite(achieved) & (achieved >= 0), achieved, requested) * 1e-9


def _spin_composition(
    fits: pd.DataFrame, machine_id: str, mode: str, n_kernels: int, kernel_s: float
) -> tuple[float, float, float, str] | None:
    """(serial, overlapped, gap per kernel, where the gap came from) seconds per call of ``n_kernels`` spin
    kernels of ``kernel_s`` in ``mode``, each bound plus the synchronise round trip the timed call ends with;
    None when a needed fit is missing."""
    t_gpu_s = n_kernels * kernel_s
    sync_s = fitted(fits, machine_id, "sync_round_trip_s")
    if mode == "graph":
        node_s, graph_s = (
            fitted(fits, machine_id, "graph_node_s"),
            fitted(fits, machine_id, "graph_enqueue_s"),
        )
        if not (usable_cost(node_s) and usable_cost(graph_s) and usable_cost(sync_s)):
            return None
        composition = compose_graph(t_gpu_s, n_kernels, node_s, graph_s)
        gap_from = "graph_node_s of the same run"
    else:
        launch_s = fitted(fits, machine_id, "launch_s")
        if not (usable_cost(launch_s) and usable_cost(sync_s)):
            return None
        gap_s, gap_from = gpu_gap(fits, machine_id)
        composition = compose(t_gpu_s, n_kernels, launch_s, gap_s)
    return composition.serial_s + sync_s, composition.overlapped_s + sync_s, composition.gap_s, gap_from


def _decode_row(
    machine_id: str | None,
    cfg: ModelConfig,
    plan: str,
    launch: str,
    t_launch_s: float,
    t_graph_launch_s: float,
    composition: Composition,
    gap_from: str,
) -> dict[str, object]:
    return {
        "machine_id": machine_id,
        "config": cfg.name,
        "plan": plan,
        "n_kernels": composition.n_kernels,
        "t_gpu_s": composition.t_gpu_s,
        "launch": launch,
        "t_launch_s": t_launch_s,
        "t_graph_launch_s": t_graph_launch_s,
        "serial_s": composition.serial_s,
        "overlapped_s": composition.overlapped_s,
        "overhead_share": composition.overhead_share,
        "tok_per_s_serial": composition.tok_per_s_serial,
        "tok_per_s_overlapped": composition.tok_per_s_overlapped,
        "gap_s": composition.gap_s,
        "gap_from": gap_from,
    }
