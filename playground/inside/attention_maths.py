"""One head's attention for one query position, step by step, each step with its real numbers.

The steps: q, k, q·k, ÷√d, the mask, softmax and the weighted v.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from playground.engine.attention import attend, causal_mask, expand_kv
from playground.inside.interventions import resid_after
from playground.inside.view_checks import check_ids, check_layer, check_position, reserve_logits


def attention_maths(model, ids, layer: int, head: int, position: int) -> dict:
    """One head's attention for one query position, every step with its real numbers.

    ``scores`` = q·k_j, ``scaled`` = q·k_j / √head_dim, ``masked`` the same with None where the
    causal mask forbids (j > position), ``softmax`` the probabilities over all T keys (0 where
    masked) and ``weighted_v`` = Σ_j softmax_j v_j, the head's output at this position (``ctx``
    is what the model itself computed there, for comparison).
    """
    ids = check_ids(ids)
    cfg = model.cfg
    layer = check_layer(layer, cfg.n_layers)
    head = check_layer(head, cfg.n_heads, "Head")
    position = check_position(position, len(ids), "Query position")
    # Only the blocks before ``layer`` run, and of that block its Q/K/V and attention: its out_proj,
    # its MLP, the later blocks and the output head change nothing here.
    with reserve_logits(model, 1, "the attention maths", len(ids)), torch.no_grad():
        idx = torch.tensor([list(ids)], dtype=torch.long, device=model.device)
        block = model.trf_blocks[layer]
        x = resid_after(model, idx, layer)  # (1, T, d)
        q4, k4, v4 = block.att.project_qkv(block.norm1(x) if block.pre_norm else x)  # (1, H, T, hd) each
        group, window = cfg.n_heads // cfg.kv_heads, block.att.window
        k4, v4 = expand_kv(k4, group), expand_kv(v4, group)  # GQA: the key/value head this query head shares
        if window:
            ctx = attend(q4, k4, v4, 0.0, window)  # (1, H, T, hd): the block's own kernel, windowed
        else:
            ctx = F.scaled_dot_product_attention(q4, k4, v4, is_causal=True)  # (1, H, T, hd): the block's own kernel
    q, k, v = (t[0, head].double() for t in (q4, k4, v4))  # (T, hd) each
    qp = q[position]
    scores = k @ qp  # (T,)
    scaled = scores / math.sqrt(cfg.head_dim)
    blocked = causal_mask(len(ids), len(ids), window=window)[position]  # True where j > position (or out of a window)
    masked = scaled.masked_fill(blocked, float("-inf"))
    probs = torch.softmax(masked, dim=-1)
    weighted = probs @ v
    return {
        "layer": layer,
        "head": head,
        "position": position,
        "head_dim": cfg.head_dim,
        "kv_head": head // group,  # with GQA, the key/value head this query head reads (shared by its group)
        "window": window,
        "sqrt_head_dim": math.sqrt(cfg.head_dim),
        "q": qp.tolist(),
        "k": k.tolist(),
        "v": v.tolist(),
        "scores": scores.tolist(),
        "scaled": scaled.tolist(),
        "masked": [None if b else float(s) for s, b in zip(scaled.tolist(), blocked.tolist())],
        "softmax": probs.tolist(),
        "weighted_v": weighted.tolist(),
        "ctx": ctx[0, head, position].double().tolist(),
    }
