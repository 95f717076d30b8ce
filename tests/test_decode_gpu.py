"""The GPU decode step (``benchmarks/decode_cuda.py`` + ``benchmarks/kernels/decode.cu``).

Three parts:

- Without a GPU (always run): the launch lists are checked against the kernels' C signatures parsed from
  ``decode.cu`` (argument count, pointer element types, numpy scalar types), and executed with each kernel
  replaced by a numpy statement of what it computes, so the wiring of buffers, the order of launches and the
  grids are checked against the float64 reference. This tests the Python side.
- Without a GPU, with g++ (always run in CI): the same launch lists run the real kernels of ``decode.cu`` on
  the CPU (``tests/host_cuda``), on guarded buffers, under each schedule of the harness (blocks one after
  another forward and reverse, and all blocks interleaved), submitted four times (the in-kernel counters
  must reset, as a graph replay needs). Each kernel on its own is tested in
  ``tests/test_decode_kernels_host.py``.
- The ``gpu`` tests: a tiny configuration's logits match the float64 reference within FP16 tolerance in
  every plan and mode, the matrix-vector kernel is correct on awkward shapes, repeated graph replays agree.
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from benchmarks import decode_cuda, kernels
from benchmarks.cuda import unavailable_reason
from benchmarks.cuda_timing import capture_graph
from benchmarks.decode_cuda import (
    CudaDecodeStep,
    build_cuda_step,
    cache_to_host,
    kernel_constants,
    matvec_launch,
    random_kv_cache_cuda,
    random_weights_cuda,
    reference_logits_fp32,
    weights_to_host,
)
from benchmarks.decode_numpy import (
    DecodeWeights,
    KVCache,
    LayerWeights,
    random_kv_cache,
    random_weights,
    reference_logits,
)
from model.hardware import H200
from model.launch import FUSED, UNFUSED
from model.llm import LLAMA32_1B, ModelConfig
from model.roofline import decode_step
from tests.host_cuda import Schedule, guarded_array, kernel_module
from tests.host_cuda import unavailable_reason as host_unavailable_reason

#: The tiny configuration of the correctness tests: Llama-shaped (GQA group 2, tied), 2 layers, d 256.
TINY = ModelConfig("tiny-llama-2L-256", 2, 256, 4, 2, 64, 512, 5_000, tied=True)
#: Two attention splits (64 keys each), the second one partial.
TINY_CTX = 100
TOKEN = 4_321
PLANS = (UNFUSED, FUSED)
#: FP16 tolerance on logits: |got − reference| ≤ this × the reference's RMS. Activations are rounded to FP16
#: (relative error 2^-11) a few times per layer; with ~unit logits the errors stay near 1e-3.
FP16_LOGIT_TOLERANCE = 2e-2

_REASON = unavailable_reason()
gpu_only = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")
_HOST_REASON = host_unavailable_reason()
host_only = pytest.mark.skipif(_HOST_REASON is not None, reason=_HOST_REASON or "")


# ------------------------------------------------------------------------------------------------------------
# Without a GPU: signatures and an emulated run of the launch lists
# ------------------------------------------------------------------------------------------------------------

_C_POINTER_DTYPES = {"half_t": np.float16, "float": np.float32, "int": np.int32, "unsigned int": np.uint32}
_C_SCALAR_TYPES = {"int": np.int32, "float": np.float32}


def _signatures() -> dict[str, list[tuple[str, bool]]]:
    """Kernel name -> [(C element type, is_pointer)] of each ``extern "C" __global__`` kernel of decode.cu."""
    source = kernels.source("decode")
    pattern = re.compile(r'extern "C" __global__ void(?:\s+__launch_bounds__\([^)]*\))?\s+(\w+)\(([^)]*)\)')
    signatures = {}
    for name, params in pattern.findall(source):
        parsed = []
        for param in params.split(","):
            words = param.replace("__restrict__", "").replace("const", "").split()
            is_pointer = "*" in param
            c_type = " ".join(word.strip("*") for word in words[:-1] if word.strip("*"))
            parsed.append((c_type, is_pointer))
        signatures[name] = parsed
    return signatures


def _silu_mul(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    return gate / (1.0 + np.exp(-gate)) * up


def _norm(h: np.ndarray, weight: np.ndarray, y: np.ndarray, d: int, eps: float) -> None:
    y[:] = (h[:d] / np.sqrt(np.mean(h[:d].astype(np.float64) ** 2) + eps) * weight).astype(np.float16)


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    x1, x2 = x[:, :half].copy(), x[:, half:].copy()
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def _attention(qkv, keys, values, part_acc, part_max, part_sum, counters, out, n_heads, n_kv, dh, ctx, scale):
    group = n_heads // n_kv
    q = qkv[: n_heads * dh].reshape(n_heads, dh) * scale
    for head in range(n_heads):
        scores = keys[head // group, :ctx].astype(np.float32) @ q[head]
        p = np.exp(scores - scores.max())
        out[head * dh : (head + 1) * dh] = ((p / p.sum()) @ values[head // group, :ctx]).astype(np.float16)
    assert counters.sum() == 0, "attention counters must be 0 at launch"


def _emulators() -> dict[str, Callable[..., None]]:
    """What each kernel of decode.cu computes, as numpy on the same buffers (FP16 where the kernel stores
    FP16), ``args`` in the kernel's parameter order."""

    def rope(qkv, cos, sin, n_rot, dh):
        heads = qkv[: n_rot * dh].reshape(n_rot, dh)
        heads[:] = _rotate(heads, cos, sin)

    def kv_write(qkv, kc, vc, n_heads, n_kv, dh, ctx, pos):
        kc[:, pos] = qkv[n_heads * dh : (n_heads + n_kv) * dh].reshape(n_kv, dh)
        vc[:, pos] = qkv[(n_heads + n_kv) * dh : (n_heads + 2 * n_kv) * dh].reshape(n_kv, dh)

    def rope_kv_write(qkv, cos, sin, kc, vc, n_heads, n_kv, dh, ctx, pos):
        rotated = _rotate(qkv[: (n_heads + n_kv) * dh].reshape(n_heads + n_kv, dh), cos, sin)
        qkv[: n_heads * dh] = rotated[:n_heads].reshape(-1)
        kc[:, pos] = rotated[n_heads:]
        vc[:, pos] = qkv[(n_heads + n_kv) * dh : (n_heads + 2 * n_kv) * dh].reshape(n_kv, dh)

    def argmax(logits, n, part_value, part_index, counter, token):
        assert counter[0] == 0, "argmax counter must be 0 at launch"
        token[0] = int(np.argmax(logits[:n]))

    def gateup(w, x, act, d_ff, cols):
        gate_up = w.astype(np.float32) @ x.astype(np.float32)
        act[:d_ff] = _silu_mul(gate_up[:d_ff], gate_up[d_ff:]).astype(np.float16)

    def embed_rmsnorm(emb, token, h, weight, y, d, eps):
        h[:] = emb[token[0]]
        _norm(h, weight, y, d, eps)

    def add_rmsnorm(h, o, weight, y, d, eps):
        h += o
        _norm(h, weight, y, d, eps)

    def residual_add(h, o, n):
        h[:n] += o[:n]

    def silu_mul_kernel(gu, act, d_ff):
        act[:d_ff] = _silu_mul(gu[:d_ff], gu[d_ff : 2 * d_ff]).astype(np.float16)

    def matvec(w, x, y, rows, cols):
        y[:rows] = w.astype(np.float32) @ x.astype(np.float32)

    def rmsnorm(h, weight, y, d, eps):
        _norm(h, weight, y, d, eps)

    return {
        "matvec": matvec,
        "matvec_gateup_silu": gateup,
        "embed_rmsnorm": embed_rmsnorm,
        "rmsnorm": rmsnorm,
        "add_rmsnorm": add_rmsnorm,
        "residual_add": residual_add,
        "silu_mul_kernel": silu_mul_kernel,
        "rope": rope,
        "kv_write": kv_write,
        "rope_kv_write": rope_kv_write,
        "attention": _attention,
        "argmax": argmax,
    }


