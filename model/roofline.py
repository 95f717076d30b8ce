"""Roofline lower bound of one decode step: the GPU must at least stream the weights and the KV cache once,
and at least do the multiply-adds; the step takes the longer of the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from model.hardware import GPUSpec
from model.llm import ModelConfig

# Every weight takes part in one multiply-add (2 FLOPs) per token.
_FLOPS_PER_WEIGHT = 2
# Attention per token, layer and query head: q·K over ctx keys and p·V over ctx values, 2 FLOPs per element.
_ATTENTION_FLOPS_PER_HEAD_DIM_AND_KEY = 4


@dataclass(frozen=True)
class DecodeStep:
    """Roofline figures of one decode step (one new token for each of ``batch`` sequences of ``ctx`` tokens).

    Bytes are read from GPU memory, FLOPs are arithmetic, times are seconds. ``t_step`` is the larger of
    ``t_mem`` and ``t_compute``; ``bound`` says which ("memory" or "compute"). Indexing by field name
    (``step["t_step"]``) is kept for the lecture scripts.
    """

    batch: int
    ctx: int
    weight_bytes: float
    embedding_bytes: float
    kv_bytes: float
    bytes_total: float
    flops: float
    t_mem: float
    t_compute: float
    t_step: float
    bound: str

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
    """FLOPs to produce one token at context length ``ctx``: a multiply-add per weight, plus attention."""
    weight_flops = _FLOPS_PER_WEIGHT * (cfg.n_layers * cfg.layer_params + cfg.output_params)
    attention_flops = _ATTENTION_FLOPS_PER_HEAD_DIM_AND_KEY * cfg.n_layers * cfg.n_heads * cfg.d_head * ctx
    return weight_flops + attention_flops


def decode_step(
    cfg: ModelConfig, hw: GPUSpec, batch: int, ctx: int, bytes_per_param: float = 2
) -> DecodeStep:
    """Roofline lower bound of one decode step of ``cfg`` on ``hw``.

    Weights and KV cache are stored at ``bytes_per_param`` bytes each (BF16 by default); arithmetic runs at
    the GPU's dense BF16 tensor-core peak.
    KV bytes = 2 × layers × kv_heads × d_head × ctx × batch × bytes/param.
    """
    _check_positive_int("batch", batch)
    _check_positive_int("ctx", ctx)
    _check_bytes_per_param(bytes_per_param)
    weight_bytes = weight_bytes_per_step(cfg, bytes_per_param)
    embedding_bytes = batch * cfg.d_model * bytes_per_param  # one embedding row per token
    kv_bytes = cfg.kv_bytes_per_token(bytes_per_param) * ctx * batch
    bytes_total = weight_bytes + embedding_bytes + kv_bytes
    flops = batch * flops_per_token(cfg, ctx)
    t_mem = bytes_total / hw.mem_bytes_per_s
    t_compute = flops / hw.bf16_flops_per_s
    return DecodeStep(
        batch=batch,
        ctx=ctx,
        weight_bytes=weight_bytes,
        embedding_bytes=embedding_bytes,
        kv_bytes=kv_bytes,
        bytes_total=bytes_total,
        flops=flops,
        t_mem=t_mem,
        t_compute=t_compute,
        t_step=max(t_mem, t_compute),
        bound="compute" if t_compute > t_mem else "memory",
    )


def ridge_point(hw: GPUSpec) -> float:
    """Arithmetic intensity (FLOP per byte) at which ``hw`` turns from memory- to compute-bound:
    BF16 peak / bandwidth."""
    return hw.bf16_flops_per_s / hw.mem_bytes_per_s


def compute_bound_batch(cfg: ModelConfig, hw: GPUSpec, ctx: int, bytes_per_param: float = 2) -> float:
    """Batch (real-valued) at which a decode step's compute time equals its memory time; above it the step is
    compute-bound.

    Memory time grows as (weights + batch × per-sequence bytes) / bandwidth and compute time as
    batch × FLOPs per token / peak, so they cross once. Returns ``math.inf`` when the per-sequence KV traffic
    alone outlasts the per-sequence compute (long contexts), so that no batch is compute-bound. At short
    contexts the result approaches the ridge point × 2 / bytes_per_param.
    """
    _check_positive_int("ctx", ctx)
    _check_bytes_per_param(bytes_per_param)
    shared_bytes = weight_bytes_per_step(cfg, bytes_per_param)
    per_sequence_bytes = cfg.d_model * bytes_per_param + cfg.kv_bytes_per_token(bytes_per_param) * ctx
    per_sequence_compute_as_bytes = flops_per_token(cfg, ctx) / ridge_point(hw)
    margin_bytes = per_sequence_compute_as_bytes - per_sequence_bytes
    if margin_bytes <= 0:
        return math.inf
    return shared_bytes / margin_bytes
