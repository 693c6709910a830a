"""Scoring with the bundled model: surprisal against a plain forward, totals, and the trained model against
a random one on Tiny Shakespeare (the scoring itself is checked on tiny models in
tests/unit/test_scoring.py)."""

import math

import numpy as np
import pytest
import torch

from playground.engine.tokenizer import load_tokenizer
from playground.inside.scoring import compare_models, score_text
from playground.server.recipes import build_from_recipe, bundled_recipe

TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east, and Juliet is the sun."


@pytest.fixture(scope="module")
def bundled():
    return build_from_recipe(bundled_recipe())


def direct(model, ids):
    """Surprisal, prob, rank and top guess of ids[t] given ids[:t], from one plain forward (float64)."""
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0].double()
    logp = torch.log_softmax(logits, -1).numpy()
    rows = []
    for t in range(1, len(ids)):
        row = logp[t - 1]
        rows.append(
            (-row[ids[t]] / math.log(2), math.exp(row[ids[t]]), int((row > row[ids[t]]).sum()) + 1, int(row.argmax()))
        )
    return [np.array(c) for c in zip(*rows)]


def test_surprisal_is_minus_log2_softmax_of_the_logits(bundled):
    s = score_text(bundled, TEXT)
    ids = load_tokenizer().encode(TEXT)
    assert s.token_ids == ids and s.n_scored == len(ids) - 1 and s.n_windows == 1
    surprisal, prob, rank, top = direct(bundled, ids)
    np.testing.assert_allclose(s.surprisal_bits, surprisal, atol=2e-4)
    np.testing.assert_allclose(s.prob, prob, rtol=2e-4)
    assert (s.rank == rank).mean() > 0.95 and np.abs(s.rank - rank).max() <= 2  # float32 near-ties may swap
    assert (s.top_id == top).all()
    assert (s.top_id[s.rank == 1] == np.array(ids[1:])[s.rank == 1]).all()


def test_totals_follow_from_the_tokens(bundled):
    s = score_text(bundled, TEXT)
    assert s.loss_nats == pytest.approx(s.surprisal_bits.mean() * math.log(2))
    assert s.perplexity == pytest.approx(math.exp(s.loss_nats))
    n_bytes = len(TEXT.encode()) - len(load_tokenizer().token_bytes(s.token_ids[0]))
    assert s.n_bytes == n_bytes
    assert s.bits_per_byte == pytest.approx(s.surprisal_bits.sum() / n_bytes)


def test_trained_model_is_less_surprised_by_shakespeare_than_a_random_one(bundled, tiny_shakespeare):
    random = build_from_recipe({"kind": "random", "config": bundled.cfg.to_dict(), "seed": 0, "dtype": "float32"})
    c = compare_models(random, bundled, tiny_shakespeare[:3000], labels=("random", "bundled"))
    assert c.b.loss_nats < c.a.loss_nats - 3  # measured: ~4.9 vs ~10.8 nats/token
    assert c.a.loss_nats == pytest.approx(math.log(50257), abs=0.2)
    np.testing.assert_allclose(c.difference_bits, c.b.surprisal_bits - c.a.surprisal_bits)
    pos, diff = c.most_changed(1)[0]
    assert abs(diff) == pytest.approx(np.abs(c.difference_bits).max())
    assert c.to_dict()["loss_difference_nats"] == pytest.approx(c.b.loss_nats - c.a.loss_nats)


@pytest.fixture(scope="module")
def tiny_shakespeare():
    from tests.helpers import TINY_SHAKESPEARE

    if not TINY_SHAKESPEARE.is_file():
        pytest.skip("Tiny Shakespeare is not in ../shared/data")
    return TINY_SHAKESPEARE.read_text(encoding="utf-8")
