"""The Score & compare tab: score a text under the session's model (A) and a second model (B), run
two models or two settings side by side, read a step's sampling receipt, replay or share a run.

Model A is always the session's current model (Model tab); model B is named by a recipe kept in
this tab's own state and built through the shared cache and the memory budget like any model.
``layout()`` builds the components, ``wire(page)`` connects them; handlers are plain functions.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import gradio as gr

from playground.engine.config import DEFAULT_PRESET, PRESETS
from playground.engine.receipts import receipt
from playground.engine.tokenizer import load_tokenizer
from playground.errors import UserError
from playground.inside.scoring import compare_scores, decode_upload, score_text
from playground.server.files import exports_dir
from playground.server.model_cache import CACHE
from playground.server.recipes import describe_recipe
from playground.server.replay import model_for, read_record, replay, replay_record, write_record
from playground.server.runs import start_run

from . import compare_views as cv
from . import model_tab as mt
from . import prefs, redraw, share
from .common import (
    T,
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
from .generate_tab import DECODE_LOCK

SOURCES = ("paste", "upload", "run")  # ids the API sends; labels follow the language
SOURCE_KEYS = dict(zip(SOURCES, ("src_paste", "src_upload", "src_run")))  # labels in the page's language
MAX_TEXT_FILE_BYTES = 5_000_000
MAX_COMPARE_NEW = 200  # tokens per stream in the side-by-side views
STREAM_INTERVAL_S = 0.25


def no_run() -> UserError:
    """The refusal of every view that needs the Generate tab's run."""
    return UserError("compare.no_run", "Generate something in the Generate tab first: there is no current run.")


def _report_message(report, lang) -> str:
    """replay's report message in the page's language."""
    if lang == "en":
        return report.message()
    if report.identical:
        return tr(lang, "cmp_identical", steps=report.steps) + (
            f" ({'; '.join(report.reasons)}.)" if report.reasons else ""
        )
    d = report.first_difference
    kind = tr(lang, "cmp_kind_token" if d["recorded_token"] != d["replayed_token"] else "cmp_kind_prob")
    why = "; ".join(report.reasons) if report.reasons else tr(lang, "cmp_why_arith")
    return tr(
        lang,
        "cmp_differs",
        step=d["step"],
        kind=kind,
        rec=d["recorded_token"],
        rp=repr(d["recorded_prob"]),
        rep=d["replayed_token"],
        pp=repr(d["replayed_prob"]),
        why=why,
    )


def text_from(state, source, text, upload, replace) -> str:
    """The text to score, from the chosen source (refusals are ValueErrors with the reason)."""
    source = parse_choice(source, SOURCES, "Text source")
    if source == SOURCES[0]:
        return text if isinstance(text, str) else ""
    if source == SOURCES[1]:
        path = upload if isinstance(upload, str) else getattr(upload, "name", None)
        if not path:
            raise UserError("compare.no_file", "Choose a .txt file to upload first.")
        size = os.path.getsize(path)
        if size > MAX_TEXT_FILE_BYTES:
            raise UserError(
                "compare.file_big",
                "This file is {mb} MB; the limit for a text to score is {limit} MB.",
                mb=f"{size / 1e6:,.1f}",
                limit=f"{MAX_TEXT_FILE_BYTES / 1e6:,.0f}",
            )
        return decode_upload(Path(path).read_bytes(), replace=parse_bool(replace, "Replace undecodable bytes"))
    run = session_run(state)
    if run is None:
        raise no_run()
    return load_tokenizer().decode(run.token_ids)


def _stride(value) -> int | None:
    return None if value in (None, "", 0) else parse_whole(value, "Stride", 1)


def model_b(cmp_state):
    recipe = (cmp_state or {}).get("recipe")
    if not recipe:
        raise UserError(
            "compare.no_b", "Load a second model (B) first: open “Second model (B)”, choose its weights and press Load."
        )
    return CACHE.get(recipe), recipe


def load_model_b(
    cmp_state,
    train_state,
    weights,
    preset,
    seed,
    hub_name,
    upload,
    dtype,
    progress=gr.Progress(),
    request: gr.Request = None,
):
    """Build or load model B (any weights the Model tab offers). Outputs: compare state, message."""
    lang = lang_of(train_state)
    try:
        cfg = PRESETS[parse_choice(preset, list(PRESETS), "Preset")]
        fields = [getattr(cfg, f) for f in mt.FIELDS]
        recipe = mt.recipe_from_form(weights, seed, hub_name, upload, dtype, *fields, train_state=train_state)
        t0 = time.perf_counter()
        CACHE.get(recipe, progress=lambda frac, desc: progress(frac, desc=desc))
        seconds = f"{time.perf_counter() - t0:.2f}"
        draw = lambda lang, present=False: ok(
            tr(
                lang,
                "cmp_b_ready",
                what=describe_recipe(recipe, lang),  # noqa: E731
                seconds=seconds,
            )
        )
        cmp_state = {**(cmp_state or {}), "recipe": recipe}
    except Exception as e:
        cmp_state, draw = gr.skip(), lambda lang, present=False, e=e: fail(e, lang)  # noqa: E731
    redraw.remember(request, "cmp_b", draw)
    return cmp_state, draw(lang)


