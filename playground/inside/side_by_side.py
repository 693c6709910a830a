"""GPT-2 and a variant side by side: both module trees and parameter breakdowns, the differences marked.

Both models are built on the meta device (shapes, no memory), so the real sizes compare as cheaply as
the tiny ones. A tree row is marked "same", "changed" (another class or other shapes), "only_a" or
"only_b"; rows are aligned by module path, each side's blocks after its own (``trf_blocks.N`` exist on
both sides when both have N blocks).
"""

from __future__ import annotations

import dataclasses

import torch

from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.sizes import kv_bytes_per_token
from playground.inside.inspection import ModuleRow, module_tree, parameter_breakdown


def _tree(cfg: GPTConfig) -> list[ModuleRow]:
    with torch.device("meta"):
        return module_tree(GPTModel(cfg))


def _mark(a: ModuleRow | None, b: ModuleRow | None) -> str:
    if a is None:
        return "only_b"
    if b is None:
        return "only_a"
    return "same" if (a.type, a.shape, a.total_params) == (b.type, b.shape, b.total_params) else "changed"


def _aligned_names(a: list[str], b: list[str]) -> list[str]:
    """Every path of both trees, in a's order, each of b's own paths placed after the last path before it."""
    out = list(a)
    for i, name in enumerate(b):
        if name in out:
            continue
        earlier = next((b[j] for j in range(i - 1, -1, -1) if b[j] in out), None)
        out.insert(out.index(earlier) + 1 if earlier is not None else 0, name)
    return out


def switches(a: GPTConfig, b: GPTConfig) -> list[tuple[str, object, object]]:
    """The config fields whose values differ: (field, a's, b's)."""
    return [
        (f.name, getattr(a, f.name), getattr(b, f.name))
        for f in dataclasses.fields(a)
        if getattr(a, f.name) != getattr(b, f.name)
    ]


def side_by_side(a: GPTConfig, b: GPTConfig) -> dict:
    """``tree``: rows {name, depth, a, b, mark} (a / b: type, shape and parameters, or None where the side
    has no such module); ``breakdown``: rows {component, a_formula, a, b_formula, b, differs} and the totals;
    ``switches``: the differing fields; ``kv_bytes_per_token``: each side's, in bfloat16."""
    tree_a, tree_b = {r.name: r for r in _tree(a)}, {r.name: r for r in _tree(b)}
    tree = []
    for name in _aligned_names(list(tree_a), list(tree_b)):
        ra, rb = tree_a.get(name), tree_b.get(name)
        row = ra or rb
        assert row is not None
        tree.append(
            {
                "name": name,
                "depth": row.depth,
                "a": None if ra is None else {"type": ra.type, "shape": ra.shape, "params": ra.total_params},
                "b": None if rb is None else {"type": rb.type, "shape": rb.shape, "params": rb.total_params},
                "mark": _mark(ra, rb),
            }
        )
    bd_a, bd_b = parameter_breakdown(a), parameter_breakdown(b)
    breakdown = [
        {
            "component": ra.component,
            "a_formula": ra.formula,
            "a": ra.measured,
            "b_formula": rb.formula,
            "b": rb.measured,
            "differs": ra.measured != rb.measured,
        }
        for ra, rb in zip(bd_a.rows, bd_b.rows)
    ]
    return {
        "tree": tree,
        "breakdown": breakdown,
        "total": (bd_a.total_measured, bd_b.total_measured),
        "switches": switches(a, b),
        "kv_bytes_per_token": (kv_bytes_per_token(a, "bfloat16"), kv_bytes_per_token(b, "bfloat16")),
    }
