"""The accelerated decoder an ``accelerate``d model's generations run on (``engine.decoding``'s seam).

The rows of a step go through the native decode step together, in one call, where ``native_decode``
chose it for the model and it is valid for the row now, else one by one through the model's own forward;
a greedy step's row summary and a sampled step are the compiled ones where they built (``accel.row_summary``,
``accel.sampler``; a room's sampled steps in one call); the full sampler, for the rows they leave to it, runs
on the thread count measured for the vocabulary. A row's numbers are those it gets alone: which path it takes
depends on the model and its own cache, never on the rows beside it, and the native step sums each row's
outputs as it does for that row alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from playground.accel import native_decode
from playground.accel.row_summary import CompiledSummarizer
from playground.accel.sampler import CompiledSampler, sample_rows
from playground.engine.decoding import Decoder, Row, RowResult, plain_row
from playground.runtime import decode_decisions, native_row_summary, native_sampler
from playground.runtime.threads import torch_threads


class AcceleratedDecoder(Decoder):
    name = "accelerated"

    def rows(self, model, rows: Sequence[Row]) -> list[RowResult]:
        # the rows the native step takes in one call (every weight read once for all), the rest one by one
        native = native_decode.decode_rows(model, rows)
        return [got if got is not None else plain_row(model, row) for got, row in zip(native, rows)]

    def prompt_rows(self, model) -> int:
        return native_decode.prompt_rows(model)

    def summarizer(self, n_top: int):
        if native_row_summary.available():
            return CompiledSummarizer(n_top)
        return super().summarizer(n_top)  # the plain decoder's reference summary

    def sampler(self, n_top: int):
        return CompiledSampler(n_top) if native_sampler.available() else None

    def sample_rows(self, rows):
        if not native_sampler.available():
            return super().sample_rows(rows)
        # on the calling thread's torch threads: the decode loop's, the count its kernels were measured on
        return sample_rows(rows, torch.get_num_threads())

    def sampling(self, model):
        # The sampler's torch work on the thread count measured for one vocabulary row (decided at
        # ``accelerate``; read here, never measured).
        threads = (
            decode_decisions.vocabulary_threads_decided(model.cfg.vocab_size) if model.device.type == "cpu" else None
        )
        return torch_threads(threads)


ACCELERATED = AcceleratedDecoder()
