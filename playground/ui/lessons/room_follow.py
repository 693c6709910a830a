"""Following the teacher beyond the lesson: the tab, the prompt, the Generate run and its attention view.

The teacher's page publishes: the tab it opens, the prompt it types (the last one of a burst), and after
each run or change of the attention view the run as that page shows it: its chips, its status line and
its heatmap, drawn on the server from the teacher's run once in each language (``ROOMS.publish_run``; a
follower's page shows the one in its own language). A run is published by the server as it ends
(``publish_ended``, with the view the page last asked for), before the teacher's page has heard; the page's
own publication after it finds it there and sends nothing, or corrects the view. A following
student's page takes them from the room on its next poll (``follow_published``): the tab opens, the
prompt box shows the teacher's prompt, the chips, status and heatmap are the teacher's (sent as they
are: no follower's page runs the model for them) and the view's controls show the teacher's choices.
While it shows the teacher's run (the Generate tab's ``room_shown``), a change of the page's language
shows its map and status in the new one, as the room holds them (``redrawn_run``), and the Generate tab
draws nothing of the page's own over them. A student who opens another tab, types in the prompt, presses Generate or changes the view has stepped
away: their page stops following until they press Follow.
"""

from __future__ import annotations

import contextvars
import logging
import threading

import gradio as gr
from gradio.components.plot import PlotData
from gradio.context import LocalContext

from playground.server.decode_loop import LOOP
from playground.server.rooms import ROOMS, RoomError
from playground.ui import listeners, redraw
from playground.ui.attention_view import SPANS, VIEWS, attention_views
from playground.ui.chips import all_chips, status_html
from playground.ui.common import client_address, fail, lang_of, session_model, session_run, tr
from playground.ui.kept import Kept
from playground.ui.results import result

from . import room_lead

log = logging.getLogger(__name__)

TABS = ("lessons", "model", "generate", "inside", "train", "compare", "tokenizer")
VIEW_CONTROLS = ("view", "layer", "head", "query", "span", "log_scale")
# What a follower's poll may change beyond the lesson: the tab, the prompt, the run and its view.
Followed = result(
    "Followed", "tabs", "prompt", "chips", "status", "heatmap", "query_plot", "room_shown", *VIEW_CONTROLS
)
Away = result("Away", "room", "room_status", "room_follow")


def stepped_away(room: dict) -> dict:
    """The page's room record once its own move took it out of step, said to the room too: a poll that
    answers after the move (drawn while the page followed) cannot put it back in step."""
    try:
        moves = ROOMS.set_following(room["code"], room["member"], False, client_address())
    except RoomError:  # (the room ended or forgot the page: its next poll says so)
        moves = room.get("moves")
    return {**room, "follow": False, "moves": moves}


def _away(state, room) -> Away:
    """A following student's page after a move of its own: it stops following (Follow brings it back)."""
    if room.get("member") and room.get("follow"):
        return Away(stepped_away(room), tr(lang_of(state), "room_away", code=room["code"]), gr.update(visible=True))
    return Away(gr.skip(), gr.skip(), gr.skip())


def _publish(state, room, fields: dict) -> Away:
    try:
        ROOMS.publish(room["code"], room["key"], fields, client_address(), recipe=(state or {}).get("recipe"))
    except RoomError as e:
        return Away(gr.skip(), fail(e, lang_of(state)), gr.skip())
    return Away(gr.skip(), gr.skip(), gr.skip())


def tab_opened(tab: str):
    """The handler of one tab's select: the teacher's page publishes the tab; a student's page that
    opens another tab than the one it followed to has stepped away."""

    def opened(state, room) -> Away:
        room = room or {}
        if room.get("key"):
            return _publish(state, room, {"tab": tab})
        if room.get("tab") == tab:  # (the poll opened it: following, not a move of the student's)
            return Away(gr.skip(), gr.skip(), gr.skip())
        return _away(state, room)

    opened.__name__ = f"room_tab_{tab}"
    return opened


def prompt_typed(state, room, prompt) -> Away:
    """The teacher's typing publishes the prompt; a student's typing steps away."""
    room = room or {}
    if room.get("key"):
        return _publish(state, room, {"prompt": str(prompt or "")[:20_000]})
    return _away(state, room)


