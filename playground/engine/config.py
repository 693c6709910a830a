"""Model configuration: a frozen, validated dataclass (presets: ``engine.presets``; sizes: ``engine.sizes``).

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

POS_ENCODINGS = ("learned", "sinusoidal", "rope")
ACTIVATIONS = ("gelu_tanh", "gelu", "relu")
NORM_PLACEMENTS = ("pre", "post")
ATTENTION_IMPLS = ("fused", "per_head")
NORMS = ("layernorm", "rmsnorm")
FEED_FORWARDS = ("mlp", "swiglu")
TOKENIZERS = ("gpt2", "own")  # the bundled GPT-2 BPE | a checkpoint folder's own tokenizer.json

# The switches that came after GPT-2, with the value that leaves a model GPT-2's. A config whose switches
# all hold these values serialises, builds and runs exactly as before the switches existed.
SINCE_GPT2_DEFAULTS: dict[str, Any] = {
    "norm": "layernorm",
    "ff": "mlp",
    "ff_hidden_dim": 0,
    "rope_theta": 10000.0,
    "rope_llama3": (),
    "n_kv_heads": 0,
    "fixed_head_dim": 0,
    "qk_norm": False,
    "sliding_window": 0,
    "window_layers": (),
    "bias": True,
    "tokenizer": "gpt2",
}


class ConfigError(UserError):
    """A config that cannot be built; the message is written to be shown to a user as it is."""


class SerializableConfig:
    """replace / to_dict / to_json / from_dict for the frozen config dataclasses (model, training)."""

    _kind = "config"  # how the error for an unknown field names the fields

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(cast(Any, self))
        # A switch at its GPT-2 value is left out, so a GPT-2 config's record is what it always was.
        for name, default in SINCE_GPT2_DEFAULTS.items():
            if name in data and data[name] == default:
                del data[name]
        for name in ("window_layers", "rope_llama3"):
            if isinstance(data.get(name), tuple):
                data[name] = list(data[name])
        return data

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
    ln_eps: float = 1e-5  # the norms' epsilon (LayerNorm or RMSNorm)
    # Since GPT-2 (Llama, Qwen, Mistral). Each is off by default; see SINCE_GPT2_DEFAULTS.
    norm: str = "layernorm"  # LayerNorm (GPT-2) | RMSNorm: x / √(mean(x²) + eps) · scale, no mean, no shift
    ff: str = "mlp"  # Linear -> activation -> Linear (GPT-2) | SwiGLU: fc3(silu(fc1(x)) · fc2(x))
    ff_hidden_dim: int = 0  # the feed-forward's hidden width; 0: 4 · emb_dim (GPT-2)
    rope_theta: float = 10000.0  # RoPE's base: pair i turns by position · θ^(-2i/head_dim)
    rope_llama3: tuple = ()  # Llama 3's long-context RoPE: (factor, low_freq_factor, high_freq_factor, original)
    n_kv_heads: int = 0  # grouped-query attention: heads sharing one key/value head; 0: n_heads (GPT-2)
    fixed_head_dim: int = 0  # a head's width when it is not emb_dim / n_heads (Qwen3: 128); 0: emb_dim / n_heads
    qk_norm: bool = False  # RMSNorm on each head's query and key before RoPE (Qwen3)
    sliding_window: int = 0  # a query sees only the last `sliding_window` positions (itself included); 0: all
    window_layers: tuple[int, ...] = ()  # the layers the window applies to; (): every layer
    bias: bool = True  # biases in out_proj and the feed-forward (False: none, as in Llama and Qwen3)
    tokenizer: str = "gpt2"  # "gpt2": the bundled BPE | "own": a checkpoint folder's tokenizer.json

    def __post_init__(self) -> None:
        for name in ("window_layers", "rope_llama3"):
            if isinstance(getattr(self, name), list):  # from JSON
                object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in whole_fields():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(
                    "config.not_whole", "{name} must be a whole number, got {value!r}.", name=name, value=value
                )
            may_be_zero = name in SINCE_GPT2_DEFAULTS  # 0 means "as GPT-2" for these
            if value < 0 or (value == 0 and not may_be_zero):
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
        if not self.fixed_head_dim and self.emb_dim % self.n_heads:
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
        if self.tokenizer == "gpt2" and self.vocab_size < GPT2_VOCAB_SIZE:
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
            ("norm", NORMS),
            ("ff", FEED_FORWARDS),
            ("tokenizer", TOKENIZERS),
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
        check_since_gpt2(self)

    @property
    def head_dim(self) -> int:
        return self.fixed_head_dim or self.emb_dim // self.n_heads

    @property
    def kv_heads(self) -> int:
        """Key/value heads: n_heads in GPT-2; fewer with grouped-query attention (each shared by a group)."""
        return self.n_kv_heads or self.n_heads

    @property
    def ff_dim(self) -> int:
        return self.ff_hidden_dim or 4 * self.emb_dim

    def windowed(self, layer: int) -> int:
        """The sliding window of ``layer`` (0: it sees every earlier position)."""
        if not self.sliding_window or (self.window_layers and layer not in self.window_layers):
            return 0
        return self.sliding_window

    def since_gpt2(self) -> list[str]:
        """The switches this config sets away from GPT-2's layout (empty: a GPT-2-layout model)."""
        changed = [name for name, default in SINCE_GPT2_DEFAULTS.items() if getattr(self, name) != default]
        if self.pos_encoding == "rope":
            changed.insert(0, "pos_encoding")
        return [name for name in changed if name != "tokenizer" or self.tokenizer != "gpt2"]


