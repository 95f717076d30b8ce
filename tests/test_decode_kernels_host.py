"""Every kernel of ``benchmarks/kernels/decode.cu``, its real source run on the CPU (``tests/host_cuda``),
against a float64 numpy reference on awkward shapes.

Each launch runs under every schedule of the harness (blocks one after another with fibers and blocks
forward, then reverse; then all blocks interleaved, switched at barriers, shuffles and atomics) on guarded
copies of its buffers, and must end bit-identical in all; reads of memory no one wrote (fresh outputs,
shared memory, past an array's end) read NaN. Interleaved, a block that combined other blocks' partials
before they were written (the first block to reach the counter instead of the last) gives a different
output. Grids and block sizes are the ones ``benchmarks/decode_cuda.py`` launches.
The whole step, every kernel in plan order, is tested in ``tests/test_decode_gpu.py``.

Tolerances: pure data movement (FP32 → FP16 of a value, an FP32 add) must be bit-exact, since the harness
rounds as the GPU does; arithmetic in FP32 is held to a bound of its rounding error, and an FP16 output to
one FP16 unit in the last place of the float64 reference (rounding to nearest is half of it; the FP32
arithmetic before the rounding may land on the other side of a boundary).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from benchmarks.decode_cuda import ARGMAX_PER_THREAD, ELEMENTWISE_THREADS, kernel_constants
from benchmarks.decode_numpy import RMS_EPS, rope_angles
from tests.host_cuda import (
    HostKernel,
    guarded_array,
    guarded_empty,
    kernel_module,
    launch_each_schedule,
    unavailable_reason,
)

_REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")

#: The unit roundoff of FP32.
U32 = 2.0**-24
#: Absolute slack on FP16 outputs for FP32 rounding before the FP16 rounding, on values of order 1: 100×
#: below FP16's resolution there.
FP32_SLACK = 1e-5
C = kernel_constants()
EPS = np.float32(RMS_EPS)


def _kernel(name: str) -> HostKernel:
    return kernel_module("decode").get_function(name)


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(key)


def _f16(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _assert_fp16_rounds(got: np.ndarray, reference: np.ndarray, what: str) -> None:
    """``got`` (FP16) is ``reference`` (float64) rounded to FP16, within one FP16 unit in the last place
    plus ``FP32_SLACK``."""
    assert got.dtype == np.float16 and np.isfinite(got).all(), f"{what}: not finite FP16"
    ulp = np.spacing(np.abs(reference).astype(np.float16)).astype(np.float64)
    error = np.abs(got.astype(np.float64) - reference)
    worst = int(np.argmax(error - ulp))
    assert (error <= ulp + FP32_SLACK).all(), (
        f"{what}: element {worst} is {float(got.flat[worst])!r}, reference {float(reference.flat[worst])!r}"
    )


def _blocks(n: int, per_block: int) -> tuple[int]:
    return (max(1, math.ceil(n / per_block)),)


# ------------------------------------------------------------------------------------------------------------
# Matrix-vector products
# ------------------------------------------------------------------------------------------------------------

#: (rows, cols): one row of one chunk; odd rows (a warp with one row) not a multiple of MV_WARPS·MV_ROWS (a
#: block with an idle warp) and 8·odd columns (lanes with 1 or 2 chunks); the unrolled batch of
#: 32·MV_UNROLL chunks plus a 37-chunk remainder; two full batches exactly.
MATVEC_SHAPES = [
    (1, 8),
    (37, 8 * 37),
    (13, 8 * (32 * C["MV_UNROLL"] + 37)),
    (24, 8 * 2 * 32 * C["MV_UNROLL"]),
]


def _dot_bound(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A bound of the FP32 rounding error of each row's dot product: at most cols + 32 roundings (each
    lane's chain, then the butterfly) of at most the sum of |terms|."""
    return (w.shape[1] + 32) * U32 * (np.abs(w.astype(np.float64)) @ np.abs(x.astype(np.float64)))


@pytest.mark.parametrize(("rows", "cols"), MATVEC_SHAPES)
def test_matvec(rows: int, cols: int) -> None:
    rng = _rng(rows, cols)
    w, x = _f16(rng, rows, cols, scale=1 / math.sqrt(cols)), _f16(rng, cols)
    grid = _blocks(rows, C["MV_WARPS"] * C["MV_ROWS"])
    args = (w, x, guarded_empty(rows, np.float32), np.int32(rows), np.int32(cols))
    y = launch_each_schedule(_kernel("matvec"), grid, (C["MV_WARPS"] * 32,), args)[2]
    expected = w.astype(np.float64) @ x.astype(np.float64)
    assert np.isfinite(y).all()
    assert (np.abs(y - expected) <= _dot_bound(w, x)).all()


