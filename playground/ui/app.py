"""The page: a header, then one tab per module, composed into the app (``build_demo``).

Every event has an ``api_name`` or is marked private. A tab's layout module exposes ``layout()`` (the
components, built inside its ``gr.Tab``) and ``wire(page)`` (its events); ``page`` holds every tab's
components, so a tab can update another (a new model resets the Generate tab's views). ``prefs`` is
wired last: it runs the language redraws the tabs registered.
"""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import gradio as gr

from playground.server import files, room_wait
from playground.server.decode_loop import MAX_CONCURRENT_RUNS
from playground.server.model_cache import CACHE
from playground.server.recipes import MAX_UPLOAD_BYTES, default_recipe

from . import event_overhead, page_cache, prefs, progress, session_configs, show_me, skipped_outputs
from .common import I18N, T, new_state
from .compare import layout as compare_layout
from .compare.views import CSS as COMPARE_CSS
from .generate import layout as generate_layout
from .generate import tab as generate_tab
from .inside import cell_click
from .inside import layout as inside_layout
from .inside import picks as inside_picks
from .lessons import layout as lessons_layout
from .lessons import room_layout
from .model import layout as model_layout
from .model import tab as model_tab
from .style import CSS, RESIZE_JS
from .tokenizer import tab as tokenizer_tab
from .train import layout as train_layout
from .train import tab as train_tab
from .train.heads_view import CSS as TRAIN_HEADS_CSS
from .train.samples_view import CSS as TRAIN_SAMPLES_CSS


def end_session(state) -> None:
    """The session's state is being deleted: its model lease ends (the model becomes idle)."""
    if isinstance(state, dict) and state.get("session"):
        CACHE.end_lease(state["session"])


# Gradio's queue rebuilds its monitoring summary (a pandas table of up to 10,000 past events, grouped, with
# percentiles) at the end of every event unless told otherwise, holding the interpreter lock meanwhile: in a
# room that is hundreds of rebuilds a minute taken from the decode loop. The dashboard needs far fewer.
os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "500")


def build_demo() -> gr.Blocks:
    files.protect(CACHE.checkpoints_in_use)
    default_model = CACHE.get(default_recipe())  # warm: the first page load is instant
    with gr.Blocks(title="GPT Playground") as demo:
        # The default state every session starts from has no session id: each draws its own (state.session_id).
        default_state = {**new_state(), "session": None}
        # A session Gradio forgets (its page gone, or the oldest past the server's session capacity)
        # ends its lease at once: its record and its hold on a model go together.
        page = SimpleNamespace(
            demo=demo,
            state=gr.State(default_state, delete_callback=end_session),
            train_state=gr.State(train_tab.new_train_state()),
        )
        page.header = prefs.header()
        page.summary = gr.Markdown(elem_id="pg-summary")
        page.room_bar = room_layout.bar()  # a classroom room's status and Follow, seen from every tab
        with gr.Tabs(elem_id="pg-tabs") as page.tabs:
            with gr.Tab(T("tab_lessons"), id="lessons") as page.lessons_tab:
                page.lessons = lessons_layout.layout()
                vars(page.lessons).update(vars(page.room_bar))  # (the room's handlers find them with its controls)
            with gr.Tab(T("tab_model"), id="model") as page.model_tab:
                page.model = model_layout.layout()
            with gr.Tab(T("tab_generate"), id="generate") as page.generate_tab:
                page.generate = generate_layout.layout(default_model.cfg)
            with gr.Tab(T("tab_inside"), id="inside") as page.inside_tab:
                page.inside = inside_layout.layout()
            with gr.Tab(T("tab_train"), id="train") as page.train_tab:
                page.train = train_layout.layout()
            with gr.Tab(T("tab_compare"), id="compare") as page.compare_tab:
                page.compare = compare_layout.layout()
            with gr.Tab(T("tab_tokenizer"), id="tokenizer") as page.tokenizer_tab:
                page.tokenizer = tokenizer_tab.layout()
        for tab in (
            model_layout,
            generate_layout,
            inside_layout,
            inside_picks,
            train_layout,
            compare_layout,
            tokenizer_tab,
        ):
            tab.wire(page)
        lessons_layout.wire(page)  # after the Generate tab's: it reads that tab's prompt
        show_me.wire(page)
        prefs.wire(page)  # last: it chains the redraws the tabs registered
        page.lessons_tab.select(None, None, None, js=RESIZE_JS)
        for tab in (page.model_tab, page.generate_tab, page.inside_tab, page.train_tab, page.compare_tab):
            tab.select(None, None, None, js=RESIZE_JS)
        progress.route(demo, progress.sink())
    # max_size: events waiting for a worker, every session's together. A room of 30+ learners opening
    # the page and pressing Generate at once queues a few events each (the page's loads, Generate and
    # the events chained after it), so the queue holds several per possible Generate worker.
    demo.queue(default_concurrency_limit=2, max_size=QUEUE_SIZE)
    skipped_outputs.install(demo)  # (a room's poll skips nearly all of its hundred outputs)
    event_overhead.install(demo)
    session_configs.install(demo)  # (each page opening made all ~500 blocks' configs at once)
    return demo


