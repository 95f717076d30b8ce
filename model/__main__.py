"""``python -m model``: the lecture's demo 1 (Amdahl vs Gustafson) and demo 2 (decode launch overhead).

Demo 2 is printed twice: in the seed's model (the GPU adds nothing between kernels, g = 0), whose figures the
lecture states, and as measured systems run it (``model.gpu_terms``): the bytes at the GPU's published
achievable bandwidth (``--bandwidth-fraction``), a ramp per kernel (``--ramp-us``) and the GPU's own gap per
kernel, launched one by one or as a graph node (``--eager-gap-us``, ``--graph-gap-us``), a graph replay as a
sum, and a graph with programmatic dependent launch hiding ``--pdl-hidden`` of a node's gap; each table says
what its figures include and exclude. ``--published`` prints public batch-1 measurements beside the model's
figures (``model.published``) instead.

The CLI is the only place that prints or exits; argparse holds every default but the achievable bandwidth's,
which depends on ``--gpu`` (``model.gpu_terms.default_terms``). Every numeric option is checked
for its range before any work (a bad value is one ``error:`` line naming the option and the value, exit code
2); every line printed passes through ``model.units.text_for_stream``, so a terminal that cannot encode µ, ×
or ∞ gets "us", "x" and "inf". In ``--json`` output, SI numbers are plain JSON numbers, an unbounded quantity
(an Amdahl limit at s = 0) is the string "inf", and a figure that does not exist (the compute term of a GPU
spec without a tensor rate for the dtype) is null: the document never holds a non-finite number.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any, NoReturn

from model.gpu_terms import DEFAULT_RAMP_S, Estimate, GpuTerms, default_terms, estimate_step
from model.hardware import GPUS, TENSOR_DTYPES, GPUSpec, gpu_spec
from model.launch import (
    DEFAULT_EAGER_GAP_S,
    DEFAULT_GRAPH_GAP_S,
    DEFAULT_PDL_HIDDEN_SHARE,
    MEGAKERNEL,
    PLANS,
    SEED_GAP_S,
    Composition,
    KernelPlan,
    compose,
    pdl_gap_s,
)
from model.laws import amdahl, amdahl_limit, gustafson, gustafson_limit
from model.llm import MODELS, ModelConfig, check_context, model_config
from model.published import markdown as published_markdown
from model.roofline import DecodeStep, decode_step
from model.tables import format_table
from model.units import (
    fmt_binary_bytes,
    fmt_bytes,
    fmt_count,
    fmt_flop_rate,
    fmt_percent,
    fmt_rate,
    fmt_time,
    text_for_stream,
)

# Demo 1's processor counts besides the GPU's own: the cores of one CPU machine, and the GPUs of one node.
_CPU_CORES = 8
_GPUS_PER_NODE = 8

# Ranges of the numeric options. Counts stop at 2**53, the largest integer a float holds exactly, so every
# figure derived from them stays finite. A launch longer than a second is not a launch. A positive serial
# fraction below the smallest normal float would make 1/s overflow.
_MAX_COUNT = 2**53
_MAX_LAUNCH_US = 1e6
_MIN_SERIAL_FRACTION = sys.float_info.min
_SHOWN_CHARS = 40


class CLIError(Exception):
    """A bad command line: reported as one ``error: ...`` line on stderr and exit code 2."""


def _write(text: str, stream: IO[str]) -> None:
    stream.write(text_for_stream(text, stream))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CLIError(message)

    def print_help(self, file: IO[str] | None = None) -> None:
        _write(self.format_help(), file or sys.stdout)

    def print_usage(self, file: IO[str] | None = None) -> None:
        _write(self.format_usage(), file or sys.stdout)


def _shown(text: str) -> str:
    """``text`` quoted for an error line, cut short when it is long (a 10^309 written out has 310 digits)."""
    if len(text) <= _SHOWN_CHARS:
        return repr(text)
    return f"{text[:_SHOWN_CHARS]!r}… ({len(text):,} characters)"


def _count(text: str) -> int:
    expected = f"expected an integer in [1, {_MAX_COUNT:,}], got {_shown(text)}"
    try:
        value = int(text)
    except ValueError:  # also a number too long for int() to read
        raise argparse.ArgumentTypeError(expected) from None
    if not 1 <= value <= _MAX_COUNT:
        raise argparse.ArgumentTypeError(expected)
    return value


def _number(text: str, expected: str, accept: Callable[[float], bool]) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{expected}, got {_shown(text)}") from None
    if not (math.isfinite(value) and accept(value)):
        raise argparse.ArgumentTypeError(f"{expected}, got {_shown(text)}")
    return value + 0.0  # -0.0 becomes 0.0


def _launch_us(text: str) -> float:
    return _number(
        text, f"expected microseconds in [0, {_MAX_LAUNCH_US:,.0f}]", lambda us: 0 <= us <= _MAX_LAUNCH_US
    )


def _gap_us(text: str) -> float:
    return _number(
        text, f"expected microseconds in [0, {_MAX_LAUNCH_US:,.0f}]", lambda us: 0 <= us <= _MAX_LAUNCH_US
    )


def _fraction(text: str) -> float:
    return _number(text, "expected a fraction in (0, 1]", lambda share: 0 < share <= 1)


def _share(text: str) -> float:
    return _number(text, "expected a fraction in [0, 1]", lambda share: 0 <= share <= 1)


def _serial_fraction(text: str) -> float:
    return _number(
        text,
        f"expected 0 or a fraction in [{_MIN_SERIAL_FRACTION:.3g}, 1]",
        lambda s: s == 0 or _MIN_SERIAL_FRACTION <= s <= 1,
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m model``, with every default."""
    parser = _Parser(
        prog="python -m model",
        description="Amdahl vs Gustafson; launch overhead of an LLM decode step against its roofline.",
    )
    parser.add_argument(
        "--ctx",
        type=_count,
        default=1024,
        help="context length in tokens, at most each model's max_position_embeddings (default 1024)",
    )
    parser.add_argument("--batch", type=_count, default=1, help="sequences decoded together (default 1)")
    parser.add_argument("--gpu", default="H100", help=f"GPU spec, one of {', '.join(GPUS)} (default H100)")
    parser.add_argument(
        "--models",
        nargs="+",
        default=["Llama-3.1-8B", "Llama-3.2-1B"],
        help=f"model shapes, from {', '.join(MODELS)} (default Llama-3.1-8B Llama-3.2-1B)",
    )
    parser.add_argument(
        "--launch-us",
        nargs="+",
        type=_launch_us,
        default=[2.0, 4.0, 8.0],
        help="CPU-side cost of one kernel launch in µs (default 2 4 8)",
    )
    parser.add_argument(
        "--eager-gap-us",
        type=_gap_us,
        default=DEFAULT_EAGER_GAP_S * 1e6,
        help="the GPU's own time per kernel boundary, kernels launched one by one, µs (default 2.1: Hazy "
        "Research, 'Look Ma, No Bubbles', 2025, an H100 on a CUDA stream)",
    )
    parser.add_argument(
        "--graph-gap-us",
        type=_gap_us,
        default=DEFAULT_GRAPH_GAP_S * 1e6,
        help="the same per node of a replayed CUDA graph, µs (default 1.3: the same source, CUDA graphs)",
    )
    parser.add_argument(
        "--ramp-us",
        type=_gap_us,
        default=DEFAULT_RAMP_S * 1e6,
        help="a kernel's time before its bytes flow, one DRAM load latency, µs (default 0.375: gpu-benches, "
        "an H100 PCIe)",
    )
    parser.add_argument(
        "--bandwidth-fraction",
        type=_fraction,
        default=None,
        help="share (0-1] of the datasheet bandwidth a kernel reaches (default: the GPU's published figure, "
        "model/gpu_terms.py, or 1 where none is published)",
    )
    parser.add_argument(
        "--pdl-hidden",
        type=_share,
        default=DEFAULT_PDL_HIDDEN_SHARE,
        help="share (0-1) of g that programmatic dependent launch hides (default 0.5: an assumption, see "
        "model/launch.py)",
    )
    parser.add_argument(
        "--serial",
        nargs="+",
        type=_serial_fraction,
        default=[0.01, 0.001, 0.0001],
        help="serial fractions s for demo 1 (default 0.01 0.001 0.0001)",
    )
    parser.add_argument(
        "--dtype",
        choices=TENSOR_DTYPES,
        default="bf16",
        help="tensor-core dtype of the compute term; weights and KV cache are 2 bytes each (default bf16)",
    )
    parser.add_argument("--json", action="store_true", help="print machine-readable rows (SI units) as JSON")
    parser.add_argument(
        "--published",
        action="store_true",
        help="print public batch-1 decode measurements beside the model's figures (Markdown) and exit",
    )
    return parser


