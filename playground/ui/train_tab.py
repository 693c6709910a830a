"""The Train tab: train a small model on a corpus in a background thread, watch the loss live,
stop at any time keeping what was learned, then use the result in the other tabs.

Made for a lesson: the default run (nano, the bundled fables, 4 × 128 tokens a step) finishes in
about a minute on a 2-core machine; before it starts, the tab says how long the chosen run will
take, from real steps timed on this machine (``train_estimate``); and every message appears next
to the Train button.
"""

from __future__ import annotations

import html
import math
from types import SimpleNamespace

import gradio as gr

from .. import figures
from ..config import PRESETS
from ..session import CACHE, describe_recipe
from .common import T, choices, fail as _fail, ok as _ok, parse_whole, warn as _warn
from .model_tab import N_SWITCH, switch_model, switch_outputs

# The indices of "upload" (1) and "paste" (2) are what API callers and tests pass; the bundled
# text comes first as the default because it needs no network.
CORPUS_CHOICES = ["Aesop's fables & nursery rhymes (bundled, works offline)", "upload a .txt", "paste text",
                  "Tiny Shakespeare (downloaded once, then cached)"]
# Labels of the choices in the page's language (the values above stay what the API sends).
CORPUS_KEYS = dict(zip(CORPUS_CHOICES, ("c_aesop", "c_upload", "c_paste", "c_shakespeare")))
DEFAULT_PRESET = "nano (2 layers, d64)"
DEFAULT_STEPS = 80  # with DEFAULT_BATCH: about a minute on a quiet 2-core machine (README, measured)
DEFAULT_LR = 3e-3
DEFAULT_BATCH = 4  # windows of 128 tokens a step; 8 doubles the time a step takes
MAX_BATCH = 64

# Sentences built in handlers, kept together so they can be translated as a set.
MESSAGES = {
    "estimate": "About {total} on this machine: {steps:,} steps × {step} + {evals} evaluations × {eval} "
                "(from {n} real steps of this model timed on this server, {batch} × {block} tokens a step).",
    "estimate_busy": " Another training run was using the CPU while this was timed, so it is probably high.",
    "left": "about {left} left",
    "started": "Training {model} on {corpus}.",
    "started_eta": " Estimated time: {total}.",
}


def corpus_text(source, upload, pasted) -> tuple[str, str]:
    from ..corpus import load_bundled_corpus, load_tiny_shakespeare, text_from_paste, text_from_upload

    if source == CORPUS_CHOICES[1]:
        return text_from_upload(upload), "your upload"
    if source == CORPUS_CHOICES[2]:
        return text_from_paste(pasted), "pasted text"
    if source == CORPUS_CHOICES[3]:
        return load_tiny_shakespeare(), "Tiny Shakespeare"
    if source in (CORPUS_CHOICES[0], None, ""):
        return load_bundled_corpus(), "Aesop's fables & nursery rhymes"
    shown = ", ".join(f"“{c}”" for c in CORPUS_CHOICES)
    raise ValueError(f"Corpus must be one of {shown}; got {source!r}.")


def _train_config(preset_name, steps, lr, batch_size):
    from ..session import training_config

    if preset_name not in PRESETS:
        raise ValueError(f"Unknown model {preset_name!r}.")
    batch = parse_whole(batch_size, "Batch size", 1, MAX_BATCH)
    cfg = PRESETS[preset_name]
    return cfg, training_config(cfg, steps, lr, batch_size=batch)


def estimate(preset_name, steps, batch_size=DEFAULT_BATCH, *, timer=None) -> dict:
    """Seconds the run would take here, from steps of this config timed on this machine (cached per
    config and batch shape); plain numbers. ``timer`` (tests) replaces the clock of a new measurement."""
    from ..session import JOBS
    from ..train_estimate import cached_step_time, estimate_seconds, evaluations, measure_step_time

    cfg, tcfg = _train_config(preset_name, steps, DEFAULT_LR, batch_size)
    busy = any(not job.done.is_set() for job in list(JOBS.values()))
    timing = measure_step_time(cfg, tcfg, timer=timer) if timer else cached_step_time(cfg, tcfg)
    return {"seconds": estimate_seconds(timing, tcfg.steps, tcfg.eval_interval), "steps": tcfg.steps,
            "step_s": timing.step_s, "first_step_s": timing.first_step_s, "eval_s": timing.eval_s,
            "evaluations": evaluations(tcfg.steps, tcfg.eval_interval), "measured_steps": timing.n_steps + 1,
            "batch_size": tcfg.batch_size, "block_size": tcfg.block_size, "busy": busy}


