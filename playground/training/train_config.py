"""What a training run is asked to do: TrainConfig, its learning-rate schedule, the memory it needs."""

from __future__ import annotations

import math
from dataclasses import dataclass

from playground.engine.config import ConfigError, GPTConfig, SerializableConfig
from playground.engine.memory_check import default_memory_budget_bytes
from playground.engine.sizes import count_parameters_analytic
from playground.runtime.machine_memory import format_bytes
from playground.training.chunked_loss import CHUNK_ROWS

TRAIN_DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class TrainConfig(SerializableConfig):
    _kind = "training"
    steps: int = 500
    batch_size: int = 8
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 20
    weight_decay: float = 0.1
    # AdamW's second-moment decay: nanoGPT's / GPT-3's 0.95 by default; Adam's own 0.999 lets the tiny
    # induction-head run leave its plateau (measured: docs/benchmarks.md, "Watching heads form")
    beta2: float = 0.95
    grad_clip: float = 1.0  # max global gradient norm; 0 turns clipping off
    eval_interval: int = 50
    eval_batches: int = 4
    seed: int = 1337
    block_size: int | None = None  # tokens per training window; None = the model's context_length
    dtype: str = "float32"  # compute dtype; bfloat16 runs the forward under autocast, weights stay float32

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_interval", "eval_batches"):
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("warmup_steps", self.warmup_steps, minimum=0)
        _check_int("seed", self.seed, minimum=0)
        if self.block_size is not None:
            _check_int("block_size", self.block_size, minimum=1)
        for name in ("lr", "min_lr", "weight_decay", "grad_clip"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(
                    "train.not_finite", "{name} must be a finite number, got {value!r}.", name=name, value=value
                )
            if value < 0:
                raise ConfigError("train.negative", "{name} must not be negative, got {value}.", name=name, value=value)
        if self.lr == 0:
            raise ConfigError("train.lr_zero", "lr (the learning rate) must be positive; with 0 nothing is learned.")
        if self.lr > 1:
            raise ConfigError(
                "train.lr_too_large", "lr {lr} is far too large for AdamW (typical: 1e-4 to 3e-3).", lr=self.lr
            )
        if self.min_lr > self.lr:
            raise ConfigError(
                "train.min_lr", "min_lr ({min_lr}) must not exceed lr ({lr}).", min_lr=self.min_lr, lr=self.lr
            )
        if isinstance(self.beta2, bool) or not isinstance(self.beta2, (int, float)) or not 0 <= self.beta2 < 1:
            raise ConfigError("train.beta2", "beta2 must be in [0, 1), got {beta2!r}.", beta2=self.beta2)
        if self.dtype not in TRAIN_DTYPES:
            raise ConfigError(
                "train.dtype",
                "dtype must be one of {choices}, got {dtype!r}.",
                choices=", ".join(TRAIN_DTYPES),
                dtype=self.dtype,
            )


def _check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError("train.not_whole", "{name} must be a whole number, got {value!r}.", name=name, value=value)
    if value < minimum:
        raise ConfigError(
            "train.at_least", "{name} must be at least {minimum}, got {value}.", name=name, minimum=minimum, value=value
        )


def lr_at(step: int, tcfg: TrainConfig) -> float:
    """Learning rate of update ``step`` (0-based): linear warm-up to ``lr``, then half a cosine
    down to ``min_lr``, reached exactly at the last step and held after it."""
    if step < tcfg.warmup_steps:
        return tcfg.lr * (step + 1) / tcfg.warmup_steps
    decay_steps = tcfg.steps - 1 - tcfg.warmup_steps
    if decay_steps <= 0:  # no room left for a decay: the warm-up ended on (or after) the last step
        return tcfg.min_lr
    progress = min(1.0, (step - tcfg.warmup_steps) / decay_steps)
    return tcfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (tcfg.lr - tcfg.min_lr)


# ----------------------------------------------------------------------------------------------
# Memory: training holds weights, gradients and two AdamW moments, plus activations for backward


def estimate_training_memory_bytes(cfg: GPTConfig, tcfg: TrainConfig) -> int:
    params = count_parameters_analytic(cfg)
    B, T = tcfg.batch_size, tcfg.block_size or cfg.context_length
    state = 4 * params * 4  # weights, gradients, exp_avg, exp_avg_sq in float32
    # Saved activations per layer (~16 emb-sized tensors and the attention maps), then the output head's part.
    activations = cfg.n_layers * (16 * B * T * cfg.emb_dim + 2 * B * cfg.n_heads * T * T) * 4
    if tcfg.dtype == "float32":  # the loss makes the logits a chunk of rows at a time (chunked_loss)
        # the chunk's logits, and the head's gradient made in the loss beside the embedding's own
        head = (min(CHUNK_ROWS, B * T) * cfg.vocab_size + 2 * cfg.vocab_size * cfg.emb_dim) * 4
    else:  # the whole batch's logits, their log-softmax, its gradient and the logits' (float32)
        head = 4 * B * T * cfg.vocab_size * 4
    return state + activations + head


def check_training_memory(cfg: GPTConfig, tcfg: TrainConfig, budget_bytes: int | None = None) -> int:
    """ConfigError (with the estimate) if training this config would exceed the memory budget."""
    budget = default_memory_budget_bytes() if budget_bytes is None else budget_bytes
    estimate = estimate_training_memory_bytes(cfg, tcfg)
    if estimate > budget:
        raise ConfigError(
            "budget.training_over",
            "Training this model needs about {need} (weights, gradients, AdamW state and activations for a "
            "batch of {batch_size} × {block} tokens), more than the memory budget of {budget}. Use a smaller "
            "model, batch or context.",
            need=format_bytes(estimate),
            batch_size=tcfg.batch_size,
            block=tcfg.block_size or cfg.context_length,
            budget=format_bytes(budget),
        )
    return estimate
