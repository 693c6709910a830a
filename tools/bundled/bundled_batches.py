"""The bundled model's training batches: natural windows, repeated random tokens, repeated spans and
lines said twice.

Every choice is a function of (seed, step), so a resumed run draws the same batches; the mix and why
it makes induction heads form are in train_bundled.py's docstring.
"""

from __future__ import annotations

import bundled_metrics as bm
import torch

IGNORE = -100  # a target the loss skips (F.cross_entropy's ignore_index)
NEWLINE = 198  # "\n" in the GPT-2 BPE ("\n\n" is two of them)


def line_starts(ids: torch.Tensor) -> torch.Tensor:
    """Where each line of ``ids`` starts: position 0 and every position after a newline token."""
    after = (ids == NEWLINE).nonzero().flatten() + 1
    return torch.cat([torch.zeros(1, dtype=torch.long), after[after < len(ids)]])


def step_seed(seed: int, step: int, stream: int) -> int:
    return (seed * 0x9E3779B97F4A7C15 + step * 0xBF58476D1CE4E5B9 + stream * 0x94D049BB133111EB + 1) % (2**63)


class Batches:
    """Inputs and targets (batch, block) for step ``step``, a function of (seed, step) alone."""

    def __init__(self, train_ids: torch.Tensor, a, extra_ids: torch.Tensor | None = None):
        self.ids, self.a, self.block = train_ids, a, a.context
        self.extra = extra_ids
        self.pool = bm.frequent_tokens(train_ids, a.pool)
        self.lines = line_starts(train_ids)

    def natural_extra(self, gen) -> tuple[torch.Tensor, torch.Tensor]:
        s = int(torch.randint(len(self.extra) - self.block - 1, (1,), generator=gen))
        w = self.extra[s : s + self.block + 1]
        return w[:-1], w[1:].clone()

    def natural(self, gen) -> tuple[torch.Tensor, torch.Tensor]:
        s = int(torch.randint(len(self.ids) - self.block - 1, (1,), generator=gen))
        w = self.ids[s : s + self.block + 1]
        return w[:-1], w[1:].clone()

    def repeated_random(self, gen):
        T = self.block + 1
        bos = bool(torch.rand(1, generator=gen) < 0.5)
        L = int(torch.randint(8, 97, (1,), generator=gen))
        r = self.pool[torch.randperm(len(self.pool), generator=gen)[:L]]
        body = r.repeat(T // L + 2)
        seq = torch.cat([torch.tensor([bm.EOT]), body])[:T] if bos else body[:T]
        x, y = seq[:-1], seq[1:].clone()
        start = 1 if bos else 0  # position of the first copy's first token
        # y[j] is the token at j + 1: score only targets at positions >= start + L + 1
        y[: start + L] = IGNORE
        return x, y, (start, L, self.block)

    def repeated_span(self, gen):
        T = self.block + 1
        L = int(torch.randint(16, 129, (1,), generator=gen))
        s = int(torch.randint(len(self.ids) - T - 1, (1,), generator=gen))
        span = self.ids[s : s + L]
        seq = torch.cat([span, span, self.ids[s + L : s + L + T]])[:T]
        return seq[:-1], seq[1:].clone(), (0, L, min(2 * L - 1, self.block))

    def repeated_lines(self, gen):
        """A few whole training lines (6 to 64 tokens in all) said twice, then the text after them:
        what a teacher types to show an induction head, a sentence of their own said twice."""
        T = self.block + 1
        first = int(torch.randint(len(self.lines) - 40, (1,), generator=gen))
        want = int(torch.randint(6, 65, (1,), generator=gen))
        s, end = int(self.lines[first]), int(self.lines[first + 1])
        k = first + 1
        while end - s < want and k + 1 < len(self.lines) and int(self.lines[k + 1]) - s <= 64:
            k += 1
            end = int(self.lines[k])
        L = end - s
        span = self.ids[s:end]
        seq = torch.cat([span, span, self.ids[end : end + T]])[:T]
        return seq[:-1], seq[1:].clone(), (0, L, min(2 * L, self.block))

    def shares(self, step: int) -> tuple[float, float]:
        a = self.a
        if a.switch_step and step >= a.switch_step:
            return a.p_random2, a.p_span2
        return a.p_random, a.p_span

    def __call__(self, step: int):
        gen = torch.Generator().manual_seed(step_seed(self.a.seed, step, 0))
        p_random, p_span = self.shares(step)
        p_lines = getattr(self.a, "p_lines", 0.0)
        xs, ys, kinds, periods = [], [], [], []
        for _ in range(self.a.batch):
            u = float(torch.rand(1, generator=gen))
            period = (0, 0, 0)  # no repeat: no query has an earlier occurrence to look at
            if u < p_random:
                x, y, period = self.repeated_random(gen)
                kinds.append("r")
            elif u < p_random + p_span:
                x, y, period = self.repeated_span(gen)
                kinds.append("s")
            elif u < p_random + p_span + p_lines:
                x, y, period = self.repeated_lines(gen)
                kinds.append("l")
            elif self.extra is not None and u < p_random + p_span + p_lines + self.a.p_extra:
                x, y = self.natural_extra(gen)
                kinds.append("e")
            else:
                x, y = self.natural(gen)
                kinds.append("n")
            xs.append(x)
            ys.append(y)
            periods.append(period)
        # periods[b] = (start, L, end): queries start + L .. end - 1 of row b repeat the token L back,
        # so an induction head looks at key q - L + 1 (head_shaping.py's induction shaping reads it).
        self.periods = torch.tensor(periods, dtype=torch.long)
        return torch.stack(xs), torch.stack(ys), "".join(kinds)
