"""Decoder-only transformer shapes (Llama-style: RMSNorm, GQA attention, gated MLP), parameter counts, and
the context a model accepts.

Each catalogue entry is copied from the model's Hugging Face ``config.json``; its parameter count equals the
published one exactly, which checks the shape and the counting rules together. ``max_position_embeddings``
and ``sliding_window`` come from the same file: the longest context the model was built for, and the window
of most recent tokens each layer attends over (Mistral-7B v0.1: 4,096), whose keys and values are all the
KV cache keeps and reads.
"""

from __future__ import annotations

from dataclasses import dataclass

_SIZE_FIELDS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "vocab")
_OPTIONAL_SIZE_FIELDS = ("max_position_embeddings", "sliding_window")


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a decoder-only transformer.

    Sizes are counts: layers, model width, query heads, key/value heads (grouped-query attention), width per
    head, MLP hidden width and vocabulary. ``tied`` means the output layer shares the token-embedding table;
    ``qkv_bias`` means the q, k and v projections carry biases (Qwen2). ``max_position_embeddings`` is the
    longest context in tokens (None: no limit known, as for test shapes); ``sliding_window`` the number of
    most recent tokens attention reads (None: all of them).
    """

    name: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_ff: int
    vocab: int
    tied: bool
    qkv_bias: bool = False
    max_position_embeddings: int | None = None
    sliding_window: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name must not be empty")
        for field_name in _SIZE_FIELDS:
            value = getattr(self, field_name)
            if not _is_positive_int(value):
                raise ValueError(f"{field_name} must be a positive integer, got {value!r}")
        for field_name in _OPTIONAL_SIZE_FIELDS:
            value = getattr(self, field_name)
            if value is not None and not _is_positive_int(value):
                raise ValueError(f"{field_name} must be a positive integer or None, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")

    @property
    def attention_params(self) -> int:
        """Weights (and q/k/v biases, if any) of one layer's attention: q, k, v and output projections."""
        q_width = self.n_heads * self.d_head
        kv_width = self.n_kv_heads * self.d_head
        projections = self.d_model * q_width + 2 * self.d_model * kv_width + q_width * self.d_model
        biases = q_width + 2 * kv_width if self.qkv_bias else 0
        return projections + biases

    @property
    def mlp_params(self) -> int:
        """Weights of one layer's gated MLP: gate, up (d_model × d_ff each) and down (d_ff × d_model)."""
        return 3 * self.d_model * self.d_ff

    @property
    def layer_params(self) -> int:
        """Parameters of one transformer layer: attention, MLP and its two RMSNorm weight vectors."""
        norm_params = 2 * self.d_model
        return self.attention_params + self.mlp_params + norm_params

    @property
    def embedding_params(self) -> int:
        """Parameters of the token-embedding table (vocab × d_model)."""
        return self.vocab * self.d_model

    @property
    def final_norm_params(self) -> int:
        """Parameters of the RMSNorm after the last layer."""
        return self.d_model

    @property
    def output_params(self) -> int:
        """Weights the output layer multiplies by (d_model × vocab): the embedding table when ``tied``."""
        return self.d_model * self.vocab

    @property
    def param_count(self) -> int:
        """Total distinct parameters, as published: a tied output layer is not counted twice."""
        separate_output_params = 0 if self.tied else self.output_params
        return (
            self.embedding_params
            + self.n_layers * self.layer_params
            + self.final_norm_params
            + separate_output_params
        )

    def kv_bytes_per_token(self, bytes_per_param: float = 2) -> float:
        """Bytes of KV cache one token occupies across all layers: keys and values of every KV head."""
        return 2 * self.n_layers * self.n_kv_heads * self.d_head * bytes_per_param

    def kv_tokens(self, ctx: int) -> int:
        """Tokens whose keys and values a decode step at context ``ctx`` keeps and reads: the whole context,
        or the sliding window where the model has one (Mistral-7B at ctx 32,768: 4,096)."""
        return ctx if self.sliding_window is None else min(ctx, self.sliding_window)


