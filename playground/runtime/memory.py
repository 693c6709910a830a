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

Freed memory is handed back to the operating system (glibc ``malloc_trim``, and ``machine_memory.map_large_blocks``
called once by the server's entry point), so the process's resident size follows what it holds
instead of its peak. The server's entry point also calls ``BUDGET.count_whole_process()``: from then
on the budget is one for the process's resident size (what the interpreter, torch, gradio and the
allocator hold besides the holdings, measured at every check, plus a headroom for short-lived work).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
import weakref
from collections.abc import Callable

from playground.runtime.holdings import (
    Holding,
    client_busy,
    current_client,
    current_owner,
    describe_holdings,
    in_use,
    over_total,
    wait_seconds,
)
from playground.runtime.machine_memory import (
    default_budget_bytes,
    format_bytes,
    resident_bytes,
    trim,
)
from playground.runtime.reservation import Reservation

TRIM_AFTER_BYTES = 16 * 2**20  # smaller releases are not worth a malloc_trim
# Kept free for what no holding names when the whole process is counted: one decode step's
# activations per generation, gradio's copies of results on their way to the page, short-lived
# tensors of the views, and allocator pages not yet given back. A share of the budget, at least a floor.
HEADROOM_SHARE = 0.1
HEADROOM_MIN_BYTES = 256 * 2**20
# Work one client address may run at once (generations, replays, views taking a ``Reservation``): a
# class's 30 followers behind one NAT address and a batch of 30 decoding runs fit; one anonymous
# client does not fill the server with work no one reads.
MAX_WORK_PER_CLIENT = 48
WAIT_FALLBACK_S = 60.0  # the wait said when nothing in flight is known to end sooner


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
    - ``take(nbytes, what, kind)``: a ``Reservation`` for one piece of work, taken when it starts,
      grown as it allocates, released when it ends (see ``Reservation``); a client address runs at
      most ``max_work_per_client()`` at once.
    - ``usage()`` / ``describe()``: the holders, largest first / counts and sizes in one sentence.

    A refusal says when to try again: the time by which work in flight is expected to give back
    enough (from how long the same kind of work took here), else ``WAIT_FALLBACK_S``.
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
        self._keys_of: dict[int, list[int]] = {}  # id(obj) -> its keys: finding a holding is O(1)
        self._typical_s: dict[str, float] = {}  # kind -> how long a reservation of it lasted lately

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

    def check(self, nbytes: int, what: str) -> None:
        """Refuse ``nbytes`` for ``what`` unless they fit, after making room."""
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
                usage = self.usage()
                raise in_use(
                    what,
                    nbytes,
                    total - free,
                    total,
                    usage,
                    current_owner(),
                    wait_seconds(nbytes - free, usage, WAIT_FALLBACK_S),
                )

    def _make_room(self, nbytes: int) -> None:
        """Drop reclaimable holdings (caches that can be recomputed), oldest first, then ask the
        evictors, until ``nbytes`` fit or nothing more can go. Called without the lock held: the
        evictors take their own locks, and then this budget's."""
        if self._process_floor is not None and nbytes > self.total - self.used():
            # The resident size counts the heap's free pages too until a trim hands them back: nothing is
            # dropped or refused for those
            trim()
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

    def _forget(self, key: int, obj_id: int | None = None) -> None:
        with self._lock:
            holding = self._held.pop(key, None)
            self._finalizers.pop(key, None)
            self._reclaimers.pop(key, None)
            if obj_id is not None and key in (keys := self._keys_of.get(obj_id, [])):
                keys.remove(key)
                if not keys:
                    del self._keys_of[obj_id]
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
            key = self._add(Holding(what, nbytes, kind, _owned_now(), current_client()))
        stack = self._local.__dict__.setdefault("reserved", [])
        stack.append(nbytes)
        try:
            yield
        finally:
            stack.pop()
            self._forget(key)

    def register(self, obj, nbytes: int, what: str, kind: str = "model", reclaim=None) -> None:
        """Count ``obj`` until it is freed. ``reclaim`` (optional, no arguments) drops the last
        reference to it: the budget calls it, oldest first, when a request would not fit otherwise."""
        with self._lock:
            if self._counts(obj):
                return  # already counted
            key = self._add(Holding(what, int(nbytes), kind, _owned_now(), current_client()))
            fin = weakref.finalize(obj, self._forget, key, id(obj))
            fin.atexit = False  # nothing to give back when the process ends
            self._finalizers[key] = fin
            self._keys_of.setdefault(id(obj), []).append(key)
            if reclaim is not None:
                self._reclaimers[key] = reclaim

    # ------------------------------------------------------------------------------------------
    # Reservations: the room of one piece of work, from its start to its end

    def max_work_per_client(self) -> int:
        """Pieces of work one client address may run at once (``PLAYGROUND_MAX_WORK_PER_CLIENT``)."""
        try:
            return max(1, int(os.environ.get("PLAYGROUND_MAX_WORK_PER_CLIENT", MAX_WORK_PER_CLIENT)))
        except ValueError:
            return MAX_WORK_PER_CLIENT

    def take(self, nbytes: int, what: str, kind: str = "generation") -> Reservation:
        """Room for one piece of work that starts now (see ``Reservation``): refused with
        ``MemoryBudgetError`` if ``nbytes`` do not fit after making room, or if the client address
        the request came from already runs ``max_work_per_client()`` pieces of work."""
        nbytes, client = int(nbytes), current_client()
        if client is not None:
            self._refuse_a_busy_client(client, what)
        reservation = Reservation(self, what, kind)
        own = self._over_total_or_own(nbytes, what)
        if not own:
            self._make_room(nbytes)
        with self._lock:
            if not own:
                self._refuse_unless_fits(nbytes, what)
            ends_by = time.monotonic() + self._typical_s.get(kind, 1.0)
            key = self._add(Holding(what, nbytes, kind, _owned_now(), client, ends_by))
            fin = weakref.finalize(reservation, self._end_work, key, kind, time.monotonic(), id(reservation))
            fin.atexit = False
            self._finalizers[key] = fin
            self._keys_of.setdefault(id(reservation), []).append(key)
        reservation._key = key
        return reservation

    def _refuse_a_busy_client(self, client: str, what: str) -> None:
        limit, now = self.max_work_per_client(), time.monotonic()
        with self._lock:
            running = [h for h in self._held.values() if h.client == client and h.ends_by is not None]
        if len(running) >= limit:
            soonest = min((h.ends_by or now) - now for h in running)
            raise client_busy(what, len(running), limit, max(1.0, soonest))

    def _end_work(self, key: int, kind: str, started: float, obj_id: int) -> None:
        """A reservation ended: its room is given back, and how long it lasted tells later refusals
        when to say to try again."""
        lasted = time.monotonic() - started
        with self._lock:
            before = self._typical_s.get(kind)
            self._typical_s[kind] = lasted if before is None else 0.8 * before + 0.2 * lasted
        self._forget(key, obj_id)

    def _resize(self, key: int, nbytes: int, what: str) -> None:
        """A reservation holds ``nbytes`` from now: more is checked first (refused if it does not fit)."""
        with self._lock:
            held = self._held.get(key)
            if held is None:
                return  # released meanwhile
            more = nbytes - held.nbytes
        if more > 0 and not self._over_total_or_own(more, what):
            self._make_room(more)
        with self._lock:
            held = self._held.get(key)
            if held is None:
                return
            more = nbytes - held.nbytes
            if more > 0 and not self._own_reserved():
                self._refuse_unless_fits(more, what)
            self._held[key] = dataclasses.replace(held, nbytes=nbytes)
        if more < 0 and -more >= TRIM_AFTER_BYTES:
            trim()

    def expect_end(self, key: int, seconds: float) -> None:
        with self._lock:
            held = self._held.get(key)
            if held is not None:
                self._held[key] = dataclasses.replace(held, ends_by=time.monotonic() + max(0.0, seconds))

    def held_bytes(self, key: int) -> int:
        with self._lock:
            held = self._held.get(key)
            return 0 if held is None else held.nbytes

    def is_registered(self, obj) -> bool:
        with self._lock:
            return bool(self._counts(obj))

    def _counts(self, obj) -> list[int]:
        """The keys under which ``obj`` is counted (callers hold the lock)."""
        keys = self._keys_of.get(id(obj), ())
        return [
            k
            for k in keys
            if (f := self._finalizers.get(k)) is not None and (p := f.peek()) is not None and p[0] is obj
        ]

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


BUDGET = MemoryBudget()
