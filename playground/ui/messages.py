"""Messages shown under a control: a warning, a confirmation, or an unexpected error (logged)."""

from __future__ import annotations

import html
import logging
import traceback

from playground.errors import UserError, excerpt
from playground.i18n import tr, tr_error
from playground.server.catalog import ConfigError, WeightLoadError

log = logging.getLogger("playground.ui")


def warn(message: str) -> str:
    return f"<div class='pg-msg pg-error'>⚠️ {html.escape(str(message))}</div>"


def ok(message: str) -> str:
    return f"<div class='pg-msg pg-ok'>✓ {html.escape(str(message))}</div>"


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
