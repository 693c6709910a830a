"""The Score & compare tab's handlers: score texts, model B, receipts, replay, share links.

The Score & compare tab: score a text under the session's model (A) and a second model (B), run
two models or two settings side by side, read a step's sampling receipt, replay or share a run.

Model A is always the session's current model (Model tab); model B is named by a recipe kept in
this tab's own state and built through the shared cache and the memory budget like any model.
Handlers only, plain functions; compare_layout builds the components and wires them.
"""

from __future__ import annotations

import html
import os
import time
from pathlib import Path

import gradio as gr

from playground.errors import UserError
from playground.server.catalog import PRESETS
from playground.server.files import exports_dir
from playground.server.model_cache import CACHE
from playground.server.replay import model_for, read_record, replay, replay_record, write_record
from playground.server.scores import compare_scores, decode_upload, receipt, score_text
from playground.server.tokens import gpt2_tokenizer, refuse_own_tokenizer
from playground.settings import parse_bool, parse_choice, parse_whole
from playground.ui import model_switch as ms
from playground.ui import redraw
from playground.ui.common import dress, fail, for_the_session, lang_of, ok, session_model, session_run, tr, warn
from playground.ui.model_words import describe_recipe
from playground.ui.results import only, result

from . import views as cv
from .streams import Streams, sampling_settings, shared_length_and_seed, two_streams

SOURCES = ("paste", "upload", "run")  # ids the API sends; labels follow the language
SOURCE_KEYS = dict(zip(SOURCES, ("src_paste", "src_upload", "src_run")))  # labels in the page's language
MAX_TEXT_FILE_BYTES = 5_000_000


# The score section's outputs: message, figures table, chips A, chips B, difference chips, figure, raw numbers.
Scored = result("Scored", "score_msg", "table", "chips_a", "chips_b", "diff", "figure", "score_json")


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
    return run.tokenizer.decode(run.token_ids)


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
        fields = [getattr(cfg, f) for f in ms.FIELDS]
        recipe = ms.recipe_from_form(weights, seed, hub_name, upload, dtype, *fields, train_state=train_state)
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


