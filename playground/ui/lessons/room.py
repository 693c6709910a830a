"""Classroom mode in the Lessons tab: the room's controls and the handlers of a teacher's and a student's page.

The teacher presses "Start a room" (or opens ``?room=new``): the page shows the room's code and a join
link (``?room=CODE``) and its QR code; the teacher's key stays in the session's state and the teacher's
browser (``room_keep``: a reload of the teacher's page leads the room again), never in the link. Each Next,
Back or lesson pick of the teacher's page publishes the step, from the step's own handler as it starts drawing
(``room_lead.moved``); a follower's language redraw that answers after its poll drew that step is checked
after it lands (``lessons_tab.redrawn_again``). A student's page (``?room=CODE``, or the code typed) waits on the room's next version
(``room_layout.WATCH_JS``, ``server.room_wait``), then polls it and, while following, takes the teacher's model and
shows the teacher's step on the teacher's prompt, drawn once for the room (``room_drawn``); moving on
their own steps away until they press Follow. The teacher opens a vote on the step's question (its answer computed on the teacher's
model and kept on the server: ``room_voting``), sees how many answered, and Reveal shows the answer and the room's counts
on every page. What the pages show is drawn by ``room_views``; following the tab, the prompt and the
teacher's Generate run is ``room_follow``'s, the Inside view ``room_inside``'s, the redraw in a new language
``room_redraw``'s; the ``/room_*`` endpoints (the same operations for an API caller) are in ``room_api``.
"""

from __future__ import annotations

import gradio as gr

from playground.server.rooms import ROOMS, RoomError
from playground.ui import skipped_outputs
from playground.ui.common import client_address, fail, lang_of, page_prefs, tr, warn
from playground.ui.results import only, outputs, result

from . import (
    room_api,
    room_ask,
    room_drawn,
    room_follow,
    room_inside,
    room_keep,
    room_lead,
    room_redraw,
    room_scroll,
    room_student,
    room_voting,
)
from . import tab as lessons_tab
from .room_layout import POLL_SECONDS, STUDENT_POLL_SECONDS, no_room, watch_html
from .room_views import (
    counts_hidden_again,
    counts_html,
    counts_shown,
    join_link,
    qr_html,
    so_far_html,
    teacher_status,
    vote_radio,
)

Polled = result(
    "Polled",
    "room",
    "room_status",
    "room_vote",
    "room_result",
    "room_timer",
    *lessons_tab.Shown._fields,
    *room_follow.Followed._fields,
    *room_drawn.Modelled._fields,
    *room_inside.Followed._fields,
    "room_qr",
    "room_scroll",
    "room_show_counts",
)
Ended = result(
    "Ended",
    "room",
    "room_status",
    "room_vote",
    "room_result",
    "room_timer",
    "room_teacher_row",
    "room_follow",
    "room_qr",
    "room_secret",
    "room_bar",
    "room_watch",
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
    "room_qr",
    "room_secret",
    "room_bar",
    "room_watch",
)


# ---- the teacher
def start_room(state, room, pos, prompt, request: gr.Request = None) -> Entered:
    lang = lang_of(state)
    try:
        code, key = ROOMS.create(client_address())
        link = join_link(code, request)
        place = room_lead.place(state, pos or lessons_tab.first_position(), prompt or "")
        ROOMS.publish(code, key, place, recipe=(state or {}).get("recipe"))
    except Exception as e:
        return only(Entered, room_status=fail(e, lang), room_bar=gr.Row(visible=True))
    return lead(state, code, key, link)


def lead(state, code: str, key: str, link: str, again: bool = False) -> Entered:
    """The teacher's page of room ``code``: its status and QR code, its controls; ``again`` (the page
    reloaded, its key kept in the browser): the next poll draws the room's published step on it."""
    lang = lang_of(state)
    room = {**no_room(), "code": code, "key": key, "link": link, "version": None, "resumed": again}
    room_lead.leading(state, code, key)  # (its long views stream to the room as they grow)
    return Entered(
        room,
        teacher_status(room, lang, link),
        vote_radio(None, lang, False),
        "",
        gr.Timer(POLL_SECONDS, active=True),
        gr.Accordion(open=True),
        gr.update(visible=True),
        gr.update(visible=False),
        qr_html(link),
        gr.skip() if again else room_keep.secret(code, key),
        gr.Row(visible=True),
        "",
    )


