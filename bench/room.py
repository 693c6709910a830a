"""``python -m bench --room``: a room of learners on one app (issue 33, item 5).

The app is started once (``python -m bench.browser --serve``, what app.py does). For each model
(the bundled one, and GPT-2 small: float32, random weights, seed 0) and each room size N, N
learners ask ``/generate`` for 64 tokens at the same moment (a barrier): N - 1 gradio_client
sessions and one Chromium page, whose chips are timed in the page. N = 1 is a gradio_client
session alone (``ALONE_REPS`` times: the "one learner" every ratio divides by), then the page alone.

Every learner sends what the Generate tab sends by default (the endpoint's defaults: the example
prompt, temperature 0.8, top-k 40, top-p 1, sampling) with 64 new tokens and seed 42 + its index,
so a run is reproducible. For a gradio_client session, its first token is the arrival of the first
streamed update whose status counts a generated token (the update before it carries the prompt's
chips only), its completion the arrival of the update saying done. Arrivals are stamped as the
client's reader thread appends them (a list that records the time of each append).

Figures per row: first token p50/p95 and completion p50/p95 over the gradio_client learners (the
page is reported apart: its first chip and its done, measured in the page), aggregate tokens/s
(every learner's tokens, the page's included, over the wall time from the first request to the
last completion), its ratio to one learner alone, completion p95 against one learner's, the
server's CPU use in cores over the round and the 1-minute load average at its start and end.

The peer (bench/room_llama.py): llama.cpp's ``llama-server``, continuous batching with ``-np N``,
the same weights as f32 GGUF, the same prompt tokens and sampling, N streaming clients.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import threading
import time

from . import room_llama
from .room_sse import Endpoint, call, stream_generate

MODELS = ("bundled", "gpt2-small")
SIZES = (1, 8, 30)
MAX_NEW = 64
ALONE_REPS = 3
SEED = 42
STOP_EVERY, STOP_AFTER_S = 5, 0.3  # in the Stop round: every 5th learner presses Stop 0.3 s after its first token
STATUS = re.compile(r"data-state=['\"](\w+)['\"] data-tokens=['\"](\d+)['\"]")
ENDED = ("done", "stopped", "error")


# ---- pure parts (tests/unit/test_bench_room.py) ------------------------------------------


def percentile(values, q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between ranks (numpy's default)."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0-100, not {q}")
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def parse_status(output) -> tuple[str | None, int | None]:
    """(state, generated tokens) from a /generate update (its status element), or (None, None)."""
    items = output if isinstance(output, (list, tuple)) else [output]
    for item in items:
        if isinstance(item, str):
            m = STATUS.search(item)
            if m:
                return m.group(1), int(m.group(2))
    return None, None


def timings(stamped: list[tuple[float, object]], start: float) -> dict:
    """A learner's figures from its (arrival time, update) pairs: first token, completion, tokens."""
    first = end = None
    tokens, state = 0, None
    for t, out in stamped:
        st, n = parse_status(out)
        if n is None:
            continue
        if n > 0 and first is None:
            first = t - start
        tokens, state = n, st
        if st in ENDED:
            end = t - start
            break
    return {"first_s": first, "completion_s": end, "tokens": tokens, "state": state}


def summarize(learners: list[dict], one: dict | None = None) -> dict:
    """One row: percentiles over the learners with ``first_s`` (gradio_client or HTTP clients), the
    aggregate over every learner with ``start``/``end``/``tokens`` (the page's included)."""
    ok = [x for x in learners if x.get("completion_s") is not None]
    timed = [x for x in learners if x.get("start") is not None and x.get("end") is not None]
    row = {
        "learners": len(learners),
        "finished": len(ok),
        "errors": [x["error"] for x in learners if x.get("error")],
        "first_p50_s": percentile([x.get("first_s") for x in ok], 50),
        "first_p95_s": percentile([x.get("first_s") for x in ok], 95),
        "completion_p50_s": percentile([x["completion_s"] for x in ok], 50),
        "completion_p95_s": percentile([x["completion_s"] for x in ok], 95),
        "updates_p50": percentile([x.get("updates") for x in ok], 50),
    }
    if timed:
        wall = max(x["end"] for x in timed) - min(x["start"] for x in timed)
        row["wall_s"] = wall
        row["tokens"] = sum(x.get("tokens") or 0 for x in timed)
        row["aggregate_tok_s"] = row["tokens"] / wall if wall > 0 else None
    if one:
        agg, one_rate = row.get("aggregate_tok_s"), one.get("tok_s")
        row["x_one_learner"] = agg / one_rate if agg and one_rate else None
        p95, one_s = row["completion_p95_s"], one.get("completion_s")
        row["completion_x_alone"] = p95 / one_s if p95 and one_s else None
    return row


