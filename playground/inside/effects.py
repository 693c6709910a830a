"""What changes when parts of the model are switched off or scaled: interventions' effects.

An intervention's before and after (``compare``), one head scaled by α (``dose_response``), and
every head zeroed in turn (``head_sweep``).
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

from playground.engine.readout import CHUNK_ROWS, HeadReader, reading_bytes
from playground.inside.interventions import (
    Hooks,
    Intervention,
    StopRequested,
    check_alpha,
    resid_after,
    run_from,
    run_with_hooks,
)
from playground.inside.lenses import TOP_K, lens_from_cache, read_out
from playground.inside.view_checks import (
    LensError,
    capture_bytes,
    check_ids,
    check_layer,
    check_position,
    reserve_logits,
    target_or_next,
    window_error,
)
from playground.runtime.memory import BUDGET

SWEEP_LIMIT_S = 60.0


class SweepTooLongError(LensError):
    """A head sweep estimated to take longer than the limit; ``estimate_s`` says how long."""

    def __init__(self, key: str, template: str, /, **fields):
        super().__init__(key, template, **fields)
        self.estimate_s = fields["estimate"]


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
    ids = check_ids(ids)
    position = check_position(position, len(ids))
    intervention = (intervention or Intervention()).validate(model.cfg)
    T = len(ids)
    if lens:
        first, stop = lens_window or (0, T)
        if not 0 <= first < stop <= T:
            raise window_error(first, stop, T)
    # Two captures, the readouts one after the other (each a tile of the vocabulary at a time), and the two
    # distributions at ``position`` in float64.
    lens_rows = (model.cfg.n_layers + 1) * (stop - first) if lens else 0
    readout = max(reading_bytes(model, T), reading_bytes(model, lens_rows))
    need = readout + 2 * capture_bytes(model.cfg, T) + 4 * model.cfg.vocab_size * 8
    with BUDGET.reserve(need, f"an intervention on {T:,} tokens", "lens"), torch.no_grad():
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
        pb = torch.softmax(read_out(model, before.resid[-1][0, position]).double(), -1)
        pa = torch.softmax(read_out(model, after.resid[-1][0, position]).double(), -1)
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
    once and plainly (they do not depend on α), and the rest with the α values as batches, resumed
    from the residual stream at ``layer`` -- TransformerLens's "start at layer". The last block
    computes attention and MLP for the final row only (the one whose logits are read); the other
    rows give it keys and values. ``dose_response_points`` gives the same curve a few α at a time."""
    *_, last = dose_response_points(model, ids, layer, head, position, target_id, alphas, chunk=None)
    return last


