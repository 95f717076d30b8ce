"""The decode step of ``decode_numpy`` written once for PyTorch and JAX: the same equations, the same weights.

The step's body (``decode_logits``) uses only what numpy, PyTorch and JAX arrays spell alike: ``@``, the
arithmetic operators, ``reshape``, ``swapaxes``, slicing, ``mean`` and ``argmax``. The few calls spelled
differently (concatenation, exp, sqrt, softmax, and writing one cache position, which PyTorch does in place
and JAX by returning a new array) come from an ``ArrayOps`` made per framework (``torch_ops``, ``jax_ops``,
``numpy_ops``). So the code PyTorch eager, ``torch.compile``, a CUDA graph capture, JAX op by op and
``jax.jit`` run is one function, and ``numpy_ops`` runs that same function on the CPU where neither
framework is installed (CI), against ``decode_numpy.reference_logits``.

Equations and conventions are ``decode_numpy``'s (its module docstring): weights (out, in), q/k/v rows in
``wqkv``, gate/up rows in ``wgu``, RoPE on halves, GQA groups, tied output layer, the step decoding position
``ctx - 1`` after writing that position's key and value. Unlike the numpy plans it calls each framework's
own fused softmax, and its projections are one product per weight matrix (the fused plan's): a framework
step is what a user of that framework writes, not a replay of numpy's call list.

The JAX step writes the cache position into new arrays (JAX arrays are immutable) that the step drops: each
timed step writes the same key and value at the same position, so the cache it reads is the one PyTorch's
in-place write leaves, and the bytes it reads are the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from benchmarks.decode_numpy import RMS_EPS, DecodeWeights, KVCache, rope_angles
from model.llm import ModelConfig

Array = Any  # a numpy array, a torch.Tensor or a jax.Array


class LayerArrays(NamedTuple):
    """One layer's weights (a pytree for ``jax.jit``, a tuple of tensors for ``torch.compile``)."""

    attn_norm: Array  # [d]
    wqkv: Array  # [q + 2·kv, d]
    wo: Array  # [d, q]
    mlp_norm: Array  # [d]
    wgu: Array  # [2·f, d]
    wd: Array  # [d, f]


class StepArrays(NamedTuple):
    """Everything one step reads, in one framework's arrays: weights, cache, RoPE's angles at its position."""

    embedding: Array  # [vocab, d]; also the output layer
    layers: tuple[LayerArrays, ...]
    final_norm: Array  # [d]
    keys: tuple[Array, ...]  # per layer [n_kv, ctx, d_head]
    values: tuple[Array, ...]
    cos: Array  # [d_head / 2]
    sin: Array  # [d_head / 2]


@dataclass(frozen=True)
class ArrayOps:
    """The calls the step spells per framework. ``concat`` joins along the last axis; ``softmax`` is over
    the last axis; ``put_position(cache, pos, rows)`` returns ``cache`` ([heads, ctx, d]) with position
    ``pos`` set to ``rows`` ([heads, d]), in place where the framework allows; ``asarray`` turns a numpy
    array into the framework's on ``device`` (None: its default), as ``dtype`` (the framework's dtype
    object or None: keep)."""

    framework: str
    concat: Callable[[Sequence[Array]], Array]
    exp: Callable[[Array], Array]
    sqrt: Callable[[Array], Array]
    softmax: Callable[[Array], Array]
    put_position: Callable[[Array, int, Array], Array]
    asarray: Callable[[Any, Any, Any], Array]


def _put_in_place(cache: Array, pos: int, rows: Array) -> Array:
    cache[:, pos] = rows
    return cache


def numpy_ops() -> ArrayOps:
    """The step on numpy arrays: what CI runs the step's equations with, where no framework is installed."""

    def softmax(x: np.ndarray) -> np.ndarray:
        p = np.exp(x - x.max(axis=-1, keepdims=True))
        return p / p.sum(axis=-1, keepdims=True)

    return ArrayOps(
        framework="numpy",
        concat=lambda xs: np.concatenate(xs, axis=-1),
        exp=np.exp,
        sqrt=np.sqrt,
        softmax=softmax,
        put_position=_put_in_place,
        asarray=lambda array, device, dtype: np.asarray(array, dtype=dtype),
    )


def torch_ops(torch: Any) -> ArrayOps:
    """The step on ``torch`` tensors. Softmax accumulates in float32 (``dtype=``) and returns the input's
    dtype, so an FP16 step's attention weights sum to one as the float32 reference's do. Arrays from numpy
    share its memory on the CPU (``torch.from_numpy``): the step's cache writes land in the numpy cache."""

    def asarray(array: Any, device: Any, dtype: Any) -> Any:
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        return tensor.to(device=device, dtype=dtype) if device is not None or dtype is not None else tensor

    return ArrayOps(
        framework="torch",
        concat=lambda xs: torch.cat(tuple(xs), dim=-1),
        exp=torch.exp,
        sqrt=torch.sqrt,
        softmax=lambda x: torch.softmax(x, dim=-1, dtype=torch.float32).to(x.dtype),
        put_position=_put_in_place,
        asarray=asarray,
    )


