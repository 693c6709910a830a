"""Errors a user can cause and act on: a message key with its fields, English by ``str()``.

``UserError("budget.over", "This needs {need} but {have} is free.", need=..., have=...)`` is a
``ValueError`` whose ``str()`` is the English sentence (the library and the API answer in English);
the interface looks ``key`` up in ``playground.i18n`` and fills the same ``fields`` in the page's
language. Each layer subclasses it (``ConfigError``, ``WeightLoadError``, ...) so callers can
still catch by kind. This module imports nothing of the project: every layer may raise these.
"""

from __future__ import annotations

from typing import Any


class UserError(ValueError):
    """A refusal written for the person who caused it: ``key`` names the message, ``fields`` fill it."""

    def __init__(self, key: str, template: str, /, **fields: Any) -> None:
        self.key = key
        self.template = template
        self.fields = fields
        super().__init__(template.format(**fields) if fields else template)
