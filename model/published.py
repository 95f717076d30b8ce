"""Public batch-1 decode measurements, each held against the model's figure for the same model, GPU and mode.

Every measured figure is quoted from its source or derived from the source's own numbers in one stated step
(``measured_from``); a figure that no stored source states is not here. The model's figure is
``model.gpu_terms.estimate_step`` with ``default_terms`` (achievable bandwidth, per-kernel ramp, the mode's
gap), plus a framework's per-call host work where the row is an eager framework (``host_per_kernel_s``): none
of these terms is fitted to the figures below. Where the two differ by more than ``TOLERANCE``, the row says
why, with the figures that explain it (``Comparison.note``). ``markdown`` is the table docs/model.md holds
(tests/test_model_published.py regenerates it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from model.gpu_terms import Estimate, default_terms, estimate_step
from model.hardware import A100_SXM_80GB, B200, H100_SXM, GPUSpec
from model.llm import LLAMA2_7B, LLAMA32_1B, ModelConfig
from model.roofline import decode_step
from model.tables import format_markdown
from model.units import fmt_count, fmt_percent, fmt_time

#: A row is within the model when measured ÷ model lies in [1 − TOLERANCE, 1 + TOLERANCE].
TOLERANCE = 0.25

# --- Hazy Research, "Look Ma, No Bubbles! Designing a Low-Latency Megakernel for Llama-1B" ------------------
HAZY_URL = "https://hazyresearch.stanford.edu/blog/2025-05-27-no-bubbles"
# "the memory limit is 3.35TB/s / 2.48GB = ~1350 forward passes per second"; "on an H100, we use 78% of
# memory bandwidth": one forward pass moves 2.48 GB, at 78 % of 3.35 TB/s.
_HAZY_PASS_BYTES = 2.48e9
_HAZY_H100_MEGAKERNEL_S = _HAZY_PASS_BYTES / (0.78 * 3.35e12)
# "A breakdown of the runtime of our current B200 forward pass (total runtime 600 microseconds)".
_HAZY_B200_MEGAKERNEL_S = 600e-6
# "Results generated with a 32-token prompt and 128 generated tokens": the mean context of the 128 steps.
_HAZY_CTX = 32 + 128 // 2
# "with 7 kernel launches per layer, and 16 layers" (the blog's count for the engines; "around a hundred
# separate kernels"): the LM head and sampling are not in it.
_HAZY_ENGINE_KERNELS = 7 * LLAMA32_1B.n_layers
# "even with an optimistic 5 us of stalling per kernel (counting stragglers, kernel launch, and memory
# latencies)": the blog's own estimate of all a kernel boundary costs. Used only to explain a row, never as
# a term of the model (an estimate, and from the source the rows come from).
_HAZY_STALL_PER_KERNEL_S = 5e-6

# --- PyTorch, "Accelerating Generative AI with PyTorch II: GPT, Fast" (2023) and the gpt-fast README -------
GPT_FAST_BLOG_URL = "https://pytorch.org/blog/accelerating-generative-ai-2/"
GPT_FAST_README_URL = "https://github.com/pytorch-labs/gpt-fast"
# The blog: "all benchmarks are run on an A100-80GB, power limited to 330W"; the README: "an 8xA100-80GB,
# power limited to 330W with a hybrid cube mesh topology". An NVLink mesh of eight is the SXM part's
# (``A100_SXM_80GB``; PCIe cards bridge in pairs): an inference, the sources name no form factor.
# README: "they are run with a very small prompt length (just 5 tokens)"; generate.py's --max_new_tokens
# default is 200: the mean context of the 200 steps.
_GPT_FAST_CTX = 5 + 200 // 2
# Eager gpt-fast (model.py and generate.py), counted by hand per decode step, approximate (an op's kernels
# depend on the PyTorch version). Per layer, kernels: RMSNorm 8 (float, x*x, mean, +eps, rsqrt, *, type_as,
# *weight) × 2; QKV projection 1; RoPE 9 (float, 4 mul, sub, add, stack, type_as) × 2 (q and k); the KV write
# 2 (index_put); repeat_interleave about 4 × 2; attention about 10 (decode_n_tokens selects SDPA's math path:
# the mask's bias, the scaling, two matmuls, softmax); the output's transpose copy 1; output projection 1;
# residual adds 2; MLP 5 (w1, silu, w3, mul, w2): 64. Calls without a kernel (split, view, reshape, index,
# transpose, flatten): 31. Per step besides: embedding, two index lookups, final RMSNorm and output layer 12
# kernels; sampling 9 (divide, topk, compare, where, softmax, exponential_, divide, argmax, cast) and 4
# calls without one; the loop 3 (input_pos += 1, two clones).
_GPT_FAST_EAGER_KERNELS = 64 * LLAMA2_7B.n_layers + 12 + 9 + 3
_GPT_FAST_EAGER_CALLS = (64 + 31) * LLAMA2_7B.n_layers + 12 + 9 + 3 + 4 + 2
# The same, compiled (torch.compile, "reduce-overhead": Inductor's fused kernels replayed as a CUDA graph):
# its kernel count is not published; the model's fused plan (8 per layer + 3), model/launch.py.
_GPT_FAST_COMPILED_KERNELS = 8 * LLAMA2_7B.n_layers + 3

# Horace He, "Making Deep Learning Go Brrrr From First Principles" (2022), horace.io/brrr_intro.html: "If you
# perform the same experiment with PyTorch, we can only get 280 thousand operations per second" (tiny
# tensors): PyTorch's own work per call, the CUDA launch not included.
HORACE_URL = "https://horace.io/brrr_intro.html"
TORCH_CALL_S = 1 / 280e3
# The host's cost of one kernel launch, s: the seed's lowest assumed figure (demo 2 sweeps 2, 4 and 8 µs), an
# assumption said wherever it is used; the suite measures it (``launch_s``). It prices a graph's or a
# megakernel's one launch too.
ASSUMED_LAUNCH_S = 2e-6

# WukLab, "Can Scheduling Overhead Dominate LLM Inference Performance? A Study of CPU Scheduling Overhead on
# Two Popular LLM Inference Systems" (2024), mlsys.wuklab.io/posts/scheduling_overhead: "vLLM's scheduling
# overhead can take more than half of the total inference time"; SGLang's is "much lower".
WUKLAB_URL = "https://mlsys.wuklab.io/posts/scheduling_overhead"


@dataclass(frozen=True)
class Published:
    """One public measurement of a batch-1 decode step: what ran (``system`` on ``gpu``, ``cfg`` at context
    ``ctx``, submitted as ``mode`` in ``n_kernels`` kernels, ``kernels_from`` saying where that count comes
    from), the measured time per token (``measured_s``, with ``measured_from``: the quote or the one step
    from the source's numbers) and its ``url``; the host's cost per kernel the model charges
    (``host_per_kernel_s``, with ``host_from``)."""

    system: str
    cfg: ModelConfig
    gpu: GPUSpec
    mode: str
    n_kernels: int
    kernels_from: str
    ctx: int
    measured_s: float
    measured_from: str
    url: str
    host_per_kernel_s: float
    host_from: str


@dataclass(frozen=True)
class Comparison:
    """A published measurement beside the model's figure: ``estimate`` (its ``step_s`` is the model's figure),
    ``ratio`` = measured ÷ model, the datasheet-bandwidth share of each (the roofline's memory time ÷ the
    step), and ``note``: why the two differ, where they differ by more than ``TOLERANCE`` (else empty)."""

    published: Published
    estimate: Estimate
    datasheet_s: float
    note: str

    @property
    def ratio(self) -> float:
        """Measured ÷ model."""
        return self.published.measured_s / self.estimate.step_s

    @property
    def within(self) -> bool:
        """Whether measured ÷ model lies within ±``TOLERANCE``."""
        return abs(self.ratio - 1) <= TOLERANCE

    @property
    def measured_share(self) -> float:
        """The measured step's share of the datasheet bandwidth (0–1)."""
        return self.datasheet_s / self.published.measured_s

    @property
    def model_share(self) -> float:
        """The model's step's share of the datasheet bandwidth (0–1)."""
        return self.datasheet_s / self.estimate.step_s


