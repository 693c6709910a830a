"""The classroom room's API endpoints (``/room_*``): a room's operations by code, key and member id.

Each answers a refusal as ``{"error": message, "key": its key}`` (English, as every endpoint), so an API
caller sees why; the operations are ``server.rooms``'s, the same the page's buttons use.
"""

from __future__ import annotations

import functools

import gradio as gr

from playground.errors import UserError
from playground.i18n import LANGS
from playground.server import lessons
from playground.server.rooms import ROOMS, RoomError
from playground.ui.attention_view import SPANS, VIEWS
from playground.ui.common import client_address, session_model

from . import room_ask, room_follow
from . import tab as lessons_tab
from .room_views import join_link


def _api(fn):
    """``fn`` answering a refusal as ``{"error": message, "key": its key}`` (English, as every endpoint)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            return {"error": str(e), "key": e.key}
        except (ValueError, TypeError) as e:
            return {"error": str(e), "key": None}

    return call


@_api
def api_create(request: gr.Request = None) -> dict:
    """A new room: its code, the teacher's key (keep it secret) and the join link."""
    code, key = ROOMS.create(client_address())
    return {"code": code, "key": key, "link": join_link(code, request)}


@_api
def api_join(code, member=None) -> dict:
    """A member id in room ``code``: ``member`` again when the room gave it (a follower that joins again is
    the same member, with its vote), else a new one. ``member`` may be left out."""
    member = ROOMS.join(code, client_address(), member=member or None)
    seen = ROOMS.state(code, member=member, client=client_address())
    return {"code": seen["code"], "member": member, "version": seen["version"]}


@_api
def api_state(code, since, member, key) -> dict:
    """What a follower sees (``since``: the version already seen); with the teacher's key, the tally too."""
    since = int(since) if isinstance(since, (int, float)) and since == since else None
    seen = ROOMS.state(code, since=since, member=member or None, client=client_address())
    if key:
        seen["tally"] = ROOMS.tally(code, key, client_address())
    return seen


@_api
def api_publish(code, key, state) -> dict:
    return {"version": ROOMS.publish(code, key, state, client_address())}


@_api
def api_open_vote(state, code, key) -> dict:
    """A vote on the room's published step, its answer computed on this session's model."""
    ROOMS.check_teacher(code, key, client_address())  # first: a wrong key costs no model work
    published = ROOMS.state(code, client=client_address()).get("state") or {}
    lesson, index = lessons_tab.locate({"lesson": published.get("lesson"), "step": published.get("step", 0)})
    question, _ = lessons.ask(lesson.steps[index], session_model(state), published.get("prompt") or "")
    choices = [[cid, {lg: lessons_tab.choice_label(question, cid, lg) for lg in LANGS}] for cid, _ in question.choices]
    vote = ROOMS.open_vote(code, key, f"{lesson.id}/{index + 1}", choices, question.answer, client_address())
    return {"vote": vote, "choices": choices}


@_api
def api_ask_view(state, code, key, kind, layer) -> dict:
    """A vote on this session's last run: which head of ``layer`` does ``kind`` (``room_ask``), the teacher's
    key only; its answer computed from the run's attention on this session's model."""
    return room_ask.ask_view(state, code, key, kind, layer)


@_api
def api_ask_own(state, code, key, question, layer, choices=None) -> dict:
    """A vote on the teacher's own ``question``: its ``choices`` as text, one a line (2 to 8), or, left out
    or empty, the heads of ``layer`` of this session's model; it has no answer (``room_ask``)."""
    return room_ask.ask_own(state, code, key, question, layer, choices or None)


@_api
def api_publish_run(state, code, key) -> dict:
    """This session's last run (its chips, status and attention map, the first view) published to the room."""
    version = room_follow.published_run(state, code, key, None, VIEWS[0], 0, 0, True, None, SPANS[0])
    if version is None:
        raise RoomError("room.no_run", "This session has no finished run to publish: generate one first.")
    return {"version": version}


@_api
def api_vote(code, member, vote_id, choice) -> dict:
    vote_id = int(vote_id) if isinstance(vote_id, (int, float)) and vote_id == vote_id else None
    ROOMS.vote(code, member, vote_id, choice, client_address())
    return {"voted": choice}


@_api
def api_reveal(code, key) -> dict:
    return ROOMS.reveal(code, key, client_address())


@_api
def api_end(code, key) -> dict:
    ROOMS.end(code, key, client_address())
    return {"ended": code}


def wire(c, state) -> None:
    """The endpoints, each on a hidden button (``c``: the room's components, with its hidden API inputs)."""
    hidden = lambda: gr.Button(visible=False)
    hidden().click(api_create, None, c.api_out, api_name="room_create")
    hidden().click(api_join, [c.api_code, c.api_member], c.api_out, api_name="room_join")
    hidden().click(
        api_state,
        [c.api_code, c.api_number, c.api_member, c.api_key],
        c.api_out,
        api_name="room_state",
        queue=False,  # (one POST: a follower's poll never waits behind decoding, nor pays the queue's stream)
    )
    hidden().click(api_publish, [c.api_code, c.api_key, c.api_state], c.api_out, api_name="room_publish")
    hidden().click(
        api_publish_run, [state, c.api_code, c.api_key], c.api_out, api_name="room_publish_run", concurrency_limit=2
    )
    hidden().click(api_open_vote, [state, c.api_code, c.api_key], c.api_out, api_name="room_open_vote")
    hidden().click(
        api_ask_view,
        [state, c.api_code, c.api_key, c.api_choice, c.api_number],
        c.api_out,
        api_name="room_ask_view",
        concurrency_limit=2,
    )
    hidden().click(  # (the choices last, and optional: a caller that sends four inputs gets the layer's heads)
        api_ask_own,
        [state, c.api_code, c.api_key, c.api_choice, c.api_number, c.api_choices],
        c.api_out,
        api_name="room_ask_own",
    )
    hidden().click(api_vote, [c.api_code, c.api_member, c.api_number, c.api_choice], c.api_out, api_name="room_vote")
    hidden().click(api_reveal, [c.api_code, c.api_key], c.api_out, api_name="room_reveal")
    hidden().click(api_end, [c.api_code, c.api_key], c.api_out, api_name="room_end")
