"""What every tab shares, in one import: messages, session state, input parsing and i18n.

What every tab shares, in one import: messages, the session state, input parsing and i18n
(each lives in its own module; this one only gathers them).
"""

from .figure_dress import dress
from .i18n import I18N, T, choices, lang_of, page_prefs, tr, tr_error
from .messages import Refusal, fail, log, ok, say, warn
from .parsing import (
    MAX_SEED,
    SamplingSettings,
    parse_bool,
    parse_choice,
    parse_count,
    parse_number,
    parse_optional_count,
    parse_optional_number,
    parse_optional_whole,
    parse_seed,
    parse_whole,
    seed_box,
    slider_range,
)
from .state import (
    api_run,
    client_address,
    for_the_session,
    leased_model,
    new_state,
    session_id,
    session_model,
    session_run,
)

__all__ = [
    "I18N",
    "Refusal",
    "MAX_SEED",
    "SamplingSettings",
    "T",
    "api_run",
    "choices",
    "client_address",
    "leased_model",
    "dress",
    "lang_of",
    "page_prefs",
    "tr",
    "tr_error",
    "fail",
    "for_the_session",
    "log",
    "new_state",
    "ok",
    "parse_bool",
    "parse_choice",
    "parse_count",
    "parse_number",
    "parse_optional_count",
    "parse_optional_number",
    "parse_optional_whole",
    "parse_seed",
    "seed_box",
    "parse_whole",
    "say",
    "session_id",
    "session_model",
    "session_run",
    "slider_range",
    "warn",
]
