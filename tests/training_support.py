"""What the training tests share: a tiny model, a made-up text to learn and a trainer for it (a plain
module; their fixtures, ``no_downloads``, ``one_torch_thread`` and ``tiny_corpus``, are in
tests/conftest.py)."""

from __future__ import annotations

import random

from playground.engine.presets import PRESETS
from playground.training.train_config import TrainConfig
from playground.training.trainer import Trainer, build_model

# Small enough that a step takes a few milliseconds of matrix work beyond the 50257-way softmax.
TINY = PRESETS["nano"].replace(context_length=32, emb_dim=32)


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


def make_trainer(corpus, seed=7, **changes) -> Trainer:
    """A 40-step run of TINY on ``corpus`` (a PreparedCorpus), ``changes`` to its TrainConfig."""
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
