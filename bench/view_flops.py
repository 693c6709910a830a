"""Each Inside view's floating-point operations, counted from the model's config and the view's arguments.

What is counted: every matrix product the view's code runs, at 2 FLOPs per multiply-add -- the
blocks' Q/K/V, ``out_proj`` and MLP linears, attention's q·kᵀ and weights·v (over every query ×
key pair, masked ones included, as ``torch.utils.flop_counter`` counts a fused attention kernel),
the output head for every row read out, and the views' own small matrix-vector products and dot
products. What is not: LayerNorm, GELU, softmax, the vocabulary's exp / log-sum-exp / argmax and
other elementwise work, which grow with rows × (d or V) and not with a product's inner dimension.

``tests/unit/test_view_flops.py`` runs each view on a tiny model under ``FlopCounterMode`` and
checks these counts against it to the FLOP, so the formulas follow the code: a view that starts
doing less (or more) work must change its formula here.
"""

from __future__ import annotations

from playground.engine.config import GPTConfig


def linear(rows: int, n_in: int, n_out: int) -> int:
    """rows × (n_in → n_out)."""
    return 2 * rows * n_in * n_out


def attention(cfg: GPTConfig, queries: int, keys: int, batch: int = 1) -> int:
    """q·kᵀ and weights·v of every head: 2 products of (queries × head_dim) · (head_dim × keys)."""
    return batch * 2 * 2 * queries * keys * cfg.emb_dim  # summed over heads: n_heads · head_dim = emb_dim


def block(cfg: GPTConfig, rows: int, keys: int | None = None, batch: int = 1) -> int:
    """One transformer block over ``rows`` query rows attending to ``keys`` (default: the same rows)."""
    d = cfg.emb_dim
    projections = linear(rows, d, 3 * d) + linear(rows, d, d) + linear(rows, d, 4 * d) + linear(rows, 4 * d, d)
    return batch * projections + attention(cfg, rows, rows if keys is None else keys, batch)


def head(cfg: GPTConfig, rows: int) -> int:
    """``rows`` residual-stream rows through the output head (emb_dim → vocab)."""
    return linear(rows, cfg.emb_dim, cfg.vocab_size)


def forward(cfg: GPTConfig, T: int, last_token_only: bool = True, batch: int = 1) -> int:
    """The model over T tokens: every block, then the head for the last row or for all of them."""
    return cfg.n_layers * block(cfg, T, batch=batch) + head(cfg, batch * (1 if last_token_only else T))


def logit_lens(cfg: GPTConfig, T: int, first: int, stop: int) -> int:
    """lenses.logit_lens: one hooked forward of the tokens up to ``stop``, then every layer's rows
    (embeddings and each block) of [first, stop) through the head."""
    return forward(cfg, stop) + head(cfg, (cfg.n_layers + 1) * (stop - first))


def lens_cell(cfg: GPTConfig, T: int, position: int) -> int:
    """lenses.lens_cell: a hooked forward up to ``position``, then two rows (the layer's, the final
    one) through the head."""
    return forward(cfg, position + 1) + 2 * head(cfg, 1)


def logit_attribution(cfg: GPTConfig, T: int, position: int) -> int:
    """attribution.logit_attribution: a hooked forward up to ``position``; each head's ``W_O`` slice
    times its output (d × head_dim · head_dim); a dot product with the read-out direction for every
    part (each head, each attention bias, each MLP, the two embeddings) and the shift's w·β."""
    d, L, H = cfg.emb_dim, cfg.n_layers, cfg.n_heads
    parts = L * H + 2 * L + 2
    return forward(cfg, position + 1) + L * H * 2 * d * cfg.head_dim + (parts + 1) * 2 * d


def attention_maths(cfg: GPTConfig, T: int, layer: int) -> int:
    """attention_maths.attention_maths: the blocks before ``layer`` over all T tokens, then that
    block's Q/K/V projection and attention; the query's scores against every key and the weighted
    sum of v, again in float64."""
    d = cfg.emb_dim
    return layer * block(cfg, T) + linear(T, d, 3 * d) + attention(cfg, T, T) + 2 * 2 * T * cfg.head_dim


def compare(cfg: GPTConfig, T: int, first_layer: int, lens_first: int, lens_stop: int) -> int:
    """effects.compare: the plain hooked forward; the intervened one resumed at ``first_layer``;
    both final residual streams through the head (every position's loss); the chosen position's two
    rows for the full distributions; the lens after, on the blocks' rows of the window (the final
    layer's rows are the loss readout's)."""
    intervened = (cfg.n_layers - first_layer) * block(cfg, T)
    lens_rows = cfg.n_layers * (lens_stop - lens_first)
    return forward(cfg, T) + intervened + 2 * head(cfg, T) + 2 * head(cfg, 1) + head(cfg, lens_rows)


def dose_response(cfg: GPTConfig, T: int, layer: int, position: int, n_alphas: int = 11) -> int:
    """effects.dose_response: the blocks before ``layer`` once, over the tokens up to ``position``;
    the later blocks once per α (the α values as a batch); the last block's keys and values for the
    earlier rows and its whole block for the final row only; that row through the head per α."""
    rows, d = position + 1, cfg.emb_dim
    before = layer * block(cfg, rows)
    middle = (cfg.n_layers - 1 - layer) * block(cfg, rows, batch=n_alphas)
    last = linear(n_alphas * (rows - 1), d, 3 * d) + block(cfg, 1, keys=rows, batch=n_alphas)
    return before + middle + last + head(cfg, n_alphas)


def head_sweep_layers(cfg: GPTConfig, T: int, layers: int) -> int:
    """effects.head_sweep_layers up to its ``layers``-th yield: the plain forward and its loss readout,
    then for each swept layer l each of its heads zeroed (in batches: the count does not depend on
    their size) and resumed at l through the later blocks, every position but the last through the head."""
    L, H = cfg.n_layers, cfg.n_heads
    total = forward(cfg, T) + head(cfg, T - 1)
    for layer in range(layers):
        total += (L - layer) * block(cfg, T, batch=H) + head(cfg, H * (T - 1))
    return total


def sweep_estimate(cfg: GPTConfig, T: int) -> int:
    """effects.estimate_sweep_seconds: a warm-up forward, one without the head's rows and one with."""
    return 2 * forward(cfg, T, last_token_only=False) + forward(cfg, T)
