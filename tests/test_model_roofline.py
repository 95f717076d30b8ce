"""model.roofline: the decode-step lower bound."""

import dataclasses
import itertools
import math

import pytest

from model import H100, LLAMA31_8B, LLAMA31_70B, LLAMA32_1B, MISTRAL_7B, decode_step
from model.hardware import GPUS, T4, derive_gpu_spec
from model.llm import MODELS, ModelConfig
from model.roofline import compute_bound_batch, resident_bytes, ridge_point


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
    assert cfg.max_position_embeddings is not None
    contexts = [ctx for ctx in (1, 128, 1024, 4096, 8192, 131_072) if ctx <= cfg.max_position_embeddings]
    by_ctx = [decode_step(cfg, H100, 1, ctx).t_step for ctx in contexts]
    by_batch = [decode_step(cfg, H100, batch, 1024).t_step for batch in (1, 4, 64, 512, 4096)]
    window = cfg.sliding_window or math.inf
    rising = [t for ctx, t in zip(contexts, by_ctx, strict=True) if ctx <= window]
    flat = [t for ctx, t in zip(contexts, by_ctx, strict=True) if ctx >= window]
    assert all(a < b for a, b in itertools.pairwise(rising))
    assert all(a == b for a, b in itertools.pairwise(flat))  # past the window the step reads no more KV
    assert all(a < b for a, b in itertools.pairwise(by_batch))


def test_sliding_window_kv_bytes_and_step() -> None:
    # Mistral-7B attends over 4,096 tokens: at ctx 32,768 the step reads 0.54 GB of KV, not 4.29 GB.
    windowed = decode_step(MISTRAL_7B, H100, 1, 32_768)
    whole = decode_step(dataclasses.replace(MISTRAL_7B, sliding_window=None), H100, 1, 32_768)
    per_token = 2 * 32 * 8 * 128 * 2  # keys and values, 32 layers, 8 KV heads, d_head 128, BF16
    assert windowed.kv_tokens == 4_096 and whole.kv_tokens == 32_768
    assert windowed.kv_bytes == per_token * 4_096 == 536_870_912
    assert whole.kv_bytes == per_token * 32_768 == 4_294_967_296
    assert round(windowed.t_step * 1e3, 2) == 4.41
    assert round(whole.t_step * 1e3, 2) == 5.53
    # Attention arithmetic also covers only the window.
    assert windowed.flops < whole.flops


@pytest.mark.parametrize(("cfg", "ctx"), [(LLAMA31_8B, 131_073), (MISTRAL_7B, 32_769), (LLAMA32_1B, 10**12)])
def test_context_past_the_maximum_is_refused(cfg: ModelConfig, ctx: int) -> None:
    with pytest.raises(ValueError, match=f"exceeds {cfg.name}'s max_position_embeddings"):
        decode_step(cfg, H100, 1, ctx)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        compute_bound_batch(cfg, H100, ctx)


def test_memory_fit_is_stated() -> None:
    step = decode_step(LLAMA31_8B, H100, 1, 1024)
    assert step.resident_bytes == 2 * LLAMA31_8B.param_count + step.kv_bytes
    assert step.resident_bytes == resident_bytes(LLAMA31_8B, 1, 1024)
    assert step.fits_memory
    # 70B parameters in BF16 are 141 GB: more than an H100's 80 GiB.
    assert not decode_step(LLAMA31_70B, H100, 1, 1024).fits_memory
    # A huge batch of long contexts does not fit either.
    assert not decode_step(LLAMA31_8B, H100, 64, 131_072).fits_memory


def test_step_without_a_tensor_rate_is_bounded_by_memory_alone() -> None:
    no_bf16 = decode_step(LLAMA32_1B, T4, 1, 1024)  # Turing has no BF16 tensor cores
    assert no_bf16.t_compute is None and no_bf16.t_step == no_bf16.t_mem and no_bf16.bound == "memory"
    fp16 = decode_step(LLAMA32_1B, T4, 1, 1024, dtype="fp16")
    assert fp16.t_compute == pytest.approx(fp16.flops / 65e12)
    derived = derive_gpu_spec(  # illustrative attributes of a 14 Gb/s GDDR6 laptop part, not a measurement
        "NVIDIA GeForce RTX 3060 Laptop GPU",
        memory_clock_hz=7_001e6,
        memory_bus_width_bits=192,
        sm_count=30,
        sm_clock_rate_hz=1_702e6,
        compute_capability="8.6",
        memory_bytes=6 * 2**30,
    )
    step = decode_step(LLAMA32_1B, derived, 1, 1024, dtype="fp16")
    assert step.t_compute is None and step.t_step == step.bytes_total / (7_001e6 * 192 / 8 * 2)
    with pytest.raises(ValueError, match="no dense BF16 tensor-core rate"):
        ridge_point(T4)
    with pytest.raises(ValueError, match="dtype"):
        decode_step(LLAMA32_1B, H100, 1, 1024, dtype="int8")


@pytest.mark.parametrize("hw", list(GPUS.values()), ids=list(GPUS))
@pytest.mark.parametrize("cfg", [LLAMA31_8B, LLAMA32_1B], ids=lambda cfg: cfg.name)
def test_compute_bound_turnover_at_ridge_point(hw, cfg: ModelConfig) -> None:
    ctx = 1
    dtype = "bf16" if hw.bf16_flops_per_s is not None else "fp16"
    turnover = compute_bound_batch(cfg, hw, ctx, dtype=dtype)
    # Weights dominate the traffic at short context, so the turnover batch is the FLOP-per-byte ridge point.
    assert turnover == pytest.approx(ridge_point(hw, dtype), rel=0.02)
    assert decode_step(cfg, hw, math.floor(turnover), ctx, dtype=dtype).bound == "memory"
    assert decode_step(cfg, hw, math.ceil(turnover), ctx, dtype=dtype).bound == "compute"


def test_long_context_never_turns_compute_bound() -> None:
    # Per sequence, reading 1,024 tokens of KV cache outlasts the sequence's arithmetic on an H100.
    assert compute_bound_batch(LLAMA31_8B, H100, 1024) == math.inf
    assert decode_step(LLAMA31_8B, H100, 100_000, 1024).bound == "memory"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"batch": 0, "ctx": 1024}, "batch"),
        ({"batch": 1, "ctx": 0}, "ctx"),
        ({"batch": 1, "ctx": 2.0}, "ctx"),
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
