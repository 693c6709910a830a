"""The one seam between the teaching sampler and any faster way to run its steps.

A generation (``sampling.Generation``) asks ``decoder_of(model)`` for what a step needs:

- ``rows(model, rows)``: the logits of one new token for each of several generations at once, each
  continuing its own KV cache (and, where asked, that token's attention row per layer);
- ``summarizer(n_top)``: the summary of a greedy step's row of logits;
- ``sampler(n_top)``: a faster way to make a sampled step's fields, or None (the teaching ``_choose``);
- ``sample_rows(rows)``: several generations' sampled steps at once, each with its own sampler (a room's);
- ``sampling(model)``: the context the full sampler's torch work runs in.

``PLAIN`` answers with the model's own forward, one row at a time, so a model nobody accelerated
decodes exactly as ``model.py`` reads. ``playground.accel.accelerate(model)`` attaches a faster decoder
to that one model; nothing else in the engine knows it exists. A decoder's ``rows`` gives every row the
numbers it would give that row alone: a generation's tokens never depend on who decodes beside it.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from playground.engine.kv_cache import KVCache
from playground.engine.row_summary import RowSummary, reference_summary

RowResult = tuple[torch.Tensor, list[torch.Tensor] | None]  # logits (vocab,) float32, attention per layer


@dataclass
class Row:
    """One generation's next step as a row of a shared forward: the newest token, fed at ``cache.length``
    (after ``before``: a prompt's earlier tokens, whose keys and values fill the cache in the same call)."""

    token: int
    cache: KVCache
    capture: bool = False  # also the new query's attention, per layer (n_heads, k_len)
    before: tuple[int, ...] = ()

    @property
    def n_tokens(self) -> int:
        return len(self.before) + 1


@dataclass
class SampledRow:
    """One generation's sampled step for a decoder's ``sample_rows``: its sampler (the decoder's ``sampler``),
    its row of logits, its own generator and its settings."""

    sampler: Callable[..., dict | None]
    logits: torch.Tensor
    generator: torch.Generator
    temperature: float
    top_k: int | None
    top_p: float | None


class Decoder:
    """The plain decoder: the model's own forward for each row, torch's softmax for the row summary."""

    name = "plain"

    def rows(self, model, rows: Sequence[Row]) -> list[RowResult]:
        return [plain_row(model, row) for row in rows]

    def prompt_rows(self, model) -> int:
        """The longest prompt a generation hands this decoder as one row (``Row.before``), so that a room's
        prompts share the forward of everyone's next tokens; 0: a prompt runs alone through the forward."""
        return 0

    def summarizer(self, n_top: int) -> Callable[[torch.Tensor], RowSummary | None]:
        return lambda logits: reference_summary(logits if logits.is_contiguous() else logits.contiguous(), n_top)

    def sampler(self, n_top: int) -> Callable[..., dict | None] | None:
        """None: a sampled step is the teaching sampler's own (``Generation._choose``). A decoder's sampler is
        called as ``sampler(logits, generator, temperature, top_k, top_p)`` and returns the step's fields, or
        None for a row it leaves to ``_choose`` (then it has drawn nothing from the generator)."""
        return None

    def sample_rows(self, rows: Sequence[SampledRow]) -> list[dict | None]:
        """Each row's sampled fields, as its own ``sampler`` makes them alone (None: left to ``_choose``, nothing
        drawn). A decoder may make them together in one call; a row's fields never depend on the rows beside it."""
        return [r.sampler(r.logits, r.generator, r.temperature, r.top_k, r.top_p) for r in rows]

    def sampling(self, model) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()


PLAIN = Decoder()
_DECODERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its attached decoder


def attach(model, decoder: Decoder) -> None:
    """``model``'s generations decode through ``decoder`` from their next step on."""
    _DECODERS[model] = decoder


def detach(model) -> None:
    """Back to the plain decoder."""
    _DECODERS.pop(model, None)


def decoder_of(model) -> Decoder:
    return _DECODERS.get(model, PLAIN)


def plain_row(model, row: Row) -> RowResult:
    """The row's tokens (``before``, then ``token``) through ``model``'s forward, continuing ``row.cache``."""
    idx = torch.tensor([[*row.before, row.token]], dtype=torch.long, device=model.device)
    out = model(idx, kv_cache=row.cache, return_attention=row.capture, last_token_only=True)
    if row.capture:
        logits, trace = out
        probs = [last_row_probs(q, k, trace.window(i)) for i, (q, k) in enumerate(zip(trace.queries, trace.keys))]
        return logits[0, -1].float(), probs
    return out[0, -1].float(), None


def last_row_probs(q: torch.Tensor, k: torch.Tensor, window: int = 0) -> torch.Tensor:
    """The newest query's attention over all keys: (n_heads, k_len), float32, on the CPU (0 outside a
    sliding ``window``: the newest query sees only the last ``window`` keys)."""
    q_last = q[0, :, -1:, :].float()  # (H, 1, hd)
    scores = q_last @ k[0].float().transpose(-2, -1) / math.sqrt(q.size(-1))  # (H, 1, Tk)
    if window and window < scores.size(-1):
        scores[..., : scores.size(-1) - window] = float("-inf")
    return torch.softmax(scores, dim=-1)[:, 0, :].cpu()
