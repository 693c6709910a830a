"""The Train tab: train a small model on a corpus in a background thread, watch the loss live,
stop at any time keeping what was learned, then use the result in the other tabs."""

from __future__ import annotations

import math
from types import SimpleNamespace

import gradio as gr

from .. import figures
from ..config import PRESETS
from ..session import CACHE, describe_recipe
from .common import T, choices, dress, fail as _fail, lang_of, ok as _ok, tr, warn as _warn
from .model_tab import N_SWITCH, switch_model, switch_outputs

CORPUS_KEYS = {"Tiny Shakespeare (downloaded once, then cached)": "c_shakespeare", "upload a .txt": "c_upload",
               "paste text": "c_paste"}
CORPUS_CHOICES = list(CORPUS_KEYS)  # the values (what the API sends); labels follow the language


def corpus_text(source, upload, pasted) -> tuple[str, str]:
    from ..corpus import load_tiny_shakespeare, text_from_paste, text_from_upload

    if source == CORPUS_CHOICES[1]:
        return text_from_upload(upload), "your upload"
    if source == CORPUS_CHOICES[2]:
        return text_from_paste(pasted), "pasted text"
    return load_tiny_shakespeare(), "Tiny Shakespeare"


def _loss_figure(job, train_state=None):
    lang, present = lang_of(train_state), bool((train_state or {}).get("present"))
    return dress(figures.loss_curve(
        job.train_points, job.val_points, title=tr(lang, "fig_loss"),
        baselines={tr(lang, "base_unigram"): job.unigram, tr(lang, "base_uniform"): math.log(job.cfg.vocab_size)},
    ), lang, present)


def _progress_html(job, lang="en") -> str:
    ev = job.last_event
    step = ev.step if ev else 0
    total = job.tcfg.steps
    elapsed = ev.elapsed_s if ev else 0.0
    rate = (ev.tokens_seen / elapsed) if ev and elapsed > 0 else 0.0
    val = tr(lang, "val_loss", loss=f"{job.val_points[-1][1]:.3f}") if job.val_points else ""
    text = tr(lang, "train_progress", step=f"{step:,}", total=f"{total:,}", tokens=f"{ev.tokens_seen if ev else 0:,}",
              elapsed=f"{elapsed:.1f}", rate=f"{rate:,.0f}", val=val)
    return f"<progress value='{step}' max='{total}' style='width:100%;height:18px'></progress><div>{text}</div>"


def train_model(train_state, preset_name, source, upload, pasted, steps, lr):
    """Train in a background thread and stream the loss curve; a closed tab stops the thread."""
    from ..session import JOBS, TrainingJob

    lang = lang_of(train_state)
    keep = {k: v for k, v in (train_state or {}).items() if k in ("lang", "present")}  # the page's, not the job's
    try:
        if preset_name not in PRESETS:
            raise ValueError(tr(lang, "unknown_model", name=preset_name))
        text, name = corpus_text(source, upload, pasted)
        job = TrainingJob(PRESETS[preset_name], text, name, steps=steps, lr=lr).start()
    except Exception as e:
        yield train_state, gr.skip(), gr.skip(), _fail(e, lang)
        return
    train_state = {**keep, "job": job.id, "recipe": None}
    c = job.corpus
    corpus = tr(lang, "corpus_desc", name=tr(lang, c.name), chars=f"{c.n_chars:,}", tokens=f"{c.n_tokens:,}",
                train=f"{len(c.train_ids):,}", val=f"{len(c.val_ids):,}")
    started = _ok(tr(lang, "training", model=preset_name, corpus=corpus))
    try:
        while not job.done.wait(0.5):
            yield train_state, _loss_figure(job, train_state), _progress_html(job, lang), started
    finally:
        if not job.done.is_set():
            job.stop()  # the user left or cancelled: end the thread after its current step
        JOBS.pop(job.id, None)  # also when the tab closed: the job (and its memory) can then go
    if job.error:
        yield (train_state, _loss_figure(job, train_state), _progress_html(job, lang),
               _warn(tr(lang, "train_failed", error=job.error)))
        return
    train_state = {**keep, "job": job.id, "recipe": job.result_recipe()}
    yield (train_state, _loss_figure(job, train_state), _progress_html(job, lang),
           _ok(tr(lang, "train_stopped" if job.stopped else "train_finished", n=f"{job.trainer.step_count:,}")))


def stop_training(train_state):
    from ..session import JOBS

    lang = lang_of(train_state)
    job = JOBS.get((train_state or {}).get("job") or "")
    if job is None:
        return _warn(tr(lang, "no_training"))
    job.stop()
    return _ok(tr(lang, "stopping"))


def use_trained(state, train_state):
    lang = lang_of(state)
    recipe = (train_state or {}).get("recipe")
    if not recipe:
        return (state, _warn(tr(lang, "train_first"))) + (gr.skip(),) * (N_SWITCH - 2)
    try:
        model = CACHE.get(recipe)
    except Exception as e:
        return (state, _fail(e, lang)) + (gr.skip(),) * (N_SWITCH - 2)
    return switch_model(model, recipe, _ok(tr(lang, "now_using", model=describe_recipe(recipe, lang))), state)


# ----------------------------------------------------------------------------------------------
# Layout and wiring


def new_train_state() -> dict:
    return {"job": None, "recipe": None, "lang": "en"}


def layout() -> SimpleNamespace:
    c = SimpleNamespace()
    with gr.Row():
        with gr.Column(scale=2, min_width=320):
            c.preset = gr.Dropdown(list(PRESETS), value="nano (2 layers, d64)", label=T("train_config"))
            c.corpus_source = gr.Radio(choices(CORPUS_KEYS), value=CORPUS_CHOICES[0], label=T("corpus"))
            c.corpus_file = gr.File(label=T("corpus_upload"), file_types=[".txt"], type="filepath")
            c.corpus_paste = gr.Textbox(label=T("corpus_paste"), lines=4, max_lines=8, max_length=2_000_000)
            with gr.Row():
                c.steps = gr.Number(200, label=T("steps"), precision=0, minimum=1, maximum=5000)
                c.lr = gr.Number(2e-3, label=T("lr"), minimum=0, maximum=1)
            with gr.Row():
                c.train_btn = gr.Button(T("train"), variant="primary")
                c.stop_btn = gr.Button(T("stop"), variant="stop")
            c.use_btn = gr.Button(T("use_trained"))
            c.msg = gr.HTML()
        with gr.Column(scale=3):
            c.progress = gr.HTML()
            c.loss_plot = gr.Plot(show_label=False)
    return c


def wire(page) -> None:
    t, train_state = page.train, page.train_state
    # Training: one at a time on this server (it uses every core); generation keeps its own queue.
    t.train_btn.click(train_model, [train_state, t.preset, t.corpus_source, t.corpus_file, t.corpus_paste, t.steps, t.lr],
                      [train_state, t.loss_plot, t.progress, t.msg], api_name="train",
                      concurrency_id="train", concurrency_limit=1)
    t.stop_btn.click(stop_training, train_state, t.msg, api_name="stop_training")
    t.use_btn.click(use_trained, [page.state, train_state], [page.state, t.msg] + switch_outputs(page)[2:],
                    api_name="use_trained")
