"""The sampler's greedy-step row summary in compiled code (``runtime.native_row_summary``).

Three passes over the row where the full sampler's softmax, top-k and entropy take several torch
operations (figures in docs/benchmarks.md). The compiled probabilities are within float32 rounding of
the exact softmax; ``engine.row_summary.reference_summary`` (torch's float32 softmax) within a few
1e-5. The decoder seam (``engine.decoding``) hands this summarizer to the sampler of an accelerated
model; a plain model's sampler uses the reference.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from playground.engine.row_summary import RowSummary, count_above, reference_summary
from playground.runtime import native_row_summary


class CompiledSummarizer:
    """Summaries of one generation's rows: compiled where available (its output arrays made once), else
    torch and numpy. Returns None for a row holding NaN or ±inf (the caller says which)."""

    def __init__(self, n_top: int):
        self.n_top = n_top
        self.compiled = native_row_summary.available()
        self.buffers = native_row_summary.Buffers(n_top) if self.compiled else None

    def __call__(self, logits: torch.Tensor) -> RowSummary | None:
        row = logits if logits.is_contiguous() else logits.contiguous()
        if self.buffers is None:
            return reference_summary(row, self.n_top)
        b = self.buffers
        n = row.numel()
        if not native_row_summary.summarize(row.data_ptr(), n, b):
            return None
        out = b.out
        want = min(self.n_top, n)
        top = list(zip(b.ids[:want].tolist(), b.probs[:want].tolist()))
        # A row spanning over ~100 nats has entries whose float32 probability sits at the underflow: whether
        # each rounds to zero is counted on the softmax itself, as the full sampler counts it.
        kept = int(out[4]) if out[5] == 0 else count_above(torch.softmax(row, dim=-1), 0.0)
        prob = float(np.float32(math.exp(-out[2])))  # exp(max - max - log Σ exp(x - max)), as the C code rounds it
        return RowSummary(int(out[1]), prob, float(out[3]), top, kept)
