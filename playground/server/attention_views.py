"""The attention views' derived numbers, kept while their run's trace lives.

The rollout and the overview's statistics (each head's induction, previous-token and first-token scores), computed under
a reservation from the server's memory budget so a long run is refused with a message, not an OOM."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from playground.inside.attention_stats import attention_rollout, head_stats, induction_scores, prefix_matches
from playground.runtime.memory import BUDGET
from playground.server.runs import all_layers_attention_bytes, layer_attention, run_attention


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


# The views' ids (what the API sends) and the overviews' metrics; the page's labels are the UI's.
VIEWS = (
    "one",
    "all",
    "average",
    "rollout",
    "overview-previous",
    "overview-first",
    "overview-entropy",
    "overview-induction",
)
OVERVIEW_METRICS = {
    "overview-previous": "previous-token",
    "overview-first": "first-token",
    "overview-entropy": "entropy",
    "overview-induction": "induction",
}
HEATMAP_MAX_TOKENS = 64  # in the "newest" range, beyond this 64 positions up to the query (the title says so)
GRID_MAX_TOKENS = 24


@dataclass(frozen=True)
class Window:
    """The positions of a run one forward saw: its first (absolute) position, its per-layer queries and
    keys, the token ids and their labels."""

    start: int
    qk: list
    ids: list[int]
    labels: list[str]

    @property
    def end(self) -> int:
        return self.start + len(self.ids) - 1


@dataclass(frozen=True)
class ViewData:
    """What one attention view shows, as numbers: the shown positions lo..hi of the window, the map
    (a (T', T') slice; (H, T', T') for "all"; (layers, heads) scores for an overview), the query's
    attention over the shown keys up to it (None for an overview), and for the induction overview
    how many positions repeat an earlier token."""

    view: str
    lo: int
    hi: int
    query: int
    matrix: np.ndarray
    row: np.ndarray | None
    metric: str | None = None
    repeating: int = 0


def window(model, run) -> Window:
    """The run's last context window as one forward saw it. The tokens are read for exactly the
    positions the forward saw: a run still streaming may have grown by a token since (a chip clicked
    mid-run), and its labels must not shift."""
    start, qk = run_attention(model, run)
    T = qk[0][0].shape[1]  # (H, T, head_dim)
    ids = run.token_ids[start : start + T]
    return Window(start, qk, ids, [p.display for p in run.tokenizer.pieces(ids)])


def shown_keys(start: int, end: int, query: int, limit: int | None) -> tuple[int, int]:
    """(first, last) position a map shows: the whole window, or ``limit`` positions that end at
    the query (or at ``limit`` - 1 past the window's start when the query is earlier), so the query's
    row always holds every key it can see that fits, and its bars below agree with it."""
    if limit is None or end - start + 1 <= limit:
        return start, end
    last = min(end, max(query, start + limit - 1))
    return last - limit + 1, last


def view_data(model, w: Window, view: str, layer: int, head: int, query: int, whole: bool = False) -> ViewData:
    """One view's numbers for a query in the window (``view`` one of VIEWS; layer and head checked by
    the caller). The all-layer views' numbers are kept while the trace lives (``derived``)."""
    qk, T_len = w.qk, len(w.ids)
    limit = GRID_MAX_TOKENS if view == "all" else None if whole else HEATMAP_MAX_TOKENS
    lo, hi = shown_keys(w.start, w.end, query, limit)
    a, b, q = lo - w.start, hi - w.start + 1, query - w.start  # the shown slice and the query's row
    if view in OVERVIEW_METRICS:
        metric = OVERVIEW_METRICS[view]
        if metric == "induction":
            scores, repeating = derived(
                qk,
                "induction",
                model,
                T_len,
                "the layer × head overview",
                lambda: (
                    induction_scores((layer_attention(qk, i) for i in range(len(qk))), w.ids),
                    int(prefix_matches(w.ids).any(1).sum()),
                ),
            )
            return ViewData(view, lo, hi, query, scores, None, metric, repeating)
        stats = derived(
            qk,
            "stats",
            model,
            T_len,
            "the layer × head overview",
            lambda: head_stats(layer_attention(qk, i) for i in range(len(qk))),
        )
        return ViewData(view, lo, hi, query, stats[metric], None, metric)
    if view == "rollout":
        full = derived(
            qk,
            "rollout",
            model,
            T_len,
            "attention rollout through every layer",
            lambda: attention_rollout(layer_attention(qk, i) for i in range(len(qk))),
        )
        return ViewData(view, lo, hi, query, full[a:b, a:b], full[q][a : q + 1])
    probs = layer_attention(qk, layer)  # (H, T, T)
    if view == "all":
        return ViewData(view, lo, hi, query, probs[:, a:b, a:b], probs.mean(axis=0)[q][a : q + 1])
    full = probs.mean(axis=0) if view == "average" else probs[head]
    return ViewData(view, lo, hi, query, full[a:b, a:b], full[q][a : q + 1])