@for_the_session
def score(state, cmp_state, source, text, upload, replace, stride, both=False, progress=gr.Progress(), request=None):
    """Scores the text under model A (and B when ``both``): a ``Scored``."""
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
        refuse_own_tokenizer(model_a, "compare")
        label_a = f"A: {describe_recipe(state['recipe'], lang)}"
        pairs = [(model_a, label_a)]
        if both:
            mb, recipe_b = model_b(cmp_state)
            refuse_own_tokenizer(mb, "compare")
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
        return (lambda lang, present, e=e: only(Scored, score_msg=fail(e, lang))), 0
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
            n=f"{results[0].n_scored:,}",
            total=f"{len(results[0].token_ids):,}",
            models=tr(lang, "cmp_and").join(s.label for s in results),
            seconds=f"{seconds:.2f}",
        )
    )
    table = cv.figures_table(*results, lang=lang)
    figure = dress(cv.surprisal_figure(*results, lang=lang), lang, present)
    if comparison is None:
        return Scored(message, table, cv.score_chips(results[0], lang=lang), "", "", figure, results[0].to_dict())
    changed = ", ".join(f"{p} ({d:+.1f})" for p, d in comparison.most_changed(5))
    table += "\n\n" + tr(
        lang,
        "cmp_diff_line",
        loss=f"{results[1].loss_nats - results[0].loss_nats:+.3f}",
        bpb=f"{results[1].bits_per_byte - results[0].bits_per_byte:+.3f}",
        changed=changed,
    )
    return Scored(
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


def _stream_error(e, lang, request):
    draw = lambda lang, present=False: only(Streams, side_msg=fail(e, lang))  # noqa: E731
    redraw.remember(request, "cmp_side", draw)
    return draw(lang)


@for_the_session
def generate_two_models(state, cmp_state, prompt, seed, max_new, temperature, top_k, top_p, request: gr.Request = None):
    """The same prompt, settings and seed through model A and model B. Outputs: message, streams."""
    lang = lang_of(state)
    try:
        mb, recipe_b = model_b(cmp_state)
        settings = sampling_settings(temperature, top_k, top_p, *shared_length_and_seed(max_new, seed))
        pairs = [(session_model(state), state["recipe"], settings), (mb, recipe_b, settings)]
        for model, _, _ in pairs:
            refuse_own_tokenizer(model, "compare")
        recipe_a = state["recipe"]
        titles = lambda lang: (f"A: {describe_recipe(recipe_a, lang)}", f"B: {describe_recipe(recipe_b, lang)}")  # noqa: E731
        yield from two_streams(pairs, prompt, titles, lang, request)
    except Exception as e:
        yield _stream_error(e, lang, request)


@for_the_session
def generate_two_settings(state, prompt, seed, max_new, t_a, k_a, p_a, t_b, k_b, p_b, request: gr.Request = None):
    """One model (A), one prompt and seed, two sampling settings. Outputs: message, streams."""
    lang = lang_of(state)
    try:
        model = session_model(state)
        refuse_own_tokenizer(model, "compare")
        shared = shared_length_and_seed(max_new, seed)
        a, b = sampling_settings(t_a, k_a, p_a, *shared), sampling_settings(t_b, k_b, p_b, *shared)
        name = lambda lang, ab, s: tr(  # noqa: E731
            lang, "cmp_settings", ab=ab, t=s.temperature, k=s.top_k or tr(lang, "cmp_off"), p=s.top_p
        )
        pairs = [(model, state["recipe"], a), (model, state["recipe"], b)]
        yield from two_streams(pairs, prompt, lambda lang: (name(lang, "A", a), name(lang, "B", b)), lang, request)
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
    tok = run.tokenizer  # the ids' own words: a checkpoint folder's tokenizer, else GPT-2's
    draw = lambda lang, present=False: cv.receipt_html(  # noqa: E731
        r, cv.explain_text(r, lambda t: f"“{tok.piece(t).display}”", lang), lang
    )
    redraw.remember(request, "cmp_receipt", draw)
    return draw(lang), r.to_dict()


@for_the_session
def export_replay(state, request: gr.Request = None):
    """A small JSON file that reproduces the current run. Outputs: file, message."""
    lang = lang_of(state)
    try:
        run = session_run(state)
        if run is None or not run.steps:
            raise no_run()
        refuse_own_tokenizer(session_model(state), "compare")  # a replay is read back by this tab
        path = str(write_record(replay_record(run, session_model(state)), exports_dir()))
        draw = lambda lang, present=False: ok(tr(lang, "cmp_exported"))  # noqa: E731
    except Exception as e:
        path, draw = gr.skip(), lambda lang, present=False, e=e: fail(e, lang)  # noqa: E731
    redraw.remember(request, "cmp_export", draw)
    return path, draw(lang)


@for_the_session
def replay_file(state, upload, request: gr.Request = None):
    """Replay an uploaded replay file or run export. Outputs: report HTML, report JSON."""
    lang = lang_of(state)
    try:
        path = upload if isinstance(upload, str) else getattr(upload, "name", None)
        if not path:
            raise UserError("compare.no_replay_file", "Upload a replay file (or a run export) first.")
        record = read_record(path)
        model, recipe = model_for(record, (session_model(state), state["recipe"]))
        refuse_own_tokenizer(model, "compare")
        report = replay(record, model, shared=True)
    except Exception as e:
        redraw.remember(request, "cmp_replay", lambda lang, present=False, e=e: fail(e, lang))
        return fail(e, lang), {"error": str(e)}
    draw = lambda lang, present=False: _replay_html(report, record, recipe, lang)  # noqa: E731
    redraw.remember(request, "cmp_replay", draw)
    return draw(lang), report.to_dict()


def _replay_html(report, record, recipe, lang) -> str:
    tok = gpt2_tokenizer()
    need = record["token_ids"]
    head = (ok if report.identical else warn)(_report_message(report, lang))
    d = report.first_difference
    recorded = tok.decode(need[: (d["step"] if d else len(need))])
    detail = (
        f"<p>{ok(tr(lang, 'cmp_replayed', what=describe_recipe(recipe, lang)))}</p>"
        f"<p><b>{tr(lang, 'cmp_prompt')}</b>: <span class='pg-token-text'>{_esc(tok.decode(record['prompt_ids']))}</span></p>"
        f"<p><b>{tr(lang, 'cmp_same_text' if d else 'cmp_whole_text')}</b>: <span class='pg-token-text'>{_esc(recorded)}</span></p>"
    )
    return head + detail


def _esc(text: str) -> str:
    return html.escape(text).replace("\n", "<br>")


def redraw_views(request: gr.Request, state):
    """After a language switch: every view of this tab the page drew, in the new language (same
    numbers; nothing is scored or generated again)."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    parts = (
        ("cmp_b", 1),
        ("cmp_score", len(Scored._fields) - 1),  # (not its raw numbers)
        ("cmp_side", len(Streams._fields)),
        ("cmp_receipt", 1),
        ("cmp_replay", 1),
        ("cmp_export", 1),
    )
    return sum((redraw.redraw(request, key, lang, present, n) for key, n in parts), ())
