"""Debian's headless Chromium, as every browser test launches it (a helper module, not a test module)."""

import collections
import os
import shutil
import time
from pathlib import Path

import pytest

from tools.chromium_args import ARGS
from tools.pagewalk import open_tab  # noqa: F401  (the browser tests import it from here)

CHROMIUM = os.environ.get("PLAYGROUND_CHROMIUM", "/usr/bin/chromium")
# The walks over every tab, size, mode and language save each page they check under tests/artifacts/ for
# a person to look at; PLAYGROUND_TEST_SHOTS=0 leaves those out (.ci/run, where nobody looks at them:
# about 150 pages). A check that fails saves its own either way.
SHOTS = os.environ.get("PLAYGROUND_TEST_SHOTS", "1") != "0"


def chromium_or_skip():
    if Path(CHROMIUM).exists() or shutil.which("chromium"):
        return
    if os.environ.get("CI"):
        pytest.fail("CI must run the browser test: install Debian's chromium (.ci/run does this)")
    pytest.skip("no chromium on this machine")


def launch(p):
    return p.chromium.launch(executable_path=CHROMIUM, args=ARGS)


def look(page, path, **kwargs) -> None:
    """A screenshot for a person to look at (``SHOTS``), not one a failure is told with."""
    if SHOTS:
        page.screenshot(path=str(path), **kwargs)


# What the Generate tab shows, for a check that timed out to say: its status, its map's message, its chips and
# the positions its map spans.
GENERATE_SHOWN = """() => {
  const text = (id) => document.querySelector(id)?.innerText ?? null;
  const g = document.querySelector('#pg-heatmap .js-plotly-plot');
  const x = g && g._fullData && g._fullData.length ? Array.from(g._fullData[0].x) : null;
  return {status: text('#pg-status'), map_message: text('#pg-att-msg'), previous: document.body.dataset.pgPrevious,
          chips: document.querySelectorAll('#pg-chips .pg-chip').length, map_x: x && [x[0], x.at(-1)],
          map_title: g?.layout?.title?.text ?? null};
}"""


def wait_on_generate(page, js: str, name: str, timeout: float = 60_000) -> None:
    """``page.wait_for_function(js)`` on the Generate tab; on a timeout the failure says what the tab showed,
    what held the server's memory budget (the tests' app runs in this process) and saves a screenshot."""
    from playwright.sync_api import TimeoutError as Timeout

    from playground.runtime.memory import BUDGET
    from tests.helpers import ARTIFACTS

    try:
        page.wait_for_function(js, timeout=timeout)
    except Timeout:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}-failed.png"))
        shown = page.evaluate(GENERATE_SHOWN)
        pytest.fail(
            f"{name}: not seen in {timeout / 1000:.0f} s; the page showed {shown}; memory: {BUDGET.describe()}"
        )  # (and conftest's report adds Gradio's queue and the server's threads)


def queue_state() -> str:
    """Every Gradio queue in this process (the tests' app): per concurrency group, events waiting and running."""
    import gc

    from gradio.queueing import Queue

    groups = []
    for q in (o for o in gc.get_objects() if type(o) is Queue):  # (isinstance reads deprecated proxies)
        for cid, eq in q.event_queue_per_concurrency_id.items():
            names = sorted({getattr(fn.fn, "__name__", "?") for fn in eq.start_times_per_fn if fn.fn})
            if eq.queue or eq.current_concurrency:
                groups.append(f"{cid} {names}: {len(eq.queue)} waiting, {eq.current_concurrency} running")
    return "; ".join(groups) or "nothing waiting or running"


_EVENTS: collections.deque = collections.deque(maxlen=60)  # (start, end, session, function) of the app's events


def record_events() -> None:
    """From now on, every event the app in this process runs is recorded (its function, page and times) for
    ``recent_events``: a failure that a late event drew over shows which one did."""
    from gradio.blocks import Blocks

    if getattr(Blocks.process_api, "recorded", False):
        return
    real = Blocks.process_api

    async def process_api(self, block_fn, *args, **kwargs):
        start = time.monotonic()
        try:
            return await real(self, block_fn, *args, **kwargs)
        finally:
            fn = getattr(block_fn, "fn", None)
            name = getattr(fn, "__name__", None) or ("js" if getattr(block_fn, "js", None) else "?")
            _EVENTS.append((start, time.monotonic(), str(kwargs.get("session_hash") or "")[:6], name))

    process_api.recorded = True  # type: ignore[attr-defined]
    Blocks.process_api = process_api  # type: ignore[method-assign]


def recent_events() -> str:
    """The app's last events, oldest first: seconds before now as each started and ended, page, function."""
    now = time.monotonic()
    rows = [f"  -{now - s:7.2f} -{now - e:7.2f} {page:6} {name}" for s, e, page, name in list(_EVENTS)]
    return "\n".join(rows) or "  none recorded"


def server_stacks(depth: int = 8) -> str:
    """The innermost frames of every thread in this process that is in the project's or Gradio's code."""
    import sys
    import threading
    import traceback

    frames, out = sys._current_frames(), []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident)
        if frame is None or thread is threading.current_thread():
            continue
        stack = traceback.extract_stack(frame)
        if not any("playground" in f.filename or "gradio" in f.filename for f in stack):
            continue
        lines = [f"  {Path(f.filename).name}:{f.lineno} {f.name}" for f in stack[-depth:]]
        out.append(f"{thread.name}:\n" + "\n".join(lines))
    return "\n".join(out) or "none"


def set_number(page, elem_id, value):
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def goto(page, url: str) -> None:
    """``page.goto(url)``, once more if Chromium aborted it (net::ERR_ABORTED): seen once in ~35 links
    opened one after another in one tab on a loaded CI run, the page at that address drawn fine on
    every other run; what aborted it is not known."""
    from playwright.sync_api import Error

    try:
        page.goto(url)
    except Error as e:
        if "ERR_ABORTED" not in str(e):
            raise
        page.goto(url)


# Holds the next request that joins Gradio's queue for 1.5 s (window.pgJoined counts it once sent on): a busy
# machine's page, whose Stop reaches the server before the event it stops has joined the queue.
SLOW_JOIN = """() => {
  const send = window.fetch.bind(window);
  window.pgJoined = 0;
  let held = false;
  window.fetch = (url, init) => {
    if (held || !String(url).includes('/queue/join')) return send(url, init);
    held = true;
    return new Promise((r) => setTimeout(r, 1500)).then(() => { window.pgJoined += 1; return send(url, init); });
  };
}"""
