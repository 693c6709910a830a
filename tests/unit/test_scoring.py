"""Scoring: per-token surprisal against a direct −log2 softmax, the sliding windows against a
per-token forward, the totals' formulas, known figures, and refusals."""

import math

import numpy as np
import pytest
import torch

from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.tokenizer import load_tokenizer
from playground.inside.scoring import ScoringError, compare_scores, decode_upload, score_ids, score_text

TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east, and Juliet is the sun."


@pytest.fixture(scope="module")
def small():
    cfg = GPTConfig(vocab_size=50257, context_length=16, emb_dim=32, n_heads=2, n_layers=2, tie_weights=False)
    return GPTModel(cfg, generator=torch.Generator().manual_seed(3)).eval()


def test_uniform_model_has_the_known_figures(small):
    flat = GPTModel(small.cfg, generator=torch.Generator().manual_seed(0)).eval()
    with torch.no_grad():
        flat.out_head.weight.zero_()  # equal logits: every token has p = 1/V
    s = score_text(flat, TEXT)
    np.testing.assert_allclose(s.surprisal_bits, math.log2(50257), rtol=1e-6)
    assert s.loss_nats == pytest.approx(math.log(50257), rel=1e-6)  # 10.825 nats
    assert s.perplexity == pytest.approx(50257, rel=1e-5)


@pytest.mark.parametrize("stride", [1, 5, 16])
def test_sliding_windows_score_each_token_once_with_the_stated_context(small, stride):
    ids = load_tokenizer().encode(TEXT * 2)[:50]
    W = small.cfg.context_length
    done = []
    s = score_ids(small, ids, stride=stride, progress=lambda d, t: done.append((d, t)))
    assert s.n_scored == len(ids) - 1 and s.stride == stride
    assert done[-1] == (len(ids) - 1, len(ids) - 1) and [d for d, _ in done] == sorted(d for d, _ in done)
    for t in range(1, len(ids)):
        # window k starts at k*stride and scores targets up to k*stride + W: the first one that reaches t
        begin = 0 if t <= W else stride * math.ceil((t - W) / stride)
        assert s.context[t - 1] == t - begin
        with torch.no_grad():
            row = torch.log_softmax(small(torch.tensor([ids[begin:t]]))[0, -1].double(), -1)
        assert s.surprisal_bits[t - 1] == pytest.approx(-float(row[ids[t]]) / math.log(2), abs=2e-4)
    assert s.context[W:].min() >= W - stride + 1


def test_cap_is_applied_and_said(small):
    s = score_text(small, TEXT, max_tokens=8)
    assert len(s.token_ids) == 8 and s.truncated_from == len(load_tokenizer().encode(TEXT))
    assert s.summary()["truncated_from_tokens"] == s.truncated_from


@pytest.mark.parametrize(
    "text, words", [("", "empty"), ("   \n", "empty"), ("\ufffd\ufffd \ufffd", "undecodable"), ("Hi", "single token")]
)
def test_bad_texts_are_refused_with_a_reason(small, text, words):
    with pytest.raises(ScoringError, match=words):
        score_text(small, text)


@pytest.mark.parametrize("stride", [0.5, -1, 17, True, "x"])
def test_bad_stride_is_refused(small, stride):
    with pytest.raises(ScoringError, match="stride"):
        score_ids(small, [1, 2, 3], stride=stride)


def test_token_ids_outside_the_vocabulary_are_refused(small):
    with pytest.raises(ScoringError, match="vocabulary"):
        score_ids(small, [10, 50257, 3])


def test_uploads_that_are_not_utf8_are_said_and_can_be_replaced():
    assert decode_upload("héllo".encode()) == "héllo"
    assert decode_upload(b"\xef\xbb\xbfhi") == "hi"
    with pytest.raises(ScoringError, match="not UTF-8.*byte 2"):
        decode_upload(b"ab\xff\xfecd")
    assert decode_upload(b"ab\xffcd", replace=True) == "ab\ufffdcd"


def test_compare_needs_the_same_tokens(small):
    with pytest.raises(ScoringError, match="same text"):
        compare_scores(score_text(small, TEXT), score_text(small, TEXT + " more"))


