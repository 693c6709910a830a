"""The Generate half of "Generate & attention": stream tokens, stop, inspect a step, export.

The server's decode loop (playground.server.decode_loop) makes every learner's tokens in shared
steps; a handler here only waits on its run's stream and shows what arrived. Its costs are bounded
per update (the chips grow by appending; figures are drawn once the run ends or when asked), updates
are paced across users, and Stop asks the loop to drop the run before its next step.

The streaming event outputs only the state, the chips and the status line: the browser re-applies
every output of an event on every streamed update, and a figure among them would be re-laid-out by
plotly each time. The figures come from a second event (``after_run``) chained after the stream.
"""

from __future__ import annotations

import threading
import time

import gradio as gr

from playground import figures
from playground.i18n import tr_error
from playground.server.decode_loop import LOOP
from playground.server.exports import export_model, export_run, reserve_export
from playground.server.runs import start_run
from playground.server.step_records import run_record
from playground.settings import SamplingSettings, parse_choice, parse_whole
from playground.ui import attention_view as av
from playground.ui import listeners, presses, redraw
from playground.ui.attention_view import SPANS, VIEW_KEYS, VIEWS, AttentionViews, attention_views, head_examples
from playground.ui.chips import ChipStream, legend, status_html
from playground.ui.common import (
    api_run,
    choices,
    dress,
    empty,
    fail,
    for_the_session,
    lang_of,
    ok,
    session_model,
    session_run,
    tr,
    warn,
)
from playground.ui.kept import Kept
from playground.ui.results import only, result, skipped

# Every streamed message costs the page a fixed amount of Gradio bookkeeping whatever it carries
# (20–60 ms on a loaded 2-core machine, Chromium profile), so updates come at most 5 times a second (per server, shared by the users
# generating): a run still reads as live, and a slow machine's page never falls behind the server.
STREAM_INTERVAL_S = 0.2  # one stream's updates at most this often
UPDATES_PER_S = 25  # the whole server's streamed updates, about: each costs the server a diff and a send


def update_interval(active_runs: int) -> float:
    """Seconds between one stream's updates while ``active_runs`` decode: 0.2 s alone, 1.2 s in a room of 30."""
    return max(STREAM_INTERVAL_S, active_runs / UPDATES_PER_S)


WAIT_S = 1.0  # a handler wakes at least this often, so a cancelled event can close it

Streamed = result("Streamed", "state", "chips", "status")  # what each streamed update carries
StepView = result("StepView", "prob_plot", "stages_plot", "step_md")  # one generated token's step
LastStep = result("LastStep", "step_slider", *StepView._fields)
Picked = result("Picked", "step_slider", *StepView._fields, "query")  # a clicked chip
Exported = result("Exported", "export_file", "export_msg")
# After a change of the page's language: every text and figure this tab built.
Relabelled = result(
    "Relabelled", "view", "legend", "head_examples", "span", "status", *AttentionViews._fields, *StepView._fields
)


# A Stop can reach the server before the run it stops has started (queued, or its request still on its way
# on a busy machine): the page names each press of Generate, and Stop names the page's last press.
MAX_PRESSES = 2000  # pages that never say they closed: the oldest go first
STOPPED_FIRST = "stopped"  # a press's entry when its Stop came first
_PRESSES = Kept(MAX_PRESSES)  # (page, press name) -> its run's id, or STOPPED_FIRST
_PRESSES_LOCK = threading.Lock()


def _press(request, ask) -> tuple[str | None, str]:
    return getattr(request, "session_hash", None), presses.press_name(ask)


