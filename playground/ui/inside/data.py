"""The Inside tab's numbers: parsed inputs in, one plain-data function per view out.

The Inside tab's numbers: parsing what the page or an API caller sent, and one function per view
returning plain numbers (each is also an API endpoint). Positions are absolute, as in the run; the
figures are drawn by inside_tab from these same dicts. No figures here, no layout.
"""

from __future__ import annotations

import re

import gradio as gr

from playground.errors import UserError
from playground.i18n import EN, tr
from playground.server import inside_views
from playground.server.inside_views import Intervention, attention_maths, attribution, effects, view_checks
from playground.server.tokens import tokenizer_of
from playground.settings import parse_bool, parse_number, parse_whole
from playground.ui.common import Refusal, session_id, session_model, session_run

LENS_WINDOW = 32  # positions drawn at once in the lens heatmaps (at most); a slider scrolls through the rest
MIN_WINDOW = 8  # the fewest, on the narrowest page

MSG = {name: EN["in_" + name] for name in ("nothing",)}  # the API's English words for "no intervention"

# ----------------------------------------------------------------------------------------------
# Shared parsing


def run_context(state):
    """(model, run, window start, window ids, token labels); ValueError when there is no run."""
    run = session_run(state)
    if run is None:
        raise UserError("inside.no_run", "Generate first (tab 2): the Inside views look at the current run.")
    model = session_model(state)
    start, ids = run.window(model.cfg.context_length)
    labels = [p.display for p in tokenizer_of(model).pieces(ids)]
    return model, run, start, ids, labels


def window_index(value, start: int, ids, name: str = "Position", default: int | None = None) -> int:
    """An absolute position typed by the user -> index in the window (blank: ``default``)."""
    if value in (None, "") and default is not None:
        return default
    return parse_whole(value, name, start, start + len(ids) - 1) - start


MAX_LIST_CHARS = 2000  # a list of heads or layers; read only after its size is checked


def _list_text(text, name: str) -> str:
    text = str(text)
    if len(text) > MAX_LIST_CHARS:
        raise UserError(
            "inside.list_long",
            "{name} is {n:,} characters; a list of heads or layers here is at most {limit:,}.",
            name=name,
            n=len(text),
            limit=MAX_LIST_CHARS,
        )
    return text


def parse_heads(text, name: str) -> tuple[tuple[int, int], ...]:
    if text in (None, ""):
        return ()
    out = []
    for part in re.split(r"[,;\s]+", _list_text(text, name).strip()):
        if not part:
            continue
        m = re.fullmatch(r"[Ll]?(\d{1,6})\s*[.:/Hh]\s*(\d{1,6})", part)
        if not m:
            raise UserError(
                "inside.heads_field",
                "{name}: write heads as layer.head separated by commas (e.g. 0.1, 2.3); could not read {bad!r}.",
                name=name,
                bad=part,
            )
        out.append((int(m.group(1)), int(m.group(2))))
    return tuple(dict.fromkeys(out))


def parse_layers(text, name: str) -> tuple[int, ...]:
    if text in (None, ""):
        return ()
    out = []
    for part in re.split(r"[,;\s]+", _list_text(text, name).strip()):
        if part:
            if not (part.isdigit() and len(part) <= 6):
                raise UserError(
                    "inside.layers_field",
                    "{name}: write layer numbers separated by commas (e.g. 0, 2); could not read {bad!r}.",
                    name=name,
                    bad=part,
                )
            out.append(int(part))
    return tuple(dict.fromkeys(out))


def parse_intervention(zero_heads, mean_heads, scale_head, alpha, skip_mlps, unmasked, drop_pos) -> Intervention:
    scaled = parse_heads(scale_head, "Scale head")
    if len(scaled) > 1:
        raise UserError("inside.scale_one_head", "Scale head: one head only (layer.head).")
    scale = None
    if scaled:
        scale = (*scaled[0], parse_number(alpha, "α"))
    return Intervention(
        zero_heads=parse_heads(zero_heads, "Zero-ablate heads"),
        mean_heads=parse_heads(mean_heads, "Mean-ablate heads"),
        scale_head=scale,
        skip_mlps=parse_layers(skip_mlps, "Skip MLPs"),
        unmasked_layers=parse_layers(unmasked, "No causal mask"),
        drop_pos_emb=parse_bool(drop_pos, "Drop positional embedding"),
    )


def _target(value, model, ids, p: int) -> int | None:
    if value in (None, ""):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return view_checks.check_target(model, parse_whole(value, "Target token id"))
    return view_checks.resolve_target(tokenizer_of(model), value)


def describe_intervention(spec: Intervention, lang: str = "en") -> str:
    if spec.is_empty:
        return tr(lang, "in_nothing")
    parts = []
    if spec.zero_heads:
        parts.append(tr(lang, "in_d_zero", heads=", ".join(f"L{a}H{b}" for a, b in spec.zero_heads)))
    if spec.mean_heads:
        parts.append(tr(lang, "in_d_mean", heads=", ".join(f"L{a}H{b}" for a, b in spec.mean_heads)))
    if spec.scale_head:
        parts.append(f"L{spec.scale_head[0]}H{spec.scale_head[1]} × {spec.scale_head[2]:g}")
    if spec.skip_mlps:
        parts.append(tr(lang, "in_d_skip", layers=", ".join(map(str, spec.skip_mlps))))
    if spec.unmasked_layers:
        parts.append(tr(lang, "in_d_unmask", layers=", ".join(map(str, spec.unmasked_layers))))
    if spec.drop_pos_emb:
        parts.append(tr(lang, "in_d_nopos"))
    return ("; " if lang == "en" else "；").join(parts)