def dose_response_points(
    model,
    ids,
    layer: int,
    head: int,
    position: int,
    target_id: int | None = None,
    alphas=None,
    chunk: int | None = 3,
    stop=None,
):
    """The dose-response curve as it grows: yields its dict (as ``dose_response``) after each batch
    of ``chunk`` α values (None: all at once), so a page can draw it point by point. ``stop()``,
    when given, is asked before each batch and each block: once it says True the curve ends where
    it is."""
    ids = check_ids(ids)
    cfg = model.cfg
    layer = check_layer(layer, cfg.n_layers)
    head = check_layer(head, cfg.n_heads, "Head")
    position = check_position(position, len(ids))
    target_id = target_or_next(model, ids, position, target_id)
    alphas = [round(0.2 * i, 10) for i in range(11)] if alphas is None else [check_alpha(a) for a in alphas]
    chunk = len(alphas) if chunk is None else max(1, int(chunk))
    done: list[float] = []
    logprob: list[float] = []
    with torch.no_grad():
        idx = torch.tensor([ids[: position + 1]], dtype=torch.long, device=model.device)
        start = resid_after(model, idx, layer)  # (1, position + 1, d): the same for every α
    for first in range(0, len(alphas), chunk):
        if stop is not None and stop():  # (the last block alone asks nowhere else)
            return
        batch = alphas[first : first + chunk]
        gain = torch.ones(cfg.n_layers, len(batch), cfg.n_heads)
        gain[layer, :, head] = torch.tensor(batch)
        with reserve_logits(model, len(batch), "a dose-response curve", (len(batch) + 1) * (position + 1)):
            hooks = Hooks(cfg, capture=False, head_gain=gain)
            with torch.no_grad():
                x = start.expand(len(batch), -1, -1)  # (n_alphas, position + 1, d)
                for i in range(layer, cfg.n_layers - 1):
                    if stop is not None and stop():
                        return
                    x = model.trf_blocks[i](x, None, None, hooks.layer(i))
                x = last_row_block(model.trf_blocks[-1], x, hooks.layer(cfg.n_layers - 1))  # (n_alphas, 1, d)
                logits = model.out_head(model.final_norm(x))  # (n_alphas, 1, V)
            logp = torch.log_softmax(logits[:, -1].float(), dim=-1)[:, target_id]
        done, logprob = done + batch, logprob + logp.tolist()
        yield {
            "layer": layer,
            "head": head,
            "position": position,
            "target_id": target_id,
            "alphas": done,
            "logprob": logprob,
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
    idx = torch.tensor([check_ids(ids)], dtype=torch.long, device=model.device)
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
    estimate = sweep_estimate(model, ids, limit_s)
    *_, last = head_sweep_layers(model, ids, estimate, progress=progress, batch=batch)
    return last


def sweep_estimate(model, ids, limit_s: float = SWEEP_LIMIT_S) -> float:
    """The sweep's estimated seconds, or SweepTooLongError when that is over ``limit_s``."""
    ids = check_ids(ids)
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
    return estimate


@torch.no_grad()  # as a decorator: grad mode is off only while the generator runs, not across its yields
def head_sweep_layers(model, ids, estimate: float, *, progress=None, batch: int | None = None, stop=None):
    """The head sweep a layer at a time: yields its dict (as ``head_sweep``) after each layer, the
    layers not measured yet as None in ``delta_loss``, so a page can draw it as it goes. ``stop()``,
    when given, is asked before each block and each head's readout: once it says True the sweep
    ends with the layers measured so far (a page's Stop waits for one of those, not a layer).
    No time limit here: ``head_sweep`` (or the caller) checks the estimate first."""
    ids = check_ids(ids)
    cfg = model.cfg
    T, L, H = len(ids), cfg.n_layers, cfg.n_heads
    if batch is None:  # a batch's activations stay modest; logits are read in chunks (readout)
        batch = max(1, min(H, 4096 // T))
    target = ids[1:]
    delta: list[list[float] | None] = [None] * L
    done, total = 0, L * H
    with reserve_logits(model, CHUNK_ROWS, "the head-importance sweep", batch * T):
        idx = torch.tensor([ids], dtype=torch.long, device=model.device)
        _, plain = run_with_hooks(model, idx, last_token_only=True)
        reader = HeadReader(model)
        base = float((-reader(plain.resid[-1][0, :-1], target, norm=True).target_logp).mean())
        # The sweep's own time: a page draws each yielded layer while this generator waits, and that
        # time is the page's, not the sweep's (the estimate is of the sweep's).
        busy, resumed = 0.0, time.perf_counter()
        for layer in range(L):
            row_delta = [0.0] * H
            for start in range(0, H, batch):
                heads = list(range(start, min(H, start + batch)))
                gain = torch.ones(L, len(heads), H)
                for row, h in enumerate(heads):
                    gain[layer, row, h] = 0.0
                resid = plain.resid[:layer] + [plain.resid[layer].expand(len(heads), -1, -1)]
                try:
                    x, _ = run_from(model, layer, resid, capture=False, head_gain=gain, stop=stop)  # (b, T, d)
                except StopRequested:
                    return
                for row, h in enumerate(heads):  # one head's rows read out at a time: a Stop waits for one
                    if stop is not None and stop():
                        return
                    f = reader(x[row, :-1], target, norm=True)
                    row_delta[h] = float((-f.target_logp).mean()) - base
                done += len(heads)
                if progress is not None:
                    progress(done / total, f"{done}/{total} heads")
            delta[layer] = row_delta
            busy += time.perf_counter() - resumed
            yield {
                "base_loss": base,
                "delta_loss": list(delta),
                "seconds": busy,
                "estimate_s": estimate,
                "n_tokens": T,
            }
            resumed = time.perf_counter()
