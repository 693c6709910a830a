"""Numbers a user typed into a form (sampling settings, training steps), checked with a message that
names the field."""

from __future__ import annotations

from playground.errors import UserError


def as_number(value, name: str) -> float:
    if isinstance(value, bool):
        raise UserError("input.not_number", "{name} must be a number, got {value!r}.", name=name, value=value)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise UserError("input.not_number", "{name} must be a number, got {value!r}.", name=name, value=value) from None


def as_whole(value, name: str) -> int:
    number = as_number(value, name)
    if number != number or not float(number).is_integer():
        raise UserError("input.not_whole", "{name} must be a whole number, got {value!r}.", name=name, value=value)
    return int(number)