@dataclass(frozen=True)
class _DecodeRow:
    cfg: ModelConfig
    plan: KernelPlan
    t_launch_s: float
    composition: Composition


@dataclass(frozen=True)
class _HardwareRow:
    """One model, plan and launch cost as measured systems run it (``model.gpu_terms.estimate_step``):
    kernels launched one by one, a graph replay, and a graph with programmatic dependent launch."""

    cfg: ModelConfig
    plan: KernelPlan
    t_launch_s: float
    eager: Estimate
    graph: Estimate
    pdl: Estimate


def _resolve(args: argparse.Namespace) -> tuple[GPUSpec, list[ModelConfig]]:
    """The GPU spec and model shapes named on the command line, each model checked against ``--ctx``."""
    try:
        hw = gpu_spec(args.gpu)
    except ValueError as err:
        raise CLIError(f"argument --gpu: {err}") from None
    try:
        cfgs = [model_config(name) for name in args.models]
    except ValueError as err:
        raise CLIError(f"argument --models: {err}") from None
    for cfg in cfgs:
        try:
            check_context(cfg, args.ctx)
        except ValueError as err:
            raise CLIError(f"argument --ctx: {err}") from None
    return hw, cfgs


def _processor_counts(hw: GPUSpec) -> tuple[int, ...]:
    return (_CPU_CORES, hw.sm_count, hw.fp32_lanes, _GPUS_PER_NODE * hw.fp32_lanes)


