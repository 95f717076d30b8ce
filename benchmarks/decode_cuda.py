"""One LLM decode step on the GPU (CuPy): the seed's kernel plans as real kernels, launchable eagerly or as a
captured CUDA graph.

Every op of a plan is one ``RawKernel`` of ``benchmarks/kernels/decode.cu``, so ``len(step.launches)`` is the
kernel count the seed assumes (unfused: 12 per layer + 3; fused: 8 per layer + 3), read from what the step
launches. The whole step is device work on preallocated buffers (no allocation, no copy, no synchronise, no
library call), so one capture of ``step.submit()`` replays the whole step.

Why the matrix-vector products are our own kernels: CuPy refuses cuBLAS inside a stream capture. Its
``cupy_backends/cuda/libs/cublas.pyx``, ``setStream``, raises ``NotImplementedError("calling cuBLAS API
during stream capture is currently unsupported")`` when ``runtime.streamIsCapturing(stream)`` (read in CuPy's
v14 source, and the message found in the installed 14.2 wheel's compiled module), and every cuBLAS-backed
``cupy.matmul``/``dot`` sets the stream first. ``decode.cu``'s ``matvec`` reads 16 bytes per load, two rows
per warp, eight loads per row in flight, FP32 accumulation.

Shapes, layout and numerics follow ``benchmarks/decode_numpy.py`` (its ``reference_logits`` is the float64
reference): FP16 weights and KV cache, FP32 residual stream and accumulation, FP16 inputs of every matrix-
vector product, greedy sampling.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from benchmarks import kernels
from benchmarks.cuda import cupy_module
from benchmarks.decode_numpy import (
    PLANS,
    RMS_EPS,
    SEED,
    DecodeWeights,
    KVCache,
    LayerWeights,
    check_ctx,
    draw_kv_cache,
    draw_weights,
    rope_angles,
    uniform_draw,
)
from model.launch import FUSED
from model.llm import ModelConfig

#: The kernel module (``benchmarks/kernels/decode.cu``).
MODULE = "decode"
#: Threads per block of the element-wise kernels (RoPE, KV write, residual add, SiLU × mul).
ELEMENTWISE_THREADS = 256
#: Logits each thread of the argmax kernel scans (sets its grid).
ARGMAX_PER_THREAD = 4


@functools.cache
def kernel_constants() -> dict[str, int]:
    """The ``#define NAME <integer>`` launch constants of ``decode.cu`` (block sizes, rows per warp, ...):
    read from the source, so grids computed here cannot drift from what the kernels assume."""
    pattern = re.compile(r"^#define\s+([A-Z_]+)\s+(\d+)\b", re.MULTILINE)
    return {name: int(value) for name, value in pattern.findall(kernels.source(MODULE))}


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel launch of a step: ``name`` is the seed's kernel name (``model.launch``), ``kernel`` the
    ``cupy.RawKernel``, ``args`` CuPy arrays and numpy scalars in the kernel's parameter order, and
    ``bytes_read`` the weight and KV-cache bytes it streams (activations are not counted)."""

    name: str
    kernel: Any
    grid: tuple[int, ...]
    block: tuple[int, ...]
    args: tuple[Any, ...]
    bytes_read: int

    def __call__(self) -> None:
        """Launch on the current stream, without waiting."""
        self.kernel(self.grid, self.block, self.args)


@dataclass(frozen=True)
class CudaDecodeStep:
    """A decode step as its launch list. ``submit()`` queues the step on the current stream; afterwards
    ``logits`` ([vocab], FP32) and ``next_token`` ([1], int32, the argmax) hold its result. ``token`` ([1],
    int32) is the input token, read on the device by the first kernel."""

    plan: str
    cfg: ModelConfig
    ctx: int
    launches: tuple[KernelLaunch, ...]
    token: Any
    logits: Any
    next_token: Any

    @property
    def n_kernels(self) -> int:
        """Kernels launched per step: the length of the launch list."""
        return len(self.launches)

    @property
    def n_args_total(self) -> int:
        """Kernel arguments summed over the step's launches: with ``n_kernels``, what the launch-cost ladder
        (cost = a + b·arguments per launch) needs to predict the host's cost of launching the step."""
        return sum(len(launch.args) for launch in self.launches)

    @property
    def bytes_per_step(self) -> int:
        """Bytes of weights and KV cache one step reads: the sum over its launches."""
        return sum(launch.bytes_read for launch in self.launches)

    def submit(self) -> None:
        """Queue every kernel of one step on the current stream, without waiting."""
        for launch in self.launches:
            launch.kernel(launch.grid, launch.block, launch.args)


