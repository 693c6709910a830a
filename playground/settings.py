"""What a user sets, parsed once: raw values in, frozen typed settings out, every refusal by its key.

A run's sampling settings arrive from the page's boxes (text and numbers as the browser sent them), from
an API or library caller (numbers) and from replay files (JSON). Each becomes one ``SamplingSettings``,
built by ``SamplingSettings.parse`` (what a person typed or a caller sent) or ``from_record`` (a replay
file). The rules of a setting (a temperature of 0 or more, top-p in (0, 1], a seed in 0..2⁶³ − 1) live in
its constructor, so the engine, which takes typed values, has nothing left to parse.

The field readers (``parse_whole``, ``parse_seed`` ...) read whole numbers exactly (``whole_numbers``:
digits by ``int()``, never through ``float()``) and name the field they refuse. ``text=False`` is a
program's argument: numbers only, so "42" is refused rather than guessed at. This module imports only
``errors`` and ``whole_numbers``: the engine, the server and the UI all use it.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass

from playground.errors import UserError
from playground.whole_numbers import (
    MAX_SEED,
    MIN_SEED,
    exact_whole,
    is_inexact_whole,
    is_number,
    not_exact,
    read_number,
)

# ----------------------------------------------------------------------------------------------
# Field readers: one value, the field's name for the message


def _not_number(value, name: str) -> UserError:
    return UserError("input.not_number", "{name} must be a number, got {value!r}.", name=name, value=value)


def _not_whole(value, name: str) -> UserError:
    return UserError("input.not_whole", "{name} must be a whole number, got {value!r}.", name=name, value=value)


def _read(value, name: str, text: bool = True):
    """The int or float a box sent (digits stay an exact int), or input.not_number. With ``text=False``
    only an int or a float is a number."""
    if isinstance(value, bool) or value is None or value == "" or not (text or is_number(value)):
        raise _not_number(value, name)
    try:
        return read_number(value)
    except (TypeError, ValueError):
        raise _not_number(value, name) from None


def parse_number(value, name: str, text: bool = True) -> float:
    """A finite real number (a float)."""
    number = _read(value, name, text)
    try:
        number = float(number)
    except OverflowError:  # an int too large for a float, e.g. 10**400
        number = math.inf
    if not math.isfinite(number):
        raise UserError("input.not_finite", "{name} must be a finite number, got {value!r}.", name=name, value=value)
    return number


def _whole_in_range(number, value, name: str, lo: int | None, hi: int | None) -> int:
    """``number`` as the exact whole number it names, within lo..hi. A float past 2⁵³ is checked against
    the range first (1e20 new tokens is too many, whatever its last digits), then refused as inexact."""
    whole = exact_whole(number)
    inexact = whole is None and is_inexact_whole(number)
    if inexact:
        whole = int(number)
    if whole is None:
        raise _not_whole(value, name)
    if (lo is not None and whole < lo) or (hi is not None and whole > hi):
        if lo is not None and hi is not None:
            raise UserError(
                "input.between",
                "{name} must be between {lo:,} and {hi:,}, got {value:,}.",
                name=name,
                lo=lo,
                hi=hi,
                value=whole,
            )
        if lo is not None:
            raise UserError(
                "input.at_least", "{name} must be at least {lo:,}, got {value:,}.", name=name, lo=lo, value=whole
            )
        raise UserError("input.at_most", "{name} must be at most {hi:,}, got {value:,}.", name=name, hi=hi, value=whole)
    if inexact:
        raise not_exact(value, name)
    return whole


def parse_whole(value, name: str, lo: int | None = None, hi: int | None = None, text: bool = True) -> int:
    """A whole number, exactly (digits are read by int(), never through a float): text that is no
    number, 2.5, nan and inf are all refused as not whole (with ``text=False``, anything but an int or
    a float as not a number)."""
    if not text:
        return _whole_in_range(_read(value, name, text), value, name, lo, hi)
    try:
        number = _read(value, name)
    except ValueError:
        raise _not_whole(value, name) from None
    return _whole_in_range(number, value, name, lo, hi)


def parse_count(value, name: str, lo: int | None = None, hi: int | None = None, text: bool = True) -> int:
    """A whole number of things (steps, top-k): text is refused as not a number at all; 2.5, nan
    and inf as not whole."""
    return _whole_in_range(_read(value, name, text), value, name, lo, hi)


def _given(value, text: bool) -> bool:
    return value is not None and not (text and value == "")


def parse_optional_number(value, name: str, text: bool = True) -> float | None:
    """None (or an empty box) means "not given"; otherwise a finite number."""
    return parse_number(value, name, text) if _given(value, text) else None


def parse_optional_whole(value, name: str, lo: int | None = None, hi: int | None = None) -> int | None:
    """None or empty means "not given"; otherwise a whole number (2.7 is refused, not truncated)."""
    return parse_whole(value, name, lo, hi) if _given(value, True) else None


def parse_optional_count(value, name: str, lo: int | None = None, hi: int | None = None, text: bool = True):
    """None (or an empty box) means "not given"; otherwise as ``parse_count``."""
    return parse_count(value, name, lo, hi, text) if _given(value, text) else None


def parse_seed(value, name: str = "Seed", text: bool = True) -> int | None:
    """None (or an empty box) means "no seed"; otherwise a whole number in 0..2⁶³ − 1, exactly as sent."""
    return parse_whole(value, name, MIN_SEED, MAX_SEED, text) if _given(value, text) else None


def parse_bool(value, name: str) -> bool:
    """A checkbox sends True/False; API callers sometimes send strings, which bool() would misread."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise UserError("input.not_bool", "{name} must be true or false, got {value!r}.", name=name, value=value)


