"""Training jobs: a background thread per job, polled by the UI, stoppable, keeping what it learned.

Jobs live in ``JOBS`` under a random id, so the Stop button of the same session reaches the thread
without the session state holding it. What a job learned becomes a file recipe (files.save_trained).

Jobs share the machine through ``QUEUE``: at most ``PLAYGROUND_MAX_TRAININGS`` (default 2) train at
once, the others wait first come, first served, and know their place and the longest they can wait
(at most ``MAX_WAITING`` wait; more are refused). Each run may take ``PLAYGROUND_TRAIN_MINUTES``
(default 15): a run that cannot finish in it is refused before it starts (the measured estimate, or
else a lower bound by arithmetic), and one that runs over it stops after its current step, keeping
what it learned.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time

from playground.engine.config import GPTConfig
from playground.errors import UserError
from playground.i18n import tr
from playground.runtime.memory import BUDGET
from playground.runtime.threads import as_background_work
from playground.server.files import save_trained
from playground.server.train_samples import sample_prompt_ids, write_sample
from playground.settings import parse_number, parse_whole
from playground.training import estimate, induction_run
from playground.training.corpus import prepare_corpus
from playground.training.head_watch import HeadWatch, probe_batch
from playground.training.losses import unigram_loss
from playground.training.train_config import TrainConfig, check_training_memory
from playground.training.trainer import Trainer, build_model

MAX_TRAIN_STEPS = 5000
TRAIN_PRESETS = ("nano", "tiny", "tutorial-d512", "gpt2-small")
MAX_WAITING = 8  # runs waiting for a slot; each holds its memory while it waits


def time_limit_seconds() -> float:
    """How long one training run may take: ``PLAYGROUND_TRAIN_MINUTES`` (default 15)."""
    return float(os.environ.get("PLAYGROUND_TRAIN_MINUTES", "15")) * 60


def max_trainings() -> int:
    """How many runs train at once: ``PLAYGROUND_MAX_TRAININGS`` (default 2; one thread each)."""
    return max(1, int(os.environ.get("PLAYGROUND_MAX_TRAININGS", "2")))


def check_training_time(cfg: GPTConfig, tcfg) -> float:
    """Seconds the run is expected to take here; UserError if that is over the time limit. The
    estimate the Train tab measured for this config and batch if there is one, else a lower bound
    from the run's arithmetic (nothing is timed here: refusing must not take minutes)."""
    limit = time_limit_seconds()
    timing = estimate.known_step_time(cfg, tcfg)
    if timing is not None:
        seconds = estimate.estimate_seconds(timing, tcfg.steps, tcfg.eval_interval)
        one_fits = estimate.estimate_seconds(timing, 1, tcfg.eval_interval) <= limit
        fit = estimate.steps_for_seconds(timing, limit) if one_fits else 0
        how = "about"
    else:
        rate = estimate.best_flops_per_second()
        seconds = estimate.least_seconds(cfg, tcfg, rate=rate)
        fit = _most_steps_within(cfg, tcfg, limit, rate)
        how = "at least"
    if seconds <= limit:
        return seconds
    fields = dict(how=how, minutes=seconds / 60, limit=limit / 60, batch=tcfg.batch_size, block=tcfg.block_size)
    if fit < 1:
        raise UserError(
            "train.step_too_long",
            "This run would take {how} {minutes:.1f} minutes here, and even one step of this model at a batch of "
            "{batch} × {block} tokens does not fit in a training run's limit of {limit:g} minutes: pick a smaller "
            "model or batch.",
            **fields,
        )
    raise UserError(
        "train.too_long",
        "This run would take {how} {minutes:.1f} minutes here; a training run may take at most {limit:g} minutes. "
        "Train at most {fit:,} steps, or pick a smaller model or batch ({batch} × {block} tokens a step now).",
        fit=fit,
        **fields,
    )


def _most_steps_within(cfg: GPTConfig, tcfg, seconds: float, rate: float) -> int:
    """The most steps whose lower bound fits in ``seconds`` (0 if not even one)."""
    lo, hi = 0, tcfg.steps
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate.least_seconds(cfg, tcfg, mid, rate=rate) <= seconds:
            lo = mid
        else:
            hi = mid - 1
    return lo


def training_config(cfg: GPTConfig, steps, lr, *, batch_size: int = 8, block_size: int | None = None, seed: int = 1337):
    """The TrainConfig of a Train-tab run (also what its time estimate measures); steps and lr are
    checked with messages for the user."""
    steps = parse_whole(steps, "Steps", text=False)
    if not 1 <= steps <= MAX_TRAIN_STEPS:
        raise UserError(
            "train.steps_range", "Steps must be between 1 and {hi:,}, got {steps:,}.", hi=MAX_TRAIN_STEPS, steps=steps
        )
    lr = parse_number(lr, "Learning rate", text=False)
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


