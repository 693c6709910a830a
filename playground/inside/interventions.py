"""Hooks on the forward: capture the residual stream and each part's output, and change them.

Look inside a forward and change it: capture the residual stream and each part's output, and
switch parts off, TransformerLens-style.

``GPTModel.forward(idx, hooks=Hooks(...))`` calls back into a ``Hooks`` object at four points: the
embeddings, each layer's attention (after softmax·V, before ``out_proj`` -- where one head's output
is still its own slice ``ctx[:, h]`` of shape (B, T, head_dim)), each MLP, and the residual stream
after each block. With ``hooks=None`` (every ordinary call, the decode loop included) none of this
runs: the plain forward's maths and speed are those of ``playground.engine.model`` alone.

An ``Intervention`` says what to change; it is plain data (JSON-able) and is checked against the
model's config before any forward, so a head that does not exist or an α outside [0, 2] is refused
with a message naming it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from playground.engine.attention import attend, causal_mask
from playground.engine.config import GPTConfig
from playground.errors import UserError

ALPHA_RANGE = (0.0, 2.0)


class InterventionError(UserError):
    """An intervention that does not fit the model; the message is written for the user."""


@dataclass(frozen=True)
class Intervention:
    """What to change in a forward. Heads are (layer, head) pairs, counted from 0.

    - ``zero_heads``: the head's output (its slice of the ``out_proj`` input) is set to 0.
    - ``mean_heads``: it is replaced by its mean over the run's positions (in this forward).
    - ``scale_head``: (layer, head, α) multiplies one head's output by α in [0, 2]; α = 1 is no change.
    - ``skip_mlps``: those layers' MLPs write nothing to the residual stream.
    - ``unmasked_layers``: attention in those layers has no causal mask (every position sees the
      future).
    - ``drop_pos_emb``: the positional embedding is left out of the input.
    """

    zero_heads: tuple[tuple[int, int], ...] = ()
    mean_heads: tuple[tuple[int, int], ...] = ()
    scale_head: tuple[int, int, float] | None = None
    skip_mlps: tuple[int, ...] = ()
    unmasked_layers: tuple[int, ...] = ()
    drop_pos_emb: bool = False

    def __post_init__(self):
        # Accept lists (JSON, gradio_client) but keep the frozen value hashable and comparable.
        object.__setattr__(self, "zero_heads", tuple(tuple(h) for h in self.zero_heads))
        object.__setattr__(self, "mean_heads", tuple(tuple(h) for h in self.mean_heads))
        object.__setattr__(self, "skip_mlps", tuple(self.skip_mlps))
        object.__setattr__(self, "unmasked_layers", tuple(self.unmasked_layers))
        if self.scale_head is not None:
            object.__setattr__(self, "scale_head", tuple(self.scale_head))

    @property
    def is_empty(self) -> bool:
        return not (
            self.zero_heads
            or self.mean_heads
            or self.scale_head
            or self.skip_mlps
            or self.unmasked_layers
            or self.drop_pos_emb
        )

    @property
    def changes_causality(self) -> bool:
        """True when a position's output may depend on later tokens (an unmasked layer, or a
        mean over the run's positions)."""
        return bool(self.unmasked_layers or self.mean_heads)

    @property
    def first_layer(self) -> int | None:
        """The first block the intervention changes (0 when the embeddings change; None when
        nothing does): every earlier residual stream equals the plain forward's."""
        if self.drop_pos_emb:
            return 0
        layers = [h[0] for h in self.zero_heads + self.mean_heads] + list(self.skip_mlps) + list(self.unmasked_layers)
        if self.scale_head is not None:
            layers.append(self.scale_head[0])
        return min(layers) if layers else None

    def to_dict(self) -> dict:
        return {
            "zero_heads": [list(h) for h in self.zero_heads],
            "mean_heads": [list(h) for h in self.mean_heads],
            "scale_head": list(self.scale_head) if self.scale_head else None,
            "skip_mlps": list(self.skip_mlps),
            "unmasked_layers": list(self.unmasked_layers),
            "drop_pos_emb": self.drop_pos_emb,
        }

    @classmethod
    def from_dict(cls, d: dict | None) -> Intervention:
        d = dict(d or {})
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise InterventionError(
                "inside.unknown_fields", "Unknown intervention field(s): {fields}.", fields=", ".join(sorted(unknown))
            )
        try:
            return cls(**{k: v for k, v in d.items() if v is not None})
        except TypeError as e:
            raise InterventionError("inside.malformed", "Malformed intervention: {reason}", reason=e) from None

    def validate(self, cfg: GPTConfig) -> Intervention:
        """Raise InterventionError naming the first part that does not exist in ``cfg``."""
        L, H = cfg.n_layers, cfg.n_heads
        for name, heads in (("zero-ablate", self.zero_heads), ("mean-ablate", self.mean_heads)):
            for pair in heads:
                _check_head(pair, L, H, f"Cannot {name}")
        if self.scale_head is not None:
            if len(self.scale_head) != 3:
                raise InterventionError("inside.scale_head_shape", "scale_head must be (layer, head, α).")
            layer, head, alpha = self.scale_head
            _check_head((layer, head), L, H, "Cannot scale")
            check_alpha(alpha)
        for name, layers in (("skip the MLP of", self.skip_mlps), ("remove the mask of", self.unmasked_layers)):
            for layer in layers:
                if not _is_int(layer) or not 0 <= layer < L:
                    raise InterventionError(
                        "inside.layer_outside",
                        "Cannot {verb} layer {layer!r}: this model has layers 0–{last_layer}.",
                        verb=name,
                        layer=layer,
                        last_layer=L - 1,
                    )
        if not isinstance(self.drop_pos_emb, bool):
            raise InterventionError("inside.drop_pos_bool", "drop_pos_emb must be true or false.")
        return self


