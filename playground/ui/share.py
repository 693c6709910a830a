"""A link that opens the playground ready to generate: ``?prompt=...&temperature=0.7&seed=42&tab=generate``.

On page load the query parameters fill the Generate tab's controls. A value outside a control's
range is clamped to it and the page says so; a value that is not a number is ignored and said;
unknown parameters are named. The page always loads.
"""

from __future__ import annotations

import math
from urllib.parse import urlencode

import gradio as gr

from playground.server.runs import MAX_NEW_TOKENS, MAX_PROMPT_CHARS
from playground.whole_numbers import exact_whole, read_number

from .common import MAX_SEED, ok, parse_bool, warn
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

MSG = {
    "clamped": "{name}={value} is outside {lo}–{hi}; set to {clamped}.",
    "not_number": "{name}={value!r} is not a number; ignored.",
    "not_bool": "greedy={value!r} is not true or false; ignored.",
    "long_prompt": "The prompt in the link has {n:,} characters; the first {limit:,} were kept.",
    "unknown": "Unknown link parameter{s} ignored: {names}.",
    "bad_tab": "tab={value!r} is not one of {tabs}; ignored.",
    "filled": "Settings from the link: {what}.",
}


def prefill(params: dict) -> Prefill:
    """Query parameters -> updates of the Generate tab's controls, the selected tab and a message."""
    out = {name: gr.skip() for name in ORDER}
    problems, filled = [], []
    for name, (lo, hi, whole) in RANGES.items():
        if name not in params:
            continue
        raw = params[name]
        try:
            # Digits are read by int(): a seed past 2⁵³ fills the box as it is in the link, not rounded.
            value = read_number(raw) if whole else float(raw)
            if not math.isfinite(value):
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            problems.append(MSG["not_number"].format(name=name, value=raw))
            continue
        clamped = min(max(value, lo), hi)
        if whole:
            clamped = exact_whole(clamped)
            if clamped is None:  # 2.5, or a float past 2⁵³: the nearest whole number (said below)
                clamped = int(round(min(max(value, lo), hi)))
        if clamped != value:
            problems.append(MSG["clamped"].format(name=name, value=raw, lo=lo, hi=hi, clamped=clamped))
        out[name] = clamped
        filled.append(f"{name} {clamped}")
    if "prompt" in params:
        prompt = str(params["prompt"])
        if len(prompt) > MAX_PROMPT_CHARS:
            problems.append(MSG["long_prompt"].format(n=len(prompt), limit=MAX_PROMPT_CHARS))
            prompt = prompt[:MAX_PROMPT_CHARS]
        out["prompt"] = prompt
        filled.append("prompt")
    if "greedy" in params:
        try:
            out["greedy"] = parse_bool(params["greedy"], "greedy")
            filled.append(f"greedy {out['greedy']}")
        except ValueError:
            problems.append(MSG["not_bool"].format(value=params["greedy"]))
    tab = gr.skip()
    if "tab" in params:
        if params["tab"] in TABS:
            tab = gr.Tabs(selected=params["tab"])
        else:
            problems.append(MSG["bad_tab"].format(value=params["tab"], tabs=", ".join(TABS)))
    elif filled:
        tab = gr.Tabs(selected="generate")
    unknown = sorted(set(params) - set(RANGES) - {"prompt", "greedy", "tab"} - PAGE_PARAMS)
    if unknown:
        problems.append(MSG["unknown"].format(s="s" if len(unknown) > 1 else "", names=", ".join(unknown)))
    message = gr.skip()
    if problems:
        message = warn(" ".join(problems))
    elif filled:
        message = ok(MSG["filled"].format(what=", ".join(filled)))
    return Prefill(**out, tabs=tab, input_msg=message)


def prefill_from_url(request: gr.Request):
    """Page load: the link's query parameters into the Generate tab (nothing to do without any)."""
    params = dict(request.query_params) if request is not None else {}
    if not params:
        return skipped(Prefill)
    return prefill(params)


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
