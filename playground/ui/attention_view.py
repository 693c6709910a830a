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
from playground.server import attention_views as views
from playground.server.attention_views import GRID_MAX_TOKENS, OVERVIEW_METRICS
from playground.server.recipes import BUNDLED_CHECKPOINT
from playground.server.runs import layer_attention
from playground.settings import parse_bool, parse_choice, parse_whole

from . import redraw
from .common import api_run, dress, empty, lang_of, session_model, session_run, tr, warn
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
VIEWS = list(views.VIEWS)  # the ids the API sends; labels follow the language (VIEW_KEYS)
# The attention figure, where one query looked, the query slider and a message (Generate tab components).
AttentionViews = result("AttentionViews", "heatmap", "query_plot", "query", "att_msg")
# The heatmap's height on the Generate tab: what the first screen leaves under the tab's top row and
# the map's controls, so a run's chips, its map and the controls are seen together (1600×1000, and
# a 1024×768 projector in presenter mode; tests/browser/test_first_screen.py measures it).
MAP_HEIGHT = {False: 600, True: 460}  # px, by presenter mode
MIN_TICK_FONT = 8  # px: token labels that would overlap are set this small before every other one goes
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
    """(model, the run's last window as one forward saw it: ``attention_views.Window``)."""
    model = session_model(state)
    return model, views.window(model, run)


@for_the_session
def attention_views(
    state, view, layer, head, log_scale, query, span=SPANS[0], request: gr.Request = None, bars: bool = True
):
    """The chosen attention figure, where one query looked (hidden for overviews), the query
    slider's range (absolute positions of the window) and a message (empty when all is well).
    span: one of SPANS, the newest positions or the whole run. What the page asked for is
    remembered as drawn (``redraw.remember_inputs``), for a change of language. ``bars`` False: the map
    only (the query's bars left as they are: a classroom room publishes the map alone). A page's maps are
    drawn one at a time (``redraw.page_lock``, which its language redraw takes too), so the one drawn last is
    the one recorded last."""
    with redraw.page_lock(request):
        return _attention_views(state, view, layer, head, log_scale, query, span, request, bars)


def _attention_views(state, view, layer, head, log_scale, query, span, request, bars):
    lang, present = lang_of(state), bool((state or {}).get("present"))
    redraw.remember_inputs(
        request, "attention", (view, layer, head, log_scale, query, span), (state or {}).get("run_id")
    )
    try:
        run = session_run(state)
        if run is None:
            shown = empty(tr(lang, "generate_to_see"), lang, present)
            return AttentionViews(shown, gr.update(value=shown, visible=True), gr.skip(), "")
        view = parse_choice(view, VIEWS, "Attention view")
        whole = parse_choice(span if span is not None else SPANS[0], SPANS, "Heatmap range") == SPANS[1]
        log_scale = parse_bool(log_scale, "Log scale")
        model, w = _window(state, run)
        start, end, labels = w.start, w.end, w.labels
        layer = parse_whole(layer, "Layer", 0, len(w.qk) - 1)
        head = parse_whole(head, "Head", 0, model.cfg.n_heads - 1)
        query = end if query is None else parse_whole(query, "Query position", 0, end)
    except (ValueError, MemoryError) as e:
        return only(AttentionViews, att_msg=warn(tr_error(lang, e)))
    message = ""
    if query < start:
        message = warn(tr(lang, "att_outside", query=query, start=start, end=end))
        query = start
    try:
        data = views.view_data(model, w, view, layer, head, query, whole)
        fig = _figure(data, model.cfg, w, layer, head, log_scale, whole, lang)
    except MemoryError as e:  # the all-layer views did not fit in the memory budget
        return only(AttentionViews, att_msg=warn(tr_error(lang, e)))
    query_update = gr.update(minimum=start, maximum=max(end, start + 1), value=query, visible=end > start)
    fig = fit_height(dress(fig, lang, present), MAP_HEIGHT[present], None if present else MIN_TICK_FONT)
    if data.row is None:  # an overview is about every head and position, not one query
        return AttentionViews(fig, gr.update(visible=False), query_update, message)
    if not bars:
        return AttentionViews(fig, gr.skip(), query_update, message)
    q, lo = query - start, data.lo
    query_fig = figures.query_attention_bars(
        np.asarray(data.row),
        labels[lo - start : q + 1],
        query_label=labels[q],
        offset=lo,
        title=tr(lang, "fig_query", query=query, label=labels[q], lo=lo),
    )
    return AttentionViews(fig, gr.update(value=dress(query_fig, lang, present), visible=True), query_update, message)


def _figure(data, cfg, w, layer: int, head: int, log_scale: bool, whole: bool = False, lang: str = "en"):
    """The figure of one view's numbers (``attention_views.view_data``), titled in the page's language."""
    start, end, lo, hi, query = w.start, w.end, data.lo, data.hi, data.query
    T_len = len(w.labels)
    note = tr(lang, "window_note", start=start, end=end) if start else ""
    view = data.view
    if view not in OVERVIEW_METRICS:
        if (lo, hi) != (start, end):
            key = "span_note_grid" if whole and view == "all" else "span_note_shown"
            note += " · " + tr(lang, key, lo=lo, hi=hi, n=end + 1, k=GRID_MAX_TOKENS)
        elif whole:  # a run longer than the context: the map is its last window, said so
            key = "span_note_context" if start else "span_note_whole"
            note += " · " + tr(lang, key, n=T_len, start=start)
    shown = w.labels[lo - start : hi - start + 1]
    heatmap = dict(log_scale=log_scale, highlight_query=query, offset=lo, height=MAP_HEIGHT[False])
    if view == "all":
        return figures.attention_grid(
            data.matrix,
            shown,
            title=tr(lang, "fig_all_heads", layer=layer, note=note + _kv_grid_note(cfg, lang)),
            log_scale=log_scale,
            offset=lo,
            kv_group=cfg.n_heads // cfg.kv_heads,
        )
    if view == "average":
        return figures.attention_heatmap(
            data.matrix, shown, title=tr(lang, "fig_head_avg", layer=layer, note=note), **heatmap
        )
    if view == "rollout":
        title = tr(lang, "fig_rollout", n=len(w.qk), note=note)
        return figures.attention_heatmap(data.matrix, shown, title=title, **heatmap)
    if data.metric is not None:
        metric, scores = data.metric, data.matrix
        if metric == "induction" and np.isnan(scores).all():
            note += " · " + tr(lang, "induction_no_repeat")
            scores = np.nan_to_num(scores)  # an empty map says nothing repeats; the note says why
        if metric == "entropy":
            top = math.log2(T_len) if T_len > 1 else 1.0
            zrange, scale = (0.0, top), tr(lang, "scale_entropy", n=T_len, top=f"{top:.2f}")
        else:
            zrange, scale = (0.0, 1.0), tr(lang, "scale_unit")
        return figures.attention_overview(
            scores,
            metric_name=tr(lang, "m_" + metric) + (tr(lang, "bits") if metric == "entropy" else ""),
            zrange=zrange,
            title=tr(
                lang, "fig_overview", metric=tr(lang, "m_" + metric), first=start + 1, end=end, note=note, scale=scale
            )
            if metric != "induction"
            else tr(lang, "fig_overview_induction", n=data.repeating, note=note, scale=scale),
        )
    title = tr(lang, "fig_one_head", layer=layer, head=head, note=note + _kv_head_note(cfg, head, lang))
    return figures.attention_heatmap(data.matrix, shown, title=title, **heatmap)


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
    model, w = _window(state, run)
    qk, start, ids, labels = w.qk, w.start, w.ids, w.labels
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
