"""The default "watch an induction head form" run (playground.training.induction_run), trained for
real with its fixed seed: a previous-token head and an induction head reach 0.4, the in-context gap
opens, and the logged timeline equals the same scores recomputed in transformers from checkpoints
saved at two logged steps."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from playground.engine.hf_gpt2 import gpt2_config_dict
from playground.engine.weights import save_checkpoint
from playground.training import induction_run
from playground.training.corpus import load_bundled_corpus, prepare_corpus
from playground.training.head_watch import HeadWatch, probe_batch
from playground.training.trainer import Trainer, build_model

transformers = pytest.importorskip("transformers")

THRESHOLD = 0.4


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The default run, as the Train tab trains it (one torch thread), with checkpoints in GPT-2's
    layout at two logged steps: the last log before the phase change could be and the run's end."""
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("induction")
    tcfg = induction_run.train_config()
    corpus = prepare_corpus(load_bundled_corpus(induction_run.CORPUS), tcfg.block_size, name="aesop")
    model = build_model(induction_run.MODEL, tcfg.seed, device="cpu")
    trainer = Trainer(model, corpus.train_ids, corpus.val_ids, tcfg, **induction_run.trainer_extras(corpus, tcfg))
    watch = HeadWatch(model, probe_batch(corpus.train_ids), induction_run.WATCH_EVERY)
    saved_at = (tcfg.steps // 3 // induction_run.WATCH_EVERY * induction_run.WATCH_EVERY, tcfg.steps)

    def on_event(event):
        record = watch(event)
        if record is not None and record.step in saved_at:
            step_folder = folder / f"step{record.step}"
            step_folder.mkdir()
            save_checkpoint(model, step_folder / "model.safetensors", layout="gpt2")
            (step_folder / "config.json").write_text(json.dumps(gpt2_config_dict(model.cfg)))

    trainer.run(on_event)
    return watch, folder, saved_at, trainer


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
