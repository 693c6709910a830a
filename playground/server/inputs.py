"""Numbers a user typed into a form (sampling settings, training steps), checked with a message that
names the field."""

from __future__ import annotations


def as_number(value, name: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}.")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}.") from None


def as_whole(value, name: str) -> int:
    number = as_number(value, name)
    if number != number or not float(number).is_integer():
        raise ValueError(f"{name} must be a whole number, got {value!r}.")
    return int(number)
