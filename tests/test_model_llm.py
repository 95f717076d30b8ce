"""model.llm: model shapes and exact published parameter counts."""

import dataclasses

import pytest

from model.llm import (
    LLAMA2_7B,
    LLAMA31_8B,
    LLAMA31_70B,
    LLAMA32_1B,
    LLAMA32_3B,
    MISTRAL_7B,
    MODELS,
    QWEN25_7B,
    ModelConfig,
    check_context,
    model_config,
)


@pytest.mark.parametrize(
    ("cfg", "published"),
    [
        (LLAMA31_8B, 8_030_261_248),
        (LLAMA32_1B, 1_235_814_400),
        (LLAMA32_3B, 3_212_749_824),
        (LLAMA31_70B, 70_553_706_496),
        (QWEN25_7B, 7_615_616_512),
        (MISTRAL_7B, 7_241_732_096),
        (LLAMA2_7B, 6_738_415_616),  # "6.74B" on its model card: the sum over config.json's shapes
    ],
    ids=lambda value: getattr(value, "name", str(value)),
)
def test_param_count_equals_published(cfg: ModelConfig, published: int) -> None:
    assert cfg.param_count == published


def test_seed_call_shape_builds_llama32_1b() -> None:
    shape = {"n_layers": 16, "d_model": 2048, "n_heads": 32, "n_kv_heads": 8, "d_head": 64, "d_ff": 8192}
    cfg = ModelConfig("Llama-3.2-1B", **shape, vocab=128256, tied=True)
    assert cfg.max_position_embeddings is None and cfg.sliding_window is None  # the seed's call still works
    assert dataclasses.replace(cfg, max_position_embeddings=131_072) == LLAMA32_1B


@pytest.mark.parametrize(
    ("cfg", "max_positions", "window"),
    [
        (LLAMA31_8B, 131_072, None),  # config.json: "max_position_embeddings": 131072
        (LLAMA32_1B, 131_072, None),
        (LLAMA32_3B, 131_072, None),
        (LLAMA31_70B, 131_072, None),
        (QWEN25_7B, 131_072, None),  # "use_sliding_window": false
        (MISTRAL_7B, 32_768, 4_096),  # "max_position_embeddings": 32768, "sliding_window": 4096
        (LLAMA2_7B, 4_096, None),  # "max_position_embeddings": 4096
    ],
    ids=lambda value: getattr(value, "name", str(value)),
)
def test_context_limits_from_config_json(cfg: ModelConfig, max_positions: int, window: int | None) -> None:
    assert cfg.max_position_embeddings == max_positions
    assert cfg.sliding_window == window


def test_kv_tokens_are_the_window() -> None:
    assert MISTRAL_7B.kv_tokens(32_768) == 4_096
    assert MISTRAL_7B.kv_tokens(4_096) == 4_096
    assert MISTRAL_7B.kv_tokens(100) == 100
    assert LLAMA31_8B.kv_tokens(131_072) == 131_072


def test_context_past_the_maximum_names_the_limit() -> None:
    check_context(LLAMA31_8B, 131_072)  # the maximum itself is allowed
    with pytest.raises(
        ValueError, match=r"ctx 131,073 exceeds Llama-3.1-8B's max_position_embeddings of 131,072"
    ):
        check_context(LLAMA31_8B, 131_073)
    with pytest.raises(ValueError, match=r"Mistral-7B-v0\.1's max_position_embeddings of 32,768"):
        check_context(MISTRAL_7B, 10**12)
    test_shape = ModelConfig("test", 2, 64, 4, 2, 16, 128, 500, tied=True)
    check_context(test_shape, 10**12)  # no limit known: no limit applied


@pytest.mark.parametrize("ctx", [0, -5, 1.5, True, "1024"])
def test_context_must_be_a_positive_integer(ctx: object) -> None:
    with pytest.raises(ValueError, match="ctx must be an integer >= 1"):
        check_context(LLAMA31_8B, ctx)  # type: ignore[arg-type]


def test_tied_table_counted_once() -> None:
    untied = dataclasses.replace(LLAMA32_1B, tied=False)
    assert untied.param_count - LLAMA32_1B.param_count == LLAMA32_1B.output_params


def test_model_config_lookup() -> None:
    assert model_config("llama-3.1-8b") is LLAMA31_8B
    assert all(model_config(name) is cfg for name, cfg in MODELS.items())
    with pytest.raises(ValueError, match=r"unknown model 'gpt-9'.*Llama-3.1-8B"):
        model_config("gpt-9")


@pytest.mark.parametrize(
    "field",
    [
        "n_layers",
        "d_model",
        "n_heads",
        "n_kv_heads",
        "d_head",
        "d_ff",
        "vocab",
        "max_position_embeddings",
        "sliding_window",
    ],
)
@pytest.mark.parametrize("bad", [0, -1, 2.5])
def test_non_positive_size_names_the_field(field: str, bad: int) -> None:
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(LLAMA31_8B, **{field: bad})


def test_heads_not_multiple_of_kv_heads() -> None:
    with pytest.raises(ValueError, match=r"n_heads.*n_kv_heads"):
        dataclasses.replace(LLAMA31_8B, n_heads=30)
