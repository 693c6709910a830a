"""Where a model's parameters and memory go, and its training loss curve.

Where a model's parameters and memory go: the parameter treemap, formula-vs-measured counts per
component, memory per precision, and the training loss curve.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from playground.figures.style import (
    BAR_COLOR,
    MUTED,
    TEXT_COLOR,
    TICK_FONT_SIZE,
    cell_text_fill,
    format_bytes,
    layout,
    scale_colors,
    text_color_on,
    ticks,
)

ROOT_ID = "(model)"  # cannot collide with a module path: those have no parentheses


def parameter_treemap(items, *, title: str = "", maxdepth: int = 3, root_label: str = "model") -> go.Figure:
    """Where the parameters live, as a treemap of dotted module paths.

    items: [(path, count)], e.g. ("trf_blocks.0.att.W_query", 590592). Every prefix becomes a node
    whose value is the sum below it (branchvalues="total"); a tied module (count 0) is a leaf of
    size zero, so it keeps its place in the tree without drawing area. ``root_label`` names the whole
    (the tiles are module paths, the same in every language).
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
            return root_label
        parts = node.split(".")
        # "0" alone says little: a numbered block is shown with its container, "trf_blocks.0".
        return ".".join(parts[-2:]) if parts[-1].isdigit() and len(parts) > 1 else parts[-1]

    share = [values[i] / total if total else 0.0 for i in ids]
    # Bigger parts darker; the square root keeps small ones apart from each other. Each tile's text
    # is black or white by its own colour (plotly would otherwise lighten deeper tiles to near-white).
    colors = scale_colors([s**0.5 for s in share], "Blues", -0.15, 1.0)
    text_fills = [cell_text_fill(text_color_on(c)) for c in colors]
    # The root is the frame around the tiles: transparent, so the page's light or dark theme shows
    # through, and its label in the template's text colour, which the dark theme recolours.
    root = ids.index(ROOT_ID)
    colors[root], text_fills[root] = "rgba(0,0,0,0)", TEXT_COLOR
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
            marker=dict(colors=colors),
            textfont=dict(color=text_fills),
        )
    )
    return layout(fig, title or f"{total:,} parameters", 520)


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
    layout(fig, title, max(300, 100 + 46 * len(components)), barmode="group", legend=dict(orientation="h", y=-0.12))
    fig.update_xaxes(title_text="parameters", range=[0, max(top, 1) * 1.3], tickformat="~s")
    fig.update_yaxes(autorange="reversed", **ticks(pos, components, max_chars=24))
    return fig


def memory_bars(memory: dict[str, int], *, title: str = "") -> go.Figure:
    """Bytes per use (fp32 weights, bf16, int8, training...) as horizontal bars labelled in MB or GB.

    Horizontal: the names ("KV cache (256 tokens, fp32)") read level at the left, each broken before
    its parenthesis, instead of slanting under the bars and past the figure's edge."""
    names = [str(k) for k in memory]
    sizes = [int(v) for v in memory.values()]
    unit, scale = ("GB", 1e9) if max(sizes, default=0) >= 1e9 else ("MB", 1e6)
    fig = go.Figure(
        go.Bar(
            x=[s / scale for s in sizes],
            y=names,
            orientation="h",
            marker_color=BAR_COLOR,
            text=[format_bytes(s) for s in sizes],
            textposition="outside",
            # An outside label may be wider than its bar is thick; it is never shrunk (or hidden).
            constraintext="none",
            cliponaxis=False,
            customdata=[f"{s:,}" for s in sizes],
            hovertemplate="%{y}: %{text} (%{customdata} bytes)<extra></extra>",
        )
    )
    layout(fig, title, max(260, 110 + 48 * len(names)), showlegend=False)
    # Room on the right for the largest bar's label.
    fig.update_xaxes(title_text=unit, rangemode="tozero", range=[0, max(sizes, default=1) / scale * 1.35])
    wrapped = [name.replace(" (", "<br>(", 1) for name in names]
    # Names are distinct keys of a dict, so categories are safe; the first name on top.
    fig.update_yaxes(type="category", autorange="reversed", tickvals=names, ticktext=wrapped)
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
    layout(fig, title, 380, legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"))
    fig.update_xaxes(title_text="step", rangemode="tozero")
    fig.update_yaxes(title_text="loss (cross-entropy, nats)")
    return fig
