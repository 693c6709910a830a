"""Training batches that mix text with synthetic repeats, the data on which induction heads form.

A row is either a window of the training text or, with probability ``share``, ``<|endoftext|>`` and
then a run of ``period`` distinct tokens drawn from the text's most frequent ones, said again and
again to the end of the window. The period is drawn anew for every row (from ``periods``): with one
fixed period a head can copy by looking a fixed distance back, by position alone, and no induction
circuit forms (docs/bundled-model.md measured it). The first run of a repeat is random by design, so
its targets are not scored (``IGNORE``): learning them would only teach a flat distribution over
the pool. From the second run on, every token can be read off the earlier run: that is what the
previous-token head and the induction head, together, learn to do.

Every choice is a function of (seed, step), like the trainer's own windows, so a run is repeatable
and a resumed run draws the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground.training.sampled_softmax import IGNORE

END_OF_TEXT = 50256  # <|endoftext|> in the GPT-2 BPE


def frequent_tokens(ids, n: int) -> torch.Tensor:
    """The ``n`` most frequent token ids of ``ids`` (fewer if it holds fewer distinct ones)."""
    ids = torch.as_tensor(ids, dtype=torch.long).flatten()
    counts = torch.bincount(ids)
    order = counts.argsort(descending=True, stable=True)
    return order[: min(n, int((counts > 0).sum()))]


@dataclass(frozen=True)
class RepeatMix:
    """The mix: ``share`` of the rows repeats (periods from ``periods``, tokens from the text's
    ``pool`` most frequent), the rest text windows."""

    share: float = 0.8
    pool: int = 500
    periods: tuple[int, int] = (8, 24)

    def describe(self) -> dict:
        return {"repeat_share": self.share, "pool": self.pool, "periods": list(self.periods)}


class RepeatBatches:
    """``(x, y)``: ``batch_size`` rows of ``block_size`` tokens, a function of ``seed`` alone (the
    trainer passes each step's own)."""

    def __init__(self, train_ids, block_size: int, mix: RepeatMix):
        self.ids = torch.as_tensor(train_ids, dtype=torch.long).flatten()
        self.block, self.mix = block_size, mix
        self.pool = frequent_tokens(self.ids, mix.pool)
        lo, hi = mix.periods
        if not 2 <= lo <= hi <= min(len(self.pool), block_size // 2):
            raise ValueError(f"periods {mix.periods} need 2 <= low <= high <= {min(len(self.pool), block_size // 2)}")

    def repeat_row(self, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        lo, hi = self.mix.periods
        period = int(torch.randint(lo, hi + 1, (1,), generator=gen))
        run = self.pool[torch.randperm(len(self.pool), generator=gen)[:period]]
        seq = torch.cat([torch.tensor([END_OF_TEXT]), run.repeat(self.block // period + 2)])[: self.block + 1]
        x, y = seq[:-1], seq[1:].clone()
        y[:period] = IGNORE  # targets 1..period: the first run, unpredictable by design
        return x, y

    def text_row(self, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        start = int(torch.randint(len(self.ids) - self.block, (1,), generator=gen))
        window = self.ids[start : start + self.block + 1]
        return window[:-1], window[1:]

    def __call__(self, batch_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        rows = [
            self.repeat_row(gen) if float(torch.rand(1, generator=gen)) < self.mix.share else self.text_row(gen)
            for _ in range(batch_size)
        ]
        return torch.stack([x for x, _ in rows]), torch.stack([y for _, y in rows])
