"""The Inside tab's long views drawn as they go: the dose-response curve and the head sweep.

The dose-response curve is drawn a few α values at a time and the head sweep a layer at a time;
each partial figure is a streamed update, the message under the buttons says how far it is, and
the tab's Stop button cancels the event between two updates (its message says so). A language
switch redraws a finished view from its own handler (inside_tab's redraw memory).
"""

from __future__ import annotations

import gradio as gr

from playground.figures import inside as lf

from . import redraw
from .common import dress, for_the_session, lang_of, ok, say, tr, warn
from .inside_data import dose_steps, sweep_steps
from .inside_tab import DoseView, SweepView, draw_sweep, note_drawn
from .results import only

N_ALPHAS = 11  # the curve's α values, 0, 0.2, …, 2 (effects.dose_response_points)


def _progress(text: str) -> str:
    return f"<div class='pg-msg pg-progress'>⏳ {text}</div>"


@for_the_session
def dose_live(request: gr.Request, state, scale_head, position, target):
    """The Dose-response button: the curve grows point by point (outputs: figure, message)."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    for d in dose_steps(state, scale_head, position, target):
        if "error" in d:
            yield only(DoseView, msg=warn(say(lang, d)))
            return
        title = tr(lang, "in_dose", tok=d["target"], pos=d["position"], head=d["head"], layer=d["layer"])
        fig = dress(lf.dose_curve(d["alphas"], d["logprob"], title=title), lang, present)
        done = len(d["alphas"])
        yield DoseView(fig, "" if done >= N_ALPHAS else _progress(tr(lang, "in_dose_progress", done=done)))
    note_drawn(request, "dose", state, scale_head, position, target)


@for_the_session
def sweep_live(request: gr.Request, state):
    """The Head sweep button: the heatmap fills a layer at a time (outputs: figure, text, message)."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    last = None
    for d in sweep_steps(state):
        if "error" in d:
            yield only(SweepView, msg=warn(say(lang, d)))
            return
        last = d
        done, total = sum(row is not None for row in d["delta_loss"]), len(d["delta_loss"])
        if done < total:
            fig = dress(lf.sweep_heatmap(d["delta_loss"], title=tr(lang, "in_fig_sweep")), lang, present)
            text = tr(
                lang, "in_sweep_progress", done=done, total=total, s=f"{d['seconds']:.1f}", e=f"{d['estimate_s']:.1f}"
            )
            yield SweepView(fig, "", _progress(text))
    if last is not None:
        redraw.remember(request, "inside_sweep", lambda lang, present: draw_sweep(last, lang, present))
        yield draw_sweep(last, lang, present)


def stopped(state) -> str:
    """The Inside tab's Stop: the long view it cancelled stops at its last drawn update."""
    return ok(tr(lang_of(state), "in_stopped"))
