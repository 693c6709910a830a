"""The classroom room's components: the bar above the tabs (status, Follow) and the Lessons tab's controls.

The bar is seen from every tab (a student who stepped away in the Generate tab finds Follow there); the
controls (start, join, the QR code, the teacher's vote buttons, the box that shows the counts so far and the
question on the view, the student's vote, the revealed counts)
and the hidden inputs of the ``/room_*`` endpoints stand in the Lessons tab's Classroom accordion. Their
handlers are ``lessons_room``'s.
"""

from __future__ import annotations

import html
import secrets

import gradio as gr

from playground.server.room_wait import PATH
from playground.ui.common import T, choices
from playground.ui.widgets import Dropdown, Number, Radio

# The questions a teacher may ask about the Generate heatmap's layer (``server.view_questions.KINDS``).
# "own": the teacher writes the question (room_ask.ask_own) and may type its choices; else the same heads.
ASK_KINDS = {
    "previous-token": "room_ask_previous",
    "first-token": "room_ask_first",
    "induction": "room_ask_induction",
    "own": "room_ask_own",
}
POLL_SECONDS = 1.0  # a teacher's page asks its room for the tally this often
# A student's page waits on its room's next move (WATCH_JS, /room/wait) and draws it at once; its own
# poll through the queue runs only then, and this often besides (it keeps the member's place).
STUDENT_POLL_SECONDS = 30.0

# The student's page: a long poll on server.room_wait's route for the room in #pg-room-watch (written
# when the page joins, emptied when it leaves); each answer that moved the room clicks the hidden
# #pg-room-poke, whose handler is the page's poll (lessons_room.poll). A refused code stops the wait
# (the poll says why) until the page joins again.
WATCH_JS = """
() => {
  const root = () => ((window.gradio_config && window.gradio_config.root) || '').replace(/\\/$/, '');
  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
  const poke = () => document.querySelector('#pg-room-poke')?.click();
  let dead = null;
  (async () => {
    let joined = null, since = null;
    for (;;) {
      const el = document.querySelector('#pg-room-watch .pg-room-watch');
      const now = el ? el.dataset.code + ':' + el.dataset.join : null;
      if (!el || now === dead) { joined = null; await sleep(250); continue; }
      if (now !== joined) { joined = now; since = null; }
      try {
        const url = root() + 'ROOM_WAIT_PATH?code=' + encodeURIComponent(el.dataset.code) + '&timeout=20' +
          (since === null ? '' : '&since=' + since);
        const answer = await (await fetch(url, {cache: 'no-store'})).json();
        if (answer.error) { dead = joined; poke(); continue; }
        if (answer.changed) { since = answer.version; poke(); }
      } catch (e) { await sleep(1000); }
    }
  })();
}
""".replace("ROOM_WAIT_PATH", PATH)


def no_room() -> dict:
    """A page's record of its room, in none. ``show_counts``: the vote (its id) whose counts so far the
    teacher's page shows (``room_views.counts_shown``)."""
    return {
        "code": None,
        "key": None,
        "member": None,
        "version": None,
        "follow": True,
        "vote": None,
        "show_counts": None,
    }


def watch_html(code: str | None) -> str:
    """What WATCH_JS reads: the room a student's page follows (a new ``join`` each time it joins), or none."""
    if not code:
        return ""
    return f"<span class='pg-room-watch' data-code='{html.escape(code)}' data-join='{secrets.token_hex(4)}'></span>"


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
        with gr.Column(visible=False) as c.room_teacher_row:  # the teacher's page only
            with gr.Row():
                c.room_open = gr.Button(T("room_open_vote"), size="sm", elem_id="pg-room-open")
                c.room_reveal = gr.Button(T("room_reveal"), size="sm", variant="primary", elem_id="pg-room-reveal")
                c.room_end = gr.Button(T("room_end"), size="sm", variant="stop", elem_id="pg-room-end")
            # the teacher's page is the class's screen: the counts so far only when the teacher shows them
            c.room_show_counts = gr.Checkbox(
                False, label=T("room_show_counts"), info=T("room_show_counts_info"), elem_id="pg-room-show-counts"
            )
            with gr.Row(equal_height=True):  # a question on the Generate heatmap's layer (room_ask)
                c.room_ask_kind = Dropdown(
                    choices(ASK_KINDS), value="previous-token", label=T("room_ask_kind"), elem_id="pg-room-ask-kind"
                )
                c.room_ask_text = gr.Textbox(
                    label=T("room_ask_text"),
                    placeholder=T("room_ask_text_hint"),
                    max_lines=2,
                    visible=False,
                    elem_id="pg-room-ask-text",
                )
                c.room_ask_choices = gr.Textbox(  # (one a line: a choice may hold a comma or a semicolon)
                    label=T("room_ask_choices"),
                    info=T("room_ask_choices_info"),
                    placeholder=T("room_ask_choices_hint"),
                    lines=3,
                    max_lines=8,
                    visible=False,
                    elem_id="pg-room-ask-choices",
                )
                c.room_ask = gr.Button(T("room_ask_button"), size="sm", elem_id="pg-room-ask")
        c.room_vote = Radio([], label=T("room_vote"), visible=False, elem_id="pg-room-vote")
        c.room_result = gr.HTML(elem_id="pg-room-result")
    # the API endpoints' inputs and output (never shown)
    c.api_code = gr.Textbox(visible=False)
    c.api_key = gr.Textbox(visible=False)
    c.api_member = gr.Textbox(visible=False)
    c.api_number = Number(None, visible=False)
    c.api_choice = gr.Textbox(visible=False)
    c.api_choices = gr.Textbox(visible=False)  # (/room_ask_own's typed choices, one a line)
    c.api_state = gr.JSON(visible=False)
    c.api_out = gr.JSON(visible=False)
    # what room_keep.SAVE_JS keeps in the browser: the teacher's key, a student's member id (never a key)
    c.room_secret = gr.Textbox(visible=False)
    c.room_watch = gr.HTML("", elem_id="pg-room-watch", elem_classes=["pg-offscreen"])  # a student's room, for WATCH_JS
    c.room_poke = gr.Button("poll", elem_id="pg-room-poke", elem_classes=["pg-offscreen"])
    c.room_scroll = gr.HTML("", elem_id="pg-room-scroll", elem_classes=["pg-offscreen"])  # for room_scroll.SCROLL_JS
    return c
