"""The sampler, and the receipt that explains each sampled token.

The project samples by inverse CDF, the textbook rule (and the one ``numpy.random.Generator.choice``
uses): lay the vocabulary's probabilities end to end in token-id order, so token i owns the slice
[c(i-1), c(i)) of [0, 1) where c is the cumulative sum; draw one uniform u from the run's seeded
``torch.Generator``; the token whose slice holds u is the one sampled. Tokens removed by top-k or
top-p have probability 0, so their slices are empty and u can never land in them.

``torch.multinomial`` is not used: for one sample it draws an exponential per vocabulary entry and
takes argmax(p / E) (ATen's "exponential trick"), so no single number says why a token won. With
one u per step the *receipt* does: u = 0.62 fell into " the"'s slice [0.41, 0.63), while the most
likely token " and" owns [0.03, 0.34). The same seed draws the same u's, so the receipt reproduces
every sampled token exactly.

Precisely: cdf = cumsum(p) in float64, x = u · cdf[-1] (the filtered probabilities sum to 1 only up
to rounding), token = the first i with cdf[i] > x.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def draw_uniform(generator: torch.Generator) -> float:
    """One uniform in [0, 1), float64, from the run's generator: the only random number a step uses."""
    return float(torch.rand((), generator=generator, dtype=torch.float64))


def inverse_cdf_draw(probs: torch.Tensor, generator: torch.Generator) -> tuple[int, float, torch.Tensor]:
    """(token id, u, the float64 cumulative sum) for one row of probabilities."""
    u = draw_uniform(generator)
    cdf = torch.cumsum(probs.double(), dim=0)
    return pick(cdf, u), u, cdf


def pick(cdf: torch.Tensor, u: float) -> int:
    """The index whose slice [cdf[i-1], cdf[i]) holds u · total."""
    total = cdf[-1]
    x = torch.tensor([u], dtype=torch.float64) * total
    i = int(torch.searchsorted(cdf, x, right=True)[0])
    if i >= cdf.numel():  # u · total rounded up to the total itself: the last slice with any width
        i = int(torch.nonzero(torch.diff(cdf, prepend=cdf.new_zeros(1)) > 0)[-1])
    return i


def slices(cdf: torch.Tensor, ids) -> list[tuple[int, float, float]]:
    """(id, lo, hi) of each token's slice of [0, 1), normalised by the total."""
    total = float(cdf[-1])
    out = []
    for i in ids:
        i = int(i)
        lo = float(cdf[i - 1]) / total if i > 0 else 0.0
        out.append((i, lo, float(cdf[i]) / total))
    return out


@dataclass
class Receipt:
    """Why a generated step's token was chosen."""

    step: int
    token_id: int
    greedy: bool
    u: float | None  # the uniform draw, None for greedy steps
    chosen: tuple[float, float] | None  # the chosen token's slice
    slices: list[tuple[int, float, float, float]]  # (id, probability, lo, hi), most likely first
    most_likely: int  # the token with the largest probability after the filters

    @property
    def reproduced(self) -> bool:
        """u lies in the chosen token's slice (always true for an honest receipt)."""
        return self.greedy or (
            self.chosen is not None and self.u is not None and self.chosen[0] <= self.u < self.chosen[1]
        )

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "token_id": self.token_id,
            "greedy": self.greedy,
            "u": self.u,
            "chosen_slice": list(self.chosen) if self.chosen else None,
            "most_likely": self.most_likely,
            "slices": [{"token_id": i, "prob": p, "lo": lo, "hi": hi} for i, p, lo, hi in self.slices],
        }


def receipt(step) -> Receipt:
    """The receipt of a ``GenerationStep`` (its u and slices were recorded by the sampler itself)."""
    most_likely = step.top[0][0] if step.top else step.token_id
    if step.u is None:
        return Receipt(step.index, step.token_id, True, None, None, [], most_likely)
    probs = dict(step.top)
    rows = []
    for i, lo, hi in step.intervals:
        if hi <= lo and i != step.token_id:
            continue  # removed by top-k / top-p: an empty slice u can never fall into
        rows.append((i, probs.get(i, hi - lo), lo, hi))
    rows.sort(key=lambda r: (-r[1], r[0]))
    chosen = next(((lo, hi) for i, _, lo, hi in rows if i == step.token_id), None)
    return Receipt(step.index, step.token_id, False, step.u, chosen, rows, most_likely)


def explain(r: Receipt, piece=lambda i: str(i)) -> str:
    """One paragraph for a learner; ``piece(id)`` shows a token."""
    if r.greedy:
        return (
            f"Step {r.step} is greedy (temperature 0): no random number is drawn; the most likely token, "
            f"{piece(r.token_id)}, is taken every time."
        )
    if r.chosen is None:
        raise ValueError(f"step {r.step}'s receipt has no slice for its token")
    lo, hi = r.chosen
    text = (
        f"Step {r.step}: the seeded draw was u = {r.u:.6f}. Every token owns a slice of [0, 1) as wide as its "
        f"probability after temperature / top-k / top-p, laid end to end in vocabulary order; u fell into "
        f"{piece(r.token_id)}'s slice [{lo:.6f}, {hi:.6f}), so that token was sampled."
    )
    if r.most_likely != r.token_id:
        ml = next(((a, b) for i, _, a, b in r.slices if i == r.most_likely), None)
        if ml is not None:
            text += (
                f" The most likely token, {piece(r.most_likely)}, owns [{ml[0]:.6f}, {ml[1]:.6f}), "
                f"a wider slice, but u was not in it."
            )
    else:
        text += " That is also the most likely token."
    return text