def _hazy(system: str, gpu: GPUSpec, mode: str, measured_s: float, measured_from: str) -> Published:
    megakernel = mode == "megakernel"
    return Published(
        system=system,
        cfg=LLAMA32_1B,
        gpu=gpu,
        mode=mode,
        n_kernels=1 if megakernel else _HAZY_ENGINE_KERNELS,
        kernels_from="one kernel" if megakernel else "the blog's 7 per layer × 16 layers",
        ctx=_HAZY_CTX,
        measured_s=measured_s,
        measured_from=measured_from,
        url=HAZY_URL,
        host_per_kernel_s=ASSUMED_LAUNCH_S,
        host_from="one launch, 2 µs (assumed)",
    )


def _gpt_fast_compiled(system: str, measured_s: float, measured_from: str, url: str) -> Published:
    return Published(
        system=system,
        cfg=LLAMA2_7B,
        gpu=A100_SXM_80GB,
        mode="graph",
        n_kernels=_GPT_FAST_COMPILED_KERNELS,
        kernels_from="not published: the model's fused plan",
        ctx=_GPT_FAST_CTX,
        measured_s=measured_s,
        measured_from=measured_from,
        url=url,
        host_per_kernel_s=ASSUMED_LAUNCH_S,
        host_from="one graph launch, 2 µs (assumed)",
    )


