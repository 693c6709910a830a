"""Sampling receipts: the recorded u is the seeded generator's draw, and u reproduces every sampled
token under an independent (numpy) recomputation of the filtered distribution."""

import numpy as np
import pytest
import torch

from playground.engine.receipts import explain, inverse_cdf_draw, pick, receipt
from playground.engine.sampling import generate
from playground.engine.tokenizer import load_tokenizer
from playground.server.recipes import build_from_recipe, bundled_recipe

PROMPT = "ROMEO:\nWhat light through yonder window breaks?\n"


@pytest.fixture(scope="module")
def model():
    return build_from_recipe(bundled_recipe())


def numpy_final(logits: np.ndarray, temperature, top_k, top_p) -> np.ndarray:
    """Temperature, top-k, top-p written out with numpy (float64), independent of sampling.py."""
    z = (logits - logits.max()) / temperature
    if top_k:
        kth = np.sort(z)[-top_k]
        z = np.where(z < kth, -np.inf, z)
    p = np.exp(z - z.max())
    p /= p.sum()
    if top_p is not None and top_p < 1:
        order = np.argsort(-p, kind="stable")
        before = np.cumsum(p[order]) - p[order]
        keep = np.zeros_like(p, dtype=bool)
        keep[order[before < top_p]] = True
        p = np.where(keep, p, 0.0)
        p /= p.sum()
    return p


@pytest.mark.parametrize(
    "settings",
    [dict(temperature=0.9, top_k=40, top_p=0.95, seed=7), dict(temperature=1.5, top_k=None, top_p=None, seed=2026)],
)
def test_receipt_reproduces_every_sampled_token(model, settings):
    ids = load_tokenizer().encode(PROMPT)
    steps = list(generate(model, ids, max_new_tokens=25, **settings))
    gen = torch.Generator().manual_seed(settings["seed"])
    seq = list(ids)
    not_top = 0
    for step in steps:
        u = float(torch.rand((), generator=gen, dtype=torch.float64))  # the same seeded draws, redone
        assert step.u == u
        with torch.no_grad():
            logits = model(torch.tensor([seq]))[0, -1].double().numpy()
        p = numpy_final(logits, settings["temperature"], settings["top_k"], settings["top_p"])
        cdf = np.cumsum(p)
        # the token whose slice [cdf[i-1], cdf[i]) holds u: numpy's own inverse-CDF rule
        assert int(np.searchsorted(cdf, u * cdf[-1], side="right")) == step.token_id
        r = receipt(step)
        assert not r.greedy and r.reproduced
        lo, hi = r.chosen
        assert lo <= u < hi and hi - lo == pytest.approx(p[step.token_id], abs=1e-5)
        assert [s[1] for s in r.slices] == sorted((s[1] for s in r.slices), reverse=True)
        not_top += r.most_likely != step.token_id
        seq.append(step.token_id)
    assert not_top > 0  # the receipts explain some tokens that were not the most likely one


def test_greedy_steps_draw_nothing_and_say_so(model):
    step = next(iter(generate(model, load_tokenizer().encode(PROMPT), max_new_tokens=1, temperature=0)))
    r = receipt(step)
    assert step.u is None and r.greedy and r.reproduced
    assert "greedy" in explain(r) and "no random number" in explain(r)


def test_explanation_names_u_the_slice_and_the_most_likely_token(model):
    steps = list(generate(model, load_tokenizer().encode(PROMPT), max_new_tokens=30, temperature=1.5, seed=1))
    step = next(s for s in steps if receipt(s).most_likely != s.token_id)
    text = explain(receipt(step), piece=lambda i: f"#{i}")
    assert f"u = {step.u:.6f}" in text and f"#{step.token_id}" in text and "most likely" in text


def test_inverse_cdf_frequencies_match_the_probabilities():
    p = torch.tensor([0.5, 0.0, 0.2, 0.3, 0.0])
    gen = torch.Generator().manual_seed(0)
    counts = np.bincount([inverse_cdf_draw(p, gen)[0] for _ in range(20_000)], minlength=5)
    assert counts[1] == counts[4] == 0
    np.testing.assert_allclose(counts / counts.sum(), p.numpy(), atol=0.015)


def test_pick_never_lands_in_an_empty_slice():
    cdf = torch.cumsum(torch.tensor([0.0, 0.25, 0.0, 0.75, 0.0], dtype=torch.float64), 0)
    assert pick(cdf, 0.0) == 1 and pick(cdf, 0.2499) == 1 and pick(cdf, 0.25) == 3
    assert pick(cdf, np.nextafter(1.0, 0.0)) == 3


def test_receipt_lists_only_tokens_that_could_be_drawn(model):
    steps = list(generate(model, load_tokenizer().encode(PROMPT), max_new_tokens=5, temperature=1.0, top_k=2, seed=4))
    for step in steps:
        r = receipt(step)
        assert 1 <= len(r.slices) <= 2 and all(hi > lo for _, _, lo, hi in r.slices)
        assert sum(p for _, p, _, _ in r.slices) == pytest.approx(1.0, abs=1e-6)
