"""A room's vote from its pages: the teacher opens one on the step's question and reveals it, a student votes.

The teacher's page opens the vote on the lesson step it shows: the step's question is asked of the teacher's
model as the vote opens, and its answer stays on the server (``server.rooms``) until Reveal, which shows the
answer and the room's counts on every page at its next poll (``room``). A question on the teacher's view,
not the step's, is ``room_ask``'s. A student's page casts the member's choice, which a second choice replaces.
The teacher's page, on the class's screen, shows how many answered; the counts so far only when the teacher
ticks "show the answers so far" (``show_counts``), for the vote open then.
"""

from __future__ import annotations

import gradio as gr

from playground.i18n import LANGS
from playground.server import lessons
from playground.server.rooms import ROOMS
from playground.ui.common import client_address, fail, lang_of, ok, session_model, tr, warn

from . import tab as lessons_tab
from .room_layout import no_room
from .room_views import so_far_html, teacher_status


def open_vote(state, room, pos, prompt) -> str:
    """The current step's question put to the room, its answer computed now on the teacher's model."""
    lang = lang_of(state)
    room = room or no_room()
    if not room.get("key"):
        return warn(tr(lang, "room_not_teacher"))
    try:
        ROOMS.check_teacher(room.get("code"), room.get("key"), client_address())  # first: a wrong key costs no work
        lesson, index = lessons_tab.locate(pos)
        step = lesson.steps[index]
        question, _ = lessons.ask(step, session_model(state), prompt)
        choices = [
            [cid, {lg: lessons_tab.choice_label(question, cid, lg) for lg in LANGS}] for cid, _ in question.choices
        ]
        ROOMS.open_vote(
            room.get("code"), room.get("key"), f"{lesson.id}/{index + 1}", choices, question.answer, client_address()
        )
    except Exception as e:
        return fail(e, lang)
    return ok(tr(lang, "room_vote_opened"))


def reveal(state, room) -> str:
    room = room or no_room()
    if not room.get("key"):
        return warn(tr(lang_of(state), "room_not_teacher"))
    try:
        ROOMS.reveal(room.get("code"), room.get("key"), client_address())
    except Exception as e:
        return fail(e, lang_of(state))
    return gr.skip()


def show_counts(state, room, shown: bool):
    """The teacher's "show the answers so far" box: the room's counts on the teacher's page (the class's
    screen) for the vote open now, or only how many answered. Outputs: room, status, the answers so far as
    bars (emptied when the teacher hides them)."""
    room = room or no_room()
    lang = lang_of(state)
    if not room.get("key"):
        return gr.skip(), warn(tr(lang, "room_not_teacher")), gr.skip()
    try:
        tally = ROOMS.tally(room.get("code"), room.get("key"), client_address())
    except Exception as e:
        return gr.skip(), fail(e, lang), gr.skip()
    room = {**room, "show_counts": tally["vote"] if shown else None}
    open_now = bool((room.get("vote") or {}).get("open"))
    bars = so_far_html(tally, room.get("vote"), lang) if shown and open_now else ("" if open_now else gr.skip())
    return room, teacher_status(room, lang, tally=tally), bars


def cast(state, room, choice) -> str:
    room = room or no_room()
    lang = lang_of(state)
    if not room.get("member"):
        return warn(tr(lang, "room_none"))
    try:
        vote = room.get("vote") or {}
        ROOMS.vote(room.get("code"), room.get("member"), vote.get("id"), choice, client_address())
    except Exception as e:
        return fail(e, lang)
    return ok(tr(lang, "room_voted"))
