"""The default "watch an induction head form" run: a tiny model, a text mixed with synthetic repeats.

What it is, and why each choice (docs/benchmarks.md has the measured run):
  * the model: the ``nano`` preset, 2 layers × 4 heads, d64. Two layers are the fewest an induction
    circuit needs: a previous-token head in one layer, and a later head whose keys carry "the token
    before me" and match the query's own token;
  * the data: the bundled fables and rhymes (3,678 tokens, ~1,100 distinct), with ``MIX.share`` of the
    rows synthetic repeats of a random period (repeats.py): text alone repeats too little for the
    circuit to pay off within minutes;
  * the loss: a softmax over the ~1,100 tokens the data holds (sampled_softmax.py, with no others
    drawn): the full 50,257-way head is most of a step of a model this small. The tokens the data
    never holds are then never pushed down: their logits stay near 0 while the known ones grow, so
    the held-out loss (always the full softmax) falls later than the training loss, and the samples
    (top-k 40) come from the known tokens. Drawing 1,024 others each step, weighted, kept the full
    softmax's shape but slowed the circuit past the run's budget;
  * the heads are measured on the fixed probe (head_watch.py) every ``WATCH_EVERY`` steps.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import cache

import torch

from playground import assets
from playground.engine.presets import PRESETS
from playground.training.estimate import evaluations
from playground.training.head_watch import HeadWatch, probe_batch
from playground.training.repeats import END_OF_TEXT, RepeatBatches, RepeatMix
from playground.training.sampled_softmax import SampledSoftmax
from playground.training.train_config import TrainConfig
from playground.training.trainer import Trainer, build_model

MODEL = PRESETS["nano"]
CORPUS = "aesop"
MIX = RepeatMix(share=0.8, pool=500, periods=(8, 24))
BLOCK = 64
STEPS = 700
LR = 1e-3
BATCH = 32
SEED = 1337
OTHERS = 0  # drawn others slowed the circuit (gap -0.03 against -0.56 at step 300, docs/benchmarks.md)
WATCH_EVERY = 10
# The run recorded once (``record``, by tools/heads_timeline.py): what the lesson on heads forming reads.
TIMELINE = assets.path("timelines", "induction_run.json")


def train_config(steps: int = STEPS, lr: float = LR, batch_size: int = BATCH, seed: int = SEED) -> TrainConfig:
    """The run's schedule: a constant learning rate after a short warm-up, no weight decay and Adam's
    β₂ 0.999. With the trainer's usual cosine decay, decay and β₂ 0.95 (and at 3e-3) the same model
    copied the repeats another way, a bag of the tokens seen, and no induction head formed in 1,000
    steps (docs/benchmarks.md). Evaluations take the full softmax, a step's cost several times over:
    one batch of held-out windows, ten times a run, is enough for the curve."""
    return TrainConfig(
        steps=steps,
        lr=lr,
        min_lr=lr,
        warmup_steps=10,
        weight_decay=0.0,
        beta2=0.999,
        batch_size=batch_size,
        block_size=BLOCK,
        eval_interval=max(1, steps // 10),
        eval_batches=1,
        seed=seed,
    )


def trainer_extras(corpus, tcfg: TrainConfig, cfg=MODEL) -> dict:
    """The ``batches`` and ``softmax`` a Trainer of this run takes, for ``corpus`` (a prepared Corpus)."""
    batches = RepeatBatches(corpus.train_ids, tcfg.block_size or BLOCK, MIX)
    known = [*corpus.train_ids.tolist(), *batches.pool.tolist(), END_OF_TEXT]  # every target the data can hold
    return {"batches": batches, "softmax": SampledSoftmax(known, cfg.vocab_size, OTHERS)}


_TIMINGS: dict[tuple, dict] = {}


def time_run(corpus, tcfg: TrainConfig, cfg=MODEL, n_steps: int = 3) -> dict:
    """Seconds of this run's parts, timed now on a fresh model (cached per batch shape and thread
    count): its first step, a later step, one evaluation and one head log; and the whole run's
    estimate from them."""
    key = (cfg, tcfg.batch_size, tcfg.block_size, tcfg.steps, torch.get_num_threads())
    if key not in _TIMINGS:
        trainer = Trainer(
            build_model(cfg, seed=0), corpus.train_ids, corpus.val_ids, tcfg, **trainer_extras(corpus, tcfg, cfg)
        )
        watch = HeadWatch(trainer.model, probe_batch(corpus.train_ids), WATCH_EVERY)
        t0 = time.perf_counter()
        trainer.step()
        t1 = time.perf_counter()
        for _ in range(n_steps):
            trainer.step()
        t2 = time.perf_counter()
        trainer.evaluate()
        t3 = time.perf_counter()
        watch.observe(0)
        t4 = time.perf_counter()
        _TIMINGS[key] = {"first_step_s": t1 - t0, "step_s": (t2 - t1) / n_steps, "eval_s": t3 - t2, "log_s": t4 - t3}
    t = _TIMINGS[key]
    evals = evaluations(tcfg.steps, tcfg.eval_interval)
    logs = 1 + tcfg.steps // WATCH_EVERY + (1 if tcfg.steps % WATCH_EVERY else 0)
    seconds = t["first_step_s"] + (tcfg.steps - 1) * t["step_s"] + evals * t["eval_s"] + logs * t["log_s"]
    return {**t, "seconds": seconds, "steps": tcfg.steps, "evaluations": evals, "logs": logs}


@dataclass
class Trained:
    """A run of ``train``: its trainer (and model), its head watch, and the losses it reported."""

    trainer: Trainer
    watch: HeadWatch
    losses: list[tuple[int, float]]  # (step, training loss)
    val: list[tuple[int, float]]  # (step, held-out loss)
    threads: int


def train(steps: int = STEPS, threads: int = 1, on_log=None) -> Trained:
    """The run trained with its fixed seed, as the Train tab trains it (``threads`` torch threads on the
    calling thread, restored after), its heads logged every ``WATCH_EVERY`` steps; ``on_log(record,
    trainer)`` is called at each log (tests save checkpoints there)."""
    from playground.training.corpus import load_bundled_corpus, prepare_corpus

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        tcfg = train_config(steps)
        corpus = prepare_corpus(load_bundled_corpus(CORPUS), tcfg.block_size or BLOCK, name=CORPUS)
        model = build_model(MODEL, tcfg.seed, device="cpu")
        trainer = Trainer(model, corpus.train_ids, corpus.val_ids, tcfg, **trainer_extras(corpus, tcfg))
        run = Trained(trainer, HeadWatch(model, probe_batch(corpus.train_ids), WATCH_EVERY), [], [], threads)

        def on_event(event):
            if event.kind == "step" and event.loss is not None:
                run.losses.append((event.step, event.loss))
            elif event.kind == "eval" and event.val_loss is not None:
                run.val.append((event.step, round(event.val_loss, 4)))
            logged = run.watch(event)
            if logged is not None and on_log is not None:
                on_log(logged, trainer)

        trainer.run(on_event)
    finally:
        torch.set_num_threads(before)
    return run


def summary(run: Trained) -> dict:
    """What ``record`` keeps of a run: the head timeline (``head_watch.timeline``), the training loss
    averaged over each log interval, the held-out losses and what the run was."""
    tcfg, watch = run.trainer.tcfg, run.watch
    # the training loss of each log interval's steps, at the log that ends it
    logged = [r.step for r in watch.records]
    train_loss = [
        round(sum(x for s, x in run.losses if a < s <= b) / max(1, sum(1 for s, _ in run.losses if a < s <= b)), 4)
        for a, b in zip(logged, logged[1:])
    ]
    return {
        "run": {
            "model": "nano",
            "corpus": CORPUS,
            "steps": tcfg.steps,
            "seed": tcfg.seed,
            "batch_size": tcfg.batch_size,
            "block_size": tcfg.block_size,
            "lr": tcfg.lr,
            "repeat_share": MIX.share,
            "every": WATCH_EVERY,
            "threads": run.threads,
            "torch": torch.__version__,
            "seconds": round(run.trainer.elapsed_s, 1),
        },
        "timeline": watch.timeline(),
        "train_loss": {"steps": logged[1:], "loss": train_loss},
        "val_loss": run.val,
    }


def record(steps: int = STEPS, threads: int = 1) -> dict:
    """The run trained once with its fixed seed (``train``) and what is kept of it (``summary``).
    ``tools/heads_timeline.py`` writes it for the lesson on heads forming, which cannot train 700 steps
    while a page waits."""
    return summary(train(steps, threads))


@cache
def recorded() -> dict:
    """The recorded run (``TIMELINE``), as ``record`` returned it."""
    return json.loads(TIMELINE.read_text(encoding="utf-8"))
