"""A lesson step's view, drawn before the guess (its answer masked) and after it (the answer drawn on it).

Before a learner commits, a step's view keeps what frames the question (the axes, the tokens, the
model's own loss line beside a removed head's) and leaves out whatever carries the answer: bar
heights and colours, a heatmap's cells, the chips' count, a lens' top tokens. The traces kept are
marked ``meta="context"`` so a test can tell them from the answer. The reveal draws the full view
with the answer marked (its bar coloured, its head boxed).
"""

from __future__ import annotations

import html
import math

import plotly.graph_objects as go

from playground.figures import HIGHLIGHT, format_prob
from playground.figures.attention import attention_heatmap, attention_overview, query_attention_bars
from playground.figures.head_curves import SCORES, head_score_curves
from playground.figures.inside import loss_lines
from playground.figures.model_charts import parameter_components_bar, parameter_treemap
from playground.figures.sampling import sampling_stages_figure, token_probability_bars
from playground.figures.style import layout
from playground.server.lesson_kit import Question, percent
from playground.ui.common import tr

MASK_GREY = "#9ca3af"


def tokens_html(view: dict, revealed: bool) -> str:
    """The text cut into chips (each with its id) after the guess; before it, the text uncut."""
    if not revealed:
        return f"<div class='pg-lesson-toks pg-lesson-uncut'><span class='pg-lesson-text'>{html.escape(view['text'])}</span></div>"
    chips = "".join(
        f"<span class='pg-lesson-tok' title='id {i}'>{html.escape(lab)}<small>{i}</small></span>"
        for lab, i in zip(view["labels"], view["ids"])
    )
    return f"<div class='pg-lesson-toks' data-tokens='{len(view['ids'])}'>{chips}</div>"


def _losses_figure(view, lang, names):
    labels = view["labels"]
    after = view["after"] if view["after"] is not None else view["before"]
    fig = loss_lines(range(1, len(labels) + 1), labels, view["before"], after, title=tr(lang, "lesson_fig_losses"))
    if view["after"] is None:
        fig.data = fig.data[:1]
    for trace, name in zip(fig.data, names):
        trace.name = tr(lang, name)
    return fig


def _widths_figure(view, lang, revealed: bool) -> go.Figure:
    """Two traces: the widths that frame the question (context) and the asked ones, drawn in the
    answer's colour after the guess and as a "?" on an empty place before it."""
    names = [tr(lang, key) for key in view["parts"]]
    known = [i in view["context"] for i in range(len(names))]
    shown = [w if k else None for w, k in zip(view["widths"], known)]
    asked = [None if k else (w if revealed else 0) for w, k in zip(view["widths"], known)]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=names,
            y=shown,
            text=[f"{w:,}" if w else "" for w in shown],
            textposition="outside",
            cliponaxis=False,
            meta="context",
        )
    )
    answer = go.Bar(x=names, y=asked, marker_color=HIGHLIGHT if revealed else MASK_GREY, hoverinfo="skip")
    if revealed:
        answer.update(text=[f"{w:,}" if w else "" for w in asked], textposition="outside", cliponaxis=False)
    fig.add_trace(answer)
    for i, k in enumerate(known):  # an asked width keeps its place on the axis: a "?" until the guess
        if not k and not revealed:
            fig.add_annotation(x=names[i], y=0, text="?", showarrow=False, yshift=14, font=dict(size=22))
    title = tr(lang, "lesson_fig_widths")
    if not revealed:
        title = f"{title}<br><sup>{tr(lang, 'lesson_masked_note')}</sup>"
    layout(fig, title, 360, showlegend=False, barmode="overlay")
    fig.update_yaxes(title_text=tr(lang, "lesson_axis_numbers"), rangemode="tozero")
    return fig


INPUT_COLOURS = {"q": "#93c5fd", "k": HIGHLIGHT, "v": "#a7f3d0"}


