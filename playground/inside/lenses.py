"""The logit lens: what each layer already predicts, read through ``final_norm`` and ``out_head``.

The residual stream is read after the embeddings and after each block.

- ``logit_lens``: the top token and the probability of the actual next token at every layer ×
  position. Its last row is the model's own output.
- ``lens_cell``: the top-10 at one layer and position, and KL(final ‖ that layer); ``cell_from_rows``
  the same from residual rows a lens already read (``logit_lens_rows``).

Every function takes the ids of one context window (positions 0..T-1 of that window) and returns
plain numbers (lists and floats), so the UI, the API and the tests read the same values.
"""

from __future__ import annotations

from typing import Any

import torch

from playground.engine.readout import HeadReader, RowFigures, reading_bytes
from playground.inside.interventions import Intervention, run_with_hooks
from playground.inside.view_checks import (
    capture_bytes,
    check_ids,
    check_layer,
    check_position,
    reserve_logits,
    window_error,
)
from playground.runtime.memory import BUDGET

TOP_K = 10


def read_out(model, resid: torch.Tensor) -> torch.Tensor:
    """logits of residual-stream vectors (..., d) through final_norm and out_head, float32."""
    with torch.no_grad():
        return model.out_head(model.final_norm(resid.to(model.dtype))).float()


def layer_names(model) -> list[str]:
    return ["embeddings"] + [f"after block {i}" for i in range(model.cfg.n_layers)]


# ----------------------------------------------------------------------------------------------
# Logit lens


def logit_lens(model, ids, intervention: Intervention | None = None, first: int = 0, stop: int | None = None) -> dict:
    """Top token and p(actual next token) for every layer × position in [first, stop).

    Returns ``top_id``, ``top_prob`` and ``next_prob`` as (n_layers + 1) × (stop − first) lists
    (``next_prob`` is None at the run's last position, whose next token is not known), ``layers``
    names and ``first``. Reading a row out costs a product with the whole vocabulary -- for GPT-2
    and 256 positions that is 5× the forward itself -- so the tab asks for the window it shows.
    """
    return logit_lens_rows(model, ids, intervention, first, stop)[0]


def logit_lens_rows(
    model, ids, intervention: Intervention | None = None, first: int = 0, stop: int | None = None
) -> tuple[dict, torch.Tensor]:
    """``logit_lens``, and the residual-stream rows it read: (n_layers + 1, stop − first, d_model).
    A cell of that window (``cell_from_rows``) then needs no forward of its own."""
    ids = check_ids(ids)
    T = len(ids)
    stop = T if stop is None else stop
    if isinstance(first, bool) or not isinstance(first, int) or not isinstance(stop, int) or not 0 <= first < stop <= T:
        raise window_error(first, stop, T)
    causal = not (intervention and intervention.changes_causality)
    # the rows' readout as HeadReader holds it (a tile of the vocabulary at a time), not a matrix of logits
    need = reading_bytes(model, (model.cfg.n_layers + 1) * (stop - first)) + capture_bytes(model.cfg, T)
    with BUDGET.reserve(need, f"the logit lens of {T:,} tokens", "lens"):
        _, cache = run_with_hooks(model, ids[:stop] if causal else ids, intervention, last_token_only=True)
        out = lens_from_cache(model, cache, ids, first, stop)
    return out, torch.stack([r[0, first:stop] for r in cache.resid])


def lens_from_cache(model, cache, ids, first: int, stop: int, final: RowFigures | None = None) -> dict:
    """The lens over [first, stop) from a capture's residual streams. ``final``: the last layer's
    figures of every position (read out with each position's next token as target) when the
    caller has them already -- those rows are then not read out twice."""
    L1, n = len(cache.resid), stop - first
    layers = cache.resid if final is None else cache.resid[:-1]
    stream = torch.cat([r[0, first:stop] for r in layers])  # (len(layers)·n, d): layer-major rows
    nxt = torch.cat(
        [torch.tensor((ids + [0])[first + 1 : stop + 1], dtype=torch.long)] * len(layers)
    )  # each row's next token
    # argmax needs no softmax, and p = exp(logit − logsumexp) needs only the two reductions:
    # playground.engine.readout reads the rows in cache-sized chunks without a (rows, V) matrix
    f = HeadReader(model)(stream, nxt, norm=True)
    top_id: Any
    top_prob: Any
    top_id, top_prob, target_logp = f.top_id, f.top_prob, f.target_logp
    if final is not None:
        top_id = torch.cat([top_id, final.top_id[first:stop]])
        top_prob = torch.cat([top_prob, final.top_prob[first:stop]])
        target_logp = torch.cat([target_logp, final.target_logp[first:stop]])
    top_id, top_prob, next_prob = top_id.tolist(), top_prob.tolist(), target_logp.exp().tolist()
    known = min(n, len(ids) - 1 - first)  # positions whose next token exists
    return {
        "layers": layer_names(model),
        "token_ids": ids,
        "first": first,
        "top_id": [top_id[i * n : (i + 1) * n] for i in range(L1)],
        "top_prob": [top_prob[i * n : (i + 1) * n] for i in range(L1)],
        "next_prob": [next_prob[i * n : i * n + known] + [None] * (n - known) for i in range(L1)],
    }


def lens_cell(model, ids, layer: int, position: int, k: int = TOP_K, intervention: Intervention | None = None) -> dict:
    """The top-k at one layer (0 = embeddings) and position, with KL(final ‖ layer) in nats."""
    ids = check_ids(ids)
    layer = check_layer(layer, model.cfg.n_layers + 1, "Lens layer")
    position = check_position(position, len(ids))
    with reserve_logits(model, 2, "a logit-lens cell", len(ids)):
        _, cache = run_with_hooks(
            model,
            ids[: position + 1] if not (intervention and intervention.changes_causality) else ids,
            intervention,
            last_token_only=True,
        )
    return cell_from_rows(model, cache.resid[layer][0, position], cache.resid[-1][0, position], layer, position, k)


def cell_from_rows(
    model, row: torch.Tensor, final_row: torch.Tensor, layer: int, position: int, k: int = TOP_K
) -> dict:
    """``lens_cell`` from the residual stream at that position after ``layer`` (``row``) and after
    the last block (``final_row``), e.g. rows ``logit_lens_rows`` read already."""
    logp = torch.log_softmax(read_out(model, row).double(), dim=-1)
    final = torch.log_softmax(read_out(model, final_row).double(), dim=-1)
    kl = float((final.exp() * (final - logp)).sum())
    p, i = logp.exp().topk(k)
    return {
        "layer": layer,
        "position": position,
        "top": [[int(t), float(q)] for t, q in zip(i, p)],
        "kl_to_final_nats": max(0.0, kl),
    }