def prompt_left(state, room, prompt) -> Away:
    """The teacher's page leaves the prompt box: its prompt published (a student's page: nothing)."""
    room = room or {}
    if room.get("key"):
        return _publish(state, room, {"prompt": str(prompt or "")[:20_000]})
    return Away(gr.skip(), gr.skip(), gr.skip())


def model_built(state, room) -> Away:
    """After the Model tab built a model: the teacher's page publishes it (its followers take it); a
    student's page built it in the Model tab, which it opened on its own: away already."""
    room = room or {}
    if room.get("key"):
        return _publish(state, room, {})
    return Away(gr.skip(), gr.skip(), gr.skip())


def moved_by_hand(state, room) -> tuple:
    """A student's own Generate or view change: stepped away (the teacher's page publishes after it), and
    the page no longer shows the room's run (the Generate tab's ``room_shown``)."""
    return (*_away(state, room or {}), None)


def redrawn_run(state, room, shown=None) -> tuple:
    """After the page's language changed: a student's page that shows the teacher's run (``shown``, the
    Generate tab's ``room_shown``: followed to it, and not drawn over by the page's own Generate or view
    change since, even if it stepped away elsewhere) shows its heatmap and status in its new language, as
    the room holds them (nothing is drawn again)."""
    room = room or {}
    skipped = (gr.skip(), gr.skip())
    if not (room.get("member") and shown):
        return skipped
    try:
        published = ROOMS.state(room["code"], client=client_address()).get("state") or {}
    except Exception:  # (an ended room: its next poll says so)
        return skipped
    run = published.get("run")
    if not isinstance(run, dict) or run.get("version") != shown:
        return skipped  # (a newer run: a following page's next poll sends it)
    lang = lang_of(state)
    figure = (lang == "zh-CN" and run.get("figure_zh")) or run.get("figure")
    status = (lang == "zh-CN" and run.get("status_zh")) or run.get("status") or ""
    return (PlotData(type="plotly", plot=figure) if figure else gr.skip()), status


def view_of(view, layer, head, query, span, log_scale) -> dict:
    return {"view": view, "layer": layer, "head": head, "query": query, "span": span, "log_scale": log_scale}


def publish_run(state, room, prompt, view, layer, head, log_scale, query, span) -> Away:
    """After the teacher's run ended or its attention view changed: the run as the teacher's page shows
    it, published to the room (its heatmap drawn once, here, from the teacher's run)."""
    room = room or {}
    if not room.get("key"):
        return Away(gr.skip(), gr.skip(), gr.skip())
    try:
        published_run(state, room["code"], room["key"], prompt, view, layer, head, log_scale, query, span)
    except Exception as e:
        return Away(gr.skip(), fail(e, lang_of(state)), gr.skip())
    return Away(gr.skip(), gr.skip(), gr.skip())


def publish_new_run(state, room, prompt, view, layer, head, log_scale, span) -> Away:
    """After the teacher's run ended: published as ``after_run`` draws it on the teacher's page (its query at
    the run's last position), in parallel with that page's own figures."""
    return publish_run(state, room, prompt, view, layer, head, log_scale, None, span)


def publish_ended(state) -> None:
    """The Generate run of a page that leads a room has just ended (``listeners.run_ended``): published to the
    room now, from a thread of its own, with the attention view the page last asked for (``redraw``'s record;
    the page's defaults if none), so the followers need not wait for the teacher's page to be told and ask.
    The page's own publication after it (``publish_new_run``) finds the same run and view and sends nothing,
    or corrects the view if the page shows another."""
    led = room_lead.led(state)
    if led is None:
        return
    try:
        view, layer, head, log_scale, _, span = redraw.drawn_inputs(
            LocalContext.request.get(None), "attention", (VIEWS[0], 0, 0, True, None, SPANS[0])
        )
        drawn = (view, layer, head, log_scale, None, span)  # (the query at the run's last position, as after_run)
        context = contextvars.copy_context()  # (the request's client, page and session, as the handler's)
        threading.Thread(
            target=context.run, args=(_publish_ended, state, led, drawn), name="room-run-ended", daemon=True
        ).start()
    except Exception:  # (the teacher's run ends as it would: the page's own publication follows)
        log.exception("publishing a room's run as it ended")