def one_learner(rounds: list[dict]) -> dict:
    """The reference: median completion of the lone learner's rounds and its tokens/s."""
    done = [r for r in rounds if r.get("completion_s")]
    if not done:
        return {}
    s = statistics.median(r["completion_s"] for r in done)
    tokens = statistics.median(r.get("tokens") or MAX_NEW for r in done)
    return {"completion_s": s, "tok_s": tokens / s, "first_s": statistics.median(r["first_s"] or 0 for r in done)}


def alone_row(rounds: list[dict], one: dict) -> dict:
    """A lone learner's rounds ran one after another: its aggregate is its own rate, not their wall."""
    return {"aggregate_tok_s": one.get("tok_s"), "x_one_learner": 1.0 if one else None, "wall_s": None}


def _s(x) -> str:
    return "–" if x is None else f"{x:.2f}"


def _x(x) -> str:
    return "–" if x is None else f"{x:.1f}×"


HEADER = (
    "| model | server | N | first token p50 / p95 (s) | completion p50 / p95 (s) | p95 × alone "
    "| aggregate tok/s | × one learner | page first chip / done (s) | CPU cores: server / learners / machine | load 1-min start→end |"
)


def table(result: dict) -> str:
    """The rows as a Markdown table, then one line per row that had errors."""
    lines = [HEADER, "|" + "---|" * 3 + "---:|" * 8]
    notes = []
    for r in result.get("rows", []):
        page = r.get("page") or {}
        load = r.get("loadavg") or [None, None]
        cells = [
            r["model"],
            r["server"],
            str(r["n"]),
            f"{_s(r.get('first_p50_s'))} / {_s(r.get('first_p95_s'))}",
            f"{_s(r.get('completion_p50_s'))} / {_s(r.get('completion_p95_s'))}",
            _x(r.get("completion_x_alone")),
            "–" if r.get("aggregate_tok_s") is None else f"{r['aggregate_tok_s']:.1f}",
            _x(r.get("x_one_learner")),
            f"{_s(page.get('first_chip_s'))} / {_s(page.get('done_s'))}" if page else "–",
            f"{_s(r.get('server_cores'))} / {_s(r.get('client_cores'))} / {_s(r.get('machine_cores'))}",
            f"{_s(load[0])}→{_s(load[1])}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
        if r.get("errors"):
            notes.append(f"{r['model']} {r['server']} N={r['n']}: {len(r['errors'])} errors, first: {r['errors'][0]}")
    for model, note in (result.get("skipped") or {}).items():
        notes.append(f"{model}: {note}")
    return "\n".join(lines + ([""] + notes if notes else []))


def targets(result: dict) -> list[str]:
    """The targets the batched decoder will be checked against (measured, not tuned for)."""
    rows = {(r["model"], r["server"], r["n"]): r for r in result.get("rows", [])}
    out = []

    def check(name, value, ok):
        mark = "–" if value is None else ("met" if ok(value) else "not met")
        out.append(f"  {name}: {'–' if value is None else f'{value:.2f}'} ({mark})")

    n = max((k[2] for k in rows), default=0)
    b = rows.get(("bundled", "app", n), {})
    check(f"bundled N={n} aggregate × one learner ≥ 10", b.get("x_one_learner"), lambda v: v >= 10)
    check(f"bundled N={n} first token p95 ≤ 1 s", b.get("first_p95_s"), lambda v: v <= 1)
    check(f"bundled N={n} completion p95 ≤ 3 × alone", b.get("completion_x_alone"), lambda v: v <= 3)
    g = rows.get(("gpt2-small", "app", n), {})
    check(f"gpt2-small N={n} aggregate × one learner ≥ 4", g.get("x_one_learner"), lambda v: v >= 4)
    peer = rows.get(("gpt2-small", "llama-server", n), {})
    ratio = (
        g["aggregate_tok_s"] / peer["aggregate_tok_s"]
        if g.get("aggregate_tok_s") and peer.get("aggregate_tok_s")
        else None
    )
    check(f"gpt2-small N={n} aggregate × llama-server's ≥ 1.0", ratio, lambda v: v >= 1.0)
    for model in ("bundled", "gpt2-small"):
        stop = rows.get((model, "app", n), {}).get("stop") or {}
        check(f"{model} N={n} Stop p95 ≤ 0.3 s", stop.get("p95_s"), lambda v: v <= 0.3)
    return out


def stop_round(room: Room, model: str, n: int) -> dict:
    """N learners at once, every STOP_EVERY-th pressing Stop: how long until its stream ends."""
    res, _, _ = room.round(model, n, with_page=False, stop_every=STOP_EVERY)
    stops = [r["stop_s"] for r in res if r.get("stop_s") is not None]
    return {
        "learners": n,
        "pressed": len(stops),
        "stopped": sum(r.get("state") == "stopped" for r in res),
        "p50_s": percentile(stops, 50),
        "p95_s": percentile(stops, 95),
        "max_s": max(stops, default=None),
    }


# ---- the app ---------------------------------------------------------------------------


class StampedList(list):
    """gradio_client's list of a job's outputs, stamping the time each update is appended."""

    def __init__(self, items=()):
        super().__init__(items)
        now = time.time()
        self.times = [now] * len(self)

    def append(self, item):
        self.times.append(time.time())
        super().append(item)


def client_learner(client, kwargs: dict, barrier, timeout: float) -> dict:
    """One learner's /generate through gradio_client, started at the barrier."""
    try:
        barrier.wait(timeout=timeout)
        start = time.time()
        job = client.submit(**kwargs, api_name="/generate")
        with job.communicator.lock:
            stamped = StampedList(job.communicator.job.outputs)
            job.communicator.job.outputs = stamped
        deadline = start + timeout
        while not job.done() and time.time() < deadline:
            time.sleep(0.05)
        if not job.done():
            job.cancel()
            return {"error": f"not done within {timeout:.0f} s", "start": start}
        job.result(timeout=10)
        with job.communicator.lock:
            pairs = list(zip(stamped.times, list(stamped)))
        return learner_result(pairs, start)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def learner_result(stamped: list[tuple[float, object]], start: float) -> dict:
    """A learner's figures from its stamped updates, with when it ended, or why it has no end."""
    # updates: the streamed messages the learner received (the Generate handler paces them by the room's size)
    out = {"start": start, **timings(stamped, start), "updates": len(stamped)}
    if out["completion_s"] is not None:
        out["end"] = start + out["completion_s"]
    else:
        out["error"] = f"no final update (state {out['state']})"
    return out


def sse_learner(client, endpoint, data: list, barrier, timeout: float, stop=None) -> dict:
    """One learner's /generate as a bare HTTP stream on its gradio_client session (room_sse.py).
    ``stop`` = (Stop's endpoint, seconds): the learner presses Stop that long after its first token;
    ``stop_s`` is then the time from pressing it to the stream's last update."""
    timer: threading.Timer | None = None
    pressed_at: list[float] = []  # set by the timer's thread when it presses

    def press():
        pressed_at.append(time.time())
        call(stop[0], client.session_hash, stop[0].data({}, []))

    def on_update(t, outputs):
        nonlocal timer
        if stop is not None and timer is None and (parse_status(outputs)[1] or 0) > 0:
            timer = threading.Timer(stop[1], press)
            timer.start()

    try:
        start, stamped = stream_generate(endpoint, client.session_hash, data, barrier, timeout, on_update)
        out = learner_result(stamped, start)
        if pressed_at and stamped:
            out["stop_s"] = stamped[-1][0] - pressed_at[0]
        return out
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def _page_bench(run_timeout: float, log):
    from .browser.generate_runs import Bench

    class RoomPage(Bench):
        """The Generate tab as a learner leaves it (only max new tokens set), clicked at the barrier."""

        barrier = None

        def set_inputs(self, page, prompt, max_new):
            box = page.locator("#pg-max-new input[type=number]")
            box.fill(str(max_new))
            box.press("Enter")
            box.press("Tab")
            page.wait_for_timeout(200)
            if self.barrier is not None:
                self.barrier.wait(timeout=self.run_timeout)
            self.t_click = time.time()

    return RoomPage(run_timeout=run_timeout, log=log)


def page_learner(bench, model: str, barrier, log) -> dict:
    """The Chromium page's run (main thread: Playwright's sync API stays on its thread)."""
    from .browser.cases import RunResult

    r = RunResult(model=model, prompt="default", max_new=MAX_NEW)
    context = None
    try:
        context, page, _cdp, net, errors = bench.open_page(model)
        bench.barrier = barrier
        bench._generate_in(page, net, errors, "", MAX_NEW, r, view_switch=False)
        start = bench.t_click
    except Exception as e:
        return {"error": f"page: {type(e).__name__}: {e}"[:300]}
    finally:
        bench.barrier = None
        if context is not None:
            context.close()
    done = r.done_s if r.done_s is not None else r.browser_s
    out = {"first_chip_s": r.first_chip_s, "done_s": done, "tokens": r.status_tokens or r.chips_at_end}
    if done is not None:
        out.update(start=start, end=start + done)
    if r.error or r.timed_out_s:
        out["error"] = f"page: {r.error or f'timed out after {r.timed_out_s:.0f} s'}"
    return out


class Room:
    """The app (and Chromium) for the whole benchmark, the sessions of each model."""

    def __init__(self, run_timeout: float, log=print, client: str = "http", with_page: bool = True):
        self.log, self.run_timeout = log, run_timeout
        self.with_page = with_page  # one Chromium page among the learners of every room
        self.client = client  # "http": room_sse's bare stream; "gradio": gradio_client's submit
        self.endpoint = self.stop_endpoint = None
        self.bench = _page_bench(run_timeout, log)
        self.sessions: dict[str, list] = {}
        self.params = None

    @property
    def pid(self) -> int:
        return self.bench.app.proc.pid

    def close(self):
        self.bench.close()

    def clients(self, model: str, n: int) -> list:
        """``n`` gradio_client sessions with ``model`` built in each (made once, reused across rounds)."""
        from .browser.session import session_client
        from .serving import _endpoint_parameters

        have = self.sessions.setdefault(model, [])
        while len(have) < n:
            have.append(session_client(self.bench.url, model))
        if self.params is None:
            self.params = _endpoint_parameters(have[0], "/generate")
            self.endpoint = Endpoint(have[0], "/generate")
            self.stop_endpoint = Endpoint(have[0], "/stop")
        return have[:n]

    def kwargs(self, i: int) -> dict:
        from .serving import _call_kwargs

        return _call_kwargs(self.params, {"max_new_tokens": MAX_NEW, "seed": SEED + i})

    def round(
        self, model: str, n_clients: int, with_page: bool, stop_every: int = 0
    ) -> tuple[list[dict], dict | None, dict]:
        """Every learner at once -> (client learners, page learner, server CPU and load); with
        ``stop_every`` k, every k-th learner presses Stop STOP_AFTER_S after its first token."""
        clients = self.clients(model, n_clients)
        parties = n_clients + (1 if with_page else 0)
        mark = {}

        def started():  # every learner is at the barrier: the round's CPU and load are counted from here
            mark.update(
                cpu=_cpu(self.pid), load=os.getloadavg()[0], t=time.time(), mine=time.process_time(), busy=_busy()
            )

        barrier = threading.Barrier(parties, action=started)
        results: list[dict] = [{"error": "never finished"}] * n_clients
        # learner 0 is the page when there is one, so the clients are learners 1..N-1
        offset = 1 if with_page else 0

        def run(i):
            kwargs = self.kwargs(i + offset)
            if self.client == "gradio":
                results[i] = client_learner(clients[i], kwargs, barrier, self.run_timeout)
            else:
                data = self.endpoint.data(kwargs, self.params)
                stop = (self.stop_endpoint, STOP_AFTER_S) if stop_every and i % stop_every == 0 else None
                results[i] = sse_learner(clients[i], self.endpoint, data, barrier, self.run_timeout, stop)

        t0 = time.time()
        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n_clients)]
        for t in threads:
            t.start()
        page = page_learner(self.bench, model, barrier, self.log) if with_page else None
        for t in threads:
            t.join(max(1.0, self.run_timeout + 30 - (time.time() - t0)))
        cpu = {"server_cores": None, "loadavg": [None, os.getloadavg()[0]]}
        if mark:
            wall = time.time() - mark["t"]
            if wall > 0:
                cpu["server_cores"] = (_cpu(self.pid) - mark["cpu"]) / wall
                # where the rest of the machine went: this process's learners, and everything (the page's
                # Chromium, the system) -- on one machine they take cores a classroom's laptops would not
                cpu["client_cores"] = (time.process_time() - mark["mine"]) / wall
                cpu["machine_cores"] = (_busy() - mark["busy"]) / wall
            cpu["loadavg"][0] = mark["load"]
        self.bench.wait_server_idle(limit_s=60)
        return results, page, cpu


