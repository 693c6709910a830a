"""The bundled model's training pieces (assets/bundled): the chunked head loss equals the plain
cross-entropy in value and gradients, the sampled softmax is the subset's logits plus the stated
offset, and every batch is a function of (seed, step) whose repeated rows score only what copying
can predict."""

from __future__ import annotations

import math
import sys
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "assets" / "bundled"))
from bundled_batches import IGNORE, Batches  # noqa: E402
from bundled_head_loss import ChunkedHeadLoss, HeadVocab  # noqa: E402


def test_the_chunked_head_loss_equals_cross_entropy_in_value_and_gradients():
    gen = torch.Generator().manual_seed(0)
    rows, d, vocab = ChunkedHeadLoss.CHUNK * 2 + 37, 12, 50  # two whole chunks and a remainder
    h = torch.randn(rows, d, generator=gen, dtype=torch.float64, requires_grad=True)
    W = torch.randn(vocab, d, generator=gen, dtype=torch.float64, requires_grad=True)
    y = torch.randint(vocab, (rows,), generator=gen)
    y[::7] = IGNORE
    loss = ChunkedHeadLoss.apply(h, W, y, False)
    loss.backward()
    got = (float(loss.detach()), h.grad.clone(), W.grad.clone())
    h.grad = W.grad = None
    want = F.cross_entropy(h @ W.t(), y, ignore_index=IGNORE)
    want.backward()
    assert math.isclose(got[0], float(want.detach()), rel_tol=1e-6)  # the forward returns float32
    torch.testing.assert_close(got[1], h.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got[2], W.grad, rtol=1e-10, atol=1e-12)


def test_the_sampled_head_is_the_subsets_logits_plus_the_importance_offset():
    seen = torch.tensor([5, 9, 9, 300, 42])
    vocab = HeadVocab(seen)
    assert vocab.ids.tolist() == [5, 9, 42, 300, 50256]  # the texts' tokens and <|endoftext|>
    y = torch.tensor([9, IGNORE, 300, 50256])
    assert vocab.targets(y).tolist() == [1, IGNORE, 3, 4]
    gen = torch.Generator().manual_seed(1)
    W, h = torch.randn(50257, 8, generator=gen), torch.randn(3, 8, generator=gen)
    h1, W1 = vocab.head(W, h, torch.Generator().manual_seed(2))
    logits = h1 @ W1.t()
    k = HeadVocab.UNSEEN_SAMPLE
    assert logits.shape == (3, 5 + k)
    torch.testing.assert_close(logits[:, :5], h @ W[vocab.ids].t())
    sample = W1[5:, :8]
    offset = math.log((50257 - 5) / k)
    torch.testing.assert_close(logits[:, 5:], h @ sample.t() + offset)
    # the sampled rows are unseen tokens' rows, each once
    picked = {int(torch.nonzero((W == row).all(dim=1))[0]) for row in sample}
    assert len(picked) == k and not picked & set(vocab.ids.tolist())


def _args(**extra):
    base = dict(context=200, pool=300, seed=3, batch=24, p_random=0.4, p_span=0.3, switch_step=0, p_extra=0.0)
    return SimpleNamespace(**{**base, **extra})


def test_batches_are_a_function_of_seed_and_step_and_score_only_what_copying_predicts():
    train = torch.randint(1000, (5000,), generator=torch.Generator().manual_seed(4))
    batches = Batches(train, _args())
    x, y, kinds = batches(7)
    x2, y2, kinds2 = Batches(train, _args())(7)
    assert torch.equal(x, x2) and torch.equal(y, y2) and kinds == kinds2
    assert not torch.equal(x, batches(8)[0])
    assert x.shape == y.shape == (24, 200) and set(kinds) <= set("rsn") and "r" in kinds and "n" in kinds
    for row, kind in enumerate(kinds):
        scored = y[row] != IGNORE
        if kind != "r":
            assert scored.all()
            continue
        # A repeated random row (the context holds two copies of the longest): the first copy is never
        # scored, and every scored target is the token one period earlier (the first copy's length).
        first = int(torch.nonzero(scored)[0])
        seq = torch.cat([x[row], y[row, -1:]])
        period = next(
            p for p in range(8, 97) if torch.equal(seq[first + 1 - p : first + 1 - p + 4], seq[first + 1 : first + 5])
        )
        assert first >= period
        for j in torch.nonzero(scored)[:, 0].tolist():
            assert y[row, j] == seq[j + 1 - period]