def estimate_html(preset_name, steps, batch_size=DEFAULT_BATCH) -> str:
    from ..train_estimate import format_duration

    try:
        e = estimate(preset_name, steps, batch_size)
    except Exception as ex:
        return _fail(ex)
    text = MESSAGES["estimate"].format(
        total=format_duration(e["seconds"]), steps=e["steps"], step=format_duration(e["step_s"]),
        evals=e["evaluations"], eval=format_duration(e["eval_s"]), n=e["measured_steps"], batch=e["batch_size"],
        block=e["block_size"])
    if e["busy"]:
        text += MESSAGES["estimate_busy"]
    return f"<div class='pg-msg pg-estimate' data-seconds='{e['seconds']:.1f}'>{html.escape(text)}</div>"


def estimate_api(preset_name, steps, batch_size=DEFAULT_BATCH) -> dict:
    """API: the estimate as numbers ({"error": message} for bad input)."""
    try:
        return estimate(preset_name, steps, batch_size)
    except (ValueError, MemoryError) as e:
        return {"error": str(e)}


def _loss_figure(job):
    return figures.loss_curve(
        job.train_points, job.val_points, title="Loss (cross-entropy, nats): training batches and held-out tenth",
        baselines={"unigram (ignores context)": job.unigram, "uniform guess (ln V)": math.log(job.cfg.vocab_size)},
    )


def _progress_html(job) -> str:
    from ..train_estimate import format_duration

    ev = job.last_event
    step = ev.step if ev else 0
    total = job.tcfg.steps
    elapsed = ev.elapsed_s if ev else 0.0
    rate = (ev.tokens_seen / elapsed) if ev and elapsed > 0 else 0.0
    val = f" · validation loss {job.val_points[-1][1]:.3f}" if job.val_points else ""
    left = ""
    if 0 < step < total and elapsed > 0:  # at this run's own pace so far
        left = " · " + MESSAGES["left"].format(left=format_duration(elapsed / step * (total - step)))
    return (f"<progress value='{step}' max='{total}' style='width:100%;height:18px'></progress>"
            f"<div>step {step:,} / {total:,} · {ev.tokens_seen if ev else 0:,} tokens · {elapsed:.1f} s · "
            f"{rate:,.0f} tokens/s{val}{left}</div>")


def train_model(train_state, preset_name, source, upload, pasted, steps, lr, batch_size=DEFAULT_BATCH):
    """Train in a background thread and stream the loss curve; a closed tab stops the thread."""
    from ..session import JOBS, TrainingJob
    from ..train_estimate import estimate_seconds, format_duration, known_step_time

    try:
        cfg, tcfg = _train_config(preset_name, steps, lr, batch_size)
        text, name = corpus_text(source, upload, pasted)
        job = TrainingJob(cfg, text, name, steps=steps, lr=lr, batch_size=tcfg.batch_size).start()
    except Exception as e:
        yield train_state, gr.skip(), gr.skip(), _fail(e)
        return
    train_state = {"job": job.id, "recipe": None}
    message = MESSAGES["started"].format(model=preset_name, corpus=job.corpus.describe())
    timing = known_step_time(cfg, tcfg)
    if timing is not None:  # only if already measured: starting never waits for a measurement
        message += MESSAGES["started_eta"].format(total=format_duration(
            estimate_seconds(timing, job.tcfg.steps, job.tcfg.eval_interval)))
    started = _ok(message)
    try:
        while not job.done.wait(0.5):
            yield train_state, _loss_figure(job), _progress_html(job), started
    finally:
        if not job.done.is_set():
            job.stop()  # the user left or cancelled: end the thread after its current step
        JOBS.pop(job.id, None)  # also when the tab closed: the job (and its memory) can then go
    if job.error:
        yield train_state, _loss_figure(job), _progress_html(job), _warn(f"Training failed: {job.error}")
        return
    train_state = {"job": job.id, "recipe": job.result_recipe()}
    how = "Stopped" if job.stopped else "Finished"
    yield (train_state, _loss_figure(job), _progress_html(job),
           _ok(f"{how} after {job.trainer.step_count:,} steps. Press “Use the trained model” to generate with it."))


