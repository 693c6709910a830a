"""The page: the three tabs' layout, then the wiring of every event (each with an ``api_name`` or
marked private). Handlers live in the tab modules; this file only places and connects them."""

from __future__ import annotations

import gradio as gr

from .. import files
from ..config import ACTIVATIONS, ATTENTION_IMPLS, DEFAULT_PRESET, NORM_PLACEMENTS, POS_ENCODINGS, PRESETS
from ..session import BUNDLED_CHECKPOINT, CACHE, MAX_NEW_TOKENS, default_recipe
from ..translations import EN, ZH
from . import attention_view as av
from . import generate_tab as gt
from . import model_tab as mt
from . import train_tab as tt
from .chips import CHIPS_JS, CHIPS_TEMPLATE, LEGEND
from .common import I18N, T, new_state

EXAMPLES = [
    ["ROMEO:\nWhat light through yonder window breaks?\n"],
    ["First Citizen:\nBefore we proceed any further, hear me speak.\n"],
    ["Hello, I am a language model, and"],
    ["The capital of France is Paris. The capital of Germany is"],
    ["从前有一座山，山上有一座庙，"],
    ["注意力机制让模型在生成每个词时"],
]

CSS = """
.pg-msg { padding: 6px 10px; border-radius: 6px; margin: 4px 0; font-size: 15px; }
.pg-error { background: #fef2f2; color: #991b1b; border: 1px solid #fecaca; }
.pg-ok { background: #f0fdf4; color: #166534; border: 1px solid #bbf7d0; }
.dark .pg-error { background: #450a0a; color: #fecaca; border-color: #7f1d1d; }
.dark .pg-ok { background: #052e16; color: #bbf7d0; border-color: #14532d; }
#pg-summary { font-size: 15px; }
.pg-status { font-size: 15px; padding: 2px 0; }
.pg-chipbox { max-height: 300px; overflow-y: auto; line-height: 2.1; padding: 4px; }
.pg-chip { display: inline-block; margin: 2px 2px; padding: 1px 6px; border-radius: 6px; font-size: 16px;
           color: #ffffff; background: #4b5563; cursor: pointer; white-space: pre; font-family: ui-monospace, monospace; }
.pg-chip small { font-size: 11px; margin-left: 5px; opacity: 0.95; font-family: system-ui, sans-serif; }
.pg-chip.pg-selected { outline: 3px solid #f59e0b; outline-offset: 1px; }
.pg-swatch { display: inline-block; width: 0.9em; height: 0.9em; border-radius: 2px; vertical-align: -1px; }
/* Plotly figures are drawn on a transparent background; in dark mode their text and lines are
   recoloured here so one figure serves both themes. */
.dark .js-plotly-plot .main-svg text { fill: #e5e7eb !important; }
.dark .js-plotly-plot .main-svg .gridlayer path, .dark .js-plotly-plot .main-svg .zerolinelayer path {
  stroke: #374151 !important; }
"""

# After a tab becomes visible, tell plotly to re-measure: a figure drawn while its tab was hidden
# would otherwise keep the narrow default width.
RESIZE_JS = "() => { setTimeout(() => window.dispatchEvent(new Event('resize')), 60); }"


def range_note_js(name: str, lo: float, hi: float) -> str:
    """Browser-only check for a slider's number box: a typed value outside the range is clamped by
    the slider on blur, so say so instead of changing it silently."""
    return (f"(v) => (v === null || v === '' || (v >= {lo} && v <= {hi})) ? '' : "
            f"`<div class='pg-msg pg-error'>⚠️ {name}: ${{v}} is outside {lo}–{hi}; "
            f"the slider sets it to ${{Math.min(Math.max(v, {lo}), {hi})}}.</div>`")


def _checkpoints_in_use() -> list[str]:
    """Checkpoint files of the models the server holds: the disk budget never deletes these."""
    import json

    return [json.loads(key).get("path") for key in CACHE.keys()]