@pytest.mark.parametrize(
    "changes, dtype",
    [
        (dict(pos_encoding="sinusoidal", activation="relu"), torch.float32),
        (dict(norm_placement="post", attention_impl="per_head"), torch.float32),
        ({}, torch.bfloat16),
    ],
)
def test_scored_rows_are_the_plain_forwards_rows(changes, dtype):
    """Scoring applies the head to the scored rows only; those rows equal model(idx)'s, whatever the variant."""
    from playground.inside.scoring import _logits_of_rows

    cfg = GPTConfig(vocab_size=50257, context_length=16, emb_dim=32, n_heads=2, n_layers=2, **changes)
    model = GPTModel(cfg, generator=torch.Generator().manual_seed(1)).to(dtype).eval()
    idx = torch.randint(0, 50257, (1, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(_logits_of_rows(model, idx, 5), model(idx)[0, 5:].float(), atol=1e-5, rtol=1e-5)


def _token_figures(logits: torch.Tensor, targets: torch.Tensor):
    """The reference: surprisal (bits), probability, rank and top guess from full logits, the
    plain way (log_softmax, gather, a comparison count, argmax)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    target_logp = logp.gather(1, targets[:, None])[:, 0].double()
    rank = (logits > logits.gather(1, targets[:, None])).sum(dim=-1) + 1
    return -target_logp / math.log(2.0), target_logp.exp(), rank.long(), logits.argmax(dim=-1)


@pytest.mark.parametrize("product,lanes", [("torch", 1), ("numpy", 1), ("numpy", 2), ("numpy", 3)])
@pytest.mark.parametrize("scale", [1.0, 40.0])  # 40: row maxima past ±60, the shifted log-sum-exp
def test_chunked_row_figures_equal_the_plain_log_softmax(scale, product, lanes):
    """The chunked reader (reused buffers, numpy argmax and rank count, in-place exp; chunks
    shared out to ``lanes`` threads) against log_softmax, argmax and a comparison count over the
    full logits, for a float32 head and a bfloat16 one (the plain torch path), in more rows than
    one chunk a lane."""
    from playground.engine.readout import HeadReader
    from playground.inside.scoring import SCORE_ROWS, _row_figures

    g = torch.Generator().manual_seed(3)
    for dtype in (torch.float32, torch.bfloat16):
        cfg = GPTConfig(vocab_size=50257, context_length=16, emb_dim=32, n_heads=2, n_layers=1)
        model = GPTModel(cfg, generator=torch.Generator().manual_seed(1)).eval()
        with torch.no_grad():
            model.out_head.weight.mul_(scale)
        model = model.to(dtype)
        n = lanes * SCORE_ROWS + 29
        rows = torch.randn(n, 32, generator=g).to(dtype)
        targets = torch.randint(0, 50257, (n,), generator=g)
        targets[0] = int(model.out_head(rows[:1]).float().argmax())  # one target that is the top guess
        with torch.no_grad():
            threads = torch.get_num_threads()
            got = _row_figures(HeadReader(model, product=product, lanes=lanes), rows, targets)
            assert torch.get_num_threads() == threads  # the caller's own setting, given back
            want = _token_figures(model.out_head(rows).float(), targets)
        assert (got[0] >= 0).all() and got[2][0] == 1
        torch.testing.assert_close(got[0], want[0], atol=5e-5 * scale, rtol=1e-5)  # surprisal, bits
        torch.testing.assert_close(got[1], want[1], atol=1e-6, rtol=1e-4)  # probability
        # rank and top guess: exact up to logits tied within float rounding (the reader's product
        # may run on another BLAS than the module's, with another summation order)
        logits = model.out_head(rows).float()
        t = logits.gather(1, targets[:, None])
        eps = 1e-5 * scale
        assert ((logits > t + eps).sum(-1) + 1 <= got[2]).all() and (got[2] <= (logits > t - eps).sum(-1) + 1).all()
        assert (got[2] == want[2]).float().mean() > 0.9
        assert (logits.gather(1, got[3][:, None])[:, 0] >= logits.max(-1).values - eps).all()


def test_overlapping_readouts_share_one_blas_limit_and_give_it_back():
    """Two readouts overlapping (two users, or a readout's lanes) hold numpy's OpenBLAS at one
    thread until the last one leaves, which restores what was there before -- also when the
    first to enter is not the last to leave."""
    from playground.engine import readout
    from playground.engine.readout import one_blas_thread

    with one_blas_thread():
        pass
    # The OpenBLAS libraries the readout limits: those loaded at its first use (numpy's among
    # them). Another loaded later -- scipy's own, once something imports scipy -- is not its
    # concern, so the threads are read through the readout's own controller.
    blas = readout._OPENBLAS
    if not blas.lib_controllers:
        pytest.skip("numpy is not linked to OpenBLAS here")
    assert readout._BLAS_HOLDERS == 0

    def threads():
        return {lib["num_threads"] for lib in blas.info()}

    with blas.limit(limits=2):  # a known starting point, even on a 1-core runner
        first, second = one_blas_thread(), one_blas_thread()
        first.__enter__()
        assert threads() == {1}
        second.__enter__()
        first.__exit__(None, None, None)
        assert threads() == {1}  # the second holder is still reading
        second.__exit__(None, None, None)
        assert threads() == {2}
