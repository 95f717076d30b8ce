"""The decode step for real: a Llama-shaped forward pass for one token, in the seed's unfused and fused plans.

CPU (always): ``benchmarks/decode_numpy.py``'s step of ``tiny-llama-4L-1024`` (≈ 375 MB of float32 weights,
past the last-level cache), ctx 1,024; ``n_calls`` is the numpy calls per step, counted by running the step
once through a counting stand-in for numpy. GPU (CuPy, skipped without a device): ``decode_cuda``'s step of
Llama-3.2-1B (FP16, ≈ 2.5 GB), ctx 1,024, in each plan × mode ("eager": the launch list, "graph": one
captured CUDA graph replayed); ``n_kernels`` is the length of the launch list. Plus the matrix-vector kernel
alone on each weight shape of Llama-3.2-1B (``op="matvec"``), to see its bandwidth without the step around it.

Each timed call is one whole step (ending with a synchronise on the GPU). ``bytes`` is what one step reads
from memory: weights and KV cache, summed over the ops that stream them. Results are checked once outside
the timing: logits finite, equal across plans (and modes), unchanged by the timed repetitions. Prediction
and comparison with the model happen in ``analysis/decode.py``.

CPU specifics: before timing, each plan's step is checked against the float64 reference at its own shapes
(``decode_numpy.check_against_reference``: the position it writes is poisoned with NaN first, the logits
must lie within 1e-3 × the reference's RMS); ``op_counts`` is its call list by op, which the per-op model
prices with ``test_numpy_ops.py``'s costs. ``op="attention"`` times the step's attention ops alone, every
layer's, after an untimed step each round: the per-op model's measured attention term.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from benchmarks import kernels
from benchmarks.cuda import cupy_module, unavailable_reason
from benchmarks.cuda_timing import Launch, Submit, capture_graph, event_median_s, replay, then_sync
from benchmarks.decode_numpy import (
    PLANS,
    TINY_LLAMA_4L,
    NumpyDecodeStep,
    build_numpy_step,
    check_against_reference,
    random_kv_cache,
    random_weights,
    reference_logits,
)
from benchmarks.records import record
from benchmarks.run_record import record_fact
from model.hardware import spec_for_device_name
from model.llm import LLAMA32_1B

if TYPE_CHECKING:
    from benchmarks.decode_cuda import CudaDecodeStep

#: Context length (tokens in the KV cache) of every decode case.
CTX = 1_024
#: Input token of every step (any valid id; the step's work does not depend on it).
TOKEN = 1_234
#: Logits of the float32 plans agree to this fraction of their RMS (they differ only in summation order).
FP32_PLAN_TOLERANCE = 1e-4
#: CPU attention term: rounds (each after an untimed whole step), full and --quick.
ATTENTION_ROUNDS, QUICK_ATTENTION_ROUNDS = 30, 8
#: Logits of the FP16 GPU plans and modes agree to this fraction of their RMS.
FP16_PLAN_TOLERANCE = 1e-2
#: GPU timing: host-timed rounds (each one step + synchronise) and CUDA-event rounds, full and --quick.
GPU_ROUNDS, GPU_EVENT_ROUNDS = 200, 50
QUICK_GPU_ROUNDS, QUICK_GPU_EVENT_ROUNDS = 20, 5
GPU_WARMUP_CALLS = 5
#: The matrix-vector case cycles through copies of its matrix totalling at least this many L2 caches, so
#: every call reads its weights from HBM, as the step does.
MATVEC_L2_FACTOR = 4
#: Duration of the spin kernel queued ahead of each event-timed matvec, ns: longer than the host takes to
#: queue the matvec behind it (a few µs), so the start event does not wait for the host.
MATVEC_LEAD_NS = 50_000

_CUDA_REASON = unavailable_reason()
_needs_cuda = pytest.mark.skipif(_CUDA_REASON is not None, reason=_CUDA_REASON or "")


def _assert_close(got: np.ndarray, expected: np.ndarray, tolerance: float, what: str) -> None:
    """Logits finite, and within ``tolerance`` × RMS of ``expected``; fails naming ``what``."""
    assert np.isfinite(got).all(), f"{what}: non-finite logits"
    rms = float(np.sqrt(np.mean(np.square(expected, dtype=np.float64))))
    error = float(np.abs(got.astype(np.float64) - expected).max())
    assert error <= tolerance * rms, f"{what}: logits differ by {error:.3g} (RMS {rms:.3g})"


def _record_step(
    benchmark: Any,
    step: NumpyDecodeStep | CudaDecodeStep,
    *,
    device: str,
    dtype: str,
    mode: str | None = None,
    n_calls: int | None = None,
    op_counts: dict[str, int] | None = None,
    n_kernels: int | None = None,
    spec_bytes_per_s: float | None = None,
    gpu_time_s: float | None = None,
) -> None:
    """Record a whole-step case of either device: plan, bytes per step, model shape and context read from the
    step itself, batch 1. Arguments left None do not apply to the device and stay absent."""
    record(
        benchmark,
        case="decode_step",
        device=device,
        op="decode_step",
        dtype=dtype,
        plan=step.plan,
        mode=mode,
        n_calls=n_calls,
        op_counts=op_counts,
        n_kernels=n_kernels,
        bytes=step.bytes_per_step,
        spec_bytes_per_s=spec_bytes_per_s,
        gpu_time_s=gpu_time_s,
        config=step.cfg.name,
        batch=1,
        ctx=step.ctx,
    )


# ------------------------------------------------------------------------------------------------------------
# CPU
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _CpuModel:
    steps: dict[str, NumpyDecodeStep]  # both plans, on one set of weights and one cache
    reference: np.ndarray  # float64 logits of the step (reference_logits)


@pytest.fixture(scope="module")
def cpu_model() -> _CpuModel:
    """Random weights and cache (seeded), both plans built, and the float64 reference logits (≈ 1 s)."""
    weights = random_weights(TINY_LLAMA_4L)
    cache = random_kv_cache(TINY_LLAMA_4L, CTX)
    steps = {plan: build_numpy_step(plan, weights, cache, TOKEN) for plan in PLANS}
    return _CpuModel(steps=steps, reference=reference_logits(weights, cache, TOKEN))


@pytest.mark.benchmark(group="decode_step cpu")
@pytest.mark.parametrize("plan", list(PLANS))
def test_cpu_decode_step(
    benchmark: Any, cpu_model: _CpuModel, request: pytest.FixtureRequest, plan: str
) -> None:
    """The step, checked against the float64 reference at its own shapes (the error, a fraction of the
    reference's RMS, saved as a fact of the run), then timed; its logits must not change over the timed
    repetitions."""
    step = cpu_model.steps[plan]
    error = check_against_reference(step, cpu_model.reference)
    record_fact(request.config, f"cpu.decode_step.reference_error.{plan}", error)
    checked = step.logits.copy()
    counter = step.count_calls()
    benchmark(step.run)
    _assert_close(step.logits, checked, FP32_PLAN_TOLERANCE, f"{plan} after timing")
    _record_step(
        benchmark,
        step,
        device="cpu",
        dtype="float32",
        n_calls=counter.calls,
        op_counts=dict(counter.op_counts),
    )


@pytest.mark.benchmark(group="decode_step cpu attention")
@pytest.mark.parametrize("plan", list(PLANS))
def test_cpu_attention(
    benchmark: Any, cpu_model: _CpuModel, request: pytest.FixtureRequest, plan: str
) -> None:
    """The step's attention ops alone, every layer's, at the step's shapes: the per-op model's measured
    attention term. Batched products of a few query rows (the GQA group) with the cache stream its 8.4 MB
    far below the host bandwidth, so bytes / bandwidth does not describe them.

    Each round first runs the whole step, untimed, so the cache is read from where the step finds it (the
    hundreds of MB of weights read since evict it) and q holds a real step's values; the attention ops only
    read the cache and q, so the step is still correct afterwards (checked)."""
    step = cpu_model.steps[plan]
    ops = step.attention_ops
    counter = step.count_calls(ops)
    rounds = QUICK_ATTENTION_ROUNDS if request.config.getoption("quick") else ATTENTION_ROUNDS
    benchmark.pedantic(step.run, kwargs={"ops": ops}, setup=step.run, rounds=rounds, iterations=1)
    check_against_reference(step, cpu_model.reference)
    record(
        benchmark,
        case="decode_step",
        device="cpu",
        op="attention",
        dtype="float32",
        plan=plan,
        n_calls=counter.calls,
        op_counts=dict(counter.op_counts),
        bytes=sum(op.bytes_read for op in ops),
        config=step.cfg.name,
        batch=1,
        ctx=step.ctx,
    )


# ------------------------------------------------------------------------------------------------------------
# GPU
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _GpuModel:
    stream: Any
    steps: dict[str, Any]  # plan -> decode_cuda.CudaDecodeStep
    logits: np.ndarray  # of one untimed eager step of the first plan
    spec_bytes_per_s: float | None
    rounds: int
    event_rounds: int


@pytest.fixture(scope="module")
def gpu_model(request: pytest.FixtureRequest) -> Iterator[_GpuModel]:
    """Llama-3.2-1B's random FP16 weights and cache on the GPU, both plans built (kernels compiled), one
    untimed eager step run, and a non-blocking stream current for the module (graph capture needs one)."""
    from benchmarks.decode_cuda import build_cuda_step, random_kv_cache_cuda, random_weights_cuda

    cupy = cupy_module()
    quick = request.config.getoption("quick")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        weights = random_weights_cuda(LLAMA32_1B)
        cache = random_kv_cache_cuda(LLAMA32_1B, CTX)
        steps = {plan: build_cuda_step(plan, weights, cache, TOKEN) for plan in PLANS}
        first = steps[next(iter(PLANS))]
        first.submit()
        stream.synchronize()
        name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
        spec = spec_for_device_name(name.decode() if isinstance(name, bytes) else str(name))
        yield _GpuModel(
            stream=stream,
            steps=steps,
            logits=first.logits.get(),
            spec_bytes_per_s=None if spec is None else spec.mem_bytes_per_s,
            rounds=QUICK_GPU_ROUNDS if quick else GPU_ROUNDS,
            event_rounds=QUICK_GPU_EVENT_ROUNDS if quick else GPU_EVENT_ROUNDS,
        )
    stream.synchronize()


def _time_on_gpu(benchmark: Any, gpu_model: _GpuModel, submit: Submit, before: Submit | None = None) -> float:
    """Time ``submit()`` followed by a synchronise on the host (pytest-benchmark: the module's rounds, one
    call each, after one warm-up round), then ``submit()`` alone with CUDA events on the module's stream,
    ``before()`` queued ahead of each start event (untimed). Returns the CUDA-event median, s per call."""
    stream = gpu_model.stream
    benchmark.pedantic(then_sync(submit, stream), rounds=gpu_model.rounds, iterations=1, warmup_rounds=1)
    return event_median_s(submit, stream, gpu_model.event_rounds, before)


@_needs_cuda
@pytest.mark.benchmark(group="decode_step cuda")
@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("plan", list(PLANS))
def test_cuda_decode_step(benchmark: Any, gpu_model: _GpuModel, plan: str, mode: str) -> None:
    step, stream = gpu_model.steps[plan], gpu_model.stream
    submit = step.submit if mode == "eager" else replay(capture_graph(step.submit, stream), stream)
    call = then_sync(submit, stream)
    for _ in range(GPU_WARMUP_CALLS):
        call()
    what = f"{plan}, {mode}"
    _assert_close(step.logits.get(), gpu_model.logits, FP16_PLAN_TOLERANCE, what)
    assert int(step.next_token.get()[0]) == int(np.argmax(step.logits.get())), f"{what}: sampling"
    gpu_time_s = _time_on_gpu(benchmark, gpu_model, submit)
    _assert_close(step.logits.get(), gpu_model.logits, FP16_PLAN_TOLERANCE, f"{what} after timing")
    _record_step(
        benchmark,
        step,
        device="cuda",
        dtype="float16",
        mode=mode,
        n_kernels=step.n_kernels,
        spec_bytes_per_s=gpu_model.spec_bytes_per_s,
        gpu_time_s=gpu_time_s,
    )


#: Weight shapes (rows, cols) of Llama-3.2-1B's matrix-vector products, by the step's kernel name.
MATVEC_SHAPES = {
    "QKV projection": (
        (LLAMA32_1B.n_heads + 2 * LLAMA32_1B.n_kv_heads) * LLAMA32_1B.d_head,
        LLAMA32_1B.d_model,
    ),
    "output projection": (LLAMA32_1B.d_model, LLAMA32_1B.n_heads * LLAMA32_1B.d_head),
    "gate/up projection": (2 * LLAMA32_1B.d_ff, LLAMA32_1B.d_model),
    "down projection": (LLAMA32_1B.d_model, LLAMA32_1B.d_ff),
    "output layer": (LLAMA32_1B.vocab, LLAMA32_1B.d_model),
}


@_needs_cuda
@pytest.mark.benchmark(group="decode_step cuda matvec")
@pytest.mark.parametrize("weight", list(MATVEC_SHAPES))
def test_cuda_matvec(benchmark: Any, gpu_model: _GpuModel, weight: str) -> None:
    from benchmarks.decode_cuda import matvec_launch

    cupy = cupy_module()
    stream = gpu_model.stream
    rows, cols = MATVEC_SHAPES[weight]
    rng = cupy.random.default_rng(rows + cols)
    matrix_bytes = rows * cols * 2
    runtime = cupy.cuda.runtime
    l2_bytes = runtime.deviceGetAttribute(runtime.cudaDevAttrL2CacheSize, cupy.cuda.Device().id)
    copies = max(1, math.ceil(MATVEC_L2_FACTOR * l2_bytes / matrix_bytes))
    matrices = [
        (rng.random((rows, cols), dtype=cupy.float32) - 0.5).astype(cupy.float16) for _ in range(copies)
    ]
    x = (rng.random(cols, dtype=cupy.float32) - 0.5).astype(cupy.float16)
    y = cupy.zeros(rows, dtype=cupy.float32)
    launches = itertools.cycle([matvec_launch(weight, matrix, x, y) for matrix in matrices])

    def submit() -> None:
        next(launches)()

    for _ in range(copies):  # warm up (and compile) every copy once
        submit()
    stream.synchronize()
    expected = matrices[-1].astype(cupy.float32) @ x.astype(cupy.float32)  # cuBLAS: outside any capture
    scale = float(cupy.abs(expected).max())
    error = float(cupy.abs(y - expected).max())
    assert error <= 1e-3 * scale, f"matvec {weight} ({rows}×{cols}): error {error:.3g}, scale {scale:.3g}"
    # A spin kernel ahead of each start event: the event fires when it ends, with the matvec already queued
    # behind it, so the event span is the kernel's alone and not also the host's launch latency (µs, of the
    # order of a small matrix's whole read time).
    lead = Launch(kernels.kernel("launch", "spin_kernel"), (np.uint64(MATVEC_LEAD_NS),))
    gpu_time_s = _time_on_gpu(benchmark, gpu_model, submit, before=lead)
    record(
        benchmark,
        case="decode_step",
        device="cuda",
        op="matvec",
        dtype="float16",
        mode="eager",
        n_kernels=1,
        rows=rows,
        cols=cols,
        bytes=matrix_bytes,
        spec_bytes_per_s=gpu_model.spec_bytes_per_s,
        gpu_time_s=gpu_time_s,
        config=LLAMA32_1B.name,
    )
