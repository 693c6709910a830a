"""Number arguments of the server's entry points, checked once with a message naming the field."""

from __future__ import annotations

import math

from playground.errors import UserError
from playground.whole_numbers import MAX_SEED, MIN_SEED, exact_whole, is_inexact_whole, is_number, not_exact


def typed_number(value, name: str, whole: bool = False):
    """A number argument as the library takes it: ints and floats only (what people type is parsed
    by the UI, playground.ui.parsing); a string, or a fraction where a count is wanted, is refused.
    A whole number stays the exact int it was sent as: a float stands for one only within 2⁵³."""
    if not is_number(value):
        raise UserError("input.not_number", "{name} must be a number, got {value!r}.", name=name, value=value)
    if whole:
        number = exact_whole(value)
        if number is None and is_inexact_whole(value):
            raise not_exact(value, name)
        if number is None:
            raise UserError("input.not_whole", "{name} must be a whole number, got {value!r}.", name=name, value=value)
        return number
    try:
        real = float(value)
    except OverflowError:  # an int too large for a float, e.g. 10**400
        real = math.inf
    if not math.isfinite(real):
        raise UserError("input.not_finite", "{name} must be a finite number, got {value!r}.", name=name, value=value)
    return real


def typed_seed(value, name: str = "Seed") -> int | None:
    """None (draw one) or a whole number in the app's seed range, 0..2⁶³ − 1, exactly as sent."""
    if value is None:
        return None
    seed = typed_number(value, name, whole=True)
    if not MIN_SEED <= seed <= MAX_SEED:
        raise UserError(
            "input.between",
            "{name} must be between {lo:,} and {hi:,}, got {value:,}.",
            name=name,
            lo=MIN_SEED,
            hi=MAX_SEED,
            value=seed,
        )
    return seed
