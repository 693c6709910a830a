"""Attention rollout, and the per-head statistics behind the overview.

Attention statistics, the numbers behind the overview and rollout views: per-head summaries
(previous-token, first-token and self mass, entropy, induction score; ``engine.head_patterns``, which a
training run reads too) and attention rollout across layers.

Pure numpy on [heads, T, T] probability maps (any source: the live model, an export, a hand-built
array in a test); the plotting lives in ``figures``.
"""

from __future__ import annotations

import numpy as np

from playground.engine.head_patterns import _layers, head_stats, induction_scores, prefix_matches

__all__ = ["attention_rollout", "head_stats", "induction_scores", "prefix_matches"]


def attention_rollout(probs_layers, *, add_residual: bool = True) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, 2020): how much each position's final state draws on
    each input token, following attention through every layer. Returns [T, T], rows sum to 1.

    Each layer's heads are averaged; the residual stream is modelled as 0.5·A + 0.5·I.
    """
    rollout = None
    for A in _layers(probs_layers):
        layer = A.mean(axis=0, dtype=np.float64)  # [T, T]
        T = layer.shape[-1]
        if add_residual:
            layer = 0.5 * layer + 0.5 * np.eye(T)
        layer /= layer.sum(axis=-1, keepdims=True)
        rollout = layer if rollout is None else layer @ rollout  # later layers act on what earlier ones mixed
    if rollout is None:
        raise ValueError("attention rollout needs at least one layer")
    return rollout
