"""The attention half of the Generate tab: one head, all heads, average, rollout, overview.

The attention half of "Generate & attention": one head, all heads, head average, rollout, and
the layer × head overview, for the run's last context window.

Positions are numbered as in the whole sequence everywhere (status line, titles, axes, the query
slider): a window that starts at position 300 shows 300, 301, … and not 0, 1, ….
"""

from __future__ import annotations

import json
import math

import gradio as gr
import numpy as np

from playground import figures
from playground.i18n import tr_error
from playground.server import attention_views as derived_views
from playground.server.attention_views import attention_rollout, head_stats, induction_scores, prefix_matches
from playground.server.recipes import BUNDLED_CHECKPOINT
from playground.server.runs import layer_attention, run_attention

from . import redraw
from .common import api_run, dress, lang_of, parse_bool, parse_choice, parse_whole, session_model, session_run, tr, warn
from .figure_dress import fit_height
from .results import only, result
from .state import for_the_session

VIEW_KEYS = {
    "one": "v_one",
    "all": "v_all",
    "average": "v_avg",
    "rollout": "v_rollout",
    "overview-previous": "v_prev",
    "overview-first": "v_first",
    "overview-entropy": "v_entropy",
    "overview-induction": "v_induction",
}
VIEWS = list(VIEW_KEYS)  # the ids the API sends; labels follow the language
OVERVIEW_METRICS = {
    "overview-previous": "previous-token",
    "overview-first": "first-token",
    "overview-entropy": "entropy",
    "overview-induction": "induction",
}
# The attention figure, where one query looked, the query slider and a message (Generate tab components).
AttentionViews = result("AttentionViews", "heatmap", "query_plot", "query", "att_msg")
# The heatmap's height on the Generate tab: what the first screen leaves under the tab's top row and
# the map's controls, so a run's chips, its map and the controls are seen together (1600×1000, and
# a 1024×768 projector in presenter mode; tests/browser/test_first_screen.py measures it).
MAP_HEIGHT = {False: 600, True: 460}  # px, by presenter mode
MIN_TICK_FONT = 8  # px: token labels that would overlap are set this small before every other one goes
HEATMAP_MAX_TOKENS = 64  # in the "newest" range, beyond this 64 positions up to the query (the title says so)
GRID_MAX_TOKENS = 24
# What a single map shows of a long run: its newest positions (every token labelled), or every
# position of the model's last context window (numbered axes; drag to zoom, double-click to reset).
SPANS = ["newest", "whole"]  # ids; the newest HEATMAP_MAX_TOKENS positions, or the whole window
SPAN_KEYS = dict(zip(SPANS, ("span_newest", "span_whole")))  # labels of the choices in the page's language
SPAN_NOTES = {  # said in the figure's title: keys of translations.py
    "whole": "span_note_whole",
    "grid": "span_note_grid",
}


HEAD_PATTERNS = {  # head in facts.json's "heads" -> (label key, a prompt that shows it)
    "previous_token": (
        "head_previous_token",
        "KING RICHARD:\nA horse! a horse! my kingdom for a horse!\n",
    ),
    # Two lines said twice, as a teacher would type their own: from each token of the second copy the head
    # looks at the token that followed it in the first (docs/bundled-model.md has how much of its attention
    # goes there on held-out lines).
    "induction": (
        "head_induction",
        "JULIET:\nO Romeo, Romeo! wherefore art thou Romeo?\nDeny thy father and refuse thy name.\n"
        "O Romeo, Romeo! wherefore art thou Romeo?\nDeny thy father and refuse thy name.\n",
    ),
    "first_token": ("head_first_token", "CORIOLANUS:\nWhat would you have, you curs, that like nor peace nor war?"),
}


def head_examples(view_name: str, lang: str = "en") -> tuple[list[list], list[str]]:
    """(examples, labels): prompts paired with the bundled model's measured heads (playground/assets/bundled/facts.json)."""
    facts_path = BUNDLED_CHECKPOINT.with_name("facts.json")
    if not facts_path.is_file():
        return [], []
    facts = json.loads(facts_path.read_text())
    heads, targets = facts.get("heads", {}), facts.get("targets", {})
    # Only heads that show their pattern as strongly as the bundled model's targets ask: a weak one
    # offered as "the previous-token head" would teach the wrong picture.
    found = [
        (HEAD_PATTERNS[name], h)
        for name, h in heads.items()
        if name in HEAD_PATTERNS and h["score"] >= targets.get(f"{name}_min", 0.0)
    ]
    # The induction example opens on the whole window: its newest 64 positions would cut off the first
    # copy the head looks back at.
    examples = [
        [prompt, view_name, h["layer"], h["head"], SPANS[1] if label == "head_induction" else SPANS[0]]
        for (label, prompt), h in found
    ]
    labels = [
        tr(lang, "head_example", label=tr(lang, label), layer=h["layer"], head=h["head"], score=f"{h['score']:.2f}")
        for (label, _), h in found
    ]
    return examples, labels


