"""The Model tab's components and their events (its handlers are in ``tab``)."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from playground.server.catalog import (
    ACTIVATIONS,
    ATTENTION_IMPLS,
    DEFAULT_PRESET,
    FEED_FORWARDS,
    HUB_MODELS,
    NORM_PLACEMENTS,
    NORMS,
    POS_ENCODINGS,
    PRESETS,
)
from playground.server.recipes import BUNDLED_CHECKPOINT
from playground.ui import listeners
from playground.ui.common import T, choices, seed_box
from playground.ui.model_switch import DTYPES, FIELDS, WEIGHT_KEYS, hub_choices, preset_choices, switch_outputs
from playground.ui.results import outputs
from playground.ui.widgets import Dropdown, Number, Radio, Slider

from . import side_by_side
from .tab import (
    Loaded,
    PresetFields,
    Relabelled,
    build_from_form,
    in_use,
    in_use_again,
    load_session,
    preset_fields,
    relabel,
    relabelled_again,
    show_tree,
)


def layout() -> SimpleNamespace:
    """The form and the model's figures side by side, then the two tables at full width (their
    columns never fit beside the form on a 1024-pixel projector)."""
    cfg = PRESETS[DEFAULT_PRESET]  # the form starts here; load_session fills in the real model
    c = SimpleNamespace()
    with gr.Row():
        with gr.Column(scale=2, min_width=300):
            c.in_use = gr.Markdown(elem_id="pg-model-in-use")
            c.weights = Radio(
                choices(WEIGHT_KEYS),
                label=T("weights"),
                value="bundled" if BUNDLED_CHECKPOINT.is_file() else "random",
                elem_id="pg-weights",
            )
            # Shown only for the weights they belong to (an empty upload box only takes room).
            # A hub model, or the path of a GPT-2 folder on the server (recipes.folder_recipe) typed in.
            c.hub_name = Dropdown(
                hub_choices(),
                value=list(HUB_MODELS)[0],
                label=T("hub_model"),
                info=T("hub_folder_info"),
                allow_custom_value=True,
                visible=False,
                elem_id="pg-hub-name",
            )
            c.upload = gr.File(
                label=T("upload"), file_types=[".safetensors"], type="filepath", visible=False, height=140
            )
            c.preset = Dropdown(preset_choices(), value=DEFAULT_PRESET, label=T("preset"), elem_id="pg-preset")
            with gr.Accordion(T("config_fields"), open=False, elem_classes=["pg-advanced"]):
                # Integers are checked by the handler (2.5 layers is refused and said), not rounded by the widget.
                c.fields = [
                    Number(cfg.vocab_size, label=T("vocab_size")),
                    Number(cfg.context_length, label=T("context_length")),
                    Number(cfg.emb_dim, label=T("emb_dim")),
                    Number(cfg.n_heads, label=T("n_heads")),
                    Number(cfg.n_layers, label=T("n_layers")),
                    Number(cfg.drop_rate, label=T("drop_rate")),
                    gr.Checkbox(cfg.qkv_bias, label=T("qkv_bias")),
                    gr.Checkbox(cfg.tie_weights, label=T("tie_weights")),
                    Dropdown(list(POS_ENCODINGS), value=cfg.pos_encoding, label=T("pos_encoding")),
                    Dropdown(list(ACTIVATIONS), value=cfg.activation, label=T("activation")),
                    Dropdown(list(NORM_PLACEMENTS), value=cfg.norm_placement, label=T("norm_placement")),
                    Dropdown(list(ATTENTION_IMPLS), value=cfg.attention_impl, label=T("attention_impl")),
                    # What changed since GPT-2 (issue 38): each switch alone or together; 0 means "as GPT-2".
                    Dropdown(list(NORMS), value=cfg.norm, label=T("norm"), elem_id="pg-f-norm"),
                    Dropdown(list(FEED_FORWARDS), value=cfg.ff, label=T("ff"), elem_id="pg-f-ff"),
                    Number(cfg.ff_hidden_dim, label=T("ff_hidden_dim"), elem_id="pg-f-ff-hidden"),
                    Number(cfg.n_kv_heads, label=T("n_kv_heads"), elem_id="pg-f-kv-heads"),
                    Number(cfg.fixed_head_dim, label=T("fixed_head_dim"), elem_id="pg-f-head-dim"),
                    Number(cfg.rope_theta, label=T("rope_theta"), elem_id="pg-f-rope-theta"),
                    gr.Checkbox(cfg.qk_norm, label=T("qk_norm"), elem_id="pg-f-qk-norm"),
                    Number(cfg.sliding_window, label=T("sliding_window"), elem_id="pg-f-window"),
                    gr.Checkbox(cfg.bias, label=T("bias"), elem_id="pg-f-bias"),
                    Number(cfg.ln_eps, label=T("ln_eps"), elem_id="pg-f-ln-eps"),
                ]
            with gr.Row(elem_classes=["pg-advanced"]):
                c.seed_init = seed_box(0, T("seed_init"), min_width=100)
                c.dtype = Radio(list(DTYPES), value="float32", label=T("dtype"), info=T("dtype_info"), min_width=200)
            c.build_btn = gr.Button(T("build"), variant="secondary", elem_id="pg-build")
            c.build_msg = gr.HTML(elem_id="pg-build-msg")
            c.tying_md = gr.Markdown(elem_id="pg-tying")
        with gr.Column(scale=3, min_width=300):
            c.treemap = gr.Plot(label="treemap", show_label=False)
            c.memory_plot = gr.Plot(label="memory", show_label=False)
    c.breakdown_df = gr.Dataframe(
        headers=["component", "formula", "formula value", "measured", "agree"],
        label=T("breakdown"),
        interactive=False,
        wrap=True,
        elem_id="pg-breakdown",
        column_widths=["18%", "42%", "15%", "15%", "10%"],
    )
    with gr.Accordion(T("kernels"), open=False, elem_classes=["pg-advanced"]):
        c.kernels_md = gr.Markdown(elem_id="pg-kernels")
    c.tree_depth = Slider(1, 6, value=3, step=1, label=T("tree_depth"), elem_classes=["pg-advanced"])
    c.tree_df = gr.Dataframe(
        headers=["module", "type", "parameters (shapes)", "own", "total", "tied", "path"],
        label=T("tree"),
        interactive=False,
        max_height=420,
        wrap=True,
        elem_id="pg-tree",
        # Names and numbers never break inside (a 1024-px projector fits "drop_shortcut" three levels
        # deep, "MultiHeadAttention" and "124,439,808" in 14-px type); shapes, ties and paths wrap.
        column_widths=["18.5%", "18.5%", "13%", "10.5%", "11.5%", "10%", "18%"],
    )
    c.sbs = side_by_side.layout()  # GPT-2 ↔ a variant, any two presets (issue 38)
    for name, field in zip(FIELDS, c.fields):  # each also by its name: results name their outputs
        setattr(c, name, field)
    c.form = [c.weights, c.preset, c.seed_init, c.hub_name, c.dtype] + c.fields
    return c


def weight_inputs(weights):
    """The hub choice and the upload box, each shown only with its own kind of weights."""
    return gr.update(visible=weights == "hub"), gr.update(visible=weights == "upload")


def wire(page) -> None:
    m = page.model
    # (a classroom room's join or start is chained after it: the room's poll takes the teacher's model
    # into the page's session, which this load would otherwise replace with a new one)
    page.session_loaded = page.demo.load(
        load_session, None, outputs(Loaded, page, m, page.generate), api_name="load_session"
    )
    page.session_loaded.then(
        in_use, page.state, m.in_use, api_visibility="private"
    )  # what is loaded, kept current: after the first load, a build, and whenever the tab opens
    page.model_tab.select(in_use, page.state, m.in_use, api_visibility="private")
    m.preset.input(preset_fields, [m.preset, page.state], outputs(PresetFields, m), api_name="preset_config")
    # (kept for a classroom room: the teacher's new model published after it, lessons.room_follow)
    m.room_built = m.build_btn.click(
        build_from_form,
        [page.state, page.train_state, m.weights, m.seed_init, m.hub_name, m.upload, m.dtype] + m.fields,
        switch_outputs(page, m.build_msg),
        api_name="build_model",
        concurrency_id="models",
        concurrency_limit=2,
    )
    m.room_built.then(in_use, page.state, m.in_use, api_visibility="private")
    m.tree_depth.release(show_tree, [page.state, m.tree_depth], m.tree_df, api_name="module_tree")
    side_by_side.wire(page, m.sbs)
    m.weights.change(weight_inputs, m.weights, [m.hub_name, m.upload], api_visibility="private", queue=False)
    relabelled = outputs(Relabelled, page, m)
    listeners.on_change(page, relabel, [m.tree_depth], relabelled, then=(relabelled_again, [m.tree_depth], relabelled))
    listeners.on_change(page, in_use, [], [m.in_use], then=(in_use_again, [], [m.in_use]))
