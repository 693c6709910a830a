"""Classroom rooms: a teacher's short code that students follow and vote in, driven by a secret key.

``ROOMS.create(client)`` gives ``(code, key)``: the code (6 characters from an alphabet without
look-alikes: ``room_codes``) lets anyone follow the room and vote once per question; the key (``secrets.token_urlsafe``)
alone publishes the teacher's place, opens and reveals a vote and ends the room (checked with
``hmac.compare_digest``). A student ``join``s and gets a member id of their own: it is what makes a vote
count once (voting again replaces it). The student's page keeps it (``ui.lessons.room_keep``) and joins
with it again after a reload, so a student is one member, with one ballot, however often the page loads;
a member id the room never gave is refused as a rejoin (the page gets a new one). What the teacher
publishes is a small dict (tab, lesson, step, model, prompt, view) under a version counter that followers
read (``state(code, since=version)``),
with the teacher's model as the teacher's session names it (``recipe`` and its cache key ``model_key``:
given by the server's own handlers, never an API caller's state); ``publish_run`` adds the teacher's
last run as the teacher's page drew it (its chips, status line and attention figure, built once on the
server from the teacher's run) and ``publish_inside`` the teacher's Inside view (its selection and
figures), which every follower is sent as they are: no follower's page runs the model for them. Students see their own vote, never another's: the room
shows counts only when the teacher reveals.

A room's memory is bounded: the published fields by ``STATE_FIELDS`` (about 21 kB), the run by
``MAX_RUN_CHARS`` (1.5 M characters: the attention figure is left out of a run that would pass it, and
followers get its chips without a map), the Inside view by the same, the vote by ``MAX_CHOICES`` labels, the
members by ``MAX_MEMBERS``: under 4 MB a room, so the default 20 rooms hold under 80 MB (``room_checks`` checks
each before it is stored; the steps drawn for a room's followers are ``server.room_steps``'s, 8 a room).

A wrong code (or a wrong key) counts against the client address that sent it (``room_lockout``): past
``MAX_FAILURES`` in ``FAILURE_WINDOW`` seconds that address is refused any lookup by a code alone (a join, a
guess), the rooms and every other client untouched; a request from it that carries the room's key or a
member's id is still served, since a class behind one proxy shares one address. Rooms end when the
teacher ends them or after ``PLAYGROUND_ROOM_IDLE_MINUTES`` (60) without the teacher; the server holds at
most ``PLAYGROUND_MAX_ROOMS`` (20) of ``MAX_MEMBERS`` each.
Pure Python: no model, no Gradio.
"""

from __future__ import annotations

import collections
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from playground.server.room_checks import (  # noqa: F401  (the limits and the error are the rooms' too)
    MAX_CHOICES,
    MAX_LABEL_CHARS,
    MAX_RUN_CHARS,
    MAX_VIEW_FIELDS,
    RUN_FIELDS,
    STATE_FIELDS,
    RoomError,
    check_choices,
    check_inside,
    check_run,
    check_state,
    check_text,
)
from playground.server.room_codes import CODE_LENGTH, new_code, normalize_code
from playground.server.room_lockout import (  # noqa: F401  (the limits are the rooms' too)
    FAILURE_WINDOW,
    MAX_FAILURES,
    MAX_TRACKED_CLIENTS,
    Lockout,
)
from playground.server.room_record import Room, checked_place, idle_seconds, is_key, is_member, max_rooms, take_place
from playground.server.room_votes import Vote, public_vote

MAX_MEMBERS = 200
MEMBER_IDLE_SECONDS = 120.0  # a member unseen this long may lose its place to a newcomer
HERE_SECONDS = 75.0  # a member seen this recently is counted as here (an open page polls at least every 30 s)
MAX_ENDED = 1_000  # ended codes remembered, so a late student is told the room ended
IN_STEP = (True, 0)  # (following, times changed) of a member whose page never stepped away


