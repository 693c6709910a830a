"""Held-out loss of a model, and the two baselines it must beat (random init, unigram).

Losses of a model on held-out text, and the two baselines a trained model must beat: the same
config at random initialisation, and the unigram frequencies of the training tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from playground.engine.config import GPT2_VOCAB_SIZE, GPTConfig
from playground.engine.model import GPTModel
from playground.runtime.devices import autocast, default_device
from playground.training import chunked_loss
from playground.training.corpus import CorpusError


def evaluation_starts(n_tokens: int, block_size: int, n_windows: int | None) -> torch.Tensor:
    """Window starts for evaluation, fixed for a given split: ``n_windows`` evenly spaced across it,
    or (None) every non-overlapping window."""
    last = n_tokens - block_size - 1  # a window needs block_size inputs + 1 more target
    if last < 0:
        raise CorpusError(
            "corpus.too_few_tokens",
            "{n_tokens} tokens cannot fill one window of {block_size} + 1.",
            n_tokens=n_tokens,
            block_size=block_size,
        )
    if n_windows is None:
        return torch.arange(0, last + 1, block_size)
    return torch.linspace(0, last, n_windows).round().long()


@torch.no_grad()
def evaluate_loss(
    model: GPTModel,
    ids,
    block_size: int | None = None,
    n_windows: int | None = 64,
    batch_size: int = 8,
    dtype: str = "float32",
) -> float:
    """Mean next-token cross-entropy (nats) of ``model`` over fixed windows of ``ids``."""
    ids = torch.as_tensor(ids, dtype=torch.long).flatten()
    block_size = block_size or model.cfg.context_length
    starts = evaluation_starts(len(ids), block_size, n_windows)
    total, count = loss_sums(model, ids, starts, block_size, batch_size, dtype)
    return total / count


@torch.no_grad()
def loss_sums(
    model: GPTModel, ids: torch.Tensor, starts: torch.Tensor, block_size: int, batch_size: int, dtype: str
) -> tuple[float, int]:
    """Summed cross-entropy and number of predicted tokens over the windows starting at ``starts``."""
    offsets = torch.arange(block_size + 1)
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for chunk in starts.split(batch_size):
            window = ids[(chunk[:, None] + offsets).to(ids.device)].to(model.device)  # (b, block_size + 1)
            if chunked_loss.takes(model, dtype):  # the head inside the loss, a chunk of rows at a time
                hidden = model(window[:, :-1], return_hidden=True)  # (b, block_size, emb_dim)
                targets = window[:, 1:].flatten()
                loss = chunked_loss.linear_cross_entropy(
                    hidden.flatten(0, 1), model.out_head.weight, targets, reduction="sum"
                )
            else:
                with autocast(model.device, dtype):
                    logits = model(window[:, :-1])  # (b, block_size, vocab)
                loss = F.cross_entropy(logits.flatten(0, 1).float(), window[:, 1:].flatten(), reduction="sum")
            total += float(loss)
            count += window[:, 1:].numel()
    finally:
        model.train(was_training)
    return total, count


def random_init_loss(
    cfg: GPTConfig,
    val_ids,
    *,
    seed: int = 0,
    block_size: int | None = None,
    n_windows: int | None = 64,
    batch_size: int = 8,
) -> float:
    """Validation loss of an untrained model of the same config (about ln(vocab_size) = 10.8 nats)."""
    model = GPTModel(cfg, generator=torch.Generator().manual_seed(seed)).to(default_device())
    return evaluate_loss(model, val_ids, block_size, n_windows, batch_size)


def unigram_loss(train_ids, val_ids, vocab_size: int = GPT2_VOCAB_SIZE) -> float:
    """Cross-entropy (nats) on the held-out tokens of the add-one smoothed token frequencies of the
    training tokens: what a model that ignores all context can reach."""
    train_ids = torch.as_tensor(train_ids, dtype=torch.long).flatten()
    val_ids = torch.as_tensor(val_ids, dtype=torch.long).flatten()
    counts = torch.bincount(train_ids, minlength=vocab_size).double() + 1.0
    log_probs = counts.log() - counts.sum().log()
    return float(-log_probs[val_ids].mean())


OVERFIT_MARGIN = 0.05  # nats/token above the best validation loss that count as rising, not noise


def overfitting(train_points, val_points, margin: float = OVERFIT_MARGIN) -> bool:
    """True when the validation loss has risen ``margin`` above its best while the training loss kept
    falling: ``train_points`` and ``val_points`` are (step, loss) pairs as a run records them."""
    if len(val_points) < 3 or len(train_points) < 2:
        return False
    best_step, best = min(val_points, key=lambda p: p[1])
    train_then = [loss for step, loss in train_points if step <= best_step][-5:]
    train_now = [loss for step, loss in train_points if step > best_step][-5:]
    if not train_then or not train_now:
        return False
    falling = sum(train_now) / len(train_now) < sum(train_then) / len(train_then)
    return val_points[-1][1] > best + margin and falling
