"""The page's language: labels translated in the browser (``T``), and the strings handlers build."""

from __future__ import annotations

import gradio as gr

from ..translations import EN, ZH

I18N = gr.I18n(en=EN, **{"zh-CN": ZH, "zh": ZH})
T = I18N  # T("key") -> a label translated in the browser
