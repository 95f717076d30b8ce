"""What a decode step costs on a real GPU beyond the roofline, and the step estimated with it.

The roofline (``model.roofline``) reads every byte at the datasheet's bandwidth and charges nothing per
kernel. Measured systems fall short of it in three ways, each a term here with its source, none fitted to the
published decode figures it is judged by (``model.published``):

- **achievable bandwidth**: no kernel streams DRAM at the datasheet's rate. ``ACHIEVABLE_BANDWIDTH`` holds the
  best rate a published memory-bound kernel or microbenchmark reached, per GPU, as a fraction of that GPU's
  datasheet figure; a GPU without one keeps the datasheet's (fraction 1, and says so);
- **a per-kernel ramp**: a kernel that reads ``b`` bytes takes ``ramp + b / bandwidth`` (the latency–bandwidth
  model of a memory stream: its first bytes arrive one DRAM latency after its loads are issued, and nothing
  of the kernel before them overlaps them). Small kernels therefore do not reach the bandwidth; the ramp is
  one DRAM load latency (``DEFAULT_RAMP_S``). The tail of a kernel (its last wave of thread blocks leaving
  SMs idle) is not priced: no source gives it per kernel, and ``model.published`` says where it shows;
- **the GPU's gap per kernel**, eager and graph apart (``model.launch.DEFAULT_EAGER_GAP_S``,
  ``DEFAULT_GRAPH_GAP_S``).

A run of the GPU suite measures all three on its own machine (``analysis.gpu_terms``), and those replace
these defaults there. ``estimate_step`` composes them with ``model.launch``'s compositions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from model.hardware import GPUSpec
from model.launch import DEFAULT_EAGER_GAP_S, DEFAULT_GRAPH_GAP_S, Composition, compose, compose_graph
from model.roofline import DecodeStep

#: Ways a decode step is submitted: kernels launched one by one from the host, one CUDA graph replay, or one
#: kernel for the whole step (a megakernel, launched like one eager kernel).
MODES = ("eager", "graph", "megakernel")


@dataclass(frozen=True)
class Sourced:
    """A figure (SI, or a fraction) and where it comes from, in one line."""

    value: float
    source: str


# Achievable DRAM bandwidth, as a fraction (0–1] of the GPU's datasheet figure in ``model.hardware``.
ACHIEVABLE_BANDWIDTH: dict[str, Sourced] = {
    # DeepSeek, FlashMLA (github.com/deepseek-ai/FlashMLA, README, "Performance"): "The dense MLA decoding
    # kernel achieves up to 3000 GB/s in memory-bound configuration ... on H800 SXM5"; its deep-dive
    # (docs/20250422-new-kernel-deep-dive.md): "An NVIDIA H800 SXM5 GPU has a peak memory bandwidth of 3.35
    # TB/s", the H100 SXM's HBM3 figure. 3.0 / 3.35: a decode kernel on the same memory system.
    "H100-SXM": Sourced(
        3.0e12 / 3.35e12,
        "FlashMLA: a decode kernel at 3,000 GB/s on an H800 SXM5, the H100 SXM's 3.35 TB/s HBM3",
    ),
    # te42kyfo/gpu-benches (NHR@FAU), README, gpu-stream "Results from a NVIDIA-H100-PCIe / CUDA 11.7": the
    # read kernel (sum = A[i]) reaches 1,942 GB/s at full occupancy; the datasheet's 2.0 TB/s.
    "H100-PCIe": Sourced(1.942e12 / 2.0e12, "gpu-benches: a read kernel at 1,942 GB/s on an H100 PCIe"),
    # gpt-fast README (github.com/pytorch-labs/gpt-fast): "Running on an A100 80GB, albeit power-limited to
    # 330 watts. Empirically, seems like peak bandwidth is about 1700 GB/s"; the PyTorch blog of the same work
    # ("Accelerating Generative AI with PyTorch II: GPT, Fast", 2023): "even just copying memory struggles to
    # break 85%". 1,700 GB/s of the datasheet's 2,039 GB/s (A100 80GB SXM).
    "A100-SXM-80GB": Sourced(
        1.7e12 / 2.039e12, "gpt-fast README: about 1,700 GB/s peak on an A100 80GB at 330 W"
    ),
}
DATASHEET_BANDWIDTH = "the datasheet's: no published measurement for this GPU"

# One DRAM load latency, s: te42kyfo/gpu-benches, gpu-latency/h100_pcie.txt (pointer chasing, one warp): 658
# cycles at 1,755 MHz beyond the L2 (data sets of 0.5–1.5 GB), 375 ns, on an H100 PCIe. Hazy Research's
# "No Bubbles" post uses "~500 nanoseconds latency per load / store" on a B200.
DEFAULT_RAMP_S = 658 / 1.755e9
RAMP_SOURCE = "gpu-benches: one DRAM load latency on an H100 PCIe, 658 cycles at 1,755 MHz"
GAP_SOURCE = "Hazy Research 2025, an H100: a CUDA stream 2.1 µs, a CUDA graph 1.3 µs"


@dataclass(frozen=True)
class GpuTerms:
    """The terms of ``estimate_step`` for one GPU, each with where it came from.

    ``bandwidth_fraction`` (0–1] × the datasheet bandwidth is the rate a kernel streams DRAM at; ``ramp_s``
    the fixed time of a kernel before its bytes flow; ``eager_gap_s`` / ``graph_gap_s`` the GPU's own time per
    kernel boundary, launched one by one or replayed from a graph (seconds).
    """

    bandwidth_fraction: float
    bandwidth_from: str
    ramp_s: float
    ramp_from: str
    eager_gap_s: float
    graph_gap_s: float
    gap_from: str

    def __post_init__(self) -> None:
        if not (math.isfinite(self.bandwidth_fraction) and 0 < self.bandwidth_fraction <= 1):
            raise ValueError(f"bandwidth_fraction must be in (0, 1], got {self.bandwidth_fraction!r}")
        for name in ("ramp_s", "eager_gap_s", "graph_gap_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    def gap_s(self, mode: str) -> float:
        """The gap per kernel boundary of ``mode`` (``MODES``): a graph's for "graph", else a stream's."""
        _check_mode(mode)
        return self.graph_gap_s if mode == "graph" else self.eager_gap_s


def default_terms(hw: GPUSpec) -> GpuTerms:
    """The sourced terms for ``hw``: its published achievable bandwidth where ``ACHIEVABLE_BANDWIDTH`` has one
    (a MIG slice or a derived spec is looked up by its base name, which it does not carry: datasheet), the
    default ramp and the default gaps."""
    achievable = ACHIEVABLE_BANDWIDTH.get(hw.name)
    return GpuTerms(
        bandwidth_fraction=achievable.value if achievable else 1.0,
        bandwidth_from=achievable.source if achievable else DATASHEET_BANDWIDTH,
        ramp_s=DEFAULT_RAMP_S,
        ramp_from=RAMP_SOURCE,
        eager_gap_s=DEFAULT_EAGER_GAP_S,
        graph_gap_s=DEFAULT_GRAPH_GAP_S,
        gap_from=GAP_SOURCE,
    )


@dataclass(frozen=True)
class Estimate:
    """One decode step as ``estimate_step`` composes it, seconds.

    ``work_s``: the step's bytes at the achievable bandwidth (or its compute, where longer); ``per_kernel_s``:
    what the GPU spends per kernel beyond its bytes (gap + ramp); ``host_s``: the host's time per step for
    the submission (eager: every kernel's cost; graph: the graph's launch); ``step_s``: the estimate (eager:
    the host runs ahead, the slower side counts; graph: one launch then the replay, a sum); ``no_overlap_s``:
    host and GPU one after the other, an estimate too and never a bound (``model.launch.Composition``).
    """

    mode: str
    n_kernels: int
    work_s: float
    per_kernel_s: float
    host_s: float
    step_s: float
    no_overlap_s: float

    @property
    def gpu_s(self) -> float:
        """The GPU's side alone: work + n × per-kernel cost."""
        return self.work_s + self.n_kernels * self.per_kernel_s


