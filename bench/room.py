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

The learners are bench/room_learners.py's; the figures, the table and the targets, bench/room_figures.py's.
"""

from __future__ import annotations

import os
import statistics
import threading
import time

from . import room_llama
from .room_figures import MAX_NEW, _s, alone_row, one_learner, percentile, summarize
from .room_learners import _page_bench, client_learner, learners_at_once, page_learner, sse_learner
from .room_sse import Endpoint

MODELS = ("bundled", "gpt2-small")
SIZES = (1, 8, 30)
ALONE_REPS = 3
SEED = 42
# In the Stop round every 2nd learner presses Stop 0.3 s after its first token: 15 presses in a room of 30, so
# the p95 is not simply the slowest press
STOP_EVERY, STOP_AFTER_S = 2, 0.3


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


class Room:
    """The app (and Chromium) for the whole benchmark, the sessions of each model."""

    def __init__(self, run_timeout: float, log=print, client: str = "http", with_page: bool = True):
        self.log, self.run_timeout = log, run_timeout
        self.with_page = with_page  # one Chromium page among the learners of every room
        self.client = client  # "http": room_sse's bare stream; "gradio": gradio_client's submit
        self.endpoint = self.stop_endpoint = None
        self.stop_data: list = []
        self.bench = _page_bench(run_timeout, log)
        self.sessions: dict[str, list] = {}
        self.params = None

    @property
    def pid(self) -> int:
        return self.bench.app.proc.pid

    def close(self):
        self.bench.close()

    def one_learner(self, model: str, n: int) -> dict:
        """The sessions of a room of ``n`` made, two first runs (caches, kernels), then one learner's rounds
        alone: their reference (``room_figures.one_learner``), for the tools that time one room."""
        self.clients(model, n)
        for _ in range(2):
            self.round(model, 1, with_page=False)
        return one_learner([self.round(model, 1, with_page=False)[0][0] for _ in range(ALONE_REPS)])

    def clients(self, model: str, n: int) -> list:
        """``n`` gradio_client sessions with ``model`` built in each (made once, reused across rounds)."""
        from .browser.session import session_client
        from .serving import _call_kwargs, _endpoint_parameters

        have = self.sessions.setdefault(model, [])
        while len(have) < n:
            have.append(session_client(self.bench.url, model))
        if self.params is None:
            self.params = _endpoint_parameters(have[0], "/generate")
            self.endpoint = Endpoint(have[0], "/generate")
            self.stop_endpoint = Endpoint(have[0], "/stop")
            stop_params = _endpoint_parameters(have[0], "/stop")
            self.stop_data = self.stop_endpoint.data(_call_kwargs(stop_params, {}), stop_params)
        return have[:n]

    def kwargs(self, i: int) -> dict:
        from .serving import _call_kwargs

        return _call_kwargs(self.params, {"max_new_tokens": MAX_NEW, "seed": SEED + i})

    def round(
        self, model: str, n_clients: int, with_page: bool, stop_every: int = 0, spread_s: float = 0.0
    ) -> tuple[list[dict], dict | None, dict]:
        """Every learner at once -> (client learners, page learner, server CPU and load); with
        ``stop_every`` k, every k-th learner presses Stop STOP_AFTER_S after its first token; with ``spread_s``
        the client learners ask one after another, evenly over that many seconds (``bench.room_spread``)."""
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
            at = spread_s * i / max(1, n_clients - 1)
            gate = Staggered(barrier, at) if at > 0 else barrier
            if self.client == "gradio":
                results[i] = client_learner(clients[i], kwargs, gate, self.run_timeout)
            else:
                data = self.endpoint.data(kwargs, self.params)
                stop = (
                    (self.stop_endpoint, STOP_AFTER_S, self.stop_data) if stop_every and i % stop_every == 0 else None
                )
                results[i] = sse_learner(clients[i], self.endpoint, data, gate, self.run_timeout, stop)

        during = (lambda: page_learner(self.bench, model, barrier, self.log)) if with_page else None
        page = learners_at_once(run, n_clients, self.run_timeout + 30, during)
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


class Staggered:
    """A learner's barrier that lets it go ``after_s`` seconds after the room's barrier does."""

    def __init__(self, barrier: threading.Barrier, after_s: float):
        self.barrier, self.after_s = barrier, after_s

    def wait(self, timeout: float | None = None) -> int:
        got = self.barrier.wait(timeout)
        time.sleep(self.after_s)
        return got


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
    page_seat = 1 if room.with_page else 0  # the Chromium page is one of a room's N learners
    room.clients(model, max(max(sizes) - page_seat, 1))
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
        log(f"    N={n}: {n - page_seat} {room.client} learners{page_note} ...", end="", flush=True)
        # warm-up: the same room once, not measured (llama-server's rooms get a warm-up of every slot too)
        room.round(model, n - page_seat, with_page=False)
        res, page, cpu = room.round(model, n - page_seat, with_page=room.with_page)
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
        log(f"    N={n}, one learner in {STOP_EVERY} pressing Stop ...", end="", flush=True)
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
    from playground.engine.presets import PRESETS
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
