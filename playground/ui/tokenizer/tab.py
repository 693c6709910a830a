"""The Tokenizer tab: each token's id and bytes, characters, and a word's BPE merges.

The Tokenizer tab: what GPT-2 reads. Each token of a text with its id and bytes, byte fragments
grouped under the character they build, and a word's BPE merges replayed from ``vocab.bpe``.

Layout and wiring both live here: ``layout()`` inside the tab's ``with gr.Tab`` block, then ``wire(page)``.
The page's events are private; ``tokenize`` and ``bpe_merges`` are the API's plain-number views.
"""

from __future__ import annotations

import html
from types import SimpleNamespace

import gradio as gr
import pandas as pd

from playground.i18n import tr_error
from playground.server.recipes import own_tokenizer_name
from playground.server.runs import MAX_PROMPT_CHARS
from playground.server.tokens import (
    MAX_REPLAY_BYTES,
    TokenizerViewError,
    display_text,
    gpt2_tokenizer,
    hex_bytes,
    part_display,
    pretokens,
    replay_text,
    replay_word,
    tokenize_view,
)
from playground.ui import listeners
from playground.ui import redraw as redraw_views
from playground.ui.common import T, lang_of, tr, warn
from playground.ui.results import only, outputs, result
from playground.ui.widgets import Dropdown

DEFAULT_TEXT = "An unbelievable tokenization: 从前有一座山 🦙"
MAX_SHOWN_TOKENS = 2000  # chips and table rows drawn; the API returns every token
# Neighbouring tokens alternate colours so a token's edges show; white text on each is at least
# 4.5:1 (WCAG AA).
PALETTE = ["#1d4ed8", "#047857", "#7c3aed", "#b45309", "#be123c"]

# Sentences built in handlers: keys of translations.py ("tk_" + name), read with msg(lang, name, ...).
COLUMNS = ("col_pos", "col_id", "col_bytes", "col_text", "col_char")


def msg(lang, name: str, **values) -> str:
    return tr(lang, "tk_" + name, **values)


def _plural(lang, name: str, n: int, **values) -> str:
    return msg(lang, name + ("_one" if n == 1 else ""), n=f"{n:,}", **values)


def note_text(token, lang) -> str:
    """A token's note ("bytes 1–2 of 3 of 从 (U+4ECE)") in the page's language, from its parts."""
    if lang == "en" or not token.note:
        return token.note
    return " + ".join(part if isinstance(part, str) else _fragment_text(part, lang) for part in token.parts)


def _fragment_text(part, lang) -> str:
    which = (
        msg(lang, "note_byte", first=part.first)
        if part.first == part.last
        else msg(lang, "note_bytes", first=part.first, last=part.last)
    )
    if part.kind == "of":
        return which + msg(lang, "note_of", size=part.size) + part.shown
    return which + msg(lang, "note_" + part.kind)


def _column_names(lang) -> list[str]:
    return [msg(lang, k) for k in COLUMNS]


def _check_text(text, lang="en") -> str:
    if text is None:
        return ""
    if not isinstance(text, str):
        raise TokenizerViewError(
            "tokenizer.text_not_str", "The text must be a string, got {kind}.", kind=type(text).__name__
        )
    if len(text) > MAX_PROMPT_CHARS:
        raise TokenizerViewError(
            "tokenizer.text_too_long",
            "The text is {n:,} characters; the tokenizer view takes up to {limit:,}.",
            n=len(text),
            limit=MAX_PROMPT_CHARS,
        )
    return text


# ----------------------------------------------------------------------------------------------
# Pure formatting: a TokenView / merge replay -> HTML and table rows


def _chip(token, colour: str, lang="en") -> str:
    title = msg(lang, "chip_title", pos=token.position, id=token.id, bytes=hex_bytes(token.bytes))
    if token.note:
        title += f" · {note_text(token, lang)}"
    return (
        f"<span class='pg-tok' style='background:{colour}' data-pos='{token.position}' data-id='{token.id}' "
        f"title='{html.escape(title, quote=True)}'>{html.escape(token.display)}<small>{token.id}</small></span>"
    )