def _publish_ended(state, led: dict, drawn: tuple) -> None:
    try:
        published_run(state, led["code"], led["key"], None, *drawn, whole=True)
    except RoomError:  # (the room ended, or its key is no longer this page's)
        room_lead.leading(state, None)
    except Exception:  # nothing here fails the teacher's run: the page's own publication follows
        log.exception("publishing a room's run as it ended")


# What each room was last published of its teacher's run: (what it was drawn from, the version), by room code;
# and the lock its publications take one at a time (the server's, at the run's end, and the page's, after it).
_PUBLISHED = Kept(2000)
_LOCKS_LOCK = threading.Lock()


def _room_lock(code: str) -> threading.Lock:
    with _LOCKS_LOCK:
        lock = _PUBLISHED.get(code, "lock")
        if lock is None:
            lock = threading.Lock()
            _PUBLISHED.put(code, "lock", lock)
        return lock


def _drawn_from(state, run, view, layer, head, log_scale, query, span) -> str:
    """What a published run's figures are drawn from, as one string (the page's numbers as numbers)."""

    def number(x):
        try:
            return int(float(x))
        except (TypeError, ValueError):
            return None if x is None else str(x)

    present = bool((state or {}).get("present"))
    return repr(
        (str(run.id), str(view), number(layer), number(head), bool(log_scale), number(query), str(span), present)
    )


def published_run(
    state, code, key, prompt, view, layer, head, log_scale, query, span, whole: bool = False
) -> int | None:
    """Publish the session's last run (a finished one) with this view to room ``code``: the new version, or
    None when there is nothing to publish yet (no run, or one still streaming; ``whole``: or one whose map
    could not be drawn). The same run and view published already: its version, and only a new prompt sent."""
    ROOMS.check_teacher(code, key, client_address())  # first: a wrong key costs no figure
    run = session_run(state)
    if run is None or LOOP.running(run.id):
        return None
    drawn_from = _drawn_from(state, run, view, layer, head, log_scale, query, span)
    with _room_lock(code):
        last = _PUBLISHED.get(code, "run")
        if last is not None and last[0] == drawn_from:
            if prompt is not None:  # (only a prompt the room lacks is sent)
                here = ROOMS.state(code, client=client_address()).get("state") or {}
                if str(prompt)[:20_000] != here.get("prompt"):
                    ROOMS.publish(code, key, {"prompt": str(prompt)[:20_000]}, client_address())
            return last[1]
        version = _publish_drawn(state, code, key, run, prompt, view, layer, head, log_scale, query, span, whole)
        if version is not None:
            _PUBLISHED.put(code, "run", (drawn_from, version))
        return version


def _publish_drawn(state, code, key, run, prompt, view, layer, head, log_scale, query, span, whole) -> int | None:
    # drawn in each language (the teacher's run, twice here, once per publication): a follower's page
    # shows the one in its own language, sent as it is
    figures = {}
    for lg in ("en", "zh-CN"):
        drawn = attention_views({**state, "lang": lg}, view, layer, head, log_scale, query, span, bars=False)
        figures[lg] = drawn.heatmap.to_json() if hasattr(drawn.heatmap, "to_json") else None
    if whole and None in figures.values():
        return None
    cfg = session_model(state).cfg
    context = cfg.context_length
    ended = "stopped" if run.stopped else "done"
    status, status_zh = (status_html(run, run.elapsed, ended, lg, context) for lg in ("en", "zh-CN"))
    shown = view_of(view, layer, head, query, span, log_scale)
    query_update = drawn.query if isinstance(drawn.query, dict) else {}
    shown.update(
        query=query_update.get("value", query),
        query_max=query_update.get("maximum"),
        query_min=query_update.get("minimum"),
        layer_max=max(1, cfg.n_layers - 1),  # (the follower's sliders take the teacher's model's ranges)
        head_max=max(1, cfg.n_heads - 1),
    )
    place = {"tab": "generate", "view": shown}
    if prompt is not None:
        place["prompt"] = str(prompt)[:20_000]
    record = {
        "id": str(run.id),
        "chips": all_chips(run),
        "status": status,
        "status_zh": status_zh,
        "figure": figures["en"],
        "figure_zh": figures["zh-CN"],
    }
    # (the place and the run in one version: each follower wakes and asks once)
    return ROOMS.publish_run(code, key, record, client_address(), place=place, recipe=state.get("recipe"))