def score(state, cmp_state, source, text, upload, replace, stride, both=False, progress=gr.Progress(), request=None):
    """Outputs: message, figures table, chips A, chips B, difference chips, figure, raw numbers (JSON)."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    draw, n_tokens = _score(state, cmp_state, source, text, upload, replace, stride, both, progress, lang)
    # (about 80 bytes a token and model: ids, surprisal, probability, rank, top guess, context)
    redraw.remember(request, "cmp_score", lambda lang, present: draw(lang, present)[:-1], nbytes=80 * n_tokens)
    return draw(lang, present)


def _score(state, cmp_state, source, text, upload, replace, stride, both, progress, lang):
    """Scores the text; returns (draw(lang, present) -> score's outputs: the models' names, messages,
    table, chips and figure in that language, the same numbers; tokens scored in all)."""
    try:
        text = text_from(state, source, text, upload, replace)
        stride = _stride(stride)
        model_a = session_model(state)
        label_a = f"A: {describe_recipe(state['recipe'], lang)}"
        pairs = [(model_a, label_a)]
        if both:
            mb, recipe_b = model_b(cmp_state)
            pairs.append((mb, f"B: {describe_recipe(recipe_b, lang)}"))
        t0 = time.perf_counter()
        results = []
        for k, (model, label) in enumerate(pairs):

            def report(done, total, k=k, label=label):
                progress(
                    (k + done / max(total, 1)) / len(pairs),
                    desc=tr(lang, "cmp_scoring", label=label, done=f"{done:,}", total=f"{total:,}"),
                )

            s = min(stride, model.cfg.context_length) if stride else None
            results.append(score_text(model, text, stride=s, progress=report, label=label))
        seconds = time.perf_counter() - t0
    except Exception as e:
        return (lambda lang, present, e=e: (fail(e, lang),) + (gr.skip(),) * 6), 0
    comparison = compare_scores(*results) if both else None
    recipes = [state["recipe"]] + ([cmp_state["recipe"]] if both else [])
    return (
        lambda lang, present: _score_outputs(results, recipes, comparison, seconds, lang, present),
        sum(len(s.token_ids) for s in results),
    )


def _score_outputs(results, recipes, comparison, seconds, lang, present):
    for s, ab, recipe in zip(results, "AB", recipes):
        s.label = f"{ab}: {describe_recipe(recipe, lang)}"
    message = ok(
        tr(
            lang,
            "cmp_scored",
            n=f"{len(results[0].token_ids):,}",
            models=tr(lang, "cmp_and").join(s.label for s in results),
            seconds=f"{seconds:.2f}",
        )
    )
    table = cv.figures_table(*results, lang=lang)
    figure = dress(cv.surprisal_figure(*results, lang=lang), lang, present)
    if comparison is None:
        return message, table, cv.score_chips(results[0], lang=lang), "", "", figure, results[0].to_dict()
    changed = ", ".join(f"{p} ({d:+.1f})" for p, d in comparison.most_changed(5))
    table += "\n\n" + tr(
        lang,
        "cmp_diff_line",
        loss=f"{results[1].loss_nats - results[0].loss_nats:+.3f}",
        bpb=f"{results[1].bits_per_byte - results[0].bits_per_byte:+.3f}",
        changed=changed,
    )
    return (
        message,
        table,
        cv.score_chips(results[0], lang=lang),
        cv.score_chips(results[1], lang=lang),
        cv.difference_chips(comparison, lang),
        figure,
        comparison.to_dict(),
    )


def score_a(
    state, cmp_state, source, text, upload, replace, stride, progress=gr.Progress(), request: gr.Request = None
):
    return score(
        state, cmp_state, source, text, upload, replace, stride, both=False, progress=progress, request=request
    )


def score_ab(
    state, cmp_state, source, text, upload, replace, stride, progress=gr.Progress(), request: gr.Request = None
):
    return score(state, cmp_state, source, text, upload, replace, stride, both=True, progress=progress, request=request)


# ----------------------------------------------------------------------------------------------
# Two streams


def _streams(pairs, prompt, seed, max_new, titles, lang="en", request=None):
    """Run two generations step by step, yielding (message, side-by-side HTML). ``titles(lang)`` names
    the two streams."""
    max_new = parse_whole(max_new, "Max new tokens", 1, MAX_COMPARE_NEW)
    seed = parse_seed(seed, "Sampling seed")
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")  # both streams share it: only the model/settings differ
    gens = []
    for model, recipe, settings in pairs:
        run, gen = start_run(model, recipe, prompt, max_new_tokens=max_new, seed=seed, **settings)
        gens.append((run, iter(gen)))
    steps = ([], [])
    prompt_ids = gens[0][0].prompt_ids
    t0 = last = time.perf_counter()
    yield (
        ok(tr(lang, "cmp_streams", n=max_new, seed=seed)),
        cv.side_by_side(titles(lang), prompt_ids, *steps, False, lang),
    )
    for _ in range(max_new):
        for (_run, it), out in zip(gens, steps):
            with DECODE_LOCK:
                step = next(it, None)
            if step is not None:
                out.append(step)
        if time.perf_counter() - last > STREAM_INTERVAL_S:
            last = time.perf_counter()
            yield gr.skip(), cv.side_by_side(titles(lang), prompt_ids, *steps, False, lang)
    seconds = f"{time.perf_counter() - t0:.1f}"
    # What the columns show of each step (not its attention rows), to draw them again in another language.
    kept = tuple(
        [SimpleNamespace(index=s.index, token_id=s.token_id, prob=s.prob, raw_prob=s.raw_prob) for s in out]
        for out in steps
    )

    def draw(lang, present=False):
        return (
            ok(tr(lang, "cmp_streams_done", n=max_new, seconds=seconds, seed=seed)),
            cv.side_by_side(titles(lang), prompt_ids, *kept, True, lang),
        )

    redraw.remember(request, "cmp_side", draw)
    yield draw(lang)


def _settings(temperature, top_k, top_p, greedy=False) -> dict:
    return {"temperature": temperature, "top_k": top_k, "top_p": top_p, "greedy": parse_bool(greedy, "Greedy")}


def _stream_error(e, lang, request):
    draw = lambda lang, present=False: (fail(e, lang), gr.skip())  # noqa: E731
    redraw.remember(request, "cmp_side", draw)
    return draw(lang)


def generate_two_models(state, cmp_state, prompt, seed, max_new, temperature, top_k, top_p, request: gr.Request = None):
    """The same prompt, settings and seed through model A and model B. Outputs: message, streams."""
    lang = lang_of(state)
    try:
        mb, recipe_b = model_b(cmp_state)
        settings = _settings(temperature, top_k, top_p)
        pairs = [(session_model(state), state["recipe"], settings), (mb, recipe_b, settings)]
        recipe_a = state["recipe"]
        titles = lambda lang: (f"A: {describe_recipe(recipe_a, lang)}", f"B: {describe_recipe(recipe_b, lang)}")  # noqa: E731
        yield from _streams(pairs, prompt, seed, max_new, titles, lang, request)
    except Exception as e:
        yield _stream_error(e, lang, request)


def generate_two_settings(state, prompt, seed, max_new, t_a, k_a, p_a, t_b, k_b, p_b, request: gr.Request = None):
    """One model (A), one prompt and seed, two sampling settings. Outputs: message, streams."""
    lang = lang_of(state)
    try:
        model = session_model(state)
        a, b = _settings(t_a, k_a, p_a), _settings(t_b, k_b, p_b)
        name = lambda lang, ab, s: tr(
            lang,
            "cmp_settings",
            ab=ab,
            t=s["temperature"],  # noqa: E731
            k=s["top_k"] or tr(lang, "cmp_off"),
            p=s["top_p"],
        )
        pairs = [(model, state["recipe"], a), (model, state["recipe"], b)]
        yield from _streams(
            pairs, prompt, seed, max_new, lambda lang: (name(lang, "A", a), name(lang, "B", b)), lang, request
        )
    except Exception as e:
        yield _stream_error(e, lang, request)


# ----------------------------------------------------------------------------------------------
# Receipt, replay, share


def show_receipt(state, step_index, request: gr.Request = None):
    """The sampling receipt of one step of the session's current run. Outputs: HTML, JSON."""
    lang = lang_of(state)
    try:
        run = session_run(state)
        if run is None or not run.steps:
            raise no_run()
        i = parse_whole(step_index, "Step", 0, len(run.steps) - 1)
        r = receipt(run.steps[i])
    except Exception as e:
        draw = lambda lang, present=False, e=e: fail(e, lang)  # noqa: E731
        redraw.remember(request, "cmp_receipt", draw)
        return draw(lang), gr.skip()
    tok = load_tokenizer()
    draw = lambda lang, present=False: cv.receipt_html(  # noqa: E731
        r, cv.explain_text(r, lambda t: f"“{tok.piece(t).display}”", lang), lang
    )
    redraw.remember(request, "cmp_receipt", draw)
    return draw(lang), r.to_dict()