def _scaling_rows(serial_fractions: Sequence[float], ns: Sequence[int]) -> list[dict[str, Any]]:
    return [
        {
            "serial_fraction": s,
            "n": n,
            "amdahl": amdahl(s, n),
            "gustafson": gustafson(s, n),
            "amdahl_limit": amdahl_limit(s),
            "gustafson_limit": gustafson_limit(s),
        }
        for s in serial_fractions
        for n in ns
    ]


def _decode_rows(
    steps: dict[str, DecodeStep], cfgs: Sequence[ModelConfig], launch_s: Sequence[float], batch: int
) -> list[_DecodeRow]:
    """Demo 2 in the seed's model: eager launches, the GPU adding nothing between kernels."""
    return [
        _DecodeRow(
            cfg,
            plan,
            t_launch_s,
            compose(steps[cfg.name].t_step, plan.n_kernels(cfg), t_launch_s, SEED_GAP_S, batch),
        )
        for cfg in cfgs
        for plan in PLANS.values()
        for t_launch_s in launch_s
    ]


def _terms(args: argparse.Namespace, hw: GPUSpec) -> GpuTerms:
    """The GPU terms of demo 2's second table: the command line's figures, the GPU's published achievable
    bandwidth unless ``--bandwidth-fraction`` names one; each with where it came from."""
    sourced = default_terms(hw)
    fraction, fraction_from = sourced.bandwidth_fraction, sourced.bandwidth_from
    if args.bandwidth_fraction is not None:
        fraction, fraction_from = args.bandwidth_fraction, "--bandwidth-fraction"
    ramp_s, eager_gap_s, graph_gap_s = args.ramp_us * 1e-6, args.eager_gap_us * 1e-6, args.graph_gap_us * 1e-6
    gaps_sourced = _same(eager_gap_s, sourced.eager_gap_s) and _same(graph_gap_s, sourced.graph_gap_s)
    return GpuTerms(
        bandwidth_fraction=fraction,
        bandwidth_from=fraction_from,
        ramp_s=ramp_s,
        ramp_from=sourced.ramp_from if _same(ramp_s, sourced.ramp_s) else "--ramp-us",
        eager_gap_s=eager_gap_s,
        graph_gap_s=graph_gap_s,
        gap_from=sourced.gap_from if gaps_sourced else "--eager-gap-us, --graph-gap-us",
    )


def _same(seconds: float, sourced_s: float) -> bool:
    """Whether a figure read in µs from the command line is the sourced default (up to the µs round trip)."""
    return math.isclose(seconds, sourced_s, rel_tol=1e-12)


def _hardware_rows(
    steps: dict[str, DecodeStep],
    hw: GPUSpec,
    cfgs: Sequence[ModelConfig],
    launch_s: Sequence[float],
    terms: GpuTerms,
    pdl_hidden: float,
) -> list[_HardwareRow]:
    """Demo 2 as measured systems run it: ``terms`` at every kernel; a graph's one launch costs what one
    kernel launch does (an assumption); PDL hides ``pdl_hidden`` of a graph node's gap."""
    pdl_terms = dataclasses.replace(terms, graph_gap_s=pdl_gap_s(terms.graph_gap_s, pdl_hidden))
    rows = []
    for cfg in cfgs:
        step = steps[cfg.name]
        for plan in PLANS.values():
            n = plan.n_kernels(cfg)
            eager_mode = "megakernel" if plan is MEGAKERNEL else "eager"
            for t_launch_s in launch_s:
                rows.append(
                    _HardwareRow(
                        cfg,
                        plan,
                        t_launch_s,
                        eager=estimate_step(step, hw, terms, eager_mode, n, t_launch_s),
                        graph=estimate_step(step, hw, terms, "graph", n, t_launch_s),
                        pdl=estimate_step(step, hw, pdl_terms, "graph", n, t_launch_s),
                    )
                )
    return rows


