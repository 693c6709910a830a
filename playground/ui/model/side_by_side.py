"""The Model tab's "GPT-2 ↔ variant" accordion: pick two presets, see both trees and breakdowns, marked."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from playground.server.side_by_side_views import CHOICES, DEFAULT_PAIR
from playground.settings import parse_choice
from playground.ui.common import T, lang_of, tr, tr_error
from playground.ui.model_switch import table
from playground.ui.model_words import side_by_side_tables
from playground.ui.widgets import Dropdown


def layout() -> SimpleNamespace:
    c = SimpleNamespace()
    with gr.Accordion(T("sbs_title"), open=False, elem_id="pg-sbs"):
        with gr.Row():
            c.a = Dropdown(CHOICES, value=DEFAULT_PAIR[0], label=T("sbs_a"), elem_id="pg-sbs-a")
            c.b = Dropdown(CHOICES, value=DEFAULT_PAIR[1], label=T("sbs_b"), elem_id="pg-sbs-b")
            c.button = gr.Button(T("sbs_button"), variant="secondary", elem_id="pg-sbs-go")
        c.summary = gr.Markdown(elem_id="pg-sbs-summary")
        c.breakdown = gr.Dataframe(
            headers=tr("en", "sbs_breakdown_headers").split("|"),
            interactive=False,
            wrap=True,
            elem_id="pg-sbs-breakdown",
            column_widths=["14%", "30%", "11%", "30%", "11%", "4%"],
        )
        c.tree = gr.Dataframe(
            headers=tr("en", "sbs_tree_headers").split("|"),
            interactive=False,
            wrap=True,
            max_height=420,
            elem_id="pg-sbs-tree",
        )
    return c


def compare_presets(state, a, b):
    """Both presets' trees and breakdowns (built on the meta device: the real sizes cost no memory)."""
    lang = lang_of(state)
    try:
        a, b = parse_choice(a, CHOICES, "Left"), parse_choice(b, CHOICES, "Right")
        tree, breakdown, summary = side_by_side_tables(a, b, max_depth=4, lang=lang)
    except ValueError as e:
        raise gr.Error(tr_error(lang, e), print_exception=False) from None
    return summary, table(breakdown, "sbs_breakdown_headers", lang), table(tree, "sbs_tree_headers", lang)


def wire(page, c: SimpleNamespace) -> None:
    c.button.click(compare_presets, [page.state, c.a, c.b], [c.summary, c.breakdown, c.tree], api_name="side_by_side")