@for_the_session
def generate_tokens(
    state, prompt, temperature, top_k, top_p, max_new_tokens, seed, greedy, ask=None, request: gr.Request = None
):
    """Stream tokens as chips with a status line (outputs: state, chips, status). ``ask`` names this press
    of Generate for a Stop that comes before the run has started."""
    lang = lang_of(state)
    try:
        sampling = SamplingSettings.parse(
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            max_new_tokens=max_new_tokens,  # start_run checks the app's cap
            seed=seed,
            greedy=greedy,
            seed_name="Sampling seed",
        )
        model = session_model(state)
        # replaces: the server keeps the new run under its id and lets the session's previous one go.
        run, gen = start_run(
            model,
            state["recipe"],
            prompt,
            sampling,
            replaces=(state or {}).get("run_id"),
        )
    except Exception as e:
        yield Streamed(state, gr.skip(), fail(e, lang))
        return
    # In place, not a copy: the page's language and presenter mode (prefs.apply_prefs) may be stored in this
    # session's state while the run streams, and the state each update hands back must keep them.
    state["run_id"] = run.id
    page, name = _press(request, ask)
    if page is not None and name:
        # (in the loop before the name leads a Stop to it; ends before its first step if the Stop came first)
        with _PRESSES_LOCK:
            stream = LOOP.submit(gen, key=run.id, stopped=_PRESSES.get(page, name) == STOPPED_FIRST)
            _PRESSES.put(page, name, run.id)
    else:
        stream = LOOP.submit(gen, key=run.id)
    try:
        yield from _stream(state, run, stream, model.cfg.context_length)
    finally:
        stream.stop()  # a closed page or a cancelled event: the loop drops the run before its next step


def _stream(state, run, stream, context_length):
    # The language is read at every update: the page may switch it while a run streams (in place).
    chips = ChipStream(run.prompt_ids, run.tokenizer)
    t0 = time.perf_counter()
    yield Streamed(
        state, chips.delta(), status_html(run, 0.0, "running", lang_of(state), context_length)
    )  # the prompt's chips at once
    last_yield = time.perf_counter()
    ended = False
    while not ended:
        if run.steps:  # after the first token: wake when the next update is due, or at once when the run ends
            rest = last_yield + update_interval(LOOP.active()) - time.perf_counter()
            if rest > 0:
                stream.wait_end(min(rest, WAIT_S))
        stream.wait(WAIT_S)
        new, ended = stream.take()
        for step in new:
            run.steps.append(step)
            chips.add(step)
        now = time.perf_counter()
        run.elapsed = now - t0
        # The first token at once (the room's first-token time is the decoder's, not the pacing's); after it,
        # each stream's updates are spaced so the whole server sends about UPDATES_PER_S of them.
        first = new and len(run.steps) == len(new)
        if new and not ended and (first or now - last_yield > update_interval(LOOP.active())):
            last_yield = now
            lang = lang_of(state)
            status = status_html(run, run.elapsed, "running", lang, context_length, others=stream.others)
            yield Streamed(state, chips.delta(), status)
    run.stopped = stream.stop_asked and stream.error is None and len(run.steps) < run.settings["max_new_tokens"]
    run.elapsed = time.perf_counter() - t0
    lang = lang_of(state)
    final = status_html(run, run.elapsed, "stopped" if run.stopped else "done", lang, context_length)
    if stream.error is not None:  # e.g. NaN logits at some step: keep the tokens made so far, say why
        final = status_html(run, run.elapsed, "error", lang, context_length) + fail(stream.error, lang)
    listeners.run_ended(state)  # (a room's teacher: its run published now, without a trip through the page)
    yield Streamed(state, chips.delta(final=True), final)


def after_run(state, view=VIEWS[0], layer=0, head=0, log_scale=True, span=SPANS[0], request: gr.Request = None):
    """Once a run has ended: its attention (outputs: heatmap, query bars, query slider, message), at the run's
    last position. Remembered as the page's drawn view (``request``), so a language redraw that set off before
    this map arrived (the page's preferences applied as it loads, queued behind a quick run) draws this view
    again, not the query slider's value from before the run."""
    if not (state or {}).get("run_id"):
        return skipped(AttentionViews)
    return attention_views(state, view, layer, head, log_scale, None, span, request=request)


def last_step(state, request: gr.Request = None):
    """Once a run has ended: the step slider on its last step, and that step's distribution
    (outputs: step slider, prob bars, stages, step text). A separate event from ``after_run`` so the
    browser draws the figures in two tasks, not one long one. Remembered as the page's drawn step, as
    ``after_run`` remembers its map."""
    try:
        run = session_run(state)
    except ValueError as e:
        return only(LastStep, step_md=f"⚠️ {tr_error(lang_of(state), e)}")
    if run is None or not run.steps:
        return skipped(LastStep)
    n = len(run.steps)
    step_update = gr.update(minimum=0, maximum=max(1, n - 1), value=n - 1, visible=n > 1)
    return LastStep(step_update, *inspect_step(state, n - 1, request))


