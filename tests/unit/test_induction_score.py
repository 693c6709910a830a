"""The induction overview's prefix-matching score (playground.inside.attention_stats): the keys it
counts are TransformerLens's induction detection pattern, its score is TransformerLens's "mul" score
rescaled to the repeating queries, and on hand-built heads it reads 1 for induction, 0 elsewhere."""

import numpy as np
import pytest
import torch

from playground.inside import attention_stats as S


def transformer_lens_pattern(tokens: torch.Tensor) -> torch.Tensor:
    """TransformerLens's induction detection pattern, restated from its head_detector: the duplicate-
    token pattern (same token, strictly earlier key) shifted one key to the right, first column zero."""
    T = len(tokens)
    duplicate = (tokens[:, None] == tokens[None, :]).float()
    duplicate.fill_diagonal_(0)
    duplicate = duplicate.tril()
    shifted = torch.roll(duplicate, shifts=1, dims=1)
    shifted[:, 0] = 0
    return shifted.tril()[:T, :T]


def random_maps(rng, layers, heads, T):
    scores = rng.normal(size=(layers, heads, T, T)) * 3
    scores[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] = -np.inf
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("seed", range(5))
def test_the_keys_are_transformer_lens_s_and_the_score_its_mul_score_rescaled(seed):
    rng = np.random.default_rng(seed)
    T = 40
    ids = rng.integers(0, 12, size=T)  # a small vocabulary: many repeats, some adjacent
    pattern = transformer_lens_pattern(torch.tensor(ids)).numpy().astype(bool)
    assert (S.prefix_matches(ids) == pattern).all()
    maps = random_maps(rng, 3, 4, T)
    ours = S.induction_scores(list(maps), ids)
    # TransformerLens's detect_head(..., error_measure="mul"): (attention * pattern).sum() / attention.sum()
    theirs = (maps * pattern).sum(axis=(-1, -2)) / maps.sum(axis=(-1, -2))
    share = pattern.any(axis=1).mean()
    np.testing.assert_allclose(ours * share, theirs, rtol=1e-12)


def test_hand_built_heads_on_a_sentence_said_twice():
    line = [11, 12, 13, 14, 15, 16]
    ids = np.array(line + line)
    T, L = len(ids), len(line)
    induction = np.zeros((T, T))
    previous = np.zeros((T, T))
    for q in range(T):
        induction[q, q - L + 1 if q >= L else 0] = 1.0  # the token after the earlier copy (first half: a sink)
        previous[q, max(q - 1, 0)] = 1.0
    scores = S.induction_scores([np.stack([induction, previous])], ids)
    assert scores.shape == (1, 2)
    assert scores[0, 0] == pytest.approx(1.0) and scores[0, 1] == pytest.approx(0.0)
    # no repeated token: nothing to score
    assert np.isnan(S.induction_scores([induction[None, :L, :L]], ids[:L])).all()
    with pytest.raises(ValueError, match="positions"):
        S.induction_scores([induction[None]], ids[:L])