def _busy() -> float:
    """CPU seconds the whole machine has spent on anything but idling, since boot."""
    import psutil

    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def _cpu(pid: int) -> float:
    """CPU seconds of a process and its children."""
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
        return t.user + t.system + t.children_user + t.children_system
    except psutil.Error:
        return 0.0


def measure_app(room: Room, model: str, sizes, log=print) -> list[dict]:
    rows = []
    log(f"  {model}: building {max(sizes)} sessions ...")
    room.clients(model, max(max(sizes) - 1, 1))
    room.round(model, 1, with_page=False)  # first run: caches, kernels
    alone = []
    for rep in range(ALONE_REPS):
        res, _, cpu = room.round(model, 1, with_page=False)
        alone.append({**res[0], **cpu})
        log(f"    alone {rep + 1}/{ALONE_REPS}: {_s(res[0].get('completion_s'))} s")
    one = one_learner(alone)
    log(f"    one learner: {_s(one.get('completion_s'))} s, {_s(one.get('tok_s'))} tok/s; the page alone ...")
    _, page, _ = room.round(model, 0, with_page=True)
    row = {"model": model, "server": "app", "n": 1, **summarize(alone, one), "page": page}
    row.update(alone_row(alone, one))
    row["server_cores"] = statistics.median(a["server_cores"] for a in alone if a.get("server_cores") is not None)
    row["loadavg"] = [alone[0]["loadavg"][0], alone[-1]["loadavg"][1]]
    row["one_learner"], row["alone_rounds"] = one, alone
    rows.append(row)
    for n in sizes:
        if n == 1:
            continue
        page_note = " + 1 Chromium page" if room.with_page else " (no page)"
        log(f"    N={n}: {n - 1} {room.client} learners{page_note} ...", end="", flush=True)
        res, page, cpu = room.round(model, n - 1, with_page=room.with_page)
        row = {
            "model": model,
            "server": "app",
            "n": n,
            **summarize(res + ([page] if page else []), one),
            "page": page,
            **cpu,
        }
        row["learner_results"] = res
        rows.append(row)
        log(
            f" p95 first {_s(row['first_p95_s'])} s, completion {_s(row['completion_p95_s'])} s, "
            f"{_s(row.get('aggregate_tok_s'))} tok/s, {_s(row.get('updates_p50'))} updates a learner (median)"
        )
    n = max(sizes)
    if room.client == "http" and n >= STOP_EVERY:
        log(f"    N={n}, every {STOP_EVERY}th learner pressing Stop ...", end="", flush=True)
        rows[-1]["stop"] = stop = stop_round(room, model, n)
        log(f" {stop['pressed']} pressed, {stop['stopped']} stopped, p95 {_s(stop['p95_s'])} s")
    return rows


