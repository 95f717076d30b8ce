"""The decode step for real: a Llama-shaped forward pass for one token, in the seed's unfused and fused plans.

CPU (always): ``benchmarks/decode_numpy.py``'s step of ``tiny-llama-4L-1024`` (≈ 375 MB of float32
weights; more layers where 2 × the machine's last-level cache is larger: ``cpu_decode_config``), ctx 1,024;
``n_calls`` is the numpy calls per step, counted by running the step
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

GPU specifics: each plan and mode is first checked against a float32 reference of the same weights at the
benchmark's own shapes (``decode_cuda.reference_logits_fp32``; the error, as a fraction of the logits' RMS,
is a fact of the run: ``gpu.decode_reference_error.<plan>.<mode>``).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from benchmarks.cuda import cupy_module, device_failures, gpu_info, unavailable_reason
from benchmarks.cuda_timing import Submit, capture_graph, event_median_s, replay, then_sync
from benchmarks.decode_numpy import (
    PLANS,
    CallCounter,
    DecodeWeights,
    KVCache,
    NumpyDecodeStep,
    build_numpy_step,
    check_against_reference,
    cpu_decode_config,
    random_kv_cache,
    random_weights,
    reference_logits,
)
from benchmarks.provenance import collect_caches
from benchmarks.records import record
from benchmarks.run_notes import record_fact
from benchmarks.spin_clock import spin
from model.hardware import resolve_gpu_spec
from model.llm import LLAMA32_1B, ModelConfig

if TYPE_CHECKING:
    from benchmarks.decode_cuda import CudaDecodeStep

#: Context length (tokens in the KV cache) of every decode case.
CTX = 1_024
#: Input token of every step (any valid id; the step's work does not depend on it).
TOKEN = 1_234
#: Logits of the float32 plans agree to this fraction of their RMS (they differ only in summation order).
FP32_PLAN_TOLERANCE = 1e-4
#: CPU step: timed rounds, each after one round of its bandwidth probe (``NumpyDecodeStep.probe``), full and
#: --quick. The probe and the step then share their rounds' conditions and count, and so the statistic taken
#: of either means the same. A round (probe and step) reads the weights twice, 0.1–0.3 s on a 2-core VM: a
#: quick run's three give a smoke run's fastest round and median.
CPU_STEP_ROUNDS, QUICK_CPU_STEP_ROUNDS = 60, 3
#: CPU attention term: rounds (each after an untimed whole step), full and --quick.
ATTENTION_ROUNDS, QUICK_ATTENTION_ROUNDS = 30, 3
#: CPU probe case: rounds of the step's matrix-vector products alone, back to back, full and --quick.
PROBE_ROUNDS, QUICK_PROBE_ROUNDS = 30, 3
#: Logits of the FP16 GPU plans and modes agree to this fraction of their RMS.
FP16_PLAN_TOLERANCE = 1e-2
#: The FP16 GPU step's logits lie within this fraction of their RMS of the float32 reference of the same
#: weights. The step rounds activations to FP16 (2^-11) a few times per layer: its numpy stand-ins
#: (tests/test_decode_gpu.py) at these shapes and seeds give 0.0091 × RMS for both plans; a step without its
#: KV write is off by about 0.24 × RMS (issue #15's planted defects on the CPU step: 0.24 to 31).
GPU_REFERENCE_TOLERANCE = 3e-2
#: GPU timing: host-timed rounds (each one step + synchronise) and CUDA-event rounds, full and --quick.
GPU_ROUNDS, GPU_EVENT_ROUNDS = 200, 50
QUICK_GPU_ROUNDS, QUICK_GPU_EVENT_ROUNDS = 20, 5
GPU_WARMUP_CALLS = 5
#: The matrix-vector case cycles through copies of its matrix totalling at least this many L2 caches, so
#: every call reads its weights from HBM, as the step does.
MATVEC_L2_FACTOR = 4
#: Matrix-vector launches per timed call (rotating through the copies), between one pair of CUDA events:
#: the events' resolution (about 0.5 µs) and the start delay are then a small share of the span, not tens of
#: percent of a single 2–5 µs kernel.
MATVEC_LAUNCHES = 32
#: Shortest spin queued ahead of each event-timed call, ns; longer where the host takes longer to queue the
#: call's launches behind it (4 × that, measured), so the start event never waits for the host.
MATVEC_LEAD_NS = 50_000
#: A spin that holds the GPU while the host's time to queue one call is measured, ns.
MATVEC_PROBE_BLOCK_NS = 20_000_000

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
class CpuDecodeInputs:
    """The CPU decode model's numpy inputs, shared by every case that steps it (``benchmarks/conftest.py``'s
    session fixture ``cpu_decode_inputs``): the steps write only position ``ctx - 1`` of the cache, each the
    same key and value, which ``reference`` computes itself."""

    weights: DecodeWeights  # float32, ≥ 2 × the LLC (cpu_config)
    cache: KVCache  # CTX positions
    reference: np.ndarray  # float64 logits of TOKEN at position CTX - 1 (reference_logits)


@dataclass(frozen=True)
class _CpuModel:
    steps: dict[str, NumpyDecodeStep]  # both plans, on one set of weights and one cache
    reference: np.ndarray  # float64 logits of the step (reference_logits)


def cpu_config() -> ModelConfig:
    """The CPU step's model on this machine: weights ≥ 2 × its last-level cache (``cpu_decode_config``)."""
    caches: dict[str, object] = {}
    collect_caches(caches)
    llc_bytes = caches.get("llc_bytes")
    return cpu_decode_config(llc_bytes if isinstance(llc_bytes, int) else None)


