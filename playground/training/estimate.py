"""How long a training run will take here, from a few real steps timed on this machine.

How long will a training run take here? Measured, not guessed: a few real steps of the chosen
config on this machine, then arithmetic.

A step's cost depends on the config, the batch and the machine (and on what else the machine is
doing), so the estimate times real ``Trainer.step()`` calls of a fresh model on random tokens: one
step first (allocations and kernel choices make it slower), then a few more, then one evaluation
(the run evaluates every ``eval_interval`` steps). Measurements are cached per config and batch
shape for the life of the process.

Before anything is timed, ``least_seconds`` bounds a run from below by arithmetic: its floating-point
work (6 × parameters per trained token, 2 × per evaluated one) at the best rate this machine's matrix
multiply reached in this process. A run over a time limit by that bound is refused without spending
minutes to time one step.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import torch

from playground.engine.config import GPTConfig
from playground.engine.sizes import count_parameters_analytic
from playground.runtime.memory import BUDGET
from playground.training.train_config import check_training_memory
from playground.training.trainer import Trainer, build_model

MEASURED_STEPS = 2
_LOCK = threading.Lock()  # one measurement at a time: two at once would each time the other's load


@dataclass(frozen=True)
class StepTiming:
    """Seconds measured for one config and batch shape on this machine."""

    first_step_s: float  # the first step (one-time costs included)
    step_s: float  # a later step, averaged over ``n_steps``
    eval_s: float  # one validation pass (eval_batches × batch_size windows)
    n_steps: int


def evaluations(steps: int, eval_interval: int) -> int:
    """How many validation passes ``Trainer.run`` makes: one before the first step, one every
    ``eval_interval`` steps, and one at the end unless that was one of them."""
    return 1 + steps // eval_interval + (1 if steps % eval_interval else 0)


def estimate_seconds(timing: StepTiming, steps: int, eval_interval: int) -> float:
    """The training loop's time for ``steps`` updates: the first step, the others at the measured
    rate, and every evaluation."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    return timing.first_step_s + (steps - 1) * timing.step_s + evaluations(steps, eval_interval) * timing.eval_s


def steps_for_seconds(timing: StepTiming, seconds: float, eval_interval_of=lambda steps: max(5, steps // 20)) -> int:
    """The most steps whose estimate fits in ``seconds`` (at least 1)."""
    lo, hi = 1, 100_000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_seconds(timing, mid, eval_interval_of(mid)) <= seconds:
            lo = mid
        else:
            hi = mid - 1
    return lo


def measure_step_time(
    cfg: GPTConfig, tcfg, *, timer=time.perf_counter, n_steps: int = MEASURED_STEPS, seed: int = 0
) -> StepTiming:
    """Time real training steps of ``cfg`` with ``tcfg``'s batch shape (the memory is reserved in
    the process budget first, as for a real run; refused with MemoryBudgetError if it does not fit).

    ``timer`` is injectable so tests can check the arithmetic with scripted times."""
    block = tcfg.block_size or cfg.context_length
    need = check_training_memory(cfg, tcfg, BUDGET.total)
    with BUDGET.reserve(need, f"timing a training step of a {cfg.n_layers}-layer d{cfg.emb_dim} model", "training"):
        gen = torch.Generator().manual_seed(seed)
        n_val = block * 2 + 2
        ids = torch.randint(cfg.vocab_size, (block * (tcfg.batch_size + 2) + n_val,), generator=gen)
        trainer = Trainer(build_model(cfg, seed=seed), ids[:-n_val], ids[-n_val:], tcfg)
        t0 = timer()
        trainer.step()
        t1 = timer()
        for _ in range(n_steps):
            trainer.step()
        t2 = timer()
        trainer.evaluate()
        t3 = timer()
        del trainer
    return StepTiming(first_step_s=t1 - t0, step_s=(t2 - t1) / n_steps, eval_s=t3 - t2, n_steps=n_steps)


def training_flops(cfg: GPTConfig, tcfg) -> tuple[float, float]:
    """Floating-point operations of one training step and of one evaluation: forward and backward
    cost 6 × parameters per token, a forward alone 2 × (the usual estimate; attention's T² terms add
    to it, so it stays a lower bound)."""
    n = count_parameters_analytic(cfg)
    tokens = tcfg.batch_size * (tcfg.block_size or cfg.context_length)
    return 6.0 * n * tokens, 2.0 * n * tokens * tcfg.eval_batches


_BEST_RATE = [0.0]


def best_flops_per_second(size: int = 768, repeats: int = 3) -> float:
    """The best float32 matrix-multiply rate this machine reached in this process, measured again at
    every call (0.1-0.4 s) and never lowered: what else runs slows a measurement, and a bound made
    from a slowed one would refuse runs that fit. Training steps reach less, so the bound made from
    it stays a lower bound."""
    with _LOCK:
        a = torch.randn(size, size)
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ a
            _BEST_RATE[0] = max(_BEST_RATE[0], 2.0 * size**3 / max(time.perf_counter() - t0, 1e-9))
        return _BEST_RATE[0]


def least_seconds(cfg: GPTConfig, tcfg, steps: int | None = None, *, rate: float | None = None) -> float:
    """A lower bound on the training loop's time for ``steps`` updates (default ``tcfg.steps``):
    its arithmetic at ``rate`` FLOP/s (default: the machine's best matrix-multiply rate)."""
    steps = tcfg.steps if steps is None else steps
    step, evaluation = training_flops(cfg, tcfg)
    work = steps * step + evaluations(steps, tcfg.eval_interval) * evaluation
    return work / (best_flops_per_second() if rate is None else rate)


_CACHE: dict[tuple, StepTiming] = {}


def _key(cfg: GPTConfig, tcfg) -> tuple:
    return (cfg, tcfg.batch_size, tcfg.block_size, tcfg.eval_batches, tcfg.dtype, torch.get_num_threads())


def cached_step_time(cfg: GPTConfig, tcfg, **kw) -> StepTiming:
    """``measure_step_time`` once per (config, batch shape, threads) in this process."""
    with _LOCK:
        if _key(cfg, tcfg) not in _CACHE:
            _CACHE[_key(cfg, tcfg)] = measure_step_time(cfg, tcfg, **kw)
        return _CACHE[_key(cfg, tcfg)]


def known_step_time(cfg: GPTConfig, tcfg) -> StepTiming | None:
    """The cached measurement, or None (never measures: for callers that must not wait)."""
    return _CACHE.get(_key(cfg, tcfg))


def format_duration(seconds: float, units: tuple[str, str, str] = ("h", "min", "s")) -> str:
    """'45 s', '3 min 20 s', '1 h 05 min' (rounded to what a reader plans with); ``units`` names
    hours, minutes and seconds (an interface passes its language's)."""
    if not math.isfinite(seconds):
        return "–"
    h_, min_, s_ = units
    seconds = max(0.0, seconds)
    if seconds < 60:
        digits = 0 if seconds >= 10 else 1 if seconds >= 1 else 2
        return f"{seconds:.{digits}f} {s_}"
    if seconds < 3600:
        m, s = divmod(int(round(seconds)), 60)
        return f"{m} {min_} {s:02d} {s_}"
    h, m = divmod(int(round(seconds / 60)), 60)
    return f"{h} {h_} {m:02d} {min_}"