def check_alpha(alpha) -> float:
    lo, hi = ALPHA_RANGE
    if (
        isinstance(alpha, bool)
        or not isinstance(alpha, (int, float))
        or not math.isfinite(alpha)
        or not lo <= alpha <= hi
    ):
        raise InterventionError(
            "inside.alpha_range", "α must be a number from {lo:g} to {hi:g}, got {alpha!r}.", lo=lo, hi=hi, alpha=alpha
        )
    return float(alpha)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_head(pair, L: int, H: int, verb: str) -> None:
    if len(pair) != 2 or not all(_is_int(x) for x in pair):
        raise InterventionError(
            "inside.head_pair",
            "{verb} head {pair!r}: a head is (layer, head), two whole numbers.",
            verb=verb,
            pair=pair,
        )
    layer, head = pair
    if not 0 <= layer < L or not 0 <= head < H:
        raise InterventionError(
            "inside.head_outside",
            "{verb} head {head} of layer {layer}: this model has layers 0–{last_layer} and heads 0–{last_head}.",
            verb=verb,
            head=head,
            layer=layer,
            last_layer=L - 1,
            last_head=H - 1,
        )


# ----------------------------------------------------------------------------------------------
# The object the forward calls back into


@dataclass
class Cache:
    """What one hooked forward saw. Index i of ``resid`` is the residual stream after i blocks
    (0: after the embeddings); ``ctx[l]`` is layer l's per-head attention output before
    ``out_proj`` (B, H, T, head_dim); ``mlp_out[l]`` what layer l's MLP wrote (B, T, emb_dim)."""

    tok_emb: torch.Tensor | None = None
    pos_emb: torch.Tensor | None = None
    resid: list = field(default_factory=list)
    ctx: dict = field(default_factory=dict)
    mlp_out: dict = field(default_factory=dict)
    qkv: dict = field(default_factory=dict)