def jax_ops(jax: Any) -> ArrayOps:
    """The step on JAX arrays: ``put_position`` is ``cache.at[:, pos].set(rows)``, a new array."""
    jnp = jax.numpy

    def asarray(array: Any, device: Any, dtype: Any) -> Any:
        return jax.device_put(np.asarray(array, dtype=dtype), device)  # straight to ``device``

    return ArrayOps(
        framework="jax",
        concat=lambda xs: jnp.concatenate(tuple(xs), axis=-1),
        exp=jnp.exp,
        sqrt=jnp.sqrt,
        softmax=lambda x: jax.nn.softmax(x, axis=-1),
        put_position=lambda cache, pos, rows: cache.at[:, pos].set(rows),
        asarray=asarray,
    )


def step_arrays(
    ops: ArrayOps, weights: DecodeWeights, cache: KVCache, device: Any = None, dtype: Any = None
) -> StepArrays:
    """``weights`` and ``cache`` (numpy) as ``ops``'s arrays on ``device`` as ``dtype``, with RoPE's cos and
    sin at the step's position (``cache.ctx - 1``) in the same dtype."""
    cfg = weights.cfg
    cos64, sin64 = rope_angles(cfg.d_head, cache.ctx - 1)

    def put(array: Any) -> Array:
        return ops.asarray(array, device, dtype)

    angles_dtype = np.float32 if dtype is None else None  # numpy float64 → the step's dtype
    return StepArrays(
        embedding=put(weights.embedding),
        layers=tuple(LayerArrays(*(put(w) for w in layer_weights(lw))) for lw in weights.layers),
        final_norm=put(weights.final_norm),
        keys=tuple(put(k) for k in cache.keys),
        values=tuple(put(v) for v in cache.values),
        cos=put(cos64.astype(angles_dtype) if angles_dtype else cos64),
        sin=put(sin64.astype(angles_dtype) if angles_dtype else sin64),
    )


def layer_weights(layer: Any) -> tuple[Array, ...]:
    """A ``decode_numpy.LayerWeights`` as the fields of ``LayerArrays``, in their order."""
    return tuple(getattr(layer, name) for name in LayerArrays._fields)


def decode_logits(ops: ArrayOps, cfg: ModelConfig, arrays: StepArrays, token: int, pos: int) -> Array:
    """The logits ([vocab]) of one decode step of ``token`` at position ``pos`` (= ctx − 1), in ``arrays``'s
    framework and dtype. Writes the position's key and value into the cache first (``ops.put_position``)."""
    d_head, n_q, n_kv = cfg.d_head, cfg.n_heads, cfg.n_kv_heads
    q_width, kv_width, group, half = n_q * d_head, n_kv * d_head, n_q // n_kv, d_head // 2
    scale = 1.0 / math.sqrt(d_head)

    def rmsnorm(x: Array, weight: Array) -> Array:
        return x / ops.sqrt((x * x).mean() + RMS_EPS) * weight

    def rope(x: Array) -> Array:  # [heads, d_head]: halves (x1, x2) → (x1·cos − x2·sin, x2·cos + x1·sin)
        x1, x2 = x[:, :half], x[:, half:]
        return ops.concat([x1 * arrays.cos - x2 * arrays.sin, x2 * arrays.cos + x1 * arrays.sin])

    h = arrays.embedding[token]
    for layer, keys, values in zip(arrays.layers, arrays.keys, arrays.values, strict=True):
        qkv = layer.wqkv @ rmsnorm(h, layer.attn_norm)
        q = rope(qkv[:q_width].reshape((n_q, d_head)))
        k = rope(qkv[q_width : q_width + kv_width].reshape((n_kv, d_head)))
        v = qkv[q_width + kv_width :].reshape((n_kv, d_head))
        keys = ops.put_position(keys, pos, k)
        values = ops.put_position(values, pos, v)
        scores = (q.reshape((n_kv, group, d_head)) @ keys.swapaxes(-1, -2)) * scale  # [n_kv, group, ctx]
        attn = ops.softmax(scores) @ values  # [n_kv, group, d_head]
        h = h + layer.wo @ attn.reshape((q_width,))
        gate_up = layer.wgu @ rmsnorm(h, layer.mlp_norm)
        gate, up = gate_up[: cfg.d_ff], gate_up[cfg.d_ff :]
        h = h + layer.wd @ (gate / (1.0 + ops.exp(-gate)) * up)
    return arrays.embedding @ rmsnorm(h, arrays.final_norm)


def step_bytes(weights: DecodeWeights, cache: KVCache, item_bytes: int) -> int:
    """Bytes one step reads from weights and cache at ``item_bytes`` per element: every weight matrix and
    norm, the token's embedding row again (the output layer reads the whole table), and every layer's keys and
    values; activations not counted (``decode_numpy.NumpyDecodeStep.bytes_per_step``'s convention)."""
    cfg = weights.cfg
    elements = sum(int(np.prod(w.shape)) for lw in weights.layers for w in layer_weights(lw))
    elements += int(np.prod(weights.embedding.shape)) + cfg.d_model + int(np.prod(weights.final_norm.shape))
    elements += sum(
        int(np.prod(k.shape)) + int(np.prod(v.shape)) for k, v in zip(cache.keys, cache.values, strict=True)
    )
    return elements * item_bytes