def _path_inputs_figure(view, lang) -> go.Figure:
    """Grouped bars: for each head of the sender's layer and for all of them at once, the share of
    the answer brought back through the receiver's q, k and v (the asked head's k bar outlined). Only
    the key's bars print their share: three numbers a group would overlap at 1024 px."""
    x = [*view["senders"], tr(lang, "lesson_path_all", layer=view["layer"])]
    fig = go.Figure()
    for via, values in view["values"].items():
        bar = go.Bar(x=x, y=values, name=via, marker_color=INPUT_COLOURS[via])
        if via == "k":
            # wider than its thin bar: plotly would shrink it, and the presenter mode then hide it
            bar.update(text=[percent(v) for v in values], textposition="outside", cliponaxis=False)
            bar.constraintext = "none"
            bar.marker.line = dict(width=[3 if i == view["mark"] else 0 for i in range(len(x))], color="#111827")
        fig.add_trace(bar)
    layout(fig, tr(lang, "lesson_fig_path_inputs", receiver=view["receiver"]), 360, barmode="group")
    fig.update_layout(legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"))
    fig.update_xaxes(title_text=tr(lang, "lesson_axis_sender"))
    # room above 100% for the key's printed shares (plotly drops an outside label that does not fit)
    values = [v for vs in view["values"].values() for v in vs]
    fig.update_yaxes(range=[min(0.0, *values) - 0.05, max(1.0, *values) * 1.15])
    fig.update_yaxes(title_text=tr(lang, "lesson_axis_share"), tickformat=".0%")
    return fig


HEAD_PANELS = {"previous_token": "heads_prev", "induction": "heads_ind", "first_token": "heads_first"}
HEAD_PANELS |= {"in_context_gap": "heads_gap"}


def head_curves_figure(view, lang, revealed: bool) -> go.Figure:
    """The Train tab's head curves of a recorded run. Before the guess the panels that frame the
    question (``view["context"]``) are drawn, the others empty and the phase change not marked; after
    it every panel, the phase change and the asked head's lines drawn thicker."""
    tl = view["timeline"] if revealed else {**view["timeline"], "phase_change": None}
    run = view["run"]
    fig = head_score_curves(
        tl,
        title=tr(lang, "lesson_fig_heads", steps=f"{run['steps']:,}", seed=run["seed"], every=run["every"]),
        names={key: tr(lang, name) for key, name in HEAD_PANELS.items()},
        phase_label=tr(lang, "heads_phase"),
    )
    if revealed:
        mark = "L{} H{}".format(*view["mark"])
        for trace in fig.data:
            if trace.name == mark:
                trace.line.width = 5
        return fig
    per_panel = int(tl["layers"]) * int(tl["heads"])
    panels = [p for p, key in enumerate(SCORES) if key in view["context"]]
    keep = [i for p in panels for i in range(p * per_panel, (p + 1) * per_panel)]
    if "in_context_gap" in view["context"]:
        keep.append(len(SCORES) * per_panel)
    return masked(fig, keep, lang)


def _mark_cell(fig, layer: int, head: int) -> None:
    fig.add_shape(
        type="rect", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5, line=dict(color=HIGHLIGHT, width=4)
    )


def figure(view: dict, question: Question, lang: str, revealed: bool = True):
    """The step's figure from the question's plain data (None for the tokens view, drawn as HTML)."""
    kind = view["kind"]
    head = question.fields.get("head", "")
    fig = None
    if kind == "attention_row":
        title = tr(lang, "lesson_fig_row", head=head, token=view["query"])
        fig = query_attention_bars(view["row"], view["labels"], query_label=view["query"], title=title)
        if revealed:
            fig.data[0].marker.color = [HIGHLIGHT if i == view["mark"] else MASK_GREY for i in range(len(view["row"]))]
    elif kind == "attention_map":
        fig = attention_heatmap(view["probs"], view["labels"], title=tr(lang, "lesson_fig_map", head=head))
    elif kind == "overview":
        key = "lesson_fig_overview_first" if view.get("metric") == "first" else "lesson_fig_overview"
        fig = attention_overview(view["values"], zrange=(0.0, 1.0), title=tr(lang, key))
        if revealed:
            _mark_cell(fig, *view["mark"])
    elif kind == "losses":
        names = (
            "lesson_series_model",
            "lesson_series_ablated" if "head" in question.fields else "lesson_series_uniform",
        )
        fig = _losses_figure(view, lang, names)
    elif kind == "next_tokens":
        t = view["temperature"]
        fig = token_probability_bars(view["labels"], view["probs"], chosen=0, title=tr(lang, "lesson_fig_next", t=t))
    elif kind == "stages":
        t = question.fields["temperature"]
        fig = sampling_stages_figure(view["labels"], view["stages"], title=tr(lang, "lesson_fig_stages", t=t))
    elif kind == "components":
        preset = question.fields.get("preset")  # (a named preset's, not the model's: its name in the title)
        key = "lesson_fig_components_untied" if view.get("untied") else "lesson_fig_components_of"
        title = tr(lang, key if preset else "lesson_fig_components", preset=preset)
        names = [tr(lang, c) for c in view["components"]]  # component names are interface words
        fig = parameter_components_bar(names, view["formula"], view["measured"], title=title)
    elif kind == "treemap":
        fig = parameter_treemap(
            view["items"], title=tr(lang, "lesson_fig_treemap"), root_label=tr(lang, "fig_treemap_root")
        )
        if not revealed:  # the modules' names only: every tile the same size and colour, no counts
            fig.data[0].update(values=None, branchvalues=None, customdata=None, text=None, texttemplate="%{label}")
            fig.data[0].update(hoverinfo="skip", hovertemplate=None)
            fig.data[0].marker.colors = [MASK_GREY] * len(fig.data[0].ids)
            return masked(fig, [0], lang)
    elif kind == "lens_column":
        reads = [tr(lang, key, **fields) for key, fields in view["reads"]]
        title = tr(lang, "lesson_fig_lens", token=view["target_label"], pos=question.fields["pos"])
        fig = token_probability_bars(
            reads, view["target_probs"], chosen=view["mark"] if revealed else None, title=title
        )
        if revealed:  # each read's own top token beside its bar (a tick label would be cut short)
            fig.data[0].text = [
                tr(lang, "lesson_lens_top", p=format_prob(p), token=top)
                for p, top in zip(view["target_probs"], view["tops"])
            ]
    elif kind == "widths":
        return _widths_figure(view, lang, revealed)
    elif kind == "path_inputs":
        fig = _path_inputs_figure(view, lang)
    elif kind == "head_curves":
        return head_curves_figure(view, lang, revealed)
    if fig is None or revealed:
        return fig
    return masked(fig, view.get("context", ()), lang)


def masked(fig: go.Figure, keep, lang: str) -> go.Figure:
    """``fig`` with every trace but those in ``keep`` emptied of its values: bars flat and grey,
    heatmap cells blank, lines and printed numbers gone; the kept ones marked as context."""
    traces = []
    for i, trace in enumerate(fig.data):
        if i in keep:
            trace.meta = "context"
            traces.append(trace)
        elif trace.type == "bar":
            value = "x" if trace.orientation == "h" else "y"
            n = len(getattr(trace, value))
            trace.update({value: [0] * n, "text": None, "customdata": None, "hoverinfo": "skip", "hovertemplate": None})
            trace.marker.color = MASK_GREY
            traces.append(trace)
        elif trace.type == "heatmap":
            trace.update(z=[[math.nan] * len(row) for row in trace.z], customdata=None, text=None, hoverinfo="skip")
            trace.hovertemplate = None
            traces.append(trace)
        # other traces (lines, the numbers printed on cells) carry values only: left out
    fig.data = traces
    fig.update_xaxes(autorange=True)
    fig.update_yaxes(autorange=True)
    fig.update_layout(shapes=[])
    title = fig.layout.title.text or ""
    fig.update_layout(title_text=f"{title}<br><sup>{tr(lang, 'lesson_masked_note')}</sup>")
    return fig
