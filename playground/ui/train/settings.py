"""The Train tab's settings before a run: the corpus and numbers a run takes, and how long it will take.

The tab's (or an API caller's) model, corpus, steps, learning rate and batch parsed into the run's
configs, and the estimate shown before Train is pressed: from real steps of that config timed on this
machine (``playground.training.estimate``), said in the page's language. The run itself is train_tab's.
"""

from __future__ import annotations

import html

from playground.errors import UserError
from playground.server.jobs import JOBS, check_training_time, time_limit_seconds, training_config
from playground.server.training_inputs import estimate as train_estimate
from playground.server.training_inputs import (
    load_bundled_corpus,
    load_tiny_shakespeare,
    text_from_paste,
    text_from_upload,
)
from playground.settings import parse_choice, parse_count, parse_number, parse_whole
from playground.ui.common import fail as _fail
from playground.ui.common import for_the_session, lang_of, tr
from playground.ui.model_switch import FORM_PRESETS

# The ids API callers send (the bundled text first, the default: it needs no network); the labels
# follow the page's language.
CORPUS_CHOICES = ["austen", "aesop", "upload", "paste", "shakespeare"]
CORPUS_KEYS = dict(zip(CORPUS_CHOICES, ("c_austen", "c_aesop", "c_upload", "c_paste", "c_shakespeare")))
DEFAULT_PRESET = "nano"
# The default lesson: 200 steps of 8 windows of 128 tokens see 205 K tokens, about 1.5 passes over
# Pride and Prejudice's training part, so the validation loss falls with the training loss and ends
# below the unigram baseline, and the model writes English words, in no order yet (docs/benchmarks.md
# has the run, its samples and its time).
DEFAULT_STEPS = 200
DEFAULT_LR = 3e-3
DEFAULT_BATCH = 8
MAX_BATCH = 64


def duration(seconds: float, lang: str = "en") -> str:
    """``format_duration`` in the page's language ('3 min 20 s', '3 分 20 秒')."""
    return train_estimate.format_duration(seconds, units=(tr(lang, "unit_h"), tr(lang, "unit_min"), tr(lang, "unit_s")))


def corpus_text(source, upload, pasted) -> tuple[str, str]:
    if source == "upload":
        return text_from_upload(upload), "your upload"
    if source == "paste":
        return text_from_paste(pasted), "pasted text"
    if source == "shakespeare":
        return load_tiny_shakespeare(), "Tiny Shakespeare"
    if source == "aesop":
        return load_bundled_corpus("aesop"), "Aesop's fables & nursery rhymes"
    if source in ("austen", None, ""):
        return load_bundled_corpus("austen"), "Pride and Prejudice"
    parse_choice(source, CORPUS_CHOICES, "Corpus")  # refuses it, naming the choices


def train_config(preset_name, steps, lr, batch_size):
    """The model's config and the run's TrainConfig from the tab's (or an API caller's) values."""
    if preset_name not in FORM_PRESETS:  # GPT-2's family and the tiny Llama/Qwen3/Mistral-style ones
        raise UserError("train.unknown_model", "Unknown model {name!r}.", name=preset_name)
    batch = parse_whole(batch_size, "Batch size", 1, MAX_BATCH)
    steps = parse_count(steps, "Steps")
    lr = parse_number(lr, "Learning rate")
    cfg = FORM_PRESETS[preset_name]
    return cfg, training_config(cfg, steps, lr, batch_size=batch)


def estimate(preset_name, steps, batch_size=DEFAULT_BATCH, *, timer=None) -> dict:
    """Seconds the run would take here, from steps of this config timed on this machine (cached per
    config and batch shape); plain numbers. ``timer`` (tests) replaces the clock of a new measurement."""
    cfg, tcfg = train_config(preset_name, steps, DEFAULT_LR, batch_size)
    if train_estimate.known_step_time(cfg, tcfg) is None and not timer:
        check_training_time(cfg, tcfg)  # a run its arithmetic alone puts over the limit is not timed
    busy = any(not job.done.is_set() for job in list(JOBS.values()))
    timing = (
        train_estimate.measure_step_time(cfg, tcfg, timer=timer)
        if timer
        else train_estimate.cached_step_time(cfg, tcfg)
    )
    seconds = train_estimate.estimate_seconds(timing, tcfg.steps, tcfg.eval_interval)
    return {
        "seconds": seconds,
        "limit_seconds": time_limit_seconds(),
        "over_limit": seconds > time_limit_seconds(),
        "steps": tcfg.steps,
        "step_s": timing.step_s,
        "first_step_s": timing.first_step_s,
        "eval_s": timing.eval_s,
        "evaluations": train_estimate.evaluations(tcfg.steps, tcfg.eval_interval),
        "measured_steps": timing.n_steps + 1,
        "batch_size": tcfg.batch_size,
        "block_size": tcfg.block_size,
        "busy": busy,
    }


@for_the_session
def estimate_html(preset_name, steps, batch_size=DEFAULT_BATCH, state=None) -> str:
    lang = lang_of(state)
    try:
        e = estimate(preset_name, steps, batch_size)
    except Exception as ex:
        return _fail(ex, lang)
    text = tr(
        lang,
        "est_total",
        total=duration(e["seconds"], lang),
        steps=f"{e['steps']:,}",
        step=duration(e["step_s"], lang),
        evals=e["evaluations"],
        eval=duration(e["eval_s"], lang),
        n=e["measured_steps"],
        batch=e["batch_size"],
        block=e["block_size"],
    )
    if e["busy"]:
        text += tr(lang, "est_busy")
    if e["over_limit"]:
        text += tr(lang, "est_over_limit", limit=duration(e["limit_seconds"], lang))
    return f"<div class='pg-msg pg-estimate' data-seconds='{e['seconds']:.1f}'>{html.escape(text)}</div>"


def estimate_api(preset_name, steps, batch_size=DEFAULT_BATCH) -> dict:
    """API: the estimate as numbers ({"error": message} for bad input)."""
    try:
        return estimate(preset_name, steps, batch_size)
    except (ValueError, MemoryError) as e:
        return {"error": str(e)}
