"""What one request of a following page costs the server, against the same request in a bare Gradio app.

``python -m bench.room_requests [--requests 400] [--rounds 2]``: the app served as ``gpt-playground``
serves it and, beside it, a bare Gradio app (one ``queue=False`` event with ``/room_state``'s four inputs
and a JSON output, its function returning at once: the framework's own floor for an event). One client
sends each request ``--requests`` times in a row on a connection kept open, as a page does; each server
process's CPU time (``psutil``, user + system) over them, divided by their number, is the request's cost.
The kinds, alternated ``--rounds`` times:

- ``/room/wait`` answering at once (the room moved past ``since``): the long poll's answer, a plain route;
- ``/room_state`` with nothing new (``since`` = the room's version) and with the room's whole state;
- the bare app's event.

A follow update is one wait answer and one event (bench/room_follow.py); this says how much of it is the
framework's. Prints the figures that docs/benchmarks.md states.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import urllib.parse
import uuid

import psutil

from bench import serving
from bench.page_events import send
from bench.room_cpu import PROMPT, ServedApp, cpu_seconds, settle
from bench.room_follow import Page, TeacherPage
from bench.room_sse import Endpoint, KeptConnection, post


class BareGradio(serving.App):
    """A bare Gradio app with one unqueued event shaped as ``/room_state`` (``python -m bench.room_requests --serve-bare``)."""

    command = ("-m", "bench.room_requests", "--serve-bare")
    name = "the bare Gradio app"


def serve_bare() -> None:
    import gradio as gr

    with gr.Blocks() as demo:
        code, since, member, key = gr.Textbox(), gr.Number(), gr.Textbox(), gr.Textbox()
        out = gr.JSON()
        button = gr.Button()
        button.click(lambda *_: {"changed": False}, [code, since, member, key], out, queue=False, api_name="room_state")
    demo.launch()


def per_request(proc: psutil.Process, request, n: int) -> float:
    """Milliseconds of ``proc``'s CPU per call of ``request()``, over ``n`` calls in a row."""
    c0 = cpu_seconds(proc)
    for _ in range(n):
        request()
    return (cpu_seconds(proc) - c0) / n * 1000


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.room_requests", description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--serve-bare", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve_bare:
        serve_bare()
        return

    from gradio_client import Client

    app, bare = ServedApp(timeout=300), None
    try:
        bare = BareGradio(timeout=120)
        procs = {"app": psutil.Process(app.proc.pid), "bare": psutil.Process(bare.proc.pid)}
        teacher = Client(app.url, verbose=False)
        room = teacher.predict(api_name="/room_create")
        code, key = room["code"], room["key"]
        version = teacher.predict(
            code, key, {"tab": "lessons", "lesson": "attention", "step": 1}, api_name="/room_publish"
        )
        state = Endpoint(teacher, "/room_state")
        bare_event = Endpoint(Client(bare.url, verbose=False), "/room_state")
        settle(procs["app"])
        session = uuid.uuid4().hex
        app_conn = KeptConnection(state.host, state.port, 30)
        bare_conn = KeptConnection(bare_event.host, bare_event.port, 30)
        wait_path = "/room/wait?" + urllib.parse.urlencode({"code": code, "timeout": 20, "since": 0})
        kinds = {
            "/room/wait, answered at once": ("app", lambda: app_conn.request("GET", wait_path)),
            "/room_state, nothing new": ("app", lambda: post(state, session, [code, version, "", ""], kept=app_conn)),
            "/room_state, the room's state": ("app", lambda: post(state, session, [code, None, "", ""], kept=app_conn)),
            "bare Gradio event": ("bare", lambda: post(bare_event, session, [code, 1, "", ""], kept=bare_conn)),
        }
        # A teacher's page and a student's, through their own events (the teacher's room names its model,
        # so the step is drawn once for the room): the teacher alternates Next and Back, each published as
        # the page publishes it (the event chained after it); the student's page polls after each move.
        lead, pupil, page = TeacherPage(teacher, PROMPT), uuid.uuid4().hex, Page.of(teacher, PROMPT)
        send(page.join, pupil, [None, None, lead.start()])
        poll = page.poll
        moves = iter(range(10**6))

        def move() -> None:
            lead.move(+1 if next(moves) % 2 == 0 else -1)

        def move_and_poll() -> None:
            move()
            send(poll, pupil, [None, None, PROMPT], kept=app_conn)

        kinds["the page's poll, nothing new"] = ("app", lambda: send(poll, pupil, [None, None, PROMPT], kept=app_conn))
        costs: dict[str, list[float]] = {kind: [] for kind in kinds}
        costs["the page's poll, a new step"] = []
        for _ in range(args.rounds):
            for kind, (server, request) in kinds.items():
                request()  # (the first call's one-off costs)
                costs[kind].append(per_request(procs[server], request, args.requests))
            move_and_poll()
            n = max(20, args.requests // 4)
            both = per_request(procs["app"], move_and_poll, n)
            costs["the page's poll, a new step"].append(both - per_request(procs["app"], move, n))
        app_conn.close()
        bare_conn.close()
        teacher.predict(code, key, api_name="/room_end")
    finally:
        app.close()
        if bare is not None:
            bare.close()
    floor = statistics.median(costs["bare Gradio event"])
    for kind, ms in costs.items():
        rounds = ", ".join(f"{m:.2f}" for m in ms)
        print(f"{kind}: {rounds} ms of server CPU a request ({statistics.median(ms) / floor:.2f}x the bare event)")
    wait = statistics.median(costs["/room/wait, answered at once"])
    for poll_kind in ("/room_state, the room's state", "the page's poll, a new step"):
        update = wait + statistics.median(costs[poll_kind])
        print(
            f"one follow update (a wait answered, {poll_kind}): {update:.2f} ms, {update / floor:.2f}x the bare event"
        )
    if any(m <= 0 for ms in costs.values() for m in ms):
        sys.exit("a request cost no measurable CPU: too few requests for psutil's clock")


if __name__ == "__main__":
    main()
