"""Sliders, number boxes, dropdowns and radio groups that hand their handler the value as it was sent.

The page's tabs build these instead of ``gr.Slider`` and the like. Gradio's own preprocessing rounds
2.5 to 2 where ``precision=0``, and answers a string, None, NaN, a value out of a slider's range or not
among a dropdown's choices with its own error (no field named, the value echoed whole, a traceback in
the log) before the handler runs; here every such value reaches the handler, which reads it with the app's
one parser (``playground.settings``: ``parse_whole``, ``parse_choice``, ``SamplingSettings.parse`` ...) and
names the field. Dropdowns and radios here pass values, never indices.

``is_template``: Gradio draws each as the component it subclasses (``get_block_name`` is then the base
class's name), so the page looks and behaves as with Gradio's own. Classes, not a per-instance override,
because Gradio rebuilds a session's copy of a component from its class after an update (a slider's new
maximum). Gradio's component metaclass keeps a type stub beside the module that defines a component
(``widgets.pyi``, committed here, so nothing is written at run time).
"""

from __future__ import annotations

import gradio as gr


class Slider(gr.Slider):
    is_template = True

    def preprocess(self, payload):
        return payload


class Number(gr.Number):
    is_template = True

    def preprocess(self, payload):
        return payload


class Dropdown(gr.Dropdown):
    is_template = True

    def preprocess(self, payload):
        return payload


class Radio(gr.Radio):
    is_template = True

    def preprocess(self, payload):
        return payload
