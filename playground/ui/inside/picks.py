"""Clicking the Inside tab's heatmaps picks a cell (the page script is cell_click.PAGE_JS).

What a click does:

- a lens cell shows that cell's top-10 and KL to the final layer (the layer/position fields follow);
- a head in the attribution heatmap steps through its attention maths at the attributed position and
  picks it as "Scale one head" (with that position and target) for the dose–response; the MLP
  column puts its layer in "Skip MLPs";
- a head in the sweep zero-ablates that head alone and shows before vs after (its Δ mean loss is the
  sweep's cell).

The typed fields stay: the click only fills them, for the keyboard and the API alike.
"""

from __future__ import annotations

import gradio as gr

from playground.i18n import tr_error
from playground.settings import parse_optional_whole
from playground.ui import listeners, redraw
from playground.ui.common import T, lang_of, tr, warn
from playground.ui.results import only, outputs, result

from .cell_click import read_pick
from .data import run_context, window_index
from .redraw import note_drawn
from .tab import InterveneView, LensView, intervene_view, lens_view, lens_window, maths_view

LensPick = result("LensPick", *LensView._fields, "lens_layer", "lens_pos")
# A clicked attribution cell: the maths fields, the intervention fields, the maths view, the note.
HeadPick = result(
    "HeadPick",
    "m_layer",
    "m_head",
    "m_pos",
    "i_scale",
    "i_pos",
    "i_target",
    "i_mlps",
    "m_table",
    "m_plot",
    "m_md",
    "dla_note",
    "msg",
)
# A clicked sweep cell: the intervention fields, then the intervention view.
SweepPick = result("SweepPick", "i_zero", "i_mean", "i_scale", "i_mlps", "i_unmask", "i_drop", *InterveneView._fields)


def _cell(**values) -> dict:
    """The clicked cell's numbers (whole numbers, or None when not sent); ValueError says which is bad."""
    return {name: parse_optional_whole(value, name.capitalize()) for name, value in values.items()}


def pick_lens_cell(state, scroll, layer, position, shown=None) -> LensPick:
    """The lens view for the clicked (layer, position), and those two fields set to it. The window
    moves only as far as it must to show that cell (after a resize the page re-picks the selected
    cell with a new window size)."""
    try:
        cell = _cell(layer=layer, position=position, scroll=scroll)
        window = lens_window(shown)
    except ValueError as e:
        return only(LensPick, msg=warn(tr_error(lang_of(state), str(e))))
    layer, position, first = cell["layer"], cell["position"], cell["scroll"]
    if first is not None and position is not None:
        scroll = min(max(first, position - window + 1), position)
    out = lens_view(state, scroll, layer, position, shown)
    if layer is None or position is None:
        return only(LensPick, **out._asdict())
    return LensPick(*out, layer, position)


def shown_attribution(state, position, target):
    """What the attribution heatmap was drawn for: {"position": absolute, "target": as typed}."""
    try:
        model, _, start, ids, _ = run_context(state)
        return {
            "position": start + window_index(position, start, ids, default=max(0, len(ids) - 2)),
            "target": "" if target is None else str(target),
            "n_heads": model.cfg.n_heads,
        }
    except Exception:
        return None


def pick_head(state, shown, head, layer, request: gr.Request = None) -> HeadPick:
    """A clicked attribution cell: its head's attention maths at the attributed position, picked as
    the intervention's scaled head; the MLP column puts its layer in "Skip MLPs"."""
    lang = lang_of(state)
    try:
        cell = _cell(head=head, layer=layer)
    except ValueError as e:
        return only(HeadPick, msg=warn(tr_error(lang, str(e))))
    head, layer = cell["head"], cell["layer"]
    if not shown or head is None or layer is None:
        return only(HeadPick, msg=warn(tr(lang, "in_pick_first")))
    if head >= shown["n_heads"]:  # the MLP column
        note = _remember_note(request, "in_picked_mlp", layer=layer)
        return only(HeadPick, i_mlps=str(layer), dla_note=note(lang), msg="")
    pos = shown["position"]
    table, fig, text, msg = maths_view(state, layer, head, pos)
    note_drawn(request, "maths", state, layer, head, pos)  # (redrawn in a new language)
    note = _remember_note(request, "in_picked_head", layer=layer, head=head, pos=pos)(lang)
    return only(
        HeadPick,
        m_layer=layer,
        m_head=head,
        m_pos=pos,
        i_scale=f"{layer}.{head}",
        i_pos=pos,
        i_target=shown["target"],
        m_table=table,
        m_plot=fig,
        m_md=text,
        dla_note=note,
        msg=msg,
    )