def stop_training(train_state):
    from ..session import JOBS

    job = JOBS.get((train_state or {}).get("job") or "")
    if job is None:
        return _warn("No training is running in this session.")
    job.stop()
    return _ok("Stopping after the current step; what was learned so far is kept.")


def use_trained(state, train_state):
    recipe = (train_state or {}).get("recipe")
    if not recipe:
        return (state, _warn("Train a model first (or wait for training to finish or stop).")) + (gr.skip(),) * (N_SWITCH - 2)
    try:
        model = CACHE.get(recipe)
    except Exception as e:
        return (state, _fail(e)) + (gr.skip(),) * (N_SWITCH - 2)
    return switch_model(model, recipe, _ok(f"Now using {describe_recipe(recipe)}."), state)


# ----------------------------------------------------------------------------------------------
# Layout and wiring


def new_train_state() -> dict:
    return {"job": None, "recipe": None}


def layout() -> SimpleNamespace:
    c = SimpleNamespace()
    with gr.Row():
        with gr.Column(scale=2, min_width=320):
            c.preset = gr.Dropdown(list(PRESETS), value=DEFAULT_PRESET, label=T("train_config"), elem_id="pg-train-preset")
            with gr.Row():
                c.steps = gr.Number(DEFAULT_STEPS, label=T("steps"), precision=0, minimum=1, maximum=5000,
                                    elem_id="pg-train-steps")
                c.lr = gr.Number(DEFAULT_LR, label=T("lr"), minimum=0, maximum=1)
                c.batch = gr.Number(DEFAULT_BATCH, label=T("train_batch"), precision=0, minimum=1, maximum=MAX_BATCH)
            with gr.Row():
                c.train_btn = gr.Button(T("train"), variant="primary", elem_id="pg-train")
                c.stop_btn = gr.Button(T("stop"), variant="stop")
            # Messages where the user is looking: right under the Train button.
            c.estimate = gr.HTML(elem_id="pg-train-estimate")
            c.msg = gr.HTML(elem_id="pg-train-msg")
            c.use_btn = gr.Button(T("use_trained"))
            # The corpus comes after the button: its default needs no choice, and the Train button,
            # the estimate and the messages then fit the first screen of a 1024×768 projector. Only
            # the chosen source's box is shown (an empty upload area took a third of the screen).
            c.corpus_source = gr.Radio(choices(CORPUS_KEYS), value=CORPUS_CHOICES[0], label=T("corpus"))
            c.corpus_file = gr.File(label=T("corpus_upload"), file_types=[".txt"], type="filepath", visible=False)
            c.corpus_paste = gr.Textbox(label=T("corpus_paste"), lines=4, max_lines=8, max_length=2_000_000,
                                        visible=False)
        with gr.Column(scale=3):
            c.progress = gr.HTML(elem_id="pg-train-progress")
            c.loss_plot = gr.Plot(show_label=False)
    return c


def wire(page) -> None:
    t, train_state = page.train, page.train_state
    t.corpus_source.change(lambda s: (gr.update(visible=s == CORPUS_CHOICES[1]), gr.update(visible=s == CORPUS_CHOICES[2])),
                           t.corpus_source, [t.corpus_file, t.corpus_paste], api_visibility="private")
    # The estimate: timed once per config and batch on this server (one at a time), then arithmetic;
    # first shown when the tab is opened.
    estimate_inputs = [t.preset, t.steps, t.batch]
    for trigger in (t.preset.change, t.steps.change, t.batch.change, page.train_tab.select):
        trigger(estimate_html, estimate_inputs, t.estimate, api_visibility="private", concurrency_id="estimate",
                concurrency_limit=1, trigger_mode="always_last", show_progress="minimal")
    gr.Button(visible=False).click(estimate_api, estimate_inputs, gr.JSON(visible=False), api_name="train_estimate",
                                   concurrency_id="estimate", concurrency_limit=1)
    # Training: one at a time on this server (it uses every core); generation keeps its own queue.
    t.train_btn.click(train_model, [train_state, t.preset, t.corpus_source, t.corpus_file, t.corpus_paste, t.steps, t.lr,
                                    t.batch],
                      [train_state, t.loss_plot, t.progress, t.msg], api_name="train",
                      concurrency_id="train", concurrency_limit=1)
    t.stop_btn.click(stop_training, train_state, t.msg, api_name="stop_training")
    t.use_btn.click(use_trained, [page.state, train_state], [page.state, t.msg] + switch_outputs(page)[2:],
                    api_name="use_trained")