def _check_shapes(cfg: ModelConfig, ctx: int) -> None:
    """Refuse a shape the kernels do not handle, naming the value."""
    constants = kernel_constants()
    widths = {"d_model": cfg.d_model, "n_heads·d_head": cfg.n_heads * cfg.d_head, "d_ff": cfg.d_ff}
    for name, value in widths.items():
        if value % 8:
            raise ValueError(f"{cfg.name}: {name} = {value} must be a multiple of 8 (16-byte loads of FP16)")
    if cfg.d_head % 8 or cfg.d_head > constants["ATT_MAX_DHEAD"]:
        raise ValueError(
            f"{cfg.name}: d_head = {cfg.d_head} must be a multiple of 8, at most {constants['ATT_MAX_DHEAD']}"
        )
    group = cfg.n_heads // cfg.n_kv_heads
    if group > constants["ATT_MAX_GROUP"]:
        raise ValueError(
            f"{cfg.name}: n_heads / n_kv_heads = {group} query heads per KV head, at most "
            f"{constants['ATT_MAX_GROUP']}"
        )
    check_ctx(ctx)


def random_weights_cuda(cfg: ModelConfig, seed: int = SEED) -> DecodeWeights:
    """Random FP16 weights of ``cfg`` on the GPU (seeded, drawn there: no host copy of gigabytes), laid out
    and scaled by ``decode_numpy.draw_weights``, as the CPU step's."""
    cupy = cupy_module()
    return draw_weights(cfg, uniform_draw(cupy, seed, cupy.float16))


def random_kv_cache_cuda(cfg: ModelConfig, ctx: int, seed: int = SEED + 1) -> KVCache:
    """An FP16 KV cache on the GPU, ``ctx`` positions per layer, random unit-variance keys and values."""
    cupy = cupy_module()
    return draw_kv_cache(cfg, ctx, uniform_draw(cupy, seed, cupy.float16))


def weights_to_host(weights: DecodeWeights) -> DecodeWeights:
    """The same weights as numpy arrays (for the float64 reference)."""
    cupy = cupy_module()
    layers = tuple(
        LayerWeights(**{field.name: cupy.asnumpy(getattr(layer, field.name)) for field in fields(layer)})
        for layer in weights.layers
    )
    return DecodeWeights(
        cfg=weights.cfg,
        embedding=cupy.asnumpy(weights.embedding),
        layers=layers,
        final_norm=cupy.asnumpy(weights.final_norm),
    )


def cache_to_host(cache: KVCache) -> KVCache:
    """The same KV cache as numpy arrays (a copy: later steps do not change it)."""
    cupy = cupy_module()
    return KVCache(
        keys=tuple(cupy.asnumpy(k) for k in cache.keys), values=tuple(cupy.asnumpy(v) for v in cache.values)
    )


