"""model.roofline: the decode-step lower bound."""

import itertools
import math

import pytest

from model import H100, LLAMA31_8B, LLAMA32_1B, decode_step
from model.hardware import GPUS
from model.llm import MODELS, ModelConfig
from model.roofline import compute_bound_batch, ridge_point


@pytest.mark.parametrize(("cfg", "t_step_s"), [(LLAMA31_8B, 4.52e-3), (LLAMA32_1B, 0.748e-3)])
def test_reference_step_times(cfg: ModelConfig, t_step_s: float) -> None:
    step = decode_step(cfg, H100, 1, 1024)
    assert step.t_step == pytest.approx(t_step_s, rel=0.005)
    assert step["t_step"] == step.t_step  # the seed's indexing
    assert step.bound == "memory"


def test_bytes_read_per_step() -> None:
    step = decode_step(LLAMA31_8B, H100, 1, 1024)
    embedding_table = LLAMA31_8B.embedding_params
    assert step.weight_bytes == 2 * (LLAMA31_8B.param_count - embedding_table)
    assert step.embedding_bytes == 2 * LLAMA31_8B.d_model
    assert step.kv_bytes == 2 * 32 * 8 * 128 * 1024 * 1 * 2
    assert step.bytes_total == step.weight_bytes + step.embedding_bytes + step.kv_bytes
    assert round(step.weight_bytes / 1e9) == 15  # the seed's "about 15 GB"


def test_tied_model_reads_its_shared_table_once() -> None:
    step = decode_step(LLAMA32_1B, H100, 1, 1024)
    assert step.weight_bytes == 2 * LLAMA32_1B.param_count


def test_bytes_per_param_scales_traffic() -> None:
    bf16 = decode_step(LLAMA31_8B, H100, 1, 1024)
    fp8 = decode_step(LLAMA31_8B, H100, 1, 1024, bytes_per_param=1)
    assert fp8.bytes_total == pytest.approx(bf16.bytes_total / 2)


@pytest.mark.parametrize("cfg", list(MODELS.values()), ids=list(MODELS))
def test_step_time_rises_with_ctx_and_batch(cfg: ModelConfig) -> None:
    by_ctx = [decode_step(cfg, H100, 1, ctx).t_step for ctx in (1, 128, 1024, 8192, 131_072)]
    by_batch = [decode_step(cfg, H100, batch, 1024).t_step for batch in (1, 4, 64, 512, 4096)]
    assert all(a < b for a, b in itertools.pairwise(by_ctx))
    assert all(a < b for a, b in itertools.pairwise(by_batch))


@pytest.mark.parametrize("hw", list(GPUS.values()), ids=list(GPUS))
@pytest.mark.parametrize("cfg", [LLAMA31_8B, LLAMA32_1B], ids=lambda cfg: cfg.name)
def test_compute_bound_turnover_at_ridge_point(hw, cfg: ModelConfig) -> None:
    ctx = 1
    turnover = compute_bound_batch(cfg, hw, ctx)
    # Weights dominate the traffic at short context, so the turnover batch is the FLOP-per-byte ridge point.
    assert turnover == pytest.approx(ridge_point(hw), rel=0.02)
    assert decode_step(cfg, hw, math.floor(turnover), ctx).bound == "memory"
    assert decode_step(cfg, hw, math.ceil(turnover), ctx).bound == "compute"


def test_long_context_never_turns_compute_bound() -> None:
    # Per sequence, reading 1,024 tokens of KV cache outlasts the sequence's arithmetic on an H100.
    assert compute_bound_batch(LLAMA31_8B, H100, 1024) == math.inf
    assert decode_step(LLAMA31_8B, H100, 100_000, 1024).bound == "memory"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"batch": 0, "ctx": 1024}, "batch"),
        ({"batch": 1, "ctx": 0}, "ctx"),
        ({"batch": 1.5, "ctx": 1024}, "batch"),
        ({"batch": 1, "ctx": 1024, "bytes_per_param": 0}, "bytes_per_param"),
    ],
)
def test_bad_input_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        decode_step(LLAMA31_8B, H100, **kwargs)


def test_unknown_key_raises_key_error() -> None:
    with pytest.raises(KeyError):
        decode_step(LLAMA31_8B, H100, 1, 1024)["t_nope"]
