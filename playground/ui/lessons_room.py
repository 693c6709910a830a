"""Classroom mode in the Lessons tab: a teacher's room that students follow and vote in (server.rooms).

The teacher presses "Start a room" (or opens ``?room=new``): the page shows the room's code and a join
link (``?room=CODE``); the teacher's key stays in the session's state, never in the link (a reload of the
teacher's page loses it). Each Next,
Back or lesson pick of the teacher's page publishes the step. A student's page (``?room=CODE``, or the
code typed) polls the room once a second by version and, while following, draws the teacher's step on
the teacher's prompt; moving on their own steps away until they press Follow. The teacher opens a vote
on the step's question (its answer computed on the teacher's model and kept on the server), sees how
many answered, and Reveal shows the answer and the room's counts on every page. The ``room_*``
endpoints are the same operations for an API caller.
"""

from __future__ import annotations

import functools
import html
import os
import socket

import gradio as gr

from playground.errors import UserError
from playground.server import lessons
from playground.server.recipes import model_label
from playground.server.rooms import ROOMS, RoomError

from . import lessons_tab, listeners
from .common import T, client_address, fail, lang_of, ok, page_prefs, session_model, tr, warn
from .results import only, result

POLL_SECONDS = 1.0
LANGS = ("en", "zh-CN")

Polled = result(
    "Polled", "room", "room_status", "room_vote", "room_result", "room_timer", *lessons_tab.Shown._fields, "prompt"
)
Entered = result(
    "Entered",
    "room",
    "room_status",
    "room_vote",
    "room_result",
    "room_timer",
    "room_panel",
    "room_teacher_row",
    "room_follow",
)


def no_room() -> dict:
    return {"code": None, "key": None, "member": None, "version": None, "follow": True, "vote": None}


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
                label=T("room_code"), placeholder="K7QM2R", max_lines=1, elem_id="pg-room-code", scale=1
            )
            c.room_join = gr.Button(T("room_join"), size="sm", elem_id="pg-room-join", scale=1)
            c.room_follow = gr.Button(T("room_follow"), size="sm", elem_id="pg-room-follow", scale=1, visible=False)
        c.room_status = gr.Markdown(elem_id="pg-room-status")
        with gr.Row(visible=False) as c.room_teacher_row:  # the teacher's page only
            c.room_open = gr.Button(T("room_open_vote"), size="sm", elem_id="pg-room-open")
            c.room_reveal = gr.Button(T("room_reveal"), size="sm", variant="primary", elem_id="pg-room-reveal")
            c.room_end = gr.Button(T("room_end"), size="sm", variant="stop", elem_id="pg-room-end")
        c.room_vote = gr.Radio([], label=T("room_vote"), visible=False, elem_id="pg-room-vote")
        c.room_result = gr.HTML(elem_id="pg-room-result")
    # the API endpoints' inputs and output (never shown)
    c.api_code = gr.Textbox(visible=False)
    c.api_key = gr.Textbox(visible=False)
    c.api_member = gr.Textbox(visible=False)
    c.api_number = gr.Number(None, visible=False)
    c.api_choice = gr.Textbox(visible=False)
    c.api_state = gr.JSON(visible=False)
    c.api_out = gr.JSON(visible=False)
    return c


# ---- what pages show
def join_link(code: str, request) -> str:
    """``?room=CODE`` on the address the teacher's browser used; on loopback while the server listens
    beyond it (``GRADIO_SERVER_NAME=0.0.0.0``), the machine's LAN address instead."""
    headers = getattr(request, "headers", None) or {}
    host = headers.get("x-forwarded-host") or headers.get("host") or "127.0.0.1:7860"
    scheme = headers.get("x-forwarded-proto") or getattr(getattr(request, "url", None), "scheme", None) or "http"
    name, _, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
    if name in ("127.0.0.1", "localhost") and os.environ.get("GRADIO_SERVER_NAME", "") not in ("", "127.0.0.1"):
        lan = lan_address()
        if lan:
            host = f"{lan}:{port}" if port else lan
    return f"{scheme}://{host}/?room={code}"


