"""OpenAI GPT-2's Hugging Face layout: config.json, tensor names, Conv1D orientation, implied config.

The import is one table of key pairs plus a short list of Conv1D weights to transpose; every tensor
is converted to this model's names, and what does not fit is reported by name.
"""

from __future__ import annotations

import re

import torch

from playground.engine.config import ConfigError, GPTConfig
from playground.engine.weight_layout import LoadReport, WeightLoadError, fused_to_per_head, per_head_to_fused

# HF key (per layer, "{i}" = layer) -> our key; Conv1D weights are stored [in, out] and transposed.
_GPT2_KEY_MAP = {
    "wte.weight": "tok_emb.weight",
    "wpe.weight": "pos_emb.weight",
    "ln_f.weight": "final_norm.scale",
    "ln_f.bias": "final_norm.shift",
    "h.{i}.ln_1.weight": "trf_blocks.{i}.norm1.scale",
    "h.{i}.ln_1.bias": "trf_blocks.{i}.norm1.shift",
    "h.{i}.ln_2.weight": "trf_blocks.{i}.norm2.scale",
    "h.{i}.ln_2.bias": "trf_blocks.{i}.norm2.shift",
    "h.{i}.attn.c_proj.weight": "trf_blocks.{i}.att.out_proj.weight",
    "h.{i}.attn.c_proj.bias": "trf_blocks.{i}.att.out_proj.bias",
    "h.{i}.mlp.c_fc.weight": "trf_blocks.{i}.ff.layers.0.weight",
    "h.{i}.mlp.c_fc.bias": "trf_blocks.{i}.ff.layers.0.bias",
    "h.{i}.mlp.c_proj.weight": "trf_blocks.{i}.ff.layers.2.weight",
    "h.{i}.mlp.c_proj.bias": "trf_blocks.{i}.ff.layers.2.bias",
}
_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
_SKIPPED_BUFFERS = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")


def is_skipped_buffer(key: str) -> bool:
    """A GPT-2 causal-mask buffer (``h.N.attn.bias``): 4 MB a layer the model never uses."""
    return bool(_SKIPPED_BUFFERS.match(key.removeprefix("transformer.")))


_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def config_from_hf(hf: dict) -> GPTConfig:
    # Options of transformers' GPT2Config that change the attention maths this model implements.
    if hf.get("scale_attn_by_inverse_layer_idx", False) or not hf.get("scale_attn_weights", True):
        raise WeightLoadError(
            "weights.attn_scaling",
            "config.json sets scale_attn_by_inverse_layer_idx or scale_attn_weights=false: this attention "
            "scaling is not GPT-2's, and the playground's model does not implement it.",
        )
    try:
        activation = _ACTIVATIONS[hf.get("activation_function", "gelu_new")]
    except KeyError:
        raise WeightLoadError(
            "weights.activation",
            "unsupported activation_function {activation!r}",
            activation=hf.get("activation_function"),
        ) from None
    try:
        return GPTConfig(
            vocab_size=int(hf["vocab_size"]),
            context_length=int(hf.get("n_positions", hf.get("n_ctx", 1024))),
            emb_dim=int(hf["n_embd"]),
            n_heads=int(hf["n_head"]),
            n_layers=int(hf["n_layer"]),
            drop_rate=0.0,
            qkv_bias=True,
            tie_weights=bool(hf.get("tie_word_embeddings", True)),
            activation=activation,
            ln_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
        )
    except KeyError as e:
        raise WeightLoadError(
            "weights.config_field", "config.json lacks the GPT-2 field {field!r}", field=e.args[0]
        ) from None


def convert_gpt2_state(hf_tensors: dict[str, torch.Tensor], cfg: GPTConfig, report: LoadReport) -> dict:
    """HF GPT-2 tensors (with or without the ``transformer.`` prefix) -> our names and layouts."""
    out: dict[str, torch.Tensor] = {}
    templates = {}
    for hf_key, ours in _GPT2_KEY_MAP.items():
        if "{i}" in hf_key:
            for i in range(cfg.n_layers):
                templates[hf_key.format(i=i)] = ours.format(i=i)
        else:
            templates[hf_key] = ours
    d = cfg.emb_dim
    for raw_key, value in hf_tensors.items():
        key = raw_key.removeprefix("transformer.")
        if _SKIPPED_BUFFERS.match(key):
            report.skipped.append(raw_key)
            continue
        if key == "lm_head.weight":
            if cfg.tie_weights:
                report.skipped.append(raw_key)  # the same numbers as wte.weight
            else:
                out["out_head.weight"] = value
            continue
        if key.endswith(_CONV1D) and value.dim() == 2:
            value = value.t()
        m = re.match(r"^h\.(\d+)\.attn\.c_attn\.(weight|bias)$", key)
        if m:
            layer, kind = m.groups()
            if value.shape[0] != 3 * d:
                report.mismatched.append((raw_key, tuple(value.shape), (3 * d,) + tuple(value.shape[1:])))
                continue
            q, k, v = value.split(d, dim=0)
            for name, part in (("W_query", q), ("W_key", k), ("W_value", v)):
                out[f"trf_blocks.{layer}.att.{name}.{kind}"] = part.contiguous()
            continue
        if key in templates:
            out[templates[key]] = value.contiguous()
        else:
            report.unexpected.append(raw_key)
    if cfg.attention_impl == "per_head":
        out = fused_to_per_head(out, cfg)
    return out


