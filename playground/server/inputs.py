"""Number arguments of the server's entry points, checked once with a message naming the field."""

from __future__ import annotations

import math
import numbers

from playground.errors import UserError


def typed_number(value, name: str, whole: bool = False):
    """A number argument as the library takes it: ints and floats only (what people type is parsed
    by the UI, playground.ui.parsing); a string, or a fraction where a count is wanted, is refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UserError("input.not_number", "{name} must be a number, got {value!r}.", name=name, value=value)
    if whole:
        if not math.isfinite(value) or not float(value).is_integer():
            raise UserError("input.not_whole", "{name} must be a whole number, got {value!r}.", name=name, value=value)
        return int(value)
    return float(value)