def _span(low: str, high: str) -> str:
    return low if low == high else f"{low}–{high}"


def _time_span(seconds: Sequence[float]) -> str:
    return _span(fmt_time(min(seconds)), fmt_time(max(seconds)))


def _fmt_limit(limit: float) -> str:
    return "∞" if math.isinf(limit) else fmt_count(limit)


def _demo1_lines(
    hw: GPUSpec, serial_fractions: Sequence[float], ns: Sequence[int], spell: Callable[[str], str]
) -> list[str]:
    lines = [
        f"Demo 1: Amdahl's law (fixed problem) vs Gustafson's law (problem grows with n), on {hw.name} "
        f"({hw.source})",
        f"n = {_CPU_CORES} CPU cores, {hw.sm_count} SMs, {fmt_count(hw.fp32_lanes)} FP32 lanes, "
        f"{fmt_count(_GPUS_PER_NODE * hw.fp32_lanes)} FP32 lanes of {_GPUS_PER_NODE} GPUs",
        "",
    ]
    rows = []
    for s in serial_fractions:
        amdahl_row = [fmt_count(amdahl(s, n)) for n in ns]
        gustafson_row = [fmt_count(gustafson(s, n)) for n in ns]
        rows.append([fmt_percent(s, None), "Amdahl", *amdahl_row, _fmt_limit(amdahl_limit(s))])
        rows.append(["", "Gustafson", *gustafson_row, _fmt_limit(gustafson_limit(s))])
    headers = ["serial fraction s", "law", *(f"n = {fmt_count(n)}" for n in ns), "n → ∞"]
    lines.append(format_table(headers, rows, spell))
    lanes = hw.fp32_lanes
    positive = [s for s in serial_fractions if s > 0]
    observations = []
    if positive:
        limits = ", ".join(fmt_count(amdahl_limit(s)) for s in positive)
        stops = ", ".join(f"{fmt_count(amdahl(s, lanes))} (s = {fmt_percent(s, None)})" for s in positive)
        observations.append(
            f"Amdahl: the speedup never exceeds 1/s ({limits} here); on the {fmt_count(lanes)} FP32 lanes "
            f"of one {hw.name} it stops at about {stops}."
        )
    growing = [s for s in serial_fractions if s < 1]
    if growing:
        s_largest = max(growing)
        observations.append(
            "Gustafson: if the problem grows with the processor count (a bigger batch, a longer sequence), "
            "the serial share shrinks and the speedup is almost linear: "
            f"{fmt_count(gustafson(s_largest, lanes))} on {fmt_count(lanes)} lanes "
            f"even at s = {fmt_percent(s_largest, None)}."
        )
    if 1 in serial_fractions:
        observations.append(
            "At s = 1 nothing runs in parallel: both laws give 1 for every n, and so do their limits."
        )
    observations.append(
        "The two laws answer different questions: how much faster one task gets (latency) vs how much more "
        "work fits in the same time (throughput). LLM inference needs both: one request's decode latency "
        "is bound by Amdahl, batched throughput behaves more like Gustafson."
    )
    return lines + _observation_lines(observations)


def _gpu_line(hw: GPUSpec, dtype: str) -> str:
    peak = hw.tensor_flops_per_s(dtype)
    peak_text = (
        f"{fmt_flop_rate(peak)} dense {dtype.upper()} tensor peak"
        if peak is not None
        else f"no dense {dtype.upper()} tensor rate"
    )
    return (
        f"{hw.name} ({hw.source}): {fmt_rate(hw.mem_bytes_per_s)} memory bandwidth, {peak_text}, "
        f"{fmt_bytes(hw.mem_bytes)} of memory"
    )


