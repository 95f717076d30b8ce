"""One LLM decode step in numpy: a Llama-shaped forward pass for one token, cut into the seed's op plans.

The seed's demo 2 counts kernels per decode step (unfused: 12 per layer + 3; fused: 8 per layer + 3) and
charges each a fixed launch cost. On a CPU the same step is a sequence of numpy calls, each with its own fixed
cost (t0): this module runs that step for real, so a laptop shows where a real step falls between
"bytes / bandwidth" and "bytes / bandwidth + calls × t0". Its call list, op by op (``op_identity``,
``CallCounter``), is what the per-op model prices with each op's measured fixed cost
(``benchmarks/test_numpy_ops.py``), since those costs differ by 16× from op to op.

Also here, because the GPU step (``benchmarks/decode_cuda.py``) and the tests share them: the weight layout
(``DecodeWeights``), the KV cache (``KVCache``), their random contents (``draw_weights`` and
``draw_kv_cache``: one layout, scaling and draw order for numpy and CuPy), RoPE's angles, and a float64
reference forward (``reference_logits``) that every plan, on every device, is checked against
(``reference_error``; on the CPU at the benchmark's own shapes by ``check_against_reference``).

Conventions of the step (the reference defines them):

- Weights are stored as (out, in), as PyTorch's ``nn.Linear`` keeps them, so a projection is ``W @ x``.
  q, k and v rows are stacked in one matrix (``wqkv``), gate and up rows in another (``wgu``): the unfused
  plan multiplies by row blocks of them (views), the fused plan by the whole matrix: both read the same bytes.
- The cache holds ``ctx`` positions. The step decodes position ``ctx - 1``: it writes that position's key and
  value and attends over all ``ctx`` keys, which is exactly the KV traffic ``model.roofline.decode_step``
  counts for a context of ``ctx``.
- RoPE rotates the two halves of each head (Hugging Face Llama's ``rotate_half``) by angle
  ``pos · theta^(-2i/d_head)``; RMSNorm is ``x / sqrt(mean(x²) + eps) · w``; the MLP is
  ``down(silu(gate) · up)``; query head i reads KV head ``i // (n_heads / n_kv_heads)``; the output layer
  is the embedding table (tied).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.random_fill import random_into, random_into_converted
from model.launch import FUSED, UNFUSED, KernelPlan
from model.llm import ModelConfig

#: The CPU step's shape: Llama-shaped (GQA, gated MLP, tied output) and small enough to step in tens of ms,
#: yet with ≈ 375 MB of float32 weights, past the last-level cache of laptops and servers alike.
TINY_LLAMA_4L = ModelConfig(
    "tiny-llama-4L-1024",
    n_layers=4,
    d_model=1024,
    n_heads=16,
    n_kv_heads=4,
    d_head=64,
    d_ff=4096,
    vocab=32_000,
    tied=True,
)
#: The CPU step's weights are at least this many last-level caches (``cpu_decode_config``): a step that reads
#: them streams from DRAM, as ``analysis.host`` requires of any figure it calls "from DRAM" (its
#: ``DRAM_LLC_FACTOR``).
DRAM_LLC_FACTOR = 2


def cpu_decode_config(llc_bytes: int | None) -> ModelConfig:
    """The CPU benchmark's model on a machine whose last-level cache holds ``llc_bytes`` (None: unknown):
    ``TINY_LLAMA_4L``, with as many more layers as make its float32 weights ≥ ``DRAM_LLC_FACTOR`` × the
    LLC, named for its layer count ("tiny-llama-7L-1024"). Sized as ``host_bandwidth`` sizes its arrays, so
    that every machine's step reads its weights from DRAM (a 273 MB LLC needs 7 layers, 617 MB)."""
    base = TINY_LLAMA_4L
    wanted = DRAM_LLC_FACTOR * (llc_bytes or 0)
    fixed = 4 * (base.embedding_params + base.final_norm_params)  # float32: 4 B per parameter
    per_layer = 4 * base.layer_params
    n_layers = max(base.n_layers, math.ceil((wanted - fixed) / per_layer))
    if n_layers == base.n_layers:
        return base
    name = base.name.replace(f"-{base.n_layers}L-", f"-{n_layers}L-")
    return dataclasses.replace(base, name=name, n_layers=n_layers)


