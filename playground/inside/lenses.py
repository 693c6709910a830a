"""Logit lens, direct logit attribution, attention maths, interventions' effects, head sweep.

What each layer already knows, which part wrote what, how one head's attention is computed,
and what changes when parts are switched off: pure functions of a model and token ids (no gradio).

Every function takes the ids of one context window (positions 0..T-1 of that window) and returns
plain numbers (lists and floats), so the UI, the API and the tests read the same values.

- ``logit_lens``: the residual stream after the embeddings and after each block, read through
  ``final_norm`` and ``out_head`` -- the top token and the probability of the actual next token
  at every layer × position. Its last row is the model's own output.
- ``lens_cell``: the top-10 at one layer and position, and KL(final ‖ that layer).
- ``logit_attribution``: direct logit attribution of one position's logit for one token to the
  embeddings, every head, every attention bias, every MLP and the final norm's shift.
- ``attention_maths``: q, k, q·k, ÷√d, the mask, softmax and the weighted v of one head.
- ``compare``, ``dose_response``, ``head_sweep``: interventions (playground.inside.interventions).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.nn.functional as F

from playground.engine.model import LayerNorm, causal_mask
from playground.engine.readout import CHUNK_ROWS, HeadReader, RowFigures
from playground.errors import UserError
from playground.inside.interventions import (
    Hooks,
    Intervention,
    InterventionError,
    check_alpha,
    resid_after,
    run_from,
    run_with_hooks,
)
from playground.runtime.memory import BUDGET

SWEEP_LIMIT_S = 60.0
TOP_K = 10
LENS_CHUNK_ROWS = 512  # logit rows read out at once: 100 MB for GPT-2's vocabulary


class LensError(UserError):
    """A request the lenses cannot answer (bad position, target, layer...); for the user."""


def _window_error(first, stop, T: int) -> LensError:
    return LensError(
        "inside.lens_window",
        "The lens window must lie in positions 0–{last}, got {first!r}–{stop!r}.",
        last=T - 1,
        first=first,
        stop=stop,
    )


class SweepTooLongError(LensError):
    """A head sweep estimated to take longer than the limit; ``estimate_s`` says how long."""

    def __init__(self, key: str, template: str, /, **fields):
        super().__init__(key, template, **fields)
        self.estimate_s = fields["estimate"]


# ----------------------------------------------------------------------------------------------
# Checking input


def _ids(ids) -> list[int]:
    ids = [int(i) for i in ids]
    if not ids:
        raise LensError("inside.no_tokens", "Generate first: there are no tokens to look at.")
    return ids


def _position(position, T: int, name: str = "Position") -> int:
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < T:
        raise LensError(
            "inside.position_range",
            "{name} must be a whole number from 0 to {last}, got {value!r}.",
            name=name,
            last=T - 1,
            value=position,
        )
    return position


def _layer(layer, n: int, name: str = "Layer") -> int:
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
        raise LensError(
            "inside.layer_range",
            "{name} must be a whole number from 0 to {last}, got {value!r}.",
            name=name,
            last=n - 1,
            value=layer,
        )
    return layer


def check_target(model, target_id) -> int:
    V = model.cfg.vocab_size
    if isinstance(target_id, bool) or not isinstance(target_id, int) or not 0 <= target_id < V:
        raise LensError(
            "inside.target_id_range",
            "The target token id must be a whole number from 0 to {last:,}, got {value!r}.",
            last=V - 1,
            value=target_id,
        )
    return target_id


def _target(model, ids: list[int], position: int, target_id) -> int:
    """The token whose logit is explained: the one that came next, unless one is given."""
    if target_id is None:
        if position + 1 >= len(ids):
            raise LensError("inside.last_no_next", "The last position has no next token: type a target token.")
        target_id = ids[position + 1]
    return check_target(model, target_id)


def resolve_target(tokenizer, text: str) -> int:
    """The single token ``text`` encodes to; LensError when it is empty or more than one token."""
    if not isinstance(text, str) or text == "":
        raise LensError("inside.target_missing", "Type the target token (for example ' the' or '\\n').")
    text = text.replace("\\n", "\n")
    ids = tokenizer.encode(text)
    if len(ids) != 1:
        pieces = " + ".join(repr(tokenizer.decode([i])) for i in ids)
        raise LensError(
            "inside.target_not_one",
            "The target must be exactly one token; {text!r} is {n} tokens ({pieces}). A leading space is part "
            "of the token: ' the' is one token, 'the ' is two.",
            text=text,
            n=len(ids),
            pieces=pieces,
        )
    return ids[0]


def _reserve_logits(model, rows: int, what: str, captured_tokens: int = 0):
    """Held in the memory budget while a view computes: a few copies of ``rows`` float32 logit
    rows (softmax, log-softmax), and what a capturing forward of ``captured_tokens`` keeps (the
    residual stream of every layer, each layer's head outputs and MLP outputs: 3·(L+1)·T·d)."""
    cfg = model.cfg
    capture = 3 * (cfg.n_layers + 1) * captured_tokens * cfg.emb_dim * 4
    return BUDGET.reserve(4 * rows * cfg.vocab_size * 4 + capture, what, "lens")


def _read_out(model, resid: torch.Tensor) -> torch.Tensor:
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
    ids = _ids(ids)
    T = len(ids)
    stop = T if stop is None else stop
    if isinstance(first, bool) or not isinstance(first, int) or not isinstance(stop, int) or not 0 <= first < stop <= T:
        raise _window_error(first, stop, T)
    causal = not (intervention and intervention.changes_causality)
    with _reserve_logits(
        model, min(LENS_CHUNK_ROWS, (model.cfg.n_layers + 1) * (stop - first)), f"the logit lens of {T:,} tokens", T
    ):
        _, cache = run_with_hooks(model, ids[:stop] if causal else ids, intervention, last_token_only=True)
        out = lens_from_cache(model, cache, ids, first, stop)
    return out


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
    ids = _ids(ids)
    layer = _layer(layer, model.cfg.n_layers + 1, "Lens layer")
    position = _position(position, len(ids))
    with _reserve_logits(model, 2, "a logit-lens cell", len(ids)):
        _, cache = run_with_hooks(
            model,
            ids[: position + 1] if not (intervention and intervention.changes_causality) else ids,
            intervention,
            last_token_only=True,
        )
    logp = torch.log_softmax(_read_out(model, cache.resid[layer][0, position]).double(), dim=-1)
    final = torch.log_softmax(_read_out(model, cache.resid[-1][0, position]).double(), dim=-1)
    kl = float((final.exp() * (final - logp)).sum())
    p, i = logp.exp().topk(k)
    return {
        "layer": layer,
        "position": position,
        "top": [[int(t), float(q)] for t, q in zip(i, p)],
        "kl_to_final_nats": max(0.0, kl),
    }


# ----------------------------------------------------------------------------------------------
# Direct logit attribution


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
    """
    if not isinstance(model.final_norm, LayerNorm):
        raise LensError(
            "inside.attribution_post_norm",
            "Logit attribution needs a pre-norm model (a final LayerNorm); this one normalises after every "
            "block, so its output is not a sum of parts.",
        )
    ids = _ids(ids)
    position = _position(position, len(ids))
    target_id = _target(model, ids, position, target_id)
    with _reserve_logits(model, 1, "a logit attribution", position + 1):
        logits, cache = run_with_hooks(model, ids[: position + 1], last_token_only=True)
    cfg, p = model.cfg, position
    dd = torch.float64
    x = cache.resid[-1][0, p].to(dd)
    sigma = torch.sqrt(x.var(unbiased=False) + model.final_norm.eps)
    gamma, beta = model.final_norm.scale.detach().to(dd), model.final_norm.shift.detach().to(dd)
    w = model.out_head.weight.detach()[target_id].to(dd)
    u = w * gamma / sigma  # the direction each centred part is read along

    def read(vec: torch.Tensor) -> float:
        vec = vec.to(dd)
        return float(u @ (vec - vec.mean()))

    hd = cfg.head_dim
    heads, attn_bias, mlps = [], [], []
    for layer, block in enumerate(model.trf_blocks):
        W_O = block.att.out_proj.weight.detach().to(dd)  # (d, d): out × in
        ctx = cache.ctx[layer][0, :, p].to(dd)  # (H, hd)
        heads.append([read(W_O[:, h * hd : (h + 1) * hd] @ ctx[h]) for h in range(cfg.n_heads)])
        attn_bias.append(read(block.att.out_proj.bias.detach()))
        mlps.append(read(cache.mlp_out[layer][0, p]))
    tok, pos = read(cache.tok_emb[0, p]), read(cache.pos_emb[0, p])
    shift = float(w @ beta)
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
        "approximation": "final LayerNorm's σ frozen at its value for this position",
    }


# ----------------------------------------------------------------------------------------------
# Attention, step by step


def attention_maths(model, ids, layer: int, head: int, position: int) -> dict:
    """One head's attention for one query position, every step with its real numbers.

    ``scores`` = q·k_j, ``scaled`` = q·k_j / √head_dim, ``masked`` the same with None where the
    causal mask forbids (j > position), ``softmax`` the probabilities over all T keys (0 where
    masked) and ``weighted_v`` = Σ_j softmax_j v_j, the head's output at this position (``ctx``
    is what the model itself computed there, for comparison).
    """
    ids = _ids(ids)
    cfg = model.cfg
    layer = _layer(layer, cfg.n_layers)
    head = _layer(head, cfg.n_heads, "Head")
    position = _position(position, len(ids), "Query position")
    with _reserve_logits(model, 1, "the attention maths", len(ids)):
        _, cache = run_with_hooks(model, ids, capture=True, capture_qkv=(layer,), last_token_only=True)
    q, k, v = (t[0, head].double() for t in cache.qkv[layer])  # (T, hd) each
    qp = q[position]
    scores = k @ qp  # (T,)
    scaled = scores / math.sqrt(cfg.head_dim)
    blocked = causal_mask(len(ids), len(ids))[position]  # True where j > position
    masked = scaled.masked_fill(blocked, float("-inf"))
    probs = torch.softmax(masked, dim=-1)
    weighted = probs @ v
    return {
        "layer": layer,
        "head": head,
        "position": position,
        "head_dim": cfg.head_dim,
        "sqrt_head_dim": math.sqrt(cfg.head_dim),
        "q": qp.tolist(),
        "k": k.tolist(),
        "v": v.tolist(),
        "scores": scores.tolist(),
        "scaled": scaled.tolist(),
        "masked": [None if b else float(s) for s, b in zip(scaled.tolist(), blocked.tolist())],
        "softmax": probs.tolist(),
        "weighted_v": weighted.tolist(),
        "ctx": cache.ctx[layer][0, head, position].double().tolist(),
    }


# ----------------------------------------------------------------------------------------------
# Interventions: before and after


def token_losses(logits: torch.Tensor, ids: list[int]) -> list[float]:
    """−log p(ids[t+1]) at every position t < T−1, in nats."""
    target = torch.tensor(ids[1:], dtype=torch.long)
    return F.cross_entropy(logits[0, :-1].float(), target, reduction="none").tolist()


def compare(
    model,
    ids,
    intervention: Intervention,
    position: int,
    k: int = TOP_K,
    lens: bool = True,
    lens_window: tuple[int, int] | None = None,
) -> dict:
    """The same tokens with and without the intervention: the next-token distribution at
    ``position`` (the top-k of either, with both probabilities), the per-position loss on the
    run's own tokens, and (``lens``) the logit lens after the intervention over ``lens_window``
    (first, stop) positions (default: all), read from the same forward.

    The intervened forward resumes from the plain one's residual stream at the first block the
    intervention changes (the blocks before it compute the same thing twice otherwise)."""
    ids = _ids(ids)
    position = _position(position, len(ids))
    intervention = (intervention or Intervention()).validate(model.cfg)
    T = len(ids)
    if lens:
        first, stop = lens_window or (0, T)
        if not 0 <= first < stop <= T:
            raise _window_error(first, stop, T)
    with _reserve_logits(model, 2 * CHUNK_ROWS, f"an intervention on {T:,} tokens", 2 * T), torch.no_grad():
        idx = torch.tensor([ids], dtype=torch.long, device=model.device)
        _, before = run_with_hooks(model, idx, last_token_only=True)
        start = intervention.first_layer
        if start is None:
            after = before
        elif intervention.drop_pos_emb:
            _, after = run_with_hooks(model, idx, intervention, last_token_only=True)
        else:
            _, after = run_from(model, start, before.resid, intervention)
        reader = HeadReader(model)
        targets = ids[1:] + [0]
        fb = reader(before.resid[-1][0], targets, norm=True)
        fa = reader(after.resid[-1][0], targets, norm=True)
        pb = torch.softmax(_read_out(model, before.resid[-1][0, position]).double(), -1)
        pa = torch.softmax(_read_out(model, after.resid[-1][0, position]).double(), -1)
        shown = list(dict.fromkeys(pb.topk(k).indices.tolist() + pa.topk(k).indices.tolist()))
        shown.sort(key=lambda t: -max(float(pb[t]), float(pa[t])))
        out: dict[str, Any] = {
            "position": position,
            "intervention": intervention.to_dict(),
            "shown_ids": shown,
            "before": [float(pb[t]) for t in shown],
            "after": [float(pa[t]) for t in shown],
            "loss_before": (-fb.target_logp[: T - 1]).tolist(),
            "loss_after": (-fa.target_logp[: T - 1]).tolist(),
        }
        if lens:
            out["lens_after"] = lens_from_cache(model, after, ids, first, stop, final=fa)
        del before, after
    n = max(1, T - 1)
    out["mean_loss_before"] = sum(out["loss_before"]) / n
    out["mean_loss_after"] = sum(out["loss_after"]) / n
    return out


def dose_response(model, ids, layer: int, head: int, position: int, target_id: int | None = None, alphas=None) -> dict:
    """log p(target) at ``position`` as one head's output is scaled by α (default 0, 0.2, …, 2).

    Only the tokens up to ``position`` are run (the model is causal), the blocks before ``layer``
    once and plainly (they do not depend on α), and the rest with every α as one batch, resumed
    from the residual stream at ``layer`` -- TransformerLens's "start at layer". The last block
    computes attention and MLP for the final row only (the one whose logits are read); the other
    rows give it keys and values."""
    ids = _ids(ids)
    cfg = model.cfg
    layer = _layer(layer, cfg.n_layers)
    head = _layer(head, cfg.n_heads, "Head")
    position = _position(position, len(ids))
    target_id = _target(model, ids, position, target_id)
    alphas = [round(0.2 * i, 10) for i in range(11)] if alphas is None else [check_alpha(a) for a in alphas]
    gain = torch.ones(cfg.n_layers, len(alphas), cfg.n_heads)
    gain[layer, :, head] = torch.tensor(alphas)
    with _reserve_logits(model, len(alphas), "a dose-response curve", (len(alphas) + 1) * (position + 1)):
        hooks = Hooks(cfg, capture=False, head_gain=gain)
        with torch.no_grad():
            idx = torch.tensor([ids[: position + 1]], dtype=torch.long, device=model.device)
            x = resid_after(model, idx, layer).expand(len(alphas), -1, -1)  # (n_alphas, position + 1, d)
            for i in range(layer, cfg.n_layers - 1):
                x = model.trf_blocks[i](x, None, None, hooks.layer(i))
            x = last_row_block(model.trf_blocks[-1], x, hooks.layer(cfg.n_layers - 1))  # (n_alphas, 1, d)
            logits = model.out_head(model.final_norm(x))  # (n_alphas, 1, V)
        logp = torch.log_softmax(logits[:, -1].float(), dim=-1)[:, target_id]
    return {
        "layer": layer,
        "head": head,
        "position": position,
        "target_id": target_id,
        "alphas": alphas,
        "logprob": logp.tolist(),
    }


class _Prefilled:
    """A layer's keys and values of the earlier rows, handed to the attention like a KV cache."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor):
        self.k, self.v = k, v

    def append(self, k: torch.Tensor, v: torch.Tensor):
        return torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)  # (B, H, T, hd)


