"""The classroom room's components: the bar above the tabs (status, Follow) and the Lessons tab's controls.

The bar is seen from every tab (a student who stepped away in the Generate tab finds Follow there); the
controls (start, join, the QR code, the teacher's vote buttons, the student's vote, the revealed counts)
and the hidden inputs of the ``/room_*`` endpoints stand in the Lessons tab's Classroom accordion. Their
handlers are ``lessons_room``'s.
"""

from __future__ import annotations

import gradio as gr

from playground.ui.common import T
from playground.ui.widgets import Number, Radio

POLL_SECONDS = 1.0  # a page in a room asks it for news this often


def no_room() -> dict:
    return {"code": None, "key": None, "member": None, "version": None, "follow": True, "vote": None}


def bar() -> object:
    """Above the tabs, shown in a room: the room's status (the teacher's tally; a student's "following" or
    "stepped away") and a student's Follow button, seen from every tab the student may explore."""
    from types import SimpleNamespace

    c = SimpleNamespace()
    with gr.Row(visible=False, elem_id="pg-room-bar", equal_height=True) as c.room_bar:
        c.room_status = gr.Markdown(elem_id="pg-room-status")
        c.room_follow = gr.Button(
            T("room_follow"),
            size="sm",
            variant="primary",
            elem_id="pg-room-follow",
            scale=0,
            min_width=160,
            visible=False,
        )
    return c


def layout() -> object:
    """The room's controls (in the Lessons tab) and the hidden inputs of its API endpoints."""
    from types import SimpleNamespace

    c = SimpleNamespace()
    c.room = gr.State(no_room())
    c.room_timer = gr.Timer(POLL_SECONDS, active=False)
    with gr.Accordion(T("room_title"), open=False, elem_id="pg-room") as c.room_panel:
        with gr.Row():
            c.room_start = gr.Button(T("room_start"), size="sm", elem_id="pg-room-start", scale=1)
            c.room_code = gr.Textbox(
                label=T("room_code"), placeholder=T("room_code_hint"), max_lines=1, elem_id="pg-room-code", scale=1
            )
            c.room_join = gr.Button(T("room_join"), size="sm", elem_id="pg-room-join", scale=1)
        c.room_qr = gr.HTML(elem_id="pg-room-qr")  # the teacher's page: the join link as a QR code
        with gr.Row(visible=False) as c.room_teacher_row:  # the teacher's page only
            c.room_open = gr.Button(T("room_open_vote"), size="sm", elem_id="pg-room-open")
            c.room_reveal = gr.Button(T("room_reveal"), size="sm", variant="primary", elem_id="pg-room-reveal")
            c.room_end = gr.Button(T("room_end"), size="sm", variant="stop", elem_id="pg-room-end")
        c.room_vote = Radio([], label=T("room_vote"), visible=False, elem_id="pg-room-vote")
        c.room_result = gr.HTML(elem_id="pg-room-result")
    # the API endpoints' inputs and output (never shown)
    c.api_code = gr.Textbox(visible=False)
    c.api_key = gr.Textbox(visible=False)
    c.api_member = gr.Textbox(visible=False)
    c.api_number = Number(None, visible=False)
    c.api_choice = gr.Textbox(visible=False)
    c.api_state = gr.JSON(visible=False)
    c.api_out = gr.JSON(visible=False)
    c.room_secret = gr.Textbox(visible=False)  # the teacher's page only: its room's key, for room_keep.SAVE_JS
    return c
