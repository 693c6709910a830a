"""The default "watch an induction head form" run (playground.training.induction_run), trained for
real with its fixed seed: a previous-token head and an induction head reach 0.4, the in-context gap
opens, and the logged timeline equals the same scores recomputed in transformers from checkpoints
saved at two logged steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

transformers = pytest.importorskip("transformers")

THRESHOLD = 0.4


@pytest.fixture(scope="module")
def trained(induction_trained):
    """The default run (one torch thread, as the Train tab trains it, shared with the recorded
    timeline's test) and its checkpoints at two logged steps."""
    run, folder, saved_at = induction_trained
    return run.watch, folder, saved_at, run.trainer


def test_the_heads_form_within_the_run(trained):
    watch, _, _, _ = trained
    last = watch.records[-1]
    assert last.previous_token.max() >= THRESHOLD
    assert last.induction.max() >= THRESHOLD
    # the circuit's order: the previous-token head in layer 0, the induction head after it
    assert np.unravel_index(last.previous_token.argmax(), last.previous_token.shape)[0] == 0
    assert np.unravel_index(last.induction.argmax(), last.induction.shape)[0] == 1
    assert watch.records[0].induction.max() < 0.1  # not there at initialisation
    assert last.gap < -1.0  # the second run is read off the first
    tl = watch.timeline()
    assert tl["phase_change"] is not None and 0 < tl["phase_change"]["step"] <= tl["steps"][-1]


def _hf_scores(folder, probe):
    hf = transformers.GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        out = hf(probe, output_attentions=True)
    period = (probe.shape[1] - 1) // 2
    maps = [a.numpy() for a in out.attentions]  # each (rows, H, T, T)
    T = probe.shape[1]
    t = np.arange(1, T)
    prev = np.stack([m[:, :, t, t - 1].mean(axis=(0, 2)) for m in maps])
    first = np.stack([m[:, :, 1:, 0].mean(axis=(0, 2)) for m in maps])
    # the second run's queries look at the key after their earlier occurrence: q - period + 1
    q = np.arange(period + 1, T)
    ind = np.stack([m[:, :, q, q - period + 1].mean(axis=(0, 2)) for m in maps])
    nll = F.cross_entropy(out.logits[:, :-1].flatten(0, 1), probe[:, 1:].flatten(), reduction="none")
    nll = nll.view(probe.shape[0], -1)
    gap = float(nll[:, period + 1 : 2 * period].mean() - nll[:, 1:period].mean())
    return prev, ind, first, gap


def test_the_timeline_equals_transformers_on_the_saved_checkpoints(trained):
    watch, folder, saved_at, _ = trained
    tl = watch.timeline()
    for step in saved_at:
        i = tl["steps"].index(step)
        prev, ind, first, gap = _hf_scores(folder / f"step{step}", watch.probe)
        np.testing.assert_allclose(tl["previous_token"][i], prev, atol=2e-4)
        np.testing.assert_allclose(tl["induction"][i], ind, atol=2e-4)
        np.testing.assert_allclose(tl["first_token"][i], first, atol=2e-4)
        assert tl["in_context_gap"][i] == pytest.approx(gap, abs=2e-3)


def test_logging_is_a_small_part_of_the_run(trained):
    watch, _, _, trainer = trained
    assert watch.seconds <= 0.1 * trainer.elapsed_s
