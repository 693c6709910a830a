"""The Train tab's handlers: a background training run with a live loss curve, its heads and its samples.

The Train tab: train a small model on a corpus in a background thread, watch the loss live,
stop at any time keeping what was learned, then use the result in the other tabs.

Made for a lesson: the default run (nano, the bundled fables, 4 × 128 tokens a step) finishes in
about a minute on a 2-core machine; before it starts, the tab says how long the chosen run will
take (train_settings, which also parses the run's settings); and every message appears next
to the Train button.
"""

from __future__ import annotations

import math

import gradio as gr

from playground import figures
from playground.server.jobs import (
    JOBS,
    QUEUE,
    TrainingJob,
    max_trainings,
    time_limit_seconds,
)
from playground.server.training_inputs import estimate as train_estimate
from playground.server.training_inputs import overfitting
from playground.ui import redraw
from playground.ui.common import choices, dress, empty, for_the_session, lang_of, leased_model, tr
from playground.ui.common import fail as _fail
from playground.ui.common import ok as _ok
from playground.ui.common import warn as _warn
from playground.ui.model_switch import Switch, preset_choices, switch_model
from playground.ui.model_words import describe_recipe
from playground.ui.results import only, result

from . import heads_view
from .samples_view import samples as _samples
from .samples_view import samples_again
from .settings import CORPUS_KEYS, DEFAULT_BATCH, corpus_text, duration, estimate_html, train_config

# Sentences built in handlers: their keys in translations.py (EN and ZH), read with tr(lang, key).
MESSAGES = {
    "left": "est_left",
    "started": "training",
    "started_eta": "started_eta",
}
# Names of the corpora as the messages say them (keys of translations.py).
CORPUS_NAMES = {
    "your upload": "your upload",
    "pasted text": "pasted text",
    "Tiny Shakespeare": "n_shakespeare",
    "Aesop's fables & nursery rhymes": "n_aesop",
    "Pride and Prejudice": "n_austen",
}

# each streamed update of a run
Trained = result("Trained", "train_state", "loss_plot", "progress", "msg", "samples", "heads_plot")
# After a change of the page's language: every text and figure this tab built.
Relabelled = result(
    "Relabelled", "preset", "corpus_source", "loss_plot", "progress", "estimate", "msg", "samples", "heads_plot"
)


def outcome(job, lang: str) -> str:
    """After a run: where the validation loss started and ended against the unigram baseline, and a
    note when it overfitted."""
    if not job.val_points:
        return ""
    text = tr(
        lang,
        "train_outcome",
        start=f"{job.val_points[0][1]:.2f}",
        end=f"{job.val_points[-1][1]:.2f}",
        unigram=f"{job.unigram:.2f}",
    )
    if overfitting(job.train_points, job.val_points):
        text += " " + tr(lang, "train_overfit")
    return text


def _loss_figure(job, train_state=None):
    lang, present = lang_of(train_state), bool((train_state or {}).get("present"))
    return dress(
        figures.loss_curve(
            job.train_points,
            job.val_points,
            title=tr(lang, "fig_loss"),
            baselines={tr(lang, "base_unigram"): job.unigram, tr(lang, "base_uniform"): math.log(job.cfg.vocab_size)},
        ),
        lang,
        present,
    )


def _progress_html(job, lang="en") -> str:
    ev = job.last_event
    step = ev.step if ev else 0
    total = job.tcfg.steps
    elapsed = ev.elapsed_s if ev else 0.0
    rate = (ev.tokens_seen / elapsed) if ev and elapsed > 0 else 0.0
    val = tr(lang, "val_loss", loss=f"{job.val_points[-1][1]:.3f}") if job.val_points else ""
    left = ""
    if 0 < step < total and elapsed > 0:  # at this run's own pace so far
        left = " · " + tr(lang, MESSAGES["left"], left=duration(elapsed / step * (total - step), lang))
    text = tr(
        lang,
        "train_progress",
        step=f"{step:,}",
        total=f"{total:,}",
        tokens=f"{ev.tokens_seen if ev else 0:,}",
        elapsed=f"{elapsed:.1f}",
        rate=f"{rate:,.0f}",
        val=val,
    )
    return f"<progress value='{step}' max='{total}' style='width:100%;height:18px'></progress><div>{text}{left}</div>"


