"""Llama-, Qwen3- and Mistral-family checkpoints in the Hugging Face layout, in the textbook's names.

The whole conversion is the table below: the same matrices under other names, none transposed
(``nn.Linear`` on both sides). config.json becomes a GPTConfig with the switches since GPT-2 set.
"""

from __future__ import annotations

import re

import torch

from playground.engine.config import ConfigError, GPTConfig
from playground.engine.sizes import MAX_CONTEXT_LENGTH
from playground.engine.weight_layout import LoadReport, WeightLoadError

MODEL_TYPES = ("llama", "qwen3", "mistral")

# Hugging Face name (after "model.layers.{i}.") -> ours (after "trf_blocks.{i}.")
BLOCK_NAMES = {
    "self_attn.q_proj": "att.W_query",
    "self_attn.k_proj": "att.W_key",
    "self_attn.v_proj": "att.W_value",
    "self_attn.o_proj": "att.out_proj",
    "self_attn.q_norm.weight": "att.q_norm.scale",  # Qwen3's QK-norm
    "self_attn.k_norm.weight": "att.k_norm.scale",
    "mlp.gate_proj": "ff.fc1",
    "mlp.up_proj": "ff.fc2",
    "mlp.down_proj": "ff.fc3",
    "input_layernorm.weight": "norm1.scale",
    "post_attention_layernorm.weight": "norm2.scale",
}
TOP_NAMES = {
    "model.embed_tokens.weight": "tok_emb.weight",
    "model.norm.weight": "final_norm.scale",
    "lm_head.weight": "out_head.weight",
}
_BLOCK_KEY = re.compile(r"model\.layers\.(\d+)\.(.+)")
SKIPPED = re.compile(r".*rotary_emb\.inv_freq$")  # old checkpoints store RoPE's frequencies; they are computed


def our_key(key: str) -> str | None:
    """Our name for a Hugging Face tensor name, None if the table has none."""
    if key in TOP_NAMES:
        return TOP_NAMES[key]
    match = _BLOCK_KEY.fullmatch(key)
    if match is None:
        return None
    layer, rest = match.groups()
    for theirs, ours in BLOCK_NAMES.items():
        if rest == theirs or rest.startswith(theirs + "."):
            return f"trf_blocks.{layer}.{ours}{rest[len(theirs) :]}"
    return None


def convert_llama_state(hf_tensors: dict[str, torch.Tensor], cfg: GPTConfig, report: LoadReport) -> dict:
    """Rename; a tied checkpoint's lm_head (the embedding again) is dropped, the model ties it itself."""
    out = {}
    for key, value in hf_tensors.items():
        if SKIPPED.fullmatch(key):
            report.skipped.append(key)
            continue
        ours = our_key(key)
        if ours == "out_head.weight" and cfg.tie_weights:
            report.skipped.append(key)
            continue
        out[ours if ours is not None else key] = value
    return out


def config_from_hf_llama(hf: dict) -> GPTConfig:
    """A GPTConfig for a Llama, Qwen3 or Mistral config.json; WeightLoadError names what it cannot build."""
    kind = hf.get("model_type")
    if kind not in MODEL_TYPES:
        raise WeightLoadError(
            "weights.model_type",
            "config.json says model_type {kind!r}; this playground loads gpt2, {types}.",
            kind=kind,
            types=", ".join(MODEL_TYPES),
        )
    if hf.get("hidden_act", "silu") != "silu":
        raise WeightLoadError(
            "weights.activation", "unsupported activation_function {activation!r}", activation=hf.get("hidden_act")
        )
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    llama3: tuple = ()
    if rope_type == "llama3":
        keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
        llama3 = tuple(rope.get(k) for k in keys)
    elif rope_type not in ("default", None):
        raise WeightLoadError(
            "weights.rope_type",
            "config.json scales RoPE's frequencies ({rope_type!r}); this playground implements plain RoPE only, "
            "and a scaled checkpoint would give wrong numbers.",
            rope_type=rope_type,
        )
    attention_bias = bool(hf.get("attention_bias", False))
    if bool(hf.get("mlp_bias", False)) != attention_bias:
        raise WeightLoadError(
            "weights.mixed_bias",
            "config.json has attention_bias={a} but mlp_bias={m}; this model has one switch for both.",
            a=attention_bias,
            m=bool(hf.get("mlp_bias", False)),
        )
    try:
        d, n_heads, n_layers = int(hf["hidden_size"]), int(hf["num_attention_heads"]), int(hf["num_hidden_layers"])
        head_dim = int(hf.get("head_dim") or d // n_heads)
        window, window_layers = _window(hf, kind, n_layers)
        return GPTConfig(
            vocab_size=int(hf["vocab_size"]),
            # RoPE has no table of positions to size; the cache is allocated for at most this many
            context_length=min(int(hf.get("max_position_embeddings", 2048)), MAX_CONTEXT_LENGTH),
            emb_dim=d,
            n_heads=n_heads,
            n_kv_heads=int(hf.get("num_key_value_heads") or n_heads),
            n_layers=n_layers,
            fixed_head_dim=head_dim if head_dim * n_heads != d else 0,
            drop_rate=0.0,
            qkv_bias=attention_bias,
            bias=attention_bias,
            tie_weights=bool(hf.get("tie_word_embeddings", False)),
            pos_encoding="rope",
            rope_theta=float(rope.get("rope_theta", hf.get("rope_theta", 10000.0))),
            rope_llama3=llama3,
            norm="rmsnorm",
            ln_eps=float(hf.get("rms_norm_eps", 1e-6)),
            ff="swiglu",
            ff_hidden_dim=int(hf["intermediate_size"]),
            qk_norm=kind == "qwen3",
            sliding_window=window,
            window_layers=window_layers,
            tokenizer="own",
        )
    except KeyError as e:
        raise WeightLoadError(
            "weights.config_field_family",
            "config.json lacks the {kind} field {field!r}",
            kind=kind,
            field=e.args[0],
        ) from None
    except ConfigError as e:
        raise WeightLoadError(
            "weights.config_invalid", "The checkpoint's config is invalid: {reason}", reason=str(e)
        ) from None


def _window(hf: dict, kind: str, n_layers: int) -> tuple[int, tuple[int, ...]]:
    """The sliding window and its layers: Mistral's applies to every layer; Qwen3's to the layers
    config.json's layer_types marks "sliding_attention" (when use_sliding_window is on)."""
    window = int(hf.get("sliding_window") or 0)
    if not window:
        return 0, ()
    if kind == "mistral":
        return window, ()
    if kind == "qwen3" and not hf.get("use_sliding_window", False):
        return 0, ()
    types = hf.get("layer_types")
    if types:
        layers = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
        return (window, layers if len(layers) < n_layers else ()) if layers else (0, ())
    return window, ()
