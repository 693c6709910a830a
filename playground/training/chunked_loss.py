"""The training loss with the output head inside it, its logits made and used a chunk of rows at a time.

Cross-entropy of the targets under ``hidden @ weight.T``. A small model's training step is mostly its output
head: a 2-layer d64 model's batch of 8 × 128 tokens has 8 × 128 × 50,257 logits (206 MB), and
``F.cross_entropy`` over them writes a log-softmax of the same size, then a gradient and its log-softmax
backward, each a fresh 206 MB that the step streams through memory (and, in the server, faults in again:
``map_large_blocks``). Here the logits of ``CHUNK_ROWS`` rows at a time go into one buffer that stays in
cache: their log-sum-exp gives the loss, the same buffer becomes the softmax minus the one-hot targets, and
its products with the head and with the rows are the two gradients, made in the forward (the loss is the
step's last operation) and scaled in the backward. The numbers are the plain loss's within float32 rounding
(tests/unit/test_chunked_loss.py holds the loss and both gradients to ``F.cross_entropy``'s).

``Trainer`` and ``losses.loss_sums`` (the validation loss) take this path for a float32 model on the CPU
without autocast (``takes``); a bfloat16 step, a GPU and a sampled softmax keep ``F.cross_entropy`` over the
model's logits.
"""

from __future__ import annotations

import torch

CHUNK_ROWS = 256  # rows whose logits share the buffer (256 × 50,257 float32: 51 MB, reused every chunk)


def _loss_and_grads(hidden, weight, targets, chunk: int, want_hidden: bool, want_weight: bool):
    """(summed loss, the mean loss's gradient for ``hidden`` or None, for ``weight`` or None), a chunk of rows
    at a time."""
    n, vocab = hidden.size(0), weight.size(0)
    grad_hidden = torch.empty_like(hidden) if want_hidden else None
    grad_weight = torch.zeros_like(weight) if want_weight else None
    buffer = hidden.new_empty(min(chunk, n), vocab)
    total = hidden.new_zeros((), dtype=torch.float64)
    for start in range(0, n, chunk):
        rows, tgt = hidden[start : start + chunk], targets[start : start + chunk]
        logits = torch.mm(rows, weight.t(), out=buffer[: rows.size(0)])  # (c, V)
        picked = logits.gather(1, tgt[:, None])  # (c, 1)
        # the softmax in the buffer itself, each pass in place (torch.logsumexp would write a copy)
        top = logits.amax(dim=1, keepdim=True)
        probs = logits.sub_(top).exp_()
        sums = probs.sum(dim=1, keepdim=True)
        total += (top + sums.log() - picked).sum(dtype=torch.float64)  # each row's log-sum-exp minus its target's
        if not (want_hidden or want_weight):
            continue
        # d(mean loss)/d(logits) = (softmax - one_hot) / n
        probs.div_(sums)
        probs[torch.arange(rows.size(0), device=probs.device), tgt] -= 1.0
        if grad_hidden is not None:
            torch.mm(probs, weight, out=grad_hidden[start : start + chunk])
        if grad_weight is not None:
            grad_weight.addmm_(probs.t(), rows)
    for g in (grad_hidden, grad_weight):
        if g is not None:
            g.div_(n)
    return total, grad_hidden, grad_weight  # the summed loss, float64


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int):
        total, grad_hidden, grad_weight = _loss_and_grads(hidden, weight, targets, chunk, *ctx.needs_input_grad[:2])
        ctx.grads = (grad_hidden, grad_weight)  # made here, scaled by the loss's own gradient in backward
        return (total / max(1, hidden.size(0))).to(hidden.dtype)

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        if ctx.grads is None:
            raise RuntimeError("linear_cross_entropy's gradients were taken already: it takes one backward")
        grad_hidden, grad_weight = ctx.grads
        ctx.grads = None  # scaled in place below: they serve one backward
        return (
            None if grad_hidden is None else grad_hidden.mul_(grad_loss),
            None if grad_weight is None else grad_weight.mul_(grad_loss),
            None,
            None,
        )


def takes(model, dtype: str) -> bool:
    """Whether a loss of ``model`` computed in ``dtype`` ("float32", "bfloat16": autocast) takes this path: float32
    on the CPU, a float32 head weight without bias (not an int8 head). The rest keeps ``F.cross_entropy`` over
    the model's logits."""
    head = getattr(model.out_head, "weight", None)
    return (
        dtype == "float32"
        and model.device.type == "cpu"
        and model.dtype == torch.float32
        and isinstance(head, torch.Tensor)
        and head.dtype == torch.float32
        and getattr(model.out_head, "bias", None) is None
    )


def linear_cross_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int = CHUNK_ROWS, reduction: str = "mean"
) -> torch.Tensor:
    """Cross-entropy of ``targets`` (n,) under the logits ``hidden`` (n, d) @ ``weight`` (V, d).T, as
    ``F.cross_entropy(hidden @ weight.T, targets, reduction=reduction)`` gives it ("mean" or "sum"; float32
    tensors, every target a token id). With gradients on, the mean only: the training step's loss."""
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.size(1) != weight.size(1):
        raise ValueError(f"hidden {tuple(hidden.shape)} and weight {tuple(weight.shape)} do not multiply")
    if targets.shape != (hidden.size(0),):
        raise ValueError(f"{hidden.size(0)} rows but targets of shape {tuple(targets.shape)}")
    if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= weight.size(0)):
        raise ValueError(f"a target outside the {weight.size(0)} ids")
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    hidden = hidden.contiguous()
    if not torch.is_grad_enabled():  # an evaluation: the loss alone
        total = _loss_and_grads(hidden, weight, targets, chunk, False, False)[0]
        return (total if reduction == "sum" else total / max(1, hidden.size(0))).to(hidden.dtype)
    if reduction != "mean":
        raise ValueError("with gradients on, linear_cross_entropy gives the mean loss only")
    return _LinearCrossEntropy.apply(hidden, weight, targets, chunk)