def measure_llama(
    model: str, sizes, binary, prompt_ids, ctx: int, timeout: float, log=print, extra_args=()
) -> list[dict]:
    """The same rounds on llama-server: a server per N (``-np N``), warmed up, then one round."""
    rows = []
    logs = room_llama.CACHE / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    path = room_llama.gguf(model)
    one = None
    for n in sorted(set(sizes) | {1}):
        log(f"    llama-server {model} -np {n} ...", end="", flush=True)
        try:
            server = room_llama.Server(
                binary, path, n, ctx, log_path=logs / f"{model}-np{n}.log", extra_args=extra_args
            )
        except (RuntimeError, TimeoutError) as e:
            log(f" {e}")
            rows.append({"model": model, "server": "llama-server", "n": n, "errors": [str(e)]})
            continue
        try:
            # warm-up: one full request alone (a fresh server's first one ran at 1/30 the speed of its
            # next in one test), then every slot once (its batch shapes)
            room_llama.run_round(server.port, prompt_ids, 1, MAX_NEW, timeout)
            room_llama.run_round(server.port, prompt_ids, n, 8, timeout)
            reps = ALONE_REPS if n == 1 else 1
            learners, cpu_s, walls, loads = [], 0.0, 0.0, [os.getloadavg()[0]]
            mine = busy = 0.0
            for _ in range(reps):
                c0, t0, m0, b0 = _cpu(server.proc.pid), time.time(), time.process_time(), _busy()
                got = room_llama.run_round(server.port, prompt_ids, n, MAX_NEW, timeout)
                cpu_s += _cpu(server.proc.pid) - c0
                mine += time.process_time() - m0
                busy += _busy() - b0
                walls += time.time() - t0
                for x in got:
                    if "first" in x and x["first"] is not None:
                        x["first_s"] = x["first"] - x["start"]
                    if "end" in x:
                        x["completion_s"] = x["end"] - x["start"]
                learners.append(got)
            loads.append(os.getloadavg()[0])
        finally:
            server.close()
        if n == 1:
            alone = [g[0] for g in learners]
            one = one_learner(alone)
            row = {**summarize(alone, one), **alone_row(alone, one), "one_learner": one}
        else:
            row = summarize(learners[0], one)
        row.update(model=model, server="llama-server", n=n, server_cores=cpu_s / walls, loadavg=loads)
        row.update(client_cores=mine / walls, machine_cores=busy / walls)
        row["command"] = server.cmd
        rows.append(row)
        log(
            f" p95 first {_s(row['first_p95_s'])} s, completion {_s(row['completion_p95_s'])} s, "
            f"{_s(row.get('aggregate_tok_s'))} tok/s"
        )
    return rows


