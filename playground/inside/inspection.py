"""Parameter counts, the module tree, and a per-component breakdown (formula vs measured).

Looking inside a model: parameter counts, the module tree, and a per-component breakdown where
each analytic formula stands beside the count measured on the built model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn as nn

from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.quantize import int8_bytes
from playground.engine.sizes import count_parameters_analytic, kv_bytes_per_token, parameter_formula


def unique_parameters(model: nn.Module) -> dict[int, tuple[str, nn.Parameter]]:
    """First name of each distinct parameter tensor (a tied weight appears once)."""
    seen: dict[int, tuple[str, nn.Parameter]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        seen.setdefault(id(p), (name, p))
    return seen


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameters, with shared (tied) tensors counted once."""
    return sum(p.numel() for _, p in unique_parameters(model).values() if p.requires_grad or not trainable_only)


def tied_parameters(model: nn.Module) -> dict[str, str]:
    """{alias name: name of the tensor it shares}, e.g. {"out_head.weight": "tok_emb.weight"}."""
    first: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            aliases[name] = first[id(p)]
        else:
            first[id(p)] = name
    return aliases


@dataclass
class ModuleRow:
    name: str  # dotted path, "" for the root
    type: str
    depth: int
    shape: str  # own parameters' shapes, e.g. "weight [768, 768] · bias [768]"
    own_params: int  # parameters directly on this module, tied aliases excluded
    total_params: int  # this module and everything under it, each tensor counted once
    tied_to: str = ""  # for a module whose weight is another module's, that weight's name


def module_tree(model: nn.Module) -> list[ModuleRow]:
    """One row per module in definition order (depth-first), with shapes and parameter counts."""
    aliases = tied_parameters(model)
    rows = []
    for name, module in model.named_modules():
        own, shapes, tied_to = 0, [], ""
        for pname, p in module.named_parameters(recurse=False, remove_duplicate=False):
            full = f"{name}.{pname}" if name else pname
            shapes.append(f"{pname} {list(p.shape)}")
            if full in aliases:
                tied_to = aliases[full]
            else:
                own += p.numel()
        # A subtree's total counts a tensor only if its first name lies inside the subtree.
        prefix = f"{name}." if name else ""
        total = (
            sum(
                p.numel()
                for pname, p in module.named_parameters(prefix=name, remove_duplicate=False)
                if pname not in aliases and pname.startswith(prefix)
            )
            if name
            else count_parameters(module)
        )
        rows.append(
            ModuleRow(
                name=name,
                type=type(module).__name__,
                depth=name.count(".") + 1 if name else 0,
                shape=" · ".join(shapes),
                own_params=own,
                total_params=total,
                tied_to=tied_to,
            )
        )
    return rows


# ----------------------------------------------------------------------------------------------
# Breakdown: formula vs measured


COMPONENTS = (
    "token embedding",
    "position embedding",
    "attention QKV",
    "attention output",
    "feed-forward",
    "layer norms",
    "output head",
)


def component_of(param_name: str) -> str:
    if param_name.startswith("tok_emb."):
        return "token embedding"
    if param_name.startswith("pos_emb."):
        return "position embedding"
    if param_name.startswith("out_head."):
        return "output head"
    if ".att.out_proj." in param_name:
        return "attention output"
    if ".att." in param_name:
        return "attention QKV"
    if ".ff." in param_name:
        return "feed-forward"
    if "norm" in param_name:
        return "layer norms"
    raise ValueError(f"parameter {param_name!r} belongs to no known component")


@dataclass
class BreakdownRow:
    component: str
    formula: str
    formula_value: int
    measured: int

    @property
    def agrees(self) -> bool:
        return self.formula_value == self.measured


@dataclass
class Breakdown:
    config: GPTConfig
    rows: list[BreakdownRow]
    total_formula: int
    total_measured: int
    memory: dict[str, int] = field(default_factory=dict)  # bytes: fp32, bf16/fp16, int8, training
    kv_cache_bytes_per_token: dict[str, int] = field(default_factory=dict)
    flops_per_token: int = 0  # forward pass, at a full context
    flops_formula: str = ""


