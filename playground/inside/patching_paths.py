"""Path patching: one head's clean output, delivered to one later head's query, key or value input only.

Activation patching asks "does this head matter?"; path patching asks "does it matter *through that
head*?". The corrupted run is kept everywhere except one input of the receiver head: its query (or key,
or value) is computed from the corrupted residual stream plus the difference the sender head's output
makes there, clean − corrupted, i.e. ``out_proj`` applied to the sender's slice of each run's head
outputs. Every other component reads the corrupted stream, so only the direct path sender → receiver
carries the clean information; what the receiver then writes flows on through the later layers as
usual (Wang et al. 2022, "Interpretability in the Wild", §3.1).

``path_patching`` measures every receiver in the layers after the sender for the chosen input (a
layers × heads grid, rows up to the sender's layer empty), and the chosen receiver through each of
q, k and v; the same normalised logit difference as ``patching``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import torch

from playground.engine.attention import expand_kv
from playground.inside.interventions import StopRequested
from playground.inside.patching import LayerPatch, final_logit_diff, grid_axes
from playground.inside.patching_pairs import PatchingError, PatchPair, Runs, reference_runs

INPUTS = ("q", "k", "v")


def check_heads(cfg, sender, receiver, via: str) -> tuple[tuple[int, int], tuple[int, int], str]:
    L, H = cfg.n_layers, cfg.n_heads
    for name, head in (("sender", sender), ("receiver", receiver)):
        ok = (
            isinstance(head, (tuple, list))
            and len(head) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in head)
        )
        if not ok or not (0 <= head[0] < L and 0 <= head[1] < H):
            raise PatchingError(
                "inside.patch_head",
                "The {name} head must be layer.head with layers 0–{last_layer} and heads 0–{last_head}; got {value!r}.",
                name=name,
                value=head,
                last_layer=L - 1,
                last_head=H - 1,
            )
    if receiver[0] <= sender[0]:
        raise PatchingError(
            "inside.patch_path_order",
            "The receiver L{rl}H{rh} must be in a later layer than the sender L{sl}H{sh}: a head only reads what "
            "earlier layers wrote.",
            rl=receiver[0],
            rh=receiver[1],
            sl=sender[0],
            sh=sender[1],
        )
    if via not in INPUTS:
        raise PatchingError("inside.patch_input", "The receiver's input must be q, k or v; got {value!r}.", value=via)
    return (sender[0], sender[1]), (receiver[0], receiver[1]), via


def sender_delta(model, runs: Runs, sender: tuple[int, int]) -> torch.Tensor:
    """What the sender head writes into the residual stream, clean − corrupted: (1, T, d). ``out_proj``
    of each run's head outputs with every other head's slice zeroed (its bias cancels in the difference)."""
    layer, head = sender
    out_proj = model.trf_blocks[layer].att.out_proj
    written = []
    for cache in (runs.clean, runs.corrupted):
        ctx = torch.zeros_like(cache.ctx[layer])  # (1, H, T, hd)
        ctx[:, head] = cache.ctx[layer][:, head]
        B, H, T, hd = ctx.shape
        written.append(out_proj(ctx.transpose(1, 2).reshape(B, T, H * hd)))  # (1, T, d)
    return written[0] - written[1]


def receiver_batch(model, runs: Runs, delta: torch.Tensor, layer: int, rows: list[tuple[int, str]], stop=None):
    """The normalised metric of a batch at receiver layer ``layer``: row b gives head rows[b][0] the
    input rows[b][1] (q, k or v) computed from the corrupted stream plus ``delta``."""
    block = model.trf_blocks[layer]
    B, H = len(rows), model.cfg.n_heads
    x = runs.corrupted.resid[layer]  # (1, T, d): the receiver layer's input in the corrupted run
    with torch.no_grad():
        moved = x + delta.to(x.dtype)
        q_alt, k_alt, v_alt = block.att.project_qkv(block.norm1(moved) if block.pre_norm else moved)
        group = H // k_alt.size(1)  # GQA: each query head's own copy of its shared key and value
        alt = (q_alt, expand_kv(k_alt, group), expand_kv(v_alt, group))  # 3 × (1, H, T, hd)
        masks = torch.zeros(3, B, H, 1, 1, dtype=torch.bool)
        for b, (head, via) in enumerate(rows):
            masks[INPUTS.index(via), b, head] = True

        def swap(q, k, v):
            return tuple(torch.where(m, a.to(t.dtype), t) for m, a, t in zip(masks, alt, (q, k, v)))

        x = x.expand(B, -1, -1)
        for i in range(layer, model.cfg.n_layers):
            if stop is not None and stop():
                raise StopRequested
            x = model.trf_blocks[i](x, None, None, LayerPatch(qkv=swap) if i == layer else LayerPatch())
        return runs.normalise(final_logit_diff(model, x, runs.pair))


def path_patching_steps(
    model, pair: PatchPair, sender, receiver, via: str = "k", stop: Callable[[], bool] | None = None
) -> Iterator[dict]:
    """The grid of receivers (layers × heads) for input ``via`` as it fills, a layer at a time, and the
    chosen receiver through q, k and v (``by_input``) first. ``value``: the chosen pair's cell."""
    cfg = model.cfg
    sender, receiver, via = check_heads(cfg, sender, receiver, via)
    started = time.perf_counter()
    runs = reference_runs(model, pair)
    delta = sender_delta(model, runs, sender)
    by_input = receiver_batch(model, runs, delta, receiver[0], [(receiver[1], i) for i in INPUTS], stop).tolist()
    values: list[list] = [[None] * cfg.n_heads for _ in range(cfg.n_layers)]
    base = {
        "target": "path",
        "sender": list(sender),
        "receiver": list(receiver),
        "input": via,
        "clean_logit_diff": runs.clean_ld,
        "corrupted_logit_diff": runs.corrupted_ld,
        "by_input": dict(zip(INPUTS, by_input)),
        "value": by_input[INPUTS.index(via)],
        **grid_axes(cfg, "attn_head", len(pair.clean)),
    }
    for layer in range(sender[0] + 1, cfg.n_layers):
        got = receiver_batch(model, runs, delta, layer, [(h, via) for h in range(cfg.n_heads)], stop)
        values[layer] = got.tolist()
        yield {**base, "values": values, "seconds": time.perf_counter() - started, "done": layer - sender[0]}


def path_patching(model, pair: PatchPair, sender, receiver, via: str = "k") -> dict:
    *_, last = path_patching_steps(model, pair, sender, receiver, via)
    return last


def receiver_inputs(model, pair: PatchPair, senders, receiver) -> list[dict[str, float]]:
    """For each group of sender heads in ``senders`` (a list of lists), the receiver's metric through
    its q, k and v when it is given what the whole group writes, clean − corrupted. Heads of one
    layer can share a job (several previous-token heads): one of them alone may move the receiver
    little where the group together moves it much, and the sum of their writes is what it reads."""
    runs = reference_runs(model, pair)
    out = []
    for group in senders:
        checked = [check_heads(model.cfg, s, receiver, "k")[0] for s in group]
        delta = torch.stack([sender_delta(model, runs, s) for s in checked]).sum(0)
        got = receiver_batch(model, runs, delta, receiver[0], [(receiver[1], i) for i in INPUTS])
        out.append(dict(zip(INPUTS, got.tolist())))
    return out