def export_replay(state, request: gr.Request = None):
    """A small JSON file that reproduces the current run. Outputs: file, message."""
    lang = lang_of(state)
    try:
        run = session_run(state)
        if run is None or not run.steps:
            raise no_run()
        path = str(write_record(replay_record(run, session_model(state)), exports_dir()))
        draw = lambda lang, present=False: ok(tr(lang, "cmp_exported"))  # noqa: E731
    except Exception as e:
        path, draw = gr.skip(), lambda lang, present=False, e=e: fail(e, lang)  # noqa: E731
    redraw.remember(request, "cmp_export", draw)
    return path, draw(lang)


def replay_file(state, upload, request: gr.Request = None):
    """Replay an uploaded replay file or run export. Outputs: report HTML, report JSON."""
    lang = lang_of(state)
    try:
        path = upload if isinstance(upload, str) else getattr(upload, "name", None)
        if not path:
            raise UserError("compare.no_replay_file", "Upload a replay file (or a run export) first.")
        record = read_record(path)
        model, recipe = model_for(record, (session_model(state), state["recipe"]))
        report = replay(record, model, step_lock=DECODE_LOCK)
    except Exception as e:
        redraw.remember(request, "cmp_replay", lambda lang, present=False, e=e: fail(e, lang))
        return fail(e, lang), {"error": str(e)}
    draw = lambda lang, present=False: _replay_html(report, record, recipe, lang)  # noqa: E731
    redraw.remember(request, "cmp_replay", draw)
    return draw(lang), report.to_dict()