def publish_move(state, room, pos, prompt):
    """After the page moved (Next, Back, a lesson picked): the teacher's page publishes the step; a
    student's page has stepped away (its own lesson radio back, and Follow shown).
    Outputs: room, status, the lesson's own choice radio, Follow."""
    room = room or no_room()
    if room.get("key"):
        try:
            place = room_lead.place(state, pos or {}, prompt or "")
            recipe = (state or {}).get("recipe")
            if not room_lead.there_already(room, place, recipe):  # (the step handler published it: room_lead.moved)
                ROOMS.publish(room["code"], room["key"], place, client_address(), recipe=recipe)
        except Exception as e:
            return gr.skip(), fail(e, lang_of(state)), gr.skip(), gr.skip()
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    if room.get("member") and room.get("follow"):
        away = tr(lang_of(state), "room_away", code=room["code"])
        return room_follow.stepped_away(room), away, gr.update(visible=True), gr.update(visible=True)
    return gr.skip(), gr.skip(), gr.skip(), gr.skip()


def end_room(state, room):
    room = room or no_room()
    lang = lang_of(state)
    try:
        if room.get("key"):
            room_lead.leading(state, None)
            ROOMS.end(room.get("code"), room.get("key"), client_address())
    except RoomError as e:
        if e.key != "room.ended":
            return only(Ended, room_status=fail(e, lang))
    return Ended(
        no_room(),
        tr(lang, "room_left"),
        gr.update(visible=False, choices=[], value=None),
        "",
        gr.Timer(active=False),
        gr.update(visible=False),
        gr.update(visible=False),
        "",
        room_keep.secret(room["code"], ended=True) if room.get("key") else gr.skip(),
        gr.skip(),  # (the bar stays: it says the page left the room)
        "",
    )


# ---- students
def join_room(state, room, code, saved=None) -> Entered:
    """A student's page joins room ``code``: as the member this browser keeps for it (``saved``, from
    room_keep.LOAD_JS or JOIN_JS) when the room has it, else as a new one, which the browser keeps."""
    lang = lang_of(state)
    try:
        member = ROOMS.join(code, client_address(), member=room_keep.kept_member(saved, code))
        code, moves = in_step(code, member)
    except Exception as e:
        return only(
            Entered, room_status=fail(e, lang), room_panel=gr.Accordion(open=True), room_bar=gr.Row(visible=True)
        )
    room = {**no_room(), "code": code, "member": member, "moves": moves}
    return Entered(
        room,
        tr(lang, "room_joined", code=code),
        gr.skip(),
        "",
        gr.Timer(STUDENT_POLL_SECONDS, active=True),  # (its room's moves come through room_watch at once)
        gr.Accordion(open=True),
        gr.update(visible=False),
        gr.update(visible=False),  # (Follow: shown once the student steps away)
        "",
        room_keep.secret(code, member=member),  # (a student's page never gets a key: its member id, kept)
        gr.Row(visible=True),
        watch_html(code),
    )


def in_step(code, member: str) -> tuple[str, int]:
    """(the room's code, the room's count of the member's Follows and steps away) for a page that has just
    joined: a page loads following the teacher, so a member who had stepped away before the page loaded
    again is in step again."""
    seen = ROOMS.state(code, member=member, client=client_address())
    if seen.get("following", True):
        return seen["code"], seen.get("moves", 0)
    return seen["code"], ROOMS.set_following(seen["code"], member, True, client_address())