class _EmulatedKernel:
    """Stands in for a ``cupy.RawKernel``: checks a launch against the C signature, then runs the emulator."""

    def __init__(self, name: str, signature: list[tuple[str, bool]], body: Callable[..., None]) -> None:
        self.name, self.signature, self.body = name, signature, body

    def __call__(self, grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...]) -> None:
        assert len(args) == len(self.signature), f"{self.name}: {len(args)} args for {len(self.signature)}"
        for index, (arg, (c_type, is_pointer)) in enumerate(zip(args, self.signature, strict=True)):
            where = f"{self.name} argument {index} ({c_type}{'*' if is_pointer else ''})"
            if is_pointer:
                assert isinstance(arg, np.ndarray), f"{where}: got {type(arg).__name__}"
                assert arg.dtype == _C_POINTER_DTYPES[c_type], f"{where}: got {arg.dtype}"
                assert arg.flags.c_contiguous, f"{where}: not contiguous"
            else:
                assert type(arg) is _C_SCALAR_TYPES[c_type], f"{where}: got {type(arg).__name__}"
        assert all(isinstance(n, int) and n >= 1 for n in (*grid, *block)), (
            f"{self.name}: grid {grid} block {block}"
        )
        assert math.prod(block) <= 1024, f"{self.name}: {math.prod(block)} threads per block"
        values = [arg.item() if isinstance(arg, np.generic) else arg for arg in args]
        _check_grid(self.name, grid, block, values)
        self.body(*values)