def follow_published(room: dict, published: dict, prompt, lang: str = "en") -> tuple[dict, dict]:
    """What a following student's page takes from the room's published state: (the room's new record on
    the page, the outputs of ``Followed`` that change). The run is sent only when it is new to the page;
    its status line is in the page's language ``lang``."""
    out: dict = {}
    tab = published.get("tab")
    if tab in TABS and tab != room.get("tab"):
        out["tabs"] = gr.Tabs(selected=tab)
        room = {**room, "tab": tab}
    here = published.get("prompt")
    if isinstance(here, str) and here != prompt:
        out["prompt"] = here
    run = published.get("run")
    if isinstance(run, dict) and run.get("version") != room.get("run_version"):
        if run.get("id") != room.get("run_id"):
            out["chips"] = run.get("chips") or ""
        out["status"] = (lang == "zh-CN" and run.get("status_zh")) or run.get("status") or ""
        figure = (lang == "zh-CN" and run.get("figure_zh")) or run.get("figure")
        out["heatmap"] = PlotData(type="plotly", plot=figure) if figure else None
        out["query_plot"] = gr.update(visible=False)  # the teacher's map only: the query's bars are the teacher's
        out["room_shown"] = run.get("version")
        view = published.get("view") or {}
        if view.get("view") in VIEWS:
            out["view"] = view["view"]
        for name in ("layer", "head"):
            top = view.get(f"{name}_max")
            if isinstance(view.get(name), int) and isinstance(top, int):
                out[name] = gr.update(value=view[name], maximum=max(top, view[name], 1))
        if isinstance(view.get("query"), int) and isinstance(view.get("query_max"), int):
            out["query"] = gr.update(
                value=view["query"], minimum=view.get("query_min") or 0, maximum=view["query_max"], visible=True
            )
        if view.get("span") in SPANS:
            out["span"] = view["span"]
        if isinstance(view.get("log_scale"), bool):
            out["log_scale"] = view["log_scale"]
        room = {**room, "run_version": run.get("version"), "run_id": run.get("id")}
    return room, out


def wire(page) -> None:
    """Each tab's select, the prompt's typing, Generate and the view's controls; then the teacher's
    publishing after each run and view change (chained after the Generate tab's own events)."""
    c, g, state = page.lessons, page.generate, page.state
    quick = {
        "api_visibility": "private",
        "show_progress": "hidden",
        "concurrency_id": "room_poll",
        "concurrency_limit": 32,
    }
    away = [c.room, c.room_status, c.room_follow]
    for tab in TABS:
        getattr(page, f"{tab}_tab").select(tab_opened(tab), [state, c.room], away, **quick)
    g.prompt.input(prompt_typed, [state, c.room, g.prompt], away, trigger_mode="always_last", **quick)
    # (a paste or a fill may raise no input event: the teacher's prompt is published when the box is left too)
    g.prompt.blur(prompt_left, [state, c.room, g.prompt], away, **quick)
    page.model.room_built.then(model_built, [state, c.room], away, **quick)
    for trigger in (g.gen_btn.click, g.prompt.submit, *(getattr(g, n).input for n in VIEW_CONTROLS)):
        trigger(moved_by_hand, [state, c.room], [*away, g.room_shown], **quick)
    listeners.on_change(page, redrawn_run, [c.room, g.room_shown], [g.heatmap, g.status])
    inputs = [state, c.room, g.prompt, g.view, g.layer, g.head, g.log_scale, g.query, g.span]
    for changed in g.room_view_changed:
        changed.then(publish_run, inputs, away, api_visibility="private", show_progress="hidden")
    inputs = [state, c.room, g.prompt, g.view, g.layer, g.head, g.log_scale, g.span]
    listeners.on_run_ended(publish_ended)
    for ended in g.room_run_ended:
        ended.then(publish_new_run, inputs, away, api_visibility="private", show_progress="hidden")
