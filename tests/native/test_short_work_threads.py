"""Short work of a decode step -- the sampler's on one row of logits, one query's attention -- runs on one
thread where that measured faster (runtime.kernels): the same numbers either way, the caller's thread count
untouched."""

import pytest
import torch

from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.runtime import decode_decisions, kernels

TINY = dict(context_length=48, emb_dim=64, n_heads=4, n_layers=2)


@pytest.fixture(autouse=True)
def fresh():
    kernels.forget()
    yield
    kernels.forget()


def _model():
    torch.manual_seed(0)
    model = GPTModel(GPTConfig(**TINY))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.2 * torch.randn(p.shape) if name.endswith("scale") else 0.1 * torch.randn(p.shape))
    return model.eval()


def test_torch_threads_sets_and_restores():
    from playground.runtime.threads import torch_threads

    before = torch.get_num_threads()
    with torch_threads(before + 1):
        assert torch.get_num_threads() == before + 1
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before


def test_vocabulary_threads_is_measured_only_with_threads_to_spare():
    from playground.runtime.threads import torch_threads

    with torch_threads(1):
        assert (
            decode_decisions.vocabulary_threads(5000) is None
            and decode_decisions.vocabulary_threads_decided(5000) is None
        )
    with torch_threads(2):
        choice = decode_decisions.vocabulary_threads(5000)
        assert choice is not None and choice.winner in ("all", "one") and set(choice.seconds) == {"all", "one"}
        assert decode_decisions.vocabulary_threads_decided(5000) == (1 if choice.winner == "one" else None)
        assert torch.get_num_threads() == 2  # the measurement put the count back


@pytest.mark.parametrize("temperature", [0, 0.9])
def test_the_sampler_on_one_thread_takes_the_same_steps(monkeypatch, temperature):
    from playground.accel.decoder import ACCELERATED
    from playground.engine import decoding, sampling
    from playground.runtime.threads import torch_threads

    generate = sampling.generate
    model = _model()
    decoding.attach(model, ACCELERATED)  # the accelerated decoder runs the sampler on the measured threads
    # the teaching sampler's torch work: the compiled sampled step, where it built, takes such rows without torch
    monkeypatch.setattr(ACCELERATED, "sampler", lambda n_top: None)
    run = lambda: list(generate(model, [5, 6, 7], max_new_tokens=6, temperature=temperature, top_k=40, seed=3))
    with torch_threads(2):
        monkeypatch.setattr(decode_decisions, "vocabulary_threads_decided", lambda vocab: None)
        want = run()
        seen = []
        monkeypatch.setattr(decode_decisions, "vocabulary_threads_decided", lambda vocab: 1)
        original = sampling.entropy_bits  # called inside the sampler's step: records the threads it runs on
        monkeypatch.setattr(sampling, "entropy_bits", lambda p: seen.append(torch.get_num_threads()) or original(p))
        got = run()
        assert torch.get_num_threads() == 2
    assert seen and set(seen) == {1}  # the sampler ran on one thread, the forward on two
    assert [s.token_id for s in got] == [s.token_id for s in want]
    for a, b in zip(got, want):
        assert a.top == pytest.approx(b.top, rel=1e-6) and a.entropy == pytest.approx(b.entropy, rel=1e-6)
