"""Parsing what a widget (or an API caller) sent: the app's one parser, and the page's boxes that feed it.

Handlers receive whatever the browser or a ``gradio_client`` caller sends (the page's sliders, number
boxes, dropdowns and radios hand it over as sent: ``widgets``), so every value is read by
``playground.settings`` into the type the server expects, or refused with a message that names the field.
"""

from __future__ import annotations

import gradio as gr

from playground.settings import (
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
)
from playground.whole_numbers import MAX_SEED

__all__ = [
    "MAX_SEED",
    "SamplingSettings",
    "parse_bool",
    "parse_choice",
    "parse_count",
    "parse_number",
    "parse_optional_count",
    "parse_optional_number",
    "parse_optional_whole",
    "parse_seed",
    "parse_whole",
    "seed_box",
    "slider_range",
]


def seed_box(value: int, label, **kwargs) -> gr.Textbox:
    """A seed typed on the page: a one-line text box, not a number box, because the browser holds a
    number box's value as a JavaScript number, which keeps whole numbers exactly only up to 2⁵³
    (9007199254740993 would reach the server as ...992). Its text is read by ``parse_seed`` with int().
    An API caller may send an int or digits alike."""
    return gr.Textbox(str(value), label=label, max_lines=1, **kwargs)


def slider_range(maximum: int, value: int = 0) -> dict:
    """A 0..maximum slider; with a single choice there is nothing to slide, so it hides (Gradio
    refuses a slider whose minimum equals its maximum)."""
    return gr.update(minimum=0, maximum=max(1, maximum), value=min(max(0, value), max(0, maximum)), visible=maximum > 0)