_ENGINES = "(CUDA graphs and torch compilation, the blog says)"

PUBLISHED: tuple[Published, ...] = (
    _hazy(
        "Hazy Research megakernel",
        H100_SXM,
        "megakernel",
        _HAZY_H100_MEGAKERNEL_S,
        '"we use 78% of memory bandwidth" (2.48 GB per pass, 3.35 TB/s); "under one millisecond"',
    ),
    _hazy(
        f"SGLang {_ENGINES}",
        H100_SXM,
        "graph",
        1.5 * _HAZY_H100_MEGAKERNEL_S,
        '"over 1.5x faster than SGLang": 1.5 × the megakernel\'s, a lower limit',
    ),
    _hazy(
        f"vLLM {_ENGINES}",
        H100_SXM,
        "graph",
        2.5 * _HAZY_H100_MEGAKERNEL_S,
        '"almost 2.5x faster than vLLM": 2.5 × the megakernel\'s, an upper limit',
    ),
    _hazy(
        "Hazy Research megakernel",
        B200,
        "megakernel",
        _HAZY_B200_MEGAKERNEL_S,
        '"our current B200 forward pass (total runtime 600 microseconds)"; "under 680 microseconds"',
    ),
    _hazy(
        f"SGLang {_ENGINES}",
        B200,
        "graph",
        1.5 * _HAZY_B200_MEGAKERNEL_S,
        '"more than 1.5x faster than SGLang": 1.5 × 600 µs, a lower limit',
    ),
    _hazy(
        f"vLLM {_ENGINES}",
        B200,
        "graph",
        3.5 * _HAZY_B200_MEGAKERNEL_S,
        '"the gap with vLLM rises to over 3.5x": 3.5 × 600 µs, a lower limit',
    ),
    Published(
        system="gpt-fast, eager PyTorch",
        cfg=LLAMA2_7B,
        gpu=A100_SXM_80GB,
        mode="eager",
        n_kernels=_GPT_FAST_EAGER_KERNELS,
        kernels_from=f"counted from model.py: {fmt_count(_GPT_FAST_EAGER_CALLS)} PyTorch calls",
        ctx=_GPT_FAST_CTX,
        measured_s=1 / 25.5,
        measured_from='"Starting Point (25.5 tok/s)"; "heavily CPU overhead bound"',
        url=GPT_FAST_BLOG_URL,
        host_per_kernel_s=_GPT_FAST_EAGER_CALLS * TORCH_CALL_S / _GPT_FAST_EAGER_KERNELS + ASSUMED_LAUNCH_S,
        host_from="each PyTorch call 3.57 µs (Horace He), each launch 2 µs (assumed)",
    ),
    _gpt_fast_compiled(
        "gpt-fast, torch.compile",
        1 / 107.0,
        '"Step 1: Reducing CPU overhead through torch.compile and a static kv-cache (107.0 tok/s)"',
        GPT_FAST_BLOG_URL,
    ),
    _gpt_fast_compiled(
        "gpt-fast, torch.compile (README)",
        1 / 104.9,
        'Benchmarks: "Llama-2-7B | Base | 104.9" tokens/s, "1397.31" GB/s',
        GPT_FAST_README_URL,
    ),
)


def compare(published: Published) -> Comparison:
    """``published`` beside the model's estimate of the same step (``default_terms`` of its GPU), with the
    note that explains a difference beyond ``TOLERANCE``."""
    step = decode_step(published.cfg, published.gpu, 1, published.ctx)
    estimate = estimate_step(
        step,
        published.gpu,
        default_terms(published.gpu),
        published.mode,
        published.n_kernels,
        published.host_per_kernel_s,
    )
    comparison = Comparison(published, estimate, step.t_mem, "")
    if comparison.within:
        return comparison
    explain = _NOTES.get((published.mode, published.cfg.name), _unexplained)
    return Comparison(published, estimate, step.t_mem, explain(comparison))


def comparisons() -> list[Comparison]:
    """Every ``PUBLISHED`` measurement beside the model's figure, in table order."""
    return [compare(published) for published in PUBLISHED]


