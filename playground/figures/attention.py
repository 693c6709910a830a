"""Attention as pictures: one head's map, a layer's heads, the overview, one query's row.

Attention as pictures: one head's map, all heads of a layer, the layer x head overview, and one
query's row as bars.

Maps are drawn against integer positions 0..T-1 with the tokens as tick labels. Token strings as
axis values would make plotly treat them as categories and merge repeated tokens ("the" three
times draws one row), destroying the causal triangle.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.figures.style import (
    ANNOTATE_CELLS,
    BAR_COLOR,
    COLORSCALE,
    FONT_SIZE,
    HIGHLIGHT,
    LABEL_EVERY_TOKEN_MAX,
    LABEL_MARGIN,
    LOG_FLOOR,
    TICK_FONT_SIZE,
    as_2d,
    cell_text,
    fixed_margins,
    format_prob,
    heatmap_cells,
    layout,
    ticks,
    token_tick_font,
)


def _attention_window(probs: np.ndarray, labels, query_labels, max_tokens, offset: int = 0):
    """Cut a [Tq, Tk] map to its last ``max_tokens`` key positions (and the queries among them).

    Returns (probs, key_pos, query_pos, labels, query_labels, note). Query row i sits at sequence
    position Tk - Tq + i: a map of the last few queries (a KV-cached step) is still aligned.
    """
    Tq, Tk = probs.shape
    labels = [str(x) for x in labels]
    if len(labels) != Tk:
        raise ValueError(f"{len(labels)} labels for {Tk} key positions")
    query_labels = labels[Tk - Tq :] if query_labels is None else [str(x) for x in query_labels]
    if len(query_labels) != Tq:
        raise ValueError(f"{len(query_labels)} query labels for {Tq} query rows")
    key_pos = np.arange(Tk) + offset
    query_pos = np.arange(Tk - Tq, Tk) + offset
    note = ""
    if max_tokens is not None and Tk > max_tokens:
        start = Tk - int(max_tokens)
        rows = query_pos >= start + offset
        probs, query_pos = probs[rows][:, start:], query_pos[rows]
        query_labels = [q for q, keep in zip(query_labels, rows) if keep]
        key_pos, labels = key_pos[start:], labels[start:]
        note = f"showing positions {start + offset}–{Tk - 1 + offset} of {Tk + offset} (earlier keys cut)"
    return probs, key_pos, query_pos, labels, query_labels, note


def _colour_values(probs: np.ndarray, key_pos, query_pos, log_scale: bool, floor: float):
    """Values to colour by, with the causal upper triangle as NaN so plotly leaves it blank."""
    z = np.log10(np.maximum(probs, floor)) if log_scale else probs.astype(np.float64)
    future = key_pos[None, :] > query_pos[:, None]  # [Tq, Tk]: keys a causal query cannot see
    masked = future & (probs == 0)
    # float32 halves what the browser receives; colours need no more precision.
    return np.where(masked, np.nan, z).astype(np.float32), masked


def _colour_axis(log_scale: bool, floor: float, title: str = "attention") -> dict:
    if not log_scale:
        return dict(colorscale=COLORSCALE, cmin=0.0, cmax=1.0, colorbar=dict(title=dict(text=title)))
    lo = math.log10(floor)
    decades = list(range(math.ceil(lo), 1))
    ticktext = [f"{10.0**d:g}" for d in decades]
    ticktext[0] = "≤" + ticktext[0]  # everything under the floor shares its colour
    return dict(
        colorscale=COLORSCALE,
        cmin=lo,
        cmax=0.0,
        colorbar=dict(title=dict(text=f"{title}<br>(log)"), tickvals=decades, ticktext=ticktext),
    )


def attention_heatmap(
    probs,
    labels,
    *,
    title: str = "",
    log_scale: bool = False,
    query_labels=None,
    highlight_query: int | None = None,
    max_tokens: int | None = None,
    log_floor: float = LOG_FLOOR,
    height: int | None = None,
    offset: int = 0,
) -> go.Figure:
    """One attention map: rows are queries (earliest at the top), columns the keys they look at.

    probs: [Tq, Tk]; labels: the Tk key tokens; query_labels defaults to the last Tq labels.
    offset: the sequence position of key 0 (a window that starts later is numbered as in the
    whole sequence). highlight_query is a sequence position: its row gets a box. Every token in
    the window is labelled on both axes.
    """
    probs = as_2d(probs)
    probs, key_pos, query_pos, labels, query_labels, note = _attention_window(
        probs, labels, query_labels, max_tokens, offset
    )
    n = len(key_pos)
    font = token_tick_font(n)
    height = height or int(min(780, max(520, 11 * n + 220)))
    z, masked = _colour_values(probs, key_pos, query_pos, log_scale, log_floor)
    # Hover reads the probability from numeric customdata (z is log10(p) on a log scale): a string
    # per cell would double what the browser parses and draws (measured in Chromium).
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=key_pos,
            y=query_pos,
            # A big map (a whole long run) sends z only: its hover reads log10 p on a log scale, which
            # halves what the browser receives.
            customdata=None if n > LABEL_EVERY_TOKEN_MAX else probs.astype(np.float32),
            hovertemplate="query %{y:d} → key %{x:d}<br>"
            + (
                "p = %{customdata:.3g}"
                if n <= LABEL_EVERY_TOKEN_MAX
                else "log₁₀ p = %{z:.2f}"
                if log_scale
                else "p = %{z:.3g}"
            )
            + "<extra></extra>",
            hoverongaps=False,
            coloraxis="coloraxis",
        )
    )
    if highlight_query is not None and int(highlight_query) in set(query_pos.tolist()):
        q = int(highlight_query)
        fig.add_shape(
            type="rect",
            x0=key_pos[0] - 0.5,
            x1=key_pos[-1] + 0.5,
            y0=q - 0.5,
            y1=q + 0.5,
            line=dict(color=HIGHLIGHT, width=3),
            fillcolor="rgba(0,0,0,0)",
        )
    full_title = " · ".join(t for t in (title, note) if t)
    layout(fig, full_title, height, coloraxis=_colour_axis(log_scale, log_floor))
    fixed_margins(fig, left=LABEL_MARGIN, bottom=LABEL_MARGIN)
    if n <= LABEL_EVERY_TOKEN_MAX:
        x_ticks = ticks(key_pos, labels, max_ticks=None, font_size=font)
        y_ticks = ticks(query_pos, query_labels, max_ticks=None, font_size=font)
    else:  # positions as numbers: plotly picks ticks that follow zoom and pan
        x_ticks = y_ticks = dict(tickmode="auto", nticks=16, tickfont=dict(size=TICK_FONT_SIZE))
    fig.update_xaxes(
        title_text="key position (looked at)",
        tickangle=-90 if n <= LABEL_EVERY_TOKEN_MAX else 0,
        showgrid=False,
        zeroline=False,
        constrain="domain",
        **x_ticks,  # square cells shrink the axis, never widen its range
    )
    fig.update_yaxes(
        title_text="query position (looking)",
        autorange="reversed",
        showgrid=False,
        zeroline=False,
        scaleanchor="x",
        scaleratio=1,
        constrain="domain",
        **y_ticks,
    )
    return fig


def attention_grid(
    probs_heads,
    labels,
    *,
    title: str = "",
    log_scale: bool = False,
    max_tokens: int | None = None,
    cols: int | None = None,
    log_floor: float = LOG_FLOOR,
    offset: int = 0,
    kv_group: int = 1,
) -> go.Figure:
    """All heads of one layer as small multiples ([H, Tq, Tk]), on one shared colour scale.

    Every token is labelled on the outer axes (left column, bottom row); inner panels share them.
    ``kv_group``: query heads per key/value head (grouped-query attention): each panel's title names its
    KV head, coloured by it, so the heads that read the same keys and values are seen together."""
    heads = np.asarray(probs_heads, dtype=np.float64)
    if heads.ndim != 3:
        raise ValueError(f"probs_heads must be 3-D [heads, queries, keys], got shape {heads.shape}")
    H = heads.shape[0]
    cols = cols or min(H, max(4, math.ceil(math.sqrt(H))))
    rows = math.ceil(H / cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[f"head {h} · KV {h // kv_group}" if kv_group > 1 else f"head {h}" for h in range(H)],
        horizontal_spacing=0.02 + 0.1 / cols,
        vertical_spacing=min(0.25 / rows + 0.02, 0.12),
    )
    note = ""
    p_value = "customdata" if log_scale else "z"
    for h in range(H):
        p, key_pos, query_pos, keys, queries, note = _attention_window(heads[h], labels, None, max_tokens, offset)
        z, _ = _colour_values(p, key_pos, query_pos, log_scale, log_floor)
        r, c = h // cols + 1, h % cols + 1
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=key_pos,
                y=query_pos,
                coloraxis="coloraxis",
                hoverongaps=False,
                # On a log scale z is log10(p): the probability itself travels as customdata.
                customdata=p.astype(np.float32) if log_scale else None,
                hovertemplate=f"head {h}<br>query %{{y:d}} → key %{{x:d}}<br>p=%{{{p_value}:.3g}}<extra></extra>",
            ),
            row=r,
            col=c,
        )
        outer_x = r == rows or h + cols >= H  # nothing below this panel
        font = max(7, token_tick_font(len(key_pos)) - 2)
        fig.update_xaxes(
            showgrid=False,
            zeroline=False,
            tickangle=-90,
            showticklabels=outer_x,
            **ticks(key_pos, keys, max_ticks=None, font_size=font),
            row=r,
            col=c,
        )
        fig.update_yaxes(
            showgrid=False,
            zeroline=False,
            autorange="reversed",
            showticklabels=c == 1,
            **ticks(query_pos, queries, max_ticks=None, font_size=font),
            row=r,
            col=c,
        )
    row_height = max(170, min(320, 700 // rows))  # the whole grid fits a laptop screen
    full_title = " · ".join(t for t in (title, note) if t)
    layout(fig, full_title, 90 + rows * row_height, coloraxis=_colour_axis(log_scale, log_floor))
    fixed_margins(fig, left=LABEL_MARGIN - 25, bottom=LABEL_MARGIN - 25)  # no axis titles here
    fig.update_annotations(font_size=FONT_SIZE)  # the subplot titles
    if kv_group > 1:  # one colour per key/value head: its group of query heads reads the same keys
        for h, note in enumerate(fig.layout.annotations[:H]):
            note.font.color = KV_COLOURS[(h // kv_group) % len(KV_COLOURS)]
    return fig


# Title colours of the key/value heads in a grouped-query grid (dark enough for text on white).
KV_COLOURS = ("#1d4ed8", "#b45309", "#047857", "#b91c1c", "#6d28d9", "#0e7490", "#a21caf", "#4d7c0f")


def attention_overview(
    values,
    *,
    metric_name: str = "",
    layer_labels=None,
    head_labels=None,
    title: str = "",
    zrange: tuple[float, float] | None = None,
) -> go.Figure:
    """A [L, H] statistic per head (layer rows from the top, head columns), values printed if few.

    zrange fixes the colour scale (0–1 for masses, 0–log2(T) for entropy) so a small spread does
    not look dramatic; without it the scale spans the data."""
    values = as_2d(values, "values")
    L, H = values.shape
    layer_labels = [f"L{i}" for i in range(L)] if layer_labels is None else [str(x) for x in layer_labels]
    head_labels = [f"H{h}" for h in range(H)] if head_labels is None else [str(x) for x in head_labels]
    finite = values[np.isfinite(values)]
    if zrange is not None:
        zmin, zmax = float(zrange[0]), float(zrange[1])
    else:
        zmin, zmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    annotate = L * H <= ANNOTATE_CELLS
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=np.arange(H),
            y=np.arange(L),
            colorscale=COLORSCALE,
            zmin=zmin,
            zmax=zmax if zmax > zmin else zmin + 1.0,
            colorbar=dict(title=dict(text=metric_name)),
            hovertemplate=f"layer %{{y:d}}, head %{{x:d}}<br>{metric_name or 'value'} = %{{z:.3f}}<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    if annotate:
        text = [[f"{v:.2f}" for v in row] for row in values]
        cells = heatmap_cells(values.tolist(), text, range(H), range(L))
        fig.add_trace(cell_text(*cells, COLORSCALE, zmin, zmax if zmax > zmin else zmin + 1.0, TICK_FONT_SIZE))
    layout(fig, title, max(260, min(720, 130 + 34 * L)))
    fixed_margins(fig, left=70, bottom=60)
    fig.update_xaxes(title_text="head", showgrid=False, **ticks(range(H), head_labels))
    fig.update_yaxes(title_text="layer", autorange="reversed", showgrid=False, **ticks(range(L), layer_labels))
    return fig


def query_attention_bars(row, labels, *, query_label: str = "", title: str = "", offset: int = 0) -> go.Figure:
    """Where one query looked: a bar per key position (numbered from ``offset``, as in the sequence)."""
    row = np.asarray(row, dtype=np.float64).ravel()
    labels = [str(x) for x in labels]
    if len(labels) != len(row):
        raise ValueError(f"{len(labels)} labels for {len(row)} attention weights")
    pos = np.arange(len(row)) + offset
    fig = go.Figure(
        go.Bar(
            x=pos,
            y=row,
            marker_color=BAR_COLOR,
            customdata=[[lab, format_prob(p)] for lab, p in zip(labels, row)],
            hovertemplate="key %{x:d}·%{customdata[0]}: %{customdata[1]}<extra></extra>",
        )
    )
    title = title or (f"where “{query_label}” looked" if query_label else "")
    layout(fig, title, 360, showlegend=False)
    fixed_margins(fig, left=80, bottom=LABEL_MARGIN)
    fig.update_xaxes(title_text="key position", tickangle=-90, **ticks(pos, labels))
    fig.update_yaxes(title_text="attention", tickformat=".3~%", rangemode="tozero")  # 0.5%, not "0%"
    return fig
