"""The Score & compare tab's components and their events (its handlers are in ``tab``).

Model B's form, then the score, side-by-side, receipt and replay sections. Every action has an
``api_name``; a shared link's query parameters fill the Generate tab on page load (``share``).
"""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from playground.server.catalog import DEFAULT_PRESET, HUB_MODELS, PRESETS
from playground.ui import listeners, share
from playground.ui import model_switch as ms
from playground.ui.common import T, choices, lang_of, seed_box
from playground.ui.results import outputs
from playground.ui.widgets import Dropdown, Number, Radio, Slider

from . import views as cv
from .streams import Streams
from .tab import (
    SOURCE_KEYS,
    SOURCES,
    Scored,
    export_replay,
    generate_two_models,
    generate_two_settings,
    load_model_b,
    redraw_views,
    replay_file,
    score_a,
    score_ab,
    show_receipt,
)


def layout() -> SimpleNamespace:
    """Model B's form, then the score, side-by-side, receipt and replay sections."""
    c = SimpleNamespace()
    c.cmp_state = gr.State({"recipe": None})
    gr.Markdown(T("compare_intro"))
    with gr.Accordion(T("model_b"), open=False):
        with gr.Row():
            c.b_weights = Radio(choices(ms.WEIGHT_KEYS), value="random", label=T("weights"))
            c.b_preset = Dropdown(
                ms.preset_choices()[:-1],  # presets only: model B has no form of its own
                value="nano" if "nano" in PRESETS else DEFAULT_PRESET,
                label=T("preset"),
            )
        with gr.Row():
            c.b_seed = seed_box(0, T("seed_init"), min_width=100)
            c.b_hub = Dropdown(ms.hub_choices(), value=list(HUB_MODELS)[0], label=T("hub_model"))
            c.b_dtype = Radio(list(ms.DTYPES), value="float32", label=T("dtype"))
        c.b_upload = gr.File(label=T("upload"), file_types=[".safetensors"], type="filepath")
        c.b_btn = gr.Button(T("load_b"), elem_id="pg-load-b")
        c.b_msg = gr.HTML(elem_id="pg-b-msg")
    with gr.Accordion(T("score_section"), open=True):
        with gr.Row():
            with gr.Column(scale=2, min_width=320):
                c.source = Radio(choices(SOURCE_KEYS), value=SOURCES[0], label=T("text_source"))
                c.text = gr.Textbox(label=T("text_to_score"), lines=5, max_length=200_000, elem_id="pg-score-text")
                # only the chosen source's input shows (the text box for "paste", this for "upload")
                c.upload = gr.File(
                    label=T("text_upload"),
                    file_types=[".txt"],
                    type="filepath",
                    visible=False,
                    elem_id="pg-score-upload",
                )
                with gr.Row():
                    c.replace = gr.Checkbox(False, label=T("replace_bytes"), visible=False, elem_id="pg-score-replace")
                    c.stride = Number(0, label=T("stride"), precision=0, minimum=0)
                with gr.Row():
                    c.score_btn = gr.Button(T("score_a"), variant="primary", elem_id="pg-score")
                    c.score_ab_btn = gr.Button(T("score_ab"), elem_id="pg-score-ab")
                c.score_msg = gr.HTML(elem_id="pg-score-msg")
            with gr.Column(scale=3):
                c.legend = gr.HTML(cv.surprisal_legend())
                c.chips_a = gr.HTML(elem_id="pg-score-a")
                c.chips_b = gr.HTML(elem_id="pg-score-b")
                c.diff = gr.HTML(elem_id="pg-score-diff")
                c.figure = gr.Plot(show_label=False, elem_id="pg-score-plot")
                c.score_json = gr.JSON(visible=False)
        # Full width: in the left column its six columns broke words letter by letter ("perp|lexit|y").
        c.table = gr.Markdown(elem_id="pg-score-table")
    with gr.Accordion(T("side_section"), open=True):
        with gr.Row():
            c.s_prompt = gr.Textbox("ROMEO:\n", label=T("prompt"), lines=2, scale=3)
            c.s_seed = seed_box(42, T("seed"), min_width=100)
            c.s_max = Slider(
                1,
                value=40,
                step=1,
                label=T("max_new_tokens"),
                elem_id="pg-side-max",
                scale=2,
                min_width=240,
            )  # (narrower, its label wrapped to five lines)
        with gr.Row():
            c.t_a = Slider(0, 2, value=0.7, step=0.05, label=T("temp_a"))
            c.k_a = Slider(0, 200, value=0, step=1, label=T("top_k_a"))
            c.p_a = Slider(0.05, 1, value=1.0, step=0.05, label=T("top_p_a"))
        with gr.Row():
            c.t_b = Slider(0, 2, value=1.5, step=0.05, label=T("temp_b"))
            c.k_b = Slider(0, 200, value=0, step=1, label=T("top_k_b"))
            c.p_b = Slider(0.05, 1, value=1.0, step=0.05, label=T("top_p_b"))
        with gr.Row():
            c.two_models_btn = gr.Button(T("two_models"), elem_id="pg-two-models")
            c.two_settings_btn = gr.Button(T("two_settings"), variant="primary", elem_id="pg-two-settings")
        c.side_msg = gr.HTML(elem_id="pg-side-msg")
        c.side = gr.HTML(elem_id="pg-side")
    with gr.Accordion(T("receipt_section"), open=False):
        with gr.Row():
            c.r_step = Number(0, label=T("step"), precision=0, minimum=0)
            c.r_btn = gr.Button(T("show_receipt"), elem_id="pg-receipt-btn")
        c.r_html = gr.HTML(elem_id="pg-receipt")
        c.r_json = gr.JSON(visible=False)
    with gr.Accordion(T("replay_section"), open=False):
        with gr.Row():
            with gr.Column():
                c.r_file = gr.File(
                    label=T("replay_upload"), file_types=[".json", ".npz"], type="filepath", elem_id="pg-replay-file"
                )
                c.replay_btn = gr.Button(T("replay"), elem_id="pg-replay")
                c.replay_out = gr.HTML(elem_id="pg-replay-msg")
                c.replay_json = gr.JSON(visible=False)
            with gr.Column():
                c.export_btn = gr.Button(T("export_replay"))
                c.export_msg = gr.HTML()
                c.export_out = gr.File(label=T("download"), interactive=False, elem_id="pg-export-file")
                c.link_btn = gr.Button(T("share_link"))
                c.link = gr.Textbox(label=T("link"), buttons=["copy"], interactive=False, elem_id="pg-share-link")
    return c


