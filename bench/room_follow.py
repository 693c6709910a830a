"""A room's follower as a student's page follows: a long poll on ``/room/wait`` (server.room_wait) and,
each time it answers that the room moved, the page's own poll (``/room_state``, as the page's hidden
poke runs ``lessons_room.poll``: one POST, the event being unqueued; through the queue if it is queued): the move counts as seen when that poll's answer
arrives. Bare HTTP (``http.client``), as bench/room_sse.py's learners, so 60 of them weigh little
beside the server.
"""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from types import SimpleNamespace

from .room_sse import Endpoint, KeptConnection, post, stream_generate

WAIT_S = 20.0  # as the page's WATCH_JS asks


def wait_room(
    endpoint: Endpoint, code: str, since: int | None, timeout: float = WAIT_S, kept: KeptConnection | None = None
) -> dict:
    """One ``/room/wait`` answer: the room's state once it moved past ``since`` (or ``timeout`` passed), on
    ``kept`` (a connection kept open between waits, as a page's fetch keeps one) or a connection of its own."""
    query = {"code": code, "timeout": timeout}
    if since is not None:
        query["since"] = since
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
class Route:
    """What a follower's requests need of an ``Endpoint`` (picklable: a follower process gets it)."""

    fn_index: int
    host: str
    port: int
    join_path: str
    data_path: str
    run_path: str | None  # (set when the event is unqueued: one POST)

    @classmethod
    def of(cls, endpoint) -> Route:
        return cls(
            endpoint.fn_index, endpoint.host, endpoint.port, endpoint.join_path, endpoint.data_path, endpoint.run_path
        )


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
    ):
        super().__init__(daemon=True)
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

    def run(self) -> None:
        time.sleep(self.start_after)  # pages open at different moments
        drawn: int | None = None  # the version the page drew (its poll's)
        since: int | None = None  # the version the wait has seen
        # a page's two connections, each kept open: its long poll's and its events'
        self.waiting = KeptConnection(self.endpoint.host, self.endpoint.port, self.wait_s + 30)
        self.polling = KeptConnection(self.endpoint.host, self.endpoint.port, 60)
        while not self.done.is_set():
            try:
                if not self.keep_alive:
                    self.waiting.close()
                    self.polling.close()
                answer = wait_room(self.endpoint, self.code, since, timeout=self.wait_s, kept=self.waiting)
                self.waits += 1
                if "error" in answer:
                    self.errors.append(answer["error"])
                    self.done.wait(1.0)
                    continue
                if not answer.get("changed"):
                    continue
                since = answer["version"]
                self.woken.setdefault(since, time.time())
                data = [self.code, drawn, "", ""]
                if self.endpoint.run_path:
                    arrived, outputs = post(self.endpoint, self.session, data, timeout=60, kept=self.polling)
                else:
                    _, stamped = stream_generate(self.endpoint, self.session, data, None, timeout=60)
                    arrived, outputs = stamped[-1]
                out = outputs[0]
                if "error" in out:
                    self.errors.append(out["error"])
                elif out.get("changed"):
                    drawn = out["version"]
                    self.seen.setdefault(drawn, arrived)
                    self.states.append(summary(out))
            except Exception as e:  # a refused or failed request: counted, never hidden
                self.errors.append(f"{type(e).__name__}: {e}")
                self.done.wait(1.0)
        self.waiting.close()
        self.polling.close()
        self.connections = self.waiting.opened + self.polling.opened


def summary(out: dict) -> dict:
    """What a test checks of a poll's answer: its version and its run's version, figure and chips."""
    run = (out.get("state") or {}).get("run") or {}
    return {
        "version": out.get("version"),
        "run_version": run.get("version"),
        "figure": bool(run.get("figure")),
        "chips": str(run.get("chips") or "").count("pg-gen"),
    }


def _follow(route: Route, code: str, n: int, spread: float, stop, results, keep_alive: bool = True) -> None:
    done = threading.Event()
    followers = [Follower(route, code, done, start_after=i * spread / n, keep_alive=keep_alive) for i in range(n)]
    for f in followers:
        f.start()
    stop.wait()
    done.set()
    for f in followers:
        f.join(timeout=60)
    results.put([(f.seen, f.woken, f.states, f.errors, f.waits, f.connections) for f in followers])


class FollowerProcess:
    """``n`` followers in a process of their own (on another machine a class's pages would not share the
    server's interpreter lock: here they share its cores only). ``stop()`` gives back what each saw."""

    def __init__(self, endpoint, code: str, n: int, spread: float = 1.0, keep_alive: bool = True):
        ctx = multiprocessing.get_context("spawn")
        self.stop_event, self.results = ctx.Event(), ctx.Queue()
        args = (Route.of(endpoint), code, n, spread, self.stop_event, self.results, keep_alive)
        self.process = ctx.Process(target=_follow, args=args, daemon=True)
        self.process.start()

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
