"""Clicking the Inside tab's heatmaps (the page script is cell_click.PAGE_JS):

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

from . import redraw
from .cell_click import read_pick
from .common import T, lang_of, tr, warn
from .inside_data import run_context


def _whole(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def pick_lens_cell(state, scroll, layer, position, shown=None):
    """The lens view for the clicked (layer, position), and those two fields set to it. The window
    moves only as far as it must to show that cell (after a resize the page re-picks the selected
    cell with a new window size)."""
    from .inside_tab import lens_view, lens_window

    layer, position = _whole(layer), _whole(position)
    first, window = _whole(scroll), lens_window(shown)
    if first is not None and position is not None:
        scroll = min(max(first, position - window + 1), position)
    out = lens_view(state, scroll, layer, position, shown)
    return out + ((layer, position) if layer is not None and position is not None else (gr.skip(), gr.skip()))


def shown_attribution(state, position, target):
    """What the attribution heatmap was drawn for: {"position": absolute, "target": as typed}."""
    from .inside_data import _position

    try:
        model, _, start, ids, _ = run_context(state)
        return {
            "position": start + _position(position, start, ids, default=max(0, len(ids) - 2)),
            "target": "" if target is None else str(target),
            "n_heads": model.cfg.n_heads,
        }
    except Exception:
        return None


def pick_head(state, shown, head, layer, request: gr.Request = None):
    """A clicked attribution cell. Outputs: maths layer, head, position; intervention scale head,
    position, target, skip MLPs; maths table, plot, text; the note under the heatmap; message."""
    from .inside_tab import maths_view, note_drawn

    lang = lang_of(state)
    head, layer = _whole(head), _whole(layer)
    if not shown or head is None or layer is None:
        return (gr.skip(),) * 11 + (warn(tr(lang, "in_pick_first")),)
    if head >= shown["n_heads"]:  # the MLP column
        note = _remember_note(request, "in_picked_mlp", layer=layer)
        return (gr.skip(),) * 6 + (str(layer),) + (gr.skip(),) * 3 + (note(lang), "")
    pos = shown["position"]
    table, fig, text, msg = maths_view(state, layer, head, pos)
    note_drawn(request, "maths", state, layer, head, pos)  # (redrawn in a new language)
    note = _remember_note(request, "in_picked_head", layer=layer, head=head, pos=pos)(lang)
    return (layer, head, pos, f"{layer}.{head}", pos, shown["target"], gr.skip(), table, fig, text, note, msg)


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


def pick_sweep_head(state, head, layer, alpha, position, shown=None, request: gr.Request = None):
    """A clicked sweep cell: that head zero-ablated alone (the other intervention fields cleared, so
    the fields say what ran). Outputs: zero, mean, scale, skip MLPs, no-mask, drop-pos fields, then
    the intervention view's (bars, loss, lens after, text, message)."""
    from .inside_tab import intervene_view, note_drawn

    head, layer = _whole(head), _whole(layer)
    if head is None or layer is None:
        return (gr.skip(),) * 10 + (warn(tr(lang_of(state), "in_pick_first")),)
    zero = f"{layer}.{head}"
    fields = (zero, "", "", "", "", False)
    note_drawn(request, "intervene", state, zero, "", "", alpha, "", "", False, position, shown)
    return fields + tuple(intervene_view(state, zero, "", "", alpha, "", "", False, position, shown))


def layout_hint(key: str):
    return gr.Markdown(T(key), elem_classes=["pg-click-hint"])


def wire(page) -> None:
    from . import prefs  # (prefs imports the tab modules)

    c, state = page.inside, page.state
    prefs.on_change(page, redraw_note, [], [c.dla_note])
    lens_outputs = [c.lens_plot, c.lens_note, c.lens_scroll, c.cell_plot, c.cell_md, c.msg]
    # inputs: state, scroll, layer (<- the cell's y), position (<- its x)
    c.lens_pick.click(
        pick_lens_cell,
        [state, c.lens_scroll, c.lens_layer, c.lens_pos, c.lens_cols],
        lens_outputs + [c.lens_layer, c.lens_pos],
        js=read_pick("pg-lens", x_at=3, y_at=2, cols_at=4),
        api_visibility="private",
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
        [
            c.m_layer,
            c.m_head,
            c.m_pos,
            c.i_scale,
            c.i_pos,
            c.i_target,
            c.i_mlps,
            c.m_table,
            c.m_plot,
            c.m_md,
            c.dla_note,
            c.msg,
        ],
        js=read_pick("pg-dla-heat", x_at=2, y_at=3),
        api_visibility="private",
        concurrency_id="inside",
        trigger_mode="always_last",
    )
    c.sweep_pick.click(
        pick_sweep_head,
        [state, c.m_head, c.m_layer, c.i_alpha, c.i_pos, c.lens_cols],
        [c.i_zero, c.i_mean, c.i_scale, c.i_mlps, c.i_unmask, c.i_drop, c.i_bars, c.i_loss, c.i_lens, c.i_md, c.msg],
        js=read_pick("pg-sweep", x_at=1, y_at=2, cols_at=5),
        api_visibility="private",
        concurrency_id="inside",
        trigger_mode="always_last",
    )
