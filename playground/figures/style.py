"""What every figure shares: template, type sizes, colours, margins, ticks, formatters.

What every figure shares: the template, type sizes and colours, margins, tick labels and small
formatters (a probability as a readable percentage -- playground.formats, shared with the texts
beside the figures -- and bytes in decimal units).
"""

from __future__ import annotations

import math
import re

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.colors import get_colorscale, sample_colorscale

from playground.formats import (
    format_bytes,  # noqa: F401  (re-exported)
    format_prob,  # noqa: F401  (figures format probabilities as the text beside them)
)

TEMPLATE = "plotly_white"
TEXT_COLOR = "#2a3f5f"  # the template's text colour, which the page's dark theme recolours
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
# Text on a coloured cell is one of these two, whichever contrasts more with the cell (WCAG 2: one
# of them always reaches 4.58:1). It is written with an opacity of CELL_TEXT_ALPHA, which marks it
# for the page's dark-theme CSS: that recolours every other figure text and keeps these (ui/style.py).
CELL_TEXT_DARK, CELL_TEXT_LIGHT = "#000000", "#ffffff"
CELL_TEXT_ALPHA = 0.999
MIN_CONTRAST = 4.5  # WCAG AA for normal text
# Up to this many positions every token labels its row and column; a larger map (a whole long run)
# gets numbered axes whose ticks follow the zoom instead, since a 9 px label per cell would overlap.
LABEL_EVERY_TOKEN_MAX = 96


# Plotly gives every new figure the default template without validating it again, where setting one
# validates and copies it (half a figure's drawing time); so the default is this template and
# ``layout`` leaves a figure's template as it is.
pio.templates.default = TEMPLATE