def _step_line(cfg: ModelConfig, step: DecodeStep, hw: GPUSpec) -> str:
    window = (
        f" (the last {fmt_count(step.kv_tokens)} tokens: sliding window)" if step.kv_tokens < step.ctx else ""
    )
    line = (
        f"{cfg.name}: reads {fmt_bytes(step.weight_bytes)} of weights + {fmt_bytes(step.kv_bytes)} "
        f"of KV cache{window} per step -> GPU lower bound {fmt_time(step.t_step)} ({step.bound}-bound)"
    )
    if step.t_compute is None:
        line += f"; memory term only: {hw.name} has no dense {step.dtype.upper()} tensor rate"
    return line


def _misfit_line(cfg: ModelConfig, step: DecodeStep, hw: GPUSpec) -> str:
    return (
        f"does not fit: {cfg.name} needs at least {fmt_bytes(step.resident_bytes)} "
        f"({fmt_binary_bytes(step.resident_bytes)}) for weights and KV cache, more than the "
        f"{fmt_bytes(hw.mem_bytes)} of one {hw.name}; its figures are bounds for a step that cannot "
        "run on this GPU as modelled"
    )


def _model_cell(cfg: ModelConfig, step: DecodeStep) -> str:
    return cfg.name if step.fits_memory else f"{cfg.name} (does not fit)"


def _demo2_lines(
    hw: GPUSpec,
    cfgs: Sequence[ModelConfig],
    steps: dict[str, DecodeStep],
    rows: Sequence[_DecodeRow],
    args: argparse.Namespace,
    launch_s: Sequence[float],
    spell: Callable[[str], str],
) -> list[str]:
    lines = [
        f"Demo 2: one decode step (batch = {args.batch}, ctx = {args.ctx}, {hw.name}, "
        f"{args.dtype.upper()}): how many kernels does it launch?",
        _gpu_line(hw, args.dtype),
    ]
    for plan in PLANS.values():
        if plan.per_layer:
            lines.append(f"{plan.name} ({len(plan.per_layer)} per layer): {', '.join(plan.per_layer)}")
    tail = ", ".join(PLANS["unfused"].tail)
    lines.append(f"then once per step: {tail}; a megakernel runs the whole step as 1 kernel.")
    for cfg in cfgs:
        lines.append(_step_line(cfg, steps[cfg.name], hw))
        if not steps[cfg.name].fits_memory:
            lines.append(f"  WARNING {_misfit_line(cfg, steps[cfg.name], hw)}")
    lines += [
        "",
        "The seed's model (the GPU adds nothing between kernels, g = 0): serial = t_gpu + n·t_launch, "
        "overlapped = max(t_gpu, n·t_launch)",
        "  includes the roofline work (every byte at the datasheet bandwidth) and n launches at t_launch "
        "each; excludes bandwidth below the datasheet, the GPU's gap and ramp per kernel (the second table), "
        "a framework's work per op, scheduling and sampling. The seed calls serial an upper bound and "
        "overlapped a lower one: t_gpu alone is a lower bound, the rest holds only for these terms, and a "
        "real step can be slower than serial (gpt-fast's eager step: `python -m model --published`).",
    ]
    table = [
        [
            _model_cell(row.cfg, steps[row.cfg.name]),
            fmt_time(row.composition.t_gpu_s),
            row.plan.name,
            fmt_count(row.composition.n_kernels),
            fmt_time(row.t_launch_s),
            fmt_time(row.composition.serial_s),
            fmt_percent(row.composition.overhead_share),
            fmt_time(row.composition.overlapped_s),
            _span(
                fmt_count(row.composition.tok_per_s_serial), fmt_count(row.composition.tok_per_s_overlapped)
            ),
        ]
        for row in rows
    ]
    headers = [
        "model",
        "GPU lower bound",
        "plan",
        "kernels/step",
        "launch cost",
        "serial: step",
        "overhead share",
        "overlapped: step",
        "tok/s (serial–overlapped)",
    ]
    lines.append(format_table(headers, table, spell))
    return lines + _observation_lines(_demo2_observations(cfgs, steps, rows, launch_s))


