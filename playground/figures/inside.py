"""Plotly figures for the Inside tab, built from plain numbers (the output of playground.inside's views).

Positions are numeric axes everywhere (0..T-1 shifted by the window start) with token labels as
tick text: token strings as categories would merge repeated tokens (notes/platform-facts.md).
"""

from __future__ import annotations

import math
import re

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.figures.style import cell_text, heatmap_cells

FONT = 13
TICK_CHARS = 10
CELL_CHARS = 5
CELL_FONT, PRESENT_CELL_FONT = 10, 14  # px; presenter mode's cells are wider (ui/cell_click.CELL_PX_PRESENT)
# A probability axis in percent: plotly's default SI format writes a small one as "200µ".
PROB_TICKS = ".3~%"
MAX_TICKS = 32  # token labels on a line plot's axis; a longer run names every k-th


def _layout(fig: go.Figure, title: str, height: int, fitted: bool = False, **extra) -> go.Figure:
    """The tab's look; ``fitted``: margins computed from the tick labels (``_fitted_margins``) for the
    figures with many labels or cells, plotly's automatic ones for the small ones."""
    fig.update_layout(
        template="plotly_white",
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        title=dict(text=title, x=0.01, xanchor="left", font=dict(size=FONT + 2)),
        font=dict(size=FONT),
        height=height,
        margin=dict(l=10, r=10, t=60, b=10),
        **extra,
    )
    return _fitted_margins(fig) if fitted else fig


LABEL_FONT = 16  # px: the largest type a tick label gets (presenter mode, ui/figure_dress.PRESENT_FONT)
MAX_MARGIN = 200  # px


def _label_px(text) -> float:
    """A tick label's width at LABEL_FONT: a CJK character is about 1 em, any other about 0.6 em."""
    plain = re.sub(r"<[^>]+>", "", str(text))
    return LABEL_FONT * sum(1.0 if ord(ch) >= 0x2E80 else 0.6 for ch in plain)


def _axis_room(axis, default_label: str) -> tuple[float, float]:
    """(widest tick label in px, its height across when turned by the axis' tickangle)."""
    labels = list(axis.ticktext) if axis.ticktext else [default_label]
    width = max((_label_px(t) for t in labels), default=0.0)
    angle = math.radians(abs(axis.tickangle or 0))
    return width, width * math.sin(angle) + LABEL_FONT * math.cos(angle)


def _fitted_margins(fig: go.Figure) -> go.Figure:
    """Margins computed here from the tick labels, large enough for presenter type, instead of
    plotly's automatic ones: those measure every tick label while drawing, which costs the page's
    main thread 2-3x the drawing itself (a 13 × 32 lens heatmap: ~300 ms against ~125 ms)."""
    left = bottom = 0.0
    for axis in fig.select_yaxes():
        width, _ = _axis_room(axis, "−0.000")
        left = max(left, width + (LABEL_FONT + 14 if axis.title and axis.title.text else 8))
    for axis in fig.select_xaxes():
        _, across = _axis_room(axis, "0.000")
        bottom = max(bottom, across + (LABEL_FONT + 16 if axis.title and axis.title.text else 10))
    fig.update_xaxes(automargin=False, ticklabeloverflow="allow")
    fig.update_yaxes(automargin=False, ticklabeloverflow="allow")
    fig.update_layout(margin=dict(l=min(MAX_MARGIN, round(left)), b=min(MAX_MARGIN, round(bottom)), r=10, t=60))
    return fig


def _short(label: str, limit: int = TICK_CHARS) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _pct(p) -> str:
    return "–" if p is None else f"{100 * p:.1f}%" if p >= 0.001 else f"{100 * p:.2g}%"


