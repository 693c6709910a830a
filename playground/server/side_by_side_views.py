"""The Model tab's "GPT-2 ↔ variant" view as data: two presets' module trees and parameter breakdowns, marked.

Any two presets, the real sizes included: both are built on the meta device (``inside.side_by_side``).
"""

from __future__ import annotations

from playground.engine.presets import MODERN_PRESETS, PRESETS, REAL_SIZES, get_preset
from playground.inside.side_by_side import side_by_side

CHOICES = [*PRESETS, *MODERN_PRESETS, *REAL_SIZES]
DEFAULT_PAIR = ("gpt2-small", "llama-3.2-1b")
MARKS = {"same": "", "changed": "≠", "only_a": "◀", "only_b": "▶"}  # ◀ only on the left, ▶ only on the right


def _later_block(name: str) -> bool:
    """Blocks 1, 2, … repeat block 0: the table shows block 0's inside only."""
    parts = name.split(".")
    return len(parts) >= 2 and parts[0] == "trf_blocks" and parts[1] != "0"


def side_by_side_data(a: str, b: str) -> dict:
    """Presets ``a`` and ``b`` side by side, as data (``inside.side_by_side``): the marked module tree,
    the parameter breakdown, the totals, the KV bytes a token and the switches that differ."""
    return side_by_side(get_preset(a), get_preset(b))