def _remember_note(request, key: str, **values):
    """The note under the attribution heatmap after a click, as a function of the language, kept
    so a language switch writes it again (redraw_note)."""

    def note(lang, present=False):
        return tr(lang, key, **values)

    redraw.remember(request, "inside_dla_note", note)
    return note


def redraw_note(request: gr.Request, state):
    """After a language switch: the attribution click's note in the new language (if there is one)."""
    return redraw.redraw(request, "inside_dla_note", lang_of(state), bool((state or {}).get("present")), 1)[0]


def pick_sweep_head(state, head, layer, alpha, position, shown=None, request: gr.Request = None) -> SweepPick:
    """A clicked sweep cell: that head zero-ablated alone (the other intervention fields cleared, so
    the fields say what ran), and the intervention's view."""
    try:
        cell = _cell(head=head, layer=layer)
    except ValueError as e:
        return only(SweepPick, msg=warn(tr_error(lang_of(state), str(e))))
    head, layer = cell["head"], cell["layer"]
    if head is None or layer is None:
        return only(SweepPick, msg=warn(tr(lang_of(state), "in_pick_first")))
    zero = f"{layer}.{head}"
    note_drawn(request, "intervene", state, zero, "", "", alpha, "", "", False, position, shown)
    view = intervene_view(state, zero, "", "", alpha, "", "", False, position, shown)
    return SweepPick(zero, "", "", "", "", False, *view)


def layout_hint(key: str):
    return gr.Markdown(T(key), elem_classes=["pg-click-hint"])


def wire(page) -> None:
    c, state = page.inside, page.state
    listeners.on_change(page, redraw_note, [], [c.dla_note])
    # inputs: state, scroll, layer (<- the cell's y), position (<- its x)
    c.lens_pick.click(
        pick_lens_cell,
        [state, c.lens_scroll, c.lens_layer, c.lens_pos, c.lens_cols],
        outputs(LensPick, c, msg=c.lens_plot_msg),
        js=read_pick("pg-lens", x_at=3, y_at=2, cols_at=4),
        api_visibility="private",
        show_progress_on=[c.cell_plot],
        concurrency_id="inside",
        trigger_mode="always_last",
    )
    c.dla_btn.click(
        shown_attribution,
        [state, c.dla_pos, c.dla_target],
        c.dla_shown,
        api_visibility="private",
        show_progress="hidden",
    )
    # inputs: state, shown, head (<- x), layer (<- y); m_head/m_layer only carry the numbers in
    c.dla_pick.click(
        pick_head,
        [state, c.dla_shown, c.m_head, c.m_layer],
        outputs(HeadPick, c, msg=c.dla_pick_msg),
        js=read_pick("pg-dla-heat", x_at=2, y_at=3),
        api_visibility="private",
        show_progress_on=[c.dla_note],
        concurrency_id="inside",
        trigger_mode="always_last",
    )
    c.sweep_pick.click(
        pick_sweep_head,
        [state, c.m_head, c.m_layer, c.i_alpha, c.i_pos, c.lens_cols],
        outputs(SweepPick, c, msg=c.sweep_msg),
        js=read_pick("pg-sweep", x_at=1, y_at=2, cols_at=5),
        api_visibility="private",
        show_progress_on=[c.i_bars],
        concurrency_id="inside",
        trigger_mode="always_last",
    )
