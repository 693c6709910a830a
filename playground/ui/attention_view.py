"""The attention half of "Generate & attention": one head, all heads, head average, rollout, and
the layer × head overview, for the run's last context window.

Positions are numbered as in the whole sequence everywhere (status line, titles, axes, the query
slider): a window that starts at position 300 shows 300, 301, … and not 0, 1, ….
"""

from __future__ import annotations

import math

import gradio as gr
import numpy as np

from .. import figures
from ..attention_stats import attention_rollout, head_stats
from ..memory import BUDGET
from ..session import all_layers_attention_bytes, layer_attention, run_attention
from ..tokenizer import load_tokenizer
from .common import api_run, parse_choice, parse_whole, session_model, session_run, warn

VIEWS = ["one head", "all heads of the layer", "head average", "rollout across layers",
         "overview: previous-token mass", "overview: first-token mass", "overview: entropy"]
OVERVIEW_METRICS = {"overview: previous-token mass": "previous-token", "overview: first-token mass": "first-token",
                    "overview: entropy": "entropy"}
HEATMAP_MAX_TOKENS = 64  # beyond this the newest positions are shown, and the title says so
GRID_MAX_TOKENS = 24


def _window(state, run):
    """(model, window start, per-layer q/k, token ids and labels of the window).

    The tokens are read for exactly the positions the forward saw: a run that is still streaming
    may have grown by a token since (a chip clicked mid-run), and its labels must not shift."""
    model = session_model(state)
    start, qk = run_attention(model, run)
    T = qk[0][0].shape[1]  # (H, T, head_dim)
    ids = run.token_ids[start:start + T]
    labels = [p.display for p in load_tokenizer().pieces(ids)]
    return model, start, qk, ids, labels


def attention_views(state, view, layer, head, log_scale, query):
    """The chosen attention figure, where one query looked (hidden for overviews), the query
    slider's range (absolute positions of the window) and a message (empty when all is well)."""
    try:
        run = session_run(state)
        if run is None:
            empty = figures.empty_figure("Generate to see attention")
            return empty, gr.update(value=empty, visible=True), gr.skip(), ""
        view = parse_choice(view, VIEWS, "Attention view")
        log_scale = bool(log_scale) if isinstance(log_scale, (bool, int)) else str(log_scale).lower() == "true"
        model, start, qk, _, labels = _window(state, run)
        T_len = len(labels)
        end = start + T_len - 1
        layer = parse_whole(layer, "Layer", 0, len(qk) - 1)
        head = parse_whole(head, "Head", 0, model.cfg.n_heads - 1)
        query = end if query is None else parse_whole(query, "Query position", 0, end)
    except (ValueError, MemoryError) as e:
        return gr.skip(), gr.skip(), gr.skip(), warn(str(e))
    message = ""
    if query < start:
        message = warn(f"Position {query} is outside the model's last context window ({start}–{end}); "
                       f"showing position {start}.")
        query = start
    try:
        fig, row = _figure(view, model, qk, labels, start, layer, head, query, log_scale)
    except MemoryError as e:  # the all-layer views did not fit in the memory budget
        return gr.skip(), gr.skip(), gr.skip(), warn(str(e))
    query_update = gr.update(minimum=start, maximum=max(end, start + 1), value=query, visible=end > start)
    if row is None:  # an overview is about every head and position, not one query
        return fig, gr.update(visible=False), query_update, message
    q = query - start
    query_fig = figures.query_attention_bars(np.asarray(row), labels, query_label=labels[q], offset=start,
                                             title=f"Where position {query} ({labels[q]}) looked")
    return fig, gr.update(value=query_fig, visible=True), query_update, message


def _all_layers_reserved(model, T: int, what: str):
    """The memory of every layer's (H, T, T) probabilities and the float64 copies the statistics
    make, held in the budget while a view computes them: refused with a message, not an OOM."""
    return BUDGET.reserve(4 * all_layers_attention_bytes(model.cfg, T), what, "attention")


def _figure(view, model, qk, labels, start, layer, head, query, log_scale):
    """(figure, the query's attention row or None) for one view; ``query`` lies in the window."""
    T_len = len(labels)
    end = start + T_len - 1
    q = query - start  # row in the window
    note = f" (window: positions {start}–{end})" if start else ""
    probs_layer = layer_attention(qk, layer)  # (H, T, T)
    heatmap = dict(log_scale=log_scale, highlight_query=query, max_tokens=HEATMAP_MAX_TOKENS, offset=start)
    row = None
    if view == "all heads of the layer":
        fig = figures.attention_grid(probs_layer, labels, title=f"Layer {layer}: every head{note}",
                                     log_scale=log_scale, max_tokens=GRID_MAX_TOKENS, offset=start)
        row = probs_layer.mean(axis=0)[q]
    elif view == "head average":
        avg = probs_layer.mean(axis=0)
        fig = figures.attention_heatmap(avg, labels, title=f"Layer {layer}: average over heads{note}", **heatmap)
        row = avg[q]
    elif view == "rollout across layers":
        with _all_layers_reserved(model, T_len, "attention rollout through every layer"):
            rolled = attention_rollout([layer_attention(qk, i) for i in range(len(qk))])
        fig = figures.attention_heatmap(rolled, labels, title=f"Attention rollout through all {len(qk)} layers{note}",
                                        **heatmap)
        row = rolled[q]
    elif view in OVERVIEW_METRICS:
        metric = OVERVIEW_METRICS[view]
        with _all_layers_reserved(model, T_len, "the layer × head overview"):
            stats = head_stats([layer_attention(qk, i) for i in range(len(qk))])
        if metric == "entropy":
            top = math.log2(T_len) if T_len > 1 else 1.0
            zrange, scale = (0.0, top), f"colour scale 0–log2({T_len}) = {top:.2f} bits"
        else:
            zrange, scale = (0.0, 1.0), "colour scale 0–1"
        fig = figures.attention_overview(
            stats[metric], metric_name=metric + (" (bits)" if metric == "entropy" else ""), zrange=zrange,
            title=f"Every layer × head: {metric}, averaged over positions {start + 1}–{end}{note} · {scale}")
    else:
        fig = figures.attention_heatmap(probs_layer[head], labels, title=f"Layer {layer}, head {head}{note}",
                                        **heatmap)
        row = probs_layer[head][q]
    return fig, row


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
    return {"layer": layer, "head": head, "window_start": start, "token_ids": ids,
            "tokens": labels, "attention": probs.tolist()}
