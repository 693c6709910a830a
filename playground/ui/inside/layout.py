"""The Inside tab's components and their events.

The Inside tab's components and their events (its views are drawn by inside_tab, its numbers
computed by inside_data, clicks on its heatmaps handled by inside_picks).

Five sub-tabs: logit lens, direct logit attribution, attention maths, interventions, activation
patching (inside_patching); and hidden
API-only endpoints that return plain numbers.
"""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from playground.ui import listeners
from playground.ui.common import T, tr
from playground.ui.results import outputs
from playground.ui.style import HIDE_EMPTY, RESIZE_JS
from playground.ui.widgets import Number, Slider

from . import patching as inside_patching
from . import picks as inside_picks
from .cell_click import cols_js
from .data import (
    LENS_WINDOW,
    attribution_data,
    dose_data,
    intervene_data,
    lens_cell_data,
    lens_data,
    maths_data,
    sweep_data,
)
from .live import ask_js, dose_live, draw_dose, finished_view, stop, stop_js, sweep_live
from .opening import MATHS_SYMBOLS, Opened, open_tab
from .redraw import REDRAWN_MESSAGES, VIEWS, redraw_views, remembering
from .tab import (
    DlaView,
    DoseView,
    InterveneView,
    LensView,
    MathsView,
    SweepView,
    attribution_view,
    draw_sweep,
    intervene_view,
    lens_view,
    maths_view,
)

SUB_TABS = (
    "inside_lens",
    "inside_dla",
    "inside_maths",
    "inside_interventions",
    "inside_patching",
)  # their titles' keys