def _replay_html(report, record, recipe, lang) -> str:
    tok = load_tokenizer()
    need = record["token_ids"]
    head = (ok if report.identical else warn)(_report_message(report, lang))
    d = report.first_difference
    recorded = tok.decode(need[: (d["step"] if d else len(need))])
    detail = (
        f"<p>{ok(tr(lang, 'cmp_replayed', what=describe_recipe(recipe, lang)))}</p>"
        f"<p><b>{tr(lang, 'cmp_prompt')}</b>: <span class='pg-token-text'>{_esc(tok.decode(record['prompt_ids']))}</span></p>"
        f"<p><b>{tr(lang, 'cmp_same_text')}</b>: <span class='pg-token-text'>{_esc(recorded)}</span></p>"
    )
    return head + detail


def _esc(text: str) -> str:
    import html

    return html.escape(text).replace("\n", "<br>")


def redraw_views(request: gr.Request, state):
    """After a language switch: every view of this tab the page drew, in the new language (same
    numbers; nothing is scored or generated again)."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    parts = (("cmp_b", 1), ("cmp_score", 6), ("cmp_side", 2), ("cmp_receipt", 1), ("cmp_replay", 1), ("cmp_export", 1))
    return sum((redraw.redraw(request, key, lang, present, n) for key, n in parts), ())


# ----------------------------------------------------------------------------------------------
# Layout and wiring


def layout() -> SimpleNamespace:
    """Model B's form, then the score, side-by-side, receipt and replay sections."""
    c = SimpleNamespace()
    c.cmp_state = gr.State({"recipe": None})
    gr.Markdown(T("compare_intro"))
    with gr.Accordion(T("model_b"), open=False):
        with gr.Row():
            c.b_weights = gr.Radio(choices(mt.WEIGHT_KEYS), value="random", label=T("weights"))
            c.b_preset = gr.Dropdown(
                list(PRESETS),
                value="nano (2 layers, d64)" if "nano (2 layers, d64)" in PRESETS else DEFAULT_PRESET,
                label=T("preset"),
            )
        with gr.Row():
            c.b_seed = gr.Number(0, label=T("seed_init"), min_width=100)
            c.b_hub = gr.Dropdown(list(mt.HUB_MODELS), value=list(mt.HUB_MODELS)[0], label=T("hub_model"))
            c.b_dtype = gr.Radio(list(mt.DTYPES), value="float32", label=T("dtype"))
        c.b_upload = gr.File(label=T("upload"), file_types=[".safetensors"], type="filepath")
        c.b_btn = gr.Button(T("load_b"), elem_id="pg-load-b")
        c.b_msg = gr.HTML(elem_id="pg-b-msg")
    with gr.Accordion(T("score_section"), open=True):
        with gr.Row():
            with gr.Column(scale=2, min_width=320):
                c.source = gr.Radio(choices(SOURCE_KEYS), value=SOURCES[0], label=T("text_source"))
                c.text = gr.Textbox(label=T("text_to_score"), lines=5, max_length=200_000, elem_id="pg-score-text")
                c.upload = gr.File(label=T("text_upload"), file_types=[".txt"], type="filepath")
                with gr.Row():
                    c.replace = gr.Checkbox(False, label=T("replace_bytes"))
                    c.stride = gr.Number(0, label=T("stride"), precision=0, minimum=0)
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
            c.s_seed = gr.Number(42, label=T("seed"), min_width=100)
            c.s_max = gr.Slider(
                1,
                MAX_COMPARE_NEW,
                value=40,
                step=1,
                label=T("max_new_tokens"),
                elem_id="pg-side-max",
                scale=2,
                min_width=240,
            )  # (narrower, its label wrapped to five lines)
        with gr.Row():
            c.t_a = gr.Slider(0, 2, value=0.7, step=0.05, label=T("temp_a"))
            c.k_a = gr.Slider(0, 200, value=0, step=1, label=T("top_k_a"))
            c.p_a = gr.Slider(0.05, 1, value=1.0, step=0.05, label=T("top_p_a"))
        with gr.Row():
            c.t_b = gr.Slider(0, 2, value=1.5, step=0.05, label=T("temp_b"))
            c.k_b = gr.Slider(0, 200, value=0, step=1, label=T("top_k_b"))
            c.p_b = gr.Slider(0.05, 1, value=1.0, step=0.05, label=T("top_p_b"))
        with gr.Row():
            c.two_models_btn = gr.Button(T("two_models"), elem_id="pg-two-models")
            c.two_settings_btn = gr.Button(T("two_settings"), variant="primary", elem_id="pg-two-settings")
        c.side_msg = gr.HTML(elem_id="pg-side-msg")
        c.side = gr.HTML(elem_id="pg-side")
    with gr.Accordion(T("receipt_section"), open=False):
        with gr.Row():
            c.r_step = gr.Number(0, label=T("step"), precision=0, minimum=0)
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


