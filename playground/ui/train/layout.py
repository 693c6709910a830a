"""The Train tab's components and their events (its handlers are in ``tab`` and ``settings``).

The model and the corpus come before the Train button, the estimate and the messages right under
it, the progress and the loss curve beside them. Every event has an ``api_name`` or is marked private.
"""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from playground.server.training_inputs import induction_run
from playground.ui import listeners
from playground.ui.common import T, choices
from playground.ui.model_switch import preset_choices, switch_outputs
from playground.ui.results import outputs
from playground.ui.widgets import Dropdown, Number, Slider

from .heads_run import watch_heads
from .heads_view import heads_estimate_html, scrub_view, scrubber_for, scrubber_for_induction, timeline_api
from .settings import (
    CORPUS_CHOICES,
    CORPUS_KEYS,
    DEFAULT_BATCH,
    DEFAULT_LR,
    DEFAULT_PRESET,
    DEFAULT_STEPS,
    MAX_BATCH,
    estimate_api,
    estimate_html,
)
from .tab import Relabelled, Trained, relabel, stop_training, train_model, use_trained


def layout() -> SimpleNamespace:
    c = SimpleNamespace()
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            # The model and the corpus are chosen before Train is pressed, so they come before the
            # button, one above the other (a dropdown shows its choice on one line: side by side, a
            # 1024-px projector cut them) with the three numbers in one row: the button and the
            # estimate then still fit the first screen of a 1024×768 projector. Only the chosen
            # source's box is shown (an empty upload area took a third of the screen).
            c.preset = Dropdown(
                preset_choices()[:-1], value=DEFAULT_PRESET, label=T("train_config"), elem_id="pg-train-preset"
            )
            c.corpus_source = Dropdown(
                choices(CORPUS_KEYS), value=CORPUS_CHOICES[0], label=T("corpus"), elem_id="pg-train-corpus"
            )
            with gr.Row():
                c.steps = Number(
                    DEFAULT_STEPS,
                    label=T("steps"),
                    precision=0,
                    minimum=1,
                    maximum=5000,
                    elem_id="pg-train-steps",
                    min_width=110,
                )
                c.lr = Number(DEFAULT_LR, label=T("lr"), minimum=0, maximum=1, min_width=110)
                c.batch = Number(
                    DEFAULT_BATCH, label=T("train_batch"), precision=0, minimum=1, maximum=MAX_BATCH, min_width=110
                )
            c.corpus_file = gr.File(label=T("corpus_upload"), file_types=[".txt"], type="filepath", visible=False)
            c.corpus_paste = gr.Textbox(
                label=T("corpus_paste"), lines=4, max_lines=8, max_length=2_000_000, visible=False
            )
            with gr.Row():
                c.train_btn = gr.Button(T("train"), variant="primary", elem_id="pg-train")
                c.stop_btn = gr.Button(T("stop"), variant="stop", elem_id="pg-train-stop")
            # Messages where the user is looking: right under the Train button.
            c.estimate = gr.HTML(elem_id="pg-train-estimate")
            c.msg = gr.HTML(elem_id="pg-train-msg")
            c.use_btn = gr.Button(T("use_trained"))
            # The induction-head run: its own model, text and mix (below Train's estimate and messages,
            # which stay on a projector's first screen); its time is measured when the tab opens.
            c.heads_btn = gr.Button(T("heads_watch"), variant="secondary", elem_id="pg-train-heads")
            c.heads_estimate = gr.HTML(elem_id="pg-heads-estimate")
        with gr.Column(scale=1):
            c.progress = gr.HTML(elem_id="pg-train-progress")
            c.loss_plot = gr.Plot(show_label=False, elem_id="pg-train-loss")
            # What the model writes from one prompt and seed: before, now or after, and at each logged step.
            # (its note before any run is written in the page's language by the tab's relabel)
            c.samples = gr.HTML(elem_id="pg-train-samples")
    # (shown when a run starts: before, a slider and two empty plots would say nothing)
    with gr.Row(visible=False) as c.heads_row:
        with gr.Column(scale=1):
            # Every head's scores on the probe, live, the phase change marked (train_heads_view).
            c.heads_plot = gr.Plot(show_label=False, elem_id="pg-train-heads-plot")
        with gr.Column(scale=1):
            with gr.Row():
                c.heads_step = Slider(
                    0,
                    induction_run.STEPS,
                    value=0,
                    step=induction_run.WATCH_EVERY,
                    label=T("heads_step"),
                    elem_id="pg-train-heads-step",
                )
                c.heads_pick = Dropdown([], label=T("heads_head"), elem_id="pg-train-heads-pick", min_width=110)
            c.heads_map = gr.Plot(show_label=False, elem_id="pg-train-heads-map")
            c.heads_facts = gr.HTML(elem_id="pg-train-heads-facts")
    return c


