"""Model configuration: a frozen, validated dataclass, named presets, and a memory estimate.

Field names follow the textbook (LLMs-from-scratch): ``vocab_size, context_length, emb_dim, n_heads,
n_layers, drop_rate, qkv_bias``. The extra fields choose between the architecture variants that the
tutorials disagree on, so one model class can show all of them.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any, cast

from playground.errors import UserError

GPT2_VOCAB_SIZE = 50257  # tokens in the GPT-2 BPE (50,000 merges + 256 bytes + <|endoftext|>)
# A whole-number field past this is no model at all (a tensor dimension, a count of layers): refused
# before any size is computed from it, so 1e308 gets a message rather than an overflow.
MAX_FIELD_VALUE = 2**31 - 1

POS_ENCODINGS = ("learned", "sinusoidal")
ACTIVATIONS = ("gelu_tanh", "gelu", "relu")
NORM_PLACEMENTS = ("pre", "post")
ATTENTION_IMPLS = ("fused", "per_head")

_BYTES_PER_ELEMENT = {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1, "int8-dynamic": 1}


class ConfigError(UserError):
    """A config that cannot be built; the message is written to be shown to a user as it is."""


class SerializableConfig:
    """replace / to_dict / to_json / from_dict for the frozen config dataclasses (model, training)."""

    _kind = "config"  # how the error for an unknown field names the fields

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(cast(Any, self))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict):
        known = {f.name for f in dataclasses.fields(cast(Any, cls))}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                "config.unknown_fields", "unknown {kind} field(s): {fields}.", kind=cls._kind, fields=", ".join(unknown)
            )
        return cls(**data)


@dataclass(frozen=True)
class GPTConfig(SerializableConfig):
    vocab_size: int = GPT2_VOCAB_SIZE
    context_length: int = 1024
    emb_dim: int = 768
    n_heads: int = 12
    n_layers: int = 12
    drop_rate: float = 0.0
    qkv_bias: bool = True
    tie_weights: bool = True
    pos_encoding: str = "learned"  # learned table (GPT-2) | fixed sinusoids (Vaswani et al.)
    activation: str = "gelu_tanh"  # GELU tanh approximation (GPT-2) | exact GELU | ReLU
    norm_placement: str = "pre"  # LayerNorm before each sub-layer (GPT-2) | after the residual add
    attention_impl: str = "fused"  # one projection split into heads | a list of single-head modules
    ln_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(
                    "config.not_whole", "{name} must be a whole number, got {value!r}.", name=name, value=value
                )
            if value <= 0:
                raise ConfigError(
                    "config.not_positive", "{name} must be positive, got {value}.", name=name, value=value
                )
            if value > MAX_FIELD_VALUE:
                raise ConfigError(
                    "config.field_huge",
                    "{name} is {value:,}; no model has that many (at most {cap:,}).",
                    name=name,
                    value=value,
                    cap=MAX_FIELD_VALUE,
                )
        if self.emb_dim % self.n_heads:
            raise ConfigError(
                "config.heads_divide",
                "emb_dim ({emb_dim}) must be divisible by n_heads ({n_heads}): each head gets emb_dim / "
                "n_heads dimensions. Try n_heads in {options}.",
                emb_dim=self.emb_dim,
                n_heads=self.n_heads,
                options=_divisors_near(self.emb_dim, self.n_heads),
            )
        if isinstance(self.drop_rate, bool) or not isinstance(self.drop_rate, (int, float)):
            raise ConfigError(
                "config.drop_rate_number", "drop_rate must be a number, got {drop_rate!r}.", drop_rate=self.drop_rate
            )
        if not (0.0 <= self.drop_rate < 1.0) or math.isnan(self.drop_rate):
            raise ConfigError(
                "config.drop_rate_range", "drop_rate must be in [0, 1), got {drop_rate}.", drop_rate=self.drop_rate
            )
        if self.vocab_size < GPT2_VOCAB_SIZE:
            raise ConfigError(
                "config.vocab_too_small",
                "vocab_size ({vocab_size}) is smaller than the GPT-2 tokenizer's {gpt2_vocab} tokens; some "
                "token ids would have no embedding.",
                vocab_size=self.vocab_size,
                gpt2_vocab=GPT2_VOCAB_SIZE,
            )
        for name, allowed in (
            ("pos_encoding", POS_ENCODINGS),
            ("activation", ACTIVATIONS),
            ("norm_placement", NORM_PLACEMENTS),
            ("attention_impl", ATTENTION_IMPLS),
        ):
            if getattr(self, name) not in allowed:
                raise ConfigError(
                    "config.not_one_of",
                    "{name} must be one of {choices}; got {value!r}.",
                    name=name,
                    choices=", ".join(allowed),
                    value=getattr(self, name),
                )
        if self.pos_encoding == "sinusoidal" and self.emb_dim % 2:
            raise ConfigError(
                "config.sinusoidal_odd",
                "sinusoidal positions need an even emb_dim, got {emb_dim}.",
                emb_dim=self.emb_dim,
            )
        if isinstance(self.ln_eps, bool) or not isinstance(self.ln_eps, (int, float)):
            raise ConfigError("config.ln_eps_number", "ln_eps must be a number, got {ln_eps!r}.", ln_eps=self.ln_eps)
        if not (0 < self.ln_eps < 1):
            raise ConfigError("config.ln_eps_range", "ln_eps must be in (0, 1), got {ln_eps}.", ln_eps=self.ln_eps)

    @property
    def head_dim(self) -> int:
        return self.emb_dim // self.n_heads


def _divisors_near(n: int, target: int) -> list[int]:
    divisors = [d for d in range(1, min(n, 64) + 1) if n % d == 0]
    return sorted(divisors, key=lambda d: (abs(d - target), d))[:4]


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


def get_preset(name: str) -> GPTConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(
            "config.unknown_preset",
            "unknown preset {name!r}; choose one of: {choices}.",
            name=name,
            choices=", ".join(PRESETS),
        ) from None


# ----------------------------------------------------------------------------------------------
# Memory: estimated from the config alone, so that a too-large model is refused before allocating.


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
    d, V, L, C = cfg.emb_dim, cfg.vocab_size, cfg.n_layers, cfg.context_length
    per_block = (3 * d * d + (3 * d if cfg.qkv_bias else 0)) + (d * d + d) + (8 * d * d + 5 * d) + 4 * d
    total = V * d + L * per_block
    if cfg.pos_encoding == "learned":
        total += C * d
    if cfg.norm_placement == "pre":
        total += 2 * d  # final_norm
    if not cfg.tie_weights:
        total += V * d
    return total


def estimate_memory_bytes(cfg: GPTConfig, dtype: str = "float32", batch_size: int = 1) -> int:
    """Weights + a full-context KV cache + the largest activations of one inference forward pass."""
    b = bytes_per_element(dtype)
    weights = count_parameters_analytic(cfg) * b
    kv_cache = 2 * cfg.n_layers * cfg.context_length * cfg.emb_dim * b * batch_size
    # Largest transient tensors: the logits of a full-context forward (kept in float32) and one
    # layer's attention scores.
    logits = batch_size * cfg.context_length * cfg.vocab_size * 4
    scores = batch_size * cfg.n_heads * cfg.context_length**2 * 4
    hidden = batch_size * cfg.context_length * cfg.emb_dim * 4 * 8
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
