"""Named model configs: GPT-2's family, the textbook's, a tutorial's, tiny ones, since-GPT-2 styles, real sizes.

Each is a ``GPTConfig`` (``engine.config``); ``get_preset`` finds a name in any of the tables.
"""

from __future__ import annotations

from typing import Any

from playground.engine.config import ConfigError, GPTConfig

# Presets. Counts in comments are the figures tests assert on the built models.
PRESETS: dict[str, GPTConfig] = {
    # OpenAI's GPT-2 family: qkv bias, tied input/output embeddings.
    "gpt2-small": GPTConfig(),  # 124,439,808
    "gpt2-medium": GPTConfig(emb_dim=1024, n_heads=16, n_layers=24),  # 354,823,168
    "gpt2-large": GPTConfig(emb_dim=1280, n_heads=20, n_layers=36),  # 774,030,080
    "gpt2-xl": GPTConfig(emb_dim=1600, n_heads=25, n_layers=48),  # 1,557,611,200
    # The textbook's GPT_CONFIG_124M as written: no qkv bias, separate output head -> 163,009,536.
    "textbook-124m": GPTConfig(drop_rate=0.1, qkv_bias=False, tie_weights=False),
    "textbook-124m-8-heads": GPTConfig(n_heads=8, drop_rate=0.1, qkv_bias=False, tie_weights=False),
    # The decoder-only tutorial model: sinusoidal positions, ReLU, d=512, 8 heads, 6 blocks.
    "tutorial-d512": GPTConfig(
        context_length=512,
        emb_dim=512,
        n_heads=8,
        n_layers=6,
        drop_rate=0.1,
        pos_encoding="sinusoidal",
        activation="relu",
        tie_weights=True,
    ),
    # Small enough to build and generate in well under a second on a laptop CPU.
    "tiny": GPTConfig(context_length=256, emb_dim=128, n_heads=4, n_layers=4),
    "nano": GPTConfig(context_length=128, emb_dim=64, n_heads=4, n_layers=2),
}

DEFAULT_PRESET = "tiny"

# What changed since GPT-2, on the same from-scratch model: tiny and trainable on the GPT-2 tokenizer,
# each with the switches of the family it is named after (the sizes are this playground's, not theirs).
_LLAMA_SWITCHES: dict[str, Any] = dict(
    pos_encoding="rope", norm="rmsnorm", ff="swiglu", qkv_bias=False, bias=False, drop_rate=0.0, ln_eps=1e-5
)
MODERN_PRESETS: dict[str, GPTConfig] = {
    # Llama 3.2: RoPE (θ 500,000), RMSNorm, SwiGLU, 4 query heads per key/value head, no biases, tied head.
    "llama-3.2-style": GPTConfig(
        context_length=256,
        emb_dim=128,
        n_heads=8,
        n_kv_heads=2,
        n_layers=4,
        ff_hidden_dim=512,
        rope_theta=500000.0,
        **_LLAMA_SWITCHES,
    ),
    # Qwen3: Llama's switches plus RMSNorm on queries and keys, and heads wider than emb_dim / n_heads.
    "qwen3-style": GPTConfig(
        context_length=256,
        emb_dim=128,
        n_heads=4,
        n_kv_heads=2,
        fixed_head_dim=64,
        n_layers=4,
        ff_hidden_dim=384,
        rope_theta=1000000.0,
        qk_norm=True,
        **{**_LLAMA_SWITCHES, "ln_eps": 1e-6},
    ),
    # Mistral: Llama's switches, a sliding window over the last 64 positions, an untied output head.
    "mistral-style": GPTConfig(
        context_length=256,
        emb_dim=128,
        n_heads=8,
        n_kv_heads=2,
        n_layers=4,
        ff_hidden_dim=448,
        sliding_window=64,
        tie_weights=False,
        **_LLAMA_SWITCHES,
    ),
}

# The real sizes, for counting only (built on the meta device: shapes, no numbers). Their configs as
# published (config.json on the hub); the counts are the ones tests assert on the built models.
REAL_SIZES: dict[str, GPTConfig] = {
    "llama-3.2-1b": GPTConfig(
        vocab_size=128256,
        context_length=131072,
        emb_dim=2048,
        n_heads=32,
        n_kv_heads=8,
        n_layers=16,
        ff_hidden_dim=8192,
        rope_theta=500000.0,
        rope_llama3=(32.0, 1.0, 4.0, 8192),  # factor, low_freq_factor, high_freq_factor, original context
        tokenizer="own",
        **_LLAMA_SWITCHES,
    ),  # 1,235,814,400
    "qwen3-0.6b": GPTConfig(
        vocab_size=151936,
        context_length=40960,
        emb_dim=1024,
        n_heads=16,
        n_kv_heads=8,
        fixed_head_dim=128,
        n_layers=28,
        ff_hidden_dim=3072,
        rope_theta=1000000.0,
        qk_norm=True,
        tokenizer="own",
        **{**_LLAMA_SWITCHES, "ln_eps": 1e-6},
    ),  # 596,049,920
}


def get_preset(name: str) -> GPTConfig:
    for table in (PRESETS, MODERN_PRESETS, REAL_SIZES):
        if name in table:
            return table[name]
    raise ConfigError(
        "config.unknown_preset",
        "unknown preset {name!r}; choose one of: {choices}.",
        name=name,
        choices=", ".join([*PRESETS, *MODERN_PRESETS, *REAL_SIZES]),
    )