def build_demo() -> gr.Blocks:
    files.protect(_checkpoints_in_use)
    default_model = CACHE.get(default_recipe())  # warm: the first page load is instant
    default_cfg = PRESETS[DEFAULT_PRESET]  # the config form starts here; load_session fills in the real model
    model_cfg = default_model.cfg
    with gr.Blocks(title="GPT Playground") as demo:
        state = gr.State(new_state())
        train_state = gr.State({"job": None, "recipe": None})
        gr.Markdown(f"# {EN['title']} · {ZH['title']}\n{EN['subtitle']}")
        summary = gr.Markdown(elem_id="pg-summary")
        with gr.Tabs():
            with gr.Tab(T("tab_model"), id="model") as model_tab:
                with gr.Row():
                    with gr.Column(scale=2, min_width=320):
                        weights = gr.Radio(mt.WEIGHT_CHOICES, label=T("weights"),
                                           value=mt.WEIGHT_CHOICES[0] if BUNDLED_CHECKPOINT.is_file() else "random init")
                        preset = gr.Dropdown(mt.PRESET_CHOICES, value=DEFAULT_PRESET, label=T("preset"))
                        with gr.Accordion(T("config_fields"), open=False):
                            # Integers are checked by the handler (2.5 layers is refused and said),
                            # not rounded by the widget.
                            f_vocab = gr.Number(default_cfg.vocab_size, label=T("vocab_size"))
                            f_ctx = gr.Number(default_cfg.context_length, label=T("context_length"))
                            f_emb = gr.Number(default_cfg.emb_dim, label=T("emb_dim"))
                            f_heads = gr.Number(default_cfg.n_heads, label=T("n_heads"))
                            f_layers = gr.Number(default_cfg.n_layers, label=T("n_layers"))
                            f_drop = gr.Number(default_cfg.drop_rate, label=T("drop_rate"))
                            f_qkv = gr.Checkbox(default_cfg.qkv_bias, label=T("qkv_bias"))
                            f_tie = gr.Checkbox(default_cfg.tie_weights, label=T("tie_weights"))
                            f_pos = gr.Dropdown(list(POS_ENCODINGS), value=default_cfg.pos_encoding, label=T("pos_encoding"))
                            f_act = gr.Dropdown(list(ACTIVATIONS), value=default_cfg.activation, label=T("activation"))
                            f_norm = gr.Dropdown(list(NORM_PLACEMENTS), value=default_cfg.norm_placement, label=T("norm_placement"))
                            f_attn = gr.Dropdown(list(ATTENTION_IMPLS), value=default_cfg.attention_impl, label=T("attention_impl"))
                        fields = [f_vocab, f_ctx, f_emb, f_heads, f_layers, f_drop, f_qkv, f_tie, f_pos, f_act, f_norm, f_attn]
                        with gr.Row():
                            seed_init = gr.Number(0, label=T("seed_init"), min_width=100)
                            dtype = gr.Radio(list(mt.DTYPES), value="float32", label=T("dtype"),
                                             info=T("dtype_info"))
                        hub_name = gr.Dropdown(list(mt.HUB_MODELS), value=list(mt.HUB_MODELS)[0], label=T("hub_model"))
                        upload = gr.File(label=T("upload"), file_types=[".safetensors"], type="filepath")
                        build_btn = gr.Button(T("build"), variant="primary", elem_id="pg-build")
                        build_msg = gr.HTML(elem_id="pg-build-msg")
                    with gr.Column(scale=3):
                        tying_md = gr.Markdown()
                        breakdown_df = gr.Dataframe(headers=["component", "formula", "formula value", "measured", "agree"],
                                                    label=T("breakdown"), interactive=False, wrap=True)
                        treemap = gr.Plot(label="treemap", show_label=False)
                        memory_plot = gr.Plot(label="memory", show_label=False)
                        with gr.Accordion(T("kernels"), open=False):
                            kernels_md = gr.Markdown(elem_id="pg-kernels")
                        tree_depth = gr.Slider(1, 6, value=3, step=1, label=T("tree_depth"))
                        tree_df = gr.Dataframe(headers=["module", "type", "parameters (shapes)", "own", "total", "tied", "path"],
                                               label=T("tree"), interactive=False, max_height=420, wrap=True)
            with gr.Tab(T("tab_generate"), id="generate") as generate_tab:
                with gr.Row():
                    with gr.Column(scale=2, min_width=340):
                        prompt = gr.Textbox(EXAMPLES[0][0], label=T("prompt"), lines=3, max_length=20_000,
                                            elem_id="pg-prompt")
                        gr.Examples(EXAMPLES, inputs=[prompt], label=T("examples"))
                        with gr.Row():
                            temperature = gr.Slider(0, 2, value=0.8, step=0.05, label=T("temperature"))
                            top_k = gr.Slider(0, 200, value=40, step=1, label=T("top_k"))
                        with gr.Row():
                            top_p = gr.Slider(0.05, 1, value=1.0, step=0.05, label=T("top_p"))
                            max_new = gr.Slider(1, MAX_NEW_TOKENS, value=40, step=1, label=T("max_new_tokens"),
                                                elem_id="pg-max-new")
                        input_msg = gr.HTML(elem_id="pg-input-msg")
                        with gr.Row():
                            seed = gr.Number(42, label=T("seed"), min_width=100)
                            greedy = gr.Checkbox(False, label=T("greedy"))
                        with gr.Row():
                            gen_btn = gr.Button(T("generate"), variant="primary", elem_id="pg-generate")
                            stop_btn = gr.Button(T("stop"), variant="stop", elem_id="pg-stop")
                        status = gr.HTML(elem_id="pg-status")
                        gr.HTML(LEGEND)
                        chips = gr.HTML("", label=T("tokens"), elem_id="pg-chips", js_on_load=CHIPS_JS,
                                        html_template=CHIPS_TEMPLATE)
                        step_slider = gr.Slider(0, 1, value=0, step=1, label=T("step"), visible=False,
                                                elem_id="pg-step")
                        step_md = gr.Markdown(elem_id="pg-step-md")
                        prob_plot = gr.Plot(show_label=False)
                        stages_plot = gr.Plot(show_label=False)
                    with gr.Column(scale=3):
                        with gr.Row():
                            view = gr.Dropdown(av.VIEWS, value=av.VIEWS[0], label=T("view"), elem_id="pg-view")
                            log_scale = gr.Checkbox(True, label=T("log_scale"))
                        with gr.Row():
                            layer = gr.Slider(0, max(1, model_cfg.n_layers - 1), value=0, step=1, label=T("layer"),
                                              visible=model_cfg.n_layers > 1, elem_id="pg-layer")
                            head = gr.Slider(0, max(1, model_cfg.n_heads - 1), value=0, step=1, label=T("head"),
                                             visible=model_cfg.n_heads > 1, elem_id="pg-head")
                            query = gr.Slider(0, 1, value=0, step=1, label=T("query"), elem_id="pg-query")
                        head_rows, head_labels = mt.head_examples(av.VIEWS[0])
                        with gr.Column(visible=bool(head_rows)) as head_box:
                            if head_rows:
                                gr.Examples(head_rows, inputs=[prompt, view, layer, head], example_labels=head_labels,
                                            label="Heads with a pattern in the bundled model (measured; see README): "
                                                  "pick one, then Generate")
                        att_msg = gr.HTML(elem_id="pg-att-msg")
                        heatmap = gr.Plot(show_label=False, elem_id="pg-heatmap")
                        query_plot = gr.Plot(show_label=False, elem_id="pg-query-plot")
                        with gr.Row():
                            exp_json = gr.Button(T("export_json"), size="sm")
                            exp_npz = gr.Button(T("export_npz"), size="sm")
                            exp_model = gr.Button(T("export_model"), size="sm")
                        export_msg = gr.HTML()
                        # Hidden until there is something to download (an empty box only takes room).
                        export_file = gr.File(label=T("download"), interactive=False, visible=False)
                        attention_json = gr.JSON(visible=False)
                        run_json = gr.JSON(visible=False)
            with gr.Tab(T("tab_train"), id="train") as train_tab:
                with gr.Row():
                    with gr.Column(scale=2, min_width=320):
                        train_preset = gr.Dropdown(list(PRESETS), value="nano (2 layers, d64)", label=T("train_config"))
                        corpus_source = gr.Radio(tt.CORPUS_CHOICES, value=tt.CORPUS_CHOICES[0], label=T("corpus"))
                        corpus_file = gr.File(label=T("corpus_upload"), file_types=[".txt"], type="filepath")
                        corpus_paste = gr.Textbox(label=T("corpus_paste"), lines=4, max_lines=8, max_length=2_000_000)
                        with gr.Row():
                            train_steps = gr.Number(200, label=T("steps"), precision=0, minimum=1, maximum=5000)
                            train_lr = gr.Number(2e-3, label=T("lr"), minimum=0, maximum=1)
                        with gr.Row():
                            train_btn = gr.Button(T("train"), variant="primary")
                            train_stop = gr.Button(T("stop"), variant="stop")
                        use_btn = gr.Button(T("use_trained"))
                        train_msg = gr.HTML()
                    with gr.Column(scale=3):
                        train_progress = gr.HTML()
                        loss_plot = gr.Plot(show_label=False)

        # ---- wiring: Model tab ----
        model_outputs = [summary, tying_md, breakdown_df, treemap, memory_plot, tree_df, layer, head, kernels_md]
        form = [weights, preset, seed_init, hub_name, dtype] + fields
        switch_outputs = [state, build_msg] + model_outputs + form + [heatmap, chips, head_box]
        demo.load(mt.load_session, None, [state] + model_outputs + form + [head_box], api_name="load_session")
        preset.input(mt.preset_fields, preset, fields + [tying_md], api_name="preset_config")
        build_btn.click(mt.build_from_form,
                        [state, train_state, weights, seed_init, hub_name, upload, dtype] + fields, switch_outputs,
                        api_name="build_model", concurrency_id="models", concurrency_limit=2)
        tree_depth.release(mt.show_tree, [state, tree_depth], tree_df, api_name="module_tree")
        for tab in (model_tab, generate_tab, train_tab):
            tab.select(None, None, None, js=RESIZE_JS)

        # ---- wiring: Generate & attention ----
        att_outputs = [heatmap, query_plot, query, att_msg]
        step_outputs = [step_slider, prob_plot, stages_plot, step_md]
        gen_inputs = [state, prompt, temperature, top_k, top_p, max_new, seed, greedy]
        gen_outputs = [state, chips, status]
        after_inputs = [state, view, layer, head, log_scale]
        # The stream updates only chips and status; the figures follow once it ends (see generate_tab).
        for trigger, api in ((gen_btn.click, {"api_name": "generate"}), (prompt.submit, {"api_visibility": "private"})):
            # show_progress hidden: the status line says what is happening, and Gradio's own progress
            # overlay would be re-rendered on every streamed update.
            trigger(gt.generate_tokens, gen_inputs, gen_outputs, concurrency_id="generate", concurrency_limit=4,
                    show_progress="hidden", **api,
                    ).then(gt.after_run, after_inputs, att_outputs, api_visibility="private",
                           ).then(gt.last_step, state, step_outputs, api_visibility="private")
        # Stop only raises a flag: it never waits behind generation or model builds.
        stop_btn.click(gt.stop_generation, state, None, api_name="stop", concurrency_id="stop",
                       concurrency_limit=None)
        for slider, name in ((temperature, "Temperature"), (top_k, "top-k"), (top_p, "top-p"),
                             (max_new, "Max new tokens")):
            slider.input(None, slider, input_msg, js=range_note_js(name, slider.minimum, slider.maximum))
        step_slider.input(gt.inspect_step, [state, step_slider], [prob_plot, stages_plot, step_md],
                          api_name="inspect_step", trigger_mode="always_last")
        att_inputs = [state, view, layer, head, log_scale, query]
        chips.pick(gt.pick_token, state, step_outputs + [query], api_visibility="private", trigger_mode="always_last",
                   ).then(av.attention_views, att_inputs, att_outputs, api_visibility="private")
        # .input: a slider's dragging, typing in its number box and arrow keys alike (not .release).
        for control in (view, log_scale, layer, head, query):
            control.input(av.attention_views, att_inputs, att_outputs, api_visibility="private",
                          trigger_mode="always_last")
        for button, handler, api in ((exp_json, lambda s: gt.export_run_file(s, "json"), "export_run_json"),
                                     (exp_npz, lambda s: gt.export_run_file(s, "npz"), "export_run_npz"),
                                     (exp_model, gt.export_model_file, "export_model")):
            # The API returns the file's path; the page then shows the (until now hidden) download box.
            button.click(handler, state, [export_file, export_msg], api_name=api).then(
                lambda f: gr.update(visible=bool(f)), export_file, export_file, api_visibility="private")
        # API-only endpoints: raw numbers for gradio_client users.
        gr.Button(visible=False).click(av.attention_data, [state, layer, head], attention_json, api_name="attention_data")
        gr.Button(visible=False).click(gt.run_data, state, run_json, api_name="run_data")
        gr.Button(visible=False).click(av.attention_views, att_inputs, att_outputs, api_name="attention")

        # ---- wiring: Train tab ----
        # Training: one at a time on this server (it uses every core); generation keeps its own queue.
        train_btn.click(tt.train_model, [train_state, train_preset, corpus_source, corpus_file, corpus_paste,
                                         train_steps, train_lr],
                        [train_state, loss_plot, train_progress, train_msg], api_name="train",
                        concurrency_id="train", concurrency_limit=1)
        train_stop.click(tt.stop_training, train_state, train_msg, api_name="stop_training")
        use_btn.click(tt.use_trained, [state, train_state], [state, train_msg] + switch_outputs[2:],
                      api_name="use_trained")
    demo.queue(default_concurrency_limit=2, max_size=64)
    return demo


def launch_kwargs() -> dict:
    from ..session import MAX_UPLOAD_BYTES

    # Uploads larger than the checkpoint limit are refused by the server before they are stored.
    return {"i18n": I18N, "css": CSS, "footer_links": ["api", "settings"], "theme": gr.themes.Soft(),
            "max_file_size": MAX_UPLOAD_BYTES}