def gpt2_config_dict(cfg: GPTConfig) -> dict:
    """transformers' ``config.json`` for a model of this config (the inverse of ``config_from_hf``).

    Only GPT-2's own architecture has one: learned positions, pre-norm, qkv biases and a GELU or
    ReLU activation; anything else is refused by name."""
    unsupported = [
        name
        for name, ok in (
            ("pos_encoding", cfg.pos_encoding == "learned"),
            ("norm_placement", cfg.norm_placement == "pre"),
            ("qkv_bias", cfg.qkv_bias),
        )
        if not ok
    ]
    if unsupported:
        raise WeightLoadError(
            "weights.not_gpt2_architecture",
            "GPT-2's layout cannot hold this model: {fields} differ from GPT-2's architecture.",
            fields=", ".join(unsupported),
        )
    activation = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}[cfg.activation]
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": cfg.vocab_size,
        "n_positions": cfg.context_length,
        "n_ctx": cfg.context_length,
        "n_embd": cfg.emb_dim,
        "n_head": cfg.n_heads,
        "n_layer": cfg.n_layers,
        "activation_function": activation,
        "layer_norm_epsilon": cfg.ln_eps,
        "tie_word_embeddings": cfg.tie_weights,
        "resid_pdrop": cfg.drop_rate,
        "embd_pdrop": cfg.drop_rate,
        "attn_pdrop": cfg.drop_rate,
        "bos_token_id": 50256,
        "eos_token_id": 50256,
    }


def to_gpt2_state(state: dict[str, torch.Tensor], cfg: GPTConfig) -> dict[str, torch.Tensor]:
    """Our tensors -> HF GPT-2 names and layouts (the inverse of ``convert_gpt2_state``): Conv1D
    weights transposed to [in, out], the three query/key/value projections fused into ``c_attn``."""
    gpt2_config_dict(cfg)  # refuses what GPT-2's layout cannot hold
    if cfg.attention_impl == "per_head":
        state = per_head_to_fused(state, cfg)
    ours_to_hf = {}
    for hf_key, ours in _GPT2_KEY_MAP.items():
        for i in range(cfg.n_layers) if "{i}" in hf_key else [None]:
            ours_to_hf[ours.format(i=i)] = hf_key.format(i=i)
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key == "out_head.weight":
            if not cfg.tie_weights:
                out["lm_head.weight"] = value.contiguous()
            continue
        m = re.match(r"^trf_blocks\.(\d+)\.att\.W_query\.(weight|bias)$", key)
        if m:
            layer, kind = m.groups()
            parts = [state[f"trf_blocks.{layer}.att.{name}.{kind}"] for name in ("W_query", "W_key", "W_value")]
            fused = torch.cat(parts, dim=0)  # (3 * emb_dim, emb_dim) or (3 * emb_dim,)
            out[f"h.{layer}.attn.c_attn.{kind}"] = (fused.t() if kind == "weight" else fused).contiguous()
            continue
        if re.match(r"^trf_blocks\.\d+\.att\.W_(key|value)\.", key):
            continue  # fused with W_query above
        hf_key = ours_to_hf[key]
        out[hf_key] = (value.t() if hf_key.endswith(_CONV1D) else value).contiguous()
    return out


def infer_gpt2_config(shapes: dict[str, tuple]) -> GPTConfig:
    plain = {k.removeprefix("transformer."): v for k, v in shapes.items()}
    try:
        vocab, d = plain["wte.weight"]
        (context, _) = plain["wpe.weight"]
    except (KeyError, ValueError):
        raise WeightLoadError(
            "weights.gpt2_no_embeddings", "GPT-2 checkpoint without wte/wpe embeddings of rank 2."
        ) from None
    layers = {int(m.group(1)) for k in plain if (m := re.match(r"^h\.(\d+)\.", k))}
    if not layers:
        raise WeightLoadError("weights.gpt2_no_layers", "GPT-2 checkpoint without any transformer layer (h.N.*).")
    try:
        return GPTConfig(
            vocab_size=int(vocab),
            context_length=int(context),
            emb_dim=int(d),
            n_heads=max(1, int(d) // 64),
            n_layers=max(layers) + 1,
            tie_weights="lm_head.weight" not in plain,
        )
    except ConfigError as e:
        raise WeightLoadError(
            "weights.gpt2_shape", "GPT-2 checkpoint with an unusable shape: {reason}", reason=e
        ) from None