def parse_choice(value, choices, name: str) -> str:
    if value not in choices:
        shown = ", ".join(f"“{c}”" for c in choices)
        raise UserError(
            "input.not_one_of", "{name} must be one of {choices}; got {value!r}.", name=name, choices=shown, value=value
        )
    return value


# ----------------------------------------------------------------------------------------------
# A run's sampling settings


def _is_finite(x) -> bool:
    try:
        return math.isfinite(x)
    except OverflowError:  # an int too large for a float, e.g. 10**400
        return False


def _is_real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class SamplingSettings:
    """How a run samples, typed and checked: build one with ``parse`` (what a person or a caller sent)
    or ``from_record`` (a replay file); the constructor itself takes typed values and holds the rules.

    ``top_k`` 0 or None and ``top_p`` None or 1 are off; ``seed`` None draws one; ``max_new_tokens``
    None is "not said" (a replay makes as many tokens as it recorded)."""

    max_new_tokens: int | None = None
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        t, k, p, n = self.temperature, self.top_k, self.top_p, self.max_new_tokens
        if not _is_real(t):
            raise UserError(
                "generate.temperature_number", "Temperature must be a number, got {temperature!r}.", temperature=t
            )
        if not _is_finite(t):
            raise UserError(
                "generate.temperature_finite", "Temperature must be a finite number, got {temperature}.", temperature=t
            )
        if t < 0:
            raise UserError(
                "generate.temperature_negative",
                "Temperature must be 0 (greedy) or positive, got {temperature}.",
                temperature=t,
            )
        if k is not None:
            if not (_is_real(k) and (isinstance(k, int) or k.is_integer())):
                raise UserError(
                    "generate.top_k_whole", "top-k must be a whole number (0 or empty = off), got {top_k!r}.", top_k=k
                )
            if k < 0:
                raise UserError(
                    "generate.top_k_negative",
                    "top-k must be 0 (off) or a positive whole number, got {top_k}.",
                    top_k=int(k),
                )
        if p is not None:
            if not (_is_real(p) and _is_finite(p)):
                raise UserError("generate.top_p_number", "top-p must be a number in (0, 1], got {top_p!r}.", top_p=p)
            if not 0 < p <= 1:
                raise UserError("generate.top_p_range", "top-p must be in (0, 1] (1 = off), got {top_p}.", top_p=p)
        if n is not None:
            if not (isinstance(n, int) and not isinstance(n, bool)):
                raise UserError(
                    "generate.max_new_whole",
                    "The number of new tokens must be a whole number, got {max_new_tokens!r}.",
                    max_new_tokens=n,
                )
            if n <= 0:
                raise UserError(
                    "generate.max_new_zero", "Ask for at least one new token (got {max_new_tokens}).", max_new_tokens=n
                )
        seed = self.seed
        if seed is not None:
            # Exactly the seed given: 2.5 is not truncated, nor 2⁵³ + 1 rounded through a float.
            seed = exact_whole(self.seed)
            if seed is None and is_inexact_whole(self.seed):
                raise not_exact(self.seed, "The seed")
            if seed is None or not MIN_SEED <= seed <= MAX_SEED:
                raise UserError(
                    "generate.seed_range",
                    "The seed must be a whole number between 0 and 2⁶³ − 1, got {seed}.",
                    seed=self.seed,
                )
        # Typed as declared from here on: 3.0 as top-k is 3, a temperature of 1 is 1.0.
        object.__setattr__(self, "temperature", float(t))
        object.__setattr__(self, "top_k", None if k is None else int(k))
        object.__setattr__(self, "top_p", None if p is None else float(p))
        object.__setattr__(self, "seed", seed)

    @classmethod
    def parse(
        cls,
        *,
        temperature,
        top_k,
        top_p,
        max_new_tokens,
        seed,
        greedy=False,
        text: bool = True,
        seed_name: str = "Seed",
    ) -> SamplingSettings:
        """The settings a person typed (``text=True``: the page's boxes send digits as text) or a program
        sent (``text=False``: numbers only), each field refused by its name: "" and None are "not given"
        for top-k, top-p and the seed; ``greedy`` sets the temperature to 0."""
        greedy = parse_bool(greedy, "Greedy")
        seed = parse_seed(seed, seed_name, text)
        max_new_tokens = parse_whole(max_new_tokens, "Max new tokens", text=text)
        temperature = parse_number(temperature, "Temperature", text)
        top_k = parse_optional_count(top_k, "top-k", text=text)
        top_p = parse_optional_number(top_p, "top-p", text)
        if greedy:
            temperature = 0.0
        return cls(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, max_new_tokens=max_new_tokens)

    @classmethod
    def from_record(cls, settings, seed) -> SamplingSettings:
        """A replay record's ``settings`` and ``seed`` (JSON: a whole number is an int there), refused as
        the record's field. A missing temperature is greedy, as the record was written by an older app."""
        if not isinstance(settings, dict):
            raise UserError(
                "replay.settings", "The replay record's settings must be an object with temperature, top_k and top_p."
            )
        temperature, top_k, top_p = (settings.get(k) for k in ("temperature", "top_k", "top_p"))
        if temperature is not None and not (_is_real(temperature) and _is_finite(temperature) and temperature >= 0):
            raise UserError(
                "replay.temperature",
                "The replay record's settings.temperature must be 0 (greedy) or a positive number.",
            )
        if top_k is not None and not (_is_whole(top_k) and top_k >= 0):
            raise UserError(
                "replay.top_k", "The replay record's settings.top_k must be 0 (off) or a positive whole number."
            )
        if top_p is not None and not (_is_real(top_p) and _is_finite(top_p) and 0 < top_p <= 1):
            raise UserError("replay.top_p", "The replay record's settings.top_p must be in (0, 1].")
        if not _is_whole(seed):
            raise UserError("replay.seed", "The replay record's seed must be a whole number.")
        if not MIN_SEED <= seed <= MAX_SEED:
            raise UserError("replay.seed_range", "The replay record's seed must be between 0 and 2⁶³ − 1.")
        return cls(temperature=temperature or 0.0, top_k=top_k or None, top_p=top_p, seed=seed)

    def as_dict(self) -> dict:
        """The settings as JSON-able values (a seed stays the exact int it is)."""
        return asdict(self)


def _is_whole(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
