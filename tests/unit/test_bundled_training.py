"""The bundled model's training pieces (tools/bundled): the chunked head loss equals the plain
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

sys.path.insert(0, str(ROOT / "tools" / "bundled"))
from bundled_batches import IGNORE, NEWLINE, Batches, line_starts  # noqa: E402
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


def test_every_repeated_row_says_its_period_and_lines_are_whole_lines():
    """Stage 4's rows: each repeated row's (start, L, end) names queries whose token is the one L back,
    and a row of lines said twice is whole lines of the training text (it starts after a newline)."""
    line = torch.tensor([5, 6, 7, NEWLINE])
    train = torch.cat(
        [
            torch.randint(10, 1000, (7,), generator=torch.Generator().manual_seed(i)).index_put_(
                (torch.tensor([6]),), torch.tensor(NEWLINE)
            )
            for i in range(800)
        ]
        + [line]
    )
    a = _args()
    a.p_random, a.p_span, a.p_lines = 0.3, 0.2, 0.4
    batches = Batches(train, a)
    x, y, kinds = batches(3)
    assert "l" in kinds and batches.periods.shape == (len(kinds), 3)
    starts = set(line_starts(train).tolist())
    for row, kind in enumerate(kinds):
        start, L, end = batches.periods[row].tolist()
        if kind in "ne":
            assert L == 0
            continue
        assert L > 0 and start + L < end <= x.size(1)
        q = torch.arange(start + L, end)
        assert torch.equal(x[row, q], x[row, q - L])  # the query's token occurred L back
        if kind == "l":
            begin = next(s for s in starts if torch.equal(train[s : s + L], x[row, :L]))
            assert begin in starts and int(train[begin + L - 1]) == NEWLINE


def test_the_induction_shaping_reads_the_models_own_attention():
    """head_shaping's recomputed pattern is the model's attention; its induction terms are zero for a
    head already at its floor and for the others under their ceiling, and positive otherwise."""
    from head_shaping import HeadShaper

    from playground import GPTConfig, GPTModel

    torch.manual_seed(0)
    model = GPTModel(GPTConfig(context_length=32, emb_dim=32, n_heads=2, n_layers=2, drop_rate=0.0)).train()
    shaper = HeadShaper(model, None, None, 0.7, 0.5, induction=(1, 1), induction_floor=0.7, induction_ceiling=0.1)
    x = torch.randint(1000, (3, 24))
    shaper.periods = torch.tensor([[0, 8, 24], [0, 0, 0], [2, 10, 20]])
    with torch.no_grad():
        _, trace = model.eval()(x, return_attention=True)
    model.train()
    model(x)
    torch.testing.assert_close(shaper.pattern(1), trace.layer(1), rtol=1e-4, atol=1e-6)
    loss = shaper.induction_loss()
    assert float(loss.detach()) > 0  # a random model is below the floor
    assert 0 <= shaper.last["ind"] <= 1 and 0 <= shaper.last["ind_other_max"] <= 1