def layout() -> SimpleNamespace:
    """The tab's components (built inside its ``gr.Tab``)."""
    gr.Markdown(T("inside_intro"))
    msg = gr.HTML(elem_id="pg-inside-msg")  # opening the tab with no run to look inside
    seen_run = gr.State(None)  # the run whose defaults the position fields hold
    # a classroom room's Inside view this page shows (a student following the teacher's): opening the
    # tab then draws nothing of the page's own over it
    room_followed = gr.State(None)
    with gr.Tabs(elem_id="pg-inside-tabs") as sub_tabs:  # a lesson's Show me selects one
        with gr.Tab(T("inside_lens"), id="inside-lens") as lens_tab:
            with gr.Row():
                lens_btn = gr.Button(T("inside_show_lens"), variant="primary", elem_id="pg-lens-btn")
                lens_layer = Number(None, label=T("inside_lens_layer"), precision=0, minimum=0, elem_id="pg-lens-layer")
                lens_pos = Number(None, label=T("inside_position"), precision=0, minimum=0, elem_id="pg-lens-pos")
            lens_msg = gr.HTML(elem_id="pg-lens-msg")  # the lens' button and fields
            lens_note = gr.Markdown(elem_id="pg-lens-note", elem_classes=HIDE_EMPTY)
            inside_picks.layout_hint("inside_click_lens")
            lens_scroll = Slider(0, 1, value=0, step=1, label=T("inside_scroll"), visible=False)
            lens_plot_msg = gr.HTML(elem_id="pg-lens-plot-msg")  # the slider's and a cell click's, by the heatmap
            lens_plot = gr.Plot(show_label=False, elem_id="pg-lens")
            # positions that fit the page's width: the page script (cell_click) keeps it up to date
            lens_cols = Number(
                LENS_WINDOW, precision=0, show_label=False, elem_id="pg-lens-cols", elem_classes=["pg-offscreen"]
            )
            lens_pick = gr.Button("pick", elem_id="pg-lens-pick", elem_classes=["pg-offscreen"])
            with gr.Row():
                cell_plot = gr.Plot(show_label=False, elem_id="pg-lens-cell")
                cell_md = gr.Markdown(elem_id="pg-lens-cell-md", elem_classes=HIDE_EMPTY)
        with gr.Tab(T("inside_dla"), id="inside-dla") as dla_tab:
            with gr.Row():
                dla_pos = Number(None, label=T("inside_position"), precision=0, minimum=0)
                dla_target = gr.Textbox("", label=T("inside_target"), max_length=200)
                dla_btn = gr.Button(T("inside_attribute"), variant="primary", elem_id="pg-dla-btn")
            dla_msg = gr.HTML(elem_id="pg-dla-msg")  # each button's message sits under it, not at the tab's top
            dla_md = gr.Markdown(elem_id="pg-dla-md", elem_classes=HIDE_EMPTY)
            inside_picks.layout_hint("inside_click_head")
            dla_shown = gr.State(None)  # the position and target the heatmap was drawn for
            dla_pick = gr.Button("pick", elem_id="pg-dla-pick", elem_classes=["pg-offscreen"])
            dla_note = gr.Markdown(elem_id="pg-dla-pick-md", elem_classes=HIDE_EMPTY)
            dla_pick_msg = gr.HTML(elem_id="pg-dla-pick-msg")  # a click on the heatmap just under it
            with gr.Row():
                dla_heat = gr.Plot(show_label=False, elem_id="pg-dla-heat")
                dla_fall = gr.Plot(show_label=False, elem_id="pg-dla-fall")
        with gr.Tab(T("inside_maths"), id="inside-maths") as maths_tab:
            with gr.Row():
                m_layer = Number(0, label=T("layer"), precision=0, minimum=0)
                m_head = Number(0, label=T("head"), precision=0, minimum=0)
                m_pos = Number(None, label=T("inside_query_position"), precision=0, minimum=0)
                m_btn = gr.Button(T("inside_step_through"), variant="primary", elem_id="pg-maths-btn")
            m_msg = gr.HTML(elem_id="pg-maths-msg")
            m_md = gr.Markdown(elem_id="pg-maths-md", elem_classes=HIDE_EMPTY)
            with gr.Row():
                # before the first draw, the formula's symbols (the same in every language); a drawn
                # table carries its headers in the page's language
                m_table = gr.Dataframe(
                    headers=MATHS_SYMBOLS,
                    interactive=False,
                    max_height=420,
                    elem_id="pg-maths-table",
                    min_width=560,
                    # every column, softmax the last, within the table's width (a long token wraps)
                    column_widths=["13%", "22%", "17%", "16%", "16%", "16%"],
                    wrap=True,
                )
                # (side by side from 1200 px; a 1024-px projector stacks them rather than cut the softmax column)
                m_plot = gr.Plot(show_label=False, elem_id="pg-maths-plot", min_width=420)
        with gr.Tab(T("inside_interventions"), id="inside-intervene") as intervene_tab:
            with gr.Row():
                i_zero = gr.Textbox("", label=T("inside_zero_heads"), placeholder=T("ph_heads"), max_length=2000)
                i_mean = gr.Textbox("", label=T("inside_mean_heads"), placeholder=T("ph_head"), max_length=2000)
                i_scale = gr.Textbox("", label=T("inside_scale_head"), placeholder=T("ph_head"), max_length=50)
                i_alpha = Slider(0, 2, value=0.0, step=0.1, label=T("inside_alpha"))
            with gr.Row():
                i_mlps = gr.Textbox("", label=T("inside_skip_mlps"), placeholder=T("ph_layers"), max_length=500)
                i_unmask = gr.Textbox("", label=T("inside_unmask"), placeholder=T("ph_layer"), max_length=500)
                i_drop = gr.Checkbox(False, label=T("inside_drop_pos"))
                i_pos = Number(None, label=T("inside_position"), precision=0, minimum=0)
                i_target = gr.Textbox("", label=T("inside_target"), max_length=200)
            with gr.Row():
                i_btn = gr.Button(T("inside_run_intervention"), variant="primary", elem_id="pg-intervene-btn")
                dose_btn = gr.Button(T("inside_dose"), elem_id="pg-dose-btn")
                sweep_btn = gr.Button(T("inside_sweep"), elem_id="pg-sweep-btn")
                stop_btn = gr.Button(T("stop"), variant="stop", elem_id="pg-inside-stop")
                long_ask = gr.Textbox(visible=False)  # a press's name, for a Stop that arrives before it starts
            i_msg = gr.HTML(elem_id="pg-intervene-msg")  # the intervention's, the dose curve's and the sweep's
            i_md = gr.Markdown(elem_id="pg-intervene-md", elem_classes=HIDE_EMPTY)
            with gr.Row():
                i_bars = gr.Plot(show_label=False, elem_id="pg-intervene-bars")
                i_loss = gr.Plot(show_label=False, elem_id="pg-intervene-loss")
            i_lens = gr.Plot(show_label=False, elem_id="pg-intervene-lens")
            with gr.Row():
                dose_plot = gr.Plot(show_label=False, elem_id="pg-dose")
                with gr.Column():
                    sweep_md = gr.Markdown(elem_id="pg-sweep-md", elem_classes=HIDE_EMPTY)
                    inside_picks.layout_hint("inside_click_sweep")
                    sweep_msg = gr.HTML(elem_id="pg-sweep-msg")  # a click on the sweep just under it
                    sweep_pick = gr.Button("pick", elem_id="pg-sweep-pick", elem_classes=["pg-offscreen"])
                    sweep_plot = gr.Plot(show_label=False, elem_id="pg-sweep")
        with gr.Tab(T("inside_patching"), id="inside-patching") as patching_tab:
            patching = inside_patching.layout()
    # API-only endpoints (plain numbers): their hidden buttons and output, and the lens window bounds
    api_out = gr.JSON(visible=False)
    api_first, api_last = Number(None, visible=False), Number(None, visible=False)
    api_buttons = [gr.Button(visible=False) for _ in range(7)]
    return SimpleNamespace(**{k: v for k, v in locals().items()})


