"""A room's follower as a student's page follows: a long poll on ``/room/wait`` (server.room_wait) and,
each time it answers that the room moved, a poll: the move counts as seen when that poll's answer arrives.
Bare HTTP (``http.client``), as bench/room_sse.py's learners, so 60 of them weigh little beside the server.

Two kinds of follower. An **API follower** takes the room's record as JSON: by default in the wait's own
answer (``/room/wait?state=1``, one request a move), or (``event=True``) from ``/room_state`` after each
wait (the room's Gradio event, one POST, unqueued). A **page** (``Page``) is what a student's browser tab is to the server:
it joins with the page's own Join and polls with the page's own hidden poke (``lessons_room.poll``, whose
answer is the lesson step drawn for the room, the vote and every other output the page shows), in its own
session, as the page's JavaScript sends them; ``TeacherPage`` leads a room the same way (Start, Next, Back,
each move published by the event the page chains after it).
"""

from __future__ import annotations

import json
import multiprocessing
import re
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

from .page_events import Route, drawn, output_of, page_route, send, then_route
from .room_sse import Endpoint, KeptConnection, post, stream_generate

WAIT_S = 20.0  # as the page's WATCH_JS asks


def wait_room(
    endpoint: Endpoint,
    code: str,
    since: int | None,
    timeout: float = WAIT_S,
    kept: KeptConnection | None = None,
    state: bool = False,
) -> dict:
    """One ``/room/wait`` answer: the room's version once it moved past ``since`` (or ``timeout`` passed),
    with its state when ``state``; on ``kept`` (a connection kept open between waits, as a page's fetch
    keeps one) or a connection of its own."""
    query: dict = {"code": code, "timeout": timeout}
    if since is not None:
        query["since"] = since
    if state:
        query["state"] = 1
    conn = kept or KeptConnection(endpoint.host, endpoint.port, timeout + 30)
    try:
        status, body = conn.request("GET", "/room/wait?" + urllib.parse.urlencode(query))
    finally:
        if kept is None:
            conn.close()
    if status != 200:
        raise RuntimeError(f"/room/wait: HTTP {status}: {body[:200]!r}")
    return json.loads(body)


@dataclass
class Page:
    """A student's page's own events (its Join, its poll) and the prompt its box holds (picklable)."""

    join: Route
    poll: Route
    prompt: str
    progress: int  # where the lesson's progress line ("Lesson 2 of 10 · Step 1 of 2") sits in the poll's answer
    chips: int  # where the Generate tab's token chips sit
    heatmap: int  # where its attention heatmap sits

    @classmethod
    def of(cls, client, prompt: str) -> Page:
        poll = page_route(client, "pg-room-poke")
        where = [output_of(client, poll, elem_id) for elem_id in ("pg-lesson-progress", "pg-chips", "pg-heatmap")]
        return cls(page_route(client, "pg-room-join"), poll, prompt, *where)

    def summary(self, version: int, outputs: list) -> dict:
        """What a test checks of the page's poll: the room's version it followed, how many outputs it
        changed, the lesson's progress line, the run's chips and whether it drew the run's heatmap."""
        heatmap = outputs[self.heatmap]
        if isinstance(heatmap, dict) and heatmap.get("__type__") == "update":
            heatmap = heatmap.get("value")
        return {
            "version": version,
            "drawn": drawn(outputs),
            "progress": text_of(outputs[self.progress]),
            "chips": text_of(outputs[self.chips]).count("pg-gen"),
            "figure": isinstance(heatmap, dict) and bool(heatmap.get("plot")),
        }