def _formulas(cfg: GPTConfig) -> dict[str, tuple[str, int]]:
    if cfg.since_gpt2():
        return _formulas_since_gpt2(cfg)
    d, V, L, C = cfg.emb_dim, cfg.vocab_size, cfg.n_layers, cfg.context_length
    qkv_bias = " + 3·d" if cfg.qkv_bias else ""
    final_norm = cfg.norm_placement == "pre"
    return {
        "token embedding": (f"V·d = {V:,}·{d}", V * d),
        "position embedding": (
            (f"C·d = {C:,}·{d}", C * d) if cfg.pos_encoding == "learned" else ("0 (fixed sinusoids, a buffer)", 0)
        ),
        "attention QKV": (
            f"L·(3·d²{qkv_bias}) = {L}·(3·{d}²{' + 3·' + str(d) if cfg.qkv_bias else ''})",
            L * (3 * d * d + (3 * d if cfg.qkv_bias else 0)),
        ),
        "attention output": (f"L·(d² + d) = {L}·({d}² + {d})", L * (d * d + d)),
        "feed-forward": (f"L·(8·d² + 5·d) = {L}·(8·{d}² + 5·{d})", L * (8 * d * d + 5 * d)),
        "layer norms": (
            (f"(2·L + 1)·2·d = {2 * L + 1}·2·{d}", (2 * L + 1) * 2 * d)
            if final_norm
            else (f"2·L·2·d = {2 * L}·2·{d} (post-norm: no final norm)", 2 * L * 2 * d)
        ),
        "output head": (("0 (tied to the token embedding)", 0) if cfg.tie_weights else (f"d·V = {d}·{V:,}", d * V)),
    }


def _formulas_since_gpt2(cfg: GPTConfig) -> dict[str, tuple[str, int]]:
    """The same table with H query heads, K key/value heads of hd dimensions, F the feed-forward width."""
    d, V, L, C = cfg.emb_dim, cfg.vocab_size, cfg.n_layers, cfg.context_length
    H, K, hd, F = cfg.n_heads, cfg.kv_heads, cfg.head_dim, cfg.ff_dim
    qb, b = (1 if cfg.qkv_bias else 0), (1 if cfg.bias else 0)
    qkv = d * H * hd + 2 * d * K * hd + qb * (H + 2 * K) * hd + (2 * hd if cfg.qk_norm else 0)
    qkv_text = f"L·(d·H·hd + 2·d·K·hd{' + (H + 2·K)·hd' if qb else ''}{' + 2·hd (QK-norm)' if cfg.qk_norm else ''})"
    swiglu = cfg.ff == "swiglu"
    ff = (3 if swiglu else 2) * d * F + b * ((2 * F if swiglu else F) + d)
    ff_text = f"L·({'3' if swiglu else '2'}·d·F{(' + 2·F + d' if swiglu else ' + F + d') if b else ''})"
    per_norm, norm_text = (d, "d") if cfg.norm == "rmsnorm" else (2 * d, "2·d")
    n_norms = 2 * L + (1 if cfg.norm_placement == "pre" else 0)
    table = {
        "token embedding": (f"V·d = {V:,}·{d}", V * d),
        "position embedding": {
            "learned": (f"C·d = {C:,}·{d}", C * d),
            "sinusoidal": ("0 (fixed sinusoids, a buffer)", 0),
            "rope": ("0 (RoPE turns queries and keys; nothing learned)", 0),
        }[cfg.pos_encoding],
        "attention QKV": (f"{qkv_text} = {L}·{qkv:,} (H={H}, K={K}, hd={hd})", L * qkv),
        "attention output": (f"L·(H·hd·d{' + d' if b else ''}) = {L}·{H * hd * d + b * d:,}", L * (H * hd * d + b * d)),
        "feed-forward": (f"{ff_text} = {L}·{ff:,} (F={F})", L * ff),
        "layer norms": (f"{n_norms}·{norm_text} = {n_norms}·{per_norm}", n_norms * per_norm),
        "output head": (("0 (tied to the token embedding)", 0) if cfg.tie_weights else (f"d·V = {d}·{V:,}", d * V)),
    }
    assert sum(v for _, v in table.values()) == sum(parameter_formula(cfg).values())
    return table


