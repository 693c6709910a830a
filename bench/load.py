"""Decode speed while a training job runs in the same process (as the app's Train tab does).

Three conditions, interleaved round by round: the generation alone; with a training thread as it
was (same priority, every intra-op thread); with the training thread as the app now starts it
(``playground.runtime.threads.as_background_work``: lower priority, one thread fewer). Training's own
steps/s are recorded too -- a fair share, not a stopped job.
"""

from __future__ import annotations

import threading
import time

import torch

from .decode import run_ours
from .timing import decode_rate, median

CONDITIONS = ("alone", "with training (before)", "with training (after: background priority)")


class TrainingThread:
    """A Trainer on a tiny GPT (4 layers, d128, 8 x 128-token windows) looping until stopped."""

    def __init__(self, background: bool):
        self.background = background
        self.steps, self.stop, self.settings, self.ready = 0, threading.Event(), None, threading.Event()
        self.thread = threading.Thread(target=self._run, name="bench-train", daemon=True)

    def _run(self):
        from playground.engine.presets import PRESETS
        from playground.runtime.threads import as_background_work
        from playground.training.train_config import TrainConfig
        from playground.training.trainer import Trainer, build_model

        if self.background:
            self.settings = as_background_work()
        cfg = PRESETS["tiny"]
        ids = torch.randint(0, cfg.vocab_size, (20_000,), generator=torch.Generator().manual_seed(0))
        trainer = Trainer(
            build_model(cfg, seed=0),
            ids[:18_000],
            ids[18_000:],
            TrainConfig(steps=10**6, batch_size=8, block_size=128, eval_interval=10**6, warmup_steps=1),
        )
        self.t0 = time.perf_counter()
        while not self.stop.is_set():
            trainer.step()
            self.steps += 1
            if self.steps == 2:  # past the model build and the first (slowest) step
                self.ready.set()
        self.seconds = time.perf_counter() - self.t0

    def __enter__(self):
        self.thread.start()
        self.ready.wait(timeout=120)
        self.steps_at_start = self.steps
        self.t_start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.steps_per_s = (self.steps - self.steps_at_start) / (time.perf_counter() - self.t_start)
        self.stop.set()
        self.thread.join()


def measure(model, prompt: list[int], n_new: int, reps: int, log=print) -> dict:
    rates = {c: [] for c in CONDITIONS}
    train_rates = {c: [] for c in CONDITIONS[1:]}
    settings = None
    run_ours(model, prompt, 4)  # warm-up
    for rep in range(reps):
        for cond in CONDITIONS:
            if cond == "alone":
                rates[cond].append(decode_rate(run_ours(model, prompt, n_new)[0]))
                continue
            with TrainingThread(background="after" in cond) as job:
                rates[cond].append(decode_rate(run_ours(model, prompt, n_new)[0]))
            train_rates[cond].append(job.steps_per_s)
            settings = job.settings or settings
        log(f"  load round {rep + 1}/{reps}: " + ", ".join(f"{c} {r[-1]:.1f}" for c, r in rates.items()))
    med = {c: median(r) for c, r in rates.items()}
    return {
        "decode_tok_s": med,
        "decode_rates": rates,
        "training_steps_per_s": {c: median(r) for c, r in train_rates.items()},
        "share_of_alone": {c: med[c] / med["alone"] for c in CONDITIONS[1:]},
        "background_settings": settings,
        "threads": torch.get_num_threads(),
    }