def chips_html(view, limit: int = MAX_SHOWN_TOKENS, lang="en") -> str:
    """Tokens as chips; tokens sharing a character sit in one bracket under that character."""
    out = []
    for group in view.groups:
        if group.positions[0] >= limit:
            break
        chips = "".join(_chip(view.tokens[p], PALETTE[p % len(PALETTE)], lang) for p in group.positions)
        shared = len(group.positions) > 1 or view.tokens[group.positions[0]].is_fragment
        if shared:
            chars = group.display if group.text is not None else "?"
            title = msg(lang, "chars_title", chars=chars, n=len(group.positions))
            out.append(
                f"<span class='pg-tgroup' data-chars='{html.escape(chars, quote=True)}' "
                f"title='{html.escape(title, quote=True)}'><span class='pg-tchar'>{html.escape(chars)}</span>"
                f"<span class='pg-tgroup-tokens'>{chips}</span></span>"
            )
        else:
            out.append(chips)
    return f"<div class='pg-tokbox'>{''.join(out)}</div>"


def table_rows(view, limit: int = MAX_SHOWN_TOKENS, lang="en") -> list[list]:
    rows = []
    for t in view.tokens[:limit]:
        group = view.groups[t.group]
        shared = len(group.positions) > 1 or t.is_fragment
        rows.append([t.position, t.id, hex_bytes(t.bytes), t.display, note_text(t, lang) if shared else ""])
    return rows


def summary_html(text: str, view, lang="en") -> str:
    n_bytes = len(text.encode("utf-8", "surrogatepass"))
    n = len(view.tokens)
    line = msg(
        lang,
        "summary",
        chars=f"{len(text):,}",
        bytes=f"{n_bytes:,}",
        tokens=f"{n:,}",
        ratio=f"{n_bytes / n if n else 0.0:.2f}",
    )
    split = sum(1 for g in view.groups if len(g.positions) > 1 or view.tokens[g.positions[0]].is_fragment)
    if split:
        line += msg(lang, "fragments", n=f"{split:,}")
    if n > MAX_SHOWN_TOKENS:
        line += " · " + msg(lang, "cut", shown=f"{MAX_SHOWN_TOKENS:,}", total=f"{n:,}")
    return f"<div class='pg-tok-summary' data-tokens='{n}'>{html.escape(line)}</div>"


def word_choices(text: str) -> tuple[list[tuple[str, str]], str | None]:
    """The text's distinct words as (label with a visible space, word); the default is the one
    with the longest replay (most merges), e.g. " unbelievable" (12) before 从前 (3 merges, 4 tokens)."""
    words = [w for w in dict.fromkeys(pretokens(text)) if w.strip() and len(w.encode("utf-8")) <= MAX_REPLAY_BYTES]
    if not words:
        return [], None
    words = words[:200]
    best = max(words, key=lambda w: (len(replay_word(w).steps), len(w)))
    return [(display_text(w), w) for w in words], best


def _parts_html(parts, highlight=None) -> str:
    return "".join(
        f"<span class='pg-part{' pg-part-new' if highlight is not None and highlight(p) else ''}'>"
        f"{html.escape(part_display(p))}</span>"
        for p in parts
    )


def _builds(text: str, parts, index: int) -> str | None:
    """The characters of ``text`` that piece ``index`` of ``parts`` holds bytes of, when the piece
    is not whole characters (⟨e4 bb⟩ -> 从): a merge of bytes says which character it builds."""
    try:
        parts[index].decode("utf-8")
        return None
    except UnicodeDecodeError:
        pass
    start = sum(len(p) for p in parts[:index])
    end = start + len(parts[index])
    chars, at = [], 0
    for ch in text:
        size = len(ch.encode("utf-8", "surrogatepass"))
        if at < end and at + size > start:
            chars.append(ch)
        at += size
    return "".join(chars) or None


