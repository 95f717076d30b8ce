"""``python -m model``: the lecture's demo 1 (Amdahl vs Gustafson) and demo 2 (decode launch overhead).

The CLI is the only place that prints or exits; argparse holds every default.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from model.hardware import GPUS, GPUSpec, gpu_spec
from model.launch import MEGAKERNEL, PLANS, Composition, KernelPlan, compose
from model.laws import amdahl, gustafson
from model.llm import MODELS, ModelConfig, model_config
from model.roofline import DecodeStep, decode_step
from model.tables import format_table
from model.units import fmt_bytes, fmt_count, fmt_percent, fmt_time

# Demo 1's processor counts besides the GPU's own: the cores of one CPU machine, and the GPUs of one node.
_CPU_CORES = 8
_GPUS_PER_NODE = 8


class CLIError(Exception):
    """A bad command line: reported as one ``error: ...`` line on stderr and exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CLIError(message)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _fraction(text: str) -> float:
    value = _non_negative_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1], got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m model``, with every default."""
    parser = _Parser(
        prog="python -m model",
        description="Amdahl vs Gustafson; launch overhead of an LLM decode step against its roofline.",
    )
    parser.add_argument(
        "--ctx", type=_positive_int, default=1024, help="context length in tokens (default 1024)"
    )
    parser.add_argument(
        "--batch", type=_positive_int, default=1, help="sequences decoded together (default 1)"
    )
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
        type=_non_negative_float,
        default=[2.0, 4.0, 8.0],
        help="CPU-side cost of one kernel launch in µs (default 2 4 8)",
    )
    parser.add_argument(
        "--serial",
        nargs="+",
        type=_fraction,
        default=[0.01, 0.001, 0.0001],
        help="serial fractions s for demo 1 (default 0.01 0.001 0.0001)",
    )
    parser.add_argument("--json", action="store_true", help="print machine-readable rows (SI units) as JSON")
    return parser


@dataclass(frozen=True)
class _DecodeRow:
    cfg: ModelConfig
    plan: KernelPlan
    t_launch_s: float
    composition: Composition


def _resolve(gpu: str, models: Sequence[str]) -> tuple[GPUSpec, list[ModelConfig]]:
    try:
        return gpu_spec(gpu), [model_config(name) for name in models]
    except ValueError as err:
        raise CLIError(str(err)) from None


def _processor_counts(hw: GPUSpec) -> tuple[int, ...]:
    return (_CPU_CORES, hw.sm_count, hw.fp32_lanes, _GPUS_PER_NODE * hw.fp32_lanes)


def _scaling_rows(serial_fractions: Sequence[float], ns: Sequence[int]) -> list[dict[str, Any]]:
    return [
        {
            "serial_fraction": s,
            "n": n,
            "amdahl": amdahl(s, n),
            "gustafson": gustafson(s, n),
            "amdahl_limit": 1 / s if s > 0 else None,  # None: no limit
        }
        for s in serial_fractions
        for n in ns
    ]


def _decode_rows(
    steps: dict[str, DecodeStep], cfgs: Sequence[ModelConfig], launch_s: Sequence[float], batch: int
) -> list[_DecodeRow]:
    return [
        _DecodeRow(
            cfg, plan, t_launch_s, compose(steps[cfg.name].t_step, plan.n_kernels(cfg), t_launch_s, batch)
        )
        for cfg in cfgs
        for plan in PLANS.values()
        for t_launch_s in launch_s
    ]


def _span(low: str, high: str) -> str:
    return low if low == high else f"{low}–{high}"


def _print_demo1(hw: GPUSpec, serial_fractions: Sequence[float], ns: Sequence[int]) -> None:
    print(f"Demo 1: Amdahl's law (fixed problem) vs Gustafson's law (problem grows with n), on {hw.name}")
    print(
        f"n = {_CPU_CORES} CPU cores, {hw.sm_count} SMs, {fmt_count(hw.fp32_lanes)} FP32 lanes, "
        f"{fmt_count(_GPUS_PER_NODE * hw.fp32_lanes)} FP32 lanes of {_GPUS_PER_NODE} GPUs\n"
    )
    rows = []
    for s in serial_fractions:
        limit = fmt_count(1 / s) if s > 0 else "∞"
        rows.append([fmt_percent(s, None), "Amdahl", *(fmt_count(amdahl(s, n)) for n in ns), limit])
        rows.append(["", "Gustafson", *(fmt_count(gustafson(s, n)) for n in ns), "∞"])
    headers = ["serial fraction s", "law", *(f"n = {fmt_count(n)}" for n in ns), "n → ∞"]
    print(format_table(headers, rows))
    lanes = hw.fp32_lanes
    positive = [s for s in serial_fractions if s > 0]
    observations = []
    if positive:
        limits = ", ".join(fmt_count(1 / s) for s in positive)
        stops = ", ".join(f"{fmt_count(amdahl(s, lanes))} (s = {fmt_percent(s, None)})" for s in positive)
        observations.append(
            f"Amdahl: the speedup never exceeds 1/s ({limits} here); on the {fmt_count(lanes)} FP32 lanes "
            f"of one {hw.name} it stops at about {stops}."
        )
    s_largest = max(serial_fractions)
    observations += [
        "Gustafson: if the problem grows with the processor count (a bigger batch, a longer sequence), "
        "the serial share shrinks and the speedup is almost linear: "
        f"{fmt_count(gustafson(s_largest, lanes))} on {fmt_count(lanes)} lanes "
        f"even at s = {fmt_percent(s_largest, None)}.",
        "The two laws answer different questions: how much faster one task gets (latency) vs how much more "
        "work fits in the same time (throughput). LLM inference needs both: one request's decode latency "
        "is bound by Amdahl, batched throughput behaves more like Gustafson.",
    ]
    _print_observations(observations)


def _print_demo2(
    hw: GPUSpec,
    cfgs: Sequence[ModelConfig],
    steps: dict[str, DecodeStep],
    rows: Sequence[_DecodeRow],
    launch_s: Sequence[float],
    batch: int,
    ctx: int,
) -> None:
    print(
        f"Demo 2: one decode step (batch = {batch}, ctx = {ctx}, {hw.name}, BF16): "
        "how many kernels does it launch?"
    )
    for plan in PLANS.values():
        if plan.per_layer:
            print(f"{plan.name} ({len(plan.per_layer)} per layer): {', '.join(plan.per_layer)}")
    print(
        f"then once per step: {', '.join(PLANS['unfused'].tail)}; "
        "a megakernel runs the whole step as 1 kernel."
    )
    for cfg in cfgs:
        step = steps[cfg.name]
        print(
            f"{cfg.name}: reads {fmt_bytes(step.weight_bytes)} of weights + {fmt_bytes(step.kv_bytes)} "
            f"of KV cache per step -> GPU lower bound {fmt_time(step.t_step)} ({step.bound}-bound)"
        )
    print()
    table = [
        [
            row.cfg.name,
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
    print(format_table(headers, table))
    _print_observations(_demo2_observations(cfgs, steps, rows, launch_s))


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


def _print_observations(lines: Sequence[str]) -> None:
    print("\nObservations:")
    for text in lines:
        print(f"  - {text}")
    print()


def _json_document(
    args: argparse.Namespace,
    hw: GPUSpec,
    cfgs: Sequence[ModelConfig],
    steps: dict[str, DecodeStep],
    scaling: list[dict[str, Any]],
    rows: Sequence[_DecodeRow],
) -> dict[str, Any]:
    return {
        "config": {
            "gpu": hw.name,
            "ctx": args.ctx,
            "batch": args.batch,
            "models": [cfg.name for cfg in cfgs],
            "launch_s": [us * 1e-6 for us in args.launch_us],
            "serial_fractions": args.serial,
        },
        "scaling": scaling,
        "models": [
            {
                "model": cfg.name,
                "param_count": cfg.param_count,
                "weight_bytes": steps[cfg.name].weight_bytes,
                "kv_bytes": steps[cfg.name].kv_bytes,
                "bytes_total": steps[cfg.name].bytes_total,
                "flops": steps[cfg.name].flops,
                "t_mem_s": steps[cfg.name].t_mem,
                "t_compute_s": steps[cfg.name].t_compute,
                "t_step_s": steps[cfg.name].t_step,
                "bound": steps[cfg.name].bound,
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
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demos; return the exit code (0, or 2 on a bad command line)."""
    try:
        args = build_parser().parse_args(argv)
        hw, cfgs = _resolve(args.gpu, args.models)
    except CLIError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    launch_s = [us * 1e-6 for us in args.launch_us]
    ns = _processor_counts(hw)
    steps = {cfg.name: decode_step(cfg, hw, args.batch, args.ctx) for cfg in cfgs}
    scaling = _scaling_rows(args.serial, ns)
    rows = _decode_rows(steps, cfgs, launch_s, args.batch)
    if args.json:
        document = _json_document(args, hw, cfgs, steps, scaling, rows)
        print(json.dumps(document, indent=2, allow_nan=False))
        return 0
    _print_demo1(hw, args.serial, ns)
    _print_demo2(hw, cfgs, steps, rows, launch_s, args.batch, args.ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