# ----------------------------------------------------------------------------------------------
# Data (API endpoints): plain numbers


def _with_tokens(d: dict, start: int, labels) -> dict:
    return {"window_start": start, "tokens": labels, **d}


def lens_data(state, first=None, last=None):
    """The lens over absolute positions first..last (blank: the whole window)."""
    try:
        model, run, start, ids, labels = run_context(state)
        end = start + len(ids) - 1
        a = start if first in (None, "") else parse_whole(first, "First position", start, end)
        b = end if last in (None, "") else parse_whole(last, "Last position", a, end)
        lens = inside_views.lens(model, state["recipe"], session_id(state), run, ids, a - start, b - start + 1)
    except Exception as e:
        return Refusal(e)
    tok = tokenizer_of(model)
    return _with_tokens(
        {**lens, "first": a, "top_token": [[tok.piece(t).display for t in row] for row in lens["top_id"]]},
        start,
        labels,
    )


def lens_cell_data(state, layer, position):
    try:
        model, run, start, ids, labels = run_context(state)
        layer = parse_whole(layer, "Lens layer", 0, model.cfg.n_layers)
        cell = inside_views.lens_cell(
            model, state["recipe"], session_id(state), run, ids, layer, window_index(position, start, ids)
        )
    except Exception as e:
        return Refusal(e)
    tok = tokenizer_of(model)
    cell["position"] += start
    cell["top"] = [[t, tok.piece(t).display, p] for t, p in cell["top"]]
    return cell


def attribution_data(state, position, target=None):
    try:
        model, _, start, ids, labels = run_context(state)
        p = window_index(position, start, ids, default=max(0, len(ids) - 2))
        d = attribution.logit_attribution(model, ids, p, _target(target, model, ids, p))
    except Exception as e:
        return Refusal(e)
    d["position"] += start
    d["target"] = tokenizer_of(model).piece(d["target_id"]).display
    return d


def maths_data(state, layer, head, position):
    try:
        model, _, start, ids, labels = run_context(state)
        p = window_index(position, start, ids, "Query position", default=len(ids) - 1)
        layer = parse_whole(layer, "Layer", 0, model.cfg.n_layers - 1)
        head = parse_whole(head, "Head", 0, model.cfg.n_heads - 1)
        d = attention_maths.attention_maths(model, ids, layer, head, p)
    except Exception as e:
        return Refusal(e)
    d["position"] += start
    return _with_tokens(d, start, labels)


def intervene_data(
    state,
    zero_heads="",
    mean_heads="",
    scale_head="",
    alpha=1.0,
    skip_mlps="",
    unmasked="",
    drop_pos=False,
    position=None,
):
    try:
        model, run, start, ids, labels = run_context(state)
        spec = parse_intervention(zero_heads, mean_heads, scale_head, alpha, skip_mlps, unmasked, drop_pos)
        p = window_index(position, start, ids, default=len(ids) - 1)
        T = len(ids)
        d = effects.compare(model, ids, spec, p, lens_window=(max(0, T - LENS_WINDOW), T))
    except Exception as e:
        return Refusal(e)
    tok = tokenizer_of(model)
    d["position"] += start
    d["lens_after"]["first"] += start
    d["token_labels"] = [tok.piece(t).display for t in d["shown_ids"]]
    return _with_tokens(d, start, labels)


def dose_data(state, scale_head="", position=None, target=None):
    *_, last = dose_steps(state, scale_head, position, target, chunk=None)
    return last


def dose_steps(state, scale_head="", position=None, target=None, chunk: int | None = 1, stop=None):
    """The dose-response curve as it grows, an α at a time (each yield as ``dose_data``: the α
    values so far), or one Refusal; ``stop()`` ends it early, within one α's blocks
    (effects.dose_response_points)."""
    try:
        model, _, start, ids, labels = run_context(state)
        heads = parse_heads(scale_head, "Scale head")
        if len(heads) != 1:
            raise UserError(
                "inside.dose_needs_head",
                "Scale head: name one head as layer.head (e.g. 1.2) for the dose–response curve.",
            )
        layer, head = heads[0]
        p = window_index(position, start, ids, default=max(0, len(ids) - 2))
        target_id = _target(target, model, ids, p)
        tok = tokenizer_of(model)
        for d in effects.dose_response_points(model, ids, layer, head, p, target_id, chunk=chunk, stop=stop):
            yield {**d, "position": d["position"] + start, "target": tok.piece(d["target_id"]).display}
    except Exception as e:
        yield Refusal(e)


def sweep_data(state, progress=gr.Progress()):
    *_, last = sweep_steps(state, lambda f, text: progress(f, desc=text))
    return last


def sweep_steps(state, progress=None, stop=None):
    """The head sweep a layer at a time (each yield as ``sweep_data``: later layers None), or one
    Refusal (with the estimate when it would take too long); ``stop()`` ends it early: with one,
    each head runs on its own, so a Stop waits for at most one block of one head."""
    try:
        model, _, start, ids, _ = run_context(state)
        estimate = effects.sweep_estimate(model, ids)
        batch = None if stop is None else 1
        for d in effects.head_sweep_layers(model, ids, estimate, progress=progress, batch=batch, stop=stop):
            yield {**d, "window_start": start}
    except effects.SweepTooLongError as e:
        yield Refusal(e, estimate_s=e.estimate_s)
    except Exception as e:
        yield Refusal(e)
