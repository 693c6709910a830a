"""Plotly figure builders: attention heatmaps, head grids and overviews, sampling bars, the
parameter treemap, loss curves and memory bars.

Every builder takes plain Python / numpy data and returns a ``go.Figure``; nothing here imports
torch or gradio, so the figures are unit-tested on hand-made arrays and the UI only converts.

Attention maps are drawn against integer positions 0..T-1 with the tokens as tick labels. Token
strings as axis values would make plotly treat them as categories and merge repeated tokens
("the" three times draws one row), destroying the causal triangle.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

TEMPLATE = "plotly_white"
FONT_SIZE = 14  # readable on a projector
TICK_FONT_SIZE = 13
COLORSCALE = "Viridis"  # perceptually uniform; masked (NaN) cells stay white, unlike any colour in it
HIGHLIGHT = "#d62728"  # the chosen token, the selected query row
BAR_COLOR = "#4c78a8"
MUTED = "#9e9e9e"
LOG_FLOOR = 1e-4  # log-scale colours stop here: smaller weights are "nothing" for a reader
MAX_TICKS = 40  # more tick labels than this overlap on a laptop screen
MAX_TICK_CHARS = 12
ANNOTATE_CELLS = 300  # print values in overview cells up to this many cells
# Up to this many positions every token labels its row and column; a larger map (a whole long run)
# gets numbered axes whose ticks follow the zoom instead, since a 9 px label per cell would overlap.
LABEL_EVERY_TOKEN_MAX = 96

STAGE_NAMES = {
    "raw": "raw softmax",
    "temperature": "after temperature",
    "top_k": "after top-k",
    "top_p": "after top-p",
}


# ----------------------------------------------------------------------------------------------
# Small helpers


def _layout(fig: go.Figure, title: str, height: int, **extra) -> go.Figure:
    fig.update_layout(
        template=TEMPLATE,
        # Transparent: the page's light or dark theme shows through (the app's CSS recolours text
        # and grid lines in dark mode), so one figure serves both.
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        title=dict(text=title, x=0.01, xanchor="left", font=dict(size=FONT_SIZE + 2)),
        font=dict(size=FONT_SIZE),
        height=height,
        margin=dict(l=10, r=10, t=60 if title else 30, b=10),
        **extra,
    )
    return fig


def _fixed_margins(fig: go.Figure, *, left: int, bottom: int, top: int = 60, right: int = 20) -> go.Figure:
    """Fixed margins instead of plotly's automatic ones, for figures the Generate tab redraws often.

    With automargin and tick-label overflow checks plotly measures every tick label several times
    while drawing: a 64-token heatmap took ~1.2 s of the browser's main thread, ~60 ms without
    (measured in Chromium). Tick labels are at most MAX_TICK_CHARS long, so the margins below fit
    them."""
    fig.update_xaxes(automargin=False, ticklabeloverflow="allow")
    fig.update_yaxes(automargin=False, ticklabeloverflow="allow")
    fig.update_layout(margin=dict(l=left, r=right, t=top, b=bottom))
    return fig


LABEL_MARGIN = 125  # px for a 12-character tick label (at most 13 px type) plus its axis title


def format_prob(p: float) -> str:
    """A probability as a percentage with two significant digits below 10%, so a sampled token
    never reads "0%": 0.45 -> "45%", 0.045 -> "4.5%", 0.00045 -> "0.045%"; only 0 is "0%"."""
    p = float(p)
    if not math.isfinite(p):
        return "–"
    if p <= 0:
        return "0%"
    if p >= 1:
        return "100%"
    pct = p * 100
    if pct >= 10:
        for decimals in range(6):  # 99.96% is not certainty: add decimals until it stays under 100
            text = f"{pct:.{decimals}f}"
            if float(text) < 100:
                return text + "%"
        return ">99.9999%"
    return np.format_float_positional(pct, precision=2, unique=False, fractional=False, trim="-") + "%"


def _short(label: str, limit: int = MAX_TICK_CHARS) -> str:
    label = str(label)
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _ticks(
    positions,
    labels,
    max_ticks: int | None = MAX_TICKS,
    max_chars: int = MAX_TICK_CHARS,
    font_size: int = TICK_FONT_SIZE,
) -> dict:
    """Tick every position when they fit (max_ticks None: always), else every k-th one (always
    including the last)."""
    positions, labels = list(positions), [str(x) for x in labels]
    step = 1 if max_ticks is None else max(1, math.ceil(len(positions) / max_ticks))
    keep = list(range(len(positions) - 1, -1, -step))[::-1]  # anchored on the newest token
    return dict(
        tickmode="array",
        tickvals=[positions[i] for i in keep],
        ticktext=[_short(labels[i], max_chars) for i in keep],
        tickfont=dict(size=font_size),
    )


def token_tick_font(n_tokens: int) -> int:
    """Every token gets its label on a heatmap axis: the font shrinks with the count instead."""
    return TICK_FONT_SIZE if n_tokens <= 24 else 11 if n_tokens <= 40 else 9


def _as_2d(probs, name: str = "probs") -> np.ndarray:
    a = np.asarray(probs, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{name} must be 2-D [queries, keys], got shape {a.shape}")
    return a


def _format_bytes(n: float) -> str:
    # Same as playground.engine.config.format_bytes (decimal units); repeated so this module loads on its own.
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def _index_of(chosen, labels) -> int | None:
    """``chosen`` as an index into labels: an int is one already, a string is looked up."""
    if chosen is None:
        return None
    if isinstance(chosen, (int, np.integer)):
        return int(chosen) if 0 <= int(chosen) < len(labels) else None
    labels = [str(x) for x in labels]
    return labels.index(str(chosen)) if str(chosen) in labels else None


# ----------------------------------------------------------------------------------------------
# Attention maps


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
    probs = _as_2d(probs)
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
            # halves what the browser receives (12 MB -> 6 MB for 1,048 × 1,048, measured).
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
    _layout(fig, full_title, height, coloraxis=_colour_axis(log_scale, log_floor))
    _fixed_margins(fig, left=LABEL_MARGIN, bottom=LABEL_MARGIN)
    if n <= LABEL_EVERY_TOKEN_MAX:
        x_ticks = _ticks(key_pos, labels, max_ticks=None, font_size=font)
        y_ticks = _ticks(query_pos, query_labels, max_ticks=None, font_size=font)
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
) -> go.Figure:
    """All heads of one layer as small multiples ([H, Tq, Tk]), on one shared colour scale.

    Every token is labelled on the outer axes (left column, bottom row); inner panels share them."""
    heads = np.asarray(probs_heads, dtype=np.float64)
    if heads.ndim != 3:
        raise ValueError(f"probs_heads must be 3-D [heads, queries, keys], got shape {heads.shape}")
    H = heads.shape[0]
    cols = cols or min(H, max(4, math.ceil(math.sqrt(H))))
    rows = math.ceil(H / cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[f"head {h}" for h in range(H)],
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
            **_ticks(key_pos, keys, max_ticks=None, font_size=font),
            row=r,
            col=c,
        )
        fig.update_yaxes(
            showgrid=False,
            zeroline=False,
            autorange="reversed",
            showticklabels=c == 1,
            **_ticks(query_pos, queries, max_ticks=None, font_size=font),
            row=r,
            col=c,
        )
    row_height = max(170, min(320, 700 // rows))  # the whole grid fits a laptop screen
    full_title = " · ".join(t for t in (title, note) if t)
    _layout(fig, full_title, 90 + rows * row_height, coloraxis=_colour_axis(log_scale, log_floor))
    _fixed_margins(fig, left=LABEL_MARGIN - 25, bottom=LABEL_MARGIN - 25)  # no axis titles here
    fig.update_annotations(font_size=FONT_SIZE)  # the subplot titles
    return fig


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
    values = _as_2d(values, "values")
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
            texttemplate="%{z:.2f}" if annotate else None,
            textfont=dict(size=TICK_FONT_SIZE),
            hovertemplate=f"layer %{{y:d}}, head %{{x:d}}<br>{metric_name or 'value'} = %{{z:.3f}}<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    _layout(fig, title, max(260, min(720, 130 + 34 * L)))
    _fixed_margins(fig, left=70, bottom=60)
    fig.update_xaxes(title_text="head", showgrid=False, **_ticks(range(H), head_labels))
    fig.update_yaxes(title_text="layer", autorange="reversed", showgrid=False, **_ticks(range(L), layer_labels))
    return fig


# ----------------------------------------------------------------------------------------------
# Bars: one query's attention, next-token alternatives, sampling stages


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
    _layout(fig, title, 360, showlegend=False)
    _fixed_margins(fig, left=80, bottom=LABEL_MARGIN)
    fig.update_xaxes(title_text="key position", tickangle=-90, **_ticks(pos, labels))
    fig.update_yaxes(title_text="attention", tickformat=".3~%", rangemode="tozero")  # 0.5%, not "0%"
    return fig


def token_probability_bars(labels, probs, *, chosen=None, title: str = "") -> go.Figure:
    """The top alternatives for one step as horizontal bars, first label on top; chosen in red.

    chosen: an index into labels, or a label string.
    """
    labels = [str(x) for x in labels]
    probs = np.asarray(probs, dtype=np.float64).ravel()
    if len(labels) != len(probs):
        raise ValueError(f"{len(labels)} labels for {len(probs)} probabilities")
    k = _index_of(chosen, labels)
    pos = np.arange(len(labels))
    colours = [HIGHLIGHT if i == k else BAR_COLOR for i in pos]
    fig = go.Figure(
        go.Bar(
            x=probs,
            y=pos,
            orientation="h",
            marker_color=colours,
            customdata=[[lab, format_prob(p)] for lab, p in zip(labels, probs)],
            text=[format_prob(p) for p in probs],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{customdata[0]}: %{customdata[1]}<extra></extra>",
        )
    )
    _layout(fig, title, max(260, 90 + 30 * len(labels)), showlegend=False)
    _fixed_margins(fig, left=LABEL_MARGIN, bottom=60, right=60)  # right: room for the value labels
    fig.update_xaxes(title_text="probability", tickformat=".3~%", range=[0, max(probs.max(initial=0) * 1.2, 0.05)])
    fig.update_yaxes(autorange="reversed", **_ticks(pos, labels))
    return fig


def sampling_stages_figure(labels, stages, *, chosen=None, stage_names=None, title: str = "") -> go.Figure:
    """One panel per stage (raw softmax → temperature → top-k → top-p) over the same candidates.

    stages: {stage: probabilities aligned to labels}. A candidate a filter removed (probability 0
    after having some before) is drawn as a ✕ at zero. The x range is shared so reshaping shows.
    """
    labels = [str(x) for x in labels]
    names = list(stages)
    if isinstance(stage_names, dict):
        titles = [stage_names.get(n, STAGE_NAMES.get(n, n)) for n in names]
    elif stage_names is not None:
        titles = list(stage_names)
    else:
        titles = [STAGE_NAMES.get(n, n) for n in names]
    values = [np.asarray(stages[n], dtype=np.float64).ravel() for n in names]
    for n, v in zip(names, values):
        if len(v) != len(labels):
            raise ValueError(f"stage {n!r} has {len(v)} probabilities for {len(labels)} candidates")
    k = _index_of(chosen, labels)
    pos = np.arange(len(labels))
    fig = make_subplots(rows=1, cols=len(names), shared_yaxes=True, subplot_titles=titles, horizontal_spacing=0.03)
    top = max((float(v.max(initial=0)) for v in values), default=1.0) or 1.0
    for c, (stage_title, v) in enumerate(zip(titles, values), start=1):
        before = values[c - 2] if c > 1 else v
        removed = (v == 0) & (before > 0)
        fig.add_trace(
            go.Bar(
                x=v,
                y=pos,
                orientation="h",
                name=stage_title,
                customdata=[[lab, format_prob(p)] for lab, p in zip(labels, v)],
                marker_color=[HIGHLIGHT if i == k else BAR_COLOR for i in pos],
                # Every kept candidate gets its number (the chosen one can be tiny, never "0%").
                text=["" if removed[i] or (p == 0 and i != k) else format_prob(p) for i, p in enumerate(v)],
                textposition="outside",
                cliponaxis=False,
                hovertemplate=f"{stage_title}<br>%{{customdata[0]}}: %{{customdata[1]}}<extra></extra>",
            ),
            row=1,
            col=c,
        )
        if removed.any():
            fig.add_trace(
                go.Scatter(
                    x=np.zeros(int(removed.sum())),
                    y=pos[removed],
                    mode="markers+text",
                    marker=dict(symbol="x", size=11, color=MUTED),
                    text=["removed"] * int(removed.sum()),
                    textposition="middle right",
                    textfont=dict(color=MUTED, size=TICK_FONT_SIZE),
                    cliponaxis=False,
                    customdata=np.array(labels)[removed],
                    name=f"removed ({stage_title})",
                    hovertemplate=f"%{{customdata}}: removed {stage_title}<extra></extra>",
                ),
                row=1,
                col=c,
            )
        fig.update_xaxes(range=[0, top * 1.3], tickformat=".3~%", row=1, col=c)
    fig.update_yaxes(autorange="reversed", **_ticks(pos, labels), row=1, col=1)
    _layout(fig, title, max(300, 110 + 28 * len(labels)), showlegend=False, bargap=0.25)
    _fixed_margins(fig, left=LABEL_MARGIN, bottom=50, top=80, right=50)
    fig.update_annotations(font_size=FONT_SIZE)
    return fig


# ----------------------------------------------------------------------------------------------
# Parameters, memory, training


ROOT_ID = "(model)"  # cannot collide with a module path: those have no parentheses


def parameter_treemap(items, *, title: str = "", maxdepth: int = 3) -> go.Figure:
    """Where the parameters live, as a treemap of dotted module paths.

    items: [(path, count)], e.g. ("trf_blocks.0.att.W_query", 590592). Every prefix becomes a node
    whose value is the sum below it (branchvalues="total"); a tied module (count 0) is a leaf of
    size zero, so it keeps its place in the tree without drawing area.
    """
    own: dict[str, int] = {}
    for path, count in items:
        path = str(path).strip(".")
        if not path:
            raise ValueError("empty module path")
        own[path] = own.get(path, 0) + int(count)
    values: dict[str, int] = {ROOT_ID: 0}
    parents: dict[str, str] = {ROOT_ID: ""}
    for path, count in own.items():
        parts = path.split(".")
        for depth in range(1, len(parts) + 1):
            node = ".".join(parts[:depth])
            parents.setdefault(node, ".".join(parts[: depth - 1]) or ROOT_ID)
            values[node] = values.get(node, 0) + count
        values[ROOT_ID] += count
    ids = list(values)
    total = values[ROOT_ID]

    def label(node: str) -> str:
        if node == ROOT_ID:
            return "model"
        parts = node.split(".")
        # "0" alone says little: a numbered block is shown with its container, "trf_blocks.0".
        return ".".join(parts[-2:]) if parts[-1].isdigit() and len(parts) > 1 else parts[-1]

    share = [values[i] / total if total else 0.0 for i in ids]
    fig = go.Figure(
        go.Treemap(
            ids=ids,
            labels=[label(i) for i in ids],
            parents=[parents[i] for i in ids],
            values=[values[i] for i in ids],
            branchvalues="total",
            maxdepth=maxdepth,
            customdata=[[i, s] for i, s in zip(ids, share)],
            texttemplate="%{label}<br>%{value:,}",
            hovertemplate="%{customdata[0]}<br>%{value:,} parameters<br>%{customdata[1]:.1%} of total<extra></extra>",
            marker=dict(colorscale="Blues"),
            root=dict(color="white"),
        )
    )
    return _layout(fig, title or f"{total:,} parameters", 520)


def parameter_components_bar(components, formula_values, measured_values, *, title: str = "") -> go.Figure:
    """Parameters per component, the analytic formula beside the count measured on the model."""
    components = [str(c) for c in components]
    formula_values = [int(v) for v in formula_values]
    measured_values = [int(v) for v in measured_values]
    if not len(components) == len(formula_values) == len(measured_values):
        raise ValueError("components, formula_values and measured_values must have the same length")
    pos = np.arange(len(components))
    fig = go.Figure()
    for name, vals, colour in (("formula", formula_values, MUTED), ("measured", measured_values, BAR_COLOR)):
        fig.add_trace(
            go.Bar(
                x=vals,
                y=pos,
                orientation="h",
                name=name,
                marker_color=colour,
                customdata=components,
                text=[f"{v:,}" for v in vals],
                textposition="outside",
                cliponaxis=False,
                hovertemplate=f"%{{customdata}}<br>{name}: %{{x:,}}<extra></extra>",
            )
        )
    top = max(formula_values + measured_values, default=0)
    _layout(fig, title, max(300, 100 + 46 * len(components)), barmode="group", legend=dict(orientation="h", y=-0.12))
    fig.update_xaxes(title_text="parameters", range=[0, max(top, 1) * 1.3], tickformat="~s")
    fig.update_yaxes(autorange="reversed", **_ticks(pos, components, max_chars=24))
    return fig


def loss_curve(train_points, val_points, *, title: str = "", baselines: dict | None = None) -> go.Figure:
    """Training and validation loss against step; baselines are dashed horizontal lines."""
    fig = go.Figure()
    for name, points, mode, colour in (
        ("train", train_points, "lines", BAR_COLOR),
        ("validation", val_points, "lines+markers", "#f58518"),
    ):
        points = list(points or [])
        fig.add_trace(
            go.Scatter(
                x=[int(s) for s, _ in points],
                y=[float(v) for _, v in points],
                mode=mode,
                name=name,
                line=dict(color=colour, width=2),
                hovertemplate=f"{name}<br>step %{{x}}: loss %{{y:.3f}}<extra></extra>",
            )
        )
    for _i, (name, value) in enumerate((baselines or {}).items()):
        fig.add_hline(
            y=float(value),
            line=dict(dash="dash", color=MUTED, width=1.5),
            annotation_text=f"{name}: {float(value):.2f}",
            annotation_position="top right",
            annotation_font_size=TICK_FONT_SIZE,
        )
    _layout(fig, title, 380, legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"))
    fig.update_xaxes(title_text="step", rangemode="tozero")
    fig.update_yaxes(title_text="loss (cross-entropy, nats)")
    return fig


def memory_bars(memory: dict[str, int], *, title: str = "") -> go.Figure:
    """Bytes per use (fp32 weights, bf16, int8, training...) as bars labelled in MB or GB."""
    names = [str(k) for k in memory]
    sizes = [int(v) for v in memory.values()]
    unit, scale = ("GB", 1e9) if max(sizes, default=0) >= 1e9 else ("MB", 1e6)
    fig = go.Figure(
        go.Bar(
            x=names,
            y=[s / scale for s in sizes],
            marker_color=BAR_COLOR,
            text=[_format_bytes(s) for s in sizes],
            textposition="outside",
            cliponaxis=False,
            customdata=[f"{s:,}" for s in sizes],
            hovertemplate="%{x}: %{text} (%{customdata} bytes)<extra></extra>",
        )
    )
    # Room on the right: the last name ("KV cache (256 tokens, fp32)") is slanted past the last bar.
    _layout(fig, title, 340, showlegend=False)
    fig.update_layout(margin_r=70)
    fig.update_yaxes(title_text=unit, rangemode="tozero", range=[0, max(sizes, default=1) / scale * 1.25])
    fig.update_xaxes(type="category")  # names are distinct keys of a dict, so categories are safe
    return fig


def empty_figure(message: str = "") -> go.Figure:
    """A blank figure with a centred message, shown before there is anything to plot."""
    fig = go.Figure()
    fig.add_annotation(
        text=message,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font=dict(size=FONT_SIZE + 2, color=MUTED),
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, "", 300)
