"""The GPU dispatch ladder across frameworks: one launch's cost through PyTorch, its CUDA graphs, Triton and
JAX, beside CuPy's ladder (``test_cuda_launch.py``, ``launch_args``); and the decode step in PyTorch eager and
replayed from a ``torch.cuda.CUDAGraph``, beside the CuPy plans (``test_decode_step.py``).

``framework_launch`` (``layer`` says who launches; ``n_kernels`` launches per timed call):

- ``torch``: ``torch.add(a, a, out=o)`` on one element, a tiny elementwise op: one kernel per call, its
  arguments PyTorch's own (``n_args`` absent);
- ``torch_graph``: those calls captured once into a ``torch.cuda.CUDAGraph`` and replayed, at two sizes
  (1 and ``LADDER_N`` nodes), so analysis splits the graph's launch from its cost per node;
- ``triton``: ``triton_kernels``' empty kernels with 0, 1, 4, 8, 13 parameters (as ``launch.cu``'s), each
  launched by ``kernel[(1,)](*args)``, Triton's launcher;
- ``jax``: a ``jax.jit`` function of 0, 1, 4, 8, 13 one-element arrays that adds them (one fused kernel
  reading ``n_args`` inputs), called ``LADDER_N`` times and the last result waited for.

Timing discipline (as the CuPy cases'): everything compiled, captured and called ``WARMUP_CALLS`` times
first; pytest-benchmark times on the host one call = the launches then a synchronise
(``torch.cuda.synchronize``; JAX: ``block_until_ready`` on the last result, its stream runs in order);
``gpu_time_s`` is the median of separate CUDA-event-timed calls (``torch.cuda.Event`` on PyTorch's current
stream, which Triton launches on too). JAX exposes no events on its stream: its cases have no ``gpu_time_s``.

``framework_step``: ``decode_frameworks.decode_logits`` on Llama-3.2-1B in FP16, ctx and token of the CuPy
step, on the very weights and cache CuPy draws (``decode_cuda.random_weights_cuda``, shared through DLPack,
no copy), checked against the same float32 reference (``reference_logits_fp32``) before it is timed, within
``FRAMEWORK_STEP_TOLERANCE`` (an all-FP16 step's, set from its emulation at this size), the cache position it
writes poisoned with NaN first.

Every case skips with the reason where its framework or a CUDA device is missing
(``benchmarks/frameworks.py``; the decode cases also need CuPy, ``benchmarks/cuda.py``); frameworks are
imported in the cases, not at collection.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from benchmarks import frameworks
from benchmarks.cuda import unavailable_reason as cupy_reason
from benchmarks.cuda_timing import LADDER_ARGS, ladder_kernel_name
from benchmarks.decode_frameworks import decode_logits, step_arrays, step_bytes, torch_ops
from benchmarks.decode_numpy import reference_error
from benchmarks.records import record
from benchmarks.run_notes import record_fact
from benchmarks.test_decode_step import CTX, FP16_PLAN_TOLERANCE, TOKEN
from benchmarks.triton_kernels import ladder_args, ladder_kernels
from model.llm import LLAMA32_1B

#: Launches per timed call of the eager layers (``test_cuda_launch.py``'s ``LADDER_N``).
LADDER_N = 256
#: Nodes of torch's graph replays: two sizes, so a line splits the graph launch from the cost per node.
GRAPH_N = (1, LADDER_N)
#: The ladder's argument counts, full and ``--quick`` (``test_cuda_launch.py``'s).
QUICK_LADDER_ARGS = (0, 13)
#: Untimed calls before any timing (compiles Triton's kernels and JAX's functions, warms caches).
WARMUP_CALLS = 3
#: Host-timed rounds and CUDA-event rounds per case, full and ``--quick``.
ROUNDS, QUICK_ROUNDS = 50, 10
EVENT_ROUNDS, QUICK_EVENT_ROUNDS = 20, 5
#: The torch FP16 step's logits lie within this fraction of their RMS of the float32 reference. It keeps
#: every activation in FP16, where ``decode.cu`` keeps its running sums in FP32 (``GPU_REFERENCE_TOLERANCE``,
#: 3e-2), so its own error is larger. Emulated at the real size (Llama-3.2-1B, ctx 1,024:
#: ``benchmarks/fp16_emulation.py``; ``python tools/fp16_step_error.py --seeds 16``): 0.021-0.028 × RMS,
#: 0.022-0.034 with every product's split-K partial sums rounded to FP16 (4 of 16 seeds above 3e-2), JAX's
#: own FP16 step on the CPU 0.023-0.031; a step without its KV write 0.43-1.23. 0.1 is 2.97 × the largest
#: correct error and 4.3 × below the smallest defect (``tests/test_framework_step_fp16.py`` holds ≥ 2 and
#: ≥ 4 on three seeds).
FRAMEWORK_STEP_TOLERANCE = 0.1

Submit = Callable[[], Any]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The ladder's argument counts: all, or ``QUICK_LADDER_ARGS`` under ``--quick``."""
    if "n_args" in metafunc.fixturenames:
        quick = metafunc.config.getoption("quick")
        metafunc.parametrize("n_args", QUICK_LADDER_ARGS if quick else LADDER_ARGS)