def stop_generation(state, ask=None, request: gr.Request = None):
    """Ask the server's decode loop to drop the run before its next step; its stream then ends and
    reports how many tokens it made. A run that already finished is left as it is (its status says
    "Done"). ``ask`` names the page's last press of Generate: its run is stopped too, or, not started
    yet, stopped as it starts."""
    page, name = _press(request, ask)
    if page is not None and name:
        with _PRESSES_LOCK:
            run_id = _PRESSES.get(page, name)
            if run_id is None:
                _PRESSES.put(page, name, STOPPED_FIRST)
        if run_id not in (None, STOPPED_FIRST):
            LOOP.stop(run_id)
    LOOP.stop((state or {}).get("run_id"))
    return None


def inspect_step(state, step_index, request: gr.Request = None):
    """Probability bars, the stage-by-stage reshaping, and a sentence about one generated token (the step
    remembered as the page's drawn one, for a language redraw: ``relabel``)."""
    try:
        run = session_run(state)
    except ValueError as e:
        return only(StepView, step_md=f"⚠️ {tr_error(lang_of(state), e)}")
    lang, present = lang_of(state), bool(state.get("present"))
    if run is None or not run.steps:
        shown = empty(tr(lang, "generate_first"), lang, present)
        return StepView(shown, shown, tr(lang, "pick_one"))
    try:
        i = parse_whole(step_index, "Step", 0, len(run.steps) - 1)
    except ValueError as e:
        return only(StepView, step_md=f"⚠️ {tr_error(lang_of(state), e)}")
    redraw.remember_inputs(request, "step", (i,), state.get("run_id"))
    s = run.steps[i]
    tok = run.tokenizer  # the ids' own words: a checkpoint folder's tokenizer, else GPT-2's
    fp = figures.format_prob
    top_labels = [figures.token_id_label(tok.piece(t).display, t) for t, _ in s.top]
    bars = figures.token_probability_bars(
        top_labels, [p for _, p in s.top], chosen=_index_of(s.top, s.token_id), title=tr(lang, "fig_step", i=i)
    )
    cand_labels = [figures.token_id_label(tok.piece(t).display, t) for t in s.candidates]
    stages = figures.sampling_stages_figure(
        cand_labels, s.stages, chosen=s.candidates.index(s.token_id), title=tr(lang, "fig_stages")
    )
    settings = run.settings
    off = tr(lang, "off")
    top_p = settings["top_p"] if settings["top_p"] not in (None, 1.0) else off
    text = tr(
        lang,
        "step_text",
        i=i,
        token=tok.piece(s.token_id).display,
        id=s.token_id,
        position=s.position,
        p=fp(s.prob),
        raw_p=fp(s.raw_prob),
        rank=s.rank,
        vocab=f"{tok.n_vocab:,}",
        entropy=f"{s.entropy:.2f}",
        raw_entropy=f"{s.raw_entropy:.2f}",
        kept=f"{s.kept_tokens:,}",
        temperature=settings["temperature"],
        top_k=settings["top_k"] or off,
        top_p=top_p,
    ) + (
        tr(lang, "step_seed", seed=settings["seed"])
        if settings.get("seed") is not None
        else tr(lang, "step_seed_used", seed=settings.get("seed_used"))
    )
    return StepView(dress(bars, lang, present, column="third"), dress(stages, lang, present, column="full"), text)


def _index_of(top, token_id):
    for i, (t, _) in enumerate(top):
        if t == token_id:
            return i
    return None


def pick_token(state, evt: gr.EventData):
    """A click on a chip: a generated token opens its step, and the attention query moves to the
    token (outputs: step slider, prob bars, stages, step text, query slider); the attention views
    follow in a chained event that reads the query slider."""
    try:
        run = session_run(state)
    except ValueError as e:
        return only(Picked, step_md=f"⚠️ {tr_error(lang_of(state), e)}")
    if run is None:
        return skipped(Picked)
    try:
        # the chip's position, sent by the chips' script as the event's data
        position = parse_whole(getattr(evt, "position", None), "Token position", 0, len(run.token_ids) - 1)
    except ValueError as e:
        return only(Picked, step_md=f"⚠️ {tr_error(lang_of(state), e)}")
    lang = lang_of(state)
    start, _ = run.window(session_model(state).cfg.context_length)
    note = ""
    if position < start:
        note = tr(lang, "outside_window", position=position, start=start, end=len(run.token_ids) - 1)
    query = gr.update(value=max(position, start))
    step = position - len(run.prompt_ids)
    if step < 0:
        text = tr(lang, "prompt_position", position=position) + note
        return only(Picked, step_md=text, query=query)
    bars, stages, text = inspect_step(state, step)
    return Picked(gr.update(value=step), bars, stages, text + note, query)