def last_row_block(block, x: torch.Tensor, hooks=None) -> torch.Tensor:
    """``block(x)[:, -1:]`` computing only what the last row needs: keys and values of every row,
    the query, attention, out_proj and MLP of the last one."""
    if x.size(1) == 1:
        return block(x, None, None, hooks)
    earlier = x[:, :-1]
    _, k, v = block.att.project_qkv(block.norm1(earlier) if block.pre_norm else earlier)  # (B, H, T-1, hd)
    return block(x[:, -1:], _Prefilled(k, v), None, hooks)


def estimate_sweep_seconds(model, ids) -> tuple[float, float]:
    """(seconds for one plain forward of ``ids``, estimated seconds for a sweep of every head).
    The sweep resumes each layer's heads at that layer, so its blocks cost n_heads · (n_layers + 1)
    / 2 forwards' worth on average, but every ablation reads all positions out through the head:
    both parts are timed (a forward with and without the head's product for every row)."""
    idx = torch.tensor([_ids(ids)], dtype=torch.long, device=model.device)
    with torch.no_grad():
        model(idx)  # warm
        t0 = time.perf_counter()
        model(idx, last_token_only=True)
        blocks = time.perf_counter() - t0
        t0 = time.perf_counter()
        model(idx)
        one = time.perf_counter() - t0
    L, H = model.cfg.n_layers, model.cfg.n_heads
    return one, blocks * H * (L + 1) / 2 + max(0.0, one - blocks) * L * H


