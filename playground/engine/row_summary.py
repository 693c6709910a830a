"""What the sampler reads from one row of logits: finiteness, argmax, counts, entropy, the most likely ids.

A greedy step with no filter needs only a summary of its row: the first largest logit, the entropy of
the softmax, the ``n_top`` most likely ids with their probabilities and how many probabilities are
above zero. ``reference_summary`` computes it with torch's softmax and numpy; ``playground.accel``
offers a compiled one (three passes over the row) through the decoder seam (``engine.decoding``). Both
order the most likely ids by larger logit, then lower id. The row-wide helpers the full sampler uses (``check_logits``,
``first_argmax``, ``count_above``, ``entropy_bits``) live here too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from playground.errors import UserError


class NonFiniteError(UserError):
    """The model produced NaN or infinite logits: no token can be chosen, so generation stops.
    ``step`` is the 1-based number of the token that could not be generated."""

    def __init__(self, key: str, template: str, /, **fields):
        super().__init__(key, template, **fields)
        self.step = fields["step"]


def check_logits(logits: torch.Tensor, step: int) -> None:
    """Raise NonFiniteError if one row of logits holds NaN or ±inf (one reduction, checked per step).
    A finite sum means every entry is finite (NaN and ±inf survive a sum), and a sum is several
    times cheaper than a per-entry test; only a sum that overflowed or met a NaN is looked at entry
    by entry."""
    if math.isfinite(float(logits.sum())) or bool(torch.isfinite(logits).all()):
        return
    counts = [
        (int(torch.isnan(logits).sum()), "NaN"),
        (int(torch.isposinf(logits).sum()), "+inf"),
        (int(torch.isneginf(logits).sum()), "-inf"),
    ]
    found = ", ".join(f"{n:,} {kind}" for n, kind in counts if n)
    raise NonFiniteError(
        "generate.non_finite",
        "Step {step}: the model produced NaN/infinite logits ({found} of {total:,}); generation stopped. The "
        "weights or settings overflow the number format: try float32 instead of bfloat16, or load other "
        "weights.",
        step=step,
        found=found,
        total=logits.numel(),
    )


def first_argmax(x: torch.Tensor) -> int:
    """The index of the largest entry of a 1-D tensor, the first one on a tie (as torch.argmax).
    On the CPU through numpy: torch's reduction of one long row costs ~10x more there, and the
    sampler runs a few of them on every token."""
    if x.device.type == "cpu" and x.dtype == torch.float32:
        return int(x.numpy().argmax())
    return int(torch.argmax(x))


def count_above(x: torch.Tensor, threshold: float) -> int:
    """How many entries of a 1-D tensor are greater than ``threshold`` (numpy on the CPU, as
    ``first_argmax``)."""
    if x.device.type == "cpu" and x.dtype == torch.float32:
        return int(np.count_nonzero(x.numpy() > np.float32(threshold)))
    return int((x > threshold).sum())


def entropy_bits(probs: torch.Tensor) -> float:
    """-sum p·log2 p, with 0·log 0 = 0. Each term is -p·ln p computed where p > 0; a zero takes the smallest
    positive number into the log, which its factor 0 then cancels exactly (the same terms as
    ``torch.special.entr``, in a third of its time: its per-element branch does not vectorise)."""
    smallest = torch.nextafter(torch.zeros((), dtype=probs.dtype), torch.ones((), dtype=probs.dtype))
    return float(-(probs * torch.log(probs.clamp_min(smallest))).sum() / math.log(2))


@dataclass
class RowSummary:
    """One row of logits, as a greedy step with no filter reports it."""

    argmax: int  # the first index of the largest logit
    prob: float  # its probability under the softmax (float32)
    entropy: float  # bits, of the softmax
    top: list[tuple[int, float]]  # the min(n_top, n) most likely (id, probability): larger logit, then lower id
    kept: int  # probabilities above zero in float32


def greedy_step_fields(summary: RowSummary, stages: tuple[str, ...]) -> dict:
    """The fields of the step the full sampler makes at temperature 0 with no filter, from the row's summary:
    every stage is the one softmax, the token is its first largest entry (rank 1), the candidates are the top
    ids (with the token, if the top holds fewer than one)."""
    token_id, prob = summary.argmax, summary.prob
    candidates = [i for i, _ in summary.top]
    row = [p for _, p in summary.top]
    if token_id not in candidates:
        candidates.append(token_id)
        row.append(prob)
    return dict(
        token_id=token_id,
        prob=prob,
        raw_prob=prob,
        rank=1,
        entropy=summary.entropy,
        raw_entropy=summary.entropy,
        top=summary.top,
        candidates=candidates,
        stages={name: list(row) for name in stages},
        kept_tokens=summary.kept,
    )


def reference_summary(logits: torch.Tensor, n_top: int) -> RowSummary | None:
    """The summary from torch's float32 softmax and numpy (no compiler): the same ids and counts as the
    compiled one, probabilities and entropy within float32 rounding of it."""
    x = logits.numpy()
    if not np.isfinite(x).all():
        return None
    probs = torch.softmax(logits, dim=-1)
    p = probs.numpy()
    n = x.size
    want = min(n_top, n)
    if want > 0:
        kth = np.partition(x, n - want)[n - want]
        held = np.flatnonzero(x >= kth)  # ascending ids: a stable sort keeps the lower id first on a tie
        ids = held[np.argsort(-x[held], kind="stable")][:want]
    else:
        ids = np.zeros(0, dtype=np.int64)
    top = list(zip(ids.tolist(), p[ids].tolist()))
    first = int(x.argmax())
    return RowSummary(first, float(p[first]), entropy_bits(probs), top, count_above(probs, 0.0))
