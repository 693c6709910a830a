"""The serving framework's own floor for a room: what N learners at once cost Gradio when tokens cost nothing.

``python -m bench.room_floor [--n 1,30] [--rounds 3]`` serves a bare Gradio app whose ``/generate`` streams the
updates the app's Generate event streams for a 64-token run of the bundled model (the prompt's chips at once,
the first token, the final update: a run ends before its pacing asks for another), each about as large as the
app's, but makes its tokens at no cost. N bare HTTP learners (``bench.room``'s own, ``room_learners.sse_learner``)
ask it at the same moment. Their first-token and completion p50 / p95 and the aggregate tokens a second are
the most any decoder behind this framework gives a room of N on this machine: the app's room figures compare
against them (docs/benchmarks.md). The table also gives the bare server's CPU seconds for each room.

``--with-loop MODEL``: each room of N is also made by the server's decode loop in a process of its own
(``LoopOnCue``), alone and at the same moment as the framework's: the best case for a decoder with an
interpreter of its own.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from bench import serving
from bench.room_figures import percentile

TOKENS = 64  # a learner's run, as bench.room asks
CHIP = "<span class='pg-chip' title='position {i} · id {i} · p 12.5%'>tok{i}<small>{i} · 12.5%</small></span>"


class FloorApp(serving.App):
    """The bare app (``python -m bench.room_floor --serve``)."""

    command = ("-m", "bench.room_floor", "--serve")
    name = "the bare streaming app"


def status(state: str, n: int) -> str:
    """The app's status element as the room's learners read it (``room_figures.parse_status``)."""
    return f"<div class='pg-status' data-state='{state}' data-tokens='{n}'>{n} tokens</div>"


def generate(state, prompt, max_new_tokens):
    """The bare ``/generate``: the app's three updates of a run, its tokens made at no cost."""
    n = int(max_new_tokens or TOKENS)
    chips = [CHIP.format(i=i) for i in range(n + 8)]
    yield state, "".join(chips[:8]), status("running", 0)  # the prompt's chips at once
    yield state, "".join(chips[:9]), status("running", 1)  # the first token
    yield state, "".join(chips), status("done", n)


def serve() -> None:
    import gradio as gr

    with gr.Blocks() as demo:
        state = gr.State({})
        prompt = gr.Textbox("Once upon a time")
        max_new = gr.Number(TOKENS)
        chips, shown = gr.HTML(), gr.HTML()
        button = gr.Button()
        button.click(
            generate, [state, prompt, max_new], [state, chips, shown], api_name="generate", concurrency_limit=64
        )
    demo.queue(default_concurrency_limit=64).launch()


def room(app: FloorApp, n: int, timeout: float = 60.0) -> dict:
    """N learners at once on ``app``: first-token and completion p50 / p95 (s) and the aggregate tokens a second."""
    from gradio_client import Client

    from .room import _cpu
    from .room_learners import learners_at_once, sse_learner
    from .room_sse import Endpoint
    from .serving import _call_kwargs, _endpoint_parameters

    clients = [Client(app.url, verbose=False) for _ in range(n)]
    params = _endpoint_parameters(clients[0], "/generate")
    endpoint = Endpoint(clients[0], "/generate")
    data = endpoint.data(_call_kwargs(params, {"max_new_tokens": TOKENS}), params)
    mark: dict = {}
    # every learner at the barrier: the server's CPU is counted from here (clients' connections made before)
    barrier = threading.Barrier(n, action=lambda: mark.update(cpu=_cpu(app.proc.pid)))
    results: list[dict] = [{}] * n

    def run(i):
        results[i] = sse_learner(clients[i], endpoint, data, barrier, timeout)

    learners_at_once(run, n, timeout + 10)
    cpu_s = _cpu(app.proc.pid) - mark["cpu"] if mark else None
    bad = [r.get("error") for r in results if r.get("error") or r.get("tokens") != TOKENS]
    if bad:
        raise RuntimeError(f"{len(bad)} of {n} learners failed: {bad[0]}")
    first = [r["first_s"] for r in results]
    done = [r["completion_s"] for r in results]
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    return {
        "n": n,
        "first_p50": percentile(first, 50),
        "first_p95": percentile(first, 95),
        "done_p50": percentile(done, 50),
        "done_p95": percentile(done, 95),
        "tok_s": n * TOKENS / wall,
        "updates": statistics.median(r["updates"] for r in results),
        "server_cpu_s": cpu_s,
    }