def lan_address() -> str | None:
    """This machine's address on its network (no packet is sent), or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            address = s.getsockname()[0]
        return None if address.startswith("127.") else address
    except OSError:
        return None


def label_in(label, lang: str) -> str:
    return (label.get(lang) or label.get("en") or "") if isinstance(label, dict) else str(label)


def counts_html(vote: dict, lang: str) -> str:
    """The revealed vote: the answer and one bar per choice (counts only: never who chose what)."""
    counts, total = vote.get("counts") or {}, max(1, int(vote.get("answered") or 0))
    answer = next((label_in(label, lang) for cid, label in vote["choices"] if cid == vote.get("answer")), "")
    rows = []
    for cid, label in vote["choices"]:
        n = int(counts.get(cid, 0))
        width = round(100 * n / total)
        mark = " ✓" if cid == vote.get("answer") else ""
        rows.append(
            f"<div class='pg-room-bar' data-choice='{html.escape(cid)}' data-count='{n}'>"
            f"<span>{html.escape(label_in(label, lang))}{mark}</span> <b>{n}</b>"
            f"<div style='background:#4c78a8;height:8px;width:{width}%'></div></div>"
        )
    head = html.escape(tr(lang, "room_revealed", answer=answer, answered=int(vote.get("answered") or 0)))
    return f"<div class='pg-room-counts' data-answer='{html.escape(str(vote.get('answer')))}'><b>{head}</b>{''.join(rows)}</div>"


def vote_radio(vote: dict | None, lang: str, student: bool):
    if not student or vote is None:
        return gr.update(visible=False, choices=[], value=None)
    return gr.update(
        visible=True,
        choices=[(label_in(label, lang), cid) for cid, label in vote["choices"]],
        value=vote.get("mine"),
        interactive=bool(vote.get("open")),
        label=tr(lang, "room_vote"),
    )


def tally_text(tally: dict, lang: str, vote: dict | None = None) -> str:
    """How many answered, and each choice's count (by its label when the page has the vote's choices)."""
    if not tally.get("vote"):
        return ""
    labels = {cid: label_in(label, lang) for cid, label in (vote or {}).get("choices", [])}
    counts = " · ".join(f"“{labels.get(cid, cid)}” {n}" for cid, n in tally["counts"].items())
    return tr(lang, "room_tally", answered=tally["answered"], members=tally["members"], counts=counts)


def teacher_status(room: dict, lang: str, link: str | None = None, tally: dict | None = None) -> str:
    text = tr(lang, "room_teacher", code=room["code"])
    if link or room.get("link"):
        text += "  \n" + tr(lang, "room_link", link=link or room.get("link"), code_hint=room["code"])
    if tally:
        text += "  \n" + tally_text(tally, lang, room.get("vote"))
    return text


# ---- the teacher
def publishable(state, pos, prompt) -> dict:
    try:
        model = model_label(state["recipe"])[:400]
    except Exception:
        model = None
    return {"tab": "lessons", "lesson": pos.get("lesson"), "step": pos.get("step", 0), "model": model, "prompt": prompt}


def start_room(state, room, pos, prompt, request: gr.Request = None) -> Entered:
    lang = lang_of(state)
    try:
        code, key = ROOMS.create(client_address())
        link = join_link(code, request)
        ROOMS.publish(code, key, publishable(state, pos or lessons_tab.first_position(), prompt or ""))
    except Exception as e:
        return only(Entered, room_status=fail(e, lang))
    room = {**no_room(), "code": code, "key": key, "link": link, "version": None}
    return Entered(
        room,
        teacher_status(room, lang, link),
        vote_radio(None, lang, False),
        "",
        gr.Timer(active=True),
        gr.Accordion(open=True),
        gr.update(visible=True),
        gr.update(visible=False),
    )


def publish_move(state, room, pos, prompt):
    """After the page moved (Next, Back, a lesson picked): the teacher's page publishes the step; a
    student's page has stepped away (its own lesson radio back)."""
    room = room or no_room()
    if room.get("key"):
        try:
            ROOMS.publish(room["code"], room["key"], publishable(state, pos or {}, prompt or ""))
        except Exception as e:
            return gr.skip(), fail(e, lang_of(state)), gr.skip()
        return gr.skip(), gr.skip(), gr.skip()
    if room.get("member") and room.get("follow"):
        return {**room, "follow": False}, tr(lang_of(state), "room_away", code=room["code"]), gr.update(visible=True)
    return gr.skip(), gr.skip(), gr.skip()