def merges_html(replays, lang="en") -> str:
    """Each word: its bytes, then one row per merge (rank, the pair, the pieces after it)."""
    tok = gpt2_tokenizer()
    blocks = []
    for w in replays:
        rows = [
            f"<tr><td></td><td>{html.escape(msg(lang, 'start', n=len(w.parts0)))}</td>"
            f"<td>{_parts_html(w.parts0)}</td></tr>"
        ]
        for k, s in enumerate(w.steps, start=1):
            merged = s.left + s.right
            label = msg(lang, "step", rank=f"{s.rank:,}", id=f"{tok.encoding.encode_single_token(merged):,}")
            builds = _builds(w.text, s.parts, s.parts.index(merged))
            pair = (
                f"{html.escape(part_display(s.left))} + {html.escape(part_display(s.right))} → "
                f"<b>{html.escape(part_display(merged))}</b>"
                + (msg(lang, "times", count=s.count) if s.count > 1 else "")
                + (html.escape(msg(lang, "builds", chars=builds)) if builds else "")
            )
            rows.append(
                f"<tr data-rank='{s.rank}'><td>{k}</td><td>{pair}<br><small>{html.escape(label)}</small></td>"
                f"<td>{_parts_html(s.parts, lambda p, m=merged: p == m)}</td></tr>"
            )
        n = len(w.token_ids)
        final = (
            _plural(lang, "final", n)
            + msg(lang, "colon")
            + ", ".join(
                f"{part_display(p)}{msg(lang, 'builds', chars=c) if (c := _builds(w.text, w.final, k)) else ''} = {i}"
                for k, (p, i) in enumerate(zip(w.final, w.token_ids))
            )
        )
        if not w.steps:
            final = _plural(lang, "no_merge", len(w.parts0)) + " " + final
        blocks.append(
            f"<div class='pg-merges' data-word='{html.escape(w.text, quote=True)}' data-tokens='{n}'>"
            f"<div class='pg-merges-word'>{html.escape(display_text(w.text))}</div>"
            f"<table>{''.join(rows)}</table><div class='pg-merges-final'>{html.escape(final)}</div></div>"
        )
    return "".join(blocks)


# ----------------------------------------------------------------------------------------------
# Handlers


def _table(view, lang, relabel=False):
    """Rows (English: the layout's column names), or a table with its columns in the page's language."""
    rows = table_rows(view, lang=lang)
    return rows if lang == "en" and not relabel else pd.DataFrame(rows, columns=_column_names(lang))


Tokens = result("Tokens", "summary", "chips", "table", "word", "merges")  # a text's tokens and a word's merges
Relabelled = result("Relabelled", "summary", "chips", "table", "merges")  # after a change of language


def show_tokens(text, state=None, relabel=False, request: gr.Request = None) -> Tokens:
    """A text's tokens (summary, chips, table), its words to pick and the best one's merges, in the
    page's language. The page's text is remembered as drawn (``redraw``), for a change of language."""
    lang = lang_of(state)
    if not relabel:
        redraw_views.remember_inputs(request, "tokens", (text,))
    try:
        text = _check_text(text, lang)
        view = tokenize_view(text)
    except ValueError as e:
        return only(Tokens, summary=warn(tr_error(lang, e)))
    choices, best = word_choices(text)
    merges = show_merges(best, state)
    own = own_tokenizer_name((state or {}).get("recipe"))
    return Tokens(
        summary_html(text, view, lang) + (warn(tr(lang, "tk_own_tokenizer", name=own)) if own else ""),
        chips_html(view, lang=lang),
        _table(view, lang, relabel),
        gr.update(choices=choices, value=best),
        merges,
    )


def redraw(state, text, word, request: gr.Request = None) -> Relabelled:
    """After a language switch: the same text and word, said in the page's new language. The text is the
    one the page last drew when it drew one (``text`` was read when the switch's events set off: a Show
    me that drew the step's text meanwhile would otherwise be drawn over), else the text box's."""
    (text,) = redraw_views.drawn_inputs(request, "tokens", (text,))
    out = show_tokens(text, state, relabel=True)
    return Relabelled(out.summary, out.chips, out.table, show_merges(word, state) if word else out.merges)


def show_merges(word, state=None):
    lang = lang_of(state)
    if word is None or word == "":
        return f"<div class='pg-merges-empty'>{html.escape(msg(lang, 'empty'))}</div>"
    try:
        return merges_html(replay_text(_check_text(word, lang)), lang)
    except ValueError as e:
        return warn(tr_error(lang, e))


def tokenize_api(text) -> dict:
    """API: every token of the text (id, bytes, text or None for a fragment, its character group)."""
    try:
        return tokenize_view(_check_text(text)).as_dict()
    except ValueError as e:
        return {"error": str(e)}


def bpe_merges_api(word) -> dict:
    """API: the merges of each word of ``word``, in the order BPE applies them (lowest rank first)."""
    try:
        tok = gpt2_tokenizer()
        return {"words": [w.as_dict(tok) for w in replay_text(_check_text(word))]}
    except ValueError as e:
        return {"error": str(e)}