def wire(page) -> None:
    t, train_state = page.train, page.train_state
    t.corpus_source.change(
        lambda s: (gr.update(visible=s == CORPUS_CHOICES[1]), gr.update(visible=s == CORPUS_CHOICES[2])),
        t.corpus_source,
        [t.corpus_file, t.corpus_paste],
        api_visibility="private",
    )
    # The estimate: timed once per config and batch on this server (one at a time), then arithmetic;
    # first shown when the tab is opened.
    estimate_inputs = [t.preset, t.steps, t.batch]
    for trigger in (t.preset.change, t.steps.change, t.batch.change, page.train_tab.select):
        trigger(
            estimate_html,
            estimate_inputs + [page.state],
            t.estimate,
            api_visibility="private",
            concurrency_id="estimate",
            concurrency_limit=1,
            trigger_mode="always_last",
            show_progress="minimal",
        )
    gr.Button(visible=False).click(
        estimate_api,
        estimate_inputs,
        gr.JSON(visible=False),
        api_name="train_estimate",
        concurrency_id="estimate",
        concurrency_limit=1,
    )
    # Training: the server's own queue (playground.server.jobs.QUEUE) lets a few runs train at once and
    # tells the others their place, so every request gets its handler at once; generation keeps its own.
    t.train_btn.click(
        train_model,
        [train_state, t.preset, t.corpus_source, t.corpus_file, t.corpus_paste, t.steps, t.lr, t.batch, page.state],
        outputs(Trained, t, train_state=train_state),
        api_name="train",
        concurrency_id="train",
        concurrency_limit=None,
    )
    listeners.on_change(page, relabel, [train_state] + estimate_inputs + [t.estimate], outputs(Relabelled, t))
    t.stop_btn.click(stop_training, train_state, t.msg, api_name="stop_training")
    t.train_btn.click(
        scrubber_for,
        [t.preset, t.steps],
        [t.heads_step, t.heads_pick, t.heads_row],
        api_visibility="private",
        queue=False,
    )
    scrubber = [t.heads_step, t.heads_pick, t.heads_row]
    t.heads_btn.click(scrubber_for_induction, None, scrubber, api_visibility="private", queue=False)
    t.heads_btn.click(
        watch_heads,
        [train_state, page.state],
        outputs(Trained, t, train_state=train_state),
        api_name="train_watch_heads",
        concurrency_id="train",
        concurrency_limit=None,
    )
    page.train_tab.select(
        heads_estimate_html,
        [page.state],
        t.heads_estimate,
        api_visibility="private",
        concurrency_id="estimate",
        concurrency_limit=1,
        trigger_mode="always_last",
        show_progress="minimal",
    )
    # The scrubber: a moved slider (or a step typed in its box) or a picked head draws that step's map.
    for trigger in (t.heads_step.change, t.heads_pick.change):
        trigger(
            scrub_view,
            [train_state, t.heads_step, t.heads_pick],
            [t.heads_map, t.heads_facts],
            api_visibility="private",
            trigger_mode="always_last",
            concurrency_id="heads_scrub",
            concurrency_limit=4,
        )
    gr.Button(visible=False).click(
        scrub_view, [train_state, t.heads_step, t.heads_pick], [t.heads_map, t.heads_facts], api_name="train_heads_map"
    )
    gr.Button(visible=False).click(timeline_api, [train_state], gr.JSON(visible=False), api_name="train_heads")
    t.use_btn.click(use_trained, [page.state, train_state], switch_outputs(page, t.msg), api_name="use_trained")
