"""The page's language.

Labels are translated in the browser by ``gr.I18n`` (``T("key")``). Everything a handler builds
(messages, tables, status lines, figure titles, choice labels) is translated on the server with
``tr(lang, key, **values)``, where ``lang`` is the session's: the page tells the server its language
on load and whenever it changes (see ``prefs``). API callers get English unless they set it.

A new tab follows the language with: ``T("key")`` for labels (keys in ``translations.py``, EN and
ZH), ``tr(lang_of(state), "key", **values)`` for text its handlers build, ``dress(fig, lang, present)``
on its figures, ``choices(keys)`` for radio/dropdown choices, and ``listeners.on_change(page, fn,
inputs, outputs)`` in its ``wire`` to redraw them when the page's language changes.
"""

from __future__ import annotations

import gradio as gr

from playground.i18n import EN, ZH, normalize_lang, tr, tr_error

# Keys Gradio's own front end looks up that its catalogues lack (its status tracker tells screen
# readers "common.complete" when an event ends).
GRADIO_EN = {"common.complete": "Complete"}
GRADIO_ZH = {"common.complete": "完成"}
I18N = gr.I18n(en={**EN, **GRADIO_EN}, **{"zh-CN": {**ZH, **GRADIO_ZH}, "zh": {**ZH, **GRADIO_ZH}})
T = I18N  # T("key") -> a label translated in the browser


def lang_of(state) -> str:
    return normalize_lang((state or {}).get("lang"))


def choices(keys: dict[str, str], lang: str | None = None) -> list[tuple]:
    """(label, id) pairs: the id is what the API sends and gets back, the label follows the language
    (translated in the browser when ``lang`` is None)."""
    return [(T(key) if lang is None else tr(lang, key), value) for value, key in keys.items()]


__all__ = ["I18N", "T", "choices", "lang_of", "normalize_lang", "tr", "tr_error"]


def page_prefs(request) -> tuple[str, bool]:
    """(language, presenter mode) of the page that sent ``request``: ``?lang=`` and ``?present=1`` in
    its address win, then the browser's Accept-Language; a call without a page (the API) gets English."""
    if request is None:
        return "en", False
    params = getattr(request, "query_params", None) or {}
    headers = getattr(request, "headers", None) or {}
    lang = params.get("lang") or (headers.get("accept-language") or "en").split(",")[0]
    present = str(params.get("present", "")).lower() in ("1", "true", "yes", "on")
    return normalize_lang(lang), present