def prompt_ids(room: Room) -> list[int]:
    """The default prompt's tokens, as the app tokenizes it (the peer gets the same ids)."""
    from playground.engine.tokenizer import load_tokenizer

    prompt = next(p.get("parameter_default") for p in room.params if p.get("parameter_name") == "prompt")
    return load_tokenizer().encode(prompt)


def context_length(model: str) -> int:
    from playground.engine.config import PRESETS
    from playground.server.recipes import BUNDLED_CHECKPOINT

    if model == "bundled":
        import json

        return json.loads((BUNDLED_CHECKPOINT.parent / "config.json").read_text())["n_positions"]
    return PRESETS["gpt2-small"].context_length


def run(
    models=MODELS,
    sizes=SIZES,
    llama: bool = True,
    run_timeout: float = 900.0,
    log=print,
    checkpoint=None,
    llama_args=(),
    client: str = "http",
    with_page: bool = True,
) -> dict:
    from . import report

    sizes = sorted(set(sizes) | {1})
    result = {
        "date": report.now(),
        "machine": report.machine(),
        "config": {
            "models": list(models),
            "sizes": sizes,
            "max_new_tokens": MAX_NEW,
            "alone_reps": ALONE_REPS,
            "client": client,
            "page": with_page,
        },
        "loadavg_start": os.getloadavg(),
        "rows": [],
        "skipped": {},
    }
    room = Room(run_timeout, log, client, with_page)
    try:
        for model in models:
            try:
                result["rows"] += measure_app(room, model, sizes, log)
            except Exception as e:
                result["skipped"][f"{model} (app)"] = f"{type(e).__name__}: {e}"[:300]
                log(f"  {model}: {result['skipped'][f'{model} (app)']}")
            if checkpoint:
                checkpoint(result)
        ids = prompt_ids(room) if room.params else None
    finally:
        room.close()
    result["prompt_ids"] = ids
    if llama and ids:
        binary = room_llama.find_binary()
        note = None
        if binary is None:
            log(f"  llama-server: not found, building it under {room_llama.CACHE} (about 20 min on 2 cores) ...")
            binary, note = room_llama.build(log=log)
        if binary is None:
            result["skipped"]["llama-server"] = note
        else:
            result["llama_server"] = {"binary": str(binary), "note": note, "extra_args": list(llama_args)}
            for model in models:
                try:
                    result["rows"] += measure_llama(
                        model, sizes, binary, ids, context_length(model), run_timeout, log, llama_args
                    )
                except Exception as e:
                    result["skipped"][f"{model} (llama-server)"] = f"{type(e).__name__}: {e}"[:300]
                if checkpoint:
                    checkpoint(result)
    elif llama:
        result["skipped"]["llama-server"] = "no prompt: the app's rounds did not run"
    result["loadavg_end"] = os.getloadavg()
    return result
