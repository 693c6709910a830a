"""Activation patching: copy one activation from a clean run into a corrupted one; how much answer returns?

A clean prompt ("When Mary and John went to the store, John gave a drink to") and a corrupted one of the same
token length (the names swapped) differ in what the model should say next. The metric is the logit
difference answer − wrong at the last position, normalised so 1 is the clean run's value and 0 the corrupted
run's. Each cell of a grid is one corrupted forward with one activation taken from the clean run:

- ``resid_pre``: the residual stream entering block l at position p (layers × positions);
- ``attn_head``: head h of layer l's output (its slice of ``out_proj``'s input) at every position
  (layers × heads), or ``attn_head_pos``: at one position, for one chosen layer (heads × positions);
- ``mlp_out``: what block l's feed-forward wrote at position p (layers × positions).

The prompt pair, its checks and the two reference runs are ``patching_pairs``'; path patching
(``path_patching``) is in ``patching_paths``. The model's maths are untouched: the
forwards go through the engine's own hooks protocol (``interventions``), the same blocks a plain forward
runs, and every variant that changes layer l starts from the corrupted run's residual stream at block l
(the blocks before it compute the same thing for every variant). Variants of one layer run as one batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from playground.engine.attention import attend, expand_kv
from playground.inside.interventions import StopRequested
from playground.inside.patching_pairs import PatchingError, PatchPair, Runs, check_pair, logit_diff, reference_runs
from playground.inside.view_checks import check_layer

TARGETS = ("resid_pre", "attn_head", "attn_head_pos", "mlp_out")
BATCH_TOKENS = 2048  # rows × positions run at once: big enough to keep the cores busy, small in memory


# ----------------------------------------------------------------------------------------------
# The forwards that patch


class LayerPatch:
    """One layer's hooks for a batch (the engine calls ``attend`` and ``mlp``). Where ``head_mask``
    (B, H, Tw) is True a head's output is ``clean_ctx``'s (1, H, Tw, hd); where ``mlp_mask`` (B, Tw),
    the MLP's output is ``clean_mlp``'s (1, Tw, d); ``qkv`` (``patching_paths``) may change a head's
    query, key or value first. With neither it is the plain forward's attention."""

    def __init__(self, head_mask=None, clean_ctx=None, mlp_mask=None, clean_mlp=None, qkv=None):
        self.head_mask, self.clean_ctx = head_mask, clean_ctx
        self.mlp_mask, self.clean_mlp, self.qkv = mlp_mask, clean_mlp, qkv

    def attend(self, q, k, v, window: int = 0) -> torch.Tensor:
        if self.qkv is not None:
            q, k, v = self.qkv(q, k, v)
        ctx = attend(q, k, v, 0.0, window)  # (B, H, Tw, hd): the plain forward's attention
        if self.head_mask is not None:
            ctx = torch.where(self.head_mask[..., None], self.clean_ctx.to(ctx.dtype), ctx)
        return ctx

    def mlp(self, ff):
        if self.mlp_mask is None:
            return ff
        return lambda x: torch.where(self.mlp_mask[..., None], self.clean_mlp.to(x.dtype), ff(x))