def from_link(state, room, prompt, pos, saved=None, request: gr.Request = None):
    """Page load: ``?room=CODE`` joins that room (as the member this browser keeps for it, if the room has
    it), or leads it again when this browser keeps its key (``saved``, from room_keep.LOAD_JS: the teacher's
    page reloaded); ``?room=new`` starts one (and opens the Lessons tab)."""
    params = dict(request.query_params) if request is not None else {}
    code = params.get("room")
    if not code:
        return (*[gr.skip()] * len(Entered._fields), gr.skip(), gr.skip())
    state = {**(state or {}), "lang": page_prefs(request)[0]}  # (the page has not said its language yet)
    led = room_keep.lead_again(saved, code)
    if led is not None:
        entered = lead(state, led["code"], led["key"], join_link(led["code"], request), again=True)
    elif str(code).lower() == "new":
        entered = start_room(state, room, pos, prompt, request)
    else:
        entered = join_room(state, room, code, saved)
    return (*entered, gr.update(value="" if str(code).lower() == "new" else code), gr.Tabs(selected="lessons"))


def follow(state, room):
    """Back in step: the next poll draws the teacher's step."""
    room = room or no_room()
    if not room.get("member"):
        return gr.skip(), warn(tr(lang_of(state), "room_none")), gr.skip()
    lang = lang_of(state)
    try:
        moves = ROOMS.set_following(room["code"], room["member"], True, client_address())
    except RoomError as e:
        return gr.skip(), fail(e, lang), gr.skip()
    again = room_student.in_step_again(room, moves)
    return again, tr(lang, "room_joined", code=room["code"]), gr.update(visible=False)


def poll(state, room, prompt, request: gr.Request = None) -> Polled:
    """A tick: nothing when the room has not changed; else what changed (the step while following,
    the vote, the reveal); the teacher's page also gets how many of the students here answered, and the
    counts so far when the teacher shows them (a new vote starts with them hidden)."""
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
            room_qr="",
        )
    out = nothing
    if not teacher and seen.get("moves", room.get("moves")) != room.get("moves"):
        # a poll that answered after this page's Follow (or step away) wrote its record back: the room's word stands
        room = room_student.settled(room, seen)
        out = out._replace(room=room)
        if room["follow"] and not seen["changed"]:
            seen = ROOMS.state(room["code"], member=room.get("member"), client=client_address())
    if seen["changed"]:
        before = (room.get("vote") or {}).get("id")
        room = {**room, "version": seen["version"], "vote": seen.get("vote")}
        if teacher and counts_hidden_again(room, before):
            room = {**room, "show_counts": None}
            out = out._replace(room_show_counts=gr.update(value=False))
    so_far = teacher and counts_shown(room, tally) and bool((room.get("vote") or {}).get("open"))
    if teacher:
        out = out._replace(room_status=teacher_status(room, lang, tally=tally))
        if so_far:  # the answers come in between the room's versions: drawn at each of the teacher's polls
            out = out._replace(room_result=so_far_html(tally, room.get("vote"), lang))
    if not seen["changed"]:
        return out
    vote = seen.get("vote")
    if vote and "counts" in vote:
        result = counts_html(vote, lang)
    elif teacher and vote and vote.get("open"):
        # the teacher's "vote open" line (the question, how its answer is found) stays till the reveal, unless
        # the teacher shows the answers so far there
        result = out.room_result if so_far else gr.skip()
    else:
        result = ""
    out = out._replace(room=room, room_vote=vote_radio(vote, lang, student=not teacher), room_result=result)
    published = seen.get("state") or {}
    if teacher and room.get("resumed") and published.get("lesson"):  # the teacher's page reloaded: its room's step
        pos = {"lesson": published["lesson"], "step": published.get("step", 0)}
        here = published.get("prompt") if published.get("prompt") is not None else prompt
        shown = lessons_tab.show_at(state, pos, here, request)
        tab = published.get("tab") if published.get("tab") in room_follow.TABS else "lessons"
        resumed = {**room, "resumed": False}
        return out._replace(**shown._asdict(), prompt=here, room=resumed, tabs=gr.Tabs(selected=tab))
    if teacher or not room.get("follow"):
        return out
    room, taken = room_student.take(state, room, published, prompt, lang, request)
    return out._replace(room=room, **taken)