#: RoPE base of the Llama 3 family (config.json ``rope_theta``).
ROPE_THETA = 500_000.0
#: RMSNorm epsilon of the Llama 3 family (config.json ``rms_norm_eps``).
RMS_EPS = 1e-5
#: Seed of the random weights and cache of the benchmarks.
SEED = 0
#: A float32 step's logits lie within this fraction of the float64 reference's RMS
#: (``check_against_reference``). Measured on the benchmark's step (tiny-llama-4L-1024, ctx 1,024, tokens 123
#: and 1,234, both plans): a correct step 5.3e-6 to 6.2e-6; defects planted in the unfused plan: 0.24 with no
#: KV write (the position holding an older random entry; NaN logits with the check's poisoning), 4.3 with no
#: SiLU (act = gate·up), 5.2 to 5.5 with no RoPE, 31 with no residual add. 1e-3 lies near the geometric
#: middle of 6.2e-6 and 0.24 (1.2e-3): 160× the rounding of a correct step and 1/240 of the smallest defect.
REFERENCE_TOLERANCE = 1e-3

PLANS: dict[str, KernelPlan] = {UNFUSED.name: UNFUSED, FUSED.name: FUSED}
#: The seed's name of the attention kernel (``model.launch``): its op is timed on its own on the CPU.
ATTENTION = "attention"

Array = Any  # a numpy or CuPy array: the containers below hold either


@dataclass(frozen=True)
class LayerWeights:
    """One transformer layer's weights, (out, in) layout. Shapes: d = d_model, q = n_heads·d_head,
    kv = n_kv_heads·d_head, f = d_ff."""

    attn_norm: Array  # [d]
    wqkv: Array  # [q + 2·kv, d]: q rows, then k rows, then v rows
    wo: Array  # [d, q]
    mlp_norm: Array  # [d]
    wgu: Array  # [2·f, d]: gate rows, then up rows
    wd: Array  # [d, f]


@dataclass(frozen=True)
class DecodeWeights:
    """All weights of a decode step: the (tied) embedding table, the layers, the final norm."""

    cfg: ModelConfig
    embedding: Array  # [vocab, d]; also the output layer
    layers: tuple[LayerWeights, ...]
    final_norm: Array  # [d]


@dataclass(frozen=True)
class KVCache:
    """Keys and values of every layer, ``ctx`` positions each: per layer ``[n_kv_heads, ctx, d_head]``."""

    keys: tuple[Array, ...]
    values: tuple[Array, ...]

    @property
    def ctx(self) -> int:
        """Positions held per layer (the step decodes the last one)."""
        return int(self.keys[0].shape[1])


#: Draws a random array: ``draw(shape, std, mean)`` has the given shape, standard deviation and mean.
Draw = Callable[[tuple[int, ...], float, float], Array]


def uniform_draw(xp: Any, seed: int, dtype: Any) -> Draw:
    """A seeded ``Draw`` of uniform random numbers (faster to draw than normal numbers, and as good for a
    benchmark's operands) made by the array module ``xp`` (numpy, or CuPy: drawn on the GPU), drawn in
    float32 and stored as ``dtype``. numpy's are drawn and scaled on every core
    (``benchmarks.random_fill.random_into``: the numbers one thread draws), a chunk at a time where ``dtype``
    is not float32 (``random_into_converted``)."""
    rng = xp.random.default_rng(seed)

    def draw(shape: tuple[int, ...], std: float, mean: float) -> Array:
        def scale(values: Array) -> None:
            values -= 0.5
            values *= np.float32(std * math.sqrt(12.0))
            values += np.float32(mean)

        if xp is not np:
            values = rng.random(shape, dtype=xp.float32)
            scale(values)
            return values.astype(dtype, copy=False)
        if np.dtype(dtype) == np.float32:
            return random_into(rng, np.empty(shape, dtype=np.float32), then=scale)
        return random_into_converted(rng, np.empty(shape, dtype=dtype), then=scale)  # e.g. FP16

    return draw


