"""The bundled model's training loss over the tied output head: chunked, and over a sampled vocabulary.

Both exist for speed on a CPU (each class says why) and compute the loss the plain
F.cross_entropy(h @ W.T, y) would, up to float rounding (the sampled softmax: its importance-weighted
estimate); evaluation always uses the whole vocabulary.
"""

from __future__ import annotations

import math

import bundled_metrics as bm
import torch
from bundled_batches import IGNORE


class ChunkedHeadLoss(torch.autograd.Function):
    """Mean cross-entropy of ``h @ W.T`` (the tied output head) against ``y``, computed ``CHUNK`` rows
    at a time and recomputed in the backward pass, so the (rows x 50257) logits are never held whole.

    Same value and gradients as F.cross_entropy(h @ W.T, y, ignore_index=-100) (up to float
    rounding; with ``bf16`` the two head products run in bfloat16 with float32 accumulation). Why:
    a batch of 8 x 256 tokens has 411 MB of float32 logits; allocating that (and its softmax and
    gradient) every step made the kernel fault in fresh pages for ~45% of the step time. Chunks of
    128 rows (26 MB) stay under glibc's mmap threshold and are reused. Costs one extra head product.
    """

    CHUNK = 128

    @staticmethod
    def forward(ctx, h, W, y, bf16: bool):
        Wc = W.bfloat16() if bf16 else W
        valid = y != IGNORE
        n = int(valid.sum())
        acc = torch.float64 if h.dtype == torch.float64 else torch.float32  # float64 only in the test
        lse = torch.empty(h.size(0), dtype=acc)
        total = torch.zeros((), dtype=torch.float64)
        for i in range(0, h.size(0), ChunkedHeadLoss.CHUNK):
            hc = h[i : i + ChunkedHeadLoss.CHUNK]
            logits = (hc.to(Wc.dtype) @ Wc.t()).to(acc)
            lse[i : i + len(hc)] = torch.logsumexp(logits, dim=-1)
            yc, vc = y[i : i + len(hc)], valid[i : i + len(hc)]
            picked = logits.gather(1, yc.clamp(min=0)[:, None])[:, 0]
            total += ((lse[i : i + len(hc)] - picked) * vc).sum().double()
        ctx.save_for_backward(h, W, y, lse)
        ctx.bf16, ctx.n = bf16, n
        return (total / max(n, 1)).float()

    @staticmethod
    def backward(ctx, g):
        h, W, y, lse = ctx.saved_tensors
        Wc = W.bfloat16() if ctx.bf16 else W
        grad_h = torch.empty_like(h)
        acc = lse.dtype
        grad_W = torch.zeros_like(W, dtype=acc)
        scale = g.to(acc) / max(ctx.n, 1)
        for i in range(0, h.size(0), ChunkedHeadLoss.CHUNK):
            hc = h[i : i + ChunkedHeadLoss.CHUNK]
            yc = y[i : i + len(hc)]
            logits = (hc.to(Wc.dtype) @ Wc.t()).to(acc)
            p = torch.exp_(logits.sub_(lse[i : i + len(hc), None]))  # softmax, in place
            rows = torch.arange(len(hc))
            valid = yc != IGNORE
            p[rows[valid], yc[valid]] -= 1.0
            p[~valid] = 0.0
            p.mul_(scale)
            pc = p.to(Wc.dtype)
            grad_h[i : i + len(hc)] = (pc @ Wc).to(h.dtype)
            if ctx.bf16:
                grad_W.add_((pc.t() @ hc.to(Wc.dtype)).to(acc))
            else:
                grad_W.addmm_(p.t(), hc)
        return grad_h, grad_W.to(W.dtype), None, None


class HeadVocab:
    """The training softmax over a subset of the vocabulary (a sampled softmax): the tokens the
    training texts contain, always, plus ``UNSEEN_SAMPLE`` of the others drawn afresh each step,
    whose logits are raised by log(unseen / sample) so they stand for all the others (the
    importance-weighted estimate of the full partition function).

    Why: the tied 50257-wide output product is ~80% of a step's arithmetic, while Tiny Shakespeare
    (and every synthetic row, drawn from its frequent tokens) uses about a quarter of the
    vocabulary. Without the sampled others, nothing would keep the model from giving the tokens it
    never sees as much probability as the ones it does (a softmax is shift-invariant): the full
    held-out loss was 1.2 nats above the subset's at step 200. Evaluation always uses all 50257.
    """

    UNSEEN_SAMPLE = 2048

    def __init__(self, *texts: torch.Tensor):
        self.ids = torch.unique(torch.cat([*texts, torch.tensor([bm.EOT])]))
        self.row = torch.full((50257,), IGNORE, dtype=torch.long)
        self.row[self.ids] = torch.arange(len(self.ids))
        self.unseen = torch.nonzero(self.row == IGNORE)[:, 0]

    def targets(self, y: torch.Tensor) -> torch.Tensor:
        return torch.where(y == IGNORE, y, self.row[y.clamp(min=0)])

    def head(self, W: torch.Tensor, h: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(hidden states with a constant 1 appended, the subset's rows with the logit offset as
        their last column): ``h1 @ W1.T`` are the subset's logits, offsets included."""
        k = min(self.UNSEEN_SAMPLE, len(self.unseen))
        sample = self.unseen[torch.randperm(len(self.unseen), generator=gen)[:k]]
        rows = W[torch.cat([self.ids, sample])]
        offset = torch.zeros(len(rows), 1, dtype=W.dtype)
        offset[len(self.ids) :] = math.log(len(self.unseen) / k)
        ones = torch.ones(*h.shape[:-1], 1, dtype=h.dtype)
        return torch.cat([h, ones], dim=-1), torch.cat([rows, offset], dim=1)
