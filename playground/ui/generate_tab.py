"""The Generate half of "Generate & attention": stream tokens, stop, inspect a step, export.

The streaming loop is the heart of the app. Its costs are bounded per update (the chips grow by
appending; figures are drawn once the run ends or when asked), updates are paced across users,
and Stop is a flag the loop reads between two steps, so it takes effect within one decode step.

The streaming event outputs only the state, the chips and the status line: the browser re-applies
every output of an event on every streamed update, and a figure among them would be re-laid-out by
plotly each time. The figures come from a second event (``after_run``) chained after the stream.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import gradio as gr

from playground import figures
from playground.engine.tokenizer import load_tokenizer
from playground.i18n import tr_error
from playground.server.exports import export_model, export_run, reserve_export
from playground.server.runs import MAX_NEW_TOKENS, start_run

from . import attention_view as av
from .attention_view import SPANS, VIEWS, attention_views
from .chips import CHIPS_JS, CHIPS_TEMPLATE, LEGEND, ChipStream, status_html
from .common import (
    T,
    api_run,
    choices,
    dress,
    fail,
    lang_of,
    ok,
    parse_bool,
    parse_choice,
    parse_seed,
    parse_whole,
    session_model,
    session_run,
    tr,
    warn,
)

DECODE_LOCK = threading.Lock()
ACTIVE_STREAMS: set = set()  # one token per generation in flight, to pace the streamed updates
STOP_FLAGS: dict[str, threading.Event] = {}  # run id -> set by Stop; removed when the run ends
# Every streamed message costs the page a fixed amount of Gradio bookkeeping whatever it carries
# (20–60 ms on a loaded 2-core machine, Chromium profile), so updates come at most 5 times a second (per server, shared by the users
# generating): a run still reads as live, and a slow machine's page never falls behind the server.
STREAM_INTERVAL_S = 0.2


def generate_tokens(state, prompt, temperature, top_k, top_p, max_new_tokens, seed, greedy):
    """Stream tokens as chips with a status line (outputs: state, chips, status)."""
    lang = lang_of(state)
    try:
        greedy = parse_bool(greedy, "Greedy")
        seed = parse_seed(seed, "Sampling seed")
        max_new_tokens = parse_whole(max_new_tokens, "Max new tokens")  # start_run checks the range
        model = session_model(state)
        # replaces: the server keeps the new run under its id and lets the session's previous one go.
        run, gen = start_run(
            model,
            state["recipe"],
            prompt,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
            greedy=greedy,
            replaces=(state or {}).get("run_id"),
        )
    except Exception as e:
        yield state, gr.skip(), fail(e, lang)
        return
    run_id = run.id
    stop = STOP_FLAGS[run_id] = threading.Event()
    state = {**state, "run_id": run_id}
    token = object()
    ACTIVE_STREAMS.add(token)
    try:
        yield from _stream(state, run, iter(gen), stop)
    finally:
        ACTIVE_STREAMS.discard(token)
        STOP_FLAGS.pop(run_id, None)


def _stream(state, run, steps, stop):
    # The language is read at every update: the page may switch it while a run streams (in place).
    chips = ChipStream(run.prompt_ids)
    t0 = time.perf_counter()
    yield state, chips.delta(), status_html(run, 0.0, "running", lang_of(state))  # the prompt's chips at once
    last_yield = time.perf_counter()
    error = None
    while not stop.is_set():
        # One decode step at a time across all users: steps interleave fairly, and the cores are
        # not oversubscribed by several forwards each asking for every core (bench/: with 4 users
        # and no lock, the aggregate rate fell to half of one user's).
        try:
            with DECODE_LOCK:
                step = next(steps, None)
        except Exception as e:  # e.g. NaN logits at some step: keep the tokens made so far, say why
            error = e
            break
        if step is None:
            break
        run.steps.append(step)
        chips.add(step)
        now = time.perf_counter()
        run.elapsed = now - t0
        # Pacing by the number of active generations keeps the whole server near 5 updates/s.
        if now - last_yield > STREAM_INTERVAL_S * max(1, len(ACTIVE_STREAMS)):
            last_yield = now
            yield state, chips.delta(), status_html(run, run.elapsed, "running", lang_of(state))
    run.stopped = stop.is_set()
    run.elapsed = time.perf_counter() - t0
    lang = lang_of(state)
    final = status_html(run, run.elapsed, "stopped" if run.stopped else "done", lang)
    if error is not None:
        final = status_html(run, run.elapsed, "error", lang) + fail(error, lang)
    yield state, chips.delta(final=True), final


def after_run(state, view=VIEWS[0], layer=0, head=0, log_scale=True, span=SPANS[0]):
    """Once a run has ended: its attention (outputs: heatmap, query bars, query slider, message)."""
    if not (state or {}).get("run_id"):
        return (gr.skip(),) * 4
    return attention_views(state, view, layer, head, log_scale, None, span)


def last_step(state):
    """Once a run has ended: the step slider on its last step, and that step's distribution
    (outputs: step slider, prob bars, stages, step text). A separate event from ``after_run`` so the
    browser draws the figures in two tasks, not one long one."""
    try:
        run = session_run(state)
    except ValueError as e:
        return gr.skip(), gr.skip(), gr.skip(), f"⚠️ {tr_error(lang_of(state), e)}"
    if run is None or not run.steps:
        return (gr.skip(),) * 4
    n = len(run.steps)
    step_update = gr.update(minimum=0, maximum=max(1, n - 1), value=n - 1, visible=n > 1)
    return (step_update,) + tuple(inspect_step(state, n - 1))


def stop_generation(state):
    """Raise the run's stop flag; the streaming loop ends after its current step and reports how
    many tokens it made. A run that already finished is left as it is (its status says "Done")."""
    flag = STOP_FLAGS.get((state or {}).get("run_id") or "")
    if flag is not None:
        flag.set()
    return None


def inspect_step(state, step_index):
    """Probability bars, the stage-by-stage reshaping, and a sentence about one generated token."""
    try:
        run = session_run(state)
    except ValueError as e:
        return gr.skip(), gr.skip(), f"⚠️ {tr_error(lang_of(state), e)}"
    lang, present = lang_of(state), bool(state.get("present"))
    if run is None or not run.steps:
        empty = dress(figures.empty_figure(tr(lang, "generate_first")), lang, present)
        return empty, empty, tr(lang, "pick_one")
    try:
        i = parse_whole(step_index, "Step", 0, len(run.steps) - 1)
    except ValueError as e:
        return gr.skip(), gr.skip(), f"⚠️ {tr_error(lang_of(state), e)}"
    s = run.steps[i]
    tok = load_tokenizer()
    fp = figures.format_prob
    top_labels = [f"{tok.piece(t).display} ({t})" for t, _ in s.top]
    bars = figures.token_probability_bars(
        top_labels, [p for _, p in s.top], chosen=_index_of(s.top, s.token_id), title=tr(lang, "fig_step", i=i)
    )
    cand_labels = [f"{tok.piece(t).display} ({t})" for t in s.candidates]
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
    return dress(bars, lang, present), dress(stages, lang, present), text


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
        return (gr.skip(),) * 3 + (f"⚠️ {tr_error(lang_of(state), e)}", gr.skip())
    if run is None:
        return (gr.skip(),) * 5
    try:
        position = parse_whole(
            (getattr(evt, "_data", None) or {}).get("position"), "Token position", 0, len(run.token_ids) - 1
        )
    except ValueError as e:
        return (gr.skip(),) * 3 + (f"⚠️ {tr_error(lang_of(state), e)}", gr.skip())
    lang = lang_of(state)
    start, _ = run.window(session_model(state).cfg.context_length)
    note = ""
    if position < start:
        note = tr(lang, "outside_window", position=position, start=start, end=len(run.token_ids) - 1)
    query = gr.update(value=max(position, start))
    step = position - len(run.prompt_ids)
    if step < 0:
        text = tr(lang, "prompt_position", position=position) + note
        return (gr.skip(), gr.skip(), gr.skip(), text, query)
    bars, stages, text = inspect_step(state, step)
    return (gr.update(value=step), bars, stages, text + note, query)


def export_run_file(state, fmt):
    lang = lang_of(state)
    try:
        run = session_run(state)
        if run is None:
            return gr.skip(), warn(tr(lang, "no_run_export"))
        fmt = parse_choice(fmt, ("json", "npz"), "Export format")
        model = session_model(state)
        with reserve_export(model, run, fmt):  # refused before anything is allocated if it does not fit
            path = export_run(run, model, fmt)
        return str(path), ok(tr(lang, "run_exported", fmt=fmt))
    except Exception as e:
        return gr.skip(), fail(e, lang)


def export_model_file(state):
    lang = lang_of(state)
    try:
        path = export_model(session_model(state), state["recipe"])
        return str(path), ok(tr(lang, "model_exported"))
    except Exception as e:
        return gr.skip(), fail(e, lang)


def run_data(state):
    """API: the current run's tokens with their probabilities."""
    from playground.server.recipes import describe_recipe

    run, error = api_run(state)
    if error:
        return error
    tok = load_tokenizer()
    return {
        "model": describe_recipe(run.recipe),
        "settings": run.settings,
        "prompt_ids": run.prompt_ids,
        "prompt_tokens_cropped": run.n_cropped,
        "token_ids": run.token_ids,
        "stopped": run.stopped,
        "text": tok.decode([s.token_id for s in run.steps]),
        "steps": [
            {
                "token_id": s.token_id,
                "token": tok.piece(s.token_id).display,
                "prob": s.prob,
                "raw_prob": s.raw_prob,
                "rank": s.rank,
                "entropy_bits": s.entropy,
                "top": [[t, p] for t, p in s.top],
            }
            for s in run.steps
        ],
    }


