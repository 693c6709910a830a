"""Whole numbers (seeds, counts, indices) read exactly, never through ``float()``.

A float holds every whole number only up to 2⁵³: ``float(9007199254740993)`` is 9007199254740992,
so a seed read through ``float()`` names another run. Here an int stays the int it is, text is
read by ``int()`` first, and a float counts as the whole number it names only within ±2⁵³,
where no two whole numbers share a float. This module imports only ``playground.errors``: every
layer (the engine's ``Generation``, the server's arguments, the UI's boxes, replay files) uses it.
"""

from __future__ import annotations

import math
import numbers

from playground.errors import UserError

# Past this a float is a whole number, but not necessarily the one that was meant.
EXACT_FLOAT_LIMIT = 2**53
# torch.Generator.manual_seed takes a 64-bit seed; the app keeps to the non-negative half, so a seed
# reads the same as a signed or an unsigned 64-bit number wherever it is written down.
MIN_SEED = 0
MAX_SEED = 2**63 - 1


def is_number(value) -> bool:
    """A real number a program may send: an int or a float (numpy's too), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def exact_whole(value) -> int | None:
    """The whole number ``value`` names exactly, or None: an int as it is, a float only when it is
    integral and within ±2⁵³. A fraction, nan, inf, a bool, text or anything else is None."""
    if not is_number(value):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    number = float(value)
    if math.isfinite(number) and number.is_integer() and abs(number) <= EXACT_FLOAT_LIMIT:
        return int(number)
    return None


def is_inexact_whole(value) -> bool:
    """A float that is integral but past ±2⁵³: a whole number, but maybe not the one that was sent."""
    if not is_number(value) or isinstance(value, numbers.Integral):
        return False
    number = float(value)
    return math.isfinite(number) and number.is_integer() and abs(number) > EXACT_FLOAT_LIMIT


def read_number(value):
    """What a box or a caller sent, as a number: an int or a float as it is; text through ``int()``
    first, so digits stay exact, then through ``float()`` ("2.5", "1e3", "nan"). Raises ValueError
    (TypeError for a value that is neither a number nor text)."""
    if is_number(value):
        return value
    if not isinstance(value, str):
        raise TypeError(f"not a number: {value!r}")
    try:
        return int(value.strip())
    except ValueError:
        return float(value)


def not_exact(value, name: str) -> UserError:
    """The refusal of a float past 2⁵³ where a whole number is wanted (``is_inexact_whole``)."""
    return UserError(
        "input.not_exact",
        "{name} {value!r} is past 2⁵³, where a number sent as a float may stand for its neighbour; "
        "send it as a whole number (an integer, or its digits as text).",
        name=name,
        value=value,
    )
