"""model.llm: model shapes and exact published parameter counts."""

import dataclasses

import pytest

from model.llm import (
    LLAMA31_8B,
    LLAMA31_70B,
    LLAMA32_1B,
    LLAMA32_3B,
    MISTRAL_7B,
    MODELS,
    QWEN25_7B,
    ModelConfig,
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
    ],
    ids=lambda value: getattr(value, "name", str(value)),
)
def test_param_count_equals_published(cfg: ModelConfig, published: int) -> None:
    assert cfg.param_count == published


def test_seed_call_shape_builds_llama32_1b() -> None:
    shape = {"n_layers": 16, "d_model": 2048, "n_heads": 32, "n_kv_heads": 8, "d_head": 64, "d_ff": 8192}
    cfg = ModelConfig("Llama-3.2-1B", **shape, vocab=128256, tied=True)
    assert cfg == LLAMA32_1B


def test_tied_table_counted_once() -> None:
    untied = dataclasses.replace(LLAMA32_1B, tied=False)
    assert untied.param_count - LLAMA32_1B.param_count == LLAMA32_1B.output_params


def test_model_config_lookup() -> None:
    assert model_config("llama-3.1-8b") is LLAMA31_8B
    assert all(model_config(name) is cfg for name, cfg in MODELS.items())
    with pytest.raises(ValueError, match=r"unknown model 'gpt-9'.*Llama-3.1-8B"):
        model_config("gpt-9")


@pytest.mark.parametrize("field", ["n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "vocab"])
@pytest.mark.parametrize("bad", [0, -1])
def test_non_positive_size_names_the_field(field: str, bad: int) -> None:
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(LLAMA31_8B, **{field: bad})


def test_heads_not_multiple_of_kv_heads() -> None:
    with pytest.raises(ValueError, match=r"n_heads.*n_kv_heads"):
        dataclasses.replace(LLAMA31_8B, n_heads=30)