def _check_grid(name: str, grid: tuple[int, ...], block: tuple[int, ...], args: list[Any]) -> None:
    """Each kernel's launch geometry (block sizes from decode.cu's #defines) covers its work."""
    c = kernel_constants()
    threads = grid[0] * block[0]
    if name == "matvec":
        assert block == (c["MV_WARPS"] * 32,) and grid[0] * c["MV_WARPS"] * c["MV_ROWS"] >= args[3]
    elif name == "matvec_gateup_silu":
        assert block == (c["MV_WARPS"] * 32,) and grid[0] * c["MV_WARPS"] >= args[3]
    elif name in ("embed_rmsnorm", "rmsnorm", "add_rmsnorm"):
        assert grid == (1,) and block == (c["NORM_THREADS"],)
    elif name == "attention":
        n_kv, ctx = args[9], args[11]
        assert grid == (math.ceil(ctx / c["ATT_KEYS"]), n_kv) and block == (c["ATT_THREADS"],)
    elif name == "argmax":
        assert block == (c["ARGMAX_THREADS"],)
    elif name in ("residual_add", "silu_mul_kernel"):
        assert threads >= args[-1]
    elif name == "rope":
        assert threads >= args[3] * args[4] // 2
    elif name == "kv_write":
        assert threads >= args[4] * args[5]
    elif name == "rope_kv_write":
        n_heads, n_kv, d_head = args[5], args[6], args[7]
        assert threads >= (n_heads + n_kv) * d_head // 2 + n_kv * d_head
    else:
        raise AssertionError(f"no launch geometry known for kernel {name}")


def _numpy_cupy(zeros: Callable[..., Any], full: Callable[..., Any], asarray: Callable[..., Any]) -> Any:
    """What decode_cuda uses of CuPy, with numpy arrays: these allocation functions and numpy's dtypes."""
    return types.SimpleNamespace(
        zeros=zeros, full=full, asarray=asarray, float32=np.float32, float16=np.float16, int32=np.int32,
        uint32=np.uint32,
    )  # fmt: skip


