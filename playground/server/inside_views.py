"""The Inside tab's numbers as the server computes and keeps them, and the maths it reaches them by.

The logit lens of a run's window is kept for whichever session asks next, and its cells read from the lens's residual rows instead of a
second forward. The views' maths (lenses, attributions, effects, attention maths, patching) are the
``playground.inside`` package's; the UI reaches them through here."""

from __future__ import annotations

import threading
from collections import OrderedDict

from playground.inside import attention_maths, attribution, effects, lenses, view_checks
from playground.inside.interventions import Intervention, StopRequested
from playground.runtime.memory import BUDGET
from playground.server.recipes import model_label, recipe_key

__all__ = [
    "Intervention",
    "StopRequested",
    "attention_maths",
    "attribution",
    "effects",
    "lens",
    "lens_cell",
    "lenses",
    "view_checks",
]

# (recipe, run id, n tokens, first id, window) -> (lens, the residual rows it read or None), the newest
# few. The lens cell of a window a lens view drew is read from its rows instead of a second forward,
# for whichever session asks (a redraw, a second page); rows are kept for the newest entries up to
# LENS_ROWS_BYTES in all (a window of GPT-2 small's is ~1.3 MB, of GPT-2 XL's ~10 MB).
_LENS_CACHE: OrderedDict = OrderedDict()
_LENS_LOCK = threading.Lock()
LENS_CACHE_ENTRIES = 16
LENS_ROWS_BYTES = 64 * 2**20
# session -> the cache key of the lens it drew last: its lens cell is of that window.
_LENS_DRAWN: OrderedDict = OrderedDict()
LENS_DRAWN_SESSIONS = 64


def _lens_key(recipe, run, ids, first: int, stop: int) -> tuple:
    return (recipe_key(recipe), run.id, len(ids), ids[0], first, stop)


def lens(model, recipe, session, run, ids, first: int, stop: int) -> dict:
    """The logit lens over window positions first..stop-1 of a run, kept for whichever session asks next
    (a redraw, a second page), with its residual rows while they fit in ``LENS_ROWS_BYTES``."""
    key = _lens_key(recipe, run, ids, first, stop)
    with _LENS_LOCK:
        hit = _LENS_CACHE.get(key)
        if hit is not None:
            _LENS_CACHE.move_to_end(key)
            _drawn(session, key)
            return hit[0]
    lens, rows = lenses.logit_lens_rows(model, ids, first=first, stop=stop)
    if rows is not None:  # counted while kept; the budget drops them first when a request needs the room
        what = f"the residual rows of a lens over positions {first}–{stop - 1} ({model_label(recipe)})"
        BUDGET.register(rows, rows.nbytes, what, "lens rows", reclaim=lambda: _drop_rows(key))
    with _LENS_LOCK:
        _LENS_CACHE[key] = (lens, rows)
        while len(_LENS_CACHE) > LENS_CACHE_ENTRIES:
            _LENS_CACHE.popitem(last=False)
        kept = 0
        for k in reversed(_LENS_CACHE):  # newest first: older entries give up their rows
            lens_k, rows_k = _LENS_CACHE[k]
            if rows_k is not None:
                kept += rows_k.nbytes
                if kept > LENS_ROWS_BYTES:
                    _LENS_CACHE[k] = (lens_k, None)
        _drawn(session, key)
    return lens


def _drop_rows(key: tuple) -> None:
    """Forget the residual rows kept for ``key``'s lens (the lens itself stays): its cells recompute."""
    with _LENS_LOCK:
        hit = _LENS_CACHE.get(key)
        if hit is not None:
            _LENS_CACHE[key] = (hit[0], None)


def _drawn(session, key: tuple) -> None:
    """Remember that this session's lens view shows ``key``'s window (under _LENS_LOCK)."""
    if session is not None:
        _LENS_DRAWN[session] = key
        _LENS_DRAWN.move_to_end(session)
        while len(_LENS_DRAWN) > LENS_DRAWN_SESSIONS:
            _LENS_DRAWN.popitem(last=False)


def lens_cell(model, recipe, session, run, ids, layer: int, p: int) -> dict:
    """The lens cell at window index ``p``: from the rows of the lens this session drew last when
    they are of this run and window and still kept, else by a forward of its own (lenses.lens_cell)."""
    with _LENS_LOCK:
        key = _LENS_DRAWN.get(session)
        rows = _LENS_CACHE.get(key, (None, None))[1] if key is not None else None
    if key is not None and rows is not None:
        first, stop = key[-2:]
        if key == _lens_key(recipe, run, ids, first, stop) and first <= p < stop:
            layer = view_checks.check_layer(layer, model.cfg.n_layers + 1, "Lens layer")
            return lenses.cell_from_rows(model, rows[layer, p - first], rows[-1, p - first], layer, p)
    return lenses.lens_cell(model, ids, layer, p)
