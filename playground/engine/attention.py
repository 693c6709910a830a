"""Causal self-attention: the mask, the fused and per-head modules, the trace of queries and keys.

The fused module has one d->d projection each for Q, K and V; the per-head one a module per head
(same maths, same parameters). Attention probabilities are computed on request from the trace.

Since GPT-2, by config (each off by default): grouped-query attention (``n_kv_heads`` key/value heads,
each shared by n_heads / n_kv_heads query heads), RMSNorm on each head's query and key (``qk_norm``),
rotary positions turning queries and keys (``pos_encoding="rope"``), and a sliding window over the
last positions (``sliding_window``).
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.engine.config import GPTConfig
from playground.engine.kv_cache import LayerKVCache
from playground.engine.norms import RMSNorm
from playground.engine.rotary import RotaryEmbedding


def causal_mask(q_len: int, k_len: int, device=None, window: int = 0) -> torch.Tensor:
    """True where a query may NOT look: the queries are the last ``q_len`` of ``k_len`` positions. With a
    ``window``, a query at position p also may not look at keys at p − window or before."""
    mask = torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(k_len - q_len + 1)
    if window:
        mask |= torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(k_len - q_len - window)
    return mask


def attention_probs(q: torch.Tensor, k: torch.Tensor, window: int = 0) -> torch.Tensor:
    """softmax(Q·Kᵀ/√d + causal mask) in float32: (B, H, Tq, hd), (B, H, Tk, hd) -> (B, H, Tq, Tk)."""
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Tq, Tk)
    scores = scores.masked_fill(causal_mask(q.size(-2), k.size(-2), q.device, window), float("-inf"))
    return torch.softmax(scores, dim=-1)


def expand_kv(t: torch.Tensor, group: int) -> torch.Tensor:
    """(B, K, T, hd) key or value heads -> (B, K · group, T, hd): query head h reads key/value head h // group."""
    return t if group == 1 else t.repeat_interleave(group, dim=1)


def positions_before(layer_cache) -> int:
    """How many positions precede the new ones: a KV cache's length, or the keys a view prefilled."""
    if layer_cache is None:
        return 0
    if isinstance(layer_cache, LayerKVCache):
        return layer_cache.owner.length
    return layer_cache.k.size(2)  # inside/: a layer's earlier keys handed in like a cache


class AttentionTrace:
    """Per-layer queries and keys from one forward; attention probabilities computed on request.

    Holding Q and K costs 2·T·emb_dim numbers a layer, where the maps themselves cost n_heads·T²:
    for a full 1024-token GPT-2 small context that is 75 MB against 600 MB.
    """

    def __init__(self) -> None:
        self.queries: list[torch.Tensor] = []  # each (B, n_heads, Tq, head_dim)
        self.keys: list[torch.Tensor] = []  # each (B, n_heads, Tk, head_dim): with GQA, each query head's
        self.windows: list[int] = []  # each layer's sliding window (0: none)
        self.groups: list[int] = []  # query heads per key/value head (1: GPT-2; n_heads / n_kv_heads with GQA)

    def record(self, q: torch.Tensor, k: torch.Tensor, window: int = 0, group: int = 1) -> None:
        self.queries.append(q.detach())
        self.keys.append(k.detach())
        self.windows.append(window)
        self.groups.append(group)

    @property
    def n_layers(self) -> int:
        return len(self.queries)

    def layer(self, i: int) -> torch.Tensor:
        """Attention probabilities of layer ``i``: (B, n_heads, Tq, Tk), float32, rows sum to 1."""
        return attention_probs(self.queries[i], self.keys[i], self.window(i))

    def window(self, i: int) -> int:
        return self.windows[i] if i < len(self.windows) else 0

    def all_layers(self) -> list[torch.Tensor]:
        return [self.layer(i) for i in range(self.n_layers)]


def attend(q, k, v, dropout_p: float, window: int = 0) -> torch.Tensor:
    """The fast path: fused scaled-dot-product attention with the causal mask for Tq <= Tk."""
    q_len, k_len = q.size(-2), k.size(-2)
    if window and window < k_len:  # some keys are out of the window
        if q_len == 1:  # one query sees exactly the last `window` keys
            return _attend_one_query(q, k[..., -window:, :], v[..., -window:, :], dropout_p)
        allowed = ~causal_mask(q_len, k_len, q.device, window)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout_p)
    if q_len == 1:
        return _attend_one_query(q, k, v, dropout_p)
    if q_len == k_len:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
    allowed = ~causal_mask(q_len, k_len, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout_p)


def _attend_one_query(q, k, v, dropout_p: float) -> torch.Tensor:
    """One new token sees every cached position: no mask."""
    if q.dtype != torch.float32 and q.device.type == "cpu":
        # The CPU kernel for a single low-precision query is slow (bfloat16, 1024 keys: ~4x
        # the time of float32 on upcast copies); float32 is also the more exact of the two.
        out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), dropout_p=dropout_p)
        return out.to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)


