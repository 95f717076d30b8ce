"""Kernel plans of a decode step, and how launch overhead composes with the GPU's own work.

Per-layer kernel lists are a representative split (the lecture's assumption), not any particular engine's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from model.llm import ModelConfig


@dataclass(frozen=True)
class KernelPlan:
    """How one decode step is cut into kernels: ``per_layer`` kernels repeated in every layer, then ``tail``
    kernels once per step. A megakernel is no per-layer kernel and one tail kernel for the whole step."""

    name: str
    per_layer: tuple[str, ...]
    tail: tuple[str, ...]

    def n_kernels(self, cfg: ModelConfig) -> int:
        """Kernels launched per decode step of ``cfg``."""
        return cfg.n_layers * len(self.per_layer) + len(self.tail)


_TAIL = ("final RMSNorm", "output layer", "sampling")

UNFUSED = KernelPlan(
    name="unfused",
    per_layer=(
        "RMSNorm",
        "QKV projection",
        "RoPE",
        "write KV cache",
        "attention",
        "output projection",
        "residual add",
        "RMSNorm",
        "gate/up projection",
        "SiLU × mul",
        "down projection",
        "residual add",
    ),
    tail=_TAIL,
)
FUSED = KernelPlan(
    name="fused",
    per_layer=(
        "residual + RMSNorm",
        "QKV projection",
        "RoPE + write KV",
        "attention",
        "output projection",
        "residual + RMSNorm",
        "gate/up projection + SiLU × mul",
        "down projection",
    ),
    tail=_TAIL,
)
MEGAKERNEL = KernelPlan(name="megakernel", per_layer=(), tail=("whole forward step",))

PLANS: dict[str, KernelPlan] = {plan.name: plan for plan in (UNFUSED, FUSED, MEGAKERNEL)}


@dataclass(frozen=True)
class Composition:
    """Time of one decode step once submission overhead is added to the GPU work, in seconds.

    ``serial_s`` is the upper bound (overhead never hidden), ``overlapped_s`` the lower bound (the CPU queues
    kernels ahead, so only the slower of the two sides counts); a real system lies in between.
    """

    t_gpu_s: float
    n_kernels: int
    serial_s: float
    overlapped_s: float
    batch: int

    @property
    def overhead_s(self) -> float:
        """Seconds the serial composition adds to the GPU work."""
        return self.serial_s - self.t_gpu_s

    @property
    def overhead_share(self) -> float:
        """Fraction (0–1) of the serial step spent on submission overhead."""
        return self.overhead_s / self.serial_s

    @property
    def tok_per_s_serial(self) -> float:
        """Tokens per second (all ``batch`` sequences together) at the serial step time."""
        return self.batch / self.serial_s

    @property
    def tok_per_s_overlapped(self) -> float:
        """Tokens per second (all ``batch`` sequences together) at the overlapped step time."""
        return self.batch / self.overlapped_s


def _check_non_negative(name: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def _check_counts(n_kernels: int, batch: int) -> None:
    for name, value in (("n_kernels", n_kernels), ("batch", batch)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def compose(t_gpu_s: float, n_kernels: int, t_launch_s: float, batch: int = 1) -> Composition:
    """Compose eager launches: each of ``n_kernels`` costs ``t_launch_s`` seconds on the CPU side.

    serial = t_gpu + n·t_launch; overlapped = max(t_gpu, n·t_launch).
    """
    _check_non_negative("t_gpu_s", t_gpu_s)
    _check_non_negative("t_launch_s", t_launch_s)
    _check_counts(n_kernels, batch)
    launch_s = n_kernels * t_launch_s
    return Composition(
        t_gpu_s=t_gpu_s,
        n_kernels=n_kernels,
        serial_s=t_gpu_s + launch_s,
        overlapped_s=max(t_gpu_s, launch_s),
        batch=batch,
    )


def compose_graph(
    t_gpu_s: float, n_kernels: int, t_node_s: float, t_graph_launch_s: float, batch: int = 1
) -> Composition:
    """Compose a CUDA Graph replay: one launch of the whole graph costing ``t_graph_launch_s`` seconds, then
    ``t_node_s`` seconds per kernel node on the GPU (the gap between back-to-back nodes, to be measured).

    Node gaps sit in the GPU's own stream, so they add to the GPU work in both bounds; only the single graph
    launch can hide behind it. serial = t_graph_launch + t_gpu + n·t_node;
    overlapped = max(t_gpu + n·t_node, t_graph_launch).
    """
    _check_non_negative("t_gpu_s", t_gpu_s)
    _check_non_negative("t_node_s", t_node_s)
    _check_non_negative("t_graph_launch_s", t_graph_launch_s)
    _check_counts(n_kernels, batch)
    gpu_with_gaps_s = t_gpu_s + n_kernels * t_node_s
    return Composition(
        t_gpu_s=t_gpu_s,
        n_kernels=n_kernels,
        serial_s=t_graph_launch_s + gpu_with_gaps_s,
        overlapped_s=max(gpu_with_gaps_s, t_graph_launch_s),
        batch=batch,
    )
