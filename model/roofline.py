"""Roofline lower bound of one decode step: the GPU must at least stream the weights and the KV cache once,
and at least do the multiply-adds; the step takes the longer of the two.

The KV cache read per step is the model's attended tokens (``ModelConfig.kv_tokens``: the sliding window where
there is one), and a context past the model's ``max_position_embeddings`` is refused (``llm.check_context``).
Whether the step's weights and KV cache fit the GPU's memory is stated beside the bound, not hidden in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from model.hardware import GPUSpec
from model.llm import ModelConfig, check_context

# Every weight takes part in one multiply-add (2 FLOPs) per token.
_FLOPS_PER_WEIGHT = 2
# Attention per token, layer and query head: q·K over ctx keys and p·V over ctx values, 2 FLOPs per element.
_ATTENTION_FLOPS_PER_HEAD_DIM_AND_KEY = 4


@dataclass(frozen=True)
class DecodeStep:
    """Roofline figures of one decode step (one new token for each of ``batch`` sequences of ``ctx`` tokens).

    Bytes are read from GPU memory, FLOPs are arithmetic, times are seconds. ``kv_tokens`` is how many tokens
    of KV cache each sequence reads (``ctx``, or the sliding window). ``t_step`` is the larger of ``t_mem``
    and ``t_compute``; ``bound`` says which ("memory" or "compute"). ``t_compute`` is None when the GPU's spec
    has no dense tensor rate for ``dtype`` (a T4 has no BF16; a spec derived from device attributes has no
    tensor rate at all): the bound is then the memory term alone, still a lower bound. ``resident_bytes`` is
    what must sit in GPU memory for the step (every parameter once, and the KV cache kept: activations and
    workspace not counted), ``fits_memory`` whether that fits the GPU's ``mem_bytes``. Indexing by field name
    (``step["t_step"]``) is kept for the lecture scripts.
    """

    batch: int
    ctx: int
    kv_tokens: int
    dtype: str
    weight_bytes: float
    embedding_bytes: float
    kv_bytes: float
    bytes_total: float
    flops: float
    t_mem: float
    t_compute: float | None
    t_step: float
    bound: str
    resident_bytes: float
    fits_memory: bool

    def __getitem__(self, key: str) -> Any:
        if key not in {field.name for field in fields(self)}:
            raise KeyError(key)
        return getattr(self, key)


def _check_positive_int(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _check_bytes_per_param(bytes_per_param: float) -> None:
    is_number = isinstance(bytes_per_param, int | float)
    if not (is_number and math.isfinite(bytes_per_param) and bytes_per_param > 0):
        raise ValueError(f"bytes_per_param must be a positive number, got {bytes_per_param!r}")


def weight_bytes_per_step(cfg: ModelConfig, bytes_per_param: float = 2) -> float:
    """Bytes of weights read once per step, whatever the batch: every layer, final norm and output layer.

    A tied model reads its shared table here, as the output layer; the embedding lookup is counted per token.
    """
    params_read = cfg.n_layers * cfg.layer_params + cfg.final_norm_params + cfg.output_params
    return params_read * bytes_per_param


def flops_per_token(cfg: ModelConfig, ctx: int) -> float:
    """FLOPs to produce one token at context length ``ctx``: a multiply-add per weight, plus attention over
    the attended keys (``cfg.kv_tokens(ctx)``)."""
    weight_flops = _FLOPS_PER_WEIGHT * (cfg.n_layers * cfg.layer_params + cfg.output_params)
    keys = cfg.kv_tokens(ctx)
    attention_flops = _ATTENTION_FLOPS_PER_HEAD_DIM_AND_KEY * cfg.n_layers * cfg.n_heads * cfg.d_head * keys
    return weight_flops + attention_flops


def resident_bytes(cfg: ModelConfig, batch: int, ctx: int, bytes_per_param: float = 2) -> float:
    """Bytes a decode step needs in GPU memory at least: every parameter once (a tied table once) and the KV
    cache it keeps (``cfg.kv_tokens(ctx)`` tokens per sequence); activations and workspace not counted."""
    kv_kept = cfg.kv_bytes_per_token(bytes_per_param) * cfg.kv_tokens(ctx) * batch
    return cfg.param_count * bytes_per_param + kv_kept


def decode_step(
    cfg: ModelConfig, hw: GPUSpec, batch: int, ctx: int, bytes_per_param: float = 2, dtype: str = "bf16"
) -> DecodeStep:
    """Roofline lower bound of one decode step of ``cfg`` on ``hw``.

    Weights and KV cache are stored at ``bytes_per_param`` bytes each (BF16 by default); arithmetic runs at
    the GPU's dense ``dtype`` ("bf16" or "fp16") tensor-core peak. KV bytes = 2 × layers × kv_heads × d_head ×
    kv_tokens × batch × bytes/param, where kv_tokens = min(ctx, sliding window). Raises ValueError for a bad
    batch, ctx (including one past the model's max_position_embeddings), bytes_per_param or dtype.
    """
    _check_positive_int("batch", batch)
    check_context(cfg, ctx)
    _check_bytes_per_param(bytes_per_param)
    peak_flops_per_s = hw.tensor_flops_per_s(dtype)
    kv_tokens = cfg.kv_tokens(ctx)
    weight_bytes = weight_bytes_per_step(cfg, bytes_per_param)
    embedding_bytes = batch * cfg.d_model * bytes_per_param  # one embedding row per token
    kv_bytes = cfg.kv_bytes_per_token(bytes_per_param) * kv_tokens * batch
    bytes_total = weight_bytes + embedding_bytes + kv_bytes
    flops = batch * flops_per_token(cfg, ctx)
    t_mem = bytes_total / hw.mem_bytes_per_s
    t_compute = None if peak_flops_per_s is None else flops / peak_flops_per_s
    t_step = t_mem if t_compute is None else max(t_mem, t_compute)
    footprint = resident_bytes(cfg, batch, ctx, bytes_per_param)
    return DecodeStep(
        batch=batch,
        ctx=ctx,
        kv_tokens=kv_tokens,
        dtype=dtype,
        weight_bytes=weight_bytes,
        embedding_bytes=embedding_bytes,
        kv_bytes=kv_bytes,
        bytes_total=bytes_total,
        flops=flops,
        t_mem=t_mem,
        t_compute=t_compute,
        t_step=t_step,
        bound="memory" if t_step == t_mem else "compute",
        resident_bytes=footprint,
        fits_memory=footprint <= hw.mem_bytes,
    )


def _peak(hw: GPUSpec, dtype: str) -> float:
    peak_flops_per_s = hw.tensor_flops_per_s(dtype)
    if peak_flops_per_s is None:
        raise ValueError(f"{hw.name} ({hw.source}) has no dense {dtype.upper()} tensor-core rate")
    return peak_flops_per_s


def ridge_point(hw: GPUSpec, dtype: str = "bf16") -> float:
    """Arithmetic intensity (FLOP per byte) at which ``hw`` turns from memory- to compute-bound: dense
    ``dtype`` tensor peak / bandwidth. Raises ValueError when the spec has no such rate."""
    return _peak(hw, dtype) / hw.mem_bytes_per_s


def compute_bound_batch(
    cfg: ModelConfig, hw: GPUSpec, ctx: int, bytes_per_param: float = 2, dtype: str = "bf16"
) -> float:
    """Batch (real-valued) at which a decode step's compute time equals its memory time; above it the step is
    compute-bound.

    Memory time grows as (weights + batch × per-sequence bytes) / bandwidth and compute time as
    batch × FLOPs per token / peak, so they cross once. Returns ``math.inf`` when the per-sequence KV traffic
    alone outlasts the per-sequence compute (long contexts), so that no batch is compute-bound. At short
    contexts the result approaches the ridge point × 2 / bytes_per_param. Raises ValueError when the spec has
    no dense ``dtype`` tensor rate.
    """
    check_context(cfg, ctx)
    _check_bytes_per_param(bytes_per_param)
    shared_bytes = weight_bytes_per_step(cfg, bytes_per_param)
    kv_bytes = cfg.kv_bytes_per_token(bytes_per_param) * cfg.kv_tokens(ctx)
    per_sequence_bytes = cfg.d_model * bytes_per_param + kv_bytes
    per_sequence_compute_as_bytes = flops_per_token(cfg, ctx) / ridge_point(hw, dtype)
    margin_bytes = per_sequence_compute_as_bytes - per_sequence_bytes
    if margin_bytes <= 0:
        return math.inf
    return shared_bytes / margin_bytes