# ----------------------------------------------------------------------------------------------
# Layout and wiring

CSS = """
.pg-tokbox { line-height: 2.6; padding: 4px; max-height: 420px; overflow-y: auto; }
.pg-tok { display: inline-block; margin: 2px 1px; padding: 1px 6px; border-radius: 6px; font-size: 18px;
          color: #fff; white-space: pre; font-family: ui-monospace, monospace; }
.pg-tok small { font-size: 11px; margin-left: 4px; font-family: system-ui, sans-serif;
                color: inherit !important; }  /* the chip's white, not the page's muted small text */
.pg-tgroup { display: inline-flex; flex-direction: column; align-items: center; vertical-align: top;
             border: 2px solid #fbbf24; border-top: none; border-radius: 0 0 8px 8px; margin: 0 3px; padding: 0 2px; }
.pg-tchar { font-size: 22px; line-height: 1.3; }
.pg-tgroup-tokens { white-space: nowrap; }
.pg-merges { margin-bottom: 12px; }
.pg-merges-word { font-size: 20px; font-family: ui-monospace, monospace; margin: 4px 0; }
.pg-merges table { border-collapse: collapse; width: 100%; }
.pg-merges td { padding: 3px 6px; border-bottom: 1px solid rgba(128,128,128,0.25); vertical-align: top; }
.pg-part { display: inline-block; margin: 1px; padding: 0 4px; border: 1px solid #9ca3af; border-radius: 4px;
           font-family: ui-monospace, monospace; white-space: pre; }
.pg-part-new { background: #fde68a; color: #111827; border-color: #d97706; }
.pg-merges-final { font-weight: 600; margin-top: 4px; }
"""


def layout() -> SimpleNamespace:
    """The tab's components (built inside its ``gr.Tab``), showing the default text already."""
    c = SimpleNamespace()
    view = tokenize_view(DEFAULT_TEXT)
    choices, best = word_choices(DEFAULT_TEXT)
    with gr.Row():
        with gr.Column(scale=3, min_width=320):
            c.text = gr.Textbox(
                DEFAULT_TEXT, label=T("tok_text"), lines=3, max_length=MAX_PROMPT_CHARS, elem_id="pg-tok-text"
            )
            c.tok_btn = gr.Button(T("tok_button"), variant="primary", elem_id="pg-tok-btn")
            c.summary = gr.HTML(summary_html(DEFAULT_TEXT, view), elem_id="pg-tok-summary")
            c.chips = gr.HTML(chips_html(view), elem_id="pg-tok-chips", css_template=CSS, js_on_load=None)
            c.table = gr.Dataframe(
                table_rows(view),
                headers=_column_names("en"),
                label=T("tok_table"),
                interactive=False,
                max_height=360,
                wrap=True,
                column_widths=["19%", "13%", "20%", "20%", "28%"],  # "position" whole at presenter size
                elem_id="pg-tok-table",
            )
        with gr.Column(scale=2, min_width=300):
            c.word = Dropdown(
                choices,
                value=best,
                allow_custom_value=True,
                label=T("tok_word"),
                info=T("tok_word_info"),
                elem_id="pg-tok-word",
            )
            c.merges = gr.HTML(show_merges(best), elem_id="pg-tok-merges", css_template=CSS, js_on_load=None)
    return c


def wire(page) -> None:
    c = page.tokenizer
    c.tok_btn.click(show_tokens, [c.text, page.state], outputs(Tokens, c), api_visibility="private")
    c.text.submit(show_tokens, [c.text, page.state], outputs(Tokens, c), api_visibility="private")
    # .change: a picked choice and a typed word (set on Enter or blur) alike; the replay is cheap
    c.word.change(show_merges, [c.word, page.state], c.merges, api_visibility="private", trigger_mode="always_last")
    listeners.on_change(page, redraw, [c.text, c.word], outputs(Relabelled, c))
    # API-only endpoints: plain numbers for gradio_client users.
    gr.Button(visible=False).click(tokenize_api, c.text, gr.JSON(visible=False), api_name="tokenize")
    gr.Button(visible=False).click(bpe_merges_api, c.word, gr.JSON(visible=False), api_name="bpe_merges")
