"""What each page has drawn, so a change of language (or presenter mode) can draw it again.

A view handler that builds text on the server calls ``remember(request, key, draw)`` with
``draw(lang, present) -> outputs``, a closure over what it has just shown; a tab's
``listeners.on_change`` listener calls ``redraw(request, key, lang, present, n)`` for each of its views.
Slow results are kept, not recomputed (a switch of language must not rescore a long text, rerun two
streams or a sweep); a quick view may be drawn again from the same run and fields. A view the page
has not drawn stays as it is (``gr.skip()``).

Pages are told apart by Gradio's session hash; a page that closes forgets its views (``forget``,
wired to the page's unload), and only the newest MAX_VIEWS views are kept in all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import gradio as gr

from playground.ui.kept import Kept

MAX_VIEWS = 512
MAX_BYTES = 200 * 2**20  # what the kept views may hold in all (a scored long text keeps its arrays)

_DRAWN: OrderedDict = OrderedDict()  # (session hash, view key) -> (draw(lang, present), bytes it holds)
_LOCK = threading.Lock()
_PAGE_LOCKS: dict[str, threading.RLock] = {}  # session hash -> the lock its drawings of one view share
MAX_NOTES = 20_000  # pages that never say they closed: the oldest notes go first
_NOTES = Kept(MAX_NOTES)  # (session hash, key) -> a small value the page's events share


def _session(request) -> str | None:
    return getattr(request, "session_hash", None) if request is not None else None


def remember(request, key: str, draw: Callable, nbytes: int = 0) -> None:
    """Keep ``draw`` as the way to draw view ``key`` of this page again (a call without a page, e.g.
    a direct Python call, keeps nothing). ``nbytes``: roughly what the closure holds; the oldest
    views are dropped first when the kept ones would exceed MAX_VIEWS or MAX_BYTES."""
    session = _session(request)
    if session is None:
        return
    with _LOCK:
        _DRAWN.pop((session, key), None)
        if nbytes > MAX_BYTES:
            return  # too big to keep: that view stays in the language it was drawn in
        _DRAWN[(session, key)] = (draw, nbytes)
        while len(_DRAWN) > MAX_VIEWS or sum(n for _, n in _DRAWN.values()) > MAX_BYTES:
            _DRAWN.popitem(last=False)


def order(request, keys) -> list[str]:
    """Of ``keys``, those this page has drawn, the most recently drawn last."""
    session = _session(request)
    with _LOCK:
        ranked = [k for (s, k) in _DRAWN if s == session]
    return [k for k in ranked if k in keys]


def _kept(request, key: str):
    """How this page's view ``key`` is drawn again, or None when the page has not drawn it."""
    with _LOCK:
        return _DRAWN.get((_session(request), key), (None, 0))[0]


def redraw(request, key: str, lang: str, present: bool, n: int) -> tuple:
    """View ``key`` drawn again in ``lang``: its ``n`` outputs, or ``n`` skips when the page has not
    drawn it (or drawing it again fails: the old drawing stays rather than an error appearing)."""
    draw = _kept(request, key)
    if draw is None:
        return (gr.skip(),) * n
    try:
        out = draw(lang, present)
    except Exception:
        return (gr.skip(),) * n
    out = out if isinstance(out, tuple) else (out,)
    assert len(out) == n, (key, len(out), n)
    return out


class _Inputs:
    """A quick view's record: the inputs it was drawn from, and what they were drawn of (a run's id)."""

    def __init__(self, inputs: tuple, of) -> None:
        self.inputs, self.of = inputs, of

    def __call__(self, lang: str, present: bool) -> tuple:
        return self.inputs


def remember_inputs(request, key: str, inputs: tuple, of=None) -> None:
    """Keep the inputs a view was last drawn from (a quick view, drawn again from them); ``of``: what they
    were drawn of (a Generate run's id), for ``drawn_for``."""
    remember(request, key, _Inputs(inputs, of))


def drawn_inputs(request, key: str, given: tuple) -> tuple:
    """The inputs this page last drew view ``key`` from, else ``given``: a redraw's inputs are read when
    its events set off, and a view drawn meanwhile (a lesson's Show me) must not be drawn over."""
    draw = _kept(request, key)
    return given if draw is None else draw("en", False)


def drawn_for(request, key: str, of) -> tuple | None:
    """The inputs this page last drew view ``key`` from, if it drew them of ``of`` (a run), else None: a
    slider's value from an earlier run means nothing in this one."""
    draw = _kept(request, key)
    return draw.inputs if isinstance(draw, _Inputs) and of is not None and draw.of == of else None


def drop(request, keys) -> None:
    """This page no longer shows views ``keys`` (they were drawn for an earlier run): forget them."""
    session = _session(request)
    with _LOCK:
        for key in keys:
            _DRAWN.pop((session, key), None)


def note(request, key: str, value) -> None:
    """Keep a small ``value`` for this page (kept apart from the views: never dropped for their room)."""
    _NOTES.put(_session(request), key, value)


def noted(request, key: str, default=None):
    """What ``note`` kept for this page under ``key``, else ``default``."""
    return _NOTES.get(_session(request), key, default)


def page_lock(request) -> threading.RLock:
    """One lock per page, for a view that several of its events draw: a page's events run side by
    side, and each reads its inputs as it sets off; taken one at a time, each draws after the one
    before it has recorded what it drew. (A call without a page gets a lock of its own.)"""
    session = _session(request)
    if session is None:
        return threading.RLock()
    with _LOCK:
        return _PAGE_LOCKS.setdefault(session, threading.RLock())


def forget(request: gr.Request) -> None:
    """The page closed: drop its views."""
    session = _session(request)
    with _LOCK:
        for k in [k for k in _DRAWN if k[0] == session]:
            del _DRAWN[k]
        _PAGE_LOCKS.pop(session, None)
    _NOTES.forget(session)