def newest_lens(state, layer, position, shown=None):
    """The lens as opening the tab draws it: its newest positions."""
    return lens_view(state, None, layer, position, shown)


def wire(page) -> None:
    """The tab's events; ``page.inside`` holds its components, ``page.state`` the session."""
    c, state = page.inside, page.state
    # ---- views ----
    lens_inputs = [state, c.lens_scroll, c.lens_layer, c.lens_pos, c.lens_cols]
    lens_outputs = outputs(LensView, c, msg=c.lens_msg)
    fit = cols_js(4)  # the events read how many positions fit the page as they are sent
    # Each view shows its progress on the figure it redraws (ui/progress says why only there), as its
    # runtime only: a spinner's animation over the figure took a core from the view's own forwards.
    lens = {
        "js": fit,
        "api_visibility": "private",
        "concurrency_id": "inside",
        "show_progress_on": [c.lens_plot],
        "show_progress": "minimal",
    }
    # Each view drawn, for a classroom room to publish after it (lessons.room_inside chains on these):
    # (the view's key, its event, the inputs it was drawn from, the view, the names of the inputs that
    # make its selection (None: not one), whether a page's own hand drew it)
    c.room_drawn = []
    lens_args, lens_names = [c.lens_scroll, c.lens_layer, c.lens_pos, c.lens_cols], (None, "lens_layer", "lens_pos")
    drawn = c.lens_btn.click(lens_view, lens_inputs, lens_outputs, **lens)
    c.room_drawn.append(("lens", drawn, lens_args, lens_view, lens_names, True))
    for control in (c.lens_layer, c.lens_pos):
        drawn = control.submit(lens_view, lens_inputs, lens_outputs, **lens)
        c.room_drawn.append(("lens", drawn, lens_args, lens_view, lens_names, True))
    scrolled = outputs(LensView, c, msg=c.lens_plot_msg)
    drawn = c.lens_scroll.release(lens_view, lens_inputs, scrolled, trigger_mode="always_last", **lens)
    c.room_drawn.append(("lens", drawn, lens_args, lens_view, lens_names, True))
    # Opening the tab draws the lens for the current run and clears the other views: the last
    # run's views lose their "previous run" mark (generate_layout.previous_run_js) once it has.
    opened = page.inside_tab.select(
        open_tab,
        [state, c.seen_run, c.lens_scroll, c.lens_layer, c.lens_pos, c.lens_cols, c.room_followed, page.lessons.room],
        outputs(Opened, c),
        js=cols_js(5),
        api_visibility="private",
        concurrency_id="inside",
        show_progress_on=[c.lens_plot],
        show_progress="minimal",
    )
    opened.then(None, None, None, js="() => { delete document.body.dataset.pgInsidePrevious; }")
    opened_args = [c.lens_layer, c.lens_pos, c.lens_cols]
    c.room_drawn.append(("lens", opened, opened_args, newest_lens, lens_names[1:], False))
    dla = c.dla_btn.click(
        remembering("dla"),
        [state, c.dla_pos, c.dla_target],
        outputs(DlaView, c, msg=c.dla_msg),
        api_visibility="private",
        concurrency_id="inside",
        show_progress_on=[c.dla_heat],
        show_progress="minimal",
    )
    c.room_drawn.append(("dla", dla, [c.dla_pos, c.dla_target], attribution_view, ("dla_pos", "dla_target"), True))
    maths = c.m_btn.click(
        remembering("maths"),
        [state, c.m_layer, c.m_head, c.m_pos],
        outputs(MathsView, c, msg=c.m_msg),
        api_visibility="private",
        concurrency_id="inside",
        show_progress_on=[c.m_plot],
        show_progress="minimal",
    )
    maths_names = ("m_layer", "m_head", "m_pos")
    c.room_drawn.append(("maths", maths, [c.m_layer, c.m_head, c.m_pos], maths_view, maths_names, True))
    i_inputs = [state, c.i_zero, c.i_mean, c.i_scale, c.i_alpha, c.i_mlps, c.i_unmask, c.i_drop, c.i_pos]
    intervened = c.i_btn.click(
        remembering("intervene"),
        i_inputs + [c.lens_cols],
        outputs(InterveneView, c, msg=c.i_msg),
        js=cols_js(len(i_inputs)),
        api_visibility="private",
        concurrency_id="inside",
        show_progress_on=[c.i_bars],
        show_progress="minimal",
    )
    c.room_drawn.append(("intervene", intervened, [*i_inputs[1:], c.lens_cols], intervene_view, (), True))
    # The two long views stream their figure as it grows (inside_live); Stop ends them within one
    # block of one α or one head.
    dose = c.dose_btn.click(
        dose_live,
        [state, c.i_scale, c.i_pos, c.i_target, c.long_ask],
        outputs(DoseView, c, msg=c.i_msg),
        js=ask_js(4),
        api_visibility="private",
        concurrency_id="inside",
        show_progress="hidden",
    )
    # One sweep at a time on this server: it keeps every core busy for up to a minute.
    sweep = c.sweep_btn.click(
        sweep_live,
        [state, c.long_ask],
        outputs(SweepView, c, msg=c.i_msg),
        js=ask_js(1),
        api_visibility="private",
        concurrency_id="inside_sweep",
        concurrency_limit=1,
        show_progress="hidden",
    )
    c.stop_btn.click(stop, [state, c.long_ask], c.i_msg, js=stop_js(1), api_visibility="private", queue=False)
    # (a room is shown the finished curve or sweep, from the numbers the page's own drawing measured)
    dose_names = ("i_scale", "i_pos", "i_target")
    dose_args = [c.i_scale, c.i_pos, c.i_target]
    c.room_drawn.append(("dose", dose, dose_args, finished_view("dose", draw_dose), dose_names, True))
    c.room_drawn.append(("sweep", sweep, [], finished_view("sweep", draw_sweep), (), True))
    # Plotly measures a figure when it is drawn: one drawn in a hidden tab is re-measured when shown.
    tabs = [c.lens_tab, c.dla_tab, c.maths_tab, c.intervene_tab, c.patching_tab]
    for tab in tabs:
        tab.select(None, None, None, js=RESIZE_JS)
    # (its own tabs' titles too: Gradio translated them once, when they were first drawn)
    titles = {lang: [tr(lang, key) for key in SUB_TABS] for lang in ("en", "zh-CN")}
    listeners.on_change_titles(page, titles, tabs)
    inside_patching.wire(page, c.patching)
    # A language switch redraws the lens (when there is a run) and every other view drawn, and the
    # messages under their buttons.
    redrawn = [f for view in (LensView, *(v for _, v in VIEWS.values())) for f in view._fields[:-1]]
    redrawn += REDRAWN_MESSAGES
    listeners.on_change(page, redraw_views, lens_inputs[2:], [getattr(c, f) for f in redrawn])

    # ---- API: plain numbers ----
    out, hidden = c.api_out, iter(c.api_buttons).__next__
    hidden().click(lens_data, [state, c.api_first, c.api_last], out, api_name="logit_lens", concurrency_id="inside")
    hidden().click(
        lens_cell_data, [state, c.lens_layer, c.lens_pos], out, api_name="lens_cell", concurrency_id="inside"
    )
    hidden().click(
        attribution_data, [state, c.dla_pos, c.dla_target], out, api_name="logit_attribution", concurrency_id="inside"
    )
    hidden().click(
        maths_data, [state, c.m_layer, c.m_head, c.m_pos], out, api_name="attention_maths", concurrency_id="inside"
    )
    hidden().click(intervene_data, i_inputs, out, api_name="intervene", concurrency_id="inside")
    hidden().click(
        dose_data, [state, c.i_scale, c.i_pos, c.i_target], out, api_name="dose_response", concurrency_id="inside"
    )
    hidden().click(sweep_data, state, out, api_name="head_sweep", concurrency_id="inside_sweep", concurrency_limit=1)
