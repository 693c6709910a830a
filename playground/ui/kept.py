"""Small values kept per page or per session, bounded: pages that never say they closed cannot grow it.

``Kept(limit)`` holds (owner, key) -> value, the oldest put first out once more than ``limit`` are kept. Its
users name the owner: a page's Gradio session hash (``redraw.note``) or a session's own id
(``inside.live.keep_finished``, whose room publisher has the session's state and not its request). A None
owner (a direct Python call, with no page or session) keeps nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict


class Kept:
    def __init__(self, limit: int):
        self.limit = limit
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def put(self, owner: str | None, key: str, value) -> None:
        if owner is None:
            return
        with self._lock:
            self._items.pop((owner, key), None)
            self._items[(owner, key)] = value
            while len(self._items) > self.limit:
                self._items.popitem(last=False)

    def get(self, owner: str | None, key: str, default=None):
        with self._lock:
            return self._items.get((owner, key), default)

    def forget(self, owner: str | None) -> None:
        """Everything ``owner`` kept (its page closed)."""
        with self._lock:
            for k in [k for k in self._items if k[0] == owner]:
                del self._items[k]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