class TeacherPage:
    """A teacher's page leading a room through its own events: ``start()`` gives the room's code; ``move(+1)``
    presses Next (``-1`` Back) and the event the page chains after it publishes the step; each gives back
    the lesson's progress line the teacher's page shows."""

    def __init__(self, client, prompt: str):
        self.client, self.prompt, self.session = client, prompt, uuid.uuid4().hex
        self.code: str | None = None
        self.start_route = page_route(client, "pg-room-start")
        self.steps = {
            +1: (page_route(client, "pg-lesson-next"), then_route(client, "pg-lesson-next")),
            -1: (page_route(client, "pg-lesson-back"), then_route(client, "pg-lesson-back")),
        }
        self.progress = {
            way: output_of(self.client, step, "pg-lesson-progress") for way, (step, _) in self.steps.items()
        }

    def start(self) -> str:
        started = send(self.start_route, self.session, [None, None, None, self.prompt])
        found = re.search(r"\*\*([A-Z0-9]{6})\*\*", json.dumps(started))
        if not found:
            raise RuntimeError(f"the teacher's page started no room: {json.dumps(started)[:300]}")
        self.code = found.group(1)
        return self.code

    def version(self) -> int:
        """The room's version now (a wait answered at once)."""
        return wait_room(self.start_route, self.code, None, timeout=0)["version"]

    def move(self, way: int = +1) -> str:
        step, publish = self.steps[way]
        shown = send(step, self.session, [None, None, self.prompt])
        send(publish, self.session, [None, None, None, self.prompt])
        return text_of(shown[self.progress[way]])


def text_of(value) -> str:
    """A text output's value, whether sent as a value or as an update carrying one."""
    if isinstance(value, dict):
        value = value.get("value")
    return value if isinstance(value, str) else ""


class Follower(threading.Thread):
    """A page in room ``code`` until ``done`` is set: ``seen`` maps each version it drew to when its
    poll's answer arrived; ``states`` holds those answers; ``errors`` every refusal or failure."""

    def __init__(
        self,
        endpoint: Endpoint,
        code: str,
        done: threading.Event,
        start_after: float = 0.0,
        wait_s: float = 2.0,
        keep_alive: bool = True,
        page: Page | None = None,
        event: bool = False,
    ):
        super().__init__(daemon=True)
        self.page = page  # None: an API follower
        self.event = event  # an API follower that takes each move from /room_state, not the wait's answer
        self.keep_alive = keep_alive  # False: a connection a request (what the bench did before)
        self.wait_s = wait_s  # (shorter than a page's WAIT_S: the end of a test is seen within it)
        self.endpoint, self.code, self.done, self.start_after = endpoint, code, done, start_after
        self.session = uuid.uuid4().hex
        self.seen: dict[int, float] = {}
        self.states: list[dict] = []
        self.errors: list[str] = []
        self.waits = 0
        self.woken: dict[int, float] = {}  # when the wait answered each version (before the page's poll)
        self.connections = 0  # the HTTP connections it opened (two when the server kept both open)
        self.on_first: Callable[[], None] | None = None  # called once it has drawn the room

    def run(self) -> None:
        time.sleep(self.start_after)  # pages open at different moments
        shown: int | None = None  # the version the page drew (its poll's)
        since: int | None = None  # the version the wait has seen
        # a page's two connections, each kept open: its long poll's and its events'
        self.waiting = KeptConnection(self.endpoint.host, self.endpoint.port, self.wait_s + 30)
        self.polling = KeptConnection(self.endpoint.host, self.endpoint.port, 60)
        if self.page is not None:
            try:
                send(
                    self.page.join, self.session, [None, None, self.code, ""], kept=self.polling
                )  # ("": no member kept)
            except Exception as e:
                self.errors.append(f"join: {type(e).__name__}: {e}")
        while not self.done.is_set():
            try:
                if not self.keep_alive:
                    self.waiting.close()
                    self.polling.close()
                one_request = self.page is None and not self.event
                answer = wait_room(
                    self.endpoint, self.code, since, timeout=self.wait_s, kept=self.waiting, state=one_request
                )
                arrived = time.time()
                self.waits += 1
                if "error" in answer:
                    self.errors.append(answer["error"])
                    self.done.wait(1.0)
                    continue
                if not answer.get("changed"):
                    continue
                since = answer["version"]
                self.woken.setdefault(since, time.time())
                if self.page is not None:
                    self._draw(since)
                    continue
                if one_request:
                    self._seen(since, arrived)
                    self.states.append(summary(answer))
                    continue
                data = [self.code, shown, "", ""]
                if self.endpoint.run_path:
                    arrived, outputs = post(self.endpoint, self.session, data, timeout=60, kept=self.polling)
                else:
                    _, stamped = stream_generate(self.endpoint, self.session, data, None, timeout=60)
                    arrived, outputs = stamped[-1]
                out = outputs[0]
                if "error" in out:
                    self.errors.append(out["error"])
                elif out.get("changed"):
                    shown = out["version"]
                    self._seen(shown, arrived)
                    self.states.append(summary(out))
            except Exception as e:  # a refused or failed request: counted, never hidden
                self.errors.append(f"{type(e).__name__}: {e}")
                self.done.wait(1.0)
        self.waiting.close()
        self.polling.close()
        self.connections = self.waiting.opened + self.polling.opened

    def _seen(self, version: int, arrived: float) -> None:
        if not self.seen and self.on_first is not None:
            self.on_first()
        self.seen.setdefault(version, arrived)

    def _draw(self, version: int) -> None:
        """The page's poll after the wait said the room reached ``version``: the page drew it when its
        poll's answer changed what the page shows (the poll reads the room as it is, at or past it)."""
        outputs = send(self.page.poll, self.session, [None, None, self.page.prompt], kept=self.polling)
        arrived = time.time()
        if not drawn(outputs):
            self.errors.append(f"the page's poll drew nothing after the room moved to version {version}")
            return
        self._seen(version, arrived)
        self.states.append(self.page.summary(version, outputs))


