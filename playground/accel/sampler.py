"""The teaching sampler's sampled step in compiled code (``runtime.native_sampler``).

``Generation._choose`` (``engine.sampling``) stays the reference: this returns the same fields of a
``GenerationStep`` from a few passes over the row, and None for a row it leaves to the reference (NaN
or ±inf logits, which the reference reports; equal probabilities among the top ids, which torch.topk
orders its own way). The uniform is drawn here from the run's own generator exactly as
``receipts.draw_uniform`` draws it, and only once the row is taken, so a seed means the same tokens
whichever sampler runs. Probabilities and entropies are within float32 rounding of torch's.

``sample_rows`` makes a room's sampled steps in one compiled call shared among the decode threads, each row
whole on one thread: every row's uniform is drawn before the call, and a row the call leaves to the reference
gets its generator's state back, so it draws that same uniform again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from playground.engine.decoding import SampledRow
from playground.engine.receipts import draw_uniform
from playground.engine.sampling import STAGES
from playground.runtime import native_sampler as ns


def taken_row(logits: torch.Tensor) -> torch.Tensor | None:
    """The row as the compiled sampler takes it (one contiguous float32 row on the CPU), or None."""
    if logits.dtype != torch.float32 or logits.device.type != "cpu" or logits.dim() != 1:
        return None
    return logits if logits.is_contiguous() else logits.contiguous()


class CompiledSampler:
    """The sampled steps of one generation (its output arrays made once); ``native_sampler.available()`` must hold."""

    def __init__(self, n_top: int):
        if not ns.available():
            raise RuntimeError(f"no compiled sampler here: {ns.status().reason}")
        self.n_top = n_top
        self.buffers = ns.Buffers(n_top)
        # torch's softmax sums a row in the float32 lanes of its vector width: 16 with AVX-512, else 8
        self.lanes = 16 if torch.backends.cpu.get_cpu_capability().startswith("AVX512") else 8

    def __call__(self, logits: torch.Tensor, generator: torch.Generator, temperature, top_k, top_p) -> dict | None:
        row = taken_row(logits)
        if row is None:
            return None
        b = self.buffers
        n = row.numel()
        p = 1.0 if top_p is None else float(top_p)
        got = ns.prepare(row.data_ptr(), n, float(temperature), int(top_k or 0), p, b, self.lanes)
        if got not in (ns.READY, ns.ZERO_FILL):
            return None
        u = draw_uniform(generator)
        return self.fields(got, ns.draw(u, b), u, n)

    def fields(self, got: int, token: int, u: float, n: int) -> dict:
        """The step's fields from the buffers, once prepare returned ``got`` (READY or ZERO_FILL) and the draw
        with ``u`` picked ``token`` from the row of ``n``."""
        b = self.buffers
        # each array to Python numbers in one call, then sliced: a few µs less than a call per part
        ints, floats, out = b.ints.tolist(), b.floats.tolist(), b.doubles.tolist()
        n1, want = b.n1, min(self.n_top, n)
        if got == ns.READY:
            top = list(zip(ints[:want], floats[:want]))
            n_shown = int(out[ns.N_SHOWN])
            lo = ns.SCALARS
            intervals = list(
                zip(ints[3 * n1 : 3 * n1 + n_shown], out[lo : lo + n_shown], out[lo + n1 : lo + n1 + n_shown])
            )
        else:
            top, intervals = self._top_among_zeros(n, want, token)
        n_cand = int(out[ns.N_CAND])
        return dict(
            token_id=token,
            prob=out[ns.PROB],
            raw_prob=out[ns.RAW_PROB],
            rank=int(out[ns.RANK]),
            entropy=out[ns.ENTROPY],
            raw_entropy=out[ns.RAW_ENTROPY],
            top=top,
            candidates=ints[2 * n1 : 2 * n1 + n_cand],
            stages={name: floats[(1 + s) * n1 : (1 + s) * n1 + n_cand] for s, name in enumerate(STAGES)},
            kept_tokens=int(out[ns.KEPT]),
            u=u,
            intervals=intervals,
        )

    def _top_among_zeros(self, n: int, want: int, token: int):
        """The top and the slices when fewer than ``want`` final probabilities are above zero: torch.topk over the
        final row (zeros but for the positive entries) picks the zeros it shows, as the reference's does."""
        b = self.buffers
        held = int(b.doubles[ns.N_POSITIVE])
        ids = b.part(b.ints, 4, held)
        cdf = b.part(b.doubles, 2, held, ns.SCALARS)
        final = torch.zeros(n)
        final[torch.from_numpy(ids.astype(np.int64))] = torch.from_numpy(b.part(b.floats, 5, held).copy())
        values, top_ids = torch.topk(final, want)
        top = list(zip(top_ids.tolist(), values.tolist()))
        shown = list(dict.fromkeys(top_ids.tolist() + [token]))
        total = float(b.doubles[ns.TOTAL])

        def through(i: int) -> float:  # the cumulative final probability through id i
            at = int(np.searchsorted(ids, i, side="right"))
            return float(cdf[at - 1]) if at else 0.0

        return top, [(i, through(i - 1) / total if i > 0 else 0.0, through(i) / total) for i in shown]


def sample_rows(rows: Sequence[SampledRow], threads: int) -> list[dict | None]:
    """Each row's fields as its ``CompiledSampler`` makes them alone (None: left to ``_choose``, its generator
    as it was), the rows' compiled passes in one call on ``threads`` threads. Rows another sampler serves, or
    whose logits the compiled sampler does not take, are made one by one."""
    out: list[dict | None] = [None] * len(rows)
    batch: list[tuple[int, torch.Tensor, SampledRow, CompiledSampler]] = []
    states, us = [], []
    for i, r in enumerate(rows):
        sampler = r.sampler
        if isinstance(sampler, CompiledSampler) and (x := taken_row(r.logits)) is not None:
            batch.append((i, x, r, sampler))
            states.append(r.generator.get_state())  # given back if the row is left to the reference
            us.append(draw_uniform(r.generator))
        else:
            out[i] = sampler(r.logits, r.generator, r.temperature, r.top_k, r.top_p)
    if not batch:
        return out
    try:
        got, tokens = ns.rows(
            [x.data_ptr() for _, x, _, _ in batch],
            [x.numel() for _, x, _, _ in batch],
            [float(r.temperature) for _, _, r, _ in batch],
            [int(r.top_k or 0) for _, _, r, _ in batch],
            [1.0 if r.top_p is None else float(r.top_p) for _, _, r, _ in batch],
            us,
            [sampler.buffers for _, _, _, sampler in batch],
            batch[0][3].lanes,
            threads,
        )
    except BaseException:  # nothing was taken: every row's generator as it was
        for (_, _, r, _), state in zip(batch, states):
            r.generator.set_state(state)
        raise
    for (i, x, r, sampler), g, token, u, state in zip(batch, got, tokens, us, states):
        if g in (ns.READY, ns.ZERO_FILL):
            out[i] = sampler.fields(g, token, u, x.numel())
        else:
            r.generator.set_state(state)
    return out