def _flops_per_token(cfg: GPTConfig, T: int) -> tuple[int, str]:
    """Forward FLOPs of one token at T positions: 2 per weight it multiplies through, and 4·H·hd per key it
    attends to (Q·Kᵀ and A·V); a windowed layer attends to at most its window."""
    d, L, V = cfg.emb_dim, cfg.n_layers, cfg.vocab_size
    if not cfg.since_gpt2():
        matmul_params = L * (12 * d * d) + V * d  # weights every token multiplies through
        return 2 * matmul_params + 2 * 2 * L * T * d, f"2·(12·L·d² + V·d) + 4·L·T·d with T = {T}"
    H, K, hd, F = cfg.n_heads, cfg.kv_heads, cfg.head_dim, cfg.ff_dim
    per_layer = 2 * d * H * hd + 2 * d * K * hd + (3 if cfg.ff == "swiglu" else 2) * d * F
    keys = sum(min(T, cfg.windowed(i) or T) for i in range(L))  # Σ over layers of the keys each reads
    flops = 2 * (L * per_layer + V * d) + 4 * H * hd * keys
    ff = "3·d·F" if cfg.ff == "swiglu" else "2·d·F"
    return flops, f"2·(L·(2·d·H·hd + 2·d·K·hd + {ff}) + V·d) + 4·H·hd·Σ keys read, T = {T}"


def _measure(model: nn.Module) -> dict[str, int]:
    counts = dict.fromkeys(COMPONENTS, 0)
    for name, p in unique_parameters(model).values():
        counts[component_of(name)] += p.numel()
    return counts


def parameter_breakdown(cfg_or_model: GPTConfig | GPTModel, context_tokens: int | None = None) -> Breakdown:
    """Per component: formula, its value and the count measured on a built model.

    Given a config, the model is built on PyTorch's meta device: real modules and shapes, no memory.
    """
    if isinstance(cfg_or_model, GPTModel):
        model, cfg = cfg_or_model, cfg_or_model.cfg
    else:
        cfg = cfg_or_model
        with torch.device("meta"):
            model = GPTModel(cfg)
    formulas, measured = _formulas(cfg), _measure(model)
    rows = [BreakdownRow(c, formulas[c][0], formulas[c][1], measured[c]) for c in COMPONENTS]
    total_formula = sum(r.formula_value for r in rows)
    assert total_formula == count_parameters_analytic(cfg)
    total = count_parameters(model)
    T = context_tokens or cfg.context_length
    flops, flops_formula = _flops_per_token(cfg, T)
    return Breakdown(
        config=cfg,
        rows=rows,
        total_formula=total_formula,
        total_measured=total,
        memory={
            "fp32": total * 4,
            "bf16/fp16": total * 2,
            # Weight-only int8 (playground.engine.quantize): one byte a weight-matrix entry, a bfloat16
            # scale a row, everything else bfloat16 -- the measured size once the model is int8.
            "int8": int8_bytes(model),
            # AdamW in fp32: weights + gradients + two moment estimates (activations not included).
            "training (AdamW, fp32)": total * (4 + 4 + 8),
        },
        # 2·L·K·hd numbers a token (2·L·d in GPT-2); a window caps its layers, averaged over a full context
        kv_cache_bytes_per_token={dt: int(kv_bytes_per_token(cfg, dt)) for dt in ("float32", "bfloat16")},
        flops_per_token=flops,
        flops_formula=flops_formula,
    )
