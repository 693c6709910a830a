"""``python -m bench.room_profile``: where a room's server time goes (issue 33).

Two measurements of one room (N learners, 64 tokens each, the room benchmark's settings):

- ``--app`` (the default): the app started as ``python -m bench --room`` starts it, N bare HTTP learners at
  once (bench/room.py), and py-spy sampling the server's Python threads during that round only. The samples
  are sorted into what they were doing (``CATEGORIES``: the shared forward, the rows' samplers, Gradio's queue
  and streaming, the Generate handler's own work, ``start_run``). py-spy sees Python threads only: the forward's
  second OpenMP thread is not counted, so the forward's share is its calling thread's.
- ``--loop``: the same N generations stepped by the server's decode loop in this process, without the app:
  the wall time, this process's CPU per token, how much of the wall the shared forwards took
  (``decoder.rows``), and the CPU per token of the shared forwards' calling thread and of the rows'
  samplers (``Generation.advance`` in the sampler pool), each its own threads' time.

- ``--rounds``: the app as for ``--app``, and the decode loop's own times of each shared step of the room
  (``DecodeLoop.timeline``, written by the benchmark's server when sent SIGUSR2), in three phases: the
  intake (learners still joining), the full room (every learner's row in each step) and the drain (runs
  ending). The full room's tokens/s is what the decoder gives a room once every learner is in; the
  learners' completion beyond the steps' span is the framework's, before the first step and after the last.

py-spy comes from PyPI (``pip install py-spy``); it reads another process's memory, so it needs the rights to
(root, or ``ptrace`` allowed).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

# The first rule whose key occurs in a sample's stack names it (order matters: a sampler's stack also holds
# the pool's frames, the Generate handler's the queue's).
CATEGORIES = (
    ("run_rows", "shared forward (native rows, calling thread)"),
    ("sample_rows", "row samplers (one call for a step's rows)"),
    ("advance (playground/engine/sampling", "row samplers (Generation.advance)"),
    ("sampler_", "sampler pool hand-over"),
    ("start_run", "start_run (tokenize, memory budget, KV cache)"),
    ("generate_tab.py", "Generate handler (chips, status, waiting)"),
    ("jsonable_encoder", "Gradio: encoding updates"),
    ("h11_impl", "uvicorn: sending"),
    ("brotli", "Gradio: compression middleware"),
    ("_find_and_load", "Gradio: import attempts per event (matplotlib)"),
    ("postprocess", "Gradio: postprocess"),
    ("preprocess", "Gradio: preprocess"),
    ("queueing.py", "Gradio: queue"),
    ("decode-loop", "decode loop: the rest"),
    ("Thread-1", "event loop: the rest"),
)


def categorize(lines) -> collections.Counter:
    """Samples per category from py-spy's raw (collapsed) output: one ``frame;frame;... count`` a line."""
    counts: collections.Counter = collections.Counter()
    for line in lines:
        line = line.rstrip()
        if not line or " " not in line:
            continue
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        name = next((label for key, label in CATEGORIES if key in stack), "other")
        counts[name] += int(n)
    return counts


def shares(counts: collections.Counter) -> list[tuple[str, int, float]]:
    """(category, samples, share of all samples), the largest first."""
    total = sum(counts.values())
    return [(k, n, n / total if total else 0.0) for k, n in counts.most_common()]