class KeyPrefix:
    """A layer's keys and values of positions 0…s−1 from the corrupted run, put before a batch's own:
    a patch at position s leaves every earlier position as the corrupted run computed it (the model is
    causal), so the variants patched at s compute only positions s…T−1 (the KV cache's ``append``)."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor):
        self.k, self.v = k, v  # (1, H, s, hd)

    def append(self, k: torch.Tensor, v: torch.Tensor):
        B = k.size(0)
        # GQA: the new positions' K key/value heads, copied to the prefix's one per query head
        k, v = expand_kv(k, self.k.size(1) // k.size(1)), expand_kv(v, self.v.size(1) // v.size(1))
        return torch.cat([self.k.expand(B, -1, -1, -1), k], 2), torch.cat([self.v.expand(B, -1, -1, -1), v], 2)


def last_position(block, x: torch.Tensor, prefix: KeyPrefix, patch: LayerPatch) -> torch.Tensor:
    """The last block for the last position only (B, 1, d): the metric reads nothing else. The earlier
    positions give it their keys and values (computed from their input as the block would), so its
    attention sees what the whole block's would; a patch there keeps its last position only."""
    earlier = x[:, :-1]
    normed = block.norm1(earlier) if block.pre_norm else earlier
    # RoPE: the earlier rows sit after the prefix's positions
    _, k, v = block.att.project_qkv(normed, prefix.k.size(2)) if prefix.k.size(2) else block.att.project_qkv(normed)
    group = prefix.k.size(1) // k.size(1)  # GQA: the prefix holds one key per query head
    k, v = expand_kv(k, group), expand_kv(v, group)  # (B, H, Tw − 1, hd)
    keys = KeyPrefix(
        torch.cat([prefix.k.expand(x.size(0), -1, -1, -1), k], 2),
        torch.cat([prefix.v.expand(x.size(0), -1, -1, -1), v], 2),
    )
    last = LayerPatch(
        None if patch.head_mask is None else patch.head_mask[:, :, -1:],
        None if patch.clean_ctx is None else patch.clean_ctx[:, :, -1:],
        None if patch.mlp_mask is None else patch.mlp_mask[:, -1:],
        None if patch.clean_mlp is None else patch.clean_mlp[:, -1:],
    )
    return block(x[:, -1:], keys, None, last)


def final_logit_diff(model, x: torch.Tensor, pair: PatchPair) -> torch.Tensor:
    """logit(answer) − logit(wrong) at the last position of the residual stream x (B, T, d), float32.
    A plain output head is read at those two rows only (the other 50,255 dot products are not needed)."""
    h = model.final_norm(x[:, -1])  # (B, d)
    head = model.out_head
    if type(head) is torch.nn.Linear and head.bias is None:
        two = torch.nn.functional.linear(h, head.weight[[pair.answer, pair.wrong]]).float()  # (B, 2)
        return two[:, 0] - two[:, 1]
    return logit_diff(head(h), pair)


@dataclass(frozen=True)
class Variant:
    """One cell: patch ``kind`` at block ``layer``, position ``pos`` (None: every position), head ``head``."""

    layer: int
    pos: int | None
    head: int | None = None

    @property
    def window(self) -> int:
        return self.pos or 0


def variants(cfg, target: str, T: int, layer: int | None = None) -> list[Variant]:
    """The grid's cells in row-major order."""
    L, H = cfg.n_layers, cfg.n_heads
    if target == "attn_head":
        return [Variant(lay, None, h) for lay in range(L) for h in range(H)]
    if target == "attn_head_pos":
        return [Variant(layer, p, h) for h in range(H) for p in range(T)]  # type: ignore[arg-type]
    return [Variant(lay, p) for lay in range(L) for p in range(T)]


def run_group(model, runs: Runs, target: str, group: list[Variant], stop=None) -> torch.Tensor:
    """The normalised metric of variants that share their window start s, in one batch that grows
    layer by layer ("start at layer"): a variant joins at its own block from the corrupted run's
    residual stream there, computing positions s…T−1 only."""
    s = group[0].window
    clean, corrupted = runs.clean, runs.corrupted
    H, Tw = model.cfg.n_heads, len(runs.pair.clean) - s
    order = sorted(range(len(group)), key=lambda j: group[j].layer)
    x: torch.Tensor | None = None
    joined: list[Variant] = []
    with torch.no_grad():
        for i in range(group[order[0]].layer, model.cfg.n_layers):
            if stop is not None and stop():
                raise StopRequested
            new = [group[j] for j in order if group[j].layer == i]  # the loop starts at the first one's layer
            patch = LayerPatch()
            if new:
                x_new = corrupted.resid[i][:, s:].expand(len(new), -1, -1)
                if target == "resid_pre":  # the new rows' first position from the clean run
                    x_new = x_new.clone()
                    x_new[:, 0] = clean.resid[i][0, s]
                x = x_new if x is None else torch.cat([x, x_new])
                B, n_old = x.size(0), len(joined)
                joined += new
                if target in ("attn_head", "attn_head_pos"):
                    mask = torch.zeros(B, H, Tw, dtype=torch.bool)
                    for b, var in enumerate(new):
                        mask[n_old + b, var.head, slice(None) if var.pos is None else 0] = True
                    patch = LayerPatch(head_mask=mask, clean_ctx=clean.ctx[i][:, :, s:])
                elif target == "mlp_out":
                    mask = torch.zeros(B, Tw, dtype=torch.bool)
                    mask[n_old:, 0] = True
                    patch = LayerPatch(mlp_mask=mask, clean_mlp=clean.mlp_out[i][:, s:])
            assert x is not None
            _, k, v = corrupted.qkv[i]
            prefix = KeyPrefix(k[:, :, :s], v[:, :, :s])
            if i == model.cfg.n_layers - 1 and Tw > 1:
                x = last_position(model.trf_blocks[i], x, prefix, patch)
            else:
                x = model.trf_blocks[i](x, prefix if s else None, None, patch)
        assert x is not None
        metric = runs.normalise(final_logit_diff(model, x, runs.pair))
    back = {var: b for b, var in enumerate(joined)}
    return torch.stack([metric[back[var]] for var in group])