def _gpu(name: str) -> Any:
    """Framework ``name`` when it can run GPU cases here; else the case skips with the reason."""
    reason = frameworks.gpu_reason(name)
    if reason is not None:
        pytest.skip(reason)
    return frameworks.module(name)


def _rounds(config: pytest.Config) -> tuple[int, int]:
    quick = config.getoption("quick")
    return (QUICK_ROUNDS, QUICK_EVENT_ROUNDS) if quick else (ROUNDS, EVENT_ROUNDS)


def then_sync(submit: Submit, synchronize: Callable[[], Any]) -> Submit:
    """``submit()`` then ``synchronize()``: the call a host timer times honestly."""

    def call() -> None:
        submit()
        synchronize()

    return call


def torch_event_median_s(torch: Any, submit: Submit, rounds: int) -> float:
    """Median over ``rounds`` of the CUDA-event time of ``submit()`` on PyTorch's current stream, s."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times_s = []
    for _ in range(rounds):
        start.record()
        submit()
        end.record()
        end.synchronize()
        times_s.append(start.elapsed_time(end) * 1e-3)  # PyTorch reports ms
    return statistics.median(times_s)


def time_torch(benchmark: Any, request: pytest.FixtureRequest, torch: Any, submit: Submit) -> float:
    """Warm ``submit`` up, time it with a synchronise on the host (pytest-benchmark), then with CUDA events;
    returns the events' median, s per call."""
    call = then_sync(submit, torch.cuda.synchronize)
    for _ in range(WARMUP_CALLS):
        call()
    rounds, event_rounds = _rounds(request.config)
    benchmark.pedantic(call, rounds=rounds, iterations=1, warmup_rounds=1)
    return torch_event_median_s(torch, submit, event_rounds)


def repeat(launch: Callable[[], Any], n: int) -> Submit:
    """A ``submit()`` that calls ``launch()`` ``n`` times, without waiting."""

    def submit() -> None:
        for _ in range(n):
            launch()

    return submit


