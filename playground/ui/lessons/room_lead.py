"""The room each teacher's page leads, for the server's own publishing to it.

Handlers that have no room among their inputs publish to it: a long Inside view's partial figures, a Generate
run that has just ended. Kept by page (``page_id``: Gradio's id of the page, the
same for all of its events), at most ``MAX_LEADING`` pages; a page that ends its room, or whose key the room
refuses, leads none.
"""

from __future__ import annotations

from playground.ui.common import page_id
from playground.ui.kept import Kept

MAX_LEADING = 2000
_LEADING = Kept(MAX_LEADING)


def leading(state, code: str | None, key: str | None = None) -> None:
    """The session leads room ``code`` with ``key`` from now on (None: it leads none)."""
    _LEADING.put(page_id(state), "room", {"code": code, "key": key} if code and key else None)


def led(state) -> dict | None:
    """The room ({code, key}) the session leads, or None."""
    return _LEADING.get(page_id(state), "room")
