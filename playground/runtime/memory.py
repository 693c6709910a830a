"""The process-wide memory budget: one account of everything big the server holds.

Every model the cache built (counted once however many sessions use it, and until it is really
freed, also after the cache evicted it), the KV cache of every generation in flight, the attention
kept for the views of each run, training jobs and exports in flight hold a share of ONE budget. A
request that would go over it is refused *before* anything is allocated, with a message saying
what holds the memory.

The budget is ``PLAYGROUND_MEMORY_BUDGET_GB`` (GiB) if set, else 60% of this machine's physical
RAM minus 1 GiB for what is never counted here (the interpreter, torch, gradio, the tokenizer,
short-lived tensors). It is read at every check, so changing the variable takes effect at once.
When the models live on a CUDA GPU (``PLAYGROUND_DEVICE``, see playground.runtime.devices), the memory
that runs out first is the GPU's: the default budget is then 85% of that GPU's memory (the CUDA
context and the caching allocator's slack take the rest).

Freed memory is handed back to the operating system (glibc ``malloc_trim``, and ``map_large_blocks``
called once by the server's entry point), so the process's resident size follows what it holds
instead of its peak. The server's entry point also calls ``BUDGET.count_whole_process()``: from then
on the budget is one for the process's resident size (what the interpreter, torch, gradio and the
allocator hold besides the holdings, measured at every check, plus a headroom for short-lived work).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import weakref
from collections.abc import Callable

from playground.runtime.holdings import (
    ADVICE,
    KIND_LABELS,
    Holding,
    MemoryBudgetError,
    acting_for,
    current_owner,
    describe_holdings,
    in_use,
    over_total,
)
from playground.runtime.machine_memory import (
    default_budget_bytes,
    format_bytes,
    map_large_blocks,
    resident_bytes,
    trim,
)

TRIM_AFTER_BYTES = 16 * 2**20  # smaller releases are not worth a malloc_trim
# Kept free for what no holding names when the whole process is counted: one decode step's
# activations per generation, gradio's copies of results on their way to the page, short-lived
# tensors of the views, and allocator pages not yet given back. A share of the budget, at least a floor.
HEADROOM_SHARE = 0.1
HEADROOM_MIN_BYTES = 256 * 2**20


# ----------------------------------------------------------------------------------------------
# The budget


class MemoryBudget:
    """What the process holds, against a byte budget.

    - ``register(obj, nbytes, what, kind, reclaim=None)``: ``obj`` holds ``nbytes`` until it is
      garbage collected (weakref.finalize); registering the same object again changes nothing, so
      a model shared by many sessions is counted once. Holdings that can be recomputed (a run's
      attention) pass ``reclaim``, and are dropped, oldest first, before a request is refused.
    - ``reserve(nbytes, what, kind)``: a context manager holding ``nbytes`` while a request
      allocates (after ``check``). Checks made by the same thread inside it pass (only the
      whole-budget limit applies): a loader checking the model it is about to build was already
      accounted for by the reservation.
    - ``check(nbytes, what)``: raise ``MemoryBudgetError`` saying what holds the memory if it does
      not fit: by name the holdings of the session the request acts for (``acting_for``, and the
      shared models it uses: ``add_owner``), everyone else's as counts and sizes.
    - ``usage()`` / ``describe()``: the holders, largest first / counts and sizes in one sentence.
    """

    def __init__(self, total_bytes: int | None = None):
        self._total = total_bytes
        self._lock = threading.RLock()
        self._held: dict[int, Holding] = {}
        self._finalizers: dict[int, weakref.finalize] = {}
        self._reclaimers: dict[int, Callable[[], object]] = {}  # key -> callable dropping it, oldest first
        self._next = 0
        self._local = threading.local()
        self._evictors: list[weakref.WeakMethod] = []  # make room by dropping idle models (the model cache)
        self._process_floor: int | None = None  # set by count_whole_process()
        self._draws: dict[int, int] = {}  # standing reservation's key -> bytes drawn by live requests

    @property
    def total(self) -> int:
        return default_budget_bytes() if self._total is None else int(self._total)

    def used(self) -> int:
        with self._lock:
            held = sum(h.nbytes for h in self._held.values())
        return held + self._unnamed(held)

    def available(self) -> int:
        return self.total - self.used()

    def usage(self) -> list[Holding]:
        with self._lock:
            held = list(self._held.values())
        unnamed = self._unnamed(sum(h.nbytes for h in held))
        if unnamed:
            what = (
                f"interpreter, torch, gradio and allocator slack, with {format_bytes(self.headroom())} kept "
                "free for short-lived work"
            )
            held.append(Holding(what, unnamed, "server"))
        return sorted(held, key=lambda h: -h.nbytes)

    # ------------------------------------------------------------------------------------------
    # The whole process (the server's entry point turns it on)

    def count_whole_process(self) -> None:
        """Count what the process holds besides the holdings too, so its resident size stays within
        the budget: from now on ``used()`` is the larger of the holdings plus the resident size
        measured now (the interpreter, torch, gradio, loaded once) and the resident size measured at
        each call, plus ``headroom()``. Library users and tests keep counting holdings only."""
        self._process_floor = resident_bytes()

    def counts_whole_process(self) -> bool:
        return self._process_floor is not None

    def headroom(self) -> int:
        """Room kept free for short-lived work no holding names (when the whole process is counted)."""
        return max(HEADROOM_MIN_BYTES, int(self.total * HEADROOM_SHARE))

    def _unnamed(self, held: int) -> int:
        """Bytes counted besides the holdings: none, or (whole process) what the resident size holds
        beyond them (at least the size measured at start) plus the headroom."""
        if self._process_floor is None:
            return 0
        return max(self._process_floor, resident_bytes() - held) + self.headroom()

    # ------------------------------------------------------------------------------------------
    # Making room: recomputable holdings first, then whatever the evictors drop (idle models)

    def add_evictor(self, method) -> None:
        """``method(nbytes)`` (a bound method, held weakly) frees memory it owns until ``nbytes`` fit;
        called for any request that would not fit otherwise, after recomputable holdings are dropped."""
        with self._lock:
            self._evictors = [m for m in self._evictors if m() is not None] + [weakref.WeakMethod(method)]

    def describe(self) -> str:
        """What holds the memory, as counts and sizes by kind (``describe_holdings``)."""
        return describe_holdings(self.usage())

    def _own_reserved(self) -> int:
        return sum(getattr(self._local, "reserved", ()))

    def check(self, nbytes: int, what: str, draw_on: StandingReservation | None = None) -> None:
        """Refuse ``nbytes`` for ``what`` unless they fit, after making room. ``draw_on``: a standing
        reservation the request takes from first (only the rest must fit)."""
        nbytes = max(0, nbytes - self.spare(draw_on))
        if self._over_total_or_own(nbytes, what):
            return
        self._make_room(nbytes)
        self._refuse_unless_fits(nbytes, what)

    def _over_total_or_own(self, nbytes: int, what: str) -> bool:
        """Refuse what exceeds the whole budget; True when the calling thread is inside its own
        reservation (what it allocates was checked when it reserved)."""
        total = self.total
        if nbytes > total:
            raise over_total(what, nbytes, total)
        return bool(self._own_reserved())

    def _refuse_unless_fits(self, nbytes: int, what: str) -> None:
        total = self.total
        with self._lock:
            free = total - self.used()
            if nbytes > free:
                raise in_use(what, nbytes, total - free, total, self.usage(), current_owner())

    def _make_room(self, nbytes: int) -> None:
        """Drop reclaimable holdings (caches that can be recomputed), oldest first, then ask the
        evictors, until ``nbytes`` fit or nothing more can go. Called without the lock held: the
        evictors take their own locks, and then this budget's."""
        while True:
            with self._lock:
                free = self.total - self.used()
                if nbytes <= free or not self._reclaimers:
                    break
                key = next(iter(self._reclaimers))
                reclaim = self._reclaimers.pop(key)
            reclaim()
        with self._lock:
            evictors = [m() for m in self._evictors]
        for evict in evictors:
            if evict is None or self.total - self.used() >= nbytes:
                continue
            evict(nbytes)

    def _add(self, holding: Holding) -> int:
        with self._lock:
            self._next += 1
            self._held[self._next] = holding
            return self._next

    def _forget(self, key: int) -> None:
        with self._lock:
            self._draws.pop(key, None)
            holding = self._held.pop(key, None)
            self._finalizers.pop(key, None)
            self._reclaimers.pop(key, None)
        if holding is not None and holding.nbytes >= TRIM_AFTER_BYTES:
            trim()

    @contextlib.contextmanager
    def reserve(self, nbytes: int, what: str, kind: str = "build"):
        nbytes = int(nbytes)
        own = self._over_total_or_own(nbytes, what)
        if not own:
            self._make_room(nbytes)
        with self._lock:  # the refusal and the holding at once: no other request slips in between
            if not own:
                self._refuse_unless_fits(nbytes, what)
            key = self._add(Holding(what, nbytes, kind, _owned_now()))
        stack = self._local.__dict__.setdefault("reserved", [])
        stack.append(nbytes)
        try:
            yield
        finally:
            stack.pop()
            self._forget(key)

    def register(
        self, obj, nbytes: int, what: str, kind: str = "model", reclaim=None, draw_on: StandingReservation | None = None
    ) -> None:
        """Count ``obj`` until it is freed. ``reclaim`` (optional, no arguments) drops the last
        reference to it: the budget calls it, oldest first, when a request would not fit otherwise.
        ``draw_on``: a standing reservation ``obj`` takes its bytes from first while it lives."""
        with self._lock:
            if self._counts(obj):
                return  # already counted
            taken = min(int(nbytes), self.spare(draw_on))
            key = self._add(Holding(what, int(nbytes), kind, _owned_now()))
            fin = weakref.finalize(obj, self._forget, key)
            fin.atexit = False  # nothing to give back when the process ends
            self._finalizers[key] = fin
            if reclaim is not None:
                self._reclaimers[key] = reclaim
            if taken and draw_on is not None:
                self._draw(draw_on, taken)
                weakref.finalize(obj, self._draw, draw_on, -taken).atexit = False

    # ------------------------------------------------------------------------------------------
    # Standing reservations: room kept for a request that has not come yet

    def hold(self, nbytes: int, what: str, kind: str = "reserved") -> StandingReservation:
        """Keep ``nbytes`` for a later request (refused now if they do not fit): counted until
        ``release(reservation)`` or until the object is gone. A request that draws on it
        (``check``/``register`` with ``draw_on``) takes from it first and gives it back when done."""
        nbytes = int(nbytes)
        reservation = StandingReservation(nbytes)
        own = self._over_total_or_own(nbytes, what)
        if not own:
            self._make_room(nbytes)
        with self._lock:
            if not own:
                self._refuse_unless_fits(nbytes, what)
            self.register(reservation, nbytes, what, kind)
        return reservation

    def spare(self, reservation: StandingReservation | None) -> int:
        """What a standing reservation still holds for its request (0 if none, or released)."""
        if reservation is None:
            return 0
        with self._lock:
            keys = self._counts(reservation)
            return self._held[keys[0]].nbytes if keys else 0

    def _draw(self, reservation: StandingReservation, nbytes: int) -> None:
        """Move ``nbytes`` from a standing reservation to a request (negative: give them back)."""
        with self._lock:
            keys = self._counts(reservation)
            if not keys:
                return  # released meanwhile: nothing to give back to
            h = self._held[keys[0]]
            drawn = max(0, self._draws.get(keys[0], 0) + nbytes)
            self._draws[keys[0]] = drawn
            self._held[keys[0]] = dataclasses.replace(h, nbytes=max(0, reservation.nbytes - drawn))

    def is_registered(self, obj) -> bool:
        with self._lock:
            return bool(self._counts(obj))

    def _counts(self, obj) -> list[int]:
        """The keys under which ``obj`` is counted (callers hold the lock)."""
        return [k for k, f in list(self._finalizers.items()) if (p := f.peek()) is not None and p[0] is obj]

    def add_owner(self, obj, owner: str) -> None:
        """Count ``obj`` (a cached model, shared) as ``owner``'s too while the session uses it: its
        refusals name it. Nothing happens if ``obj`` is not counted here."""
        self._set_owners(obj, lambda owners: owners | {owner})

    def drop_owner(self, obj, owner: str) -> None:
        """``owner`` no longer uses ``obj``: its name is no longer the session's to see."""
        self._set_owners(obj, lambda owners: owners - {owner})

    def _set_owners(self, obj, change: Callable[[frozenset[str]], frozenset[str]]) -> None:
        with self._lock:
            for key in self._counts(obj):
                h = self._held[key]
                self._held[key] = dataclasses.replace(h, owners=change(h.owners))

    def release(self, obj) -> None:
        """Stop counting ``obj`` now (its memory was freed another way)."""
        with self._lock:
            keys = self._counts(obj)
        for key in keys:
            fin = self._finalizers.get(key)
            if fin is not None:
                fin()  # runs _forget once and detaches


def _owned_now() -> frozenset[str]:
    """The owners of a holding made now: the session the request acts for, if any."""
    owner = current_owner()
    return frozenset() if owner is None else frozenset({owner})


class StandingReservation:
    """A token for room kept by ``MemoryBudget.hold``: ``nbytes`` in all, counted while it lives."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes


BUDGET = MemoryBudget()

# The machine's sizes and the OS calls live in playground.runtime.machine_memory; importers of the
# budget keep finding them here.
__all__ = [
    "ADVICE",
    "BUDGET",
    "HEADROOM_MIN_BYTES",
    "HEADROOM_SHARE",
    "KIND_LABELS",
    "TRIM_AFTER_BYTES",
    "acting_for",
    "current_owner",
    "Holding",
    "MemoryBudget",
    "MemoryBudgetError",
    "StandingReservation",
    "default_budget_bytes",
    "format_bytes",
    "map_large_blocks",
    "resident_bytes",
    "trim",
]