def summary(out: dict) -> dict:
    """What a test checks of a poll's answer: its version and its run's version, figure and chips."""
    run = (out.get("state") or {}).get("run") or {}
    return {
        "version": out.get("version"),
        "run_version": run.get("version"),
        "figure": bool(run.get("figure")),
        "chips": str(run.get("chips") or "").count("pg-gen"),
    }


def _follow(
    route: Route, code: str, n: int, spread: float, stop, results, keep_alive=True, page=None, event=False, drew=None
) -> None:
    done = threading.Event()
    followers = [
        Follower(route, code, done, start_after=i * spread / n, keep_alive=keep_alive, page=page, event=event)
        for i in range(n)
    ]

    def first() -> None:
        with drew.get_lock():
            drew.value += 1

    for f in followers:
        f.on_first = first if drew is not None else None
    for f in followers:
        f.start()
    stop.wait()
    done.set()
    for f in followers:
        f.join(timeout=60)
    results.put([(f.seen, f.woken, f.states, f.errors, f.waits, f.connections) for f in followers])


class FollowerProcess:
    """``n`` followers (API followers, or pages when ``page`` is given; ``event``: API followers through
    ``/room_state``) in a process of their own (on another machine a class's pages would not share the
    server's interpreter lock: here they share its cores only). ``stop()`` gives back what each saw."""

    def __init__(
        self,
        endpoint,
        code: str,
        n: int,
        spread: float = 1.0,
        keep_alive: bool = True,
        page: Page | None = None,
        event: bool = False,
    ):
        ctx = multiprocessing.get_context("spawn")
        self.stop_event, self.results, self.drew, self.n = ctx.Event(), ctx.Queue(), ctx.Value("i", 0), n
        args = (Route.of(endpoint), code, n, spread, self.stop_event, self.results, keep_alive, page, event, self.drew)
        self.process = ctx.Process(target=_follow, args=args, daemon=True)
        self.process.start()

    def ready(self, timeout: float = 120.0) -> float:
        """Once every follower has drawn the room (their process started, each page joined): the seconds
        it took. Raises after ``timeout``."""
        t0 = time.perf_counter()
        while self.drew.value < self.n:
            if time.perf_counter() - t0 > timeout or not self.process.is_alive():
                raise TimeoutError(f"{self.drew.value} of {self.n} followers drew the room in {timeout:.0f} s")
            time.sleep(0.1)
        return time.perf_counter() - t0

    def stop(self) -> list[SimpleNamespace]:
        """Each follower's ``seen``, ``woken``, ``states``, ``errors``, ``waits`` and ``connections``."""
        self.stop_event.set()
        got = self.results.get(timeout=120)
        self.process.join(timeout=30)
        names = ("seen", "woken", "states", "errors", "waits", "connections")
        return [SimpleNamespace(**dict(zip(names, values))) for values in got]


def lags(followers: list[Follower], published: dict[int, float]) -> list[float]:
    """Each follower's lag for each publication: from it to the first drawn version at or past it (a
    page that drew a later version is in step for both). A publication never drawn raises."""
    out = []
    for i, follower in enumerate(followers):
        for version, at in published.items():
            later = [t for v, t in follower.seen.items() if v >= version]
            if not later:
                raise AssertionError(f"follower {i} never drew version {version}")
            out.append(min(later) - at)
    return out
