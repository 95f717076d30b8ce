"""Kernel plans of a decode step, and how launch overhead composes with the GPU's own work.

Per-layer kernel lists are a representative split (the lecture's assumption), not any particular engine's.

Compositions, as the hardware works (n kernels, t_gpu the GPU's work, g its own time per kernel boundary):
- eager: serial t_gpu + n·(t_launch + g), overlapped max(t_gpu + n·g, n·t_launch) (``compose``): the host's
  launches can hide behind the GPU, the GPU's gaps cannot; "serial" is no overlap of these terms, not an
  upper bound on a real system (``Composition``);
- CUDA Graph: t_graph_launch + t_gpu + n·t_node (``compose_graph``): one launch, then a synchronise; a sum;
- CUDA Graph with programmatic dependent launch: the same, with each node's gap cut by the share PDL hides
  (``compose_pdl_graph``, ``pdl_gap_s``);
- the seed's model is ``compose`` with g = ``SEED_GAP_S`` (0): serial t_gpu + n·t_launch, overlapped
  max(t_gpu, n·t_launch), kept because the lecture's figures are stated in it.
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


# The GPU's own time per kernel boundary, where a run measured none (s), one figure per way of submitting.
# Hazy Research, "Look Ma, No Bubbles! Designing a Low-Latency Megakernel for Llama-1B" (B. Spector, J.
# Juravsky et al., 2025-05-27, hazyresearch.stanford.edu/blog/2025-05-27-no-bubbles): "For a simple dummy
# kernel (which dumps a start time, sleeps, and dumps an end time) on an H100, we find that running on a CUDA
# stream incurs a launch cost of about 2.1 microseconds, and with CUDA graphs the launch cost only decreases
# to around 1.3 microseconds -- time spent with the GPU doing no useful work". Both are GPU time between
# kernels (the setup and teardown of a grid), which no host-side remedy removes; a graph's node costs less
# than a stream's launch. The suite measures the same figures as ``gpu_gap_s`` (eager: CUDA-event time per
# empty kernel queued behind a busy GPU) and ``graph_node_s`` (a replayed graph's event time per node),
# analysis/launch.py.
DEFAULT_EAGER_GAP_S = 2.1e-6
DEFAULT_GRAPH_GAP_S = 1.3e-6
# The seed's model (05_amdahl_and_launch_overhead.py, demo 2): the GPU adds nothing between kernels.
SEED_GAP_S = 0.0
# What programmatic dependent launch hides of the gap g, as a share (0–1), where a run measured none. CUDA C++
# Programming Guide, "Programmatic Dependent Launch and Synchronization" (compute capability >= 9.0): a kernel
# launched with the attribute may be scheduled, and run its preamble, while its predecessor in the stream is
# still running; it waits in cudaGridDependencySynchronize (griddepcontrol.wait) until the predecessor has
# completed and flushed its memory. So PDL hides the launch and preamble part of g, not the wait for the
# predecessor's completion. The guide gives no figure for the split and none was found published: one half
# is this project's assumption, said wherever it is used, and replaced by the suite's ``launch_pdl`` case (the
# same kernel with and without the attribute, analysis/launch.py's ``pdl_gap_s`` / ``pdl_plain_gap_s``)
# where a run has it.
DEFAULT_PDL_HIDDEN_SHARE = 0.5


@dataclass(frozen=True)
class Composition:
    """Time of one decode step once submission overhead and the GPU's own gap per kernel are added to the GPU
    work, in seconds.

    ``serial_s`` adds the host's submission to the GPU's time, never hidden ("no overlap"); ``overlapped_s``
    lets the host queue kernels ahead, so only the slower of the two sides counts. Neither is a bound on a
    real system: serial holds only the terms composed here (n launches at a fixed cost each), and a host that
    does more between launches (a framework's per-op work, a scheduler, sampling) is slower than it
    (gpt-fast's eager step, model/published.py); overlapped is a lower estimate only for the same terms. The
    seed calls its serial figure an upper bound; this model does not. Where nothing can overlap (a graph
    launch followed by a synchronise) the two are equal. ``gap_s`` is the GPU's own time per kernel boundary
    that the composition charged (0 in the seed's model).
    """

    t_gpu_s: float
    n_kernels: int
    serial_s: float
    overlapped_s: float
    batch: int
    gap_s: float

    @property
    def overhead_s(self) -> float:
        """Seconds the serial composition adds to the GPU work."""
        return self.serial_s - self.t_gpu_s

    @property
    def overhead_share(self) -> float:
        """Fraction (0–1) of the serial step spent on submission overhead and gaps."""
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


def compose(t_gpu_s: float, n_kernels: int, t_launch_s: float, gap_s: float, batch: int = 1) -> Composition:
    """Compose eager launches: each of ``n_kernels`` costs ``t_launch_s`` seconds on the host, and the GPU
    spends ``gap_s`` seconds of its own at each kernel (a grid's setup and teardown: ``DEFAULT_EAGER_GAP_S``,
    or the run's measured ``gpu_gap_s``, plus a kernel's ramp where the caller charges one; ``SEED_GAP_S`` for
    the seed's model).

    The gaps sit in the GPU's stream, so they add to its work whatever the host does; only the launches can
    hide behind it. serial = t_gpu + n·(t_launch + g); overlapped = max(t_gpu + n·g, n·t_launch).
    """
    _check_non_negative("t_gpu_s", t_gpu_s)
    _check_non_negative("t_launch_s", t_launch_s)
    _check_non_negative("gap_s", gap_s)
    _check_counts(n_kernels, batch)
    gpu_with_gaps_s = t_gpu_s + n_kernels * gap_s
    launch_s = n_kernels * t_launch_s
    return Composition(
        t_gpu_s=t_gpu_s,
        n_kernels=n_kernels,
        serial_s=gpu_with_gaps_s + launch_s,
        overlapped_s=max(gpu_with_gaps_s, launch_s),
        batch=batch,
        gap_s=gap_s,
    )


def compose_graph(
    t_gpu_s: float, n_kernels: int, t_node_s: float, t_graph_launch_s: float, batch: int = 1
) -> Composition:
    """Compose a CUDA Graph replay: one launch of the whole graph costing ``t_graph_launch_s`` seconds, then
    ``t_node_s`` seconds per kernel node on the GPU (the GPU's gap between back-to-back nodes: the run's
    ``graph_node_s``, or ``DEFAULT_GRAPH_GAP_S``).

    A step that is one graph launch followed by a synchronise cannot overlap the two: the GPU starts the first
    node only once the launch is submitted, and the host waits for the last. So both bounds are the sum,
    t_graph_launch + t_gpu + n·t_node (``serial_s == overlapped_s``).
    """
    _check_non_negative("t_gpu_s", t_gpu_s)
    _check_non_negative("t_node_s", t_node_s)
    _check_non_negative("t_graph_launch_s", t_graph_launch_s)
    _check_counts(n_kernels, batch)
    step_s = t_graph_launch_s + t_gpu_s + n_kernels * t_node_s
    return Composition(
        t_gpu_s=t_gpu_s,
        n_kernels=n_kernels,
        serial_s=step_s,
        overlapped_s=step_s,
        batch=batch,
        gap_s=t_node_s,
    )


def pdl_gap_s(gap_s: float, hidden_share: float) -> float:
    """The GPU's gap per kernel boundary once kernels are launched with programmatic dependent launch, s:
    ``gap_s`` × (1 − ``hidden_share``), the share PDL hides (``DEFAULT_PDL_HIDDEN_SHARE``, an assumption; or
    the run's measured 1 − pdl_gap_s / pdl_plain_gap_s). Raises ValueError for a share outside [0, 1]."""
    _check_non_negative("gap_s", gap_s)
    if not (math.isfinite(hidden_share) and 0 <= hidden_share <= 1):
        raise ValueError(f"hidden_share must be a fraction in [0, 1], got {hidden_share!r}")
    return gap_s * (1 - hidden_share)


def compose_pdl_graph(
    t_gpu_s: float,
    n_kernels: int,
    t_node_s: float,
    t_graph_launch_s: float,
    hidden_share: float,
    batch: int = 1,
) -> Composition:
    """Compose a CUDA Graph replay whose kernels are launched with programmatic dependent launch (captured
    with the attribute: programmatic edges between the nodes): ``compose_graph`` with each node's gap cut to
    ``pdl_gap_s(t_node_s, hidden_share)``. The step between a graph and a megakernel: the host side is the
    graph's, and what is left of g per kernel is the wait for the predecessor's completion."""
    return compose_graph(t_gpu_s, n_kernels, pdl_gap_s(t_node_s, hidden_share), t_graph_launch_s, batch=batch)
