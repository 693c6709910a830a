"""Direct logit attribution: how much each part of the model wrote toward one token's logit.

The parts: token and position embeddings, every head, every attention bias, every MLP and the final
norm's shift, at one position.
"""

from __future__ import annotations

import torch

from playground.engine.model import LayerNorm
from playground.engine.norms import RMSNorm
from playground.inside.interventions import run_with_hooks
from playground.inside.view_checks import LensError, check_ids, check_position, reserve_logits, target_or_next


def logit_attribution(model, ids, position: int, target_id: int | None = None) -> dict:
    """How much each part wrote toward one token's logit at one position.

    The residual stream at the end is a sum of parts: token and position embeddings, each head's
    output, each attention's ``out_proj`` bias, each MLP's output. The final LayerNorm is linear in
    its input once its denominator σ = sqrt(var + eps) is frozen at its value for this position
    (the one approximation: it says what each part contributes *given* the others, not what would
    happen without it), so the logit is exactly

        logit = Σ_parts (w_target ⊙ γ / σ) · (part − mean(part)) + w_target · β

    with w_target the target's row of ``out_head``, γ/β the final norm's scale/shift. The parts
    sum to the model's own logit up to float rounding (``total`` against ``model_logit``).

    A final RMSNorm (Llama, Qwen3) is read the same way with rms = √(mean(x²) + eps) frozen instead of σ:
    it neither centres nor shifts, so logit = Σ_parts (w_target ⊙ γ / rms) · part, exactly.
    """
    norm = model.final_norm
    rms = isinstance(norm, RMSNorm)
    if not isinstance(norm, (LayerNorm, RMSNorm)):
        raise LensError(
            "inside.attribution_post_norm",
            "Logit attribution needs a pre-norm model (a final LayerNorm); this one normalises after every "
            "block, so its output is not a sum of parts.",
        )
    ids = check_ids(ids)
    position = check_position(position, len(ids))
    target_id = target_or_next(model, ids, position, target_id)
    with reserve_logits(model, 1, "a logit attribution", position + 1):
        logits, cache = run_with_hooks(model, ids[: position + 1], last_token_only=True)
    cfg, p = model.cfg, position
    dd = torch.float64
    x = cache.resid[-1][0, p].to(dd)
    # LayerNorm divides by σ = √(var + eps) after centring; RMSNorm by √(mean(x²) + eps), without centring.
    sigma = torch.sqrt((x.pow(2).mean() if rms else x.var(unbiased=False)) + norm.eps)
    gamma = norm.scale.detach().to(dd)
    beta = norm.shift.detach().to(dd) if isinstance(norm, LayerNorm) else None
    w = model.out_head.weight.detach()[target_id].to(dd)
    u = w * gamma / sigma  # the direction each part (centred, for LayerNorm) is read along

    def read(vec: torch.Tensor | None) -> float:
        if vec is None:  # a part this model does not have (no bias, no learned positions): it wrote nothing
            return 0.0
        vec = vec.to(dd)
        return float(u @ (vec if rms else vec - vec.mean()))

    hd = cfg.head_dim
    heads, attn_bias, mlps = [], [], []
    for layer, block in enumerate(model.trf_blocks):
        W_O = block.att.out_proj.weight.detach().to(dd)  # (d, d): out × in
        ctx = cache.ctx[layer][0, :, p].to(dd)  # (H, hd)
        heads.append([read(W_O[:, h * hd : (h + 1) * hd] @ ctx[h]) for h in range(cfg.n_heads)])
        bias = block.att.out_proj.bias
        attn_bias.append(read(None if bias is None else bias.detach()))
        mlps.append(read(cache.mlp_out[layer][0, p]))
    tok = read(cache.tok_emb[0, p])
    pos = read(None if cache.pos_emb is None else cache.pos_emb[0, p])  # RoPE turns q and k: nothing added here
    shift = 0.0 if beta is None else float(w @ beta)  # RMSNorm has no shift
    total = tok + pos + sum(map(sum, heads)) + sum(attn_bias) + sum(mlps) + shift
    return {
        "position": position,
        "target_id": target_id,
        "tok_emb": tok,
        "pos_emb": pos,
        "heads": heads,
        "attn_bias": attn_bias,
        "mlp": mlps,
        "final_norm_shift": shift,
        "total": total,
        "model_logit": float(logits[0, -1, target_id]),
        "final_norm_sigma": float(sigma),
        "final_norm": "rmsnorm" if rms else "layernorm",
        "approximation": f"final {'RMSNorm' if rms else 'LayerNorm'}'s {'rms' if rms else 'σ'} frozen at its "
        "value for this position",
    }
