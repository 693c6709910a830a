"""A training run's heads as curves: every head's scores and the in-context gap against the step.

Each head's previous-token, induction and first-token score against the step, the in-context loss
gap beside them, the phase change marked on all four."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from playground.figures.style import HIGHLIGHT, MUTED, TICK_FONT_SIZE, layout

SCORES = ("previous_token", "induction", "first_token")  # the timeline's keys, one panel each
PANEL_NAMES = {
    "previous_token": "previous-token score",
    "induction": "induction score",
    "first_token": "first-token mass",
    "in_context_gap": "in-context gap (late − early, nats)",
}


def head_score_curves(
    timeline: dict, *, title: str = "", names: dict | None = None, phase_label: str = "phase change"
) -> go.Figure:
    """2 × 2 panels from a head timeline (``training.head_watch.timeline``): one line per head
    ("L0 H1") in each score panel, in the same colour in every panel, and the gap's one line; a
    dotted line at the phase change (``timeline["phase_change"]``, when there is one)."""
    names = {**PANEL_NAMES, **(names or {})}
    panels = [*SCORES, "in_context_gap"]
    fig = make_subplots(
        rows=2, cols=2, subplot_titles=[names[p] for p in panels], vertical_spacing=0.2, horizontal_spacing=0.1
    )
    steps = list(timeline.get("steps") or [])
    colours = qualitative.Plotly + qualitative.D3
    n_layers, n_heads = int(timeline.get("layers") or 0), int(timeline.get("heads") or 0)
    for i, key in enumerate(SCORES):
        row, col = divmod(i, 2)
        for layer in range(n_layers):
            for head in range(n_heads):
                k = layer * n_heads + head
                label = f"L{layer} H{head}"
                fig.add_trace(
                    go.Scatter(
                        x=steps,
                        y=[float(scores[layer][head]) for scores in timeline[key]],
                        mode="lines",
                        name=label,
                        legendgroup=label,
                        showlegend=i == 0,
                        line=dict(color=colours[k % len(colours)], width=2, dash="solid" if layer % 2 == 0 else "dot"),
                        hovertemplate=f"{label}<br>step %{{x}}: %{{y:.2f}}<extra></extra>",
                    ),
                    row=row + 1,
                    col=col + 1,
                )
        fig.update_yaxes(range=[0, 1.02], row=row + 1, col=col + 1)
    fig.add_trace(
        go.Scatter(
            x=steps,
            y=[float(g) for g in timeline.get("in_context_gap") or []],
            mode="lines+markers",
            name=names["in_context_gap"],
            showlegend=False,
            line=dict(color=MUTED, width=2),
            marker=dict(size=4),
            hovertemplate="step %{x}: %{y:+.2f} nats<extra></extra>",
        ),
        row=2,
        col=2,
    )
    phase = timeline.get("phase_change")
    if phase:
        for r, c in ((1, 1), (1, 2), (2, 1), (2, 2)):
            fig.add_vline(x=phase["step"], line=dict(color=HIGHLIGHT, dash="dot", width=2), row=r, col=c)
        late = bool(steps) and phase["step"] > steps[-1] / 2  # the label on the side with room for it
        fig.add_annotation(
            x=phase["step"],
            y=1.0,
            xref="x2",
            yref="y2",
            text=f"{phase_label}: {phase['step']}",
            showarrow=False,
            xanchor="right" if late else "left",
            yanchor="top",
            font=dict(size=TICK_FONT_SIZE, color=HIGHLIGHT),
        )
    layout(fig, title, 560, legend=dict(orientation="h", y=-0.12, x=0, font=dict(size=TICK_FONT_SIZE)))
    fig.update_annotations(font_size=TICK_FONT_SIZE)
    # the run's steps, whatever the labels: an annotation's text would widen an autorange
    fig.update_xaxes(range=[0, max(steps[-1], 1)] if steps else None, rangemode="tozero")
    # the subplot titles sit above the panels, in the top margin: room for them under the title
    fig.update_layout(margin=dict(t=fig.layout.margin.t + 28))
    return fig
