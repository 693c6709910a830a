"""The output head as the native step of a float32 model reads it: packed in tiles of 16 vocabulary rows.

decode_step.cpp's ``head_tiles.cpp`` sums every logit as one chain of fused multiply-adds over its columns in
order, 16 logits a vector; for that each tile's column c holds the tile's 16 rows' weights of column c, side by
side. ``native_decode`` makes this copy where the model's step is chosen and packs it again when the head
changes in place; ``accel.copies`` counts it.
"""

from __future__ import annotations

import torch

from playground.runtime import huge_pages

HEAD_TILE = 16  # vocabulary rows a tile (head_tiles.cpp's HEAD_TILE)


def packed_head_bytes(cfg) -> int:
    """The packed head's size for a float32 model of ``cfg``: the vocabulary in whole tiles of 16 rows."""
    return -(-cfg.vocab_size // HEAD_TILE) * HEAD_TILE * cfg.emb_dim * 4


def packed_head(weight: torch.Tensor) -> torch.Tensor:
    """The output head (vocab, d) as decode_step.cpp's head_tiles.cpp reads it: tiles of 16 vocabulary rows,
    each tile's column c the 16 rows' weights of column c, side by side (the last tile padded with zero rows),
    on 2 MB pages where the OS gives them. Every token streams it front to back."""
    vocab, d = weight.shape
    tiles, whole = -(-vocab // HEAD_TILE), vocab // HEAD_TILE
    shape = torch.empty(tiles, d, HEAD_TILE, device="meta")  # (tile, column, row of the tile)
    out = (huge_pages.empty_like_all([shape]) or [torch.empty(shape.shape)])[0]
    with torch.no_grad():  # copied from views of the weight: no second copy of it at any moment
        w = weight.detach()
        out[:whole].copy_(w[: whole * HEAD_TILE].view(whole, HEAD_TILE, d).transpose(1, 2))
        if whole < tiles:
            out[whole:].zero_()
            out[whole, :, : vocab - whole * HEAD_TILE].copy_(w[whole * HEAD_TILE :].t())
    return out