def groups(cells: list[Variant], T: int) -> Iterator[list[Variant]]:
    """The cells by window start, latest start first (the cheapest groups fill the grid first), each
    split into batches of at most BATCH_TOKENS positions."""
    starts: dict[int, list[Variant]] = {}
    for var in cells:
        starts.setdefault(var.window, []).append(var)
    for s in sorted(starts, reverse=True):
        cell_list = sorted(starts[s], key=lambda var: var.layer)
        size = max(1, BATCH_TOKENS // (T - s))
        for a in range(0, len(cell_list), size):
            yield cell_list[a : a + size]


def check_target_name(target) -> str:
    if target not in TARGETS:
        raise PatchingError(
            "inside.patch_target",
            "The patching target must be one of {choices}; got {value!r}.",
            choices=", ".join(TARGETS),
            value=target,
        )
    return target


def patching_steps(
    model, pair: PatchPair, target: str, layer: int | None = None, stop: Callable[[], bool] | None = None
) -> Iterator[dict]:
    """The grid as it fills, a batch of cells at a time (the latest positions first; cells not measured
    yet are None), then once more with the attribution-patching estimate beside it (``attribution``,
    ``correlation``). Each yield holds its own copy of the grid.

    ``values`` is rows × columns: layers × positions (``resid_pre``, ``mlp_out``), layers × heads
    (``attn_head``), heads × positions of ``layer`` (``attn_head_pos``). StopRequested when ``stop()``."""
    target = check_target_name(target)
    cfg, T = model.cfg, len(pair.clean)
    if target == "attn_head_pos":
        layer = check_layer(layer, cfg.n_layers)
    started = time.perf_counter()
    runs = reference_runs(model, pair)
    cells = variants(cfg, target, T, layer)
    n_rows = cfg.n_heads if target == "attn_head_pos" else cfg.n_layers
    n_cols = cfg.n_heads if target == "attn_head" else T
    values: list[list] = [[None] * n_cols for _ in range(n_rows)]
    base = {
        "target": target,
        "layer": layer,
        "clean_logit_diff": runs.clean_ld,
        "corrupted_logit_diff": runs.corrupted_ld,
        **grid_axes(cfg, target, T),
    }
    where = {var: divmod(j, n_cols) for j, var in enumerate(cells)}
    done = 0
    for group in groups(cells, T):
        for var, value in zip(group, run_group(model, runs, target, group, stop).tolist()):
            row, col = where[var]
            values[row][col] = value
        done += len(group)
        yield {
            **base,
            "values": [row[:] for row in values],
            "seconds": time.perf_counter() - started,
            "done": done,
            "total": len(cells),
        }
    attribution = None
    try:
        if stop is not None and stop():
            raise StopRequested
        attribution = attribution_patching(model, runs, target, layer).tolist()
    except (RuntimeError, NotImplementedError):  # a model whose layers have no gradient (int8 weights)
        attribution = None
    yield {
        **base,
        "values": values,
        "attribution": attribution,
        "correlation": correlation(values, attribution) if attribution is not None else None,
        "seconds": time.perf_counter() - started,
        "done": done,
        "total": len(cells),
    }


def grid_axes(cfg, target: str, T: int) -> dict:
    """Row and column names: layers "L0"…, heads "H0"…, positions 0…T−1 (the caller labels them with tokens)."""
    layer_names = [f"L{i}" for i in range(cfg.n_layers)]
    head_names = [f"H{h}" for h in range(cfg.n_heads)]
    if target == "attn_head":
        return {"rows": layer_names, "columns": head_names, "column_kind": "head"}
    if target == "attn_head_pos":
        return {"rows": head_names, "columns": list(range(T)), "column_kind": "position"}
    return {"rows": layer_names, "columns": list(range(T)), "column_kind": "position"}


def activation_patching(
    model, clean, corrupted, answer: int, wrong: int, target: str, layer: int | None = None
) -> dict:
    """The whole grid and its attribution estimate (the last of ``patching_steps``)."""
    pair = check_pair(model, clean, corrupted, answer, wrong)
    *_, last = patching_steps(model, pair, target, layer)
    return last


# ----------------------------------------------------------------------------------------------
# Attribution patching: one forward and one backward instead of a forward per cell


def attribution_patching(model, runs: Runs, target: str, layer: int | None = None) -> torch.Tensor:
    """(clean − corrupted activation) · ∂metric/∂activation at the corrupted run, summed over the
    activation's features: the first-order Taylor estimate of each cell, normalised like the grid."""
    cfg = model.cfg
    idx = torch.tensor([runs.pair.corrupted], dtype=torch.long, device=model.device)
    positions = torch.arange(idx.size(1), device=idx.device)
    grabbed = _Grab()
    with torch.enable_grad():
        x = model.drop_emb(model.tok_emb(idx) + model.pos_emb(positions).to(model.dtype)).detach().requires_grad_()
        resid = []
        for i, block in enumerate(model.trf_blocks):
            resid.append(x)
            x = block(x, None, None, grabbed.layer(i))
        logits = model.out_head(model.final_norm(x[:, -1]))
        metric = runs.normalise(logit_diff(logits, runs.pair))[0]
        acts = resid if target == "resid_pre" else grabbed.mlp_outs if target == "mlp_out" else grabbed.ctx
        grads = torch.autograd.grad(metric, acts)
    clean = runs.clean.resid if target == "resid_pre" else runs.clean.mlp_out if target == "mlp_out" else runs.clean.ctx
    corrupt = [a.detach() for a in acts]
    per = [((clean[i].float() - corrupt[i].float()) * grads[i].float())[0] for i in range(cfg.n_layers)]
    if target in ("resid_pre", "mlp_out"):
        return torch.stack([p.sum(-1) for p in per])  # (L, T)
    if target == "attn_head":
        return torch.stack([p.sum((-1, -2)) for p in per])  # (L, H)
    return per[check_layer(layer, cfg.n_layers)].sum(-1)  # (H, T)


class _Grab:
    """Layer hooks that keep the (grad-carrying) head outputs and MLP outputs of a forward."""

    def __init__(self) -> None:
        self.ctx: list[torch.Tensor] = []
        self.mlp_outs: list[torch.Tensor] = []

    def layer(self, i: int) -> _Grab:
        return self

    def attend(self, q, k, v, window: int = 0) -> torch.Tensor:
        ctx = attend(q, k, v, 0.0, window)
        self.ctx.append(ctx)
        return ctx

    def mlp(self, ff):
        def run(x):
            out = ff(x)
            self.mlp_outs.append(out)
            return out

        return run


def correlation(a, b) -> float | None:
    """Pearson correlation of two grids' defined cells (None when either is constant)."""
    xs = torch.tensor([[float("nan") if v is None else v for v in row] for row in a], dtype=torch.float64)
    ys = torch.tensor(b, dtype=torch.float64)
    keep = ~torch.isnan(xs)
    x, y = xs[keep], ys[keep]
    if x.numel() < 2 or float(x.std()) == 0 or float(y.std()) == 0:
        return None
    return float(torch.corrcoef(torch.stack([x, y]))[0, 1])
