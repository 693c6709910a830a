"""The room of one piece of work in the memory budget, taken when it starts and given back when it ends.

``MemoryBudget.take`` makes one (``playground.runtime.memory``); a generation's is
``playground.server.runs.generation_room``. It holds what the work really uses, when it uses it: a
decoder grows it as its KV cache fills and releases it when the run ends, so idle sessions hold nothing.
"""

from __future__ import annotations

import weakref
from typing import Protocol


class Account(Protocol):
    """What a reservation asks of the budget that made it (``MemoryBudget``)."""

    def held_bytes(self, key: int) -> int: ...
    def is_registered(self, obj) -> bool: ...
    def _resize(self, key: int, nbytes: int, what: str) -> None: ...
    def expect_end(self, key: int, seconds: float) -> None: ...
    def release(self, obj) -> None: ...


class Reservation:
    """The room of one piece of work (a generation, a replay), taken when it starts
    (``MemoryBudget.take``) and given back when it ends. What a decoder (one run, or each run of
    a batch) does with it:

    - ``grow(nbytes)``: hold ``nbytes`` more, as the work allocates them (a KV cache filled as it
      goes); refused with ``MemoryBudgetError`` if they do not fit, the room held so far staying;
    - ``resize(nbytes)``: hold exactly ``nbytes`` from now (less gives the rest back at once);
    - ``expect_end(seconds)``: when the work expects to end, from now: refusals meanwhile tell
      their users when to try again (by default, how long the same kind of work took lately);
    - ``release()``: give everything back (again: nothing happens); ``with budget.take(...) as r:``
      releases at the end of the block, and a reservation no one holds is released when collected;
    - ``tie(obj)``: release when ``obj`` (say, the generation's iterator) is collected.
    """

    def __init__(self, budget: Account, what: str, kind: str):
        self._budget, self.what, self.kind = budget, what, kind
        self._key = 0

    @property
    def nbytes(self) -> int:
        """What it holds now (0 once released)."""
        return self._budget.held_bytes(self._key)

    @property
    def released(self) -> bool:
        return not self._budget.is_registered(self)

    def grow(self, nbytes: int) -> None:
        if nbytes > 0:
            self.resize(self.nbytes + int(nbytes))

    def resize(self, nbytes: int) -> None:
        if not self.released:
            self._budget._resize(self._key, max(0, int(nbytes)), self.what)

    def expect_end(self, seconds: float) -> None:
        self._budget.expect_end(self._key, seconds)

    def release(self) -> None:
        self._budget.release(self)

    def tie(self, obj) -> None:
        weakref.finalize(obj, self.release).atexit = False

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