class TrainingQueue:
    """Training slots, first come, first served: ``join`` (refused when ``MAX_WAITING`` already
    wait), ``wait_turn`` (blocks until a slot is free; False if the job was stopped meanwhile),
    ``leave``; ``position`` (0: training) and ``wait_bound`` (the longest the job can still wait,
    each run ahead taking at most the time limit) for the message a waiting user reads."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running: dict[TrainingJob, float] = {}  # job -> when it started (time.monotonic)
        self._waiting: list[TrainingJob] = []

    def join(self, job: TrainingJob) -> None:
        with self._cond:
            if len(self._waiting) >= MAX_WAITING and len(self._running) >= max_trainings():
                raise UserError(
                    "train.queue_full",
                    "{waiting} training runs are already waiting for the {slots} that train at once (each may "
                    "take up to {limit:g} minutes); try again later.",
                    waiting=len(self._waiting),
                    slots=max_trainings(),
                    limit=time_limit_seconds() / 60,
                )
            if not self._waiting and len(self._running) < max_trainings():
                self._running[job] = time.monotonic()  # a free slot: it trains at once
            else:
                self._waiting.append(job)

    def wait_turn(self, job: TrainingJob) -> bool:
        with self._cond:
            if job in self._running:
                return True
            if job not in self._waiting:
                self._waiting.append(job)
            while not job.stopped:
                if self._waiting[0] is job and len(self._running) < max_trainings():
                    self._waiting.pop(0)
                    self._running[job] = time.monotonic()
                    self._cond.notify_all()
                    return True
                self._cond.wait(0.5)
            self._waiting.remove(job)
            self._cond.notify_all()
            return False

    def leave(self, job: TrainingJob) -> None:
        with self._cond:
            self._running.pop(job, None)
            if job in self._waiting:
                self._waiting.remove(job)
            self._cond.notify_all()

    def position(self, job: TrainingJob) -> int:
        """0 while the job trains (or has finished), else its place among the waiting (1 = next)."""
        with self._cond:
            return self._waiting.index(job) + 1 if job in self._waiting else 0

    def running(self) -> int:
        with self._cond:
            return len(self._running)

    def wait_bound(self, job: TrainingJob) -> float:
        """Seconds the job can still wait at most: slots free up as the runs in them reach the
        time limit, and every run ahead of it then takes at most the limit too."""
        limit, now = time_limit_seconds(), time.monotonic()
        with self._cond:
            if job not in self._waiting:
                return 0.0
            free_at = sorted(max(0.0, started + limit - now) for started in self._running.values())
            free_at += [0.0] * (max_trainings() - len(free_at))
            for _ in range(self._waiting.index(job)):  # each run ahead takes the next free slot
                free_at = sorted(free_at[1:] + [free_at[0] + limit])
            return free_at[0]


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
        watch_induction: bool = False,
    ):
        tcfg = training_config(cfg, steps, lr, batch_size=batch_size, block_size=block_size, seed=seed)
        if watch_induction:  # the "watch an induction head form" run: its own schedule, data mix and loss
            tcfg = induction_run.train_config(tcfg.steps, tcfg.lr, tcfg.batch_size, seed)
        self.watch_induction = watch_induction
        block = tcfg.block_size
        self.expected_seconds = check_training_time(cfg, tcfg)  # refused before anything is allocated
        need = check_training_memory(cfg, tcfg, BUDGET.total)  # refused before anything is allocated
        what = f"training a {cfg.n_layers}-layer d{cfg.emb_dim} model"
        with BUDGET.reserve(need, what, "training"):  # ... also if other holders leave too little now
            self.corpus = prepare_corpus(text, block, name=corpus_name)
            self.unigram = unigram_loss(self.corpus.train_ids, self.corpus.val_ids, cfg.vocab_size)
            self.cfg, self.tcfg = cfg, tcfg
            extras = induction_run.trainer_extras(self.corpus, tcfg, cfg) if watch_induction else {}
            model = build_model(cfg, seed=seed)
            self.trainer = Trainer(model, self.corpus.train_ids, self.corpus.val_ids, tcfg, **extras)
            # every run's heads, on a small fixed probe: the induction run often, any other ~40 times
            every = induction_run.WATCH_EVERY if watch_induction else max(1, tcfg.steps // 40)
            self.watch = HeadWatch(model, probe_batch(self.corpus.train_ids), every)
            # model, gradients, AdamW state and activations: counted until the job is gone
            BUDGET.register(self, need, what, "training")
        self.id = hashlib.sha256(os.urandom(16)).hexdigest()[:16]
        self.train_points: list[tuple[int, float]] = []
        self.val_points: list[tuple[int, float]] = []
        # (step, token ids written): before training, at every evaluation, and where the run ended
        self.sample_prompt = sample_prompt_ids(self.corpus)
        self.samples: list[tuple[int, list[int]]] = []
        self.last_event = None
        self.error: str | None = None
        self.timed_out = False  # stopped at the time limit
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"train-{self.id}", daemon=True)

    def start(self) -> TrainingJob:
        """Take a place in the queue (refused when it is full) and train when a slot is free."""
        QUEUE.join(self)
        JOBS[self.id] = self
        self._thread.start()
        return self

    def _run(self) -> None:
        def on_event(ev):
            if ev.kind == "step" and ev.loss is not None:
                self.train_points.append((ev.step, ev.loss))
            elif ev.kind == "eval" and ev.val_loss is not None:
                self.val_points.append((ev.step, ev.val_loss))
            if ev.kind == "eval" or (ev.kind == "done" and (not self.samples or self.samples[-1][0] != ev.step)):
                self.samples.append((ev.step, write_sample(self.trainer.model, self.sample_prompt)))
            self.watch(ev)
            self.last_event = ev

        def should_stop() -> bool:
            if time.monotonic() - started > limit:
                self.timed_out = True
            return self.timed_out or self._stop.is_set()

        as_background_work()  # generation first: lower priority, one thread fewer (playground.runtime.threads)
        try:
            if not QUEUE.wait_turn(self):
                return  # stopped while it waited: nothing was trained
            started, limit = time.monotonic(), time_limit_seconds()
            self.trainer.run(callback=on_event, should_stop=should_stop)
        except Exception as e:  # reported to the user by the polling handler
            self.error = f"{type(e).__name__}: {e}"
        finally:
            QUEUE.leave(self)
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
QUEUE = TrainingQueue()
