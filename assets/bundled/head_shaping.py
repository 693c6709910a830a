"""Head shaping for the bundled model's training: a hinge loss that keeps one head's attention on
the previous token, and another's on the first token, at least at a floor.

Why: a language model this small, trained for a few hours on 300 K tokens, forms an induction head
(the random repeats teach it) but no sharp previous-token head (its first layer spreads attention
over the last few tokens) and no attention sink (no head needs one yet). Both are what a lesson
shows, and both are what GPT-2 small has. The hinge adds nothing once a head is past its floor, so
the language-modelling loss alone decides everything else the head and the model do; the head
chosen for the previous token is the layer-0 head the induction circuit already reads.

The attention pattern is recomputed for the shaped heads only, from the block's normalised input
(captured by a forward pre-hook) and that head's slices of W_query and W_key: the forward itself
stays the model's own (fused attention, dropout and all).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# The queries bundled_metrics scores (positions 8 .. T-1): the first few positions have too few
# keys for a pattern to mean anything.
FIRST_QUERY = 8


def parse_head(spec: str | None) -> tuple[int, int] | None:
    if not spec:
        return None
    layer, head = (int(s) for s in spec.split(","))
    return layer, head


class HeadShaper:
    """``loss()`` after a forward: over the shaped heads, the mean over rows of how far each row falls
    short of its floor: for the previous-token head in mean log-probability (log floor - mean log a),
    for the sink head in mean probability (floor - mean a)."""

    def __init__(self, model, prev: tuple[int, int] | None, sink: tuple[int, int] | None, prev_floor, sink_floor):
        self.targets = [(lh, "prev", prev_floor) for lh in [prev] if lh] + [
            (lh, "sink", sink_floor) for lh in [sink] if lh
        ]
        self.model = model
        self.inputs: dict[int, torch.Tensor] = {}
        self.last: dict[str, float] = {}
        for layer in {lh[0] for lh, _, _ in self.targets}:
            model.trf_blocks[layer].att.register_forward_pre_hook(self._keeper(layer))

    def __bool__(self) -> bool:
        return bool(self.targets)

    def _keeper(self, layer: int):
        def keep(module, args):
            if module.training:
                self.inputs[layer] = args[0]

        return keep

    def pattern(self, layer: int, head: int) -> torch.Tensor:
        """(B, T, T) float32 attention weights of one head, recomputed from the captured input."""
        att = self.model.trf_blocks[layer].att
        x = self.inputs[layer].float()
        hd = att.head_dim
        rows = slice(head * hd, (head + 1) * hd)
        q = F.linear(x, att.W_query.weight[rows].float(), att.W_query.bias[rows].float())  # (B, T, hd)
        k = F.linear(x, att.W_key.weight[rows].float(), att.W_key.bias[rows].float())  # (B, T, hd)
        scores = q @ k.transpose(1, 2) / math.sqrt(hd)  # (B, T, T)
        T = x.size(1)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        return scores.masked_fill(future, float("-inf")).softmax(dim=-1)

    def loss(self) -> torch.Tensor:
        total = torch.zeros(())
        for (layer, head), kind, floor in self.targets:
            a = self.pattern(layer, head)
            if kind == "prev":
                got = a.diagonal(offset=-1, dim1=1, dim2=2)[:, FIRST_QUERY - 1 :]  # a[b, i, i-1], i >= 8
                # On log-probabilities: a hinge on the probability itself has almost no gradient while
                # the head still spreads its attention (d a / d score = a (1 - a)), and it never formed.
                short = math.log(floor) - got.clamp_min(1e-9).log().mean(dim=-1)  # (B,)
            else:
                got = a[:, FIRST_QUERY:, 0]  # a[b, i, 0], i >= 8
                short = floor - got.mean(dim=-1)  # (B,)
            self.last[kind] = float(got.mean().detach())
            total = total + F.relu(short).mean()
        self.inputs.clear()
        return total
