"""A training loss over part of the vocabulary: the tokens the training data holds, plus a few others.

A tiny model's step is mostly its output head: a 2-layer d64 model on 32 × 64 tokens spends ~75% of a
CPU step on the 50,257-way product and softmax. A run whose targets all come from a small set of
tokens (a short text and synthetic repeats drawn from its frequent tokens) can take the softmax over
that set and lose nothing in the gradient of the targets; the tokens outside it would then never be
pushed down, and the full model would put their mass back at generation. So each step also draws
``n_others`` of them and raises their logits by log(outside / drawn): the drawn few stand for all
the others in the normaliser (importance sampling, Jean et al. 2015), and every one of them is
pushed down now and then. Evaluation always takes the full softmax.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

IGNORE = -100  # a target the loss skips (F.cross_entropy's ignore_index)


class SampledSoftmax:
    """The rows of the output head a step computes, and the loss over them.

    ``known``: every token id a target can be (the training data's tokens); ``vocab_size``: the
    model's; ``n_others``: tokens outside ``known`` drawn afresh each step."""

    def __init__(self, known, vocab_size: int, n_others: int):
        self.known = torch.unique(torch.as_tensor(known, dtype=torch.long))
        outside = torch.ones(vocab_size, dtype=torch.bool)
        outside[self.known] = False
        self.outside = outside.nonzero().flatten()
        self.n_others = min(n_others, len(self.outside))
        # log(outside / drawn): each drawn token stands for that many in the normaliser
        self.log_weight = math.log(len(self.outside) / self.n_others) if self.n_others else 0.0
        self.index = torch.full((vocab_size,), -1, dtype=torch.long)  # token id -> column among ``known``
        self.index[self.known] = torch.arange(len(self.known))

    def rows(self, generator: torch.Generator) -> torch.Tensor:
        """The token ids whose logits a step computes: ``known`` first, then the drawn others."""
        drawn = self.outside[torch.randperm(len(self.outside), generator=generator)[: self.n_others]]
        return torch.cat([self.known, drawn])

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of ``targets`` (token ids, or IGNORE) against ``logits`` over ``rows()``."""
        logits = logits.flatten(0, -2).float()
        if self.n_others:
            correction = torch.zeros(logits.size(-1), device=logits.device)
            correction[len(self.known) :] = self.log_weight
            logits = logits + correction
        targets = targets.flatten()
        columns = torch.where(targets == IGNORE, IGNORE, self.index.to(targets.device)[targets.clamp(min=0)])
        if bool((columns < 0).logical_and(targets != IGNORE).any()):
            raise ValueError("a target token is outside the sampled softmax's known tokens")
        return F.cross_entropy(logits, columns, ignore_index=IGNORE)
