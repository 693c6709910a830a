"""Plotly figures for activation patching, built from plain numbers (``playground.inside.patching``'s grids).

A grid is drawn on numeric axes with its labels as tick text (repeated tokens would merge as
categories: notes/platform-facts.md); 1 is the clean run's answer, 0 the corrupted run's, so the colour
scale is centred on 0 and spans at least −1…1, the same for the exact grid and its attribution estimate.
"""

from __future__ import annotations

import plotly.graph_objects as go

from playground.figures.style import cell_text, heatmap_cells, layout, short_label, token_tick_font

FONT = 13
CELL_TEXT_MAX = 240  # cells up to which each carries its value as text
COLORS = "RdBu_r"


def _peak(values, *more) -> float:
    cells = [abs(v) for grid in (values, *more) if grid for row in grid if row for v in row if v is not None]
    return max([1.0, *cells])


def _cell(v: float) -> str:
    """Two decimals; a value that rounds to zero is "0.00" (float noise of ±1e-6 is not a negative effect)."""
    text = f"{v:.2f}"
    return "0.00" if text == "-0.00" else text


def patching_heatmap(
    values, rows, columns, *, title: str, x_title: str = "", y_title: str = "", peak: float | None = None, mark=None
) -> go.Figure:
    """rows × columns of normalised metric (None: not measured yet, left blank); ``mark`` (row, column)
    outlines one cell (the path view's chosen receiver)."""
    n_rows, n_cols = len(rows), len(columns)
    z = [row if row is not None else [None] * n_cols for row in values]
    peak = peak or _peak(z)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(n_cols)),
            y=list(range(n_rows)),
            colorscale=COLORS,
            zmid=0,
            zmin=-peak,
            zmax=peak,
            colorbar=dict(thickness=12),
            hovertemplate="%{y} · %{x}: %{z:.3f}<extra></extra>",
        )
    )
    if n_rows * n_cols <= CELL_TEXT_MAX:
        text = [["" if v is None else _cell(v) for v in row] for row in z]
        fig.add_trace(cell_text(*heatmap_cells(z, text, range(n_cols), range(n_rows)), COLORS, -peak, peak, 10))
    if mark is not None:
        r, c = mark
        fig.add_shape(type="rect", x0=c - 0.5, x1=c + 0.5, y0=r - 0.5, y1=r + 0.5, line=dict(color="#111827", width=3))
    font = token_tick_font(n_cols)
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(n_cols)),
        ticktext=[short_label(str(c), 12) for c in columns],
        tickfont=dict(size=font),
        tickangle=-60 if n_cols > 8 else 0,
        title=x_title,
    )
    fig.update_yaxes(
        tickmode="array", tickvals=list(range(n_rows)), ticktext=list(rows), autorange="reversed", title=y_title
    )
    height = 170 + max(18, min(34, 560 // max(1, n_rows))) * n_rows
    return layout(fig, title, height)


def input_bars(by_input: dict, *, title: str) -> go.Figure:
    """The chosen receiver's metric through its query, key and value."""
    names = list(by_input)
    values = [by_input[n] for n in names]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=values,
            marker_color=["#2563eb" if v >= 0 else "#dc2626" for v in values],
            text=[f"{v:.3f}" for v in values],
            textposition="outside",
        )
    )
    top = max([1.0, *[abs(v) for v in values]]) * 1.15
    fig.update_yaxes(range=[-top if min(values) < 0 else 0, top])
    return layout(fig, title, 320)
