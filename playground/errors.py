"""Errors a user can cause and act on: a message key with its fields, English by ``str()``.

``UserError("budget.over", "This needs {need} but {have} is free.", need=..., have=...)`` is a
``ValueError`` whose ``str()`` is the English sentence (the library and the API answer in English);
the interface looks ``key`` up in ``playground.i18n`` and fills the same ``fields`` in the page's
language. Each layer subclasses it (``ConfigError``, ``WeightLoadError``, ...) so callers can
still catch by kind. This module imports nothing of the project: every layer may raise these.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

# A field a user sent (a 10 MB target string, a list of a million ids) is said back as an excerpt:
# a message stays short whatever it quotes. (The longest field the app itself writes, the memory
# budget's advice, is about 160 characters.)
MAX_FIELD_CHARS = 300
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = MAX_FIELD_CHARS
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 8


class _Shown(str):
    """A container's abbreviated repr, shown as it is by ``{x}`` and by ``{x!r}`` alike."""

    def __repr__(self) -> str:
        return str(self)


def excerpt(value: Any) -> Any:
    """``value`` as a message may quote it: long text and big containers cut short, the rest as given."""
    if isinstance(value, str):
        return value if len(value) <= MAX_FIELD_CHARS else value[: MAX_FIELD_CHARS - 1] + "…"
    if isinstance(value, (bytes, bytearray, list, tuple, dict, set, frozenset)):
        return _Shown(_REPR.repr(value))
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**21:
        try:
            return float(value)  # said as 1e+308, not in 309 digits
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if isinstance(value, BaseException) and not hasattr(value, "key"):  # (a UserError is said by its key)
        return excerpt(str(value))
    return value


class UserError(ValueError):
    """A refusal written for the person who caused it: ``key`` names the message, ``fields`` fill it."""

    def __init__(self, key: str, template: str, /, **fields: Any) -> None:
        fields = {name: excerpt(value) for name, value in fields.items()}
        self.key = key
        self.template = template
        self.fields = fields
        super().__init__(template.format(**fields) if fields else template)

    def __reduce__(self):
        # Pickled whole (key, template, fields and any attribute a subclass adds), never rebuilt from the
        # sentence alone: a refusal raised in another process (a ZeroGPU worker) keeps its key and 中文.
        return _restore, (type(self), str(self), self.__dict__)


def _restore(cls: type[UserError], message: str, state: dict) -> UserError:
    error = cls.__new__(cls)
    ValueError.__init__(error, message)
    error.__dict__.update(state)
    return error
