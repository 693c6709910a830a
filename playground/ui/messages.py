"""Messages shown under a control: a warning, a confirmation, or an unexpected error (logged).

Also ``md_literal``: what a user typed, put into Markdown so that it shows as typed.
"""

from __future__ import annotations

import html
import logging
import re
import traceback

from playground.errors import UserError, excerpt
from playground.i18n import tr, tr_error
from playground.server.catalog import ConfigError, WeightLoadError

log = logging.getLogger("playground.ui")


def warn(message: str) -> str:
    return f"<div class='pg-msg pg-error'>⚠️ {html.escape(str(message))}</div>"


def ok(message: str) -> str:
    return f"<div class='pg-msg pg-ok'>✓ {html.escape(str(message))}</div>"


# What Gradio's Markdown (CommonMark with GitHub's tables, strikethrough and bare-address links, LaTeX between
# $$) reads as more than text: emphasis, code, links and images, headings, lists (``1.``, ``1)``, ``+``),
# quotes, rules and underlined headings (``---``, ``===``), tables, HTML and entities, addresses (``x.org``,
# ``http:``).
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]()#+\-.!|~<>&$=:])")


def md_literal(text) -> str:
    """``text`` as Markdown that shows it as typed: each character Markdown could read as formatting behind a
    backslash (CommonMark's escape of ASCII punctuation, so ``\\<b\\>`` shows ``<b>``, never a tag), and never two
    ``$`` side by side (Gradio renders LaTeX only when the Markdown holds its ``$$``). For text of one line:
    a blank line would still end the paragraph."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", str(text))


class Refusal(dict):
    """``{"error": message}`` as a data endpoint returns it (English, for the API), still holding the
    exception so a view can say it in the page's language by its key."""

    def __init__(self, error: Exception, **extra):
        super().__init__(error=str(error), **extra)
        self.exception = error


def say(lang: str, refused: dict) -> str:
    """A data endpoint's ``{"error": ...}`` in ``lang``."""
    return tr_error(lang, getattr(refused, "exception", None) or refused["error"])


def fail(e: Exception, lang: str = "en") -> str:
    """User errors keep their own message; anything else is logged and reported briefly."""
    if isinstance(e, (ValueError, ConfigError, WeightLoadError, FileNotFoundError, MemoryError)):
        return warn(tr_error(lang, e) if isinstance(e, UserError) else excerpt(tr_error(lang, e)))
    log.error("unexpected error: %s", traceback.format_exc())
    return warn(tr(lang, "unexpected", error=excerpt(f"{type(e).__name__}: {e}")))
