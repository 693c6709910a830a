"""The Inside tab's long views drawn as they go: the dose-response curve and the head sweep.

The dose-response curve is drawn as it grows (one α at a time, at most one update per
MIN_UPDATE_S) and the head sweep a layer at a time (its heads one by one); each partial figure is a
streamed update and the message under the buttons says how far it is. The tab's Stop raises the
page's stop flag, which the computation reads before each block of one α or one head (and between
heads' readouts), so it ends within one of those rather than at the next update, and its own last
update is Stop's message, which says what the figure shows. A language switch redraws a
finished view from its own handler (inside_tab's redraw memory). The numbers of the last one each session
finished are kept (``keep_finished``), so a classroom room shows the teacher's finished figure drawn from
them (``finished_view``) without computing it again; a stopped one is not shown. Each partial figure also
goes to ``listeners.streamed``, through which a room shows its teacher's as it grows.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import gradio as gr

from playground.figures import inside as lf
from playground.ui import listeners, presses, redraw
from playground.ui.common import dress, for_the_session, lang_of, ok, say, session_id, tr, warn
from playground.ui.kept import Kept
from playground.ui.results import only

from .data import dose_steps, sweep_steps
from .redraw import note_drawn
from .tab import DoseView, SweepView, draw_sweep

N_ALPHAS = 11  # the curve's α values, 0, 0.2, …, 2 (effects.dose_response_points)
# Each partial curve costs the page a plotly redraw, and on a 2-core machine the browser's CPU for it
# is taken from the server's threads computing the next point; a few updates a second show it growing.
MIN_UPDATE_S = 0.25
clock = time.perf_counter
# page (Gradio session) -> the stop flags of its long views running now. Stop raises them and the views end
# on Stop's message themselves: Gradio's ``cancels`` would end a view's event at once, and an update it had
# sent just before could then reach the page after Stop's answer and stay there.
STOP_FLAGS: dict[str, list[threading.Event]] = {}
_FLAGS_LOCK = threading.Lock()
# A Stop can reach the server before the long view it stops has started (queued, or still on its way
# on a busy machine): the page names each press of a long view's button (ui.presses), and a Stop names the
# last one, so a view whose name was stopped ends before its first block.
MAX_STOPPED = 2000
_STOPPED = Kept(MAX_STOPPED)  # (page, ask) -> True: a Stop named this press
PRESS_VAR = "pgLongAsk"  # the page's last press of a long view, by name
MAX_FINISHED = 2000  # sessions that never say they closed: the oldest go first
_FINISHED = Kept(MAX_FINISHED)  # (session id, view key) -> the numbers of its last finished long view


def keep_finished(state, key: str, d: dict | None) -> None:
    """The numbers of the session's last finished long view ``key`` (None: one is running, or stopped)."""
    _FINISHED.put(session_id(state), key, d)


def finished(state, key: str) -> dict | None:
    """What ``keep_finished`` kept for the session's view ``key``, else None."""
    return _FINISHED.get(session_id(state), key)


def finished_view(key: str, draw):
    """A view drawing the session's last finished ``key`` from its numbers (``draw(d, lang, present)``),
    in the state's language; None when none finished (running, stopped, or never drawn). Its other
    arguments (the fields it was drawn from) are the room's to show, not read."""

    def view(state, *_):
        d = finished(state, key)
        return None if d is None else draw(d, lang_of(state), bool((state or {}).get("present")))

    view.__name__ = f"finished_{key}"
    return view


def ask_js(at: int) -> str:
    """A long view's ``js=``: input number ``at`` becomes a fresh name for this press of its button."""
    return presses.press_js(PRESS_VAR, at)


def stop_js(at: int) -> str:
    """Stop's ``js=``: input number ``at`` becomes the name of the page's last long-view press."""
    return presses.stop_js(PRESS_VAR, at)


@contextmanager
def stop_flag(request, ask: str | None = None):
    """A fresh stop flag for this page's long view while it runs: a Stop from before does not count,
    unless it named this press (``ask``), which it stops before it starts."""
    page, flag = getattr(request, "session_hash", None), threading.Event()
    if page is not None:
        with _FLAGS_LOCK:
            STOP_FLAGS.setdefault(page, []).append(flag)
        if ask and _STOPPED.get(page, presses.press_name(ask)):
            flag.set()
    try:
        yield flag
    finally:
        if page is not None:
            with _FLAGS_LOCK:
                running = [f for f in STOP_FLAGS.get(page, []) if f is not flag]
                if running:
                    STOP_FLAGS[page] = running
                else:
                    STOP_FLAGS.pop(page, None)


def _progress(text: str) -> str:
    return f"<div class='pg-msg pg-progress'>⏳ {text}</div>"


