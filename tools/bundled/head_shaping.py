"""Head shaping for the bundled model's training: a hinge loss that keeps one head's attention on
the previous token, and another's on the first token, at least at a floor; and one that makes a
named head the induction head: at least a floor of its attention on the token after the earlier
occurrence in repeated rows, and every other head of layers 1 and up below a ceiling there.

Why: a language model this small, trained for a few hours on 300 K tokens, forms an induction head
(the random repeats teach it) but no sharp previous-token head (its first layer spreads attention
over the last few tokens) and no attention sink (no head needs one yet). Both are what a lesson
shows, and both are what GPT-2 small has. The hinge adds nothing once a head is past its floor, so
the language-modelling loss alone decides everything else the head and the model do; the head
chosen for the previous token is the layer-0 head the induction circuit already reads.

Why the induction shaping: left to the data, all four layer-1 heads learned the same induction
pattern (0.81-0.83 each on random repeats) and shared the copying, so no one head is worth showing:
zeroing the one a lesson names cost 0.02 nats on a repeated line, and on a teacher's sentence said
twice it put 0.19-0.45 of its attention on the copy. The ceiling makes one head carry the circuit.

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

    def __init__(
        self,
        model,
        prev: tuple[int, int] | None,
        sink: tuple[int, int] | None,
        prev_floor,
        sink_floor,
        induction: tuple[int, int] | None = None,
        induction_floor: float = 0.7,
        induction_ceiling: float = 0.1,
    ):
        self.targets = [(lh, "prev", prev_floor) for lh in [prev] if lh] + [
            (lh, "sink", sink_floor) for lh in [sink] if lh
        ]
        self.induction, self.induction_floor, self.induction_ceiling = induction, induction_floor, induction_ceiling
        self.periods: torch.Tensor | None = None  # (B, 3) start, L, end per row: set by the batches
        self.model = model
        self.inputs: dict[int, torch.Tensor] = {}
        self.last: dict[str, float] = {}
        layers = {lh[0] for lh, _, _ in self.targets}
        if induction:
            layers |= set(range(1, len(model.trf_blocks)))
        for layer in layers:
            model.trf_blocks[layer].att.register_forward_pre_hook(self._keeper(layer))

    def __bool__(self) -> bool:
        return bool(self.targets or self.induction)

    def _keeper(self, layer: int):
        def keep(module, args):
            if module.training:
                self.inputs[layer] = args[0]

        return keep

    def pattern(self, layer: int, head: int | None = None, rows: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, T) float32 attention weights of one head, or (B, H, T, T) of every head of the
        layer, recomputed from the captured input (of the batch rows ``rows`` only, if given)."""
        att = self.model.trf_blocks[layer].att
        x = self.inputs[layer].float() if rows is None else self.inputs[layer][rows].float()
        hd, H = att.head_dim, att.n_heads
        rows = slice(0, H * hd) if head is None else slice(head * hd, (head + 1) * hd)
        q = F.linear(x, att.W_query.weight[rows].float(), att.W_query.bias[rows].float())
        k = F.linear(x, att.W_key.weight[rows].float(), att.W_key.bias[rows].float())
        B, T = x.shape[:2]
        q, k = (t.view(B, T, -1, hd).transpose(1, 2) for t in (q, k))  # (B, h, T, hd)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)  # (B, h, T, T)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        a = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        return a[:, 0] if head is not None else a

    def induction_loss(self) -> torch.Tensor:
        """The named head below its floor (in mean log-probability, as the previous-token head) plus
        every other head of layers 1.. above the ceiling (in mean probability), on repeated rows."""
        start, L, end = self.periods.unbind(-1)  # (B,)
        rows = (L > 0).nonzero().flatten()
        if len(rows) == 0:
            return torch.zeros(())
        T = self.inputs[1].size(1)
        pos = torch.arange(T)
        valid = (pos >= (start + L)[rows, None]) & (pos < end[rows, None])  # (R, T) queries with a copy
        key = (pos - L[rows, None] + 1).clamp(min=0)  # (R, T) the token after the earlier occurrence
        count = valid.sum(-1).clamp(min=1)
        total, others = torch.zeros(()), []
        for layer in range(1, len(self.model.trf_blocks)):
            a = self.pattern(layer, rows=rows)  # (R, H, T, T)
            got = a.gather(-1, key[:, None, :, None].expand(-1, a.size(1), -1, 1)).squeeze(-1)  # (R, H, T)
            mean = (got * valid[:, None]).sum(-1) / count[:, None]  # (R, H)
            for h in range(a.size(1)):
                if (layer, h) == self.induction:
                    logs = (got[:, h].clamp_min(1e-9).log() * valid).sum(-1) / count
                    total = total + F.relu(math.log(self.induction_floor) - logs).mean()
                    self.last["ind"] = float(mean[:, h].mean().detach())
                else:
                    total = total + F.relu(mean[:, h] - self.induction_ceiling).mean()
                    others.append(float(mean[:, h].mean().detach()))
        self.last["ind_other_max"] = max(others)
        return total

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
        if self.induction:
            total = total + self.induction_loss()
        self.inputs.clear()
        return total
