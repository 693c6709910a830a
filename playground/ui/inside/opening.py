"""Opening the Inside tab: the lens drawn, the position fields set, a previous run's views cleared.

Every view on the tab is drawn for the session's run of that moment. When the tab opens on a run
it has not shown before (a new run, or none since a new model), the lens is drawn for it, the
position fields start where they say something, and the other views -- drawn for the previous run
-- are cleared with their messages and the page's memory of them (a language switch would draw
them again), so no figure of an earlier run stays on screen as if it were this one's.
"""

from __future__ import annotations

import gradio as gr
import pandas as pd

from playground.ui import redraw
from playground.ui.common import lang_of, tr_error, warn
from playground.ui.results import only, result

from .data import run_context
from .redraw import VIEWS
from .tab import LensView, lens_view

# The maths table's headers before its first drawing: the formula's symbols (the same in every language).
MATHS_SYMBOLS = ["j", "token", "q·kⱼ", "÷√d", "+ M", "softmax"]
# What a new run leaves stale: every view but the lens, the messages under their buttons and
# heatmaps, and the attribution a click on its heatmap reads (None: no figure, no attribution).
STALE = {
    **dict.fromkeys(
        ("dla_heat", "dla_fall", "dla_shown", "m_plot", "i_bars", "i_loss", "i_lens", "dose_plot", "sweep_plot")
    ),
    **dict.fromkeys(("dla_md", "dla_note", "m_md", "i_md", "sweep_md"), ""),
    **dict.fromkeys(("lens_plot_msg", "dla_msg", "dla_pick_msg", "m_msg", "i_msg", "sweep_msg"), ""),
}
# The lens' outputs (its message under the lens button), the position fields, the run they were
# set for, the stale views, and the tab's own message (there is no run to look inside yet).
Opened = result(
    "Opened",
    *LensView._fields[:-1],
    "lens_msg",
    "lens_layer",
    "lens_pos",
    "dla_pos",
    "m_pos",
    "i_pos",
    "seen_run",
    "m_table",
    *STALE,
    "msg",
    "room_followed",
)


def open_tab(
    state, seen_run, scroll, layer, position, shown=None, request: gr.Request = None, followed=None, room=None
):
    """Opening the tab draws the lens. For a run not seen before, every position field starts
    where it says something: the lens cell at the final layer × last position, attribution and
    interventions at the last position with a next token, the attention maths at the prompt's last
    token (its keys after it are masked); the previous run's views are cleared. ``followed``: the page
    shows a classroom teacher's Inside view (the room opened the tab), so it draws nothing of its own this
    once: the next opening (the student's own) draws the page's. ``room``: the page's classroom room; a page
    following one with no run of its own is not told to generate first (the teacher's views come to it)."""
    if followed:
        return only(Opened, room_followed=None)
    try:
        model, run, start, ids, _ = run_context(state)
    except Exception as e:
        if isinstance(room, dict) and room.get("member") and room.get("follow"):
            return only(Opened, room_followed=None)
        cleared = cleared_views(request) if seen_run is not None else {}
        return only(Opened, msg=warn(tr_error(lang_of(state), e)), seen_run=None, **cleared)
    if run.id == seen_run:
        return only(Opened, **_lens(lens_view(state, scroll, layer, position, shown)), msg="")
    T, L = len(ids), model.cfg.n_layers
    last, before_last = start + T - 1, start + max(0, T - 2)
    prompt_end = max(start, min(last, len(run.prompt_ids) - 1))
    cleared = cleared_views(request)  # before the lens is computed: a view drawn meanwhile is this run's
    lens = _lens(lens_view(state, None, L, last, shown))
    return Opened(
        **lens,
        lens_layer=L,
        lens_pos=last,
        dla_pos=before_last,
        m_pos=prompt_end,
        i_pos=before_last,
        seen_run=run.id,
        **keep_drawn_since(request, cleared),
        msg="",
        room_followed=gr.skip(),
    )


def _lens(view) -> dict:
    fields = view._asdict()
    fields["lens_msg"] = fields.pop("msg")
    return fields


# Each view's outputs among STALE (and the maths table), by the view's key in VIEWS.
VIEW_OUTPUTS = {"dla": "dla_", "maths": "m_", "intervene": "i_", "dose": "dose_", "sweep": "sweep_"}


def keep_drawn_since(request, cleared: dict) -> dict:
    """``cleared`` without the views the page drew after it was made (a button pressed while the lens was
    computed, for the run being opened): those outputs are skipped, not emptied."""
    drawn = {key.removeprefix("inside_") for key in redraw.order(request, ["inside_" + k for k in VIEWS])}
    prefixes = tuple(VIEW_OUTPUTS[k] for k in drawn if k in VIEW_OUTPUTS)
    if not prefixes:
        return cleared
    return {name: gr.skip() if name.startswith(prefixes) else value for name, value in cleared.items()}


def cleared_views(request) -> dict:
    """The values that clear every view but the lens; the page forgets how to draw them again."""
    redraw.drop(request, ["inside_" + key for key in VIEWS] + ["inside_dla_note"])
    return {**STALE, "m_table": pd.DataFrame(columns=MATHS_SYMBOLS)}