def open_vote(state, room, pos, prompt) -> str:
    """The current step's question put to the room, its answer computed now on the teacher's model."""
    lang = lang_of(state)
    room = room or no_room()
    if not room.get("key"):
        return warn(tr(lang, "room_not_teacher"))
    try:
        lesson, index = lessons_tab.locate(pos)
        step = lesson.steps[index]
        question, _ = lessons.ask(step, session_model(state), prompt)
        choices = [
            [cid, {lg: lessons_tab.choice_label(question, cid, lg) for lg in LANGS}] for cid, _ in question.choices
        ]
        ROOMS.open_vote(room.get("code"), room.get("key"), f"{lesson.id}/{index + 1}", choices, question.answer)
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


def end_room(state, room):
    room = room or no_room()
    lang = lang_of(state)
    try:
        if room.get("key"):
            ROOMS.end(room.get("code"), room.get("key"), client_address())
    except RoomError as e:
        if e.key != "room.ended":
            return gr.skip(), fail(e, lang), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
    return (
        no_room(),
        tr(lang, "room_left"),
        gr.update(visible=False, choices=[], value=None),
        "",
        gr.Timer(active=False),
        gr.update(visible=False),
        gr.update(visible=False),
    )


# ---- students
def join_room(state, room, code) -> Entered:
    lang = lang_of(state)
    try:
        member = ROOMS.join(code, client_address())
    except Exception as e:
        return only(Entered, room_status=fail(e, lang), room_panel=gr.Accordion(open=True))
    code = ROOMS.state(code, member=member, client=client_address())["code"]
    room = {**no_room(), "code": code, "member": member}
    return Entered(
        room,
        tr(lang, "room_joined", code=code),
        gr.skip(),
        "",
        gr.Timer(active=True),
        gr.Accordion(open=True),
        gr.update(visible=False),
        gr.update(visible=True),
    )


def from_link(state, room, prompt, pos, request: gr.Request = None):
    """Page load: ``?room=CODE`` joins that room, ``?room=new`` starts one (and opens the Lessons tab)."""
    params = dict(request.query_params) if request is not None else {}
    code = params.get("room")
    if not code:
        return (*[gr.skip()] * len(Entered._fields), gr.skip(), gr.skip())
    state = {**(state or {}), "lang": page_prefs(request)[0]}  # (the page has not said its language yet)
    if str(code).lower() == "new":
        entered = start_room(state, room, pos, prompt, request)
    else:
        entered = join_room(state, room, code)
    return (*entered, gr.update(value="" if str(code).lower() == "new" else code), gr.Tabs(selected="lessons"))


def follow(state, room):
    """Back in step: the next poll draws the teacher's step."""
    room = room or no_room()
    if not room.get("member"):
        return gr.skip(), warn(tr(lang_of(state), "room_none"))
    return {**room, "follow": True, "version": None}, tr(lang_of(state), "room_joined", code=room["code"])


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


def poll(state, room, prompt) -> Polled:
    """A tick: nothing when the room has not changed; else what changed (the step while following,
    the vote, the reveal); the teacher's page also gets the count of answers."""
    room = room or no_room()
    nothing = Polled(*[gr.skip()] * len(Polled._fields))
    if not room.get("code"):
        return nothing._replace(room_timer=gr.Timer(active=False))
    lang = lang_of(state)
    teacher = bool(room.get("key"))
    try:
        seen = ROOMS.state(room["code"], since=room.get("version"), member=room.get("member"), client=client_address())
        tally = ROOMS.tally(room["code"], room["key"], client_address()) if teacher else None
    except RoomError as e:
        return nothing._replace(
            room=no_room(),
            room_status=fail(e, lang),
            room_vote=gr.update(visible=False),
            room_timer=gr.Timer(active=False),
        )
    out = nothing
    if seen["changed"]:
        room = {**room, "version": seen["version"], "vote": seen.get("vote")}
    if teacher:
        out = out._replace(room_status=teacher_status(room, lang, tally=tally))
    if not seen["changed"]:
        return out
    vote = seen.get("vote")
    out = out._replace(
        room=room,
        room_vote=vote_radio(vote, lang, student=not teacher),
        room_result=counts_html(vote, lang) if vote and "counts" in vote else "",
    )
    published = seen.get("state") or {}
    if teacher or not room.get("follow") or not published.get("lesson"):
        return out
    pos = {"lesson": published["lesson"], "step": published.get("step", 0)}
    here = published.get("prompt") if published.get("prompt") is not None else prompt
    shown = lessons_tab.show(state, pos, here)
    choice = shown.choice if isinstance(shown.choice, dict) else {}
    shown = shown._replace(choice={**choice, "visible": False})  # the room's vote stands in for it
    return out._replace(**shown._asdict(), prompt=here)


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