def _graph_note(comparison: Comparison) -> str:
    """An engine's graph step: what the model does not price, and what the blog's own estimate of a kernel
    boundary's stalls leaves over (host work outside the graph)."""
    published, estimate = comparison.published, comparison.estimate
    with_stalls_s = estimate.step_s + estimate.n_kernels * (_HAZY_STALL_PER_KERNEL_S - estimate.per_kernel_s)
    left_s = published.measured_s - with_stalls_s
    text = (
        "Not priced: each kernel's tail (its last wave of thread blocks leaves SMs idle, the blog's first "
        "cause) and the engine's host work outside the graph. With the blog's own estimate of every stall at "
        'a kernel boundary ("an optimistic 5 us") instead of gap + ramp, the model gives '
        f"{fmt_time(with_stalls_s)} ({published.measured_s / with_stalls_s:.2f}×)"
    )
    if abs(published.measured_s / with_stalls_s - 1) <= TOLERANCE:
        return text + "."
    return text + (
        f"; the other {fmt_time(left_s)} ({fmt_percent(left_s / published.measured_s)} of the step) is host "
        "work per step: WukLab (2024) found vLLM's scheduling overhead \"can take more than half of the "
        f'total inference time" ({WUKLAB_URL}).'
    )


def _megakernel_note(comparison: Comparison) -> str:
    """The B200 megakernel: the blog's own breakdown of its step."""
    return (
        "The blog's breakdown of its 600 µs: 250 µs storing activations, awaiting consistency and loading "
        "them (~500 ns per load or store, four per instruction), 40 µs synchronisation across warps, 80 µs "
        "setup: 370 µs of dependency latency inside the one kernel, which the model (one kernel, one ramp) "
        "does not price. No published achievable bandwidth or gap for a B200 here: the datasheet's 7.7 TB/s "
        f"and the H100's gaps; the model's {fmt_time(comparison.estimate.step_s)} is the weights at 7.7 TB/s "
        "and one kernel's gap and ramp."
    )


def _eager_note(comparison: Comparison) -> str:
    """gpt-fast eager: host-bound; what the model prices on the host and what the measurement implies."""
    published, estimate = comparison.published, comparison.estimate
    implied_s = (published.measured_s - published.n_kernels * ASSUMED_LAUNCH_S) / _GPT_FAST_EAGER_CALLS
    modules = 10 * published.cfg.n_layers + 3
    return (
        f"Host-bound. Priced: {fmt_count(_GPT_FAST_EAGER_CALLS)} PyTorch calls per step at Horace He's "
        f"3.57 µs (280,000 operations per second, tiny tensors, {HORACE_URL}) and "
        f"{fmt_count(published.n_kernels)} launches at 2 µs (assumed): {fmt_time(estimate.host_s)} on the "
        f"host; the GPU's side {fmt_time(estimate.gpu_s)}. The measurement implies {fmt_time(implied_s)} per "
        "call: a CUDA tensor's dispatch (caching allocator, stream, launch) and "
        f"{fmt_count(modules)} nn.Module calls per step, which no stored source prices (the suite's "
        "framework ladder measures torch's eager cost per launch on a GPU run). With nothing overlapped the "
        f"model gives {fmt_time(estimate.no_overlap_s)}, still "
        f"{published.measured_s / estimate.no_overlap_s:.2f}× below: no-overlap is not an upper bound."
    )


def _unexplained(comparison: Comparison) -> str:
    return f"Unexplained: measured ÷ model = {comparison.ratio:.2f}."


_NOTES: dict[tuple[str, str], Callable[[Comparison], str]] = {
    ("graph", LLAMA32_1B.name): _graph_note,
    ("megakernel", LLAMA32_1B.name): _megakernel_note,
    ("eager", LLAMA2_7B.name): _eager_note,
}

#: The columns of ``markdown``.
HEADERS = (
    "system",
    "model, GPU",
    "mode, kernels/step",
    "measured (source)",
    "model",
    "measured ÷ model",
    "of datasheet bandwidth: measured / model",
    "why they differ",
)


def markdown(rows: list[Comparison] | None = None) -> str:
    """The table docs/model.md holds: one line per ``comparisons()`` row, figures in human units."""
    rows = comparisons() if rows is None else rows
    cells = []
    for row in rows:
        published, estimate = row.published, row.estimate
        cells.append(
            [
                f"[{published.system}]({published.url})",
                f"{published.cfg.name}, {published.gpu.name}, ctx {fmt_count(published.ctx)}",
                f"{published.mode}, {fmt_count(published.n_kernels)} ({published.kernels_from})",
                f"{fmt_time(published.measured_s)}: {published.measured_from}",
                f"{fmt_time(estimate.step_s)} (host {published.host_from})",
                f"{row.ratio:.2f}×" + ("" if row.within else " (outside ±25 %)"),
                f"{fmt_percent(row.measured_share)} / {fmt_percent(row.model_share)}",
                row.note or "within ±25 %",
            ]
        )
    return format_markdown(list(HEADERS), cells)