class Hooks:
    """Capture and patch for one forward. ``head_gain`` generalises the spec for batched sweeps: a
    (L, B, H) tensor of multipliers for each batch row's heads (1 keep, 0 zero, α scale), so one
    batched forward can try several interventions at once.

    ``capture``: True keeps resid, ctx and mlp outputs; ``capture_qkv``: layers whose q, k, v to keep.
    """

    def __init__(
        self,
        cfg: GPTConfig,
        intervention: Intervention | None = None,
        *,
        capture: bool = True,
        capture_qkv=(),
        head_gain: torch.Tensor | None = None,
    ):
        self.cfg = cfg
        self.spec = (intervention or Intervention()).validate(cfg)
        self.capture = capture
        self.capture_qkv = set(capture_qkv)
        self.cache = Cache()
        if head_gain is None and (self.spec.zero_heads or self.spec.scale_head):
            head_gain = torch.ones(cfg.n_layers, 1, cfg.n_heads)
            for layer, head in self.spec.zero_heads:
                head_gain[layer, :, head] = 0.0
            if self.spec.scale_head is not None:
                layer, head, alpha = self.spec.scale_head
                head_gain[layer, :, head] *= float(alpha)
        self.head_gain = head_gain  # (L, B or 1, H) or None

    # -- called by GPTModel.forward --
    def embed(self, tok: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        if self.capture:
            self.cache.tok_emb = tok.detach()
            self.cache.pos_emb = pos.detach().expand_as(tok) if not self.spec.drop_pos_emb else torch.zeros_like(tok)
        x = tok if self.spec.drop_pos_emb else tok + pos
        self.resid(0, x)
        return x

    def resid(self, i: int, x: torch.Tensor) -> None:
        if self.capture:
            self.cache.resid.append(x.detach())

    def layer(self, i: int) -> _LayerHooks:
        return _LayerHooks(self, i)


class _LayerHooks:
    def __init__(self, hooks: Hooks, index: int):
        self.hooks, self.index = hooks, index

    def attend(self, q, k, v, window: int = 0) -> torch.Tensor:
        hooks, i = self.hooks, self.index
        if i in hooks.capture_qkv:
            hooks.cache.qkv[i] = (q.detach(), k.detach(), v.detach())
        if i in hooks.spec.unmasked_layers:
            ctx = F.scaled_dot_product_attention(q, k, v)  # no mask: the future leaks in
        elif window and window < k.size(-2):  # a sliding window: the engine's own masked kernel
            ctx = attend(q, k, v, 0.0, window)
        else:
            causal = q.size(-2) == k.size(-2)
            ctx = (
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                if causal
                else F.scaled_dot_product_attention(q, k, v, attn_mask=_allowed(q.size(-2), k.size(-2), q.device))
            )
        mean_heads = [h for layer, h in hooks.spec.mean_heads if layer == i]
        if mean_heads:
            ctx = ctx.clone()
            ctx[:, mean_heads] = ctx[:, mean_heads].mean(dim=2, keepdim=True).expand_as(ctx[:, mean_heads])
        if hooks.head_gain is not None:
            gain = hooks.head_gain[i].to(ctx.dtype).to(ctx.device)  # (B or 1, H)
            ctx = ctx * gain[:, :, None, None]
        if hooks.capture:
            hooks.cache.ctx[i] = ctx.detach()
        return ctx

    def mlp(self, ff):
        hooks, i = self.hooks, self.index
        skip = i in hooks.spec.skip_mlps

        def run(x):
            out = torch.zeros_like(x) if skip else ff(x)
            if hooks.capture:
                hooks.cache.mlp_out[i] = out.detach()
            return out

        return run


def _allowed(q_len: int, k_len: int, device) -> torch.Tensor:
    return ~causal_mask(q_len, k_len, device)


def resid_after(model, idx: torch.Tensor, n_blocks: int) -> torch.Tensor:
    """The plain forward's residual stream after the embeddings and ``n_blocks`` blocks, (B, T, d):
    where an intervention that starts at block ``n_blocks`` takes over."""
    positions = torch.arange(idx.size(1), device=idx.device)
    with torch.no_grad():
        x = model.drop_emb(model.tok_emb(idx) + model.pos_emb(positions).to(model.dtype))  # (B, T, d)
        for block in model.trf_blocks[:n_blocks]:
            x = block(x)
    return x


class StopRequested(Exception):
    """A long view's caller asked it to stop (its ``stop()`` said so between two blocks)."""


def run_from(
    model,
    start: int,
    resid: list,
    intervention: Intervention | None = None,
    *,
    capture: bool = True,
    head_gain=None,
    stop=None,
):
    """(final residual stream, Cache) of a hooked forward resumed at block ``start`` from
    ``resid[start]`` (TransformerLens's "start at layer"): ``resid`` holds the residual streams
    of a forward whose blocks before ``start`` are unchanged by the intervention, and the
    returned cache's ``resid`` reuses them for the layers it did not recompute. ``stop()``, when
    given, is asked before each block; StopRequested when it says True (a page's Stop)."""
    hooks = Hooks(model.cfg, intervention, capture=capture, head_gain=head_gain)
    if capture:
        hooks.cache.resid = list(resid[: start + 1])
    x = resid[start]
    with torch.no_grad():
        for i in range(start, model.cfg.n_layers):
            if stop is not None and stop():
                raise StopRequested
            x = model.trf_blocks[i](x, None, None, hooks.layer(i))
            hooks.resid(i + 1, x)
    return x, hooks.cache


def run_with_hooks(
    model,
    ids,
    intervention: Intervention | None = None,
    *,
    capture: bool = True,
    capture_qkv=(),
    head_gain=None,
    last_token_only: bool = False,
):
    """(logits, Cache) of one hooked forward over token ids (a list or a (B, T) tensor), no grad."""
    idx = ids if isinstance(ids, torch.Tensor) else torch.tensor([list(ids)], dtype=torch.long)
    hooks = Hooks(model.cfg, intervention, capture=capture, capture_qkv=capture_qkv, head_gain=head_gain)
    with torch.no_grad():
        logits = model(idx.to(model.device), hooks=hooks, last_token_only=last_token_only)
    return logits, hooks.cache
