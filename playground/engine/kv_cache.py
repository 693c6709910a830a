"""The KV cache: every layer's keys and values, preallocated for as many positions as a run can reach.

The KV cache: keys and values of every layer, preallocated (for the whole context, or for the positions
one generation can reach: its prompt and new tokens), so a decode step computes one new row per layer
instead of re-running the whole sequence.
"""

from __future__ import annotations

import torch

from playground.engine.config import GPTConfig


class LayerKVCache:
    def __init__(self, owner: KVCache, index: int):
        self.owner, self.index = owner, index
        # This layer's slabs, (B, H, capacity, hd), viewed once: a decode step then costs one
        # narrow + copy per tensor instead of a chain of indexing ops.
        self.k, self.v = owner.k[index], owner.v[index]

    def append(self, k: torch.Tensor, v: torch.Tensor):
        start = self.owner.length
        n = k.size(-2)
        self.k.narrow(2, start, n).copy_(k)
        self.v.narrow(2, start, n).copy_(v)
        return self.k.narrow(2, 0, start + n), self.v.narrow(2, 0, start + n)  # (B, K, start + n, hd)


class KVCache:
    """Preallocated keys and values for every layer: (n_layers, B, n_kv_heads, capacity, head_dim).

    The model writes new positions in place and advances ``length`` once per forward, so a decode
    step costs one new row per layer instead of re-running the whole sequence. ``capacity`` is the
    positions it holds: the whole context by default, fewer for a run that can never reach it (GPT-2
    small's full context is 75 MB a run; a 32-token prompt and 64 new tokens need 7 MB of it). With
    grouped-query attention it holds n_kv_heads heads, not n_heads: the memory GQA saves is here.
    """

    def __init__(
        self, cfg: GPTConfig, batch_size: int = 1, device=None, dtype=torch.float32, capacity: int | None = None
    ):
        capacity = cfg.context_length if capacity is None else int(capacity)
        if not 1 <= capacity <= cfg.context_length:
            raise ValueError(f"a KV cache holds 1..{cfg.context_length} positions, got {capacity}")
        shape = (cfg.n_layers, batch_size, cfg.kv_heads, capacity, cfg.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0
        self.capacity = capacity
        self.layers = [LayerKVCache(self, i) for i in range(cfg.n_layers)]

    def reset(self) -> None:
        self.length = 0

    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes
