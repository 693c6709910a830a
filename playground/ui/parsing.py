"""Parsing what a widget (or an API caller) sent.

Handlers receive whatever the browser or a ``gradio_client`` caller sends, so every value is
parsed here into the type the engine expects, or refused with a message that names the field.
"""

from __future__ import annotations

import math
from unittest import mock

import gradio as gr

from playground.errors import UserError
from playground.whole_numbers import MAX_SEED, MIN_SEED, exact_whole, is_inexact_whole, not_exact, read_number


def _not_number(value, name: str) -> UserError:
    return UserError("input.not_number", "{name} must be a number, got {value!r}.", name=name, value=value)


def _not_whole(value, name: str) -> UserError:
    return UserError("input.not_whole", "{name} must be a whole number, got {value!r}.", name=name, value=value)


def _read(value, name: str):
    """The int or float a box sent (digits stay an exact int), or input.not_number."""
    if isinstance(value, bool) or value is None or value == "":
        raise _not_number(value, name)
    try:
        return read_number(value)
    except (TypeError, ValueError):
        raise _not_number(value, name) from None


def parse_number(value, name: str) -> float:
    number = _read(value, name)
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


def parse_whole(value, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """A whole number, exactly (digits are read by int(), never through a float): text that is no
    number, 2.5, nan and inf are all refused as not whole."""
    try:
        number = _read(value, name)
    except ValueError:
        raise _not_whole(value, name) from None
    return _whole_in_range(number, value, name, lo, hi)


def parse_count(value, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """A whole number of things (steps, top-k): text is refused as not a number at all; 2.5, nan
    and inf as not whole."""
    return _whole_in_range(_read(value, name), value, name, lo, hi)


def parse_optional_number(value, name: str) -> float | None:
    """None or empty means "not given"; otherwise a finite number."""
    return None if value is None or value == "" else parse_number(value, name)


def parse_optional_whole(value, name: str, lo: int | None = None, hi: int | None = None) -> int | None:
    """None or empty means "not given"; otherwise a whole number (2.7 is refused, not truncated)."""
    return None if value is None or value == "" else parse_whole(value, name, lo, hi)


def parse_optional_count(value, name: str, lo: int | None = None, hi: int | None = None) -> int | None:
    """None or empty means "not given"; otherwise as ``parse_count``."""
    return None if value is None or value == "" else parse_count(value, name, lo, hi)


def parse_seed(value, name: str = "Seed") -> int | None:
    """None or empty means "no seed"; otherwise a whole number torch accepts."""
    if value is None or value == "":
        return None
    return parse_whole(value, name, MIN_SEED, MAX_SEED)


def seed_box(value: int, label, **kwargs) -> gr.Textbox:
    """A seed typed on the page: a one-line text box, not a number box, because the browser holds a
    number box's value as a JavaScript number, which keeps whole numbers exactly only up to 2⁵³
    (9007199254740993 would reach the server as ...992). Its text is read by ``parse_seed`` with int().
    An API caller may send an int or digits alike."""
    return gr.Textbox(str(value), label=label, max_lines=1, **kwargs)


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


# Components whose value goes to the handler exactly as it was sent. ``is_template``: Gradio draws each
# as the component it subclasses (``get_block_name`` is then its base class's name). Subclasses, not a
# per-instance override, because Gradio rebuilds a session's copy of a component from its class after
# an update (a slider's new maximum). Gradio's ComponentMeta also writes a .pyi stub next to the module
# of every component class defined; that side effect is switched off while these are.
with mock.patch("gradio.component_meta.create_or_modify_pyi", lambda *args: None):

    class SliderAsSent(gr.Slider):
        is_template = True

        def preprocess(self, payload):
            return payload

    class NumberAsSent(gr.Number):
        is_template = True

        def preprocess(self, payload):
            return payload

    class DropdownAsSent(gr.Dropdown):
        is_template = True

        def preprocess(self, payload):
            return payload

    class RadioAsSent(gr.Radio):
        is_template = True

        def preprocess(self, payload):
            return payload


AS_SENT = {gr.Slider: SliderAsSent, gr.Number: NumberAsSent, gr.Dropdown: DropdownAsSent, gr.Radio: RadioAsSent}


def inputs_as_sent(demo: gr.Blocks) -> None:
    """Every slider, number box, dropdown and radio group hands its handler the value as sent.
    Gradio's own preprocessing rounds 2.5 to 2 where ``precision=0``, and answers a string, None,
    NaN, a value out of a slider's range or not among a dropdown's choices with its own error (no
    field named, the value echoed whole, a traceback in the log) before the handler runs; the
    handlers parse every such value themselves (``parse_whole``, ``parse_choice`` ...) and name the
    field. Dropdowns and radios here all pass values, never indices."""
    for block in demo.blocks.values():
        cls = AS_SENT.get(type(block))
        if cls is not None and getattr(block, "type", "value") == "value" and not getattr(block, "multiselect", False):
            block.__class__ = cls  # the same component, drawn the same; only its preprocessing differs


def slider_range(maximum: int, value: int = 0) -> dict:
    """A 0..maximum slider; with a single choice there is nothing to slide, so it hides (Gradio
    refuses a slider whose minimum equals its maximum)."""
    return gr.update(minimum=0, maximum=max(1, maximum), value=min(max(0, value), max(0, maximum)), visible=maximum > 0)
