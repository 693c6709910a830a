"""The room each teacher's page leads, for the server's own publishing to it.

Handlers that have no room among their inputs publish to it: a long Inside view's partial figures, a Generate
run that has just ended, a lesson step the page moves to. Kept by page (``page_id``: Gradio's id of the page, the
same for all of its events), at most ``MAX_LEADING`` pages; a page that ends its room, or whose key the room
refuses, leads none.
"""

from __future__ import annotations

import logging

from playground.server.recipes import model_label
from playground.server.rooms import ROOMS, RoomError
from playground.ui.common import client_address, page_id
from playground.ui.kept import Kept

log = logging.getLogger(__name__)

MAX_LEADING = 2000
_LEADING = Kept(MAX_LEADING)


def leading(state, code: str | None, key: str | None = None) -> None:
    """The session leads room ``code`` with ``key`` from now on (None: it leads none)."""
    _LEADING.put(page_id(state), "room", {"code": code, "key": key} if code and key else None)


def led(state) -> dict | None:
    """The room ({code, key}) the session leads, or None."""
    return _LEADING.get(page_id(state), "room")


def place(state, pos: dict, prompt) -> dict:
    """What a teacher's page at lesson step ``pos`` publishes: the tab, the step, the model's name, the prompt."""
    try:
        model = model_label(state["recipe"])[:400]
    except Exception:
        model = None
    return {"tab": "lessons", "lesson": pos.get("lesson"), "step": pos.get("step", 0), "model": model, "prompt": prompt}


def moved(state, pos: dict, prompt) -> None:
    """A leading page's own move to lesson step ``pos``: published to its room at once, as the page starts
    drawing it, so its followers draw it beside the teacher's page rather than after it. The page's own
    publication after its step (``room.publish_move``) finds the room there and sends nothing."""
    room = led(state)
    if room is None:
        return
    try:
        ROOMS.publish(
            room["code"], room["key"], place(state, pos, prompt or ""), client_address(), recipe=state.get("recipe")
        )
    except RoomError:  # (the room ended, or its key is no longer this page's: the page's own publication says so)
        leading(state, None)
    except Exception:
        log.exception("publishing a room's step as the page moved")


def there_already(room: dict, place: dict, recipe) -> bool:
    """Whether the room of a teacher's page (``room``: its record, with the key) is at ``place`` with the model
    ``recipe`` already (``moved`` published it): a wrong key is refused as a publication would be."""
    ROOMS.check_teacher(room["code"], room["key"], client_address())
    here = ROOMS.state(room["code"], client=client_address()).get("state") or {}
    same_model = not isinstance(recipe, dict) or here.get("recipe") == recipe
    return same_model and all(here.get(name) == value for name, value in place.items())
