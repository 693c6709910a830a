"""A built model's facts for the Model tab, as plain data; the UI writes them (``ui.model_words``).

Its summary, module tree, parameter breakdown, what tying saves, and what a token's KV cache costs.
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.quantize import is_dynamic_int8, is_int8
from playground.engine.sizes import kv_bytes_per_token
from playground.inside.inspection import count_parameters, module_tree, parameter_breakdown
from playground.runtime.devices import describe_device
from playground.server.model_cache import weight_bytes

__all__ = ["Summary", "kv_facts", "module_tree", "parameter_breakdown", "summary", "tree_items", "tying_facts"]


@dataclass(frozen=True)
class Summary:
    n_params: int
    size_bytes: int
    dtype: str  # torch's name without "torch."
    int8: str | None  # "dynamic", "static" or None
    tied: bool
    layers: int
    heads: int
    d: int
    context: int
    device: str  # "CPU", "CUDA GPU 0 (NVIDIA A10G)", ...


def summary(model: GPTModel) -> Summary:
    cfg = model.cfg
    int8 = "dynamic" if is_dynamic_int8(model) else "static" if is_int8(model) else None
    return Summary(
        n_params=count_parameters(model),
        size_bytes=weight_bytes(model),
        dtype=str(model.dtype).replace("torch.", ""),
        int8=int8,
        tied=cfg.tie_weights,
        layers=cfg.n_layers,
        heads=cfg.n_heads,
        d=cfg.emb_dim,
        context=cfg.context_length,
        device=describe_device(model.device),
    )


def kv_facts(cfg: GPTConfig) -> dict:
    """The KV cache a token costs in float32 (per_token), against every layer holding every position
    with a key/value head per query head (full); with the config's own numbers."""
    return {
        "per_token": kv_bytes_per_token(cfg, "float32"),
        "full": 2 * cfg.n_layers * cfg.kv_heads * cfg.head_dim * 4,
        "layers": cfg.n_layers,
        "heads": cfg.n_heads,
        "kv_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim,
        "window": cfg.sliding_window,
        "since_gpt2": list(cfg.since_gpt2()),
    }


def tying_facts(cfg: GPTConfig) -> dict:
    """The 163M-vs-124M puzzle's numbers for this config: the parameters tied and untied, and the head's."""
    return {
        "tied": parameter_breakdown(cfg.replace(tie_weights=True)).total_measured,
        "untied": parameter_breakdown(cfg.replace(tie_weights=False)).total_measured,
        "head": cfg.vocab_size * cfg.emb_dim,
        "is_tied": cfg.tie_weights,
        "d": cfg.emb_dim,
        "vocab": cfg.vocab_size,
    }


def tree_items(model: GPTModel) -> list[tuple[str, int]]:
    """Leaf modules with their own (untied) parameter counts, for the treemap."""
    return [(r.name, r.own_params) for r in module_tree(model) if r.name and (r.own_params or r.tied_to)]