def draw_weights(cfg: ModelConfig, draw: Draw) -> DecodeWeights:
    """Weights of ``cfg`` from ``draw``, scaled so activations stay near unit size: projection entries have
    standard deviation 1/sqrt(fan-in), norm weights are near 1. The one layout and draw order of the random
    weights of every device."""
    d, q, kv, f = cfg.d_model, cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head, cfg.d_ff
    layers = tuple(
        LayerWeights(
            attn_norm=draw((d,), 0.1, 1.0),
            wqkv=draw((q + 2 * kv, d), 1 / math.sqrt(d), 0.0),
            wo=draw((d, q), 1 / math.sqrt(q), 0.0),
            mlp_norm=draw((d,), 0.1, 1.0),
            wgu=draw((2 * f, d), 1 / math.sqrt(d), 0.0),
            wd=draw((d, f), 1 / math.sqrt(f), 0.0),
        )
        for _ in range(cfg.n_layers)
    )
    return DecodeWeights(
        cfg=cfg,
        embedding=draw((cfg.vocab, d), 1 / math.sqrt(d), 0.0),
        layers=layers,
        final_norm=draw((d,), 0.1, 1.0),
    )


def check_ctx(ctx: object) -> None:
    """Refuse a context length that is not a whole number of positions >= 1, naming the value."""
    if not isinstance(ctx, int) or ctx < 1:
        raise ValueError(f"ctx must be an integer >= 1, got {ctx!r}")


def draw_kv_cache(cfg: ModelConfig, ctx: int, draw: Draw) -> KVCache:
    """A KV cache of ``ctx`` positions per layer, keys and values from ``draw`` with unit variance."""
    check_ctx(ctx)
    shape = (cfg.n_kv_heads, ctx, cfg.d_head)
    keys = tuple(draw(shape, 1.0, 0.0) for _ in range(cfg.n_layers))
    values = tuple(draw(shape, 1.0, 0.0) for _ in range(cfg.n_layers))
    return KVCache(keys=keys, values=values)


def random_weights(cfg: ModelConfig, seed: int = SEED) -> DecodeWeights:
    """Random float32 weights of ``cfg`` (seeded, never zero), scaled as ``draw_weights`` says."""
    return draw_weights(cfg, uniform_draw(np, seed, np.float32))


def random_kv_cache(cfg: ModelConfig, ctx: int, seed: int = SEED + 1) -> KVCache:
    """A float32 KV cache of ``ctx`` positions per layer filled with random unit-variance keys and values."""
    return draw_kv_cache(cfg, ctx, uniform_draw(np, seed, np.float32))


def rope_angles(d_head: int, pos: int, theta: float = ROPE_THETA) -> tuple[np.ndarray, np.ndarray]:
    """Return (cos, sin) of RoPE's angles at position ``pos``, float64, ``d_head // 2`` each."""
    if d_head % 2:
        raise ValueError(f"d_head must be even for RoPE, got {d_head}")
    inv_freq = theta ** (-np.arange(0, d_head, 2, dtype=np.float64) / d_head)
    angles = pos * inv_freq
    return np.cos(angles), np.sin(angles)


def _as64(array: Array) -> np.ndarray:
    return np.asarray(array, dtype=np.float64)


#: Bytes of float64 rows ``matvec64`` widens at a time: a block stays in the core caches while BLAS reads it.
MATVEC64_BLOCK_BYTES = 2**20


def matvec64(matrix: Array, x: np.ndarray) -> np.ndarray:
    """``matrix @ x`` in float64 for a matrix of any float type, widened a block of rows at a time into one
    reused buffer: the same products as widening the whole matrix first, without writing (and faulting in)
    a float64 copy twice its size, which took most of the reference's second on the CPU decode model."""
    rows, cols = matrix.shape
    block = max(1, min(rows, MATVEC64_BLOCK_BYTES // (8 * cols)))
    buffer = np.empty((block, cols))
    out = np.empty(rows)
    for lo in range(0, rows, block):
        hi = min(rows, lo + block)
        widened = buffer[: hi - lo]
        widened[...] = matrix[lo:hi]
        np.matmul(widened, x, out=out[lo:hi])
    return out


def _rmsnorm64(x: np.ndarray, weight: Array) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x) + RMS_EPS) * _as64(weight)


