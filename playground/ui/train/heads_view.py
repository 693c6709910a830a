"""The Train tab's heads: curves of every head's scores beside the loss, and a scrubber over the logged steps.

The job measures its heads (playground.training.head_watch); the server reads them
(playground.server.train_heads); this draws them. The scrubber picks a logged step and a head and
shows that head's map on the probe's first row then, and the sample the model wrote at that step.
"""

from __future__ import annotations

import html
import time

import gradio as gr

from playground import figures
from playground.figures.head_curves import head_score_curves
from playground.server import train_heads
from playground.server.catalog import PRESETS
from playground.server.jobs import JOBS, training_config
from playground.server.training_inputs import format_duration, induction_run, load_bundled_corpus, prepare_corpus
from playground.ui.common import dress, empty, for_the_session, lang_of, tr
from playground.ui.common import fail as _fail

CSS = """
#pg-train-heads-facts { font-size: 15px; margin: 4px 0; }
#pg-train-heads-facts .pg-heads-sample { margin-top: 6px; padding: 6px 10px; border-left: 4px solid #2563eb;
  border-radius: 6px; overflow-wrap: anywhere; }
body.pg-present #pg-train-heads-facts { font-size: 19px !important; }
"""


MAP_LABELS = 20  # tick labels a scrubbed map keeps all of; past that, every other one


def _duration(seconds: float, lang: str) -> str:
    return format_duration(seconds, units=(tr(lang, "unit_h"), tr(lang, "unit_min"), tr(lang, "unit_s")))


def _run(train_state):
    return train_heads.find((train_state or {}).get("job"), JOBS)


def curves_figure(run, train_state=None):
    """Every head's three scores and the in-context gap against the step, the phase change marked."""
    lang, present = lang_of(train_state), bool((train_state or {}).get("present"))
    if run is None or not run.records:
        return empty(tr(lang, "heads_none"), lang, present)
    names = {
        "previous_token": tr(lang, "heads_prev"),
        "induction": tr(lang, "heads_ind"),
        "first_token": tr(lang, "heads_first"),
        "in_context_gap": tr(lang, "heads_gap"),
    }
    fig = head_score_curves(
        train_heads.timeline(run),
        title=tr(
            lang,
            "fig_heads_each" if run.every == 1 else "fig_heads",
            every=run.every,
            period=(run.probe.shape[1] - 1) // 2,
        ),
        names=names,
        phase_label=tr(lang, "heads_phase"),
    )
    return dress(fig, lang, present)


def recorded_view(train_state=None) -> tuple:
    """(curves, note): the run recorded for the lesson on heads forming (``induction_run.recorded``),
    drawn as a live run's, and what it is; the scrubber needs a run trained here (its maps are not kept)."""
    lang, present = lang_of(train_state), bool((train_state or {}).get("present"))
    rec = induction_run.recorded()
    run = rec["run"]
    fig = head_score_curves(
        rec["timeline"],
        title=tr(lang, "lesson_fig_heads", steps=f"{run['steps']:,}", seed=run["seed"], every=run["every"]),
        names={
            "previous_token": tr(lang, "heads_prev"),
            "induction": tr(lang, "heads_ind"),
            "first_token": tr(lang, "heads_first"),
            "in_context_gap": tr(lang, "heads_gap"),
        },
        phase_label=tr(lang, "heads_phase"),
    )
    fields = {"steps": f"{run['steps']:,}", "seed": run["seed"], "seconds": f"{run['seconds']:.0f}"}
    note = (
        f"<div class='pg-heads-facts pg-heads-recorded' data-recorded='{run['seed']}'>"
        f"{html.escape(tr(lang, 'heads_recorded_note', **fields))} {html.escape(_recorded_phase(rec, lang))}</div>"
    )
    return dress(fig, lang, present), note


def _recorded_phase(rec, lang) -> str:
    return _phase_words(rec["timeline"]["phase_change"], lang)


def _phase_words(phase, lang) -> str:
    """Where a timeline's phase change came (its head, rise and step), or that none came."""
    if not phase:
        return tr(lang, "heads_no_phase")
    return tr(
        lang,
        "heads_phase_at",
        layer=phase["layer"],
        head=phase["head"],
        rise=f"{phase['rise']:.2f}",
        step=phase["step"],
    )


def best_head(run) -> str | None:
    """The head with the highest induction score at the last log ("layer.head")."""
    if run is None or not run.records:
        return None
    scores = run.records[-1].induction
    layer, head = divmod(int(scores.argmax()), scores.shape[1])
    return f"{layer}.{head}"


def _phase_text(run, lang) -> str:
    return _phase_words(train_heads.timeline(run)["phase_change"], lang)