def _corpus_desc(corpus, lang) -> str:
    return tr(
        lang,
        "corpus_desc",
        name=tr(lang, CORPUS_NAMES.get(corpus.name, corpus.name)),
        chars=f"{corpus.n_chars:,}",
        tokens=f"{corpus.n_tokens:,}",
        train=f"{len(corpus.train_ids):,}",
        val=f"{len(corpus.val_ids):,}",
    )


def _say(request, lang, draw):
    """The tab's message now, remembered to be said again in another language (``redraw``)."""
    redraw.remember(request, "train_msg", draw)
    return draw(lang)


def train_message(request: gr.Request, state):
    """After a language switch: the tab's last message in the new language."""
    return redraw.redraw(request, "train_msg", lang_of(state), False, 1)[0]


@for_the_session
def train_model(
    train_state,
    preset_name,
    source,
    upload,
    pasted,
    steps,
    lr,
    batch_size=DEFAULT_BATCH,
    state=None,
    request: gr.Request = None,
    watch_induction: bool = False,
):
    """Train in a background thread and stream the loss curve and the heads' scores; a closed tab
    stops the thread. ``state``: the page's session state; the job's memory counts as that session's,
    so a refusal names what the session holds. ``watch_induction``: the induction-head run's data
    mix and loss (train_heads_run)."""
    lang = lang_of(train_state)
    keep = {k: v for k, v in (train_state or {}).items() if k in ("lang", "present")}  # the page's, not the job's
    try:
        cfg, tcfg = train_config(preset_name, steps, lr, batch_size)
        text, name = corpus_text(source, upload, pasted)
        job = TrainingJob(
            cfg, text, name, steps=tcfg.steps, lr=tcfg.lr, batch_size=tcfg.batch_size, watch_induction=watch_induction
        ).start()
    except Exception as e:  # nothing started: an earlier run's curve and progress go, not left as if this run's
        present = bool((train_state or {}).get("present"))
        yield Trained(
            train_state,
            empty(tr(lang, "train_not_started"), lang, present),
            "",
            _say(request, lang, lambda lang, present=False, e=e: _fail(e, lang)),
            _samples(request, lang, None),
            heads_view.curves_figure(None, train_state),
        )
        return
    train_state = {**keep, "job": job.id, "recipe": None}
    timing = train_estimate.known_step_time(cfg, tcfg)
    # (the estimate only if already measured: starting never waits for a measurement)
    eta = None if timing is None else train_estimate.estimate_seconds(timing, job.tcfg.steps, job.tcfg.eval_interval)

    def started_message(lang, present=False):
        model = tr(lang, f"preset_{preset_name}")
        message = tr(lang, MESSAGES["started"], model=model, corpus=_corpus_desc(job.corpus, lang))
        return _ok(message + (tr(lang, MESSAGES["started_eta"], total=duration(eta, lang)) if eta is not None else ""))

    def now_message(lang, present=False):  # a place in the queue, then what is training
        place = QUEUE.position(job)
        if not place:
            return started_message(lang)
        limit, wait = duration(time_limit_seconds(), lang), duration(QUEUE.wait_bound(job), lang)
        slots, running = max_trainings(), QUEUE.running()
        return _ok(tr(lang, "train_queued", position=place, running=running, slots=slots, limit=limit, wait=wait))

    live_curves, shown = heads_view.LiveCurves(), None
    try:
        while True:  # at once, then every half second until the run ends
            message = _say(request, lang, now_message)
            # the curve only when a point came in: a step takes seconds on a small CPU, and building
            # the figure twice a second took the process's lock from the training thread
            points = (len(job.train_points), len(job.val_points))
            yield Trained(
                train_state,
                gr.skip() if points == shown else _loss_figure(job, train_state),
                _progress_html(job, lang),
                message,
                _samples(request, lang, job),
                live_curves(job, train_state),
            )
            shown = points
            if job.done.wait(0.5):
                break
    finally:
        if not job.done.is_set():
            job.stop()  # the user left or cancelled: end the thread after its current step
        heads_view.keep(job)  # its heads stay for the scrubber; the job (and its model) go
        JOBS.pop(job.id, None)  # also when the tab closed: the job (and its memory) can then go
    if job.error:
        yield Trained(
            train_state,
            _loss_figure(job, train_state),
            _progress_html(job, lang),
            _say(request, lang, lambda lang, present=False: _warn(tr(lang, "train_failed", error=job.error))),
            _samples(request, lang, job),
            heads_view.finished_curves(job, train_state),
        )
        return
    if job.trainer.step_count == 0 and job.stopped:  # it left the queue before its turn
        left = _say(request, lang, lambda lang, present=False: _warn(tr(lang, "train_left_queue")))
        yield Trained(
            train_state,
            _loss_figure(job, train_state),
            _progress_html(job, lang),
            left,
            _samples(request, lang, job),
            heads_view.finished_curves(job, train_state),
        )
        return
    train_state = {**keep, "job": job.id, "recipe": job.result_recipe()}
    done = "train_time_limit" if job.timed_out else "train_stopped" if job.stopped else "train_finished"
    limit = time_limit_seconds()

    def finished(lang, present=False):
        said = tr(lang, done, n=f"{job.trainer.step_count:,}", limit=duration(limit, lang))
        return _ok(said + " " + outcome(job, lang))

    yield Trained(
        train_state,
        _loss_figure(job, train_state),
        _progress_html(job, lang),
        _say(request, lang, finished),
        _samples(request, lang, job, finished=True),
        heads_view.finished_curves(job, train_state),
    )


