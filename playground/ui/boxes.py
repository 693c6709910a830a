"""The page's boxes that feed the app's one parser (``playground.settings``): a seed as text, a slider's range.

Handlers read what these send with ``playground.settings``' readers, which refuse a bad value by its field's name.
"""

from __future__ import annotations

import gradio as gr


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
