"""The attention views' derived numbers, kept while their run's trace lives.

The rollout and the overview's statistics (each head's induction, previous-token and first-token scores), computed under
a reservation from the server's memory budget so a long run is refused with a message, not an OOM."""

from __future__ import annotations

import weakref

from playground.inside.attention_stats import attention_rollout, head_stats, induction_scores, prefix_matches
from playground.runtime.memory import BUDGET
from playground.server.runs import all_layers_attention_bytes

__all__ = ["all_layers_reserved", "attention_rollout", "derived", "head_stats", "induction_scores", "prefix_matches"]


def all_layers_reserved(model, T: int, what: str):
    """The memory the all-layer views use while they compute, held in the budget: refused with a
    message, not an OOM. They take the layers one at a time (attention_stats), so the peak is a few
    copies of one layer's (H, T, T) probabilities, not all of them."""
    one_layer = all_layers_attention_bytes(model.cfg, T) // max(1, model.cfg.n_layers)
    return BUDGET.reserve(6 * one_layer, what, "attention")


# The rollout ([T, T] float64, 8 MB at 1,024 tokens) and the overview's statistics of a run's
# trace, kept while the trace lives: moving the query slider or switching between the overview
# metrics does not compute them again (seconds for a 1,024-token GPT-2 run).
_DERIVED: dict[int, dict] = {}


def derived(qk, name: str, model, T: int, what: str, compute):
    """``compute()`` once per trace and ``name`` (the trace's first query tensor keys it: a new run, a
    new entry), under the all-layer views' reservation."""
    key = qk[0][0]  # the first layer's queries: alive exactly as long as this trace
    cache = _DERIVED.get(id(key))
    if cache is None:  # keyed by id (a tensor's == is elementwise); dropped with the tensor
        cache = _DERIVED[id(key)] = {}
        weakref.finalize(key, _DERIVED.pop, id(key), None)
    if name not in cache:
        with all_layers_reserved(model, T, what):
            cache[name] = compute()
    return cache[name]