# ---- the API: the same operations by code, key and member id
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
def api_join(code) -> dict:
    member = ROOMS.join(code, client_address())
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
    published = ROOMS.state(code, client=client_address()).get("state") or {}
    lesson, index = lessons_tab.locate({"lesson": published.get("lesson"), "step": published.get("step", 0)})
    question, _ = lessons.ask(lesson.steps[index], session_model(state), published.get("prompt") or "")
    choices = [[cid, {lg: lessons_tab.choice_label(question, cid, lg) for lg in LANGS}] for cid, _ in question.choices]
    vote = ROOMS.open_vote(code, key, f"{lesson.id}/{index + 1}", choices, question.answer, client_address())
    return {"vote": vote, "choices": choices}


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


def wire(page) -> None:
    c, prompt = page.lessons, page.generate.prompt
    state = page.state
    private = {"api_visibility": "private"}
    entered = [getattr(c, name) for name in Entered._fields]
    c.room_start.click(start_room, [state, c.room, c.lesson_pos, prompt], entered, **private)
    c.room_join.click(join_room, [state, c.room, c.room_code], entered, **private)
    c.room_code.submit(join_room, [state, c.room, c.room_code], entered, **private)
    page.demo.load(from_link, [state, c.room, prompt, c.lesson_pos], entered + [c.room_code, page.tabs], **private)
    listeners.on_change(page, redraw, [c.room], [c.room_status, c.room_vote, c.room_result])
    c.room_follow.click(follow, [state, c.room], [c.room, c.room_status], **private)
    c.room_open.click(open_vote, [state, c.room, c.lesson_pos, prompt], c.room_result, **private)
    c.room_reveal.click(reveal, [state, c.room], c.room_result, **private)
    c.room_end.click(
        end_room,
        [state, c.room],
        [c.room, c.room_status, c.room_vote, c.room_result, c.room_timer, c.room_teacher_row, c.room_follow],
        **private,
    )
    c.room_vote.input(cast, [state, c.room, c.room_vote], c.room_result, **private)
    polled = [getattr(c, name) for name in Polled._fields[:-1]] + [prompt]
    c.room_timer.tick(
        poll,
        [state, c.room, prompt],
        polled,
        show_progress="hidden",
        concurrency_id="room_poll",
        concurrency_limit=8,
        **private,
    )
    # the API
    hidden = lambda: gr.Button(visible=False)
    hidden().click(api_create, None, c.api_out, api_name="room_create")
    hidden().click(api_join, c.api_code, c.api_out, api_name="room_join")
    hidden().click(
        api_state,
        [c.api_code, c.api_number, c.api_member, c.api_key],
        c.api_out,
        api_name="room_state",
        concurrency_id="room_poll",
        concurrency_limit=8,
    )
    hidden().click(api_publish, [c.api_code, c.api_key, c.api_state], c.api_out, api_name="room_publish")
    hidden().click(api_open_vote, [state, c.api_code, c.api_key], c.api_out, api_name="room_open_vote")
    hidden().click(api_vote, [c.api_code, c.api_member, c.api_number, c.api_choice], c.api_out, api_name="room_vote")
    hidden().click(api_reveal, [c.api_code, c.api_key], c.api_out, api_name="room_reveal")
    hidden().click(api_end, [c.api_code, c.api_key], c.api_out, api_name="room_end")
