"""What a head's attention map looks like, in numbers: its previous-token, first-token and induction scores.

Previous-token, first-token and self mass, entropy, and the induction (prefix-matching) score.

Pure numpy on [heads, T, T] probability maps (any source: the live model, a training run's probe, an
export, a hand-built array in a test). They live beside the model because both the interpretability
views (``inside``) and a training run watching its heads form (``training.head_watch``) read them.
"""

from __future__ import annotations

import numpy as np


def _layers(probs_layers):
    """Each per-layer [H, T, T] (or [1, H, T, T]) map, checked, one at a time.

    A generator of layers works too: the views of a 1,024-token GPT-2 run then hold one layer's
    maps (50 MB) instead of all twelve (600 MB, and twice that as float64). float32 input stays
    float32; sums are taken in float64."""
    n = 0
    for i, a in enumerate(probs_layers):
        a = np.asarray(a)
        if not np.issubdtype(a.dtype, np.floating):
            a = a.astype(np.float64)
        if a.ndim == 4 and a.shape[0] == 1:
            a = a[0]  # a batch of one
        if a.ndim != 3 or a.shape[1] != a.shape[2]:
            raise ValueError(f"layer {i}: expected [heads, T, T] attention, got shape {a.shape}")
        n += 1
        yield a
    if not n:
        raise ValueError("no attention layers given")


def head_stats(probs_layers) -> dict[str, np.ndarray]:
    """Per-head [L, H] statistics of causal attention maps, averaged over query rows t >= 1.

    Row 0 is skipped everywhere: a causal query at position 0 can only look at itself, so it says
    nothing about the head. With a single token every statistic is NaN.
      previous-token: mass on the token just before (p[t, t-1])
      first-token:    mass on position 0, the usual "attention sink"
      self:           mass on the query's own position (the diagonal)
      entropy:        row entropy in bits (0 = looks at one token; log2(t+1) = uniform)
    """
    names = ("previous-token", "first-token", "self", "entropy")
    rows_out: dict[str, list[np.ndarray]] = {k: [] for k in names}
    for A in _layers(probs_layers):  # [H, T, T]
        T = A.shape[-1]
        if T < 2:
            for k in names:
                rows_out[k].append(np.full(A.shape[0], np.nan))
            continue
        t = np.arange(1, T)
        rows = A[:, 1:, :]  # [H, T-1, T]
        log2 = np.zeros_like(rows)
        np.log2(rows, out=log2, where=rows > 0)  # 0·log 0 = 0; no temporary of the full map's size but this one
        log2 *= rows
        rows_out["previous-token"].append(A[:, t, t - 1].mean(-1, dtype=np.float64))
        rows_out["first-token"].append(A[:, 1:, 0].mean(-1, dtype=np.float64))
        rows_out["self"].append(A[:, t, t].mean(-1, dtype=np.float64))
        rows_out["entropy"].append((-log2.sum(-1, dtype=np.float64)).mean(-1))
    return {k: np.stack(v) for k, v in rows_out.items()}


def prefix_matches(token_ids) -> np.ndarray:
    """[T, T] bool: ``m[q, k]`` when key ``k`` follows an earlier occurrence of the query's token
    (``token_ids[k - 1] == token_ids[q]``, ``k - 1 < q``): where an induction head looks.

    It is TransformerLens's induction detection pattern (its duplicate-token pattern shifted one
    key to the right); ``k`` may be ``q`` itself, when the token right before the query is the same."""
    ids = np.asarray(token_ids)
    T = len(ids)
    m = np.zeros((T, T), dtype=bool)
    if T > 1:
        same = ids[:, None] == ids[None, :]  # [q, j]
        earlier = np.tril(same, k=-1)  # j < q
        m[:, 1:] = earlier[:, :-1]  # key k = j + 1
    return m


def induction_scores(probs_layers, token_ids) -> np.ndarray:
    """Per-head [L, H] prefix-matching score: over the queries whose token occurred earlier, the mean
    attention mass on the keys that followed its earlier occurrences (``prefix_matches``). NaN where no
    token repeats.

    TransformerLens's ``detect_head(..., "induction_head")`` divides the same mass by every query
    instead (``sum(attention * pattern) / sum(attention)``); it equals this score times the share of
    queries that repeat. Averaging over the repeating queries keeps 1.0 for a perfect induction head
    whatever share of the prompt repeats, so a teacher's sentence said twice reads on the same scale
    as TransformerLens's random repeated tokens."""
    m = prefix_matches(token_ids)
    rows = m.any(axis=1)
    out = []
    for A in _layers(probs_layers):  # [H, T, T]
        if A.shape[-1] != len(m):
            raise ValueError(f"attention over {A.shape[-1]} positions, but {len(m)} tokens")
        if not rows.any():
            out.append(np.full(A.shape[0], np.nan))
            continue
        mass = (A[:, rows] * m[rows]).sum(-1, dtype=np.float64)  # [H, R]
        out.append(mass.mean(-1))
    return np.stack(out)
