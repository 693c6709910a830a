"""What a room's followers are shown, drawn once: a lesson step, a model's views, kept per room, freed with it.

A following student's page shows the teacher's step on the teacher's model. Drawn for each follower,
that is one forward (and one set of figures) per student per step; drawn here, it is one per room, per
step, per language: ``DRAWN.get(code, key, draw)`` runs ``draw()`` for the first follower that asks for
``key`` (the model's cache key, the lesson, the step, the prompt, the language, presenter mode) and hands
every other follower the same value, those asking while it is drawn waiting for it (one drawing, never
one per waiting page). A drawing that fails is not kept: the next follower's request draws it again.

Each room keeps its ``MAX_PER_ROOM`` most recent drawings (a step's figures are tens to hundreds of kB),
and a room's are let go when the room ends (``Rooms.on_end``). What a drawing is stays the caller's
(the UI's updates, its figures as JSON): nothing here knows the model or Gradio.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from playground.server.rooms import ROOMS, Rooms

MAX_PER_ROOM = 8  # drawings a room keeps: a step in two languages, and the model's views, with room to go back
WAIT_SECONDS = 120.0  # the longest a follower waits on another's drawing (a model built for it included)


class _Drawing:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.failed: BaseException | None = None


class DrawnOnce:
    """Per room, a bounded map key -> drawing, each drawn by one caller while the others wait for it."""

    def __init__(self, rooms: Rooms | None = None, per_room: int = MAX_PER_ROOM) -> None:
        self._lock = threading.Lock()
        self._rooms: dict[str, OrderedDict[Hashable, _Drawing]] = {}
        self._per_room = per_room
        self.drawn = 0  # drawings made (a test counts them)
        if rooms is not None:
            rooms.on_end(self.forget)

    def get(self, code: str, key: Hashable, draw: Callable[[], Any]) -> Any:
        """The drawing of ``key`` in room ``code``: ``draw()``'s value, drawn once for every follower."""
        with self._lock:
            kept = self._rooms.setdefault(code, OrderedDict())
            found = kept.get(key)
            mine = found is None
            drawing = _Drawing() if found is None else found
            if mine:
                kept[key] = drawing
                while len(kept) > self._per_room:
                    kept.popitem(last=False)
            else:
                kept.move_to_end(key)
        if mine:
            try:
                drawing.value = draw()
                self.drawn += 1
            except BaseException as e:
                drawing.failed = e
                with self._lock:  # not kept: the next request draws it again
                    kept = self._rooms.get(code, OrderedDict())
                    if kept.get(key) is drawing:
                        del kept[key]
                raise
            finally:
                drawing.done.set()
            return drawing.value
        if not drawing.done.wait(WAIT_SECONDS):
            return draw()  # (the first drawing is stuck: this follower draws its own)
        if drawing.failed is not None:
            raise drawing.failed
        return drawing.value

    def forget(self, code: str) -> None:
        """Room ``code`` ended: its drawings go (called under the rooms' lock: only a dict's pop)."""
        self._rooms.pop(code, None)

    def held(self, code: str) -> int:
        with self._lock:
            return len(self._rooms.get(code, ()))


DRAWN = DrawnOnce(ROOMS)