def make_cpu_decode_inputs() -> CpuDecodeInputs:
    """Random weights and cache (seeded) of this machine's CPU model, and their float64 reference logits."""
    cfg = cpu_config()
    weights = random_weights(cfg)
    cache = random_kv_cache(cfg, CTX)
    return CpuDecodeInputs(weights, cache, reference_logits(weights, cache, TOKEN))


@pytest.fixture(scope="module")
def cpu_model(cpu_decode_inputs: CpuDecodeInputs) -> _CpuModel:
    """Both plans built on the session's weights and cache (``cpu_decode_inputs``), and their reference."""
    inputs = cpu_decode_inputs
    steps = {plan: build_numpy_step(plan, inputs.weights, inputs.cache, TOKEN) for plan in PLANS}
    return _CpuModel(steps=steps, reference=inputs.reference)


@pytest.mark.benchmark(group="decode_step cpu")
@pytest.mark.parametrize("plan", list(PLANS))
def test_cpu_decode_step(
    benchmark: Any, cpu_model: _CpuModel, request: pytest.FixtureRequest, plan: str
) -> None:
    """The step, checked against the float64 reference at its own shapes (the error, a fraction of the
    reference's RMS, saved as a fact of the run), then timed; its logits must not change over the timed
    repetitions.

    Each timed round follows one round of the step's bandwidth probe (its own matrix-vector products alone,
    ``NumpyDecodeStep.probe``), timed here with the same clock: ``probe_s`` holds one probe time per step
    round, so the bandwidth the bound uses is measured in the same seconds as the step, on the same bytes,
    through the same BLAS calls. One untimed probe and step warm both up first (the probe's run is the one
    that counts its calls; the checked step's run counts the step's and, under ``--quick``, is the step's
    warm-up)."""
    step = cpu_model.steps[plan]
    counter = CallCounter()
    error = check_against_reference(step, cpu_model.reference, xp=counter)
    record_fact(request.config, f"cpu.decode_step.reference_error.{plan}", error)
    checked = step.logits.copy()
    probe_s: list[float] = []

    def probe() -> None:
        start = time.perf_counter()
        step.run(ops=step.probe)
        probe_s.append(time.perf_counter() - start)

    probe_counter = step.count_calls(step.probe)
    quick = request.config.getoption("quick")
    if not quick:
        step.run()
    rounds = QUICK_CPU_STEP_ROUNDS if quick else CPU_STEP_ROUNDS
    benchmark.pedantic(step.run, setup=probe, rounds=rounds, iterations=1)
    _assert_close(step.logits, checked, FP32_PLAN_TOLERANCE, f"{plan} after timing")
    _record_step(
        benchmark,
        step,
        device="cpu",
        dtype="float32",
        n_calls=counter.calls,
        op_counts=dict(counter.op_counts),
    )
    record(
        benchmark,
        case="decode_step",
        device="cpu",
        probe_bytes=step.probe_bytes,
        probe_s=probe_s,
        probe_op_counts=dict(probe_counter.op_counts),
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
    rounds = QUICK_ATTENTION_ROUNDS if request.config.getoption("quick") else ATTENTION_ROUNDS
    _time_part(benchmark, cpu_model, plan, "attention", step.attention_ops, rounds, setup=step.run)


@pytest.mark.benchmark(group="decode_step cpu probe")
@pytest.mark.parametrize("plan", list(PLANS))
def test_cpu_probe(benchmark: Any, cpu_model: _CpuModel, request: pytest.FixtureRequest, plan: str) -> None:
    """The step's matrix-vector products alone, every weight matrix's (``NumpyDecodeStep.probe``), timed as
    a case of their own, apart from the step's rounds: the bandwidth the prediction reads the weights at
    (``analysis.decode``). The step's own probe rounds, interleaved with its rounds, are its consistency
    check; this case is another measurement, at another time, as the read case is.

    Their weights are ≥ 2 × the LLC (``cpu_decode_config``), so each round reads them from DRAM; the probe
    only writes buffers of its own, so the step is still correct afterwards (checked)."""
    step = cpu_model.steps[plan]
    step.run(ops=step.probe)  # warm-up: the probe's buffers and BLAS's threads
    rounds = QUICK_PROBE_ROUNDS if request.config.getoption("quick") else PROBE_ROUNDS
    _time_part(benchmark, cpu_model, plan, "probe", step.probe, rounds, setup=None)


def _time_part(
    benchmark: Any,
    cpu_model: _CpuModel,
    plan: str,
    op: str,
    ops: tuple[Any, ...],
    rounds: int,
    setup: Callable[[], object] | None,
) -> None:
    """Time a part of the step (``ops``, each round after ``setup``), check that the step is still correct
    afterwards, and record it as the ``decode_step`` case's ``op``, with the bytes its ops read."""
    step = cpu_model.steps[plan]
    counter = step.count_calls(ops)
    benchmark.pedantic(step.run, kwargs={"ops": ops}, setup=setup, rounds=rounds, iterations=1)
    check_against_reference(step, cpu_model.reference)
    record(
        benchmark,
        case="decode_step",
        device="cpu",
        op=op,
        dtype="float32",
        plan=plan,
        n_calls=counter.calls,
        op_counts=dict(counter.op_counts),
        bytes=sum(part.bytes_read for part in ops),
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
    reference: np.ndarray  # float32 logits of the same weights and cache (decode_cuda.reference_logits_fp32)
    spec_bytes_per_s: float | None
    rounds: int
    event_rounds: int


@pytest.fixture(scope="module")
def gpu_model(request: pytest.FixtureRequest) -> Iterator[_GpuModel]:
    """Llama-3.2-1B's random FP16 weights and cache on the GPU, both plans built (kernels compiled), one
    untimed eager step run, the float32 reference logits computed, and a non-blocking stream current for the
    module (graph capture needs one)."""
    from benchmarks.decode_cuda import (
        build_cuda_step,
        random_kv_cache_cuda,
        random_weights_cuda,
        reference_logits_fp32,
    )

    quick = request.config.getoption("quick")
    with device_failures(request.config, "setting up the GPU decode step"):
        cupy = cupy_module()
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            weights = random_weights_cuda(LLAMA32_1B)
            cache = random_kv_cache_cuda(LLAMA32_1B, CTX)
            steps = {plan: build_cuda_step(plan, weights, cache, TOKEN) for plan in PLANS}
            steps[next(iter(PLANS))].submit()
            reference = reference_logits_fp32(weights, cache, TOKEN, cupy).get()
            stream.synchronize()
    # The datasheet spec, a MIG slice's share of it, or one derived from the device's own attributes.
    device = gpu_info() or {}
    spec = resolve_gpu_spec(device.get("name"), device).spec
    with stream:
        yield _GpuModel(
            stream=stream,
            steps=steps,
            reference=reference,
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


def _reference_error(got: np.ndarray, reference: np.ndarray) -> float:
    """max |got − reference| as a fraction of the reference's RMS; infinite where ``got`` is not finite."""
    if not np.isfinite(got).all():
        return math.inf
    rms = float(np.sqrt(np.mean(np.square(reference, dtype=np.float64))))
    return float(np.abs(got.astype(np.float64) - reference).max()) / rms


@_needs_cuda
@pytest.mark.benchmark(group="decode_step cuda")
@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("plan", list(PLANS))
def test_cuda_decode_step(
    benchmark: Any, request: pytest.FixtureRequest, gpu_model: _GpuModel, plan: str, mode: str
) -> None:
    step, stream = gpu_model.steps[plan], gpu_model.stream
    submit = step.submit if mode == "eager" else replay(capture_graph(step.submit, stream), stream)
    call = then_sync(submit, stream)
    for _ in range(GPU_WARMUP_CALLS):
        call()
    what = f"{plan}, {mode}"
    logits = step.logits.get()
    error = _reference_error(logits, gpu_model.reference)
    fact = error if math.isfinite(error) else "non-finite logits"  # the saved JSON stays strict JSON
    record_fact(request.config, f"gpu.decode_reference_error.{plan}.{mode}", fact)
    assert error <= GPU_REFERENCE_TOLERANCE, (
        f"{what}: logits differ from the float32 reference of the same weights by {error:.3g} × their RMS "
        f"(tolerance {GPU_REFERENCE_TOLERANCE}): the step computes something else; not timed"
    )
    assert int(step.next_token.get()[0]) == int(np.argmax(logits)), f"{what}: sampling"
    gpu_time_s = _time_on_gpu(benchmark, gpu_model, submit)
    _assert_close(step.logits.get(), logits, FP16_PLAN_TOLERANCE, f"{what} after timing")
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
    record(benchmark, case="decode_step", device="cuda", n_args_total=step.n_args_total)


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


def _lead_ns(submit: Submit, stream: Any) -> float:
    """How long a spin ahead of ``submit()`` must last for the host to queue all of it behind the spin, ns:
    4 × the longest of three host times to queue it behind a blocking spin, at least ``MATVEC_LEAD_NS``."""
    blocker = spin(MATVEC_PROBE_BLOCK_NS)
    queue_s = 0.0
    for _ in range(3):
        stream.synchronize()
        blocker()
        start = time.perf_counter()
        submit()
        queue_s = max(queue_s, time.perf_counter() - start)
    stream.synchronize()
    return max(MATVEC_LEAD_NS, 4 * queue_s * 1e9)


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
    launches = [matvec_launch(weight, matrix, x, y) for matrix in matrices]
    for launch in launches:  # warm up (and compile) every copy once
        launch()
    stream.synchronize()
    expected = matrices[-1].astype(cupy.float32) @ x.astype(cupy.float32)  # cuBLAS: outside any capture
    scale = float(cupy.abs(expected).max())
    error = float(cupy.abs(y - expected).max())
    assert error <= 1e-3 * scale, f"matvec {weight} ({rows}×{cols}): error {error:.3g}, scale {scale:.3g}"
    rotation = itertools.cycle(launches)  # each copy is read again only after the others: from HBM

    def submit() -> None:
        for _ in range(MATVEC_LAUNCHES):
            next(rotation)()

    # A spin ahead of each start event: the event fires when it ends, with every launch of the call already
    # queued behind it, so the span is the kernels' alone, not also the host's launch latency.
    lead = spin(_lead_ns(submit, stream))
    gpu_time_s = _time_on_gpu(benchmark, gpu_model, submit, before=lead)
    record(
        benchmark,
        case="decode_step",
        device="cuda",
        op="matvec",
        dtype="float16",
        mode="eager",
        n_kernels=MATVEC_LAUNCHES,
        rows=rows,
        cols=cols,
        bytes=MATVEC_LAUNCHES * matrix_bytes,
        spec_bytes_per_s=gpu_model.spec_bytes_per_s,
        gpu_time_s=gpu_time_s,
        config=LLAMA32_1B.name,
    )