# The text box for "paste", the file box (and its decoding choice) for "upload", neither for "the
# current run": set in the page at once, no server round trip.
SHOW_CHOSEN_SOURCE_JS = (
    f"(source) => [{{__type__: 'update', visible: source === '{SOURCES[0]}'}},"
    f" {{__type__: 'update', visible: source === '{SOURCES[1]}'}},"
    f" {{__type__: 'update', visible: source === '{SOURCES[1]}'}}]"
)


def wire(page) -> None:
    """Every action has an api_name. A link's query parameters fill the Generate tab on page load."""
    c, state, g = page.compare, page.state, page.generate
    # Its choice labels follow the page's language like the Model tab's (values stay the API's).
    # The score legend and the text source's choices too.
    listeners.on_change(
        page,
        lambda st: (
            gr.update(choices=choices(ms.WEIGHT_KEYS, lang_of(st))),
            cv.surprisal_legend(lang_of(st)),
            gr.update(choices=choices(SOURCE_KEYS, lang_of(st))),
            gr.update(choices=ms.preset_choices(lang_of(st))[:-1]),
            gr.update(choices=ms.hub_choices(lang_of(st))),
        ),
        [],
        [c.b_weights, c.legend, c.source, c.b_preset, c.b_hub],
    )
    listeners.on_change(
        page,
        redraw_views,
        [],
        [
            c.b_msg,
            c.score_msg,
            c.table,
            c.chips_a,
            c.chips_b,
            c.diff,
            c.figure,
            c.side_msg,
            c.side,
            c.r_html,
            c.replay_out,
            c.export_msg,
        ],
    )
    c.b_btn.click(
        load_model_b,
        [c.cmp_state, page.train_state, c.b_weights, c.b_preset, c.b_seed, c.b_hub, c.b_upload, c.b_dtype],
        [c.cmp_state, c.b_msg],
        api_name="second_model",
        concurrency_id="models",
        concurrency_limit=2,
    )
    c.source.change(None, c.source, [c.text, c.upload, c.replace], js=SHOW_CHOSEN_SOURCE_JS)
    score_inputs = [state, c.cmp_state, c.source, c.text, c.upload, c.replace, c.stride]
    score_outputs = outputs(Scored, c)
    c.score_btn.click(
        score_a, score_inputs, score_outputs, api_name="score_text", concurrency_id="score", concurrency_limit=2
    )
    c.score_ab_btn.click(
        score_ab, score_inputs, score_outputs, api_name="score_compare", concurrency_id="score", concurrency_limit=2
    )
    c.two_models_btn.click(
        generate_two_models,
        [state, c.cmp_state, c.s_prompt, c.s_seed, c.s_max, c.t_a, c.k_a, c.p_a],
        outputs(Streams, c),
        api_name="generate_two_models",
        concurrency_id="generate",
        concurrency_limit=4,
        show_progress="hidden",
    )
    c.two_settings_btn.click(
        generate_two_settings,
        [state, c.s_prompt, c.s_seed, c.s_max, c.t_a, c.k_a, c.p_a, c.t_b, c.k_b, c.p_b],
        outputs(Streams, c),
        api_name="generate_two_settings",
        concurrency_id="generate",
        concurrency_limit=4,
        show_progress="hidden",
    )
    c.r_btn.click(show_receipt, [state, c.r_step], [c.r_html, c.r_json], api_name="sampling_receipt")
    c.replay_btn.click(
        replay_file,
        [state, c.r_file],
        [c.replay_out, c.replay_json],
        api_name="replay",
        # Replays queue among themselves, one at a time: never in the slots other users' Generate needs.
        concurrency_id="replay",
        concurrency_limit=1,
    )
    c.export_btn.click(export_replay, state, [c.export_out, c.export_msg], api_name="export_replay")
    gen_controls = [getattr(g, name) for name in share.ORDER]
    c.link_btn.click(share.share_link, gen_controls, c.link, api_name="share_link")
    # A separate load event from the Model tab's load_session: it only touches the Generate controls.
    page.demo.load(share.prefill_from_url, None, outputs(share.Prefill, g, page), api_visibility="private")
