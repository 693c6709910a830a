"""The Inside tab's views remembered as drawn, and drawn again in the page's new language.

Each view a page drew is remembered with the run and fields it was drawn for (``remembering``,
``note_drawn``; the sweep by its numbers, which take up to a minute to measure), so a language
switch draws every one of them again, unchanged but for its words (``redraw_views``).
"""

from __future__ import annotations

import gradio as gr

from playground.ui import redraw
from playground.ui.results import only

from .data import run_context, sweep_data
from .tab import (
    DlaView,
    DoseView,
    InterveneView,
    LensView,
    MathsView,
    SweepView,
    attribution_view,
    dose_view,
    draw_sweep,
    intervene_view,
    lens_view,
    maths_view,
    page_lang,
)

# After a language switch, the messages under the buttons: attribution's, maths', interventions', the lens'.
REDRAWN_MESSAGES = ("dla_msg", "m_msg", "i_msg", "lens_msg")

VIEWS = {
    "dla": (attribution_view, DlaView),
    "maths": (maths_view, MathsView),
    "intervene": (intervene_view, InterveneView),
    "dose": (dose_view, DoseView),
    "sweep": (None, SweepView),
}  # key -> (view, its result)


def remembering(key: str):
    """The view's event handler: draws it and remembers how to draw it again (same run, same fields;
    the sweep from its numbers, which take up to a minute to measure)."""
    view = VIEWS[key][0]

    def handler(request: gr.Request, state, *args):
        out = view(state, *args)
        note_drawn(request, key, state, *args)
        return out

    def sweep(request: gr.Request, state, progress=gr.Progress()):
        d = sweep_data(state, progress)
        redraw.remember(request, "inside_sweep", lambda lang, present: draw_sweep(d, lang, present))
        return draw_sweep(d, *page_lang(state))

    return sweep if key == "sweep" else handler


def note_drawn(request, key: str, state, *args) -> None:
    """View ``key`` was just drawn from ``args`` (by its button or a click on another view's cell)."""
    view, frozen = VIEWS[key][0], dict(state or {})

    def draw(lang, present):
        out = view({**frozen, "lang": lang, "present": present}, *args)
        return out

    redraw.remember(request, "inside_" + key, draw)


def redraw_views(request: gr.Request, state, layer, position, shown=None):
    """After a language switch: the lens (for the current run, its newest positions), then every
    other view the page drew, then the messages (REDRAWN_MESSAGES), each under its own button. (The lens' scroll slider
    is not read: Gradio checks its value against the bounds it had when the page loaded.)"""
    lang, present = page_lang(state)
    try:
        run_context(state)
        lens = lens_view(state, None, layer, position, shown)
    except Exception:
        lens = only(LensView)
    out, messages = list(lens[:-1]), {}
    for key, (_, view) in VIEWS.items():
        drawn = redraw.redraw(request, "inside_" + key, lang, present, len(view._fields))
        out += drawn[:-1]
        messages[key] = drawn[-1]
    # The intervention, dose and sweep share the message under their buttons: the last one drawn says it.
    last = redraw.order(request, ["inside_" + k for k in ("intervene", "dose", "sweep")])
    return (*out, messages["dla"], messages["maths"], messages[last[-1][7:]] if last else gr.skip(), lens[-1])