class Rooms:
    """Every room of the server, behind one lock (each call is short: no model work happens here)."""

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._rooms: dict[str, Room] = {}
        self._ended: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._lockout = Lockout(clock)
        self._listeners: list[Callable[[str], None]] = []
        self._enders: list[Callable[[str], None]] = []

    def listen(self, changed: Callable[[str], None]) -> None:
        """``changed(code)`` after each new version of a room and when it ends (called under the lock:
        it only schedules, as ``room_wait`` does)."""
        self._listeners.append(changed)

    def on_end(self, ended: Callable[[str], None]) -> None:
        """``ended(code)`` when a room ends (under the lock: it only lets go of what it kept for the room)."""
        self._enders.append(ended)

    def _changed(self, code: str) -> None:
        for changed in self._listeners:
            changed(code)

    # ---- the teacher
    def create(self, client: str | None = None) -> tuple[str, str]:
        """A new room: (code, teacher key)."""
        with self._lock:
            self._sweep()
            if len(self._rooms) >= max_rooms():
                raise RoomError(
                    "room.too_many",
                    "This server already holds {n} rooms: end one, or try again when one has ended.",
                    n=len(self._rooms),
                )
            code = new_code()
            while code in self._rooms or code in self._ended:
                code = new_code()
            key = secrets.token_urlsafe(32)
            self._rooms[code] = Room(code=code, key=key, touched=self._clock())
            return code, key

    def publish(self, code: Any, key: Any, state: Any, client: str | None = None, recipe: dict | None = None) -> int:
        """The teacher's place (fields of ``STATE_FIELDS``; the ones not sent stay): the new version. A new
        lesson or step, or a new model, closes the vote (it asked the step the room has left).

        ``recipe``: the teacher's model, as the teacher's session names it (a server handler's, never an API
        caller's: it is no field of ``state``), published with its model cache key (``model_key``), so every
        follower's page takes the one model the cache holds for it."""
        clean = checked_place(state, recipe)
        with self._lock:
            room = self._teacher(code, key, client)
            take_place(room, clean)
            room.version += 1
            self._changed(room.code)
            return room.version

    def publish_run(
        self, code: Any, key: Any, run: Any, client: str | None = None, place: Any = None, recipe: dict | None = None
    ) -> int:
        """The teacher's last run as the teacher's page shows it (``RUN_FIELDS``: its id, chips and status
        HTML, the attention figure's JSON), replacing the previous one: the new version. A run past
        ``MAX_RUN_CHARS`` is kept without its figure (``figure_left_out``). ``place`` (and ``recipe``), as
        ``publish`` takes them, move the room in the same version: its followers wake once for both."""
        clean = check_run(run)
        moved = checked_place(place, recipe) if place is not None else {}
        with self._lock:
            room = self._teacher(code, key, client)
            take_place(room, moved)
            room.version += 1
            room.state = {**room.state, "run": {**clean, "version": room.version}}
            self._changed(room.code)
            return room.version

    def publish_inside(self, code: Any, key: Any, inside: Any, client: str | None = None) -> int:
        """The teacher's Inside view as the teacher's page shows it (``check_inside``: its selection and its
        figures in each language), replacing the previous one, on the Inside tab: the new version."""
        clean = check_inside(inside)
        with self._lock:
            room = self._teacher(code, key, client)
            room.version += 1
            room.state = {**room.state, "tab": "inside", "inside": {**clean, "version": room.version}}
            self._changed(room.code)
            return room.version

    def open_vote(
        self,
        code: Any,
        key: Any,
        question: str,
        choices: list,
        answer: str | None,
        client: str | None = None,
        text: Any = None,
    ) -> int:
        """Put ``question`` to the room with ``choices`` ([id, label] pairs, labels as the teacher's page
        built them); ``answer`` (one of the ids) stays on the server until ``reveal``; None for a question
        the teacher wrote, which has no computed answer (its reveal shows the counts alone, and it needs
        ``text``). ``text``: the question as the pages show it (a label, one per language) when no lesson
        step holds it. The vote's id."""
        clean = check_choices(choices)
        shown = check_text(text)
        if answer is None and shown is None:
            raise RoomError("room.no_question", "A question with no answer needs its text.")
        if answer is not None and str(answer) not in {cid for cid, _ in clean}:
            raise RoomError("room.answer_not_choice", "The answer {answer!r} is not one of the choices.", answer=answer)
        with self._lock:
            room = self._teacher(code, key, client)
            room.votes_opened += 1
            kept = None if answer is None else str(answer)
            room.vote = Vote(room.votes_opened, str(question)[:MAX_LABEL_CHARS], clean, kept, shown)
            room.version += 1
            self._changed(room.code)
            return room.vote.id

    def check_teacher(self, code: Any, key: Any, client: str | None = None) -> None:
        """Raise RoomError unless ``key`` is room ``code``'s teacher's key (before any work done for the teacher)."""
        with self._lock:
            self._teacher(code, key, client)

    def tally(self, code: Any, key: Any, client: str | None = None) -> dict:
        """The teacher's view of the room: how many joined, are here and explore on their own (stepped
        away), and of the vote: how many answered and the counts (no member's own choice)."""
        with self._lock:
            room = self._teacher(code, key, client)
            since = self._clock() - HERE_SECONDS
            here = [m for m, seen in room.members.items() if seen >= since]
            away = sum(not room.following.get(m, IN_STEP)[0] for m in here)
            who = {"members": len(room.members), "here": len(here), "exploring": away}
            vote = room.vote
            if vote is None:
                return {"vote": None, "answered": 0, "counts": {}, **who}
            return {"vote": vote.id, "open": vote.open, "answered": len(vote.ballots), "counts": vote.counts(), **who}

    def reveal(self, code: Any, key: Any, client: str | None = None) -> dict:
        """Close the vote and show every page its answer and the room's counts."""
        with self._lock:
            room = self._teacher(code, key, client)
            if room.vote is None:
                raise RoomError("room.no_vote", "Room {code} has no vote to reveal: open one first.", code=room.code)
            room.vote.open, room.vote.revealed = False, True
            room.version += 1
            self._changed(room.code)
            return public_vote(room.vote, None)

    def end(self, code: Any, key: Any, client: str | None = None) -> None:
        with self._lock:
            room = self._teacher(code, key, client)
            self._end(room.code)

    # ---- students
    def join(self, code: Any, client: str | None = None, member: Any = None) -> str:
        """A member id for a student of room ``code``: ``member`` again when it is one of the room's members
        (the page kept it: a reload or a second tab is the same student, with the same ballot), else a new
        one. An id the room never gave is never taken: a page cannot choose its member id."""
        with self._lock:
            room = self._room(code, client, proven=lambda r: is_member(r, member))
            if is_member(room, member):
                room.members[member] = self._clock()
                return member
            if len(room.members) >= MAX_MEMBERS:  # pages closed or reloaded long ago give their places up
                gone = self._clock() - MEMBER_IDLE_SECONDS
                room.members = {m: seen for m, seen in room.members.items() if seen >= gone}
                room.following = {m: f for m, f in room.following.items() if m in room.members}
            if len(room.members) >= MAX_MEMBERS:
                raise RoomError("room.full", "Room {code} is full ({n} members).", code=room.code, n=MAX_MEMBERS)
            member = secrets.token_urlsafe(16)
            room.members[member] = self._clock()
            return member

    def vote(self, code: Any, member: Any, vote_id: Any, choice: Any, client: str | None = None) -> None:
        """A member's choice on vote ``vote_id``: counted once, a second choice replacing the first."""
        with self._lock:
            room = self._member_room(code, member, client)
            vote = room.vote
            if vote is None or not vote.open or vote_id != vote.id:
                raise RoomError(
                    "room.vote_closed", "That vote in room {code} has closed: follow the teacher.", code=room.code
                )
            ids = [cid for cid, _ in vote.choices]
            if choice not in ids:
                raise RoomError(
                    "room.bad_choice", "{choice!r} is not one of the choices ({choices}).", choice=choice, choices=ids
                )
            vote.ballots[member] = choice
            room.members[member] = self._clock()

    def set_following(self, code: Any, member: Any, following: bool, client: str | None = None) -> int:
        """A member's page follows the teacher again (Follow) or has stepped away: the number of times it
        said so, which ``state`` gives back with whether it follows."""
        with self._lock:
            room = self._member_room(code, member, client)
            moves = room.following.get(member, IN_STEP)[1] + 1
            room.following[member] = (bool(following), moves)
            room.members[member] = self._clock()
            return moves

    def state(self, code: Any, since: Any = None, member: Any = None, client: str | None = None) -> dict:
        """What a follower sees: the version, the teacher's place, the vote (its question and choices, and
        the member's own choice), the counts and answer once revealed. ``since`` equal to the version: only
        ``{"version": v, "changed": False}``."""
        with self._lock:
            room = self._room(code, client, proven=lambda r: is_member(r, member))
            mine = member if is_member(room, member) else None
            seen: dict = {"code": room.code, "version": room.version}
            if mine is not None:
                room.members[mine] = self._clock()
                seen["following"], seen["moves"] = room.following.get(mine, IN_STEP)
            if since == room.version and not isinstance(since, bool):
                return {**seen, "changed": False}
            vote = public_vote(room.vote, mine) if room.vote is not None else None
            return {**seen, "changed": True, "state": dict(room.state), "vote": vote}

    # ---- the registry
    def count(self) -> int:
        with self._lock:
            self._sweep()
            return len(self._rooms)

    def _end(self, code: str) -> None:
        self._rooms.pop(code, None)
        self._ended[code] = None
        self._changed(code)
        for ended in self._enders:
            ended(code)
        while len(self._ended) > MAX_ENDED:
            self._ended.popitem(last=False)

    def _sweep(self) -> None:
        """End every room whose teacher has been away for the idle time (callers hold the lock)."""
        limit = self._clock() - idle_seconds()
        for code in [c for c, room in self._rooms.items() if room.touched < limit]:
            self._end(code)

    def _room(self, code: Any, client, proven: Callable[[Room], bool] | None = None) -> Room:
        """The live room of ``code`` (callers hold the lock), or a refusal that counts against ``client``.
        An address locked out for wrong codes or keys is still served where ``proven(room)`` holds (the
        request carries the teacher's key or a member's id, neither of them guessable): behind one proxy a
        whole class shares an address, and one student's wrong codes must not stop the teacher or the others."""
        try:
            self._lockout.check(client)
        except RoomError:
            if proven is None:
                raise
            room = self._live(normalize_code(code))
            if room is None or not proven(room):
                raise
            return room
        canonical = normalize_code(code)
        if canonical is None:
            self._lockout.failed(client)
            raise RoomError(
                "room.bad_code",
                "{code!r} is not a room code: a code is {n} letters and digits, as on the teacher's screen.",
                code=code if isinstance(code, str) else type(code).__name__,
                n=CODE_LENGTH,
            )
        room = self._live(canonical)
        if room is None:
            if canonical in self._ended:
                raise RoomError("room.ended", "Room {code} has ended.", code=canonical)
            self._lockout.failed(client)
            raise RoomError(
                "room.not_found", "No room has the code {code}: check it on the teacher's screen.", code=canonical
            )
        return room

    def _live(self, canonical: str | None) -> Room | None:
        """The room of a canonical code unless it has ended (one idle too long ends here)."""
        room = self._rooms.get(canonical) if canonical is not None else None
        if room is not None and room.touched < self._clock() - idle_seconds():
            self._end(room.code)
            room = None
        return room

    def _member_room(self, code: Any, member: Any, client) -> Room:
        room = self._room(code, client, proven=lambda r: is_member(r, member))
        if not is_member(room, member):
            raise RoomError(
                "room.not_member", "You are not in room {code}: join it again with its code.", code=room.code
            )
        return room

    def _teacher(self, code: Any, key: Any, client) -> Room:
        room = self._room(code, client, proven=lambda r: is_key(r, key))
        if not is_key(room, key):
            self._lockout.failed(client)
            raise RoomError("room.not_teacher", "Only the teacher of room {code} can do that.", code=room.code)
        room.touched = self._clock()
        return room


ROOMS = Rooms()