def capture_torch_graph(torch: Any, submit: Submit) -> Any:
    """``submit``'s work captured into a ``torch.cuda.CUDAGraph`` (warmed up first on a side stream, as
    PyTorch's documentation requires of a capture); returns the graph, ready to ``replay()``."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP_CALLS):
            submit()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        submit()
    torch.cuda.synchronize()
    return graph


# ------------------------------------------------------------------------------------------------------------
# The ladder
# ------------------------------------------------------------------------------------------------------------


def _time_torch_add(benchmark: Any, request: pytest.FixtureRequest, n_kernels: int, graph: bool) -> None:
    """Time ``n_kernels`` calls of ``torch.add(a, a, out=o)`` on one element per timed call, launched eagerly
    or replayed from a CUDA graph that captured them; check that ``o`` is 2·a after, and record the case."""
    torch = _gpu("torch")
    a = torch.rand(1, device="cuda")
    o = torch.full_like(a, math.nan)
    submit = repeat(functools.partial(torch.add, a, a, out=o), n_kernels)
    if graph:
        submit = capture_torch_graph(torch, submit).replay
        o.fill_(math.nan)  # the capture's warm-up wrote it: the replays must write it again
    gpu_time_s = time_torch(benchmark, request, torch, submit)
    torch.cuda.synchronize()
    what = f"torch.add graph of {n_kernels}" if graph else "torch.add eager"
    assert torch.equal(o, a * 2), f"{what}: o is not 2·a"
    record(
        benchmark,
        case="framework_launch",
        device="cuda",
        op="torch.add",
        framework="torch",
        layer="torch_graph" if graph else "torch",
        mode="graph" if graph else "eager",
        n_kernels=n_kernels,
        gpu_time_s=gpu_time_s,
    )


@pytest.mark.benchmark(group="framework_launch torch")
def test_torch_launch(benchmark: Any, request: pytest.FixtureRequest) -> None:
    _time_torch_add(benchmark, request, LADDER_N, graph=False)


@pytest.mark.benchmark(group="framework_launch torch_graph")
@pytest.mark.parametrize("n_kernels", GRAPH_N)
def test_torch_graph_launch(benchmark: Any, request: pytest.FixtureRequest, n_kernels: int) -> None:
    _time_torch_add(benchmark, request, n_kernels, graph=True)


@pytest.mark.benchmark(group="framework_launch triton")
def test_triton_launch(benchmark: Any, request: pytest.FixtureRequest, n_args: int) -> None:
    torch = _gpu("torch")
    triton = _gpu("triton")
    kernel = ladder_kernels(triton)[n_args]
    args = ladder_args(n_args, torch.zeros(1, device="cuda"))
    launch = functools.partial(kernel[(1,)], *args)
    gpu_time_s = time_torch(benchmark, request, torch, repeat(launch, LADDER_N))
    record(
        benchmark,
        case="framework_launch",
        device="cuda",
        op=ladder_kernel_name(n_args),
        framework="triton",
        layer="triton",
        compiler="triton",
        mode="eager",
        n_args=n_args,
        n_kernels=LADDER_N,
        gpu_time_s=gpu_time_s,
    )


def jax_sum(jnp: Any, *xs: Any) -> Any:
    """1 + the sum of ``xs`` (one-element arrays): one fused kernel reading every argument."""
    total = jnp.ones(1, dtype=jnp.float32)
    for x in xs:
        total = total + x
    return total


@pytest.mark.benchmark(group="framework_launch jax")
def test_jax_launch(benchmark: Any, request: pytest.FixtureRequest, n_args: int) -> None:
    jax = _gpu("jax")
    jnp = jax.numpy
    device = jax.devices("gpu")[0]
    xs = [jax.device_put(jnp.full(1, index + 1, dtype=jnp.float32), device) for index in range(n_args)]
    function = jax.jit(functools.partial(jax_sum, jnp))
    results: list[Any] = []

    def call() -> None:
        for _ in range(LADDER_N - 1):
            function(*xs)
        last = function(*xs)
        last.block_until_ready()  # one stream, in order: every earlier call is done too
        results.append(last)

    for _ in range(WARMUP_CALLS):
        call()
    expected = 1 + n_args * (n_args + 1) / 2
    assert float(np.asarray(results[-1])[0]) == expected, f"jax sum of {n_args}: not {expected}"
    rounds, _ = _rounds(request.config)
    benchmark.pedantic(call, rounds=rounds, iterations=1, warmup_rounds=1)
    results.clear()
    record(
        benchmark,
        case="framework_launch",
        device="cuda",
        op=f"jax.jit(sum of {n_args} arrays)",
        framework="jax",
        layer="jax",
        compiler="jax.jit",
        mode="eager",
        n_args=n_args,
        n_kernels=LADDER_N,
    )


# ------------------------------------------------------------------------------------------------------------
# The decode step
# ------------------------------------------------------------------------------------------------------------


def torch_cuda_ops(torch: Any) -> Any:
    """``torch_ops`` whose ``asarray`` takes CuPy arrays through DLPack (no copy) and numpy ones by copy."""

    def asarray(array: Any, device: Any, dtype: Any) -> Any:
        if isinstance(array, np.ndarray):
            return torch.from_numpy(array).to(device=device, dtype=dtype)
        return torch.from_dlpack(array)

    return dataclasses.replace(torch_ops(torch), asarray=asarray)


@pytest.fixture(scope="module")
def torch_gpu_step() -> Any:
    """CuPy's random FP16 Llama-3.2-1B weights and cache as torch tensors, and CuPy's float32 reference."""
    torch = _gpu("torch")
    reason = cupy_reason()
    if reason is not None:
        pytest.skip(f"the torch decode step shares CuPy's weights: {reason}")
    from benchmarks.cuda import cupy_module
    from benchmarks.decode_cuda import random_kv_cache_cuda, random_weights_cuda, reference_logits_fp32

    cupy = cupy_module()
    weights = random_weights_cuda(LLAMA32_1B)
    cache = random_kv_cache_cuda(LLAMA32_1B, CTX)
    reference = reference_logits_fp32(weights, cache, TOKEN, cupy).get()
    cupy.cuda.Device().synchronize()  # drawn on CuPy's stream; torch reads them on its own
    ops = torch_cuda_ops(torch)
    arrays = step_arrays(ops, weights, cache, device="cuda", dtype=torch.float16)
    return torch, ops, arrays, reference, step_bytes(weights, cache, item_bytes=2)


@pytest.mark.benchmark(group="framework_step cuda")
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_torch_decode_step(
    benchmark: Any, request: pytest.FixtureRequest, torch_gpu_step: Any, mode: str
) -> None:
    torch, ops, arrays, reference, bytes_per_step = torch_gpu_step
    pos = CTX - 1
    step = functools.partial(decode_logits, ops, LLAMA32_1B, arrays, TOKEN, pos)
    outputs: list[Any] = []
    with torch.no_grad():
        if mode == "eager":

            def submit() -> None:
                outputs[:] = [step()]

        else:
            holder: list[Any] = []
            graph = capture_torch_graph(torch, lambda: holder.__setitem__(slice(None), [step()]))

            def submit() -> None:
                graph.replay()
                outputs[:] = holder

        for keys, values in zip(arrays.keys, arrays.values, strict=True):  # a step must write them back
            keys[:, pos] = math.nan
            values[:, pos] = math.nan
        then_sync(submit, torch.cuda.synchronize)()
        logits = frameworks.to_numpy(outputs[0])
        error = reference_error(logits, reference)
        record_fact(
            request.config,
            f"gpu.framework_step.reference_error.torch.{mode}",
            error if math.isfinite(error) else "non-finite logits",  # the saved JSON stays strict JSON
        )
        assert error <= FRAMEWORK_STEP_TOLERANCE, (
            f"torch {mode} step: logits differ from the float32 reference by {error:.3g} × their RMS "
            f"(tolerance {FRAMEWORK_STEP_TOLERANCE}); not timed"
        )
        gpu_time_s = time_torch(benchmark, request, torch, submit)
        after = reference_error(frameworks.to_numpy(outputs[0]), logits.astype(np.float64))
    assert after <= FP16_PLAN_TOLERANCE, f"torch {mode} step: logits changed by {after:.3g} × RMS"
    record(
        benchmark,
        case="framework_step",
        device="cuda",
        op="decode_step",
        framework="torch",
        mode=mode,
        dtype="float16",
        config=LLAMA32_1B.name,
        batch=1,
        ctx=CTX,
        bytes=bytes_per_step,
        gpu_time_s=gpu_time_s,
    )
