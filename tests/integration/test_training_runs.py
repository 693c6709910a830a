"""Whole training runs on nano: the losses fall well below the start, the same seed gives the same losses,
and a resumed run continues with exactly the losses of an uninterrupted one (the trainer's parts:
tests/unit/test_train.py)."""

from __future__ import annotations

import math

import pytest
import torch

from playground.engine.weights import read_checkpoint_metadata
from playground.training.trainer import Trainer
from tests.training_support import TINY, make_trainer

pytestmark = pytest.mark.usefixtures("no_downloads", "one_torch_thread")


def test_training_lowers_train_and_validation_loss_well_below_start(tiny_corpus):
    trainer = make_trainer(tiny_corpus)
    events = []
    done = trainer.run(callback=events.append)
    losses = [h["loss"] for h in trainer.history]
    # An untrained model is close to uniform over the 50257 tokens.
    assert losses[0] == pytest.approx(math.log(50257), abs=0.3)
    assert sum(losses[-5:]) / 5 < 0.7 * losses[0], losses
    first_val, last_val = trainer.val_history[0][1], trainer.val_history[-1][1]
    assert trainer.val_history[0][0] == 0 and trainer.val_history[-1][0] == 40
    assert last_val < 0.7 * first_val
    # The progress events: one per step, an evaluation at 0, 10, 20, 30, 40, then "done".
    assert [e.step for e in events if e.kind == "step"] == list(range(1, 41))
    assert [e.step for e in events if e.kind == "eval"] == [0, 10, 20, 30, 40]
    assert events[-1] is done and done.kind == "done" and not done.stopped
    assert done.tokens_seen == 40 * 4 * TINY.context_length and done.progress == 1.0


def test_same_seed_same_losses_other_seed_different(tiny_corpus):
    runs = []
    for seed in (7, 7, 8):
        trainer = make_trainer(tiny_corpus, seed=seed, steps=6)
        runs.append([trainer.step()["loss"] for _ in range(6)])
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_resume_continues_from_saved_step_with_the_same_losses(tiny_corpus, tmp_path):
    full = make_trainer(tiny_corpus, steps=12, eval_interval=100)
    full.run()
    full_losses = [h["loss"] for h in full.history]

    first = make_trainer(tiny_corpus, steps=12, eval_interval=100)
    done = first.run(should_stop=lambda: first.step_count >= 5)
    assert done.stopped and done.step == 5
    path = first.save(tmp_path / "model.safetensors")
    assert read_checkpoint_metadata(path)["step"] == "5"

    resumed = Trainer.from_checkpoint(path, tiny_corpus.train_ids, tiny_corpus.val_ids)
    assert resumed.step_count == 5 and resumed.tokens_seen == 5 * 4 * TINY.context_length
    assert resumed.tcfg == first.tcfg  # the train config travels in the checkpoint
    resumed.run()
    assert [h["step"] for h in resumed.history] == list(range(6, 13))
    resumed_losses = [h["loss"] for h in first.history] + [h["loss"] for h in resumed.history]
    assert resumed_losses == pytest.approx(full_losses, rel=1e-6, abs=1e-6)
    for (name, p), q in zip(full.model.named_parameters(), resumed.model.parameters()):
        assert torch.allclose(p, q, atol=1e-6), name