def _dose_figure(d: dict, lang: str, present: bool):
    title = tr(lang, "in_dose", tok=d["target"], pos=d["position"], head=d["head"], layer=d["layer"])
    return dress(lf.dose_curve(d["alphas"], d["logprob"], title=title), lang, present)


@for_the_session
def dose_live(request: gr.Request, state, scale_head, position, target, ask=None):
    """The Dose-response button: the curve grows point by point (outputs: figure, message), at most
    one partial curve per MIN_UPDATE_S of computing; the first point and the whole curve always."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    unsent, sent_at, last = None, None, None
    keep_finished(state, "dose", None)
    with stop_flag(request, ask) as flag:
        if flag.is_set():  # stopped before it started: nothing measured
            yield only(DoseView, msg=stopped(state))
            return
        for d in dose_steps(state, scale_head, position, target, stop=flag.is_set):
            if "error" in d:
                yield only(DoseView, msg=warn(say(lang, d)))
                return
            done, last = len(d["alphas"]), d
            if done < N_ALPHAS and sent_at is not None and clock() - sent_at < MIN_UPDATE_S:
                unsent = d
                continue
            yield DoseView(
                _dose_figure(d, lang, present),
                "" if done >= N_ALPHAS else _progress(tr(lang, "in_dose_progress", done=done)),
            )
            unsent, sent_at = None, clock()  # (after the page took the update: the next points' time)
            if done < N_ALPHAS:  # (the whole curve is published once kept, by the room's chain after the event)
                selection = {"i_scale": scale_head, "i_pos": position, "i_target": target}
                listeners.streamed(state, "dose", lambda lang, present, d=d: draw_dose(d, lang, present), selection)
        if flag.is_set():
            # The points computed since the last update are drawn with the message Stop gives.
            if unsent is None:
                yield only(DoseView, msg=stopped(state))
            else:
                yield DoseView(_dose_figure(unsent, lang, present), stopped(state))
            return
    keep_finished(state, "dose", last)
    note_drawn(request, "dose", state, scale_head, position, target)


def draw_dose(d: dict, lang: str, present: bool):
    """A finished dose-response curve drawn from its numbers."""
    return DoseView(_dose_figure(d, lang, present), "")


@for_the_session
def sweep_live(request: gr.Request, state, ask=None):
    """The Head sweep button: the heatmap fills a layer at a time (outputs: figure, text, message)."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    last = None
    keep_finished(state, "sweep", None)
    with stop_flag(request, ask) as flag:
        if flag.is_set():
            yield only(SweepView, msg=stopped(state))
            return
        for d in sweep_steps(state, stop=flag.is_set):
            if "error" in d:
                yield only(SweepView, msg=warn(say(lang, d)))
                return
            last = d
            done, total = sum(row is not None for row in d["delta_loss"]), len(d["delta_loss"])
            if done < total:
                fig, text = _sweep_so_far(d, lang, present)
                yield SweepView(fig, "", _progress(text))
                listeners.streamed(state, "sweep", lambda lang, present, d=d: draw_partial_sweep(d, lang, present))
        if flag.is_set():
            yield only(SweepView, msg=stopped(state))
            return
    if last is not None:
        keep_finished(state, "sweep", last)
        redraw.remember(request, "inside_sweep", lambda lang, present: draw_sweep(last, lang, present))
        yield draw_sweep(last, lang, present)


def _sweep_so_far(d: dict, lang: str, present: bool):
    """(the figure, how far it is) of a head sweep still going, from its numbers so far."""
    done, total = sum(row is not None for row in d["delta_loss"]), len(d["delta_loss"])
    fig = dress(lf.sweep_heatmap(d["delta_loss"], title=tr(lang, "in_fig_sweep")), lang, present)
    return fig, tr(
        lang, "in_sweep_progress", done=done, total=total, s=f"{d['seconds']:.1f}", e=f"{d['estimate_s']:.1f}"
    )


def draw_partial_sweep(d: dict, lang: str, present: bool) -> SweepView:
    """A head sweep still going, as a room's followers see it: how far it is in place of its text."""
    fig, text = _sweep_so_far(d, lang, present)
    return SweepView(fig, f"⏳ {text}", "")


def stop(request: gr.Request, state, ask: str | None = None) -> str:
    """The Inside tab's Stop: raises the page's stop flag (the long view ends within a block) and says
    so; the press it names (``ask``) is stopped too if its view has not started yet."""
    page = getattr(request, "session_hash", None)
    if page is not None and ask:
        _STOPPED.put(page, presses.press_name(ask), True)
    with _FLAGS_LOCK:
        running = list(STOP_FLAGS.get(page or "", []))
    for flag in running:
        flag.set()
    return stopped(state)


def stopped(state) -> str:
    """What Stop says: the long view it stopped keeps its last drawn update."""
    return ok(tr(lang_of(state), "in_stopped"))
