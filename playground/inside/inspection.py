"""Parameter counts, the module tree, and a per-component breakdown (formula vs measured).

Looking inside a model: parameter counts, the module tree, and a per-component breakdown where
each analytic formula stands beside the count measured on the built model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn as nn

from playground.engine.config import GPTConfig, bytes_per_element, count_parameters_analytic
from playground.engine.model import GPTModel
from playground.engine.quantize import int8_bytes


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
    d, L, V = cfg.emb_dim, cfg.n_layers, cfg.vocab_size
    T = context_tokens or cfg.context_length
    matmul_params = L * (12 * d * d) + V * d  # weights every token multiplies through
    flops = 2 * matmul_params + 2 * 2 * L * T * d  # + Q·Kᵀ and A·V over T positions
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
        kv_cache_bytes_per_token={dt: 2 * L * d * bytes_per_element(dt) for dt in ("float32", "bfloat16")},
        flops_per_token=flops,
        flops_formula=f"2·(12·L·d² + V·d) + 4·L·T·d with T = {T}",
    )
