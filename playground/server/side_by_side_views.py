"""The Model tab's "GPT-2 ↔ variant" tables: two presets' module trees and parameter breakdowns, marked.

Any two presets, the real sizes included: both are built on the meta device (``inside.side_by_side``).
"""

from __future__ import annotations

from playground.engine.config import MODERN_PRESETS, PRESETS, REAL_SIZES, get_preset
from playground.i18n import tr, tr_formula
from playground.inside.side_by_side import side_by_side

CHOICES = [*PRESETS, *MODERN_PRESETS, *REAL_SIZES]
DEFAULT_PAIR = ("gpt2-small", "llama-3.2-1b")
MARKS = {"same": "", "changed": "≠", "only_a": "◀", "only_b": "▶"}  # ◀ only on the left, ▶ only on the right


def _later_block(name: str) -> bool:
    """Blocks 1, 2, … repeat block 0: the table shows block 0's inside only."""
    parts = name.split(".")
    return len(parts) >= 2 and parts[0] == "trf_blocks" and parts[1] != "0"


def side_by_side_tables(a: str, b: str, max_depth: int = 3, lang: str = "en") -> tuple[list[list], list[list], str]:
    """(tree rows, breakdown rows, a Markdown summary) for presets ``a`` and ``b``. Tree rows: mark, module,
    a's type and parameters, b's; breakdown rows: component, a's formula and count, b's, mark."""
    got = side_by_side(get_preset(a), get_preset(b))
    tree = [
        [
            MARKS[r["mark"]],
            "\u2003" * r["depth"] + (r["name"].split(".")[-1] if r["name"] else "GPTModel"),
            r["a"]["type"] if r["a"] else "",
            f"{r['a']['params']:,}" if r["a"] else "",
            r["b"]["type"] if r["b"] else "",
            f"{r['b']['params']:,}" if r["b"] else "",
        ]
        for r in got["tree"]
        if r["depth"] <= max_depth and not _later_block(r["name"])
    ]
    breakdown = [
        [
            tr(lang, r["component"]),
            tr_formula(lang, r["a_formula"]),
            f"{r['a']:,}",
            tr_formula(lang, r["b_formula"]),
            f"{r['b']:,}",
            "≠" if r["differs"] else "",
        ]
        for r in got["breakdown"]
    ]
    (ta, tb), (ka, kb) = got["total"], got["kv_bytes_per_token"]
    changed = ", ".join(f"`{name}` {va!r} → {vb!r}" for name, va, vb in got["switches"]) or "—"
    summary = tr(
        lang, "sbs_summary", a=a, b=b, ta=f"{ta:,}", tb=f"{tb:,}", ka=f"{ka:,.0f}", kb=f"{kb:,.0f}", changed=changed
    )
    return tree, breakdown, summary
