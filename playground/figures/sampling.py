"""A step's distribution: the top tokens' probabilities, stage by stage.

How a step's distribution looks: the top tokens' probabilities, and the distribution stage by
stage (raw softmax, after temperature, after top-k, after top-p).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.figures.style import (
    BAR_COLOR,
    FONT_SIZE,
    HIGHLIGHT,
    MUTED,
    TICK_FONT_SIZE,
    TOKEN_LABEL_CHARS,
    TOKEN_LABEL_MARGIN,
    fixed_margins,
    format_prob,
    index_of,
    layout,
    ticks,
)

STAGE_NAMES = {
    "raw": "raw softmax",
    "temperature": "after temperature",
    "top_k": "after top-k",
    "top_p": "after top-p",
}


def token_probability_bars(labels, probs, *, chosen=None, title: str = "") -> go.Figure:
    """The top alternatives for one step as horizontal bars, first label on top; chosen in red.

    chosen: an index into labels, or a label string.
    """
    labels = [str(x) for x in labels]
    probs = np.asarray(probs, dtype=np.float64).ravel()
    if len(labels) != len(probs):
        raise ValueError(f"{len(labels)} labels for {len(probs)} probabilities")
    k = index_of(chosen, labels)
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
    layout(fig, title, max(260, 90 + 30 * len(labels)), showlegend=False)
    fixed_margins(fig, left=TOKEN_LABEL_MARGIN, bottom=60, right=60)  # right: room for the value labels
    fig.update_xaxes(title_text="probability", tickformat=".3~%", range=[0, max(probs.max(initial=0) * 1.2, 0.05)])
    fig.update_yaxes(autorange="reversed", **ticks(pos, labels, max_chars=TOKEN_LABEL_CHARS))
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
    k = index_of(chosen, labels)
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
    fig.update_yaxes(autorange="reversed", **ticks(pos, labels, max_chars=TOKEN_LABEL_CHARS), row=1, col=1)
    layout(fig, title, max(300, 110 + 28 * len(labels)), showlegend=False, bargap=0.25)
    fixed_margins(fig, left=TOKEN_LABEL_MARGIN, bottom=50, top=80, right=50)
    fig.update_annotations(font_size=FONT_SIZE)
    return fig