def wire(page) -> None:
    """Every action has an api_name. A link's query parameters fill the Generate tab on page load."""
    c, state, g = page.compare, page.state, page.generate
    # Its choice labels follow the page's language like the Model tab's (values stay the API's).
    # The score legend and the text source's choices too.
    prefs.on_change(
        page,
        lambda st: (
            gr.update(choices=choices(mt.WEIGHT_KEYS, lang_of(st))),
            cv.surprisal_legend(lang_of(st)),
            gr.update(choices=choices(SOURCE_KEYS, lang_of(st))),
        ),
        [],
        [c.b_weights, c.legend, c.source],
    )
    prefs.on_change(
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
    score_inputs = [state, c.cmp_state, c.source, c.text, c.upload, c.replace, c.stride]
    score_outputs = [c.score_msg, c.table, c.chips_a, c.chips_b, c.diff, c.figure, c.score_json]
    c.score_btn.click(
        score_a, score_inputs, score_outputs, api_name="score_text", concurrency_id="score", concurrency_limit=2
    )
    c.score_ab_btn.click(
        score_ab, score_inputs, score_outputs, api_name="score_compare", concurrency_id="score", concurrency_limit=2
    )
    c.two_models_btn.click(
        generate_two_models,
        [state, c.cmp_state, c.s_prompt, c.s_seed, c.s_max, c.t_a, c.k_a, c.p_a],
        [c.side_msg, c.side],
        api_name="generate_two_models",
        concurrency_id="generate",
        concurrency_limit=4,
        show_progress="hidden",
    )
    c.two_settings_btn.click(
        generate_two_settings,
        [state, c.s_prompt, c.s_seed, c.s_max, c.t_a, c.k_a, c.p_a, c.t_b, c.k_b, c.p_b],
        [c.side_msg, c.side],
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
        concurrency_id="generate",
        concurrency_limit=4,
    )
    c.export_btn.click(export_replay, state, [c.export_out, c.export_msg], api_name="export_replay")
    gen_controls = [getattr(g, name) for name in share.ORDER]
    c.link_btn.click(share.share_link, gen_controls, c.link, api_name="share_link")
    # A separate load event from the Model tab's load_session: it only touches the Generate controls.
    page.demo.load(share.prefill_from_url, None, gen_controls + [page.tabs, g.input_msg], api_visibility="private")