# ----------------------------------------------------------------------------------------------
# Layout and wiring

EXAMPLES = [
    ["ROMEO:\nWhat light through yonder window breaks?\n"],
    ["First Citizen:\nBefore we proceed any further, hear me speak.\n"],
    ["Hello, I am a language model, and"],
    ["The capital of France is Paris. The capital of Germany is"],
    ["从前有一座山，山上有一座庙，"],
    ["注意力机制让模型在生成每个词时"],
]


def layout(model_cfg) -> SimpleNamespace:
    """Rows: the prompt beside the knobs; the tokens beside their attention, so a run's chips and its
    heatmap share the screen (a 1024×768 projector included); the chosen step's stages at full width."""
    from .model_tab import head_examples

    c = SimpleNamespace()
    with gr.Row():
        with gr.Column(scale=2, min_width=300):
            c.prompt = gr.Textbox(EXAMPLES[0][0], label=T("prompt"), lines=3, max_length=20_000, elem_id="pg-prompt")
            gr.Examples(EXAMPLES, inputs=[c.prompt], label=T("examples"), elem_id="pg-examples")
        with gr.Column(scale=3, min_width=300):
            with gr.Row():
                c.temperature = gr.Slider(0, 2, value=0.8, step=0.05, label=T("temperature"), min_width=200)
                c.top_k = gr.Slider(0, 200, value=40, step=1, label=T("top_k"), min_width=200)
            with gr.Row():
                c.top_p = gr.Slider(0.05, 1, value=1.0, step=0.05, label=T("top_p"), min_width=200)
                c.max_new = gr.Slider(
                    1, MAX_NEW_TOKENS, value=40, step=1, label=T("max_new_tokens"), elem_id="pg-max-new", min_width=200
                )
            c.input_msg = gr.HTML(elem_id="pg-input-msg")
            with gr.Row(elem_classes=["pg-advanced"]):
                c.seed = gr.Number(42, label=T("seed"), min_width=100)
                c.greedy = gr.Checkbox(False, label=T("greedy"))
            with gr.Row():
                c.gen_btn = gr.Button(T("generate"), variant="primary", elem_id="pg-generate")
                c.stop_btn = gr.Button(T("stop"), variant="stop", elem_id="pg-stop")
    with gr.Row():
        with gr.Column(scale=2, min_width=300):
            c.status = gr.HTML(elem_id="pg-status")
            c.legend = gr.HTML(LEGEND, elem_id="pg-legend")
            c.chips = gr.HTML(
                "", label=T("tokens"), elem_id="pg-chips", js_on_load=CHIPS_JS, html_template=CHIPS_TEMPLATE
            )
            c.step_slider = gr.Slider(0, 1, value=0, step=1, label=T("step"), visible=False, elem_id="pg-step")
            c.step_md = gr.Markdown(elem_id="pg-step-md")
            c.prob_plot = gr.Plot(show_label=False)
        with gr.Column(scale=3, min_width=300):
            with gr.Row():
                c.view = gr.Dropdown(
                    choices(av.VIEW_KEYS), value=VIEWS[0], label=T("view"), elem_id="pg-view", min_width=200
                )
                c.log_scale = gr.Checkbox(True, label=T("log_scale"), min_width=200)
                c.span = gr.Radio(
                    choices(av.SPAN_KEYS), value=SPANS[0], label=T("heatmap_range"), elem_id="pg-span", min_width=200
                )
            with gr.Row():
                c.layer = gr.Slider(
                    0,
                    max(1, model_cfg.n_layers - 1),
                    value=0,
                    step=1,
                    label=T("layer"),
                    visible=model_cfg.n_layers > 1,
                    elem_id="pg-layer",
                )
                c.head = gr.Slider(
                    0,
                    max(1, model_cfg.n_heads - 1),
                    value=0,
                    step=1,
                    label=T("head"),
                    visible=model_cfg.n_heads > 1,
                    elem_id="pg-head",
                )
                c.query = gr.Slider(0, 1, value=0, step=1, label=T("query"), elem_id="pg-query")
            head_rows, head_labels = head_examples(VIEWS[0])
            c.head_examples = None
            with gr.Column(visible=bool(head_rows)) as c.head_box:
                if head_rows:
                    c.head_examples = gr.Examples(
                        head_rows,
                        inputs=[c.prompt, c.view, c.layer, c.head],
                        example_labels=head_labels,
                        label=T("heads_label"),
                    )
            c.att_msg = gr.HTML(elem_id="pg-att-msg")
            c.heatmap = gr.Plot(show_label=False, elem_id="pg-heatmap")
            c.query_plot = gr.Plot(show_label=False, elem_id="pg-query-plot")
            with gr.Row(elem_classes=["pg-advanced"]):
                c.exp_json = gr.Button(T("export_json"), size="sm")
                c.exp_npz = gr.Button(T("export_npz"), size="sm")
                c.exp_model = gr.Button(T("export_model"), size="sm")
            c.export_msg = gr.HTML()
            # Hidden until there is something to download (an empty box only takes room).
            c.export_file = gr.File(label=T("download"), interactive=False, visible=False, height=100)
            c.attention_json = gr.JSON(visible=False)
            c.run_json = gr.JSON(visible=False)
    c.stages_plot = gr.Plot(show_label=False)  # the step's four stage panels need the page's width
    return c


