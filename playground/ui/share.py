"""A link that opens the playground ready to generate: ``?prompt=...&temperature=0.7&seed=42&tab=generate``.

On page load the query parameters fill the Generate tab's controls, each read by the same field
readers as the Generate tab's boxes (``playground.settings``: whole numbers exactly, never through a
float). A value outside a control's range is clamped to it and the page says so; a value the reader
refuses is ignored and the page says the reader's refusal; unknown parameters are named. Every
sentence is keyed, in the page's language. The page always loads.
"""

from __future__ import annotations

from urllib.parse import urlencode

import gradio as gr

from playground.errors import UserError
from playground.server.runs import MAX_NEW_TOKENS, MAX_PROMPT_CHARS
from playground.settings import parse_bool, parse_count, parse_number
from playground.whole_numbers import MAX_SEED

from .common import ok, page_prefs, tr, tr_error, warn
from .results import result, skipped

# name -> (lowest, highest, whole number?): the Generate tab's slider ranges
RANGES = {
    "temperature": (0.0, 2.0, False),
    "top_k": (0, 200, True),
    "top_p": (0.05, 1.0, False),
    "max_new": (1, MAX_NEW_TOKENS, True),
    "seed": (0, MAX_SEED, True),
}
ORDER = ("prompt", "temperature", "top_k", "top_p", "max_new", "seed", "greedy")  # the Generate tab's controls
# every page tab's id (app.build_demo's gr.Tab ids): ?tab=inside opens the Inside tab, not Lessons
TABS = ("lessons", "model", "generate", "inside", "train", "compare", "tokenizer")
# parameters the page itself reads (theme, language, presenter mode, the Inside view, a lesson's step, a
# classroom room to join: lessons_room),
# not the Generate tab
PAGE_PARAMS = frozenset({"__theme", "lang", "present", "view", "lesson", "step", "room"})
Prefill = result("Prefill", *ORDER, "tabs", "input_msg")  # the controls, the tab to open, a message
OUT_OF_RANGE = ("input.between", "input.at_least", "input.at_most")


def _read(name: str, raw, lo, hi, whole: bool):
    """(the value for the control, or None when refused; the sentence to say, or None). A whole number
    is read exactly within the range (a float past 2⁵³ inside it is refused as inexact), and one outside
    it is clamped: the reader names the number it read, and the clamp says so."""
    try:
        if whole:
            return parse_count(raw, name, lo, hi), None
        value = parse_number(raw, name)
    except UserError as e:
        if e.key not in OUT_OF_RANGE:
            return None, (e, "link_ignored")
        value = e.fields["value"]
    clamped = min(max(value, lo), hi)
    if clamped == value:
        return value, None
    return clamped, ("link_clamped", dict(name=name, value=raw, lo=lo, hi=hi, clamped=clamped))


def prefill(params: dict, lang: str = "en") -> Prefill:
    """Query parameters -> updates of the Generate tab's controls, the selected tab and a message in ``lang``."""
    out = {name: gr.skip() for name in ORDER}
    problems, filled = [], []

    def ignored(e: UserError, name: str) -> str:
        return f"{tr_error(lang, e)} {tr(lang, 'link_ignored', name=name)}"

    for name, (lo, hi, whole) in RANGES.items():
        if name not in params:
            continue
        value, said = _read(name, params[name], lo, hi, whole)
        if said is not None:
            what, detail = said
            problems.append(ignored(what, name) if isinstance(what, UserError) else tr(lang, what, **detail))
        if value is not None:
            out[name] = value
            filled.append(f"{name} {value}")
    if "prompt" in params:
        prompt = str(params["prompt"])
        if len(prompt) > MAX_PROMPT_CHARS:
            problems.append(tr(lang, "link_long_prompt", n=f"{len(prompt):,}", limit=f"{MAX_PROMPT_CHARS:,}"))
            prompt = prompt[:MAX_PROMPT_CHARS]
        out["prompt"] = prompt
        filled.append("prompt")
    if "greedy" in params:
        try:
            out["greedy"] = parse_bool(params["greedy"], "greedy")
            filled.append(f"greedy {out['greedy']}")
        except UserError as e:
            problems.append(ignored(e, "greedy"))
    tab = gr.skip()
    if "tab" in params:
        if params["tab"] in TABS:
            tab = gr.Tabs(selected=params["tab"])
        else:
            problems.append(tr(lang, "link_bad_tab", value=repr(params["tab"]), tabs=", ".join(TABS)))
    elif filled:
        tab = gr.Tabs(selected="generate")
    unknown = sorted(set(params) - set(RANGES) - {"prompt", "greedy", "tab"} - PAGE_PARAMS)
    if unknown:
        problems.append(tr(lang, "link_unknown_many" if len(unknown) > 1 else "link_unknown", names=", ".join(unknown)))
    message = gr.skip()
    if problems:
        message = warn(" ".join(problems))
    elif filled:
        message = ok(tr(lang, "link_filled", what=", ".join(filled)))
    return Prefill(**out, tabs=tab, input_msg=message)


def prefill_from_url(request: gr.Request):
    """Page load: the link's query parameters into the Generate tab (nothing to do without any)."""
    params = dict(request.query_params) if request is not None else {}
    if not params:
        return skipped(Prefill)
    return prefill(params, page_prefs(request)[0])


def share_query(prompt, temperature, top_k, top_p, max_new, seed, greedy) -> str:
    """The query string that reproduces these Generate settings."""
    values = {
        "prompt": prompt,
        "temperature": temperature,
        "top_k": top_k,
        "top_p": top_p,
        "max_new": max_new,
        "seed": seed,
        "greedy": "true" if greedy else "false",
        "tab": "generate",
    }
    return "?" + urlencode({k: v for k, v in values.items() if v not in (None, "")})


def share_link(prompt, temperature, top_k, top_p, max_new, seed, greedy, request: gr.Request = None) -> str:
    """A full link (the page's own address when the browser sent it) with the settings as parameters."""
    query = share_query(prompt, temperature, top_k, top_p, max_new, seed, greedy)
    page = ""
    if request is not None:
        page = (request.headers.get("referer") or "").split("?")[0]
    return page + query