@for_the_session
def export_run_file(state, fmt):
    lang = lang_of(state)
    try:
        run = session_run(state)
        if run is None:
            return only(Exported, export_msg=warn(tr(lang, "no_run_export")))
        fmt = parse_choice(fmt, ("json", "npz"), "Export format")
        model = session_model(state)
        with reserve_export(model, run, fmt):  # refused before anything is allocated if it does not fit
            path = export_run(run, model, fmt)
        return Exported(str(path), ok(tr(lang, "run_exported", fmt=fmt)))
    except Exception as e:
        return only(Exported, export_msg=fail(e, lang))


@for_the_session
def export_model_file(state):
    lang = lang_of(state)
    try:
        path = export_model(session_model(state), state["recipe"])
        return Exported(str(path), ok(tr(lang, "model_exported")))
    except Exception as e:
        return only(Exported, export_msg=fail(e, lang))


def run_data(state):
    """API: the current run's tokens with their probabilities (as the run export writes them)."""
    run, error = api_run(state)
    if error:
        return error
    return run_record(run, run.tokenizer)  # the ids' own words: a checkpoint folder's tokenizer, else GPT-2's


def relabel(
    state, view, layer, head, log_scale, query, span, step, room_shown=None, request: gr.Request = None
) -> Relabelled:
    """After a change of the page's language: the choices' labels, the legend, the head examples,
    and (unless the run is still streaming: it redraws itself, or the page shows a classroom room's run,
    ``room_shown``: the room's record is shown in the new language) the status, attention and step views
    (the attention view and step the page last drew of this run, ``redraw.drawn_for``; of a run whose map
    the page has not drawn yet, the view at the run's last position and its last step, as after_run and
    last_step draw them: the query and step sliders still hold an earlier run's values). It draws while no
    other event of the page draws a map (``redraw.page_lock``): what it reads as drawn is then what the page
    shows."""
    with redraw.page_lock(request):
        return _relabel(state, view, layer, head, log_scale, query, span, room_shown, request)


def _relabel(state, view, layer, head, log_scale, query, span, room_shown, request) -> Relabelled:
    lang = lang_of(state)
    try:
        run = session_run(state)
    except ValueError:
        run = None
    given = (view, layer, head, log_scale, query, span)
    if run is None:
        view, layer, head, log_scale, query, span = redraw.drawn_inputs(request, "attention", given)
    else:
        drawn = redraw.drawn_for(request, "attention", run.id)
        view, layer, head, log_scale, query, span = drawn or (*given[:4], None, span)
    fixed = {
        "view": gr.update(choices=choices(VIEW_KEYS, lang)),
        "legend": legend(lang),
        "span": gr.update(choices=choices(av.SPAN_KEYS, lang)),
    }
    if run is not None and LOOP.running(run.id):
        return only(Relabelled, **fixed)
    _, head_labels = head_examples(view, lang)
    if head_labels:
        fixed["head_examples"] = gr.update(sample_labels=head_labels, label=tr(lang, "heads_label"))
    if room_shown:
        return only(Relabelled, **fixed)
    if run is None:  # nothing generated yet: the empty figures say so in the new language
        return only(Relabelled, **fixed, **attention_views(state, view, layer, head, log_scale, None, span)._asdict())
    context_length = session_model(state).cfg.context_length
    status = status_html(run, run.elapsed, "stopped" if run.stopped else "done", lang, context_length)
    att = attention_views(state, view, layer, head, log_scale, query, span)
    (step,) = redraw.drawn_for(request, "step", run.id) or (len(run.steps) - 1,)
    steps = inspect_step(state, step)._asdict() if run.steps else {}
    return only(Relabelled, **fixed, status=status, **att._asdict(), **steps)