@pytest.mark.parametrize(("d_ff", "cols"), [(1, 8), (13, 8 * 37), (6, 8 * (32 * C["MV_UNROLL"] + 37))])
def test_matvec_gateup_silu(d_ff: int, cols: int) -> None:
    rng = _rng(d_ff, cols)
    w, x = _f16(rng, 2 * d_ff, cols, scale=2 / math.sqrt(cols)), _f16(rng, cols)
    args = (w, x, guarded_empty(d_ff, np.float16), np.int32(d_ff), np.int32(cols))
    act = launch_each_schedule(_kernel("matvec_gateup_silu"), _blocks(d_ff, C["MV_WARPS"]), (128,), args)[2]
    gate_up = w.astype(np.float64) @ x.astype(np.float64)
    gate, up = gate_up[:d_ff], gate_up[d_ff:]
    _assert_fp16_rounds(act, gate / (1 + np.exp(-gate)) * up, "act")


# ------------------------------------------------------------------------------------------------------------
# RMSNorm and the residual stream
# ------------------------------------------------------------------------------------------------------------

#: d: fewer elements than NORM_THREADS, not a multiple of it, several per thread.
NORM_WIDTHS = [8, 200, 5 * C["NORM_THREADS"] + 8]


def _rmsnorm64(h: np.ndarray, weight: np.ndarray) -> np.ndarray:
    h64 = h.astype(np.float64)
    return h64 / np.sqrt(np.mean(h64**2) + float(EPS)) * weight.astype(np.float64)


@pytest.mark.parametrize("d", NORM_WIDTHS)
def test_embed_rmsnorm(d: int) -> None:
    rng = _rng(d, 1)
    vocab, token = 7, 5
    embedding, weight = _f16(rng, vocab, d), (1 + 0.1 * _f32(rng, d)).astype(np.float16)
    args = (
        embedding,
        np.array([token], np.int32),
        guarded_empty(d, np.float32),
        weight,
        guarded_empty(d, np.float16),
        np.int32(d),
        EPS,
    )
    _, _, h, _, y, _, _ = launch_each_schedule(_kernel("embed_rmsnorm"), (1,), (C["NORM_THREADS"],), args)
    np.testing.assert_array_equal(h, embedding[token].astype(np.float32))
    _assert_fp16_rounds(y, _rmsnorm64(h, weight), "y")


@pytest.mark.parametrize("d", NORM_WIDTHS)
def test_rmsnorm(d: int) -> None:
    rng = _rng(d, 2)
    h, weight = _f32(rng, d), (1 + 0.1 * _f32(rng, d)).astype(np.float16)
    args = (h, weight, guarded_empty(d, np.float16), np.int32(d), EPS)
    _, _, y, _, _ = launch_each_schedule(_kernel("rmsnorm"), (1,), (C["NORM_THREADS"],), args)
    _assert_fp16_rounds(y, _rmsnorm64(h, weight), "y")


@pytest.mark.parametrize("d", NORM_WIDTHS)
def test_add_rmsnorm(d: int) -> None:
    rng = _rng(d, 3)
    h, o, weight = _f32(rng, d), _f32(rng, d), (1 + 0.1 * _f32(rng, d)).astype(np.float16)
    args = (h, o, weight, guarded_empty(d, np.float16), np.int32(d), EPS)
    h_out, _, _, y, _, _ = launch_each_schedule(_kernel("add_rmsnorm"), (1,), (C["NORM_THREADS"],), args)
    np.testing.assert_array_equal(h_out, h + o)  # one FP32 add: exact
    _assert_fp16_rounds(y, _rmsnorm64(h_out, weight), "y")


@pytest.mark.parametrize("block", [ELEMENTWISE_THREADS, 100])
def test_residual_add(block: int) -> None:
    rng = _rng(block, 4)
    n = 1000
    h, o = _f32(rng, n), _f32(rng, n)
    h_out, _, _ = launch_each_schedule(
        _kernel("residual_add"), _blocks(n, block), (block,), (h, o, np.int32(n))
    )
    np.testing.assert_array_equal(h_out, h + o)