def wire(page) -> None:
    c, prompt = page.lessons, page.generate.prompt
    state = page.state
    private = {"api_visibility": "private"}
    entered = [getattr(c, name) for name in Entered._fields]
    keep = {"fn": None, "inputs": [c.room_secret], "outputs": None, "js": room_keep.SAVE_JS}
    c.room_start.click(start_room, [state, c.room, c.lesson_pos, prompt], entered, **private).then(**keep)
    joining = [state, c.room, c.room_code, c.room_secret]  # (JOIN_JS: the member kept for the typed code)
    c.room_join.click(join_room, joining, entered, js=room_keep.JOIN_JS, **private).then(**keep)
    c.room_code.submit(join_room, joining, entered, js=room_keep.JOIN_JS, **private).then(**keep)
    # after the page's session is made (model.tab.load_session): the room's polls start from it
    linked = page.session_loaded.then(
        from_link,
        [state, c.room, prompt, c.lesson_pos, c.room_secret],
        entered + [c.room_code, page.tabs],
        js=room_keep.LOAD_JS,
        **private,
    )
    linked.then(**keep)
    room_redraw.wire(page)
    polled = outputs(
        Polled,
        c,
        page.generate,
        page,
        page.model,
        page.inside,
        page.inside.patching,
        tabs=page.tabs,
        inside_msg=page.inside.msg,
    )
    # Unqueued: one POST, never behind a decode in the queue (a room's step is drawn once for the room,
    # server.room_steps, so 60 pages polling at once do not draw 60 times)
    poll_event = {"show_progress": "hidden", "queue": False, **private}
    # (unqueued too: back in step now, not behind a decode in the queue nor at the next poll)
    scroll = {"fn": None, "inputs": None, "outputs": None, "js": room_scroll.SCROLL_JS}
    followed = c.room_follow.click(
        follow, [state, c.room], [c.room, c.room_status, c.room_follow], queue=False, **private
    )
    polls = [followed.then(poll, [state, c.room, prompt], polled, **poll_event)]
    # WATCH_JS clicks it when the room moved; a click while a poll runs is kept for after it
    polls.append(c.room_poke.click(poll, [state, c.room, prompt], polled, trigger_mode="always_last", **poll_event))
    for polled_event in polls:
        polled_event.then(**scroll)
    c.room_open.click(room_voting.open_vote, [state, c.room, c.lesson_pos, prompt], c.room_result, **private)
    c.room_reveal.click(room_voting.reveal, [state, c.room], c.room_result, **private)
    c.room_show_counts.input(  # (the teacher's tick only: a poll that unticks it for a new vote sets off nothing)
        room_voting.show_counts,
        [state, c.room, c.room_show_counts],
        [c.room, c.room_status, c.room_result],
        queue=False,
        show_progress="hidden",
        **private,
    )
    ask = [state, c.room, c.room_ask_kind, page.generate.layer, c.room_ask_text, c.room_ask_choices]
    own_boxes = [c.room_ask_text, c.room_ask_choices]  # (shown for the teacher's own question only)
    c.room_ask_kind.change(lambda kind: [gr.update(visible=kind == "own")] * 2, c.room_ask_kind, own_boxes, **private)
    c.room_ask.click(room_ask.ask_room, ask, c.room_result, **private)
    c.room_end.click(
        end_room,
        [state, c.room],
        outputs(Ended, c),
        **private,
    ).then(**keep)
    c.room_vote.input(room_voting.cast, [state, c.room, c.room_vote], c.room_result, **private)
    polls.append(c.room_timer.tick(poll, [state, c.room, prompt], polled, **poll_event))
    # A page that joins by its link takes the room's model and step before it applies its preferences
    # (prefs.wire chains them after this): a language redraw of the Model tab that set off beside the
    # first poll could draw the default model and answer after it, the page then naming a model its
    # session no longer holds.
    page.room_entered = linked.then(poll, [state, c.room, prompt], polled, **poll_event)
    polls.append(page.room_entered)
    for polled_event in polls:  # (each step sends the same visibility and choices: not rebuilt each time)
        skipped_outputs.same_props_sent(page.demo, polled_event)
    room_follow.wire(page)
    room_inside.wire(page)
    room_api.wire(c, state)