def layout(fig: go.Figure, title: str, height: int, **extra) -> go.Figure:
    fig.update_layout(
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


def fixed_margins(fig: go.Figure, *, left: int, bottom: int, top: int = 60, right: int = 20) -> go.Figure:
    """Fixed margins instead of plotly's automatic ones, for figures the Generate tab redraws often.

    With automargin and tick-label overflow checks plotly measures every tick label several times
    while drawing, which costs the browser's main thread about 20x the drawing itself on a 64-token
    heatmap. Tick labels are at most MAX_TICK_CHARS long, so the margins below fit them."""
    fig.update_xaxes(automargin=False, ticklabeloverflow="allow")
    fig.update_yaxes(automargin=False, ticklabeloverflow="allow")
    fig.update_layout(margin=dict(l=left, r=right, t=top, b=bottom))
    return fig


LABEL_MARGIN = 125  # px for a 12-character tick label (at most 13 px type) plus its axis title


def short_label(label: str, limit: int = MAX_TICK_CHARS) -> str:
    label = str(label)
    return label if len(label) <= limit else label[: limit - 1] + "…"


TOKEN_LABEL_CHARS = 14  # "token (id)" tick labels: a 6-character token with a 5-digit id fits whole
TOKEN_LABEL_MARGIN = LABEL_MARGIN + 18


def token_id_label(text: str, token_id: int, limit: int = TOKEN_LABEL_CHARS) -> str:
    """``"text (id)"`` in at most ``limit`` characters: the token's text is shortened, never its id."""
    suffix = f" ({token_id})"
    return short_label(text, max(2, limit - len(suffix))) + suffix


def ticks(
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
        ticktext=[short_label(labels[i], max_chars) for i in keep],
        tickfont=dict(size=font_size),
    )


def token_tick_font(n_tokens: int) -> int:
    """Every token gets its label on a heatmap axis: the font shrinks with the count instead."""
    return TICK_FONT_SIZE if n_tokens <= 24 else 11 if n_tokens <= 40 else 9


def as_2d(probs, name: str = "probs") -> np.ndarray:
    a = np.asarray(probs, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{name} must be 2-D [queries, keys], got shape {a.shape}")
    return a


def index_of(chosen, labels) -> int | None:
    """``chosen`` as an index into labels: an int is one already, a string is looked up."""
    if chosen is None:
        return None
    if isinstance(chosen, (int, np.integer)):
        return int(chosen) if 0 <= int(chosen) < len(labels) else None
    labels = [str(x) for x in labels]
    return labels.index(str(chosen)) if str(chosen) in labels else None


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
    return layout(fig, "", 300)


def _channel(c: float) -> float:
    c /= 255.0
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _rgb(color: str) -> tuple[float, float, float]:
    color = color.strip()
    if color.startswith("#"):
        h = color[1:]
        h = "".join(ch * 2 for ch in h) if len(h) == 3 else h
        return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)
    r, g, b = (float(v) for v in re.findall(r"[\d.]+", color)[:3])  # rgb(r, g, b) or rgba(r, g, b, a)
    return r, g, b


def cell_text_fill(color: str) -> str:
    """``color`` as the fill of a cell's text: rgba with CELL_TEXT_ALPHA (see CELL_TEXT_DARK)."""
    r, g, b = _rgb(color)
    return f"rgba({r:.0f}, {g:.0f}, {b:.0f}, {CELL_TEXT_ALPHA})"


def relative_luminance(color: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb``, ``#rgb`` or ``rgb(r, g, b)``: 0 black … 1 white."""
    r, g, b = (_channel(c) for c in _rgb(color))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two colours, 1 (same) … 21 (black on white)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_color_on(background: str) -> str:
    """The cell text colour (black or white) that contrasts more with ``background``."""
    dark = contrast_ratio(CELL_TEXT_DARK, background)
    return CELL_TEXT_DARK if dark >= contrast_ratio(CELL_TEXT_LIGHT, background) else CELL_TEXT_LIGHT


def scale_colors(values, colorscale, zmin: float, zmax: float) -> list:
    """Each value's colour on ``colorscale`` (name or list) between zmin and zmax; None where the value
    is missing or not finite (plotly leaves such a cell transparent)."""
    scale = get_colorscale(colorscale) if isinstance(colorscale, str) else colorscale
    scale = [[float(v), "rgb({}, {}, {})".format(*_rgb(c))] for v, c in scale]
    span = (zmax - zmin) or 1.0
    shown = [v is not None and math.isfinite(float(v)) for v in values]
    points = [min(max((float(v) - zmin) / span, 0.0), 1.0) for v, ok in zip(values, shown) if ok]
    # one call for every cell: plotly validates the colorscale on each call (a 13 × 32 lens took 0.4 s
    # of the view's 0.5 s figure building cell by cell)
    sampled = iter(sample_colorscale(scale, points) if points else [])
    return [next(sampled) if ok else None for ok in shown]


def cell_text(x, y, text, z, colorscale, zmin: float, zmax: float, size: int = TICK_FONT_SIZE) -> go.Scatter:
    """Text for the cells of a heatmap drawn as its own trace, each cell's in the colour that reads on
    it (a heatmap's text takes one colour for all cells). ``x``, ``y``, ``text`` and ``z`` are flat,
    one entry per cell. A missing cell (no colour) keeps the figure's own text colour, which the page
    sets per theme. It takes no hover or clicks: the heatmap under it answers them."""
    backgrounds = scale_colors(z, colorscale, zmin, zmax)
    colors = [None if bg is None else text_color_on(bg) for bg in backgrounds]
    return go.Scatter(
        x=list(x),
        y=list(y),
        text=[str(t) for t in text],
        mode="text",
        textfont=dict(size=size, color=[TEXT_COLOR if c is None else cell_text_fill(c) for c in colors]),
        hoverinfo="skip",
        showlegend=False,
        name="",
    )


def heatmap_cells(z_rows, text_rows, xs, ys) -> tuple[list, list, list, list]:
    """Rows of a heatmap (``z_rows[i][j]`` at ``xs[j]``, ``ys[i]``) as flat lists for ``cell_text``."""
    x, y, text, z = [], [], [], []
    for i, (zrow, trow) in enumerate(zip(z_rows, text_rows)):
        for j, (v, t) in enumerate(zip(zrow, trow)):
            x.append(xs[j])
            y.append(ys[i])
            text.append(t)
            z.append(v)
    return x, y, text, z
