"""Wrong room codes and keys counted per client address, and an address refused after too many.

Past ``MAX_FAILURES`` in ``FAILURE_WINDOW`` seconds an address is refused before any lookup, the rooms and
every other client untouched. At most ``MAX_TRACKED_CLIENTS`` addresses are remembered, the one that failed longest ago forgotten first, so a
flood of addresses costs bounded memory. Pure Python: callers hold the rooms' lock.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from playground.server.room_checks import RoomError

MAX_FAILURES = 30  # wrong codes or keys a client address may send per window
FAILURE_WINDOW = 60.0
MAX_TRACKED_CLIENTS = 10_000  # addresses whose failures are remembered (the oldest forgotten first)


class Lockout:
    """Each client address's recent failures, on ``clock``."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._failures: collections.OrderedDict[Any, collections.deque] = collections.OrderedDict()

    def check(self, client) -> None:
        """Raise RoomError ("room.too_many_tries") while ``client`` has failed too often of late."""
        now = self._clock()
        failures = self._failures.get(client)
        if failures is None:
            return
        while failures and failures[0] < now - FAILURE_WINDOW:
            failures.popleft()
        if len(failures) >= MAX_FAILURES:
            wait = max(1, int(failures[0] + FAILURE_WINDOW - now + 1))
            raise RoomError(
                "room.too_many_tries",
                "Too many wrong room codes or keys from this address: try again in {seconds} s.",
                seconds=wait,
            )

    def failed(self, client) -> None:
        """One more failure of ``client``'s, now."""
        failures = self._failures.pop(client, None) or collections.deque(maxlen=MAX_FAILURES)
        failures.append(self._clock())
        self._failures[client] = failures  # the most recent last: the oldest is forgotten first
        while len(self._failures) > MAX_TRACKED_CLIENTS:
            self._failures.popitem(last=False)