@pytest.mark.parametrize("block", [ELEMENTWISE_THREADS, 100])
def test_silu_mul_kernel(block: int) -> None:
    rng = _rng(block, 5)
    d_ff = 1000
    gate_up = 3 * _f32(rng, 2 * d_ff)
    args = (gate_up, guarded_empty(d_ff, np.float16), np.int32(d_ff))
    act = launch_each_schedule(_kernel("silu_mul_kernel"), _blocks(d_ff, block), (block,), args)[1]
    gate, up = gate_up[:d_ff].astype(np.float64), gate_up[d_ff:].astype(np.float64)
    _assert_fp16_rounds(act, gate / (1 + np.exp(-gate)) * up, "act")


# ------------------------------------------------------------------------------------------------------------
# RoPE and the KV cache
# ------------------------------------------------------------------------------------------------------------

#: (n_heads, n_kv, d_head, ctx, pos): TINY's heads mid-cache; the smallest head at the last position.
ROPE_SHAPES = [(4, 2, 64, 100, 37), (6, 3, 8, 9, 8)]


def _rope_inputs(n_heads: int, n_kv: int, d_head: int, pos: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    qkv = _f32(_rng(n_heads, d_head, pos), (n_heads + 2 * n_kv) * d_head)
    cos, sin = (table.astype(np.float32) for table in rope_angles(d_head, pos))
    return qkv, cos, sin


def _rotated64(heads: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RoPE of ``heads`` ([n, d_head] FP32) in float64, and a bound of the kernel's FP32 rounding error."""
    half = heads.shape[-1] // 2
    x1, x2 = heads[:, :half].astype(np.float64), heads[:, half:].astype(np.float64)
    c, s = cos.astype(np.float64), sin.astype(np.float64)
    rotated = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    magnitude = np.concatenate([np.abs(x1 * c) + np.abs(x2 * s), np.abs(x2 * c) + np.abs(x1 * s)], axis=-1)
    return rotated, 3 * U32 * magnitude


@pytest.mark.parametrize(("n_heads", "n_kv", "d_head", "ctx", "pos"), ROPE_SHAPES)
def test_rope(n_heads: int, n_kv: int, d_head: int, ctx: int, pos: int) -> None:
    qkv, cos, sin = _rope_inputs(n_heads, n_kv, d_head, pos)
    n_rot = n_heads + n_kv
    grid = _blocks(n_rot * d_head // 2, ELEMENTWISE_THREADS)
    args = (qkv, cos, sin, np.int32(n_rot), np.int32(d_head))
    out = launch_each_schedule(_kernel("rope"), grid, (ELEMENTWISE_THREADS,), args)[0]
    rotated, bound = _rotated64(qkv[: n_rot * d_head].reshape(n_rot, d_head), cos, sin)
    assert (np.abs(out[: n_rot * d_head].reshape(n_rot, d_head) - rotated) <= bound).all()
    np.testing.assert_array_equal(out[n_rot * d_head :], qkv[n_rot * d_head :])  # v heads untouched


def _cache(n_kv: int, ctx: int, d_head: int, seed: int) -> np.ndarray:
    return _f16(_rng(n_kv, ctx, d_head, seed), n_kv, ctx, d_head)


def _assert_only_slot_changed(before: np.ndarray, after: np.ndarray, pos: int, what: str) -> None:
    others = np.ones(before.shape[1], bool)
    others[pos] = False
    np.testing.assert_array_equal(after[:, others], before[:, others], err_msg=f"{what}: other slots changed")


@pytest.mark.parametrize(("n_heads", "n_kv", "d_head", "ctx", "pos"), ROPE_SHAPES)
def test_kv_write(n_heads: int, n_kv: int, d_head: int, ctx: int, pos: int) -> None:
    qkv, _, _ = _rope_inputs(n_heads, n_kv, d_head, pos)
    keys, values = _cache(n_kv, ctx, d_head, 1), _cache(n_kv, ctx, d_head, 2)
    shape = (np.int32(n_heads), np.int32(n_kv), np.int32(d_head), np.int32(ctx), np.int32(pos))
    grid = _blocks(n_kv * d_head, ELEMENTWISE_THREADS)
    _, k_out, v_out, *_ = launch_each_schedule(
        _kernel("kv_write"), grid, (ELEMENTWISE_THREADS,), (qkv, keys, values, *shape)
    )
    k_rows, v_rows = qkv[n_heads * d_head :].reshape(2, n_kv, d_head)
    np.testing.assert_array_equal(k_out[:, pos], k_rows.astype(np.float16))  # FP32 → FP16: exact
    np.testing.assert_array_equal(v_out[:, pos], v_rows.astype(np.float16))
    _assert_only_slot_changed(keys, k_out, pos, "keys")
    _assert_only_slot_changed(values, v_out, pos, "values")


@pytest.mark.parametrize(("n_heads", "n_kv", "d_head", "ctx", "pos"), ROPE_SHAPES)
def test_rope_kv_write(n_heads: int, n_kv: int, d_head: int, ctx: int, pos: int) -> None:
    qkv, cos, sin = _rope_inputs(n_heads, n_kv, d_head, pos)
    keys, values = _cache(n_kv, ctx, d_head, 3), _cache(n_kv, ctx, d_head, 4)
    shape = (np.int32(n_heads), np.int32(n_kv), np.int32(d_head), np.int32(ctx), np.int32(pos))
    threads = (n_heads + n_kv) * d_head // 2 + n_kv * d_head
    args = (qkv, cos, sin, keys, values, *shape)
    out, _, _, k_out, v_out, *_ = launch_each_schedule(
        _kernel("rope_kv_write"), _blocks(threads, ELEMENTWISE_THREADS), (ELEMENTWISE_THREADS,), args
    )
    q_width, kv_width = n_heads * d_head, n_kv * d_head
    rotated, bound = _rotated64(qkv[: q_width + kv_width].reshape(n_heads + n_kv, d_head), cos, sin)
    assert (np.abs(out[:q_width].reshape(n_heads, d_head) - rotated[:n_heads]) <= bound[:n_heads]).all()
    np.testing.assert_array_equal(out[q_width:], qkv[q_width:])  # k and v stay unrotated in qkv
    _assert_fp16_rounds(k_out[:, pos], rotated[n_heads:], "rotated keys")
    np.testing.assert_array_equal(
        v_out[:, pos], qkv[q_width + kv_width :].reshape(n_kv, d_head).astype(np.float16)
    )
    _assert_only_slot_changed(keys, k_out, pos, "keys")
    _assert_only_slot_changed(values, v_out, pos, "values")


# ------------------------------------------------------------------------------------------------------------
# Attention
# ------------------------------------------------------------------------------------------------------------

#: (n_heads, n_kv, d_head, ctx): TINY (group 2, two splits, the second partial); group 4, the largest head,
#: five splits; the largest group, the smallest head, 18 splits (two batches of ATT_COMBINE partials); one
#: full split; one partial split of 5 keys.
ATTENTION_SHAPES = [
    (4, 2, 64, 100),
    (8, 2, C["ATT_MAX_DHEAD"], 300),
    (C["ATT_MAX_GROUP"], 1, 8, 17 * C["ATT_KEYS"] + 5),
    (2, 2, 32, C["ATT_KEYS"]),
    (4, 1, 16, 5),
]


def _attention_args(n_heads: int, n_kv: int, d_head: int, ctx: int) -> tuple[Any, ...]:
    rng = _rng(n_heads, n_kv, d_head, ctx)
    group, n_splits = n_heads // n_kv, math.ceil(ctx / C["ATT_KEYS"])
    qkv = _f32(rng, (n_heads + 2 * n_kv) * d_head)
    keys = _cache(n_kv, ctx, d_head, 5)
    # The largest scores among the last ATT_KEYS keys (doubled: earlier keys keep most of the weight), so the
    # combining block's running maximum rises in its last batch of partials and what it accumulated before
    # must be rescaled.
    keys[:, -C["ATT_KEYS"] :] *= np.float16(2)
    return (
        qkv,
        keys,
        _cache(n_kv, ctx, d_head, 6),
        guarded_empty(n_kv * n_splits * group * d_head, np.float32),
        guarded_empty(n_kv * n_splits * group, np.float32),
        guarded_empty(n_kv * n_splits * group, np.float32),
        guarded_array(np.zeros(n_kv, np.uint32)),
        guarded_empty(n_heads * d_head, np.float16),
        np.int32(n_heads),
        np.int32(n_kv),
        np.int32(d_head),
        np.int32(ctx),
        np.float32(1 / math.sqrt(d_head)),
    )


def _scores64(qkv: np.ndarray, keys: np.ndarray, n_heads: int, scale: float) -> np.ndarray:
    """Attention scores [n_heads, ctx] in float64; query head h reads KV head h // group."""
    n_kv, _, d_head = keys.shape
    q = qkv[: n_heads * d_head].astype(np.float64).reshape(n_heads, d_head) * scale
    kv_of_head = np.arange(n_heads) // (n_heads // n_kv)
    return np.einsum("hcd,hd->hc", keys[kv_of_head].astype(np.float64), q)


def _attention64(
    qkv: np.ndarray, keys: np.ndarray, values: np.ndarray, n_heads: int, scale: float
) -> np.ndarray:
    n_kv = keys.shape[0]
    scores = _scores64(qkv, keys, n_heads, scale)
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    kv_of_head = np.arange(n_heads) // (n_heads // n_kv)
    out = np.einsum("hc,hcd->hd", p, values[kv_of_head].astype(np.float64)) / p.sum(axis=1, keepdims=True)
    return out.reshape(-1)


@pytest.mark.parametrize(("n_heads", "n_kv", "d_head", "ctx"), ATTENTION_SHAPES)
def test_attention(n_heads: int, n_kv: int, d_head: int, ctx: int) -> None:
    args = _attention_args(n_heads, n_kv, d_head, ctx)
    grid, block = (math.ceil(ctx / C["ATT_KEYS"]), n_kv), (C["ATT_THREADS"],)
    attention = _kernel("attention")
    result = launch_each_schedule(attention, grid, block, args)
    counters, out = result[6], result[7]
    expected = _attention64(args[0], args[1], args[2], n_heads, float(args[-1]))
    if math.ceil(ctx / C["ATT_KEYS"]) > C["ATT_COMBINE"]:  # the test's premise: see _attention_args
        last_batch = C["ATT_COMBINE"] * C["ATT_KEYS"]
        assert (_scores64(args[0], args[1], n_heads, float(args[-1])).argmax(axis=1) >= last_batch).all()
    _assert_fp16_rounds(out, expected, "attention output")
    np.testing.assert_array_equal(counters, 0)  # the combining block reset its counter
    # Launched again on the same buffers (as a graph replay does), it must write its output again.
    out.fill(np.nan)
    attention(grid, block, result)
    _assert_fp16_rounds(out, expected, "attention output, second launch")


# ------------------------------------------------------------------------------------------------------------
# Sampling
# ------------------------------------------------------------------------------------------------------------

VOCAB = 5_000


def _argmax(logits: np.ndarray, blocks: int) -> tuple[int, np.ndarray]:
    """The kernel's token for ``logits`` on ``blocks`` blocks, launched twice on the same buffers (the
    counter must be back at 0 after each launch); returns (token, counter)."""
    args = (
        logits,
        np.int32(logits.size),
        guarded_empty(blocks, np.float32),
        guarded_empty(blocks, np.int32),
        guarded_array(np.zeros(1, np.uint32)),
        guarded_empty(1, np.int32),
    )
    argmax = _kernel("argmax")
    result = launch_each_schedule(argmax, (blocks,), (C["ARGMAX_THREADS"],), args)
    token, counter = int(result[5][0]), result[4]
    assert counter[0] == 0, "the last block resets the counter"
    result[5][0] = -1
    argmax((blocks,), (C["ARGMAX_THREADS"],), result)
    assert int(result[5][0]) == token, "a second launch on the same buffers samples again"
    return token, counter


def _block_of(index: int, blocks: int) -> int:
    """The block whose grid-stride loop reads logit ``index``."""
    return index % (blocks * C["ARGMAX_THREADS"]) // C["ARGMAX_THREADS"]


#: Grids: the step's (ARGMAX_PER_THREAD logits per thread), fewer blocks (longer grid-stride loops), more
#: blocks than logits need (empty partials), and more blocks than ARGMAX_THREADS (the combining block's
#: threads loop over partials).
ARGMAX_GRIDS = [
    math.ceil(VOCAB / (C["ARGMAX_THREADS"] * ARGMAX_PER_THREAD)),
    2,
    40,
    C["ARGMAX_THREADS"] + 3,
]


@pytest.mark.parametrize("blocks", ARGMAX_GRIDS)
def test_argmax_max_in_the_last_block(blocks: int) -> None:
    logits = _f32(_rng(blocks, 7), VOCAB)
    logits[VOCAB - 1] = logits.max() + 1
    assert _argmax(logits, blocks)[0] == VOCAB - 1


@pytest.mark.parametrize("blocks", ARGMAX_GRIDS)
def test_argmax_ties_go_to_the_lowest_index(blocks: int) -> None:
    logits = _f32(_rng(blocks, 8), VOCAB)
    ties = [VOCAB - 1, 2_345, 1_001, 1_000]  # across blocks, and two neighbours in one warp
    assert len({_block_of(index, blocks) for index in ties}) >= 2 or blocks == 2
    logits[ties] = logits.max() + 1
    assert _argmax(logits, blocks)[0] == 1_000
    assert _argmax(np.full(VOCAB, 0.5, np.float32), blocks)[0] == 0