def lens_heatmap(
    layer_names,
    positions,
    labels,
    top_tokens,
    top_prob,
    next_prob,
    *,
    title: str,
    selected: tuple[int, int] | None = None,
    cell_font: int = CELL_FONT,
) -> go.Figure:
    """Layers (rows, embeddings at the bottom) × positions; colour = p(actual next token), text =
    the top token. ``top_tokens``/``top_prob``/``next_prob`` are (layers × shown positions)."""
    z = [[float("nan") if p is None else p for p in row] for row in next_prob]
    # 5 characters of 10 px text fit the ~30 px cells the page keeps (ui/cell_click.CELL_PX: it
    # shows fewer positions on a narrower page), 13 px the presenter's 40 px; the hover shows the
    # whole token.
    text = [[_short(t, CELL_CHARS) for t in row] for row in top_tokens]
    hover = [
        [
            f"{layer_names[i]} · position {positions[j]} ({labels[j]})<br>top: {top_tokens[i][j]} "
            f"({_pct(top_prob[i][j])})<br>p(next = {labels[j + 1] if j + 1 < len(labels) else '?'}) = "
            f"{_pct(next_prob[i][j])}"
            for j in range(len(positions))
        ]
        for i in range(len(layer_names))
    ]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(positions),
            y=list(range(len(layer_names))),
            hovertext=hover,
            hoverinfo="text",
            colorscale="Viridis",
            zmin=0,
            zmax=1,
            colorbar=dict(title="p(next)", thickness=12),
        )
    )
    fig.add_trace(
        cell_text(*heatmap_cells(z, text, list(positions), range(len(layer_names))), "Viridis", 0, 1, cell_font)
    )
    if selected is not None:
        layer, pos = selected
        fig.add_shape(
            type="rect", x0=pos - 0.5, x1=pos + 0.5, y0=layer - 0.5, y1=layer + 0.5, line=dict(color="#f59e0b", width=3)
        )
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(positions),
        ticktext=[_short(x) for x in labels],
        tickangle=-60,
        title="position (token)",
    )
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(layer_names))), ticktext=list(layer_names))
    return _layout(fig, title, 160 + 34 * len(layer_names), fitted=True)


def top_bars(labels, probs, *, title: str) -> go.Figure:
    fig = go.Figure(
        go.Bar(
            x=list(probs),
            y=list(range(len(labels))),
            orientation="h",
            text=[_pct(p) for p in probs],
            textposition="auto",
            marker_color="#6366f1",
        )
    )
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(labels))), ticktext=list(labels), autorange="reversed")
    fig.update_xaxes(title="probability", tickformat=PROB_TICKS)
    return _layout(fig, title, 120 + 26 * len(labels))


def attribution_heatmap(heads, mlps, *, title: str) -> go.Figure:
    """Layer × head contributions with the MLP as one more column (x = n_heads)."""
    n_heads = len(heads[0]) if heads else 0
    z = [list(row) + [m] for row, m in zip(heads, mlps)]
    peak = max((abs(v) for row in z for v in row), default=1.0) or 1.0
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(n_heads + 1)),
            y=list(range(len(z))),
            colorscale="RdBu",
            zmid=0,
            zmin=-peak,
            zmax=peak,
            colorbar=dict(title="logit", thickness=12),
        )
    )
    text = [[f"{v:+.2f}" for v in row] for row in z]
    fig.add_trace(cell_text(*heatmap_cells(z, text, range(n_heads + 1), range(len(z))), "RdBu", -peak, peak, FONT))
    fig.update_xaxes(
        tickmode="array", tickvals=list(range(n_heads + 1)), ticktext=[f"head {h}" for h in range(n_heads)] + ["MLP"]
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(len(z))),
        ticktext=[f"layer {i}" for i in range(len(z))],
        autorange="reversed",
    )
    fig.add_vline(x=n_heads - 0.5, line=dict(color="#111827", width=2))
    return _layout(fig, title, 140 + 40 * len(z), fitted=True)


def waterfall_range(trace, headroom: float) -> list[float]:
    """A y range holding every level a waterfall trace reaches, plus ``headroom`` of its span above
    and below for the value labels written outside the bars (plotly's own range leaves them none)."""
    level, levels = 0.0, [0.0]
    for y, measure in zip(trace.y, trace.measure):
        level = float(y) if measure == "total" else level + float(y)
        levels.append(level)
    lo, hi = min(levels), max(levels)
    pad = headroom * ((hi - lo) or 1.0)
    falls = any(float(y) < 0 for y, m in zip(trace.y, trace.measure) if m != "total")  # labels below bars
    return [lo - pad if falls else lo, hi + pad]


def attribution_waterfall(names, values, total: float, *, title: str) -> go.Figure:
    fig = go.Figure(
        go.Waterfall(
            x=list(names) + ["final logit"],
            y=list(values) + [total],
            measure=["relative"] * len(values) + ["total"],
            text=[f"{v:+.2f}" for v in values] + [f"{total:.2f}"],
            textposition="outside",
        )
    )
    fig.update_xaxes(tickangle=-45)
    fig.update_yaxes(title="logit", range=waterfall_range(fig.data[0], 0.12))
    return _layout(fig, title, 420, showlegend=False)


ALL_KEYS_LABELLED = 20  # keys a maths chart names one by one: upright labels fit a 420-px presenter plot


