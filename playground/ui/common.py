"""What every tab shares, in one import: messages, the session state, the page's boxes and i18n.

Each lives in its own module; this one only gathers them. The parsers of what users send are
``playground.settings``' (a leaf every layer imports directly).
"""

from .boxes import seed_box, slider_range
from .figure_dress import dress, empty
from .i18n import I18N, T, choices, lang_of, page_prefs, tr, tr_error
from .messages import Refusal, fail, log, md_literal, ok, say, warn
from .state import (
    api_run,
    client_address,
    for_the_session,
    leased_model,
    new_state,
    page_id,
    session_id,
    session_model,
    session_run,
)

__all__ = [
    "I18N",
    "Refusal",
    "T",
    "api_run",
    "choices",
    "client_address",
    "leased_model",
    "dress",
    "empty",
    "lang_of",
    "page_prefs",
    "tr",
    "tr_error",
    "fail",
    "for_the_session",
    "log",
    "md_literal",
    "new_state",
    "ok",
    "page_id",
    "seed_box",
    "say",
    "session_id",
    "session_model",
    "session_run",
    "slider_range",
    "warn",
]
