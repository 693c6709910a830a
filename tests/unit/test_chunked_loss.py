"""training.chunked_loss: the loss with the output head inside it gives F.cross_entropy's loss and gradients (to
float32 rounding) without the batch's (rows × vocabulary) logits, and the trainer and the evaluation take it
for a float32 model on the CPU."""

import pytest
import torch
import torch.nn.functional as F

from playground.training import chunked_loss
from playground.training.chunked_loss import linear_cross_entropy
from playground.training.losses import evaluate_loss
from playground.training.trainer import Trainer, build_model
from tests.training_support import TINY, make_trainer


def _inputs(n=300, d=16, vocab=1000, seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, d, generator=g)
    weight = torch.randn(vocab, d, generator=g) * 0.5
    targets = torch.randint(vocab, (n,), generator=g)
    return hidden, weight, targets


@pytest.mark.parametrize("chunk", [1, 7, 128, 300, 1000])
def test_loss_and_gradients_are_cross_entropys_whatever_the_chunk(chunk):
    hidden, weight, targets = _inputs()
    h1, w1 = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    plain = F.cross_entropy(h1 @ w1.t(), targets)
    plain.backward()
    h2, w2 = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    ours = linear_cross_entropy(h2, w2, targets, chunk=chunk)
    ours.backward()
    assert ours.dtype == torch.float32 and ours.shape == ()
    torch.testing.assert_close(ours, plain, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(h2.grad, h1.grad, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(w2.grad, w1.grad, rtol=1e-5, atol=1e-7)


def test_a_tied_head_gets_both_gradients_summed():
    """The head is the embedding (GPT-2's tying): its gradient is the lookup's plus the head's, as in autograd."""
    g = torch.Generator().manual_seed(1)
    emb = (torch.randn(50, 8, generator=g) * 0.3).requires_grad_()
    ids, targets = torch.randint(50, (40,), generator=g), torch.randint(50, (40,), generator=g)
    F.cross_entropy(F.embedding(ids, emb).tanh() @ emb.t(), targets).backward()
    want, emb.grad = emb.grad.clone(), None
    linear_cross_entropy(F.embedding(ids, emb).tanh(), emb, targets, chunk=16).backward()
    torch.testing.assert_close(emb.grad, want, rtol=1e-5, atol=1e-7)


def test_a_scaled_loss_scales_the_gradients():
    hidden, weight, targets = _inputs(n=20)
    h = hidden.clone().requires_grad_()
    (3.0 * F.cross_entropy(h @ weight.t(), targets)).backward()
    want, h.grad = h.grad.clone(), None
    (3.0 * linear_cross_entropy(h, weight, targets, chunk=8)).backward()
    torch.testing.assert_close(h.grad, want, rtol=1e-5, atol=1e-7)


def test_without_gradients_the_sum_and_the_mean():
    hidden, weight, targets = _inputs()
    with torch.no_grad():
        total = linear_cross_entropy(hidden, weight, targets, chunk=64, reduction="sum")
        mean = linear_cross_entropy(hidden, weight, targets, chunk=64)
    torch.testing.assert_close(
        total, F.cross_entropy(hidden @ weight.t(), targets, reduction="sum"), rtol=1e-6, atol=1e-4
    )
    torch.testing.assert_close(mean, total / len(targets))


def test_bad_input_is_refused_plainly():
    hidden, weight, targets = _inputs(n=10)
    with pytest.raises(ValueError, match="do not multiply"):
        linear_cross_entropy(hidden[:, :5], weight, targets)
    with pytest.raises(ValueError, match="10 rows"):
        linear_cross_entropy(hidden, weight, targets[:4])
    with pytest.raises(ValueError, match="outside"):
        linear_cross_entropy(hidden, weight, torch.full((10,), 1000))
    with pytest.raises(ValueError, match="mean loss only"):
        linear_cross_entropy(hidden.requires_grad_(), weight, targets, reduction="sum")
    loss = linear_cross_entropy(hidden, weight.clone().requires_grad_(), targets)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="one backward"):
        loss.backward()


def test_the_model_gives_what_its_head_reads():
    model = build_model(TINY, seed=3).eval()
    idx = torch.randint(TINY.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        hidden = model(idx, return_hidden=True)
        torch.testing.assert_close(model.out_head(hidden), model(idx))
    assert hidden.shape == (2, 9, TINY.emb_dim)


def test_the_trainer_takes_it_for_float32_on_the_cpu_only(tiny_corpus):
    assert make_trainer(tiny_corpus).head_in_loss
    assert not make_trainer(tiny_corpus, dtype="bfloat16").head_in_loss
    assert chunked_loss.takes(build_model(TINY), "float32")
    assert not chunked_loss.takes(build_model(TINY), "bfloat16")


def test_an_int8_head_keeps_the_plain_loss():
    """An int8 model with float32 activations: its head's weight is int8 values, not the logits' matrix."""
    from playground.engine.quantize import quantize_int8
    from playground.training.losses import loss_sums

    model = quantize_int8(build_model(TINY), activations="float32")
    assert not chunked_loss.takes(model, "float32")
    ids = torch.randint(0, TINY.vocab_size, (40,), generator=torch.Generator().manual_seed(3))
    starts = torch.tensor([0, 7, 20])
    windows = ids[starts[:, None] + torch.arange(13)]
    with torch.no_grad():
        want = F.cross_entropy(model(windows[:, :-1]).flatten(0, 1), windows[:, 1:].flatten(), reduction="sum")
    total, count = loss_sums(model, ids, starts, 12, 2, "float32")
    assert count == 36
    assert total == pytest.approx(want.item(), rel=1e-6)


def test_training_steps_and_evaluation_follow_the_plain_loss(tiny_corpus):
    """Three steps and an evaluation through the head inside the loss against the same run through the logits."""
    ours, plain = make_trainer(tiny_corpus, seed=5), make_trainer(tiny_corpus, seed=5)
    plain.head_in_loss = False
    for _ in range(3):
        a, b = ours.step(), plain.step()
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
    for p, q in zip(ours.model.parameters(), plain.model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=2e-5)  # (Adam moves a near-zero gradient by ~lr)
    with torch.autocast("cpu", enabled=False):
        reference = _plain_eval(plain.model, tiny_corpus.val_ids)
    assert evaluate_loss(plain.model, tiny_corpus.val_ids, TINY.context_length, n_windows=8) == pytest.approx(
        reference, rel=1e-5
    )


def _plain_eval(model, ids):
    from playground.training.losses import evaluation_starts

    ids = torch.as_tensor(ids)
    block = TINY.context_length
    starts = evaluation_starts(len(ids), block, 8)
    windows = torch.stack([ids[s : s + block + 1] for s in starts.tolist()])
    model.eval()
    with torch.no_grad():
        logits = model(windows[:, :-1])
    return float(F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()))


def test_a_sampled_softmax_run_keeps_its_own_loss(tiny_corpus):
    from playground.training.sampled_softmax import SampledSoftmax

    softmax = SampledSoftmax(torch.unique(tiny_corpus.train_ids), TINY.vocab_size, 16)
    trainer = Trainer(build_model(TINY, seed=1), tiny_corpus.train_ids, tiny_corpus.val_ids, softmax=softmax)
    assert not trainer.head_in_loss
