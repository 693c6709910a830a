"""A model's size from its config alone: its parameters, KV cache, memory and the server's build caps.

Parameters by formula, bytes per element, the KV cache, a memory estimate, and the caps on what this server
builds, so that a too-large model is refused before anything is allocated.
"""

from __future__ import annotations

from playground.engine.config import GPT2_VOCAB_SIZE, ConfigError, GPTConfig

_BYTES_PER_ELEMENT = {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1, "int8-dynamic": 1}


def bytes_per_element(dtype: str) -> int:
    try:
        return _BYTES_PER_ELEMENT[dtype.replace("torch.", "")]
    except KeyError:
        raise ConfigError(
            "config.unknown_dtype",
            "unknown dtype {dtype!r}; use one of {choices}.",
            dtype=dtype,
            choices=", ".join(_BYTES_PER_ELEMENT),
        ) from None


def count_parameters_analytic(cfg: GPTConfig) -> int:
    """The parameter count from the formulas (inspection.parameter_breakdown shows each term)."""
    return sum(parameter_formula(cfg).values())


def parameter_formula(cfg: GPTConfig) -> dict[str, int]:
    """Each component's parameters, written out: d = emb_dim, H query heads and K key/value heads of hd
    dimensions, F the feed-forward's hidden width, V the vocabulary, L blocks, C positions."""
    d, V, L, C = cfg.emb_dim, cfg.vocab_size, cfg.n_layers, cfg.context_length
    H, K, hd, F = cfg.n_heads, cfg.kv_heads, cfg.head_dim, cfg.ff_dim
    qkv_bias, bias = (1 if cfg.qkv_bias else 0), (1 if cfg.bias else 0)
    norm = 2 * d if cfg.norm == "layernorm" else d  # scale and shift | scale only
    attention = (
        (d * H * hd + qkv_bias * H * hd)  # W_query
        + 2 * (d * K * hd + qkv_bias * K * hd)  # W_key, W_value: K heads, not H (GQA's saving)
        + (H * hd * d + bias * d)  # out_proj
        + (2 * hd if cfg.qk_norm else 0)  # q_norm, k_norm: one scale of hd each
    )
    if cfg.ff == "swiglu":
        feed_forward = 3 * d * F + bias * (2 * F + d)  # fc1 (gate), fc2 (up): d -> F; fc3: F -> d
    else:
        feed_forward = 2 * d * F + bias * (F + d)  # d -> F -> d
    return {
        "tok_emb": V * d,
        "pos_emb": C * d if cfg.pos_encoding == "learned" else 0,  # sinusoids and RoPE are computed, not learned
        "attention": L * attention,
        "feed_forward": L * feed_forward,
        "norms": L * 2 * norm + (norm if cfg.norm_placement == "pre" else 0),  # norm1, norm2 per block; final_norm
        "out_head": 0 if cfg.tie_weights else V * d,
    }


def kv_cache_bytes(cfg: GPTConfig, tokens: int, dtype: str = "float32", batch_size: int = 1) -> int:
    """Bytes of keys and values held for ``tokens`` positions: 2 · K · hd numbers per layer and position,
    where a windowed layer holds at most its window's positions."""
    per_position = 2 * cfg.kv_heads * cfg.head_dim * bytes_per_element(dtype) * batch_size
    return sum(per_position * min(tokens, cfg.windowed(i) or tokens) for i in range(cfg.n_layers))


def kv_bytes_per_token(cfg: GPTConfig, dtype: str = "float32") -> float:
    """The KV cache per token of a full context: 2 · L · K · hd · bytes, less where windows cap a layer."""
    return kv_cache_bytes(cfg, cfg.context_length, dtype) / cfg.context_length


