"""How the app writes a probability (a percentage that never rounds a real chance to 0% or 100%) and a size.

Shared by the figures and by the texts beside them (a lesson's revealed answer, a step's panel), so a
number reads the same in both: 0.9999 is "99.99%" on the chart and in the sentence under it. This
module imports nothing of the project: every layer may use it.
"""

from __future__ import annotations

import math

import numpy as np


def format_prob(p: float) -> str:
    """A probability as a percentage with two significant digits below 10%, so a sampled token
    never reads "0%": 0.45 -> "45%", 0.045 -> "4.5%", 0.00045 -> "0.045%"; only 0 is "0%"."""
    p = float(p)
    if not math.isfinite(p):
        return "–"
    if p <= 0:
        return "0%"
    if p >= 1:
        return "100%"
    pct = p * 100
    if pct >= 10:
        for decimals in range(6):  # 99.96% is not certainty: add decimals until it stays under 100
            text = f"{pct:.{decimals}f}"
            if float(text) < 100:
                return text + "%"
        return ">99.9999%"
    return np.format_float_positional(pct, precision=2, unique=False, fractional=False, trim="-") + "%"


def format_bytes(n: float) -> str:
    """A size in decimal units: 13.30 MB, 1.07 GB (what the memory budget and the Model tab say)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")