def achievable_work_s(step: DecodeStep, hw: GPUSpec, bandwidth_fraction: float) -> float:
    """The step's GPU work at ``bandwidth_fraction`` of ``hw``'s datasheet bandwidth, s: its bytes at that
    rate, or its compute time at the tensor peak where that is longer."""
    if not (math.isfinite(bandwidth_fraction) and 0 < bandwidth_fraction <= 1):
        raise ValueError(f"bandwidth_fraction must be in (0, 1], got {bandwidth_fraction!r}")
    t_mem = step.bytes_total / (hw.mem_bytes_per_s * bandwidth_fraction)
    return t_mem if step.t_compute is None else max(t_mem, step.t_compute)


def estimate_step(
    step: DecodeStep,
    hw: GPUSpec,
    terms: GpuTerms,
    mode: str,
    n_kernels: int,
    host_per_kernel_s: float,
) -> Estimate:
    """The decode step ``step`` on ``hw`` submitted as ``mode``, in ``n_kernels`` kernels (1 for a
    megakernel), each costing the host ``host_per_kernel_s`` (eager; for a graph: its one launch).

    Per kernel the GPU adds the mode's gap and the ramp. Eager and megakernel compose as
    ``model.launch.compose`` (estimate: overlapped; no overlap: serial), a graph as ``compose_graph`` (a sum,
    one figure). Raises ValueError for an unknown mode, a megakernel of more than one kernel, or bad figures.
    """
    _check_mode(mode)
    if mode == "megakernel" and n_kernels != 1:
        raise ValueError(f"a megakernel is 1 kernel per step, got n_kernels={n_kernels!r}")
    work_s = achievable_work_s(step, hw, terms.bandwidth_fraction)
    per_kernel_s = terms.gap_s(mode) + terms.ramp_s
    composition: Composition
    if mode == "graph":
        composition = compose_graph(work_s, n_kernels, per_kernel_s, host_per_kernel_s, batch=step.batch)
        host_s = host_per_kernel_s
    else:
        composition = compose(work_s, n_kernels, host_per_kernel_s, per_kernel_s, batch=step.batch)
        host_s = n_kernels * host_per_kernel_s
    return Estimate(
        mode=mode,
        n_kernels=n_kernels,
        work_s=work_s,
        per_kernel_s=per_kernel_s,
        host_s=host_s,
        step_s=composition.overlapped_s,
        no_overlap_s=composition.serial_s,
    )


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
