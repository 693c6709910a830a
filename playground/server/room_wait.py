"""Followers waiting for a room's next version: ``GET /room/wait``, a long poll outside Gradio's queue.

A follower asks ``/room/wait?code=CODE&since=VERSION``: the answer, ``{"code", "version",
"changed"}``, comes at once when the room has moved past ``since``, else as soon as the teacher
publishes (or the room ends), or after ``timeout`` seconds (at most ``MAX_WAIT_S``) with ``changed:
False``. It says only that the room moved: the page then takes what changed with its own poll
(the page's ``lessons_room.poll``), so a run's figure is sent once to each follower, not twice.

A follower that is not a page (a script, a second screen, the load tests' followers) adds ``state=1``
(and ``member=ID`` from ``/room_join``, for its own vote): the answer is then the room's state as
``/room_state`` gives it (``state``, ``vote``, ``following``, ``moves``), one request per move instead of a
wait and a Gradio event. The published state's JSON is made once per version of the room and shared by
every follower's answer (``Encoded``). A waiting follower is a suspended coroutine on the server's event loop: no thread,
no queue slot, no CPU until the room changes. So a room's followers cost the server one answer each
per move of the teacher, not one request each per second, and a move reaches them as soon as the
event loop sends it: while a Generate run decodes on every core, a once-a-second poll through
Gradio's queue (a join, a stream, three thread hops, about 7 ms of CPU each) made 60 followers a
third of a core of work that queued behind the decode (docs/benchmarks.md).

A refusal (a bad code, an ended room, an address locked out) is ``{"error": message, "key": key}``
(English, as every endpoint) and counts against the address as ``Rooms`` counts it. At most
``MAX_WAITERS`` wait at once, server-wide; past that a follower is answered at once, as a poll.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from playground.server.rooms import ROOMS, RoomError, Rooms

MAX_WAIT_S = 25.0  # under the idle timeouts of common proxies (30-60 s): a wait is answered before one cuts it
MAX_WAITERS = 2_000  # 20 rooms of 100 followers; each a future and a dict entry (a few hundred bytes)
PATH = "/room/wait"


class Waiters:
    """The futures of the followers waiting on each room, woken (from any thread) when it changes."""

    def __init__(self, rooms: Rooms) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future]]] = {}
        self._count = 0
        rooms.listen(self.wake)

    def count(self) -> int:
        with self._lock:
            return self._count

    def wake(self, code: str) -> None:
        """Room ``code`` changed: every follower waiting on it is answered (called under the rooms' lock,
        from whichever thread changed it: scheduling a wake-up on each loop is all it does)."""
        with self._lock:
            waiting = self._waiting.pop(code, [])
            self._count -= len(waiting)
        for loop, future in waiting:
            loop.call_soon_threadsafe(_settle, future)

    def add(self, code: str) -> asyncio.Future | None:
        """A future that is settled when room ``code`` next changes, or None when too many already wait."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._count >= MAX_WAITERS:
                return None
            self._waiting.setdefault(code, []).append((loop, future))
            self._count += 1
        return future

    def remove(self, code: str, future: asyncio.Future) -> None:
        with self._lock:
            waiting = self._waiting.get(code)
            if not waiting:
                return
            kept = [(loop, f) for loop, f in waiting if f is not future]
            self._count -= len(waiting) - len(kept)
            if kept:
                self._waiting[code] = kept
            else:
                del self._waiting[code]


class Encoded:
    """The JSON of each room's published state at its latest version, made once for all its followers
    (a version's state never changes: every change to a room is a new version)."""

    def __init__(self, rooms: Rooms) -> None:
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[int, bytes]] = {}
        rooms.on_end(self.forget)

    def of(self, code: str, version: int, state: dict) -> bytes:
        with self._lock:
            kept = self._kept.get(code)
            if kept is not None and kept[0] == version:
                return kept[1]
        body = _json(state)
        with self._lock:
            kept = self._kept.get(code)
            if kept is None or kept[0] <= version:
                self._kept[code] = (version, body)
        return body

    def forget(self, code: str) -> None:
        with self._lock:
            self._kept.pop(code, None)

    def count(self) -> int:
        with self._lock:
            return len(self._kept)


def _json(value: Any) -> bytes:
    """As Starlette's ``JSONResponse`` writes it."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()


def _settle(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


WAITERS = Waiters(ROOMS)
ENCODED = Encoded(ROOMS)


async def next_state(code: Any, since: Any, member: Any, client: str | None, timeout: float) -> dict:
    """``ROOMS.state`` once the room has moved past ``since`` (or ``timeout`` seconds have passed)."""
    seen = ROOMS.state(code, since=since, member=member, client=client)
    if seen["changed"] or timeout <= 0:
        return seen
    code = seen["code"]  # (canonical)
    future = WAITERS.add(code)
    if future is None:
        return seen
    try:
        # registered first, then read again: a publication between the two reads wakes this future
        seen = ROOMS.state(code, since=since, member=member, client=client)
        if not seen["changed"]:
            try:
                await asyncio.wait_for(future, timeout)
            except asyncio.TimeoutError:
                pass
            seen = ROOMS.state(code, since=since, member=member, client=client)
        return seen
    finally:
        WAITERS.remove(code, future)


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and value == value else None


async def wait_endpoint(request: Request) -> Response:
    params = request.query_params
    since = _number(params.get("since"))
    timeout = min(MAX_WAIT_S, max(0.0, _number(params.get("timeout")) or 0.0))
    client = request.client.host if request.client is not None else None
    try:
        seen = await next_state(
            params.get("code"), int(since) if since is not None else None, params.get("member") or None, client, timeout
        )
    except RoomError as e:
        return JSONResponse({"error": str(e), "key": e.key})
    if params.get("state") not in ("1", "true") or not seen["changed"]:
        seen = {name: seen[name] for name in ("code", "version", "changed", "following", "moves") if name in seen}
        return JSONResponse(seen, headers={"Cache-Control": "no-store"})
    # the member's own part (its vote) written per answer; the room's state written once per version
    own = _json({name: value for name, value in seen.items() if name != "state"})
    body = own[:-1] + b',"state":' + ENCODED.of(seen["code"], seen["version"], seen["state"]) + b"}"
    return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})


ROUTE = Route(PATH, wait_endpoint, methods=["GET"])