def _cpu_cell(r: dict, n: int) -> str:
    cpu = r.get("server_cpu_s")
    return "–" if cpu is None else f"{cpu:.3f} ({1e3 * cpu / n:.1f})"


class LoopOnCue:
    """The decode loop in a process of its own (``room_profile.loop_room_on_cue``), making a room of N of
    ``model`` each time it is told: the decoder and the framework apart, each with its own interpreter."""

    def __init__(self, model: str, n: int):
        import subprocess
        import sys

        code = f"from bench.room_profile import loop_room_on_cue; loop_room_on_cue({int(n)}, {model!r})"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the decode loop's process did not start")

    def start(self) -> None:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def wall(self) -> float:
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        serving.stop_process(self.proc)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.room_floor", description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="1,30", help="comma-separated room sizes (default 1,30)")
    ap.add_argument("--rounds", type=int, default=3, help="rooms of each size, the median kept (default 3)")
    ap.add_argument(
        "--with-loop",
        metavar="MODEL",
        choices=("bundled", "gpt2-small"),
        help="each room also decoded at the same moment by the decode loop in a process of its own (MODEL's)",
    )
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.n.split(",")]
    if args.with_loop:
        together(sizes, args.rounds, args.with_loop)
        return
    app = FloorApp(timeout=120)
    try:
        room(app, 1)  # a warm-up: the framework's first event
        print(
            "| N | first token p50 / p95 (s) | completion p50 / p95 (s) | aggregate tok/s | × one learner | updates "
            "| server CPU s (ms a learner) |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        one = None
        for n in sizes:
            rounds = []
            for _ in range(args.rounds):
                rounds.append(room(app, n))
                time.sleep(0.5)
            r = sorted(rounds, key=lambda x: x["tok_s"])[len(rounds) // 2]
            one = r["tok_s"] if one is None else one
            print(
                f"| {n} | {r['first_p50']:.3f} / {r['first_p95']:.3f} | {r['done_p50']:.3f} / {r['done_p95']:.3f} | "
                f"{r['tok_s']:,.0f} | {r['tok_s'] / one:.1f}× | {r['updates']:.0f} | {_cpu_cell(r, n)} |"
            )
    finally:
        app.close()


def together(sizes: list[int], rounds: int, model: str) -> None:
    """Rooms of the bare app with the decode loop's room of the same N made in another process at the same
    moment: how long each takes beside the other, a bound for an app whose decoder has a process of its own."""
    app = FloorApp(timeout=120)
    try:
        room(app, 1)
        print(
            "| N | loop alone (s) | loop beside the framework (s) | framework alone, completion p95 (s) | "
            "framework beside the loop, completion p95 (s) | tok/s of the slower of the two beside |"
        )
        print("|---:|---:|---:|---:|---:|---:|")
        for n in sizes:
            loop = LoopOnCue(model, n)
            try:
                rows = []
                for _ in range(rounds):
                    loop.start()
                    alone_loop = loop.wall()
                    time.sleep(0.3)
                    alone_app = room(app, n)["done_p95"]
                    time.sleep(0.3)
                    loop.start()  # the loop's room and the framework's at the same moment
                    beside_app = room(app, n)["done_p95"]
                    beside_loop = loop.wall()
                    rows.append((alone_loop, beside_loop, alone_app, beside_app))
                    time.sleep(0.3)
            finally:
                loop.close()
            a, b, c, d = (statistics.median(r[i] for r in rows) for i in range(4))
            print(f"| {n} | {a:.3f} | {b:.3f} | {c:.3f} | {d:.3f} | {n * TOKENS / max(b, d):,.0f} |")
    finally:
        app.close()


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main()