def whole_fields() -> tuple[str, ...]:
    """The config's whole-number fields (annotated ``int``): each must be a positive int (or 0 where 0
    means "as GPT-2"). The model form reads the same fields exactly (``model_form.INT_FIELDS``)."""
    return tuple(f.name for f in dataclasses.fields(GPTConfig) if f.type in ("int", int))


def check_since_gpt2(cfg: GPTConfig) -> None:
    """The switches after GPT-2: each alone or together, with messages a learner can act on."""
    if cfg.kv_heads > cfg.n_heads or cfg.n_heads % cfg.kv_heads:
        raise ConfigError(
            "config.kv_heads_divide",
            "n_kv_heads ({n_kv_heads}) must divide n_heads ({n_heads}): each key/value head serves a group of "
            "n_heads / n_kv_heads query heads. Try n_kv_heads in {options}.",
            n_kv_heads=cfg.n_kv_heads,
            n_heads=cfg.n_heads,
            options=[d for d in range(1, cfg.n_heads + 1) if cfg.n_heads % d == 0][:6],
        )
    if cfg.attention_impl == "per_head" and cfg.kv_heads != cfg.n_heads:
        raise ConfigError(
            "config.per_head_gqa",
            "attention_impl per_head gives every head its own key and value; grouped-query attention "
            "(n_kv_heads {n_kv_heads} < n_heads {n_heads}) needs the fused module.",
            n_kv_heads=cfg.n_kv_heads,
            n_heads=cfg.n_heads,
        )
    if cfg.pos_encoding == "rope" and cfg.head_dim % 2:
        raise ConfigError(
            "config.rope_odd",
            "RoPE turns pairs of a head's dimensions, so it needs an even head_dim (emb_dim / n_heads, or "
            "fixed_head_dim), got {head_dim}.",
            head_dim=cfg.head_dim,
        )
    theta = cfg.rope_theta
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not (1 < theta < 1e12):
        raise ConfigError("config.rope_theta", "rope_theta must be a number above 1, got {theta!r}.", theta=theta)
    scaling = cfg.rope_llama3
    if scaling and (
        not isinstance(scaling, tuple)
        or len(scaling) != 4
        or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 for v in scaling)
        or not scaling[2] > scaling[1]
    ):
        raise ConfigError(
            "config.rope_llama3",
            "rope_llama3 must be four positive numbers (factor, low_freq_factor, high_freq_factor > low_freq_factor, "
            "original context), got {value!r}.",
            value=scaling,
        )
    for name in ("qk_norm", "bias"):
        if not isinstance(getattr(cfg, name), bool):
            raise ConfigError(
                "config.not_bool", "{name} must be true or false, got {value!r}.", name=name, value=getattr(cfg, name)
            )
    layers = cfg.window_layers
    if not isinstance(layers, tuple) or any(
        isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < cfg.n_layers for i in layers
    ):
        raise ConfigError(
            "config.window_layers",
            "window_layers must list layers from 0 to {last}, got {value!r}.",
            last=cfg.n_layers - 1,
            value=layers,
        )
    if layers and not cfg.sliding_window:
        raise ConfigError(
            "config.window_layers_without_window",
            "window_layers names layers for a sliding window, but sliding_window is 0: set the window's size.",
        )


def _divisors_near(n: int, target: int) -> list[int]:
    divisors = [d for d in range(1, min(n, 64) + 1) if n % d == 0]
    return sorted(divisors, key=lambda d: (abs(d - target), d))[:4]
