"""Whole training runs on nano: the losses fall well below the start, the same seed gives the same losses,
and a resumed run continues with exactly the losses of an uninterrupted one (the trainer's parts:
tests/unit/test_train.py)."""

from __future__ import annotations

import math
import random

import pytest
import torch

from playground.engine.presets import PRESETS
from playground.engine.weights import read_checkpoint_metadata
from playground.training import corpus as corpus_mod
from playground.training.corpus import (
    prepare_corpus,
)
from playground.training.train_config import TrainConfig
from playground.training.trainer import Trainer, build_model

# Small enough that a step takes a few milliseconds of matrix work beyond the 50257-way softmax.
TINY = PRESETS["nano"].replace(context_length=32, emb_dim=32)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to download fails loudly: the tests must never reach the network."""

    def refuse(url, timeout, max_bytes):
        raise AssertionError(f"test tried to download {url}")

    monkeypatch.setattr(corpus_mod, "_fetch_url", refuse)


@pytest.fixture(autouse=True)
def one_thread():
    # Same thread count for every run of a comparison, and gentle on a shared CPU.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def small_text(n_sentences: int = 600, seed: int = 0) -> str:
    """A made-up text over ~40 words: a few thousand tokens, learnable in a few dozen steps."""
    rng = random.Random(seed)
    subjects = ["the king", "my lord", "the queen", "a fool", "good sir", "the duke", "fair lady"]
    verbs = ["doth love", "shall find", "hath seen", "will keep", "must know", "did call"]
    objects = ["the crown", "his sword", "her heart", "the night", "our hope", "this land", "thy name"]
    lines = []
    for _ in range(n_sentences):
        lines.append(f"{rng.choice(subjects).capitalize()} {rng.choice(verbs)} {rng.choice(objects)}.")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def tiny_corpus():
    return prepare_corpus(small_text(), TINY.context_length, name="small")


def make_trainer(corpus, seed=7, **changes) -> Trainer:
    tcfg = TrainConfig(
        steps=40,
        batch_size=4,
        lr=1e-2,
        min_lr=1e-3,
        warmup_steps=4,
        eval_interval=10,
        eval_batches=2,
        seed=seed,
    ).replace(**changes)
    return Trainer(build_model(TINY, seed=seed), corpus.train_ids, corpus.val_ids, tcfg)


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
