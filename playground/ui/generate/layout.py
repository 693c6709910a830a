"""The Generate & attention tab's components and their events (its handlers are in ``tab``).

Rows: the prompt beside the knobs; the tokens beside their attention; the chosen step's stages at
full width. Every event has an ``api_name`` or is marked private.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import gradio as gr

from playground.server.decode_loop import concurrent_runs
from playground.server.runs import MAX_NEW_TOKENS
from playground.ui import attention_view as av
from playground.ui import listeners, presses
from playground.ui.attention_view import SPANS, VIEWS, AttentionViews, attention_views, head_examples
from playground.ui.chips import CHIPS_JS, CHIPS_TEMPLATE, LEGEND
from playground.ui.common import T, choices, seed_box, tr
from playground.ui.results import outputs
from playground.ui.widgets import Dropdown, Radio, Slider

from .tab import (
    Exported,
    LastStep,
    Picked,
    Relabelled,
    StepView,
    Streamed,
    after_run,
    export_model_file,
    export_run_file,
    generate_tokens,
    inspect_step,
    last_step,
    pick_token,
    relabel,
    run_data,
    stop_generation,
)

EXAMPLES = [
    ["ROMEO:\nWhat light through yonder window breaks?\n"],
    ["First Citizen:\nBefore we proceed any further, hear me speak.\n"],
    ["Hello, I am a language model, and"],
    ["The capital of France is Paris. The capital of Germany is"],
    ["从前有一座山，山上有一座庙，"],
    ["注意力机制让模型在生成每个词时"],
]


def layout(model_cfg) -> SimpleNamespace:
    """Two rows, then the details. The prompt with its buttons beside the sampling knobs; then the
    tokens beside their attention, so that after a run the chips, the heatmap and its controls
    share the first screen (1600×1000, and a 1024×768 projector in presenter mode: style.CSS
    compacts the knobs there, and the heatmap's height is what is left: attention_view.MAP_HEIGHT).
    The example prompts, the chosen step and the query's bars follow under them."""
    c = SimpleNamespace(served_cfg=model_cfg)  # the concurrency limit is sized for it (wire)
    with gr.Row(elem_id="pg-gen-top"):
        with gr.Column(scale=2, min_width=300), gr.Row():
            c.prompt = gr.Textbox(
                EXAMPLES[0][0], label=T("prompt"), lines=2, max_length=20_000, elem_id="pg-prompt", scale=3
            )
            with gr.Column(scale=1, min_width=110, elem_id="pg-gen-buttons"):
                c.gen_btn = gr.Button(T("generate"), variant="primary", elem_id="pg-generate")
                c.stop_btn = gr.Button(T("stop"), variant="stop", elem_id="pg-stop")
                c.gen_ask = gr.Textbox(visible=False)  # a press's name, for a Stop that arrives before its run
        with gr.Column(scale=3, min_width=300, elem_id="pg-knobs"):
            with gr.Row():
                c.temperature = Slider(0, 2, value=0.8, step=0.05, label=T("temperature"), min_width=200)
                c.top_k = Slider(0, 200, value=40, step=1, label=T("top_k"), min_width=200)
                c.top_p = Slider(0.05, 1, value=1.0, step=0.05, label=T("top_p"), min_width=200)
                c.max_new = Slider(
                    1, MAX_NEW_TOKENS, value=40, step=1, label=T("max_new_tokens"), elem_id="pg-max-new", min_width=200
                )
            c.input_msg = gr.HTML(elem_id="pg-input-msg")
            with gr.Row(elem_classes=["pg-advanced"]):
                c.seed = seed_box(42, T("seed"), min_width=100, elem_id="pg-seed")
                c.greedy = gr.Checkbox(False, label=T("greedy"))
    with gr.Row(elem_id="pg-gen-main"):
        with gr.Column(scale=2, min_width=300):
            c.status = gr.HTML(elem_id="pg-status")
            c.chips = gr.HTML(
                "", label=T("tokens"), elem_id="pg-chips", js_on_load=CHIPS_JS, html_template=CHIPS_TEMPLATE
            )
            c.legend = gr.HTML(LEGEND, elem_id="pg-legend")
            gr.Examples(EXAMPLES, inputs=[c.prompt], label=T("examples"), elem_id="pg-examples")
            c.step_slider = Slider(0, 1, value=0, step=1, label=T("step"), visible=False, elem_id="pg-step")
            c.step_md = gr.Markdown(elem_id="pg-step-md")
            c.prob_plot = gr.Plot(show_label=False, elem_id="pg-prob-plot")
        # The map's controls stand in a narrow column beside it (not above it): the map takes the
        # height the first screen has left, and it is about as wide as it is high.
        with gr.Column(scale=1, min_width=130, elem_id="pg-att-controls"):
            c.view = Dropdown(choices(av.VIEW_KEYS), value=VIEWS[0], label=T("view"), elem_id="pg-view")
            c.layer = Slider(
                0,
                max(1, model_cfg.n_layers - 1),
                value=0,
                step=1,
                label=T("layer"),
                visible=model_cfg.n_layers > 1,
                elem_id="pg-layer",
            )
            c.head = Slider(
                0,
                max(1, model_cfg.n_heads - 1),
                value=0,
                step=1,
                label=T("head"),
                visible=model_cfg.n_heads > 1,
                elem_id="pg-head",
            )
            # hidden until a run gives it its positions (a 0–1 slider would say nothing)
            c.query = Slider(0, 1, value=0, step=1, label=T("query"), elem_id="pg-query", visible=False)
            c.span = Radio(choices(av.SPAN_KEYS), value=SPANS[0], label=T("heatmap_range"), elem_id="pg-span")
            c.log_scale = gr.Checkbox(True, label=T("log_scale"), elem_id="pg-log-scale")
        with gr.Column(scale=3, min_width=300):
            c.att_msg = gr.HTML(elem_id="pg-att-msg")
            c.heatmap = gr.Plot(show_label=False, elem_id="pg-heatmap")
            # a classroom room's run this page shows (a student following the teacher's): a change of
            # language draws nothing of the page's own over its map and status (the room's redraws them)
            c.room_shown = gr.State(None)
            head_rows, head_labels = head_examples(VIEWS[0])
            c.head_examples = None
            with gr.Column(visible=bool(head_rows)) as c.head_box:
                if head_rows:
                    c.head_examples = gr.Examples(
                        head_rows,
                        inputs=[c.prompt, c.view, c.layer, c.head, c.span],
                        example_labels=head_labels,
                        label=T("heads_label"),
                    )
            c.query_plot = gr.Plot(show_label=False, elem_id="pg-query-plot")
            with gr.Row(elem_classes=["pg-advanced"]):
                c.exp_json = gr.Button(T("export_json"), size="sm")
                c.exp_npz = gr.Button(T("export_npz"), size="sm")
                c.exp_model = gr.Button(T("export_model"), size="sm")
            c.export_msg = gr.HTML()
            # Hidden until there is something to download (an empty box only takes room).
            c.export_file = gr.File(label=T("download"), interactive=False, visible=False, height=100)
            c.attention_json = gr.JSON(visible=False)
            c.run_json = gr.JSON(visible=False)
    c.stages_plot = gr.Plot(
        show_label=False, elem_id="pg-stages-plot"
    )  # the step's four stage panels need the page's width
    return c


def range_note_js(key: str, lo: float, hi: float) -> str:
    """Browser-only check for a slider's number box: a typed value outside the range is clamped by
    the slider on blur, so say so instead of changing it silently (in the page's language, which
    the hidden language probe shows)."""

    texts = {
        lang: tr(
            lang,
            "range_note",
            name=tr(lang, key).split("（")[0].split(" (")[0],
            value="${v}",
            lo=lo,
            hi=hi,
            clamped=f"${{Math.min(Math.max(v, {lo}), {hi})}}",
        )
        for lang in ("en", "zh-CN")
    }
    zh = "(document.querySelector('#pg-lang-probe')?.innerText || '').trim() === 'zh-CN'"
    return (
        f"(v) => (v === null || v === '' || (v >= {lo} && v <= {hi})) ? '' : "
        f"`<div class='pg-msg pg-error'>⚠️ ${{{zh} ? `{texts['zh-CN']}` : `{texts['en']}`}}</div>`"
    )


def previous_run_js(ask_at: int) -> str:
    """A ``js=`` pre-processor for Generate: while a new run streams, the last run's figures and
    step panel stay on screen, dimmed and labelled as the previous run (style.CSS draws the label);
    CLEAR_PREVIOUS_JS takes the mark away once the new run's own figures are drawn. The Inside
    tab's views of the last run are marked too, until that tab is opened and draws the new run's
    (inside_layout clears that mark). Input number ``ask_at`` becomes a fresh name for this press,
    which Stop sends (GEN_STOP_JS), so a Stop that reaches the server before the run has started
    still stops it."""
    texts = {key: {lang: tr(lang, key) for lang in ("en", "zh-CN")} for key in ("previous_run", "previous_run_inside")}
    zh = "(document.querySelector('#pg-lang-probe')?.innerText || '').trim() === 'zh-CN'"
    marks = "".join(
        f" document.body.style.setProperty('{var}', JSON.stringify(zh ? {json.dumps(t['zh-CN'], ensure_ascii=False)}"
        f" : {json.dumps(t['en'])}));"
        for var, t in (
            ("--pg-previous-text", texts["previous_run"]),
            ("--pg-inside-previous-text", texts["previous_run_inside"]),
        )
    )
    return (
        f"(...a) => {{ {presses.name_js(PRESS_VAR, ask_at)}"
        f" if (document.querySelector('#pg-chips .pg-chip')) {{ const zh = {zh};{marks}"
        " document.body.dataset.pgPrevious = '1'; document.body.dataset.pgInsidePrevious = '1'; } return a; }"
    )


PRESS_VAR = "pgGenAsk"  # the page's last press of Generate, by name
GEN_STOP_JS = presses.stop_js(PRESS_VAR, 1)  # Stop names the page's last press


CLEAR_PREVIOUS_JS = "() => { delete document.body.dataset.pgPrevious; }"


def wire(page) -> None:
    g, state = page.generate, page.state
    # Every run decodes in the server's shared loop, so a Generate worker only waits on its stream: as
    # many may wait as the memory budget holds runs of the served model (decode_loop.concurrent_runs).
    limit = concurrent_runs(g.served_cfg)
    att_outputs = outputs(AttentionViews, g)
    gen_inputs = [state, g.prompt, g.temperature, g.top_k, g.top_p, g.max_new, g.seed, g.greedy]
    # The page's presses carry a name for Stop (previous_run_js); /generate and /stop keep the inputs API
    # callers send, through hidden buttons of their own.
    press_inputs, press_js = [*gen_inputs, g.gen_ask], previous_run_js(len(gen_inputs))
    # The stream updates only chips and status; the figures follow once it ends (see the module's docstring).
    # the events after which a classroom teacher's page publishes its run (room_follow): a run ended, a view changed
    g.room_run_ended, g.room_view_changed = [], []
    private = {"api_visibility": "private"}
    for trigger, inputs, js, api in (
        (g.gen_btn.click, press_inputs, press_js, private),
        (g.prompt.submit, press_inputs, press_js, private),
        (gr.Button(visible=False).click, gen_inputs, None, {"api_name": "generate"}),
    ):
        # show_progress hidden: the status line says what is happening, and Gradio's own progress
        # overlay would be re-rendered on every streamed update.
        streamed = trigger(
            generate_tokens,
            inputs,
            outputs(Streamed, g, state=state),
            js=js,
            concurrency_id="generate",
            concurrency_limit=limit,
            show_progress="hidden",
            **api,
        )
        drawn = streamed.then(
            after_run,
            [state, g.view, g.layer, g.head, g.log_scale, g.span],
            att_outputs,
            api_visibility="private",
        )
        drawn.then(last_step, state, outputs(LastStep, g), api_visibility="private").then(
            None, None, None, js=CLEAR_PREVIOUS_JS
        )
        # (beside the page's own figures: the room's map, drawn from the same run, waits for neither)
        g.room_run_ended.append(streamed)
    # Stop only raises a flag: it never waits behind generation or model builds.
    stopping = {"concurrency_id": "stop", "concurrency_limit": None}
    g.stop_btn.click(stop_generation, [state, g.gen_ask], None, js=GEN_STOP_JS, api_visibility="private", **stopping)
    gr.Button(visible=False).click(stop_generation, state, None, api_name="stop", **stopping)
    for slider, name in (
        (g.temperature, "temperature"),
        (g.top_k, "top_k"),
        (g.top_p, "top_p"),
        (g.max_new, "max_new_tokens"),
    ):
        slider.input(None, slider, g.input_msg, js=range_note_js(name, slider.minimum, slider.maximum))
    g.step_slider.input(
        inspect_step,
        [state, g.step_slider],
        outputs(StepView, g),
        api_name="inspect_step",
        trigger_mode="always_last",
    )
    att_inputs = [state, g.view, g.layer, g.head, g.log_scale, g.query, g.span]
    picked = g.chips.pick(
        pick_token,
        state,
        outputs(Picked, g),
        api_visibility="private",
        trigger_mode="always_last",
    ).then(attention_views, att_inputs, att_outputs, api_visibility="private")
    g.room_view_changed.append(picked)
    # .input: a slider's dragging, typing in its number box and arrow keys alike (not .release).
    for control in (g.view, g.log_scale, g.layer, g.head, g.query, g.span):
        g.room_view_changed.append(
            control.input(
                attention_views, att_inputs, att_outputs, api_visibility="private", trigger_mode="always_last"
            )
        )
    for button, handler, api in (
        (g.exp_json, lambda s: export_run_file(s, "json"), "export_run_json"),
        (g.exp_npz, lambda s: export_run_file(s, "npz"), "export_run_npz"),
        (g.exp_model, export_model_file, "export_model"),
    ):
        # The API returns the file's path; the page then shows the (until now hidden) download box.
        button.click(handler, state, outputs(Exported, g), api_name=api).then(
            lambda f: gr.update(visible=bool(f)), g.export_file, g.export_file, api_visibility="private"
        )
    listeners.on_change(
        page,
        relabel,
        att_inputs[1:] + [g.step_slider, g.room_shown],
        outputs(Relabelled, g, head_examples=g.head_examples.dataset if g.head_examples else g.head_box),
    )
    # API-only endpoints: raw numbers for gradio_client users.
    gr.Button(visible=False).click(
        av.attention_data, [state, g.layer, g.head], g.attention_json, api_name="attention_data"
    )
    gr.Button(visible=False).click(run_data, state, g.run_json, api_name="run_data")
    gr.Button(visible=False).click(attention_views, att_inputs, att_outputs, api_name="attention")