def head_sweep(model, ids, *, limit_s: float = SWEEP_LIMIT_S, progress=None, batch: int | None = None) -> dict:
    """Zero each head in turn; Δ mean loss (nats) on the run's own tokens, layers × heads.

    Refused with SweepTooLongError (and the estimate) when one timed forward says the sweep would
    take longer than ``limit_s``. ``progress(fraction, text)`` is called as batches finish. A
    layer's heads run as one batch resumed from the plain forward's residual stream at that
    layer (the blocks before it do not change when one of its heads is zeroed)."""
    ids = _ids(ids)
    if len(ids) < 2:
        raise LensError("inside.sweep_short", "The head sweep needs at least two tokens (a loss needs a next token).")
    cfg = model.cfg
    one, estimate = estimate_sweep_seconds(model, ids)
    if estimate > limit_s:
        raise SweepTooLongError(
            "inside.sweep_too_long",
            "Zeroing each of the {heads} heads in turn would take about {estimate:.0f} s on this machine "
            "({ms:.0f} ms a forward of {tokens:,} tokens); the limit is {limit_s:.0f} s. Shorten the run or "
            "use a smaller model.",
            heads=cfg.n_layers * cfg.n_heads,
            estimate=estimate,
            ms=one * 1000,
            tokens=len(ids),
            limit_s=limit_s,
        )
    T, L, H = len(ids), cfg.n_layers, cfg.n_heads
    if batch is None:  # a batch's activations stay modest; logits are read in chunks (readout)
        batch = max(1, min(H, 4096 // T))
    target = ids[1:]
    delta = [[0.0] * H for _ in range(L)]
    done, total = 0, L * H
    with _reserve_logits(model, CHUNK_ROWS, "the head-importance sweep", batch * T), torch.no_grad():
        idx = torch.tensor([ids], dtype=torch.long, device=model.device)
        _, plain = run_with_hooks(model, idx, last_token_only=True)
        reader = HeadReader(model)
        base = float((-reader(plain.resid[-1][0, :-1], target, norm=True).target_logp).mean())
        t0 = time.perf_counter()
        for layer in range(L):
            for start in range(0, H, batch):
                heads = list(range(start, min(H, start + batch)))
                gain = torch.ones(L, len(heads), H)
                for row, h in enumerate(heads):
                    gain[layer, row, h] = 0.0
                resid = plain.resid[:layer] + [plain.resid[layer].expand(len(heads), -1, -1)]
                x, _ = run_from(model, layer, resid, capture=False, head_gain=gain)  # (b, T, d)
                f = reader(x[:, :-1].reshape(-1, cfg.emb_dim), target * len(heads), norm=True)
                losses = (-f.target_logp).view(len(heads), T - 1).mean(dim=1)
                for row, h in enumerate(heads):
                    delta[layer][h] = float(losses[row]) - base
                done += len(heads)
                if progress is not None:
                    progress(done / total, f"{done}/{total} heads")
    return {
        "base_loss": base,
        "delta_loss": delta,
        "seconds": time.perf_counter() - t0,
        "estimate_s": estimate,
        "n_tokens": T,
    }


__all__ = [
    "Intervention",
    "InterventionError",
    "LensError",
    "SweepTooLongError",
    "attention_maths",
    "compare",
    "dose_response",
    "head_sweep",
    "layer_names",
    "lens_cell",
    "logit_attribution",
    "logit_lens",
    "resolve_target",
    "token_losses",
]
