"""The server's CPU for a room's followers, against one forward pass of the model they follow.

``python -m bench.room_cpu [--followers 60] [--steps 10] [--pages | --event]``: the app served as ``gpt-playground``
serves it (a process of its own, its start-up heap frozen), a teacher and ``--followers`` followers in a
process of their own following as a student's page does (bench/room_follow: the long poll on
``/room/wait``, then a poll when the room moved). By default the teacher publishes lesson steps through
the room's API (``/room_publish``) and the followers take each move in the wait's answer (``state=1``);
with ``--event`` they poll ``/room_state`` after each wait; with ``--pages`` the teacher is
a page (its Start, then Next and Back through its own events) and each follower is a student's page (its
own Join and its own poll, answered with the step drawn once for the room). The server process's CPU
time (user + system, ``psutil``) is read over three windows of the same length:

- **quiet**: no follower, the teacher publishing nothing (what the idle server spends);
- **waiting**: every follower waiting on the room (what a follower costs between moves);
- **following**: the teacher publishing ``--steps`` lesson steps, one each ``--step-seconds``, each
  drawn by every follower (what one follow update costs: the waits answered and the pages' polls);

and the same publications again with no follower (what the teacher's moves cost alone). Per follower:
(waiting - quiet) / followers / seconds, and (following - teacher alone) / (followers x steps) per
update. One forward pass: the default model (the one followers follow) on the lesson's prompt, timed
here on one torch thread (that thread's CPU time, the median of 20), and GPT-2 small's shape
(random weights: the same arithmetic) beside it. Prints the figures that docs/benchmarks.md states.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import psutil

from bench.browser.app_server import AppServer
from bench.room_follow import FollowerProcess, Page, TeacherPage
from bench.room_sse import Endpoint

PROMPT = "ROMEO:\nWhat light through yonder window breaks?\n"


class ServedApp(AppServer):
    """The app as ``gpt-playground`` starts it (serve.main: warm-up, then the heap frozen)."""

    command = ("-c", "from playground.ui.serve import main; main()")
    name = "gpt-playground"


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system + times.children_user + times.children_system


def window(proc: psutil.Process, seconds: float, during=None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of the server over ``seconds``; ``during()`` runs meanwhile."""
    c0, t0 = cpu_seconds(proc), time.perf_counter()
    if during is not None:
        during()
    rest = seconds - (time.perf_counter() - t0)
    if rest > 0:
        time.sleep(rest)
    return cpu_seconds(proc) - c0, time.perf_counter() - t0


def settle(proc: psutil.Process, limit_s: float = 180.0) -> None:
    """Until the server is quiet (under 5% of a core over 2 s): its start-up's background work (the
    kernel decisions of GPT-2 small) is not a follower's."""
    deadline = time.perf_counter() + limit_s
    while time.perf_counter() < deadline:
        used, wall = window(proc, 2.0)
        if used / wall < 0.05:
            return


