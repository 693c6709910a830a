"""A room's page in a new language: its status, the student's vote and the revealed counts drawn again.

Drawn from what the page holds of its room (no room is asked); the page's other views redraw through their
own tabs' listeners (``ui.listeners``).
"""

from __future__ import annotations

import gradio as gr

from playground.ui import listeners
from playground.ui.common import lang_of, tr

from .room_layout import no_room
from .room_views import counts_html, teacher_status, vote_radio


def redraw(state, room):
    """(status, vote, result) in the page's new language, from what the page holds of its room."""
    room = room or no_room()
    lang = lang_of(state)
    if not room.get("code"):
        return gr.skip(), gr.skip(), gr.skip()
    vote = room.get("vote")
    result = counts_html(vote, lang) if vote and "counts" in vote else gr.skip()
    if room.get("key"):
        return teacher_status(room, lang), gr.skip(), result
    key = "room_joined" if room.get("follow") else "room_away"
    return tr(lang, key, code=room["code"]), vote_radio(vote, lang, student=True), result


def wire(page) -> None:
    c = page.lessons
    listeners.on_change(page, redraw, [c.room], [c.room_status, c.room_vote, c.room_result])