def _demo2_observations(
    cfgs: Sequence[ModelConfig],
    steps: dict[str, DecodeStep],
    rows: Sequence[_DecodeRow],
    launch_s: Sequence[float],
) -> list[str]:
    """Observation lines, each stated only where the computed rows make it true."""
    observations = []
    launch_range = _span(fmt_time(min(launch_s)), fmt_time(max(launch_s)))
    shares: dict[str, list[float]] = {}
    for cfg in cfgs:
        step = steps[cfg.name]
        split = [row for row in rows if row.cfg is cfg and row.plan is not MEGAKERNEL]
        shares[cfg.name] = [row.composition.overhead_share for row in split]
        kernels = [row.composition.n_kernels for row in split]
        share_range = _span(fmt_percent(min(shares[cfg.name])), fmt_percent(max(shares[cfg.name])))
        kernel_range = _span(fmt_count(min(kernels)), fmt_count(max(kernels)))
        observations.append(
            f"{cfg.name}: the GPU needs at least {fmt_time(step.t_step)} per step ({step.bound}-bound: "
            f"{fmt_bytes(step.weight_bytes)} of weights, {fmt_bytes(step.kv_bytes)} of KV cache); "
            f"{kernel_range} launches at {launch_range} each that do not overlap the GPU work take "
            f"{share_range} of the step."
        )
    slowest_launch_s = max(launch_s)
    for cfg in cfgs:
        cpu_bound = [
            row
            for row in rows
            if row.cfg is cfg
            and row.t_launch_s == slowest_launch_s
            and row.composition.overlapped_s > row.composition.t_gpu_s
        ]
        if cpu_bound:
            steps_text = " and ".join(
                f"{fmt_time(row.composition.overlapped_s)} ({row.plan.name})" for row in cpu_bound
            )
            observations.append(
                f"{cfg.name} at {fmt_time(slowest_launch_s)} per launch: even fully overlapped, the CPU "
                "cannot issue kernels as fast as the GPU runs them; a step grows from "
                f"{fmt_time(steps[cfg.name].t_step)} to {steps_text}."
            )
    lightest = min(cfgs, key=lambda cfg: steps[cfg.name].t_step)
    pairs = [
        (share_light, share_other)
        for cfg in cfgs
        if cfg is not lightest
        for share_light, share_other in zip(shares[lightest.name], shares[cfg.name], strict=True)
    ]
    if (
        pairs
        and all(light >= other for light, other in pairs)
        and any(light > other for light, other in pairs)
    ):
        observations.append(
            f"The less GPU work per step, the larger the overhead share: {lightest.name} has the largest "
            "share for every plan and launch cost."
        )
    megakernel_share = max(row.composition.overhead_share for row in rows if row.plan is MEGAKERNEL)
    observations += [
        "Remedies: (1) fusion, fewer kernels; (2) CUDA Graphs, which submit a recorded chain of kernels at "
        "once and cut the CPU cost per kernel; (3) a megakernel, one resident kernel per step, whose "
        f"overhead share here is at most {fmt_percent(megakernel_share, 1)}.",
        "Launch costs and kernels per layer are assumptions; real figures depend on driver, CPU and "
        "framework. The direction (small model, small batch -> large overhead share) does not depend on "
        "them.",
    ]
    return observations


def _hardware_lines(
    hw: GPUSpec,
    steps: dict[str, DecodeStep],
    rows: Sequence[_HardwareRow],
    terms: GpuTerms,
    pdl_hidden: float,
    spell: Callable[[str], str],
) -> list[str]:
    """Demo 2 as measured systems run it: the bytes at the achievable bandwidth, a ramp and the mode's gap at
    every kernel, graph replay as a sum, graph replay with programmatic dependent launch; what each mode
    includes and excludes."""
    bandwidth = hw.mem_bytes_per_s * terms.bandwidth_fraction
    g_pdl_s = pdl_gap_s(terms.graph_gap_s, pdl_hidden)
    lines = [
        "Demo 2 as measured systems run it: the same steps with what the seed's model leaves out, each term "
        "with its source (model/gpu_terms.py; `python -m analysis` puts a GPU run's own figures in their "
        "place):",
        f"  work: the step's bytes at {fmt_rate(bandwidth)}, {fmt_percent(terms.bandwidth_fraction, 1)} of "
        f"the datasheet's {fmt_rate(hw.mem_bytes_per_s)} ({terms.bandwidth_from});",
        f"  per kernel, on the GPU: a ramp of {fmt_time(terms.ramp_s)} before its bytes flow "
        f"({terms.ramp_from}) + the GPU's own gap, {fmt_time(terms.eager_gap_s)} launched one by one, "
        f"{fmt_time(terms.graph_gap_s)} as a graph node ({terms.gap_from});",
        f"  with PDL (programmatic dependent launch, compute capability >= 9.0) a node's gap is "
        f"{fmt_time(g_pdl_s)}: PDL assumed to hide {fmt_percent(pdl_hidden)} of it (the next kernel's launch "
        "and preamble overlap its predecessor's tail; the wait for the predecessor's completion stays).",
        "What each figure includes and excludes (n kernels, t_launch the host's cost per launch):",
        "  eager: estimate = max(work + n·(gap + ramp), n·t_launch), the host queueing ahead; no overlap = "
        "work + n·(t_launch + gap + ramp), an estimate too, not an upper bound. Both exclude a framework's "
        "work per op, a scheduler, sampling, the synchronise after the step, and each kernel's tail (its "
        "last wave of thread blocks);",
        "  graph: t_launch + work + n·(gap + ramp), one launch then the replay, a sum; it excludes the "
        "host's work between steps and the tails; graph + PDL: the same with the smaller gap;",
        "  megakernel: one kernel, so one gap and one ramp; it excludes the waits for data between the "
        "instructions inside the kernel (Hazy Research's B200 breakdown: 370 of 600 µs).",
        "",
    ]
    table = [
        [
            _model_cell(row.cfg, steps[row.cfg.name]),
            row.plan.name,
            fmt_count(row.eager.n_kernels),
            fmt_time(row.t_launch_s),
            fmt_time(row.eager.work_s),
            _span(fmt_time(row.eager.step_s), fmt_time(row.eager.no_overlap_s)),
            fmt_time(row.graph.step_s),
            fmt_percent(steps[row.cfg.name].t_mem / row.graph.step_s),
            fmt_time(row.pdl.step_s),
            fmt_count(steps[row.cfg.name].batch / row.pdl.step_s),
        ]
        for row in rows
    ]
    headers = [
        "model",
        "plan",
        "kernels/step",
        "launch cost",
        "work",
        "eager: estimate–no overlap",
        "graph: step",
        "graph: of datasheet",
        "graph + PDL: step",
        "tok/s (graph + PDL)",
    ]
    lines.append(format_table(headers, table, spell))
    return lines + _observation_lines(_hardware_observations(steps, rows))