def forward_cpu_s(recipe: dict, repeats: int = 20) -> tuple[float, int, str]:
    """(process CPU seconds of one forward pass of ``recipe``'s model on PROMPT, its tokens, its name)."""
    import torch

    from playground.engine.tokenizer import tokenizer_of
    from playground.server.model_cache import CACHE
    from playground.server.recipes import model_label

    model = CACHE.get(recipe, session="bench-room-cpu")
    ids = torch.tensor([tokenizer_of(model).encode(PROMPT)])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # this thread's CPU time is then the forward's (no pool threads, no spinning)
    try:
        with torch.inference_mode():
            model(ids)  # (the first call's one-off costs)
            costs = []
            for _ in range(repeats):
                c0 = time.thread_time()
                model(ids)
                costs.append(time.thread_time() - c0)
    finally:
        torch.set_num_threads(threads)
    return statistics.median(costs), ids.shape[1], model_label(recipe)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.room_cpu", description=__doc__.split("\n")[0])
    ap.add_argument("--followers", type=int, default=60)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--step-seconds", type=float, default=1.5)
    ap.add_argument(
        "--no-keep-alive",
        action="store_true",
        help="each follower request on a new connection (a page keeps its connections open)",
    )
    ap.add_argument(
        "--pages",
        action="store_true",
        help="followers are student pages (their own Join and poll, the step drawn for the room) led by a "
        "teacher's page (Next, Back), not API followers of /room_publish and /room_state",
    )
    ap.add_argument(
        "--event",
        action="store_true",
        help="API followers take each move from the /room_state event after the wait (two requests a move), "
        "not from the wait's own answer",
    )
    args = ap.parse_args(argv)
    seconds = args.steps * args.step_seconds

    from gradio_client import Client

    app = ServedApp(timeout=300)
    try:
        proc = psutil.Process(app.proc.pid)
        teacher = Client(app.url, verbose=False)
        if args.pages:
            lead = TeacherPage(teacher, PROMPT)
            code, key, page = lead.start(), None, Page.of(teacher, PROMPT)
        else:
            room = teacher.predict(api_name="/room_create")
            code, key, page = room["code"], room["key"], None
        step = iter(range(10_000))

        def publish_one(i: int) -> None:
            if args.pages:  # Next through half the moves, Back through the rest: the same steps each window
                lead.move(+1 if i < (args.steps + 1) // 2 else -1)
            else:
                teacher.predict(code, key, {"lesson": "attention", "step": next(step) % 8}, api_name="/room_publish")

        def publish_steps() -> None:
            for i in range(args.steps):
                t0 = time.perf_counter()
                publish_one(i)
                time.sleep(max(0.0, args.step_seconds - (time.perf_counter() - t0)))

        settle(proc)
        quiet, wall_quiet = window(proc, seconds)
        alone, wall_alone = window(proc, seconds, publish_steps)
        pages = FollowerProcess(
            Endpoint(teacher, "/room_state"),
            code,
            args.followers,
            keep_alive=not args.no_keep_alive,
            page=page,
            event=args.event,
        )
        pages.ready()  # every follower has drawn the room
        time.sleep(2.0)  # (and the last joins have settled)
        waiting, wall_waiting = window(proc, seconds)
        following, wall_following = window(proc, seconds, publish_steps)
        followers = pages.stop()
        if key is not None:
            teacher.predict(code, key, api_name="/room_end")
    finally:
        app.close()
    errors = [e for f in followers for e in f.errors]
    from playground.engine.presets import PRESETS
    from playground.server.recipes import default_recipe, random_recipe

    forwards = [forward_cpu_s(default_recipe()), forward_cpu_s(random_recipe(PRESETS["gpt2-small"]))]

    per_wait = max(0.0, waiting / wall_waiting - quiet / wall_quiet) / args.followers
    per_update = max(0.0, following - alone * wall_following / wall_alone) / (args.followers * args.steps)
    kind = "student pages" if args.pages else "API followers" + (" (/room_state)" if args.event else " (state=1)")
    print(
        f"{kind}; server CPU: quiet {quiet / wall_quiet * 1000:.1f} ms/s, the teacher's {args.steps} moves alone "
        f"{alone:.2f} s, {args.followers} followers waiting {waiting / wall_waiting * 1000:.1f} ms/s, "
        f"following the {args.steps} moves {following:.2f} s ({len(errors)} errors; the followers opened "
        f"{sum(f.connections for f in followers)} connections for {sum(f.waits for f in followers)} waits)"
    )
    print(
        f"per follower: waiting {per_wait * 1000:.3f} ms of CPU a second; one follow update "
        f"{per_update * 1000:.2f} ms of CPU"
    )
    for forward, tokens, label in forwards:
        print(
            f"one forward pass of {label} on a {tokens}-token prompt: {forward * 1000:.1f} ms of CPU; a follow "
            f"update is {per_update / forward:.3f} of it, a second of waiting {per_wait / forward:.4f}"
        )
    if errors:
        sys.exit(f"{len(errors)} follower errors, the first: {errors[0]}")


if __name__ == "__main__":
    main()