def _window(state, run):
    """(model, window start, per-layer q/k, token ids and labels of the window).

    The tokens are read for exactly the positions the forward saw: a run that is still streaming
    may have grown by a token since (a chip clicked mid-run), and its labels must not shift."""
    model = session_model(state)
    start, qk = run_attention(model, run)
    T = qk[0][0].shape[1]  # (H, T, head_dim)
    ids = run.token_ids[start : start + T]
    labels = [p.display for p in run.tokenizer.pieces(ids)]
    return model, start, qk, ids, labels


@for_the_session
def attention_views(state, view, layer, head, log_scale, query, span=SPANS[0], request: gr.Request = None):
    """The chosen attention figure, where one query looked (hidden for overviews), the query
    slider's range (absolute positions of the window) and a message (empty when all is well).
    span: one of SPANS, the newest positions or the whole run. What the page asked for is
    remembered as drawn (``redraw.remember_inputs``), for a change of language."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    redraw.remember_inputs(request, "attention", (view, layer, head, log_scale, query, span))
    try:
        run = session_run(state)
        if run is None:
            empty = dress(figures.empty_figure(tr(lang, "generate_to_see")), lang, present)
            return AttentionViews(empty, gr.update(value=empty, visible=True), gr.skip(), "")
        view = parse_choice(view, VIEWS, "Attention view")
        whole = parse_choice(span if span is not None else SPANS[0], SPANS, "Heatmap range") == SPANS[1]
        log_scale = parse_bool(log_scale, "Log scale")
        model, start, qk, ids, labels = _window(state, run)
        T_len = len(labels)
        end = start + T_len - 1
        layer = parse_whole(layer, "Layer", 0, len(qk) - 1)
        head = parse_whole(head, "Head", 0, model.cfg.n_heads - 1)
        query = end if query is None else parse_whole(query, "Query position", 0, end)
    except (ValueError, MemoryError) as e:
        return only(AttentionViews, att_msg=warn(tr_error(lang, e)))
    message = ""
    if query < start:
        message = warn(tr(lang, "att_outside", query=query, start=start, end=end))
        query = start
    try:
        fig, row, lo = _figure(view, model, qk, labels, start, layer, head, query, log_scale, whole, lang, ids)
    except MemoryError as e:  # the all-layer views did not fit in the memory budget
        return only(AttentionViews, att_msg=warn(tr_error(lang, e)))
    query_update = gr.update(minimum=start, maximum=max(end, start + 1), value=query, visible=end > start)
    fig = fit_height(dress(fig, lang, present), MAP_HEIGHT[present], None if present else MIN_TICK_FONT)
    if row is None:  # an overview is about every head and position, not one query
        return AttentionViews(fig, gr.update(visible=False), query_update, message)
    q = query - start
    query_fig = figures.query_attention_bars(
        np.asarray(row),
        labels[lo - start : q + 1],
        query_label=labels[q],
        offset=lo,
        title=tr(lang, "fig_query", query=query, label=labels[q], lo=lo),
    )
    return AttentionViews(fig, gr.update(value=dress(query_fig, lang, present), visible=True), query_update, message)


def shown_keys(start: int, end: int, query: int, limit: int | None) -> tuple[int, int]:
    """(first, last) position a map shows: the whole window, or ``limit`` positions that end at
    the query (or at ``limit`` - 1 past the window's start when the query is earlier), so the query's
    row always holds every key it can see that fits, and its bars below agree with it."""
    if limit is None or end - start + 1 <= limit:
        return start, end
    last = min(end, max(query, start + limit - 1))
    return last - limit + 1, last


def _figure(view, model, qk, labels, start, layer, head, query, log_scale, whole=False, lang="en", ids=None):
    """(figure, the query's attention row over the shown keys up to the query, first shown
    position) for one view (row None for the overviews); ``query`` lies in the window."""
    T_len = len(labels)
    end = start + T_len - 1
    limit = GRID_MAX_TOKENS if view == "all" else None if whole else HEATMAP_MAX_TOKENS
    lo, hi = shown_keys(start, end, query, limit)
    a, b, q = lo - start, hi - start + 1, query - start  # the shown slice and the query's row in the window
    note = tr(lang, "window_note", start=start, end=end) if start else ""
    if view not in OVERVIEW_METRICS:
        if (lo, hi) != (start, end):
            key = "span_note_grid" if whole and view == "all" else "span_note_shown"
            note += " · " + tr(lang, key, lo=lo, hi=hi, n=end + 1, k=GRID_MAX_TOKENS)
        elif whole:  # a run longer than the context: the map is its last window, said so
            key = "span_note_context" if start else "span_note_whole"
            note += " · " + tr(lang, key, n=T_len, start=start)
    # (H, T, T): only the single-layer views need it (the all-layer ones have their own, cached)
    probs_layer = layer_attention(qk, layer) if view in VIEWS[:3] else None
    shown = labels[a:b]
    heatmap = dict(log_scale=log_scale, highlight_query=query, offset=lo, height=MAP_HEIGHT[False])
    row = None
    if view == "all":
        fig = figures.attention_grid(
            probs_layer[:, a:b, a:b],
            shown,
            title=tr(lang, "fig_all_heads", layer=layer, note=note + _kv_grid_note(model.cfg, lang)),
            log_scale=log_scale,
            offset=lo,
            kv_group=model.cfg.n_heads // model.cfg.kv_heads,
        )
        row = probs_layer.mean(axis=0)[q]
    elif view == "average":
        avg = probs_layer.mean(axis=0)
        title = tr(lang, "fig_head_avg", layer=layer, note=note)
        fig = figures.attention_heatmap(avg[a:b, a:b], shown, title=title, **heatmap)
        row = avg[q]
    elif view == "rollout":
        rolled = derived_views.derived(
            qk,
            "rollout",
            model,
            T_len,
            "attention rollout through every layer",
            lambda: attention_rollout(layer_attention(qk, i) for i in range(len(qk))),
        )
        title = tr(lang, "fig_rollout", n=len(qk), note=note)
        fig = figures.attention_heatmap(rolled[a:b, a:b], shown, title=title, **heatmap)
        row = rolled[q]
    elif view in OVERVIEW_METRICS:
        metric = OVERVIEW_METRICS[view]
        repeating = 0  # the induction overview's positions whose token came before
        if metric == "induction":
            scores, repeating = derived_views.derived(
                qk,
                "induction",
                model,
                T_len,
                "the layer × head overview",
                lambda: (
                    induction_scores((layer_attention(qk, i) for i in range(len(qk))), ids),
                    int(prefix_matches(ids).any(1).sum()),
                ),
            )
            stats = {metric: scores}
        else:
            stats = derived_views.derived(
                qk,
                "stats",
                model,
                T_len,
                "the layer × head overview",
                lambda: head_stats(layer_attention(qk, i) for i in range(len(qk))),
            )
        if metric == "induction" and np.isnan(stats[metric]).all():
            note += " · " + tr(lang, "induction_no_repeat")
            stats = {metric: np.nan_to_num(stats[metric])}  # an empty map says nothing repeats; the note says why
        if metric == "entropy":
            top = math.log2(T_len) if T_len > 1 else 1.0
            zrange, scale = (0.0, top), tr(lang, "scale_entropy", n=T_len, top=f"{top:.2f}")
        else:
            zrange, scale = (0.0, 1.0), tr(lang, "scale_unit")
        fig = figures.attention_overview(
            stats[metric],
            metric_name=tr(lang, "m_" + metric) + (tr(lang, "bits") if metric == "entropy" else ""),
            zrange=zrange,
            title=tr(
                lang, "fig_overview", metric=tr(lang, "m_" + metric), first=start + 1, end=end, note=note, scale=scale
            )
            if metric != "induction"
            else tr(lang, "fig_overview_induction", n=repeating, note=note, scale=scale),
        )
        return fig, None, lo
    else:
        one = probs_layer[head]
        title = tr(lang, "fig_one_head", layer=layer, head=head, note=note + _kv_head_note(model.cfg, head, lang))
        fig = figures.attention_heatmap(one[a:b, a:b], shown, title=title, **heatmap)
        row = one[q]
    return fig, row[a : q + 1], lo


def _kv_head_note(cfg, head: int, lang: str) -> str:
    """With grouped-query attention: which key/value head this query head reads, and who shares it."""
    group = cfg.n_heads // cfg.kv_heads
    if group == 1:
        return ""
    first = head // group * group
    return tr(lang, "kv_shared_note", kv=head // group, first=first, last=first + group - 1)


def _kv_grid_note(cfg, lang: str) -> str:
    group = cfg.n_heads // cfg.kv_heads
    return tr(lang, "kv_grid_note", H=cfg.n_heads, K=cfg.kv_heads) if group > 1 else ""


@for_the_session
def attention_data(state, layer, head):
    """API: the raw attention matrix of one head for the current run, with its tokens."""
    run, error = api_run(state)
    if error:
        return error
    model, start, qk, ids, labels = _window(state, run)
    try:
        layer = parse_whole(layer, "layer", 0, len(qk) - 1)
        head = parse_whole(head, "head", 0, model.cfg.n_heads - 1)
    except ValueError as e:
        return {"error": f"{e} (layer must be 0..{len(qk) - 1} and head 0..{model.cfg.n_heads - 1})"}
    probs = layer_attention(qk, layer)[head]
    return {
        "layer": layer,
        "head": head,
        "window_start": start,
        "token_ids": ids,
        "tokens": labels,
        "attention": probs.tolist(),
    }
