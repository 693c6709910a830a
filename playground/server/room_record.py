"""One classroom room's record and the rules that read or change it without the registry.

``Room`` is what the server keeps of a room (its code and key, the teacher's place, its members and whether
each follows, the vote); ``rooms.Rooms`` holds every room behind one lock and calls these under it. The
environment's limits (``PLAYGROUND_MAX_ROOMS``, ``PLAYGROUND_ROOM_IDLE_MINUTES``) are read here, each time,
so a test or a server can set them. Pure Python: no model, no Gradio.
"""

from __future__ import annotations

import hmac
import json
import os
from dataclasses import dataclass, field
from typing import Any

from playground.server.room_checks import check_state
from playground.server.room_votes import Vote


def max_rooms() -> int:
    try:
        return max(1, int(os.environ.get("PLAYGROUND_MAX_ROOMS", "20")))
    except ValueError:
        return 20


def idle_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get("PLAYGROUND_ROOM_IDLE_MINUTES", "60")) * 60)
    except ValueError:
        return 3600.0


@dataclass
class Room:
    code: str
    key: str
    touched: float
    version: int = 0
    state: dict = field(default_factory=dict)
    members: dict[str, float] = field(default_factory=dict)
    # member -> (following the teacher, how many times the page said so): a page's poll may answer after a
    # later Follow or step-away of the same page, so whether it follows is the room's to keep, not the page's
    following: dict[str, tuple[bool, int]] = field(default_factory=dict)
    vote: Vote | None = None
    votes_opened: int = 0


def is_member(room: Room, member: Any) -> bool:
    """Whether ``member`` is an id this room gave (and still holds)."""
    return isinstance(member, str) and member in room.members


def is_key(room: Room, key: Any) -> bool:
    """Whether ``key`` is the room's teacher's key (compared in constant time)."""
    given = key.encode("utf-8", "replace") if isinstance(key, str) else b""
    return hmac.compare_digest(given, room.key.encode())


def checked_place(state: Any, recipe: dict | None) -> dict:
    """A teacher's place as ``publish`` takes it, checked, with the model's recipe and cache key."""
    clean = check_state(state)
    if isinstance(recipe, dict):
        clean["recipe"] = recipe
        clean["model_key"] = json.dumps(recipe, sort_keys=True)  # (server.recipes.recipe_key: pure Python here)
    return clean


def take_place(room: Room, clean: dict) -> None:
    """Room ``room`` takes the place ``clean`` (under the rooms' lock). A vote is on one step's question: a
    new lesson, step or model leaves the room with none until the teacher opens one."""
    watched = ("lesson", "step", "model_key")
    if any(clean.get(name, room.state.get(name)) != room.state.get(name) for name in watched):
        room.vote = None
    room.state = {**room.state, **clean}