def reference_logits_fp32(weights: DecodeWeights, cache: KVCache, token: int, xp: Any) -> Any:
    """The decode step's logits ([vocab], float32) for ``token`` at position ``cache.ctx - 1``, computed by
    the array module ``xp`` (CuPy: on the GPU, with cuBLAS, in well under a second for Llama-3.2-1B) in
    float32 throughout from the same (FP16) weights and cache, which are only read: the reference the GPU
    step is checked against at its own shapes before it is timed. The same equations as
    ``decode_numpy.reference_logits`` (float64, on the host: too slow and too large at 1B parameters), with
    the heads of a KV group attended together."""
    cfg = weights.cfg
    f32 = xp.float32
    ctx, pos = cache.ctx, cache.ctx - 1
    n_q, n_kv, dh = cfg.n_heads, cfg.n_kv_heads, cfg.d_head
    q_width, kv_width, group = n_q * dh, n_kv * dh, n_q // n_kv
    cos64, sin64 = rope_angles(dh, pos)
    cos, sin = xp.asarray(cos64, dtype=f32), xp.asarray(sin64, dtype=f32)

    def norm(x: Any, weight: Any) -> Any:
        return x / xp.sqrt(xp.mean(x * x) + f32(RMS_EPS)) * weight.astype(f32)

    def rope(x: Any) -> Any:  # [heads, d_head]
        x1, x2 = x[:, : dh // 2], x[:, dh // 2 :]
        return xp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def project(weight: Any, x: Any) -> Any:
        return weight.astype(f32) @ x

    h = weights.embedding[token].astype(f32)
    for layer, keys, values in zip(weights.layers, cache.keys, cache.values, strict=True):
        qkv = project(layer.wqkv, norm(h, layer.attn_norm))
        q = rope(qkv[:q_width].reshape(n_q, dh)).reshape(n_kv, group, dh)
        k = rope(qkv[q_width : q_width + kv_width].reshape(n_kv, dh))
        v = qkv[q_width + kv_width :].reshape(n_kv, dh)
        all_keys, all_values = keys[:, :ctx].astype(f32), values[:, :ctx].astype(f32)  # copies
        all_keys[:, pos], all_values[:, pos] = k, v
        scores = q @ all_keys.transpose(0, 2, 1) / f32(math.sqrt(dh))  # [n_kv, group, ctx]
        p = xp.exp(scores - scores.max(axis=-1, keepdims=True))
        attn = (p / p.sum(axis=-1, keepdims=True)) @ all_values  # [n_kv, group, d_head]
        h = h + project(layer.wo, attn.reshape(-1))
        gate_up = project(layer.wgu, norm(h, layer.mlp_norm))
        gate, up = gate_up[: cfg.d_ff], gate_up[cfg.d_ff :]
        h = h + project(layer.wd, gate / (f32(1) + xp.exp(-gate)) * up)
    return project(weights.embedding, norm(h, weights.final_norm))


def _blocks(n_threads: int, per_block: int) -> tuple[int]:
    return (max(1, math.ceil(n_threads / per_block)),)


def matvec_launch(name: str, weight: Any, x: Any, y: Any) -> KernelLaunch:
    """A launch of ``y = weight @ x``: weight [rows, cols] FP16, x [cols] FP16, y [rows] FP32."""
    rows, cols = weight.shape
    if cols % 8:
        raise ValueError(f"matvec {name}: cols = {cols} must be a multiple of 8 (16-byte loads of FP16)")
    constants = kernel_constants()
    warps = constants["MV_WARPS"]
    return KernelLaunch(
        name=name,
        kernel=kernels.kernel(MODULE, "matvec"),
        grid=_blocks(rows, warps * constants["MV_ROWS"]),
        block=(warps * 32,),
        args=(weight, x, y, np.int32(rows), np.int32(cols)),
        bytes_read=weight.nbytes,
    )


def elementwise_launch(name: str, kernel: str, n_threads: int, args: tuple[Any, ...]) -> KernelLaunch:
    """A launch of the element-wise ``kernel`` of ``decode.cu``: one thread per element of ``n_threads``,
    ``ELEMENTWISE_THREADS`` per block; it reads activations only (no weight or KV-cache bytes)."""
    return KernelLaunch(
        name=name,
        kernel=kernels.kernel(MODULE, kernel),
        grid=_blocks(n_threads, ELEMENTWISE_THREADS),
        block=(ELEMENTWISE_THREADS,),
        args=args,
        bytes_read=0,
    )


def build_cuda_step(plan: str, weights: DecodeWeights, cache: KVCache, token: int) -> CudaDecodeStep:
    """Build the ``plan`` ("unfused" or "fused") step of ``weights`` (FP16, on the GPU) decoding ``token`` at
    position ``cache.ctx - 1``: its launch list and every buffer it writes (allocated here, once)."""
    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; known plans: {', '.join(PLANS)}")
    cupy = cupy_module()
    cfg, ctx = weights.cfg, cache.ctx
    _check_shapes(cfg, ctx)
    fused = plan == FUSED.name
    c = kernel_constants()
    k = functools.partial(kernels.kernel, MODULE)
    f32, f16, i32 = cupy.float32, cupy.float16, np.int32
    d, dh, ff = cfg.d_model, cfg.d_head, cfg.d_ff
    n_q, n_kv = cfg.n_heads, cfg.n_kv_heads
    q_width, kv_width, group = n_q * dh, n_kv * dh, n_q // n_kv
    pos = ctx - 1
    n_splits = math.ceil(ctx / c["ATT_KEYS"])
    argmax_blocks = math.ceil(cfg.vocab / (c["ARGMAX_THREADS"] * ARGMAX_PER_THREAD))

    # Buffers, written only by the step's kernels.
    token_buf = cupy.full((1,), token, dtype=cupy.int32)
    h = cupy.zeros(d, f32)  # residual stream
    xn = cupy.zeros(d, f16)  # normed input of the next projection
    qkv = cupy.zeros(q_width + 2 * kv_width, f32)
    attn = cupy.zeros(q_width, f16)
    o = cupy.zeros(d, f32)
    gu = cupy.zeros(2 * ff, f32)  # unfused plan only: gate and up before SiLU × mul
    act = cupy.zeros(ff, f16)
    logits = cupy.zeros(cfg.vocab, f32)
    next_token = cupy.zeros((1,), cupy.int32)
    part_acc = cupy.zeros(n_kv * n_splits * group * dh, f32)
    part_max = cupy.zeros(n_kv * n_splits * group, f32)
    part_sum = cupy.zeros(n_kv * n_splits * group, f32)
    att_counters = cupy.zeros(n_kv, cupy.uint32)
    arg_value = cupy.zeros(argmax_blocks, f32)
    arg_index = cupy.zeros(argmax_blocks, cupy.int32)
    arg_counter = cupy.zeros(1, cupy.uint32)
    cos64, sin64 = rope_angles(dh, pos)
    cos_t, sin_t = cupy.asarray(cos64, dtype=f32), cupy.asarray(sin64, dtype=f32)
    scale, eps = np.float32(1.0 / math.sqrt(dh)), np.float32(RMS_EPS)

    norm_block, norm_grid = (c["NORM_THREADS"],), (1,)
    half_pairs = (n_q + n_kv) * dh // 2

    def norm(name: str, layer_norm: Any, add_residual: bool, first: bool) -> KernelLaunch:
        if first:  # layer 0: the embedding row of the token, read in place
            args = (weights.embedding, token_buf, h, layer_norm, xn, i32(d), eps)
            read = weights.embedding[0].nbytes + layer_norm.nbytes
            return KernelLaunch(name, k("embed_rmsnorm"), norm_grid, norm_block, args, read)
        if add_residual:
            args = (h, o, layer_norm, xn, i32(d), eps)
            return KernelLaunch(name, k("add_rmsnorm"), norm_grid, norm_block, args, layer_norm.nbytes)
        args = (h, layer_norm, xn, i32(d), eps)
        return KernelLaunch(name, k("rmsnorm"), norm_grid, norm_block, args, layer_norm.nbytes)

    def residual() -> KernelLaunch:
        return elementwise_launch("residual add", "residual_add", d, (h, o, i32(d)))

    def layer_launches(index: int, lw: LayerWeights, keys: Any, values: Any) -> list[KernelLaunch]:
        first = index == 0
        attention = KernelLaunch(
            "attention",
            k("attention"),
            (n_splits, n_kv),
            (c["ATT_THREADS"],),
            (
                qkv,
                keys,
                values,
                part_acc,
                part_max,
                part_sum,
                att_counters,
                attn,
                i32(n_q),
                i32(n_kv),
                i32(dh),
                i32(ctx),
                scale,
            ),
            keys.nbytes + values.nbytes,
        )
        qkv_proj = matvec_launch("QKV projection", lw.wqkv, xn, qkv)
        out_proj = matvec_launch("output projection", lw.wo, attn, o)
        down = matvec_launch("down projection", lw.wd, act, o)
        if fused:
            rope_kv = elementwise_launch(
                "RoPE + write KV",
                "rope_kv_write",
                half_pairs + kv_width,
                (qkv, cos_t, sin_t, keys, values, i32(n_q), i32(n_kv), i32(dh), i32(ctx), i32(pos)),
            )
            gate_up_silu = KernelLaunch(
                "gate/up projection + SiLU × mul",
                k("matvec_gateup_silu"),
                _blocks(ff, c["MV_WARPS"]),
                (c["MV_WARPS"] * 32,),
                (lw.wgu, xn, act, i32(ff), i32(d)),
                lw.wgu.nbytes,
            )
            return [
                norm("residual + RMSNorm", lw.attn_norm, add_residual=True, first=first),
                qkv_proj,
                rope_kv,
                attention,
                out_proj,
                norm("residual + RMSNorm", lw.mlp_norm, add_residual=True, first=False),
                gate_up_silu,
                down,
            ]
        rope = elementwise_launch("RoPE", "rope", half_pairs, (qkv, cos_t, sin_t, i32(n_q + n_kv), i32(dh)))
        kv_write = elementwise_launch(
            "write KV cache",
            "kv_write",
            kv_width,
            (qkv, keys, values, i32(n_q), i32(n_kv), i32(dh), i32(ctx), i32(pos)),
        )
        silu = elementwise_launch("SiLU × mul", "silu_mul_kernel", ff, (gu, act, i32(ff)))
        return [
            norm("RMSNorm", lw.attn_norm, add_residual=False, first=first),
            qkv_proj,
            rope,
            kv_write,
            attention,
            out_proj,
            residual(),
            norm("RMSNorm", lw.mlp_norm, add_residual=False, first=False),
            matvec_launch("gate/up projection", lw.wgu, xn, gu),
            silu,
            down,
            residual(),
        ]

    launches: list[KernelLaunch] = []
    for index, (lw, keys, values) in enumerate(zip(weights.layers, cache.keys, cache.values, strict=True)):
        launches.extend(layer_launches(index, lw, keys, values))
    launches.append(norm("final RMSNorm", weights.final_norm, add_residual=fused, first=False))
    launches.append(matvec_launch("output layer", weights.embedding, xn, logits))
    launches.append(
        KernelLaunch(
            "sampling",
            k("argmax"),
            (argmax_blocks,),
            (c["ARGMAX_THREADS"],),
            (logits, i32(cfg.vocab), arg_value, arg_index, arg_counter, next_token),
            0,
        )
    )
    return CudaDecodeStep(
        plan=plan,
        cfg=cfg,
        ctx=ctx,
        launches=tuple(launches),
        token=token_buf,
        logits=logits,
        next_token=next_token,
    )