QUEUE_SIZE = 4 * MAX_CONCURRENT_RUNS
# Gradio runs every synchronous handler in one thread pool (40 threads unless told): each Generate
# worker holds a thread while it waits on its stream, so the pool has room for all of them besides
# the 40 that every other event (Stop included) shares.
MAX_THREADS = 40 + MAX_CONCURRENT_RUNS


def launch_kwargs() -> dict:
    # Uploads larger than the checkpoint limit are refused by the server before they are stored.
    return {
        "max_threads": MAX_THREADS,
        # a room's followers wait for its next move here, outside the queue (server.room_wait); the page and
        # Gradio's built files are answered from memory after their first request (page_cache)
        "app_kwargs": {"routes": [room_wait.ROUTE, *page_cache.routes()]},
        "i18n": I18N,
        "css": CSS + COMPARE_CSS + cell_click.CSS + lessons_layout.CSS + TRAIN_SAMPLES_CSS + TRAIN_HEADS_CSS,
        "js": cell_click.with_page_js(prefs.PAGE_JS, cell_click.PAGE_JS, lessons_layout.PAGE_JS, room_layout.WATCH_JS),
        "head": prefs.HEAD,
        "footer_links": ["api", "settings"],
        "theme": gr.themes.Soft(),
        "max_file_size": MAX_UPLOAD_BYTES,
        # Gradio keeps a record of every session (its state, the configs it has updated: see session_configs),
        # the least recently used forgotten past this many: the records' memory is bounded.
        "state_session_capacity": max_sessions(),
    }


def max_sessions() -> int:
    """Sessions whose records the server keeps (``PLAYGROUND_MAX_SESSIONS``, default 500)."""
    try:
        return max(10, int(os.environ.get("PLAYGROUND_MAX_SESSIONS", "500")))
    except ValueError:
        return 500


def warm_up() -> float:
    """A two-token run of the default model through the Generate tab's own handlers (the run, its
    attention figures and its step view), at start-up: the process's first forward pass, sampling
    receipt and plotly figures cost more than later ones, and the first learner's first run would
    otherwise pay for them. Greedy first: its steps read a compiled summary of the logits row, built
    once per machine. Returns the seconds it took."""
    t0 = time.perf_counter()
    state = model_tab.load_session().state
    for temperature in (0.0, 0.8):
        for update in generate_tab.generate_tokens(state, "ROMEO:\n", temperature, 40, 1.0, 2, 0, False):
            state = update[0]
    generate_tab.after_run(state)
    generate_tab.last_step(state)
    return time.perf_counter() - t0
