"""Activation patching's prompt pair: its checks, its metric and the two reference runs every grid starts from.

The pair is a clean and a corrupted prompt of the same token length and two tokens, the answer and the wrong
one; the metric is their logit difference at the last position, normalised so 1 is the clean run's value and 0
the corrupted run's (``Runs.normalise``). ``patching`` and ``patching_paths`` patch between the two runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground.errors import UserError
from playground.inside.interventions import Cache, run_with_hooks
from playground.inside.view_checks import check_ids, check_target

MAX_TOKENS = 64  # a prompt pair longer than this makes a grid of thousands of forwards


class PatchingError(UserError):
    """A patching request that cannot be answered as asked; the message says how to fix it."""


@dataclass(frozen=True)
class PatchPair:
    """The two prompts (token ids of equal length) and the two tokens whose logit difference is the metric."""

    clean: list[int]
    corrupted: list[int]
    answer: int
    wrong: int


def check_pair(model, clean, corrupted, answer, wrong) -> PatchPair:
    clean, corrupted = check_ids(clean), check_ids(corrupted)
    if len(clean) != len(corrupted):
        raise PatchingError(
            "inside.patch_lengths",
            "The clean prompt is {clean} tokens and the corrupted prompt {corrupted} tokens: patching copies "
            "position by position, so both must have the same number of tokens. Change the corrupted prompt "
            "by swapping words for words of the same token count (e.g. one name for another single-token name).",
            clean=len(clean),
            corrupted=len(corrupted),
        )
    limit = min(MAX_TOKENS, model.cfg.context_length)
    if len(clean) > limit:
        raise PatchingError(
            "inside.patch_long",
            "The prompts are {n} tokens; patching here takes at most {limit} (every cell is a forward of its own).",
            n=len(clean),
            limit=limit,
        )
    answer, wrong = check_target(model, answer), check_target(model, wrong)
    if answer == wrong:
        raise PatchingError(
            "inside.patch_same_tokens", "The answer and the wrong token are the same token: choose two different ones."
        )
    return PatchPair(clean, corrupted, answer, wrong)


# ----------------------------------------------------------------------------------------------
# The two reference runs


@dataclass
class Runs:
    """The clean and the corrupted run's captures (batch 1) and their logit differences."""

    pair: PatchPair
    clean: Cache
    corrupted: Cache
    clean_ld: float
    corrupted_ld: float

    def normalise(self, ld: torch.Tensor) -> torch.Tensor:
        return (ld - self.corrupted_ld) / (self.clean_ld - self.corrupted_ld)


def logit_diff(logits: torch.Tensor, pair: PatchPair) -> torch.Tensor:
    """logit(answer) − logit(wrong) of each row of (B, V) last-position logits, float32."""
    logits = logits.float()
    return logits[:, pair.answer] - logits[:, pair.wrong]


def reference_runs(model, pair: PatchPair) -> Runs:
    caches, lds = [], []
    for ids, qkv in ((pair.clean, ()), (pair.corrupted, range(model.cfg.n_layers))):
        logits, cache = run_with_hooks(model, ids, capture_qkv=qkv, last_token_only=True)
        caches.append(cache)
        lds.append(float(logit_diff(logits[:, -1], pair)[0]))
    if abs(lds[0] - lds[1]) < 1e-6:
        raise PatchingError(
            "inside.patch_no_difference",
            "The clean and the corrupted prompt give the same logit difference ({ld:.4f}): there is nothing to "
            "bring back. Choose a pair where the model prefers the answer on the clean prompt and not on the "
            "corrupted one.",
            ld=lds[0],
        )
    return Runs(pair, caches[0], caches[1], lds[0], lds[1])
