"""Where each event shows that it is running: the components it names, never a block holding others.

Gradio's front end keeps every component an event has ever shown progress on (by default, all of
its outputs), and at each later status change of any event (queued, running, each streamed
update, done) copies each of them whole -- for a tab or a row, everything inside it -- on the
page's main thread, so every click costs more the more figures the page has drawn. So:

- a view's event names the figure it redraws (``show_progress_on``, in the tab's layout);
- an event that shows no progress reports it to one hidden, empty component (``sink``);
- no event reports progress to a layout block (a tab's title, a row's visibility).
"""

from __future__ import annotations

import gradio as gr
from gradio.blocks import BlockContext


def sink() -> gr.HTML:
    """The hidden, empty component that takes the progress no one sees (built inside the page)."""
    return gr.HTML("", visible=False, elem_id="pg-progress-sink")


def holds_others(block) -> bool:
    """A tab, row, column ... with components inside (gr.HTML is a block context too, but empty)."""
    return isinstance(block, BlockContext) and bool(block.children)


def route(demo: gr.Blocks, hidden: gr.HTML) -> None:
    """Every event that names no progress target shows it on its outputs that hold no others, or,
    when its progress is hidden (or it has no such output), on ``hidden``."""
    for fn in demo.fns.values():
        if fn.fn is None or fn.show_progress_on:
            continue
        shown = [block for block in fn.outputs if not holds_others(block)]
        if fn.show_progress == "hidden" or not shown:
            fn.show_progress_on = [hidden]
        elif len(shown) < len(fn.outputs):
            fn.show_progress_on = shown
