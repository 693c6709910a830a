"""Attention statistics, the numbers behind the overview and rollout views: per-head summaries
(previous-token, first-token and self mass, entropy) and attention rollout across layers.

Pure numpy on [heads, T, T] probability maps (any source: the live model, an export, a hand-built
array in a test); the plotting lives in ``figures``.
"""

from __future__ import annotations

import numpy as np


def _stack_layers(probs_layers) -> np.ndarray:
    """list of per-layer [H, T, T] (or [1, H, T, T]) -> [L, H, T, T] float64."""
    layers = []
    for i, a in enumerate(probs_layers):
        a = np.asarray(a, dtype=np.float64)
        if a.ndim == 4 and a.shape[0] == 1:
            a = a[0]  # a batch of one
        if a.ndim != 3 or a.shape[1] != a.shape[2]:
            raise ValueError(f"layer {i}: expected [heads, T, T] attention, got shape {a.shape}")
        layers.append(a)
    if not layers:
        raise ValueError("no attention layers given")
    return np.stack(layers)


def head_stats(probs_layers) -> dict[str, np.ndarray]:
    """Per-head [L, H] statistics of causal attention maps, averaged over query rows t >= 1.

    Row 0 is skipped everywhere: a causal query at position 0 can only look at itself, so it says
    nothing about the head. With a single token every statistic is NaN.
      previous-token: mass on the token just before (p[t, t-1])
      first-token:    mass on position 0, the usual "attention sink"
      self:           mass on the query's own position (the diagonal)
      entropy:        row entropy in bits (0 = looks at one token; log2(t+1) = uniform)
    """
    A = _stack_layers(probs_layers)  # [L, H, T, T]
    T = A.shape[-1]
    if T < 2:
        nan = np.full(A.shape[:2], np.nan)
        return {"previous-token": nan, "first-token": nan.copy(), "self": nan.copy(), "entropy": nan.copy()}
    t = np.arange(1, T)
    rows = A[:, :, 1:, :]  # [L, H, T-1, T]
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(rows > 0, rows * np.log2(rows), 0.0)
    return {
        "previous-token": A[:, :, t, t - 1].mean(-1),
        "first-token": A[:, :, 1:, 0].mean(-1),
        "self": A[:, :, t, t].mean(-1),
        "entropy": (-plogp.sum(-1)).mean(-1),
    }


def attention_rollout(probs_layers, *, add_residual: bool = True) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, 2020): how much each position's final state draws on
    each input token, following attention through every layer. Returns [T, T], rows sum to 1.

    Each layer's heads are averaged; the residual stream is modelled as 0.5·A + 0.5·I.
    """
    A = _stack_layers(probs_layers).mean(axis=1)  # [L, T, T]
    T = A.shape[-1]
    rollout = np.eye(T)
    for layer in A:
        if add_residual:
            layer = 0.5 * layer + 0.5 * np.eye(T)
        layer = layer / layer.sum(axis=-1, keepdims=True)
        rollout = layer @ rollout  # later layers act on what earlier ones mixed
    return rollout