def scrub_view(train_state, step, pick, request: gr.Request = None):
    """The picked head's map at the logged step nearest at or before ``step``, and what the model wrote then."""
    lang, present = lang_of(train_state), bool((train_state or {}).get("present"))
    run = _run(train_state)
    if run is None or not run.records:
        return empty(tr(lang, "heads_none"), lang, present), ""
    try:
        layer, head = str(pick or best_head(run)).split(".")
        view = train_heads.scrub(run, step if step is not None else 0, layer, head)
    except (ValueError, TypeError) as e:
        return empty("", lang, present), _fail(e, lang)
    fig = figures.attention_heatmap(
        view["map"],
        view["labels"],
        title=tr(lang, "fig_heads_map", layer=view["layer"], head=view["head"], step=view["step"]),
        height=520,
    )
    # every other token labelled: 33 labels in a half-width map at 1024 px overlapped; even positions
    # keep each token of the repeat beside its first occurrence's (the probe's period of 16 is even)
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        if axis.tickvals is not None and len(axis.tickvals) > MAP_LABELS:
            axis.tickvals, axis.ticktext = axis.tickvals[::2], axis.ticktext[::2]
    facts = tr(
        lang,
        "heads_map_facts",
        step=view["step"],
        prev=f"{view['previous_token']:.2f}",
        ind=f"{view['induction']:.2f}",
        first=f"{view['first_token']:.2f}",
        gap=f"{view['in_context_gap']:+.2f}",
    )
    sample = ""
    if view["sample_step"] is not None:
        sample = (
            f"<div class='pg-heads-sample' data-step='{view['sample_step']}'>"
            f"<b>{html.escape(tr(lang, 'heads_sample', step=view['sample_step']))}</b> "
            f"{html.escape(view['sample'].replace(chr(10), '↵ '))}</div>"
        )
    text = (
        f"<div class='pg-heads-facts' data-step='{view['step']}' data-head='{view['layer']}.{view['head']}'>"
        f"{html.escape(facts)} {html.escape(_phase_text(run, lang))}</div>{sample}"
    )
    return dress(fig, lang, present), text


class LiveCurves:
    """The curves of a job that is training, sent only when a new log is in and at most every
    ``MIN_REDRAW_S``: 24 lines in four panels, redrawn on every half-second update of the stream,
    kept Chromium's main thread busy for tens of seconds on a loaded machine (the scrubber waited)."""

    MIN_REDRAW_S = 2.0

    def __init__(self):
        self.shown, self.at = -1, 0.0

    def __call__(self, job, train_state):
        n, now = len(job.watch.records), time.monotonic()
        if n == self.shown or now - self.at < self.MIN_REDRAW_S:
            return gr.skip()
        self.shown, self.at = n, now
        return curves_figure(train_heads.view_of(job), train_state)


def finished_curves(job, train_state):
    """The curves of a job that has ended (its kept records)."""
    return curves_figure(train_heads.find(job.id, JOBS), train_state)


def _heads(cfg) -> list[tuple[str, str]]:
    """("L1 H2", "1.2") for every head of a model of ``cfg``."""
    return [(f"L{layer} H{head}", f"{layer}.{head}") for layer in range(cfg.n_layers) for head in range(cfg.n_heads)]


def scrubber_for(preset_name, steps):
    """When a run starts: the slider over its steps (in steps of its log interval), the model's heads,
    and the heads' row shown. Set by a quick event of its own, not by the run's stream: an output of a running event
    shows as pending in the page, and the learner's moves of it were not sent."""
    cfg = PRESETS.get(preset_name) or induction_run.MODEL
    try:
        total = int(steps)
        every = max(1, training_config(cfg, total, 1e-3).steps // 40)
    except (TypeError, ValueError):
        total, every = induction_run.STEPS, induction_run.WATCH_EVERY
    heads = _heads(cfg)  # the first head is picked, so the map shows as soon as a step is logged
    slider = gr.update(minimum=0, maximum=max(every, total), step=every, value=0)
    return slider, gr.update(choices=heads, value=heads[0][1] if heads else None), gr.update(visible=True)


def scrubber_for_induction():
    cfg, total, every = induction_run.MODEL, induction_run.STEPS, induction_run.WATCH_EVERY
    slider = gr.update(minimum=0, maximum=total, step=every, value=0)
    return slider, gr.update(choices=_heads(cfg), value="1.0"), gr.update(visible=True)


def keep(job) -> None:
    train_heads.keep(job)


def timeline_api(train_state) -> dict:
    """API: the session's run's head timeline, steps × layers × heads (JSON); {} before any run."""
    run = _run(train_state)
    return train_heads.timeline(run) if run is not None else {}


@for_the_session
def heads_estimate_html(state=None) -> str:
    """How long the induction-head run takes here, timed now on a few of its own steps."""
    lang = lang_of(state)
    try:
        tcfg = induction_run.train_config()
        corpus = prepare_corpus(load_bundled_corpus(induction_run.CORPUS), tcfg.block_size, name="aesop")
        e = induction_run.time_run(corpus, tcfg)
    except Exception as ex:
        return _fail(ex, lang)
    text = tr(
        lang,
        "heads_est",
        total=_duration(e["seconds"], lang),
        steps=f"{e['steps']:,}",
        step=_duration(e["step_s"], lang),
        evals=e["evaluations"],
        eval=_duration(e["eval_s"], lang),
        logs=e["logs"],
        log=_duration(e["log_s"], lang),
    )
    info = tr(
        lang,
        "heads_watch_info",
        steps=tcfg.steps,
        batch=tcfg.batch_size,
        block=tcfg.block_size,
        every=induction_run.WATCH_EVERY,
    )
    return (
        f"<div class='pg-msg pg-estimate' id='pg-heads-estimate-text' data-seconds='{e['seconds']:.1f}'>"
        f"{html.escape(text)}<br><span style='opacity:.85'>{html.escape(info)}</span></div>"
    )