def estimate_memory_bytes(cfg: GPTConfig, dtype: str = "float32", batch_size: int = 1) -> int:
    """Weights + a full-context KV cache + the largest activations of one inference forward pass."""
    b = bytes_per_element(dtype)
    weights = count_parameters_analytic(cfg) * b
    # The cache is allocated for every position, windows or not (the mask, not the cache, is windowed).
    kv_cache = 2 * cfg.n_layers * cfg.context_length * cfg.kv_heads * cfg.head_dim * b * batch_size
    # Largest transient tensors: the logits of a full-context forward (kept in float32) and one
    # layer's attention scores.
    logits = batch_size * cfg.context_length * cfg.vocab_size * 4
    scores = batch_size * cfg.n_heads * cfg.context_length**2 * 4
    hidden = batch_size * cfg.context_length * max(cfg.emb_dim, cfg.ff_dim // 4) * 4 * 8
    return weights + kv_cache + logits + scores + hidden


# Build size caps. The memory check alone lets through configs that fit in RAM but take minutes
# to build and to run (10,000 layers of d128 gave no answer in 300 s; 3,000 layers took 83 s):
# every layer adds a fixed cost to the build and to each generated token, and every parameter is
# drawn once and then read once per token. Measured on this project's 2-core machine while other
# jobs shared it (load 6-8): GPT-2 XL (1.56 B parameters) built in 26-38 s, 52 layers of d1600
# (1.68 B, just under the cap) in 28 s, 62 layers (1.99 B) in 96 s, 256 layers of d128 in 1.5 s.
# The caps keep GPT-2 XL, tied or untied, and a little more.
MAX_LAYERS = 256
MAX_EMB_DIM = 8192
MAX_PARAMETERS = 1_700_000_000
# The tokenizer never produces an id of 50,257 or more: rows past it are never read but cost memory
# and time in every output-head product (vocab_size 10,000,000 passed the other caps and held the one
# build slot for 114-322 s). A larger vocabulary is allowed on purpose, up to 2¹⁶ (nanoGPT pads GPT-2's
# to 50,304 for speed). GPT-2 reads 1,024 positions; 8,192 leaves room to experiment. More heads than
# 256 only split emb_dim into slivers (and a per-head model into that many modules).
MAX_VOCAB_SIZE = 65_536
MAX_CONTEXT_LENGTH = 8192
MAX_HEADS = 256


def check_build_size(cfg: GPTConfig) -> None:
    """ConfigError if a config is too slow to build and run on a shared server."""
    n_params = count_parameters_analytic(cfg)
    for name, value, cap, unit in (
        ("n_layers", cfg.n_layers, MAX_LAYERS, "layers"),
        ("emb_dim", cfg.emb_dim, MAX_EMB_DIM, "dimensions"),
        ("parameters", n_params, MAX_PARAMETERS, "parameters"),
    ):
        if value > cap:
            what = unit if name == unit else f"{unit} ({name})"
            raise ConfigError(
                "config.too_large",
                "This model has {value:,} {what}; this server builds at most {cap:,} {unit} (GPT-2 XL: 48 "
                "layers, emb_dim 1600, 1,557,611,200 parameters). A model this size takes minutes to build and "
                "to generate, and would hold up everyone else: make it smaller.",
                value=value,
                what=what,
                cap=cap,
                unit=unit,
            )
    if cfg.vocab_size > MAX_VOCAB_SIZE:
        raise ConfigError(
            "config.vocab_too_large",
            "vocab_size is {value:,}; the GPT-2 tokenizer makes {gpt2_vocab:,} different tokens and this server "
            "builds at most {cap:,} (rows past {gpt2_vocab:,} are never used; they only cost memory and time).",
            value=cfg.vocab_size,
            gpt2_vocab=GPT2_VOCAB_SIZE,
            cap=MAX_VOCAB_SIZE,
        )
    if cfg.context_length > MAX_CONTEXT_LENGTH:
        raise ConfigError(
            "config.context_too_large",
            "context_length is {value:,}; this server builds at most {cap:,} positions (GPT-2: 1,024).",
            value=cfg.context_length,
            cap=MAX_CONTEXT_LENGTH,
        )
    if cfg.n_heads > MAX_HEADS:
        raise ConfigError(
            "config.heads_too_many",
            "n_heads is {value:,}; this server builds at most {cap} heads per layer (GPT-2 XL: 25).",
            value=cfg.n_heads,
            cap=MAX_HEADS,
        )