def _rope64(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate ``x`` ([heads, d_head]) by RoPE: halves (x1, x2) → (x1·cos − x2·sin, x2·cos + x1·sin)."""
    half = x.shape[-1] // 2
    x1, x2 = x[:, :half], x[:, half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def reference_logits(weights: DecodeWeights, cache: KVCache, token: int) -> np.ndarray:
    """The decode step's logits ([vocab], float64) for ``token`` at position ``cache.ctx - 1``, in float64.

    ``weights`` and ``cache`` hold numpy arrays of any float type (FP16 weights of the GPU step are widened
    exactly); the cache is not modified.
    """
    cfg = weights.cfg
    ctx, pos = cache.ctx, cache.ctx - 1
    q_width, kv_width = cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head
    group = cfg.n_heads // cfg.n_kv_heads
    cos, sin = rope_angles(cfg.d_head, pos)
    h = _as64(weights.embedding[token])
    for layer, keys, values in zip(weights.layers, cache.keys, cache.values, strict=True):
        qkv = matvec64(layer.wqkv, _rmsnorm64(h, layer.attn_norm))
        q = _rope64(qkv[:q_width].reshape(cfg.n_heads, cfg.d_head), cos, sin)
        k = _rope64(qkv[q_width : q_width + kv_width].reshape(cfg.n_kv_heads, cfg.d_head), cos, sin)
        v = qkv[q_width + kv_width :].reshape(cfg.n_kv_heads, cfg.d_head)
        all_keys, all_values = _as64(keys).copy(), _as64(values).copy()
        all_keys[:, pos], all_values[:, pos] = k, v
        attn = np.empty((cfg.n_heads, cfg.d_head))
        for head in range(cfg.n_heads):
            kv_head = head // group
            scores = all_keys[kv_head, :ctx] @ q[head] / math.sqrt(cfg.d_head)
            p = np.exp(scores - scores.max())
            attn[head] = (p / p.sum()) @ all_values[kv_head, :ctx]
        h = h + matvec64(layer.wo, attn.reshape(-1))
        gate_up = matvec64(layer.wgu, _rmsnorm64(h, layer.mlp_norm))
        gate, up = gate_up[: cfg.d_ff], gate_up[cfg.d_ff :]
        h = h + matvec64(layer.wd, gate / (1.0 + np.exp(-gate)) * up)
    return matvec64(weights.embedding, _rmsnorm64(h, weights.final_norm))


def reference_error(logits: Array, reference: np.ndarray) -> float:
    """max |logits − reference| over the reference's RMS (a fraction; NaN or inf when ``logits`` are not
    finite). Logits of any float type, numpy or copied from a device."""
    rms = float(np.sqrt(np.mean(np.square(reference, dtype=np.float64))))
    return float(np.abs(np.asarray(logits, dtype=np.float64) - reference).max()) / rms


# ------------------------------------------------------------------------------------------------------------
# The numpy step
# ------------------------------------------------------------------------------------------------------------

#: An op's body: called with the numpy namespace to use (``numpy`` itself, or a ``CallCounter``).
OpBody = Callable[[Any], None]


@dataclass(frozen=True)
class Op:
    """One entry of a plan: ``name`` is the seed's kernel name (``model.launch``), ``body(xp)`` does the
    work with ``xp.<function>`` calls only, and ``reads`` are the weight and cache arrays it streams."""

    name: str
    body: OpBody
    reads: tuple[np.ndarray, ...]

    @property
    def bytes_read(self) -> int:
        """Bytes of weights and KV cache this op reads once per step (activations are not counted)."""
        return sum(array.nbytes for array in self.reads)


def op_identity(function: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """The op a numpy call counts as: ``"np.<function>(<argument classes>)"``, e.g.
    ``"np.max(3d, axis, keepdims, out=3d)"`` or ``"np.multiply(2d strided, 1d, out=2d strided)"``.

    A positional argument's class is ``"scalar"`` (a Python or numpy scalar) or ``"<ndim>d"``, with
    ``" strided"`` added for an array that is not C-contiguous; keyword arguments follow in alphabetical
    order, an array one as ``key=<class>``, any other by its name alone. These are what set a call's fixed
    cost (the decode step's calls on a 2-vCPU EPYC VM: ``multiply`` by a scalar 0.66 µs against 0.37 µs by a
    1-D array; a strided or broadcast 2-D ``multiply`` 0.87–0.99 µs against 0.37 µs contiguous; reductions
    with ``axis`` and ``out`` 2.0–2.4 µs); sizes are not part of it, so a tiny model's step has the ops of a
    large one. Whether ``out`` is also an input (in place) is not part of it either: it changed no cost
    beyond the noise there.
    """
    classes = [_argument_class(value) for value in args]
    classes += [
        f"{key}={_argument_class(value)}" if isinstance(value, np.ndarray) else key
        for key, value in sorted(kwargs.items())
    ]
    return f"np.{function}({', '.join(classes)})"


def _argument_class(value: Any) -> str:
    if not isinstance(value, np.ndarray):
        return "scalar"
    return f"{value.ndim}d" if value.flags.c_contiguous else f"{value.ndim}d strided"


class CallCounter:
    """Stands in for the numpy module and counts calls: ``xp.add(...)`` calls ``numpy.add`` and adds one.

    The plans call numpy only through their ``xp`` argument, so running a step once with a counter counts
    exactly the numpy calls the timed step (run with ``xp = numpy``) makes: ``calls`` in all, ``op_counts``
    by op (``op_identity``), which is the step's call list as the per-op cost model needs it.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.op_counts: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        function = getattr(np, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count(name, args, kwargs)
            return function(*args, **kwargs)

        return counted

    def count(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Count one call of ``numpy.<name>`` (before it runs: ``args`` hold the values it is called with)."""
        self.calls += 1
        self.op_counts[op_identity(name, args, kwargs)] += 1


@dataclass(frozen=True)
class NumpyDecodeStep:
    """A decode step as an ordered list of ops (``layers`` then ``tail``), with its preallocated output.

    ``run()`` executes one step, which writes position ``ctx - 1`` of ``cache``; afterwards ``logits``
    ([vocab], float32) and ``next_token`` (0-d, the argmax) hold its result.

    ``probe`` is the step's bandwidth probe: the very matrix-vector products by which the step streams its
    weights (the same matrices and views, the same BLAS calls, in the step's order), with nothing between
    them and writing into buffers of their own. ``run(ops=step.probe)`` reads every weight byte the step
    reads as fast as this machine's BLAS can, and the step does all of that plus the rest: the probe's time,
    measured in the same rounds as the step, is the bandwidth term of a lower bound that the step cannot beat
    (``analysis.decode``), where a STREAM figure measured minutes apart can be beaten by a step that caught
    the memory bus quieter.
    """

    plan: str
    cfg: ModelConfig
    ctx: int
    cache: KVCache
    layers: tuple[tuple[Op, ...], ...]
    tail: tuple[Op, ...]
    logits: np.ndarray
    next_token: np.ndarray
    probe: tuple[Op, ...]  # the bandwidth probe: every weight matrix-vector product of the step, alone

    @property
    def probe_bytes(self) -> int:
        """Bytes the bandwidth probe reads: every weight matrix of the step once."""
        return sum(op.bytes_read for op in self.probe)

    @property
    def ops(self) -> tuple[Op, ...]:
        """Every op of one step, in execution order."""
        return (*(op for layer in self.layers for op in layer), *self.tail)

    @property
    def bytes_per_step(self) -> int:
        """Bytes of weights and KV cache one step reads: the sum over its ops."""
        return sum(op.bytes_read for op in self.ops)

    @property
    def attention_ops(self) -> tuple[Op, ...]:
        """The attention op of every layer, in execution order."""
        return tuple(op for op in self.ops if op.name == ATTENTION)

    def run(self, xp: Any = np, ops: tuple[Op, ...] | None = None) -> None:
        """Run one step (or only ``ops``, some of its ops, in the order given), calling numpy through
        ``xp``."""
        for op in self.ops if ops is None else ops:
            op.body(xp)

    def count_calls(self, ops: tuple[Op, ...] | None = None) -> CallCounter:
        """Run one step (or only ``ops``) through a ``CallCounter`` and return it: the numpy calls made, in
        all and by op."""
        counter = CallCounter()
        self.run(counter, ops)
        return counter


def build_numpy_step(plan: str, weights: DecodeWeights, cache: KVCache, token: int) -> NumpyDecodeStep:
    """Build the ``plan`` ("unfused" or "fused") step of ``weights`` (float32) decoding ``token`` at position
    ``cache.ctx - 1``. Every buffer is allocated here; the step writes only into them and the cache."""
    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; known plans: {', '.join(PLANS)}")
    cfg = weights.cfg
    if not 0 <= token < cfg.vocab:
        raise ValueError(f"token must be in [0, {cfg.vocab}), got {token!r}")
    fused = plan == FUSED.name
    f32 = np.float32
    d, dh, ff = cfg.d_model, cfg.d_head, cfg.d_ff
    n_q, n_kv = cfg.n_heads, cfg.n_kv_heads
    q_width, kv_width, group = n_q * dh, n_kv * dh, n_q // n_kv
    ctx, pos, half = cache.ctx, cache.ctx - 1, dh // 2

    # Activations, float32 (shape comments: [rows, cols]).
    h = np.empty(d, f32)  # residual stream
    xn = np.empty(d, f32)  # normed input of the next projection
    qkv = np.empty(q_width + 2 * kv_width, f32)
    q, k, v = qkv[:q_width], qkv[q_width : q_width + kv_width], qkv[q_width + kv_width :]
    qk2 = qkv[: q_width + kv_width].reshape(n_q + n_kv, dh)  # q heads then k heads: RoPE rotates both
    rot_a, rot_b = np.empty((n_q + n_kv, dh), f32), np.empty((n_q + n_kv, dh), f32)
    scores = np.empty((n_kv, group, ctx), f32)
    row_stat = np.empty((n_kv, group, 1), f32)
    attn = np.empty(q_width, f32)
    o = np.empty(d, f32)
    gu = np.empty(2 * ff, f32)
    gate, up = gu[:ff], gu[ff:]
    silu_tmp, act = np.empty(ff, f32), np.empty(ff, f32)
    logits, next_token = np.empty(cfg.vocab, f32), np.empty((), np.intp)

    cos64, sin64 = rope_angles(dh, pos)
    scale = 1.0 / math.sqrt(dh)
    # RoPE as x·cos_full + swap(x)·sin_signed, where swap puts the second half first.
    cos_full = np.concatenate([cos64, cos64]).astype(f32)  # [dh]
    sin_lo, sin_hi = (-sin64).astype(f32), sin64.astype(f32)  # for the first and second output halves
    # The fused plan folds attention's 1/sqrt(d_head) into q's RoPE tables: one numpy call fewer per layer.
    row_scale = np.where(np.arange(n_q + n_kv) < n_q, scale if fused else 1.0, 1.0)[:, None]
    cos_rows = (row_scale * cos_full).astype(f32)  # [n_q + n_kv, dh]
    sin_lo_rows = (row_scale * sin_lo).astype(f32)  # [n_q + n_kv, half]
    sin_hi_rows = (row_scale * sin_hi).astype(f32)
    embedding_row = weights.embedding[token]  # a view: read by layer 0's first op, no gather op

    def rmsnorm(xp: Any, weight: np.ndarray) -> None:  # xn = h / rms(h) · weight: 3 calls
        inv_rms = 1.0 / math.sqrt(float(xp.dot(h, h)) / d + RMS_EPS)
        xp.multiply(h, inv_rms, out=xn)
        xp.multiply(xn, weight, out=xn)

    def rope(xp: Any, x: np.ndarray, cos_t: np.ndarray, sin_lo_t: np.ndarray, sin_hi_t: np.ndarray) -> None:
        rows = x.shape[0]
        a, b = rot_a[:rows], rot_b[:rows]
        xp.multiply(x, cos_t, out=a)
        xp.multiply(x[:, half:], sin_lo_t, out=b[:, :half])
        xp.multiply(x[:, :half], sin_hi_t, out=b[:, half:])
        xp.add(a, b, out=x)

    def write_kv(xp: Any, keys: np.ndarray, values: np.ndarray) -> None:
        xp.copyto(keys[:, pos], k.reshape(n_kv, dh))
        xp.copyto(values[:, pos], v.reshape(n_kv, dh))

    def attention(xp: Any, keys: np.ndarray, values: np.ndarray, scaled_q: bool) -> None:
        qg = q.reshape(n_kv, group, dh)  # query heads grouped by the KV head they read
        xp.matmul(qg, keys.transpose(0, 2, 1), out=scores)  # [n_kv, group, ctx]
        if not scaled_q:
            xp.multiply(scores, scale, out=scores)
        xp.max(scores, axis=-1, keepdims=True, out=row_stat)
        xp.subtract(scores, row_stat, out=scores)
        xp.exp(scores, out=scores)
        xp.sum(scores, axis=-1, keepdims=True, out=row_stat)
        xp.divide(scores, row_stat, out=scores)
        xp.matmul(scores, values, out=attn.reshape(n_kv, group, dh))

    def silu_mul(xp: Any) -> None:  # act = gate·up / (1 + exp(−gate))
        xp.negative(gate, out=silu_tmp)
        xp.exp(silu_tmp, out=silu_tmp)
        xp.add(silu_tmp, 1.0, out=silu_tmp)
        xp.multiply(gate, up, out=act)
        xp.divide(act, silu_tmp, out=act)

    def layer_ops(index: int, lw: LayerWeights, keys: np.ndarray, values: np.ndarray) -> tuple[Op, ...]:
        wq, wk, wv = lw.wqkv[:q_width], lw.wqkv[q_width : q_width + kv_width], lw.wqkv[q_width + kv_width :]
        wg, wu = lw.wgu[:ff], lw.wgu[ff:]
        first = index == 0
        first_reads = (embedding_row,) if first else ()

        def enter(xp: Any) -> None:
            """The residual stream enters the layer: the token's embedding row at layer 0; in the fused plan
            the previous layer's down projection is added here (the "residual" of "residual + RMSNorm")."""
            if first:
                xp.copyto(h, embedding_row)
            elif fused:
                xp.add(h, o, out=h)

        def attn_norm(xp: Any) -> None:
            enter(xp)
            rmsnorm(xp, lw.attn_norm)

        def qkv_proj(xp: Any) -> None:
            if fused:
                xp.matmul(lw.wqkv, xn, out=qkv)
            else:
                xp.matmul(wq, xn, out=q)
                xp.matmul(wk, xn, out=k)
                xp.matmul(wv, xn, out=v)

        def rope_q_k(xp: Any) -> None:
            if fused:
                rope(xp, qk2, cos_rows, sin_lo_rows, sin_hi_rows)
            else:
                rope(xp, qk2[:n_q], cos_full, sin_lo, sin_hi)
                rope(xp, qk2[n_q:], cos_full, sin_lo, sin_hi)

        def rope_write_kv(xp: Any) -> None:
            rope_q_k(xp)
            write_kv(xp, keys, values)

        def mlp_norm(xp: Any) -> None:
            if fused:
                xp.add(h, o, out=h)
            rmsnorm(xp, lw.mlp_norm)

        def gate_up_silu(xp: Any) -> None:
            xp.matmul(lw.wgu, xn, out=gu)
            silu_mul(xp)

        def gate_up(xp: Any) -> None:
            xp.matmul(wg, xn, out=gate)
            xp.matmul(wu, xn, out=up)

        def residual(xp: Any) -> None:
            xp.add(h, o, out=h)

        norm_reads = (*first_reads, lw.attn_norm)
        attention_op = Op(ATTENTION, lambda xp: attention(xp, keys, values, fused), (keys, values))
        out_proj = Op("output projection", lambda xp: xp.matmul(lw.wo, attn, out=o), (lw.wo,))
        down = Op("down projection", lambda xp: xp.matmul(lw.wd, act, out=o), (lw.wd,))
        if fused:
            return (
                Op("residual + RMSNorm", attn_norm, norm_reads),
                Op("QKV projection", qkv_proj, (lw.wqkv,)),
                Op("RoPE + write KV", rope_write_kv, ()),
                attention_op,
                out_proj,
                Op("residual + RMSNorm", mlp_norm, (lw.mlp_norm,)),
                Op("gate/up projection + SiLU × mul", gate_up_silu, (lw.wgu,)),
                down,
            )
        return (
            Op("RMSNorm", attn_norm, norm_reads),
            Op("QKV projection", qkv_proj, (wq, wk, wv)),
            Op("RoPE", rope_q_k, ()),
            Op("write KV cache", lambda xp: write_kv(xp, keys, values), ()),
            attention_op,
            out_proj,
            Op("residual add", residual, ()),
            Op("RMSNorm", mlp_norm, (lw.mlp_norm,)),
            Op("gate/up projection", gate_up, (wg, wu)),
            Op("SiLU × mul", silu_mul, ()),
            down,
            Op("residual add", residual, ()),
        )

    def final_norm(xp: Any) -> None:
        if fused:
            xp.add(h, o, out=h)
        rmsnorm(xp, weights.final_norm)

    def probe_op(name: str, matrix: np.ndarray, x: np.ndarray) -> Op:
        """``matrix @ x`` as the step computes it, into a buffer of the probe's own."""
        out = np.empty(matrix.shape[0], f32)
        return Op(name, lambda xp: xp.matmul(matrix, x, out=out), (matrix,))

    def probe_layer(lw: LayerWeights) -> tuple[Op, ...]:
        if fused:
            qkv_ops = (probe_op("QKV projection", lw.wqkv, xn),)
            gu_ops = (probe_op("gate/up projection", lw.wgu, xn),)
        else:
            wq, wk = lw.wqkv[:q_width], lw.wqkv[q_width : q_width + kv_width]
            wv = lw.wqkv[q_width + kv_width :]
            qkv_ops = tuple(probe_op("QKV projection", w, xn) for w in (wq, wk, wv))
            gu_ops = tuple(probe_op("gate/up projection", w, xn) for w in (lw.wgu[:ff], lw.wgu[ff:]))
        return (
            *qkv_ops,
            probe_op("output projection", lw.wo, attn),
            *gu_ops,
            probe_op("down projection", lw.wd, act),
        )

    tail = (
        Op("final RMSNorm", final_norm, (weights.final_norm,)),
        Op("output layer", lambda xp: xp.matmul(weights.embedding, xn, out=logits), (weights.embedding,)),
        Op("sampling", lambda xp: xp.argmax(logits, out=next_token), ()),
    )
    layers = tuple(
        layer_ops(index, lw, keys, values)
        for index, (lw, keys, values) in enumerate(zip(weights.layers, cache.keys, cache.values, strict=True))
    )
    return NumpyDecodeStep(
        plan=plan,
        cfg=cfg,
        ctx=ctx,
        cache=cache,
        layers=layers,
        tail=tail,
        logits=logits,
        next_token=next_token,
        probe=(
            *(op for lw in weights.layers for op in probe_layer(lw)),
            probe_op("output layer", weights.embedding, xn),
        ),
    )


def check_against_reference(
    step: NumpyDecodeStep, reference: np.ndarray, tolerance: float = REFERENCE_TOLERANCE, xp: Any = np
) -> float:
    """Run ``step`` once, calling numpy through ``xp`` (a ``CallCounter`` counts the checked step's calls
    instead of running another step for it), and require its logits within ``tolerance`` × RMS of
    ``reference`` (``reference_logits`` of the step's weights, cache and token); return the error as that
    fraction.

    The position the step writes in its cache is set to NaN first, so a step that does not write its key
    and value (or writes them elsewhere) reads NaN instead of an earlier step's correct entries, and fails.
    Raises ``AssertionError`` naming the plan, the shape and the error figure.
    """
    pos = step.ctx - 1
    for keys, values in zip(step.cache.keys, step.cache.values, strict=True):
        keys[:, pos] = np.nan
        values[:, pos] = np.nan
    step.run(xp)
    error = reference_error(step.logits, reference)
    if not error <= tolerance:
        what = "non-finite logits" if not math.isfinite(error) else f"error {error:.3g} × the reference's RMS"
        raise AssertionError(
            f"{step.plan} step of {step.cfg.name}, ctx {step.ctx:,}: {what} against the float64 reference "
            f"(tolerance {tolerance:g})"
        )
    return error
