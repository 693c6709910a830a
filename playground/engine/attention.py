"""Causal self-attention: the mask, the fused and per-head modules, the trace of queries and keys.

The fused module has one d->d projection each for Q, K and V; the per-head one a module per head
(same maths, same parameters). Attention probabilities are computed on request from the trace.
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.engine.config import GPTConfig


def causal_mask(q_len: int, k_len: int, device=None) -> torch.Tensor:
    """True where a query may NOT look: the queries are the last ``q_len`` of ``k_len`` positions."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(k_len - q_len + 1)


def attention_probs(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """softmax(Q·Kᵀ/√d + causal mask) in float32: (B, H, Tq, hd), (B, H, Tk, hd) -> (B, H, Tq, Tk)."""
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Tq, Tk)
    scores = scores.masked_fill(causal_mask(q.size(-2), k.size(-2), q.device), float("-inf"))
    return torch.softmax(scores, dim=-1)


class AttentionTrace:
    """Per-layer queries and keys from one forward; attention probabilities computed on request.

    Holding Q and K costs 2·T·emb_dim numbers a layer, where the maps themselves cost n_heads·T²:
    for a full 1024-token GPT-2 small context that is 75 MB against 600 MB.
    """

    def __init__(self) -> None:
        self.queries: list[torch.Tensor] = []  # each (B, n_heads, Tq, head_dim)
        self.keys: list[torch.Tensor] = []  # each (B, n_heads, Tk, head_dim)

    def record(self, q: torch.Tensor, k: torch.Tensor) -> None:
        self.queries.append(q.detach())
        self.keys.append(k.detach())

    @property
    def n_layers(self) -> int:
        return len(self.queries)

    def layer(self, i: int) -> torch.Tensor:
        """Attention probabilities of layer ``i``: (B, n_heads, Tq, Tk), float32, rows sum to 1."""
        return attention_probs(self.queries[i], self.keys[i])

    def all_layers(self) -> list[torch.Tensor]:
        return [self.layer(i) for i in range(self.n_layers)]


def attend(q, k, v, dropout_p: float) -> torch.Tensor:
    """The fast path: fused scaled-dot-product attention with the causal mask for Tq <= Tk."""
    q_len, k_len = q.size(-2), k.size(-2)
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
    viewed as n_heads slices of head_dim."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        d = cfg.emb_dim
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        self.W_query = nn.Linear(d, d, bias=cfg.qkv_bias)
        self.W_key = nn.Linear(d, d, bias=cfg.qkv_bias)
        self.W_value = nn.Linear(d, d, bias=cfg.qkv_bias)
        self.out_proj = nn.Linear(d, d)
        self.dropout = cfg.drop_rate

    def project_qkv(self, x: torch.Tensor):
        B, T, _ = x.shape
        q = self.W_query(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        k = self.W_key(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        v = self.W_value(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        return q, k, v

    def forward(self, x, layer_cache=None, trace: AttentionTrace | None = None, hooks=None):
        B, T, d = x.shape
        q, k, v = self.project_qkv(x)
        if layer_cache is not None:
            k, v = layer_cache.append(k, v)  # (B, H, T_cached + T, hd)
        if trace is not None:
            trace.record(q, k)
        if hooks is None:
            ctx = attend(q, k, v, self.dropout if self.training else 0.0)  # (B, H, T, hd)
        else:  # playground.inside.interventions: capture / ablate / scale heads, or lift the mask
            ctx = hooks.attend(q, k, v)  # (B, H, T, hd)
        ctx = ctx.transpose(1, 2).reshape(B, T, d)  # (B, T, emb_dim)
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

    def __init__(self, cfg: GPTConfig):
        nn.Module.__init__(self)
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        self.heads = nn.ModuleList(CausalAttention(cfg) for _ in range(cfg.n_heads))
        self.out_proj = nn.Linear(cfg.emb_dim, cfg.emb_dim)
        self.dropout = cfg.drop_rate

    def project_qkv(self, x: torch.Tensor):
        heads = cast(list[CausalAttention], list(self.heads))
        q = torch.stack([h.W_query(x) for h in heads], dim=1)  # (B, H, T, hd)
        k = torch.stack([h.W_key(x) for h in heads], dim=1)  # (B, H, T, hd)
        v = torch.stack([h.W_value(x) for h in heads], dim=1)  # (B, H, T, hd)
        return q, k, v