def attention_steps_figure(positions, labels, scaled, probs, *, title: str, label_top: int = 12) -> go.Figure:
    """q·k/√d and the softmax over the keys a query can see (positions up to it), one above the
    other. Up to ALL_KEYS_LABELLED keys each carry their token under the bars (a gap in a short
    row of labels reads as a key gone missing); past that only the ``label_top`` keys with the
    most attention and the query itself do: a long run's hundreds of labels would merge into a
    smear. Either way no more labels than a presenter-mode plot shows, so none is thinned out."""
    positions, labels = list(positions), [str(x) for x in labels]
    probs = [float(p) for p in probs]
    if len(positions) <= ALL_KEYS_LABELLED:
        named = list(range(len(positions)))
    else:
        top = sorted(range(len(probs)), key=lambda j: -probs[j])[: min(label_top, ALL_KEYS_LABELLED - 1)]
        named = sorted(set(top) | {len(positions) - 1})
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=("q·k / √d_head", "softmax"),
    )
    fig.add_trace(
        go.Bar(x=positions, y=[float(s) for s in scaled], marker_color="#0ea5e9", name="q·k/√d"), row=1, col=1
    )
    fig.add_trace(go.Bar(x=positions, y=probs, marker_color="#f97316", name="softmax"), row=2, col=1)
    fig.update_yaxes(tickformat=PROB_TICKS, row=2, col=1)
    fig.update_xaxes(
        tickmode="array",
        tickvals=[positions[j] for j in named],
        ticktext=[f"{positions[j]}·{_short(labels[j])}" for j in named],
        tickangle=-60,
        row=2,
        col=1,
    )
    return _layout(fig, title, 460, showlegend=False, fitted=True)


def before_after_bars(labels, before, after, *, title: str) -> go.Figure:
    y = list(range(len(labels)))
    fig = go.Figure(
        [
            go.Bar(x=list(before), y=y, orientation="h", name="before", marker_color="#9ca3af"),
            go.Bar(x=list(after), y=y, orientation="h", name="after", marker_color="#dc2626"),
        ]
    )
    fig.update_yaxes(tickmode="array", tickvals=y, ticktext=list(labels), autorange="reversed")
    fig.update_xaxes(title="probability", tickformat=PROB_TICKS)
    return _layout(fig, title, 140 + 30 * len(labels), barmode="group")


def loss_lines(positions, labels, before, after, *, title: str) -> go.Figure:
    fig = go.Figure(
        [
            go.Scatter(x=list(positions), y=list(before), mode="lines+markers", name="before"),
            go.Scatter(x=list(positions), y=list(after), mode="lines+markers", name="after", line=dict(dash="dash")),
        ]
    )
    step = max(1, math.ceil(len(positions) / MAX_TICKS))  # a long run: every step-th token named
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(positions)[::step],
        ticktext=[_short(x) for x in labels][::step],
        tickangle=-60,
        title="position (predicting the next token)",
    )
    fig.update_yaxes(title="loss (nats)")
    return _layout(fig, title, 360, fitted=True)


def dose_curve(alphas, logprob, *, title: str) -> go.Figure:
    fig = go.Figure(
        go.Scatter(
            x=list(alphas),
            y=list(logprob),
            mode="lines+markers",
            marker_color="#7c3aed",
            hovertemplate="α=%{x:.1f}<br>log p=%{y:.3f}<extra></extra>",
        )
    )
    fig.add_vline(x=1.0, line=dict(dash="dot", color="#6b7280"))
    fig.update_xaxes(title="α (the head's output × α)", range=[-0.05, 2.05])
    fig.update_yaxes(title="log p(target)")
    return _layout(fig, title, 340)


def sweep_heatmap(delta, *, title: str) -> go.Figure:
    """Δ loss per layer (rows) and head; a row that is None is a layer not measured yet (left blank)."""
    n_heads = len(next((row for row in delta if row is not None), []))
    delta = [row if row is not None else [None] * n_heads for row in delta]
    peak = max((abs(v) for row in delta for v in row if v is not None), default=1.0) or 1.0
    fig = go.Figure(
        go.Heatmap(
            z=delta,
            x=list(range(n_heads)),
            y=list(range(len(delta))),
            colorscale="RdBu_r",
            zmid=0,
            zmin=-peak,
            zmax=peak,
            colorbar=dict(title="Δloss", thickness=12),
        )
    )
    if n_heads * len(delta) <= 200:
        text = [["" if v is None else f"{v:+.3f}" for v in row] for row in delta]  # None: not measured yet
        cells = heatmap_cells(delta, text, range(n_heads), range(len(delta)))
        fig.add_trace(cell_text(*cells, "RdBu_r", -peak, peak, FONT))
    fig.update_xaxes(
        tickmode="array", tickvals=list(range(n_heads)), ticktext=[f"h{h}" for h in range(n_heads)], title="head"
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(len(delta))),
        ticktext=[f"layer {i}" for i in range(len(delta))],
        autorange="reversed",
    )
    return _layout(fig, title, 140 + max(20, min(40, 600 // max(1, len(delta)))) * len(delta), fitted=True)


def nan_to_none(values):
    return [None if (v is None or (isinstance(v, float) and math.isnan(v))) else v for v in values]