def _hardware_observations(steps: dict[str, DecodeStep], rows: Sequence[_HardwareRow]) -> list[str]:
    """Observation lines of the second demo-2 table, each from its computed rows."""
    observations = []
    cheapest_s = min(row.t_launch_s for row in rows)
    for name in dict.fromkeys(row.cfg.name for row in rows):
        cheapest = [row for row in rows if row.cfg.name == name and row.t_launch_s == cheapest_s]
        split = [row for row in cheapest if row.plan is not MEGAKERNEL]
        megakernel = next(row for row in cheapest if row.plan is MEGAKERNEL)
        step = steps[name]
        graphs = [row.graph.step_s for row in split]
        shares = [step.t_mem / seconds for seconds in graphs]
        kernels = [row.graph.n_kernels for row in split]
        observations.append(
            f"{name}: the seed's {fmt_time(step.t_step)} becomes {fmt_time(megakernel.eager.step_s)} as a "
            f"megakernel ({fmt_percent(step.t_mem / megakernel.eager.step_s)} of the datasheet bandwidth) "
            "and "
            f"{_time_span(graphs)} as a graph of {_span(fmt_count(min(kernels)), fmt_count(max(kernels)))} "
            f"kernels ({_span(fmt_percent(min(shares)), fmt_percent(max(shares)))}); eager at "
            f"{fmt_time(cheapest_s)} per launch {_time_span([row.eager.step_s for row in split])}."
        )
    observations += [
        "Fusion cuts n; graphs cut the host's part and a smaller gap; PDL cuts part of the gap and leaves "
        "the wait for each predecessor; only a megakernel removes the boundaries themselves: the lecture's "
        "order of remedies.",
        "Held against public measurements (Hazy Research's vLLM, SGLang and megakernel figures, gpt-fast's): "
        "`python -m model --published`, and docs/model.md.",
    ]
    return observations


def _observation_lines(observations: Sequence[str]) -> list[str]:
    return ["", "Observations:", *(f"  - {text}" for text in observations), ""]


