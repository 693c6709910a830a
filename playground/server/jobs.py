"""Training jobs: a background thread per job, polled by the UI, stoppable, keeping what it learned.

Jobs live in ``JOBS`` under a random id, so the Stop button of the same session reaches the thread
without the session state holding it. What a job learned becomes a file recipe (files.save_trained).
"""

from __future__ import annotations

import hashlib
import os
import threading

from playground.engine.config import GPTConfig
from playground.errors import UserError
from playground.i18n import tr
from playground.runtime.memory import BUDGET
from playground.runtime.threads import as_background_work
from playground.server.files import save_trained
from playground.server.inputs import typed_number
from playground.training.corpus import prepare_corpus
from playground.training.losses import unigram_loss
from playground.training.train_config import TrainConfig, check_training_memory
from playground.training.trainer import Trainer, build_model

MAX_TRAIN_STEPS = 5000
TRAIN_PRESETS = ("nano", "tiny", "tutorial-d512", "gpt2-small")


def training_config(cfg: GPTConfig, steps, lr, *, batch_size: int = 8, block_size: int | None = None, seed: int = 1337):
    """The TrainConfig of a Train-tab run (also what its time estimate measures); steps and lr are
    checked with messages for the user."""
    steps = typed_number(steps, "Steps", whole=True)
    if not 1 <= steps <= MAX_TRAIN_STEPS:
        raise UserError(
            "train.steps_range", "Steps must be between 1 and {hi:,}, got {steps:,}.", hi=MAX_TRAIN_STEPS, steps=steps
        )
    lr = typed_number(lr, "Learning rate")
    if not (0 < lr <= 1):
        raise UserError("train.lr_range", "The learning rate must be in (0, 1], got {lr}.", lr=lr)
    block = min(block_size or 128, cfg.context_length)
    return TrainConfig(
        steps=steps,
        lr=lr,
        min_lr=lr / 10,
        warmup_steps=max(1, min(100, steps // 10)),
        batch_size=batch_size,
        block_size=block,
        eval_interval=max(5, steps // 20),
        eval_batches=4,
        seed=seed,
    )


class TrainingJob:
    """Trains a fresh copy of a config on a corpus in a background thread.

    The UI polls ``snapshot()``; ``stop()`` ends the loop after the current step, and the model
    keeps everything learned so far. The job's memory (model, gradients, AdamW state, activations)
    is counted in the process-wide budget until the job object is gone.
    """

    def __init__(
        self,
        cfg: GPTConfig,
        text: str,
        corpus_name: str,
        *,
        steps: int,
        lr: float,
        batch_size: int = 8,
        block_size: int | None = None,
        seed: int = 1337,
    ):
        tcfg = training_config(cfg, steps, lr, batch_size=batch_size, block_size=block_size, seed=seed)
        block = tcfg.block_size
        need = check_training_memory(cfg, tcfg, BUDGET.total)  # refused before anything is allocated
        what = f"training a {cfg.n_layers}-layer d{cfg.emb_dim} model"
        with BUDGET.reserve(need, what, "training"):  # ... also if other holders leave too little now
            self.corpus = prepare_corpus(text, block, name=corpus_name)
            self.unigram = unigram_loss(self.corpus.train_ids, self.corpus.val_ids, cfg.vocab_size)
            self.cfg, self.tcfg = cfg, tcfg
            self.trainer = Trainer(build_model(cfg, seed=seed), self.corpus.train_ids, self.corpus.val_ids, tcfg)
            # model, gradients, AdamW state and activations: counted until the job is gone
            BUDGET.register(self, need, what, "training")
        self.id = hashlib.sha256(os.urandom(16)).hexdigest()[:16]
        self.train_points: list[tuple[int, float]] = []
        self.val_points: list[tuple[int, float]] = []
        self.last_event = None
        self.error: str | None = None
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"train-{self.id}", daemon=True)

    def start(self) -> TrainingJob:
        JOBS[self.id] = self
        self._thread.start()
        return self

    def _run(self) -> None:
        def on_event(ev):
            if ev.kind == "step" and ev.loss is not None:
                self.train_points.append((ev.step, ev.loss))
            elif ev.kind == "eval" and ev.val_loss is not None:
                self.val_points.append((ev.step, ev.val_loss))
            self.last_event = ev

        as_background_work()  # generation first: lower priority, one thread fewer (playground.runtime.threads)
        try:
            self.trainer.run(callback=on_event, should_stop=self._stop.is_set)
        except Exception as e:  # reported to the user by the polling handler
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.done.set()

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def result_recipe(self) -> dict:
        """Save what was learned (also after a stop) and name it with a recipe."""
        model = self.trainer.snapshot_model()
        steps = self.trainer.step_count
        trained = {"layers": self.cfg.n_layers, "d": self.cfg.emb_dim, "steps": steps, "corpus": self.corpus.name}
        return {**save_trained(model, tr("en", "trained_label", **trained)), "trained": trained}


JOBS: dict[str, TrainingJob] = {}