@pytest.fixture
def emulated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make decode_cuda build its buffers with numpy and launch emulated kernels (no GPU needed)."""
    signatures, bodies = _signatures(), _emulators()
    assert set(signatures) == set(bodies), "every kernel of decode.cu has an emulator, and no more"
    shim = _numpy_cupy(np.zeros, np.full, np.asarray)
    monkeypatch.setattr(decode_cuda, "cupy_module", lambda: shim)
    monkeypatch.setattr(
        kernels, "kernel", lambda module, name: _EmulatedKernel(name, signatures[name], bodies[name])
    )


def _host_fp16(cfg: ModelConfig, ctx: int) -> tuple[DecodeWeights, KVCache]:
    """Random weights and cache of ``cfg`` as FP16 numpy arrays (what the GPU step holds)."""
    weights = random_weights(cfg)
    layers = tuple(
        LayerWeights(**{name: value.astype(np.float16) for name, value in vars(layer).items()})
        for layer in weights.layers
    )
    fp16 = DecodeWeights(
        cfg, weights.embedding.astype(np.float16), layers, weights.final_norm.astype(np.float16)
    )
    cache = random_kv_cache(cfg, ctx)
    to16 = KVCache(
        tuple(k.astype(np.float16) for k in cache.keys), tuple(v.astype(np.float16) for v in cache.values)
    )
    return fp16, to16


def _assert_fp16_close(got: np.ndarray, reference: np.ndarray, what: str) -> None:
    assert np.isfinite(got).all(), f"{what}: non-finite logits"
    error = float(np.abs(got.astype(np.float64) - reference).max())
    rms = float(np.sqrt(np.mean(reference**2)))
    assert error <= FP16_LOGIT_TOLERANCE * rms, f"{what}: max error {error:.3g} vs reference RMS {rms:.3g}"


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_emulated_launch_list_matches_reference(emulated: None, plan) -> None:
    weights, cache = _host_fp16(TINY, TINY_CTX)
    reference = reference_logits(weights, cache, TOKEN)
    step = build_cuda_step(plan.name, weights, _copy_cache(cache), TOKEN)
    step.submit()
    _assert_fp16_close(step.logits, reference, f"{plan.name} (emulated kernels)")
    assert int(step.next_token[0]) == int(np.argmax(step.logits))


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_launch_list_is_the_plan(emulated: None, plan) -> None:
    weights, cache = _host_fp16(TINY, TINY_CTX)
    step = build_cuda_step(plan.name, weights, cache, TOKEN)
    per_layer = len(plan.per_layer)
    assert step.n_kernels == plan.n_kernels(TINY) == TINY.n_layers * per_layer + len(plan.tail)
    for layer in range(TINY.n_layers):
        names = tuple(launch.name for launch in step.launches[layer * per_layer : (layer + 1) * per_layer])
        assert names == plan.per_layer
    assert tuple(launch.name for launch in step.launches[-len(plan.tail) :]) == plan.tail


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_bytes_per_step_is_the_rooflines(emulated: None, plan) -> None:
    weights, cache = _host_fp16(TINY, TINY_CTX)
    step = build_cuda_step(plan.name, weights, cache, TOKEN)
    assert step.bytes_per_step == decode_step(TINY, H200, 1, TINY_CTX, bytes_per_param=2).bytes_total


@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_n_args_total_is_what_the_launches_pass(emulated: None, plan) -> None:
    """The step's summed kernel arguments (what the launch-cost ladder prices) are the kernels' declared
    parameters, summed over the launch list: each launch is checked against its signature when it runs."""
    weights, cache = _host_fp16(TINY, TINY_CTX)
    step = build_cuda_step(plan.name, weights, cache, TOKEN)
    signatures = _signatures()
    assert step.n_args_total == sum(len(signatures[launch.kernel.name]) for launch in step.launches)
    assert step.n_args_total == sum(len(launch.args) for launch in step.launches)


def test_fp32_reference_is_the_float64_reference_in_float32() -> None:
    """``reference_logits_fp32`` (the GPU benchmark's check, on numpy here) computes the same step as
    ``decode_numpy.reference_logits``: within float32 rounding of it, and reading its inputs only."""
    weights, cache = _host_fp16(TINY, TINY_CTX)
    before = [k.copy() for k in cache.keys]
    expected = reference_logits(weights, cache, TOKEN)
    got = reference_logits_fp32(weights, cache, TOKEN, np)
    assert got.dtype == np.float32 and got.shape == (TINY.vocab,)
    rms = float(np.sqrt(np.mean(expected**2)))
    assert float(np.abs(got - expected).max()) <= 1e-5 * rms
    for k, k_before in zip(cache.keys, before, strict=True):
        np.testing.assert_array_equal(k, k_before)


def test_kernel_constants_are_read_from_the_source() -> None:
    constants = kernel_constants()
    assert constants["MV_WARPS"] * 32 <= 1024 and constants["ATT_KEYS"] >= 1
    assert {
        "MV_ROWS",
        "NORM_THREADS",
        "ATT_THREADS",
        "ATT_MAX_GROUP",
        "ATT_MAX_DHEAD",
        "ARGMAX_THREADS",
    } <= set(constants)


def test_llama_1b_fits_the_kernels(emulated: None) -> None:
    decode_cuda._check_shapes(LLAMA32_1B, 1024)  # raises naming the value if not


def test_unsupported_shape_is_refused_by_name(emulated: None) -> None:
    odd = ModelConfig("odd", 1, 100, 4, 2, 25, 200, 50, tied=True)
    with pytest.raises(ValueError, match="d_model = 100 must be a multiple of 8"):
        decode_cuda._check_shapes(odd, 16)


def _copy_cache(cache: KVCache) -> KVCache:
    return KVCache(tuple(k.copy() for k in cache.keys), tuple(v.copy() for v in cache.values))


# ------------------------------------------------------------------------------------------------------------
# Without a GPU: the real kernels, run on the CPU
# ------------------------------------------------------------------------------------------------------------


class _HostKernels:
    """Stands in for ``benchmarks.kernels.kernel``: the real kernels compiled for the host, each launched
    under the harness schedule currently set here (one for the whole step)."""

    def __init__(self) -> None:
        self.schedule: Schedule = "forward"

    def kernel(self, module_name: str, kernel_name: str) -> Callable[..., None]:
        host = kernel_module(module_name).get_function(kernel_name)

        def launch(grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...]) -> None:
            host(grid, block, args, schedule=self.schedule)

        return launch


@pytest.fixture
def host_kernels(monkeypatch: pytest.MonkeyPatch) -> _HostKernels:
    """Make decode_cuda build guarded numpy buffers (out-of-bounds writes are caught, reads give NaN) and
    launch the real kernels of decode.cu on the CPU."""
    shim = _numpy_cupy(
        zeros=lambda shape, dtype: guarded_array(np.zeros(shape, dtype)),
        full=lambda shape, fill_value, dtype: guarded_array(np.full(shape, fill_value, dtype)),
        asarray=guarded_array,
    )
    monkeypatch.setattr(decode_cuda, "cupy_module", lambda: shim)
    host = _HostKernels()
    monkeypatch.setattr(kernels, "kernel", host.kernel)
    return host


def _guarded(weights: DecodeWeights, cache: KVCache) -> tuple[DecodeWeights, KVCache]:
    """Guarded copies of every weight and cache array (the kernels' out-of-bounds reads see NaN)."""
    layers = tuple(
        LayerWeights(**{name: guarded_array(value) for name, value in vars(layer).items()})
        for layer in weights.layers
    )
    return (
        DecodeWeights(
            weights.cfg, guarded_array(weights.embedding), layers, guarded_array(weights.final_norm)
        ),
        KVCache(tuple(map(guarded_array, cache.keys)), tuple(map(guarded_array, cache.values))),
    )


@host_only
@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_host_step_of_the_real_kernels_matches_reference(host_kernels: _HostKernels, plan) -> None:
    weights, cache = _host_fp16(TINY, TINY_CTX)
    reference = reference_logits(weights, cache, TOKEN)
    step = build_cuda_step(plan.name, *_guarded(weights, cache), TOKEN)
    step.submit()
    _assert_fp16_close(step.logits, reference, f"{plan.name} (real kernels on the host)")
    logits, token = step.logits.copy(), int(step.next_token[0])
    assert token == int(np.argmax(logits))
    # Submitted again, under the other schedules and then the first, the step must repeat exactly: the
    # attention and sampling kernels write only in the block that finds their counter at its last value,
    # so a counter left above 0 would leave these NaN / -1 (the graph-replay test's check, on the host),
    # and interleaved, a block that combined partials before the others wrote them would differ.
    attention = next(launch for launch in step.launches if launch.name == "attention")
    attention_out, counters = attention.args[7], (attention.args[6], step.launches[-1].args[4])
    for schedule in ("reverse", "interleaved", "forward"):
        host_kernels.schedule = schedule
        attention_out.fill(np.nan)
        step.logits.fill(np.nan)
        step.next_token.fill(-1)
        step.submit()
        assert all(int(counter.sum()) == 0 for counter in counters), "in-kernel counters not reset"
        np.testing.assert_array_equal(step.logits, logits, err_msg=f"{schedule} submission differs")
        assert int(step.next_token[0]) == token


# ------------------------------------------------------------------------------------------------------------
# On a GPU
# ------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cuda_stream() -> Iterator[Any]:
    """A non-blocking stream (graph capture needs one), current for the module's GPU tests."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        yield stream
    stream.synchronize()


def _run(step: CudaDecodeStep, mode: str, stream: Any) -> np.ndarray:
    """One step in ``mode`` ("eager" or "graph"), waited for; returns the logits on the host."""
    if mode == "eager":
        step.submit()
    else:
        capture_graph(step.submit, stream).launch(stream)
    stream.synchronize()
    return step.logits.get()


@gpu_only
@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_tiny_step_matches_float64_reference(cuda_stream: Any, plan, mode: str) -> None:
    weights = random_weights_cuda(TINY)
    cache = random_kv_cache_cuda(TINY, TINY_CTX)
    reference = reference_logits(weights_to_host(weights), cache_to_host(cache), TOKEN)
    step = build_cuda_step(plan.name, weights, cache, TOKEN)
    logits = _run(step, mode, cuda_stream)
    _assert_fp16_close(logits, reference, f"{plan.name}, {mode}")
    assert int(step.next_token.get()[0]) == int(np.argmax(logits))


@gpu_only
@pytest.mark.gpu
def test_fp32_reference_on_the_gpu_matches_float64(cuda_stream: Any) -> None:
    """The benchmark's reference, computed by CuPy (cuBLAS) as ``test_cuda_decode_step`` computes it."""
    import cupy

    weights = random_weights_cuda(TINY)
    cache = random_kv_cache_cuda(TINY, TINY_CTX)
    expected = reference_logits(weights_to_host(weights), cache_to_host(cache), TOKEN)
    got = reference_logits_fp32(weights, cache, TOKEN, cupy).get()
    rms = float(np.sqrt(np.mean(expected**2)))
    assert float(np.abs(got - expected).max()) <= 1e-4 * rms


@gpu_only
@pytest.mark.gpu
@pytest.mark.parametrize("plan", PLANS, ids=lambda plan: plan.name)
def test_graph_replays_repeat_the_step(cuda_stream: Any, plan) -> None:
    weights = random_weights_cuda(TINY)
    step = build_cuda_step(plan.name, weights, random_kv_cache_cuda(TINY, TINY_CTX), TOKEN)
    graph = capture_graph(step.submit, cuda_stream)
    attention = next(launch for launch in step.launches if launch.name == "attention")
    attention_out, counters = attention.args[7], (attention.args[6], step.launches[-1].args[4])
    results = []
    for _ in range(3):
        # Stale outputs must not survive a replay: attention writes its output, and sampling its token, only
        # in the block that finds the in-kernel counter at its last value, so a counter left above 0 by the
        # previous replay would leave these NaN / -1.
        attention_out.fill(np.nan)
        step.next_token.fill(-1)
        graph.launch(cuda_stream)
        cuda_stream.synchronize()
        assert all(int(counter.sum()) == 0 for counter in counters), "in-kernel counters not reset"
        logits = step.logits.get()
        assert np.isfinite(logits).all(), "attention output not rewritten by the replay"
        assert int(step.next_token.get()[0]) == int(np.argmax(logits)), "sampling not rewritten by the replay"
        results.append(logits)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


@gpu_only
@pytest.mark.gpu
@pytest.mark.parametrize("rows, cols", [(1, 8), (37, 2048), (64, 264), (300, 8192)])
def test_matvec_kernel(cuda_stream: Any, rows: int, cols: int) -> None:
    import cupy

    rng = np.random.default_rng(rows * cols)
    weight = rng.standard_normal((rows, cols)).astype(np.float16)
    x = rng.standard_normal(cols).astype(np.float16)
    y = cupy.full(rows, np.nan, dtype=cupy.float32)
    matvec_launch("test", cupy.asarray(weight), cupy.asarray(x), y)()
    cuda_stream.synchronize()
    expected = weight.astype(np.float64) @ x.astype(np.float64)
    np.testing.assert_allclose(y.get(), expected, rtol=1e-4, atol=1e-4 * math.sqrt(cols))