def _finite_json(value: Any) -> Any:
    """``value`` with every non-finite float written as the string "inf", "-inf" or "nan" (see the module
    docstring), so that the document is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _finite_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite_json(item) for item in value]
    return value


def _json_document(
    args: argparse.Namespace,
    hw: GPUSpec,
    cfgs: Sequence[ModelConfig],
    steps: dict[str, DecodeStep],
    scaling: list[dict[str, Any]],
    rows: Sequence[_DecodeRow],
    hardware_rows: Sequence[_HardwareRow],
    terms: GpuTerms,
) -> dict[str, Any]:
    return {
        "config": {
            "gpu": hw.name,
            "gpu_source": hw.source,
            "gpu_mem_bytes": hw.mem_bytes,
            "ctx": args.ctx,
            "batch": args.batch,
            "dtype": args.dtype,
            "models": [cfg.name for cfg in cfgs],
            "launch_s": [us * 1e-6 for us in args.launch_us],
            "eager_gap_s": terms.eager_gap_s,
            "graph_gap_s": terms.graph_gap_s,
            "ramp_s": terms.ramp_s,
            "bandwidth_fraction": terms.bandwidth_fraction,
            "bandwidth_from": terms.bandwidth_from,
            "pdl_hidden_share": args.pdl_hidden,
            "graph_launch": "one kernel launch (assumed)",
            "serial_fractions": args.serial,
        },
        "warnings": [
            _misfit_line(cfg, steps[cfg.name], hw) for cfg in cfgs if not steps[cfg.name].fits_memory
        ],
        "scaling": scaling,
        "models": [
            {
                "model": cfg.name,
                "param_count": cfg.param_count,
                "max_position_embeddings": cfg.max_position_embeddings,
                "sliding_window": cfg.sliding_window,
                "kv_tokens": steps[cfg.name].kv_tokens,
                "weight_bytes": steps[cfg.name].weight_bytes,
                "kv_bytes": steps[cfg.name].kv_bytes,
                "bytes_total": steps[cfg.name].bytes_total,
                "flops": steps[cfg.name].flops,
                "t_mem_s": steps[cfg.name].t_mem,
                "t_compute_s": steps[cfg.name].t_compute,
                "t_step_s": steps[cfg.name].t_step,
                "bound": steps[cfg.name].bound,
                "resident_bytes": steps[cfg.name].resident_bytes,
                "fits_memory": steps[cfg.name].fits_memory,
            }
            for cfg in cfgs
        ],
        "decode": [
            {
                "model": row.cfg.name,
                "plan": row.plan.name,
                "n_kernels": row.composition.n_kernels,
                "t_launch_s": row.t_launch_s,
                "t_gpu_s": row.composition.t_gpu_s,
                "serial_s": row.composition.serial_s,
                "overhead_share": row.composition.overhead_share,
                "overlapped_s": row.composition.overlapped_s,
                "tok_per_s_serial": row.composition.tok_per_s_serial,
                "tok_per_s_overlapped": row.composition.tok_per_s_overlapped,
            }
            for row in rows
        ],
        "decode_hardware": [
            {
                "model": row.cfg.name,
                "plan": row.plan.name,
                "n_kernels": row.eager.n_kernels,
                "t_launch_s": row.t_launch_s,
                "work_s": row.eager.work_s,
                "eager_per_kernel_s": row.eager.per_kernel_s,
                "eager_estimate_s": row.eager.step_s,
                "eager_no_overlap_s": row.eager.no_overlap_s,
                "graph_per_kernel_s": row.graph.per_kernel_s,
                "graph_s": row.graph.step_s,
                "pdl_per_kernel_s": row.pdl.per_kernel_s,
                "pdl_graph_s": row.pdl.step_s,
            }
            for row in hardware_rows
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demos; return the exit code (0, or 2 on a bad command line)."""
    try:
        args = build_parser().parse_args(argv)
        hw, cfgs = _resolve(args)
    except CLIError as err:
        _write(f"error: {err}\n", sys.stderr)
        return 2
    if args.published:
        _write(published_markdown() + "\n", sys.stdout)
        return 0
    launch_s = [us * 1e-6 for us in args.launch_us]
    ns = _processor_counts(hw)
    steps = {cfg.name: decode_step(cfg, hw, args.batch, args.ctx, dtype=args.dtype) for cfg in cfgs}
    scaling = _scaling_rows(args.serial, ns)
    rows = _decode_rows(steps, cfgs, launch_s, args.batch)
    terms = _terms(args, hw)
    hardware_rows = _hardware_rows(steps, hw, cfgs, launch_s, terms, args.pdl_hidden)
    if args.json:
        document = _finite_json(_json_document(args, hw, cfgs, steps, scaling, rows, hardware_rows, terms))
        _write(json.dumps(document, indent=2, allow_nan=False) + "\n", sys.stdout)
        return 0

    def spell(text: str) -> str:
        return text_for_stream(text, sys.stdout)

    lines = (
        _demo1_lines(hw, args.serial, ns, spell)
        + _demo2_lines(hw, cfgs, steps, rows, args, launch_s, spell)
        + _hardware_lines(hw, steps, hardware_rows, terms, args.pdl_hidden, spell)
    )
    _write("\n".join(lines) + "\n", sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
