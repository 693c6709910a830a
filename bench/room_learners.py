"""One learner of the room benchmark (bench/room.py): a gradio_client session, a bare HTTP stream, the page.

The bare HTTP stream runs on a gradio_client session (room_sse.py); the page is the Generate tab in Chromium.
Each learner returns its figures (room_figures.timings) with when it started and ended, or why it has none.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time

from .room_figures import MAX_NEW, parse_status, timings
from .room_sse import call, stream_generate


@contextlib.contextmanager
def collector_held():
    """This process's cyclic collector held off for a round. The learners are threads of one process
    whose gradio_client sessions hold some 400,000 objects: a full collection stops every learner for
    0.1-0.2 s, which the round would then time as the server's. What the round makes is collected after."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def learners_at_once(learn, n: int, join_s: float, during=None):
    """``learn(i)`` for learners 0..n-1, each in a thread of its own, all started at once and joined (each
    for at most ``join_s`` from the start of its join), with this process's collector held for the round;
    ``during()`` (one more learner in this thread, a page) runs between the starts and the joins. Returns
    its result."""
    threads = [threading.Thread(target=learn, args=(i,), daemon=True) for i in range(n)]
    t0 = time.time()
    with collector_held():
        for t in threads:
            t.start()
        result = during() if during is not None else None
        for t in threads:
            t.join(max(1.0, join_s - (time.time() - t0)))
    return result


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
    ``stop`` = (Stop's endpoint, seconds, its data): the learner presses Stop that long after its first token;
    ``stop_s`` is then the time from pressing it to the stream's last update."""
    timer: threading.Timer | None = None
    pressed_at: list[float] = []  # set by the timer's thread when it presses

    def press():
        pressed_at.append(time.time())
        call(stop[0], client.session_hash, stop[2])

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