def check_context(cfg: ModelConfig, ctx: int) -> None:
    """The one check of a context length against a model: raises ValueError, naming the limit, when ``ctx``
    is not an integer >= 1 or exceeds ``cfg.max_position_embeddings``. The CLI, the roofline and analysis all
    call this one function."""
    if not _is_positive_int(ctx):
        raise ValueError(f"ctx must be an integer >= 1, got {ctx!r}")
    limit = cfg.max_position_embeddings
    if limit is not None and ctx > limit:
        raise ValueError(
            f"ctx {ctx:,} exceeds {cfg.name}'s max_position_embeddings of {limit:,} tokens (config.json)"
        )


# Llama 3.1 / 3.2 config.json: "max_position_embeddings": 131072 (RoPE scaled, "rope_type": "llama3"); no
# sliding window.
_LLAMA3_MAX_POSITIONS = 131_072

# One row per model, as config.json lists its sizes (ruff format would put each number on its own line).
# fmt: off
# https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json
LLAMA31_8B = ModelConfig(
    "Llama-3.1-8B", 32, 4096, 32, 8, 128, 14_336, 128_256, tied=False,
    max_position_embeddings=_LLAMA3_MAX_POSITIONS,
)
# https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json
LLAMA32_1B = ModelConfig(
    "Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128_256, tied=True,
    max_position_embeddings=_LLAMA3_MAX_POSITIONS,
)
# https://huggingface.co/meta-llama/Llama-3.2-3B/blob/main/config.json
LLAMA32_3B = ModelConfig(
    "Llama-3.2-3B", 28, 3072, 24, 8, 128, 8192, 128_256, tied=True,
    max_position_embeddings=_LLAMA3_MAX_POSITIONS,
)
# https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json
LLAMA31_70B = ModelConfig(
    "Llama-3.1-70B", 80, 8192, 64, 8, 128, 28_672, 128_256, tied=False,
    max_position_embeddings=_LLAMA3_MAX_POSITIONS,
)
# https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json (Qwen2 attention has q/k/v biases):
# "max_position_embeddings": 131072; its "sliding_window" field is present but "use_sliding_window": false, so
# every layer attends over the whole context.
QWEN25_7B = ModelConfig(
    "Qwen2.5-7B", 28, 3584, 28, 4, 128, 18_944, 152_064, tied=False, qkv_bias=True,
    max_position_embeddings=131_072,
)
# https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json: "max_position_embeddings": 32768,
# "sliding_window": 4096 (every layer; the rolling-buffer KV cache holds the last 4,096 tokens).
MISTRAL_7B = ModelConfig(
    "Mistral-7B-v0.1", 32, 4096, 32, 8, 128, 14_336, 32_000, tied=False,
    max_position_embeddings=32_768, sliding_window=4096,
)
# https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json: "hidden_size": 4096,
# "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32
# (no GQA), "vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": false. gpt-fast's
# published batch-1 figures (model/published.py) are for this model.
LLAMA2_7B = ModelConfig(
    "Llama-2-7B", 32, 4096, 32, 32, 128, 11_008, 32_000, tied=False,
    max_position_embeddings=4096,
)
# fmt: on

MODELS: dict[str, ModelConfig] = {
    cfg.name: cfg
    for cfg in (LLAMA31_8B, LLAMA32_1B, LLAMA32_3B, LLAMA31_70B, QWEN25_7B, MISTRAL_7B, LLAMA2_7B)
}


def model_config(name: str) -> ModelConfig:
    """Return the catalogue entry called ``name`` (case-insensitive).

    Raises ValueError naming the unknown model and listing the known ones.
    """
    by_lower_name = {model_name.lower(): cfg for model_name, cfg in MODELS.items()}
    key = name.strip().lower()
    if key not in by_lower_name:
        known = ", ".join(MODELS)
        raise ValueError(f"unknown model {name!r}; known models: {known}")
    return by_lower_name[key]