def profile_app(model: str, n: int, rate: int, out: str, gil: bool = False) -> None:
    from . import room as R
    from . import room_figures as F

    spy = shutil.which("py-spy")
    if spy is None:
        raise SystemExit("py-spy is not installed: pip install py-spy")
    rm = R.Room(300, print, "http", with_page=False)
    try:
        one = rm.one_learner(model, n)
        print(f"one learner: {F._s(one.get('completion_s'))} s, {F._s(one.get('tok_s'))} tok/s")
        proc = subprocess.Popen(
            [spy, "record", "--pid", str(rm.pid), "--rate", str(rate), "--format", "raw", "--threads"]
            + (["--gil"] if gil else [])
            + ["--nonblocking", "-o", out],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # py-spy attached before the round starts
        res, _, cpu = rm.round(model, n, with_page=False)
        proc.send_signal(2)
        proc.wait(60)
        s = F.summarize(res, one)
        print(
            f"N={n}: first token p95 {F._s(s['first_p95_s'])} s, completion p95 {F._s(s['completion_p95_s'])} s "
            f"({F._x(s.get('completion_x_alone'))} alone), {F._s(s.get('aggregate_tok_s'))} tok/s "
            f"({F._x(s.get('x_one_learner'))} one learner), {F._s(s.get('updates_p50'))} updates a learner; "
            f"server {F._s(cpu.get('server_cores'))} cores, machine {F._s(cpu.get('machine_cores'))}, "
            f"load {F._s(cpu['loadavg'][0])}"
        )
    finally:
        rm.close()
    with open(out) as f:
        for name, count, share in shares(categorize(f)):
            print(f"  {100 * share:5.1f}%  {count:6d}  {name}")


def last_room(steps: list[dict], gap_s: float = 0.2) -> list[dict]:
    """The shared steps after the last pause longer than ``gap_s`` (the last room's)."""
    at = 0
    for i in range(1, len(steps)):
        if steps[i]["start"] - (steps[i - 1]["start"] + steps[i - 1]["total_s"]) > gap_s:
            at = i
    return steps[at:]


def phases(steps: list[dict]) -> list[dict]:
    """A room's shared steps in three phases: ``intake`` (before the first step with the room's most rows),
    ``full`` (from it to the last such step) and ``drain`` (after it). Each: its seconds (from its first
    step's start to the next phase's), steps, tokens (a row is a token), median ms a step and tokens/s."""
    if not steps:
        return []
    most = max(s["rows"] for s in steps)
    first = next(i for i, s in enumerate(steps) if s["rows"] == most)
    last = max(i for i, s in enumerate(steps) if s["rows"] == most)
    end = steps[-1]["start"] + steps[-1]["total_s"]
    out = []
    for name, lo, hi in (("intake", 0, first), ("full", first, last + 1), ("drain", last + 1, len(steps))):
        part = steps[lo:hi]
        if not part:
            out.append({"phase": name, "seconds": 0.0, "steps": 0, "tokens": 0, "ms_a_step": None, "tok_s": None})
            continue
        until = steps[hi]["start"] if hi < len(steps) else end
        seconds = until - part[0]["start"]
        tokens = sum(s["rows"] for s in part)
        out.append(
            {
                "phase": name,
                "seconds": seconds,
                "steps": len(part),
                "tokens": tokens,
                "ms_a_step": 1e3 * statistics.median(s["total_s"] for s in part),
                "forward_ms": 1e3 * statistics.median(s["forward_s"] for s in part),
                "sampling_ms": 1e3 * statistics.median(s["sampling_s"] for s in part),
                "tok_s": tokens / seconds if seconds > 0 else None,
            }
        )
    return out


def rounds_app(model: str, n: int) -> None:
    """One room of ``n`` in the app (warmed by one before it), and its shared steps by phase."""
    from . import room as R
    from . import room_figures as F
    from .browser.app_server import shared_steps_path

    rm = R.Room(300, print, "http", with_page=False)
    try:
        one = rm.one_learner(model, n)
        rm.round(model, n, with_page=False)  # the room once, unmeasured (as bench --room does)
        time.sleep(0.5)  # a pause that marks where the measured room's steps begin
        res, _, cpu = rm.round(model, n, with_page=False)
        path = shared_steps_path(rm.pid)
        path.unlink(missing_ok=True)
        os.kill(rm.pid, signal.SIGUSR2)
        for _ in range(100):
            if path.exists():
                break
            time.sleep(0.1)
        steps = json.loads(path.read_text())
        path.unlink()
    finally:
        rm.close()
    s = F.summarize(res, one)
    print(
        f"one learner {F._s(one.get('tok_s'))} tok/s; N={n}: first token p95 {F._s(s['first_p95_s'])} s, completion "
        f"p95 {F._s(s['completion_p95_s'])} s, {F._s(s.get('aggregate_tok_s'))} tok/s "
        f"({F._x(s.get('x_one_learner'))} one learner); server {F._s(cpu.get('server_cores'))} cores"
    )
    room = last_room(steps)
    if room:
        span = room[-1]["start"] + room[-1]["total_s"] - room[0]["start"]
        print(f"  the room's shared steps: {len(room)} in {span:.3f} s")
    for line in phase_lines(room, one.get("tok_s")):
        print(line)


def phase_lines(steps: list[dict], one_tok_s: float | None) -> list[str]:
    """A line for each of ``phases(steps)``: its seconds, steps, tokens, median step (its forward and sampling)
    and tokens/s, also as a multiple of one learner's ``one_tok_s``."""
    from . import room_figures as F

    lines = []
    for p in phases(steps):
        x = p["tok_s"] / one_tok_s if p["tok_s"] and one_tok_s else None
        lines.append(
            f"  {p['phase']:>6}: {p['seconds']:.3f} s, {p['steps']} steps, {p['tokens']} tokens, "
            f"{F._s(p['ms_a_step'])} ms a step (forward {F._s(p.get('forward_ms'))}, sampling "
            f"{F._s(p.get('sampling_ms'))}), {F._s(p['tok_s'])} tok/s ({F._x(x)} one learner)"
        )
    return lines


def _loop_model(model_name: str):
    """(model, recipe) the decode loop's rooms of this process decode: the bundled model or GPT-2 small (random
    weights), built, then the heap settled as the app settles it before serving (no full collection of the
    modules' objects mid-room)."""
    from playground.engine.presets import PRESETS
    from playground.server.recipes import build_from_recipe, default_recipe, random_recipe
    from playground.ui.serve import settle_heap

    recipe = default_recipe() if model_name == "bundled" else random_recipe(PRESETS["gpt2-small"], seed=0)
    model = build_from_recipe(recipe)
    settle_heap()
    return model, recipe


def _room_runs(model, recipe, n: int) -> list:
    """``n`` generations as the room's learners ask them: the Generate tab's first example, MAX_NEW tokens,
    temperature 0.8, top-k 40, seeds SEED + i."""
    from playground.server.runs import start_run
    from playground.ui.generate.layout import EXAMPLES

    from .room import MAX_NEW, SEED

    prompt = EXAMPLES[0][0]
    return [
        start_run(model, recipe, prompt, max_new_tokens=MAX_NEW, temperature=0.8, top_k=40, top_p=1.0, seed=SEED + i)[1]
        for i in range(n)
    ]


def loop_room_on_cue(n: int, model_name: str = "bundled") -> None:
    """For ``bench.room_floor --with-loop``: the model built and one room of ``n`` made (warm), then, at each
    line read from stdin, a room of ``n`` through a DecodeLoop of this process; prints "ready" once, then each
    room's wall seconds."""
    import playground.server.decode_loop as dl

    model, recipe = _loop_model(model_name)

    def one_room() -> float:
        loop = dl.DecodeLoop()
        gens = _room_runs(model, recipe, n)
        t0 = time.perf_counter()
        for s in [loop.submit(g) for g in gens]:
            s.wait_end(120)
        return time.perf_counter() - t0

    one_room()
    print("ready", flush=True)
    for _ in sys.stdin:
        print(f"{one_room():.4f}", flush=True)


def loop_alone(n: int, model_name: str = "bundled") -> None:
    """N generations of the bundled model (or GPT-2 small, random weights) through a DecodeLoop of this
    process, then one alone, twice."""
    import threading

    import torch

    import playground.server.decode_loop as dl

    model, recipe = _loop_model(model_name)
    forward, sampling = [0.0], [0.0]  # wall seconds: the shared forwards, the rows' samplers in one call
    cpu = {"forward": 0.0, "samplers": 0.0}  # thread CPU seconds: the forwards' calling thread, each advance
    cpu_lock = threading.Lock()
    plain = dl.decoder_of
    plain_advance = dl._advance

    def advance(gen, result, *made, **kw):  # one row's sampler (or its fields made together), its thread's CPU counted
        t = time.thread_time()
        try:
            return plain_advance(gen, result, *made, **kw)
        finally:
            with cpu_lock:
                cpu["samplers"] += time.thread_time() - t

    class Timed:  # the decoder, its shared forwards timed
        def __init__(self, decoder):
            self.decoder = decoder

        def rows(self, m, rows):
            t, c = time.perf_counter(), time.thread_time()
            try:
                return self.decoder.rows(m, rows)
            finally:
                forward[0] += time.perf_counter() - t
                cpu["forward"] += time.thread_time() - c

        def sample_rows(self, rows):
            t = time.perf_counter()
            try:
                return self.decoder.sample_rows(rows)
            finally:
                sampling[0] += time.perf_counter() - t

        def __getattr__(self, name):
            return getattr(self.decoder, name)

    dl.decoder_of = lambda m: Timed(plain(m))  # type: ignore[assignment]
    dl._advance = advance  # type: ignore[assignment]
    alone_tok_s = None
    try:
        for size in (1, n, 1, n):
            loop = dl.DecodeLoop()
            gens = _room_runs(model, recipe, size)
            forward[0] = sampling[0] = 0.0
            cpu.update(forward=0.0, samplers=0.0)
            t0, c0 = time.perf_counter(), time.process_time()
            streams = [loop.submit(g) for g in gens]
            for s in streams:
                s.wait_end(120)
            wall, used = time.perf_counter() - t0, time.process_time() - c0
            tokens = sum(len(g.steps) for g in gens)
            print(
                f"N={size}: {wall:.3f} s, {tokens / wall:.0f} tok/s, CPU {1e3 * used / tokens:.2f} ms a token "
                f"({used / wall:.2f} cores; forwards' thread {1e3 * cpu['forward'] / tokens:.2f}, samplers "
                f"{1e3 * cpu['samplers'] / tokens:.2f}), shared forwards {forward[0]:.3f} s of the wall, rows sampled "
                f"together {sampling[0]:.3f} s, "
                f"{loop.rounds} rounds, {torch.get_num_threads()} torch threads, load {os.getloadavg()[0]:.1f}"
            )
            if size == 1:
                alone_tok_s = tokens / wall
            else:  # the room's shared steps by phase, against the last run alone
                for line in phase_lines([step._asdict() for step in loop.timeline], alone_tok_s):
                    print(line)
    finally:
        dl.decoder_of = plain  # type: ignore[assignment]
        dl._advance = plain_advance  # type: ignore[assignment]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.room_profile", description=__doc__.split("\n")[0])
    ap.add_argument("--loop", action="store_true", help="the decode loop alone in this process (--model's)")
    ap.add_argument("--rounds", action="store_true", help="the app's room, its decode loop's shared steps by phase")
    ap.add_argument("--model", default="bundled", choices=("bundled", "gpt2-small"))
    ap.add_argument("--n", type=int, default=30, help="learners (default 30)")
    ap.add_argument("--rate", type=int, default=100, help="py-spy samples a second (default 100)")
    ap.add_argument("--out", default="room-profile.raw", help="py-spy's raw output (default room-profile.raw)")
    ap.add_argument("--gil", action="store_true", help="sample only the thread holding the interpreter lock")
    args = ap.parse_args(argv)
    if not 1 <= args.n <= 64:
        print("--n takes 1 to 64 learners", file=sys.stderr)
        return 2
    if args.loop:
        loop_alone(args.n, args.model)
    elif args.rounds:
        rounds_app(args.model, args.n)
    else:
        profile_app(args.model, args.n, args.rate, args.out, args.gil)
    return 0


if __name__ == "__main__":
    sys.exit(main())