class MultiHeadAttention(nn.Module):
    """Causal multi-head attention, "logical split": one d->d projection each for Q, K and V,
    viewed as n_heads slices of head_dim. With grouped-query attention W_key and W_value have only
    n_kv_heads slices, each read by a group of query heads."""

    def __init__(self, cfg: GPTConfig, layer: int = 0):
        super().__init__()
        d, H, K, hd = cfg.emb_dim, cfg.n_heads, cfg.kv_heads, cfg.head_dim
        self.n_heads, self.n_kv_heads, self.head_dim = H, K, hd
        self.W_query = nn.Linear(d, H * hd, bias=cfg.qkv_bias)
        self.W_key = nn.Linear(d, K * hd, bias=cfg.qkv_bias)
        self.W_value = nn.Linear(d, K * hd, bias=cfg.qkv_bias)
        self.out_proj = nn.Linear(H * hd, d, bias=cfg.bias)
        self._since_gpt2(cfg, layer)

    def _since_gpt2(self, cfg: GPTConfig, layer: int) -> None:
        """The parts GPT-2 lacks, present only when switched on (a GPT-2 module tree stays as it was)."""
        self.dropout = cfg.drop_rate
        self.window = cfg.windowed(layer)  # 0: every earlier position
        self.uses_qk_norm, self.uses_rope = cfg.qk_norm, cfg.pos_encoding == "rope"
        if cfg.qk_norm:  # Qwen3: each head's query and key normalised before RoPE
            self.q_norm = RMSNorm(cfg.head_dim, cfg.ln_eps)
            self.k_norm = RMSNorm(cfg.head_dim, cfg.ln_eps)
        if cfg.pos_encoding == "rope":
            self.rotary = RotaryEmbedding(cfg.head_dim, cfg.rope_theta, cfg.rope_llama3)

    def project_qkv(self, x: torch.Tensor, start: int = 0):
        """Q (B, H, T, hd), K and V (B, K, T, hd) of the positions start … start + T − 1."""
        B, T, _ = x.shape
        q = self.W_query(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        k = self.W_key(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, K, T, hd)
        v = self.W_value(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, K, T, hd)
        return (*self.position(q, k, start), v)

    def position(self, q: torch.Tensor, k: torch.Tensor, start: int):
        """QK-norm, then the rotary positions; both off in GPT-2 (whose positions are in the input)."""
        if self.uses_qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.uses_rope:
            q, k = self.rotary(q, start), self.rotary(k, start)
        return q, k

    def forward(self, x, layer_cache=None, trace: AttentionTrace | None = None, hooks=None):
        B, T, _ = x.shape
        start = positions_before(layer_cache) if self.uses_rope else 0
        q, k, v = self.project_qkv(x, start) if start else self.project_qkv(x)
        if layer_cache is not None:
            k, v = layer_cache.append(k, v)  # (B, K, T_cached + T, hd)
        group = self.n_heads // self.n_kv_heads
        # (B, H, T_cached + T, hd): one per query head (a view's prefilled keys may come expanded already)
        k, v = expand_kv(k, self.n_heads // k.size(1)), expand_kv(v, self.n_heads // v.size(1))
        if trace is not None:
            trace.record(q, k, self.window, group)
        if hooks is None:
            ctx = attend(q, k, v, self.dropout if self.training else 0.0, self.window)  # (B, H, T, hd)
        else:  # playground.inside.interventions: capture / ablate / scale heads, or lift the mask
            ctx = hooks.attend(q, k, v, self.window) if self.window else hooks.attend(q, k, v)  # (B, H, T, hd)
        ctx = ctx.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)  # (B, T, H · hd)
        return self.out_proj(ctx)


class CausalAttention(nn.Module):
    """One attention head with its own W_query / W_key / W_value (emb_dim -> head_dim)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.W_query = nn.Linear(cfg.emb_dim, cfg.head_dim, bias=cfg.qkv_bias)
        self.W_key = nn.Linear(cfg.emb_dim, cfg.head_dim, bias=cfg.qkv_bias)
        self.W_value = nn.Linear(cfg.emb_dim, cfg.head_dim, bias=cfg.qkv_bias)


class MultiHeadAttentionWrapper(MultiHeadAttention):
    """Causal multi-head attention, "physical split": a list of single-head modules whose outputs
    are concatenated. Same maths and parameter count as the fused version."""

    def __init__(self, cfg: GPTConfig, layer: int = 0):
        nn.Module.__init__(self)
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_heads, cfg.head_dim
        self.heads = nn.ModuleList(CausalAttention(cfg) for _ in range(cfg.n_heads))
        self.out_proj = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.emb_dim, bias=cfg.bias)
        self._since_gpt2(cfg, layer)

    def project_qkv(self, x: torch.Tensor, start: int = 0):
        heads = cast(list[CausalAttention], list(self.heads))
        q = torch.stack([h.W_query(x) for h in heads], dim=1)  # (B, H, T, hd)
        k = torch.stack([h.W_key(x) for h in heads], dim=1)  # (B, H, T, hd)
        v = torch.stack([h.W_value(x) for h in heads], dim=1)  # (B, H, T, hd)
        return (*self.position(q, k, start), v)