def range_note_js(key: str, lo: float, hi: float) -> str:
    """Browser-only check for a slider's number box: a typed value outside the range is clamped by
    the slider on blur, so say so instead of changing it silently (in the page's language, which
    the hidden language probe shows)."""

    texts = {
        lang: tr(
            lang,
            "range_note",
            name=tr(lang, key).split("（")[0].split(" (")[0],
            value="${v}",
            lo=lo,
            hi=hi,
            clamped=f"${{Math.min(Math.max(v, {lo}), {hi})}}",
        )
        for lang in ("en", "zh-CN")
    }
    zh = "(document.querySelector('#pg-lang-probe')?.innerText || '').trim() === 'zh-CN'"
    return (
        f"(v) => (v === null || v === '' || (v >= {lo} && v <= {hi})) ? '' : "
        f"`<div class='pg-msg pg-error'>⚠️ ${{{zh} ? `{texts['zh-CN']}` : `{texts['en']}`}}</div>`"
    )


def wire(page) -> None:
    g, state = page.generate, page.state
    att_outputs = [g.heatmap, g.query_plot, g.query, g.att_msg]
    step_outputs = [g.step_slider, g.prob_plot, g.stages_plot, g.step_md]
    gen_inputs = [state, g.prompt, g.temperature, g.top_k, g.top_p, g.max_new, g.seed, g.greedy]
    # The stream updates only chips and status; the figures follow once it ends (see the module's docstring).
    for trigger, api in ((g.gen_btn.click, {"api_name": "generate"}), (g.prompt.submit, {"api_visibility": "private"})):
        # show_progress hidden: the status line says what is happening, and Gradio's own progress
        # overlay would be re-rendered on every streamed update.
        trigger(
            generate_tokens,
            gen_inputs,
            [state, g.chips, g.status],
            concurrency_id="generate",
            concurrency_limit=4,
            show_progress="hidden",
            **api,
        ).then(
            after_run,
            [state, g.view, g.layer, g.head, g.log_scale, g.span],
            att_outputs,
            api_visibility="private",
        ).then(last_step, state, step_outputs, api_visibility="private")
    # Stop only raises a flag: it never waits behind generation or model builds.
    g.stop_btn.click(stop_generation, state, None, api_name="stop", concurrency_id="stop", concurrency_limit=None)
    for slider, name in (
        (g.temperature, "temperature"),
        (g.top_k, "top_k"),
        (g.top_p, "top_p"),
        (g.max_new, "max_new_tokens"),
    ):
        slider.input(None, slider, g.input_msg, js=range_note_js(name, slider.minimum, slider.maximum))
    g.step_slider.input(
        inspect_step,
        [state, g.step_slider],
        [g.prob_plot, g.stages_plot, g.step_md],
        api_name="inspect_step",
        trigger_mode="always_last",
    )
    att_inputs = [state, g.view, g.layer, g.head, g.log_scale, g.query, g.span]
    g.chips.pick(
        pick_token,
        state,
        step_outputs + [g.query],
        api_visibility="private",
        trigger_mode="always_last",
    ).then(attention_views, att_inputs, att_outputs, api_visibility="private")
    # .input: a slider's dragging, typing in its number box and arrow keys alike (not .release).
    for control in (g.view, g.log_scale, g.layer, g.head, g.query, g.span):
        control.input(attention_views, att_inputs, att_outputs, api_visibility="private", trigger_mode="always_last")
    for button, handler, api in (
        (g.exp_json, lambda s: export_run_file(s, "json"), "export_run_json"),
        (g.exp_npz, lambda s: export_run_file(s, "npz"), "export_run_npz"),
        (g.exp_model, export_model_file, "export_model"),
    ):
        # The API returns the file's path; the page then shows the (until now hidden) download box.
        button.click(handler, state, [g.export_file, g.export_msg], api_name=api).then(
            lambda f: gr.update(visible=bool(f)), g.export_file, g.export_file, api_visibility="private"
        )
    # A language switch: the range's choices, and a whole-run map redrawn as it was (prefs redraws the newest).
    from . import prefs  # (prefs imports this module)

    def relabel(state, view, layer, head, log_scale, query, span):
        redraw = (
            attention_views(state, view, layer, head, log_scale, query, span)
            if span == SPANS[1]
            else (gr.skip(),) * len(att_outputs)
        )
        return (gr.update(choices=choices(av.SPAN_KEYS, lang_of(state))),) + tuple(redraw)

    prefs.on_change(page, relabel, att_inputs[1:], [g.span] + att_outputs)
    # API-only endpoints: raw numbers for gradio_client users.
    gr.Button(visible=False).click(
        av.attention_data, [state, g.layer, g.head], g.attention_json, api_name="attention_data"
    )
    gr.Button(visible=False).click(run_data, state, g.run_json, api_name="run_data")
    gr.Button(visible=False).click(attention_views, att_inputs, att_outputs, api_name="attention")