def stop_training(train_state, request: gr.Request = None):
    lang = lang_of(train_state)
    job = JOBS.get((train_state or {}).get("job") or "")
    if job is None:
        return _say(request, lang, lambda lang, present=False: _warn(tr(lang, "no_training")))
    job.stop()
    return _say(request, lang, lambda lang, present=False: _ok(tr(lang, "stopping")))


def use_trained(state, train_state, request: gr.Request = None):
    lang = lang_of(state)
    recipe = (train_state or {}).get("recipe")
    if not recipe:
        return only(
            Switch, state=state, message=_say(request, lang, lambda lang, present=False: _warn(tr(lang, "train_first")))
        )
    try:
        model = leased_model(recipe, state)
    except Exception as e:
        return only(Switch, state=state, message=_say(request, lang, lambda lang, present=False, e=e: _fail(e, lang)))
    using = _say(
        request, lang, lambda lang, present=False: _ok(tr(lang, "now_using", model=describe_recipe(recipe, lang)))
    )
    return switch_model(model, recipe, using, state, request)


def relabel(
    state, train_state, preset_name, steps, batch_size, shown_estimate=None, request: gr.Request = None
) -> Relabelled:
    """After a change of the page's language: the corpus choices, the live figure and progress line
    of a run (if one is under way), the estimate (if the page shows one: ``shown_estimate``) and
    the tab's last message. Every page load sends a language change: an estimate not shown yet is
    left to the tab's opening, since measuring one times training steps, which would take the CPU
    from the page's first Generate."""
    lang = lang_of(state)
    job = JOBS.get((train_state or {}).get("job") or "")
    progress = {"loss_plot": _loss_figure(job, train_state), "progress": _progress_html(job, lang)} if job else {}
    run = heads_view.train_heads.find((train_state or {}).get("job"), JOBS)
    if run is not None:
        progress["heads_plot"] = heads_view.curves_figure(run, {**(train_state or {}), "lang": lang})
    shown = bool(str(shown_estimate or "").strip())
    return only(
        Relabelled,
        preset=gr.update(choices=preset_choices(lang)[:-1]),
        corpus_source=gr.update(choices=choices(CORPUS_KEYS, lang)),
        **progress,
        estimate=estimate_html(preset_name, steps, batch_size, state=state) if shown else gr.skip(),
        msg=train_message(request, state),
        samples=samples_again(request, lang),
    )


def new_train_state() -> dict:
    return {"job": None, "recipe": None}
