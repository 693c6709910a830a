"""The shared model cache: recipe -> built model, inside the process-wide memory budget.

``CACHE.get(recipe)`` builds through ONE build queue (``PLAYGROUND_MAX_BUILDS``, default 1), whoever
asks (/build_model, a /generate after an eviction, "use the trained model"). Idle models are evicted
for any request the budget would otherwise refuse (a build, a generation, an export, a replay, a
training: the cache is one of the budget's evictors); if it still does not fit, ``MemoryBudgetError``
(a MemoryError) says what holds the memory. A model evicted while a session still uses it stays
counted, and is handed out again instead of being built twice. Idle models are kept up to half the
memory budget (``IDLE_SHARE``), and at most ``PLAYGROUND_CACHE_BUDGET_GB`` (default 4).

``CACHE.get(recipe, session=id)`` also gives that session a lease: its model is kept (not idle)
while memory allows, and is the session's in the budget: a refusal the session reads names it (and
its build), and says other sessions' models only as counts and sizes. A lease holds no room for a
generation: a generation takes its room when it starts and gives it back when it ends
(``runs.generation_room``), so idle sessions hold nothing but their (shared) model. A session's
lease moves with its next model, and ends after ``PLAYGROUND_IDLE_MINUTES`` (default 15) without
use. When memory is short, idle models go first, then the models of other sessions' leases, least
recently used first (the lease ends; the model is built again when its session comes back), before
anyone is refused. One client address keeps at most ``PLAYGROUND_MAX_SESSIONS_PER_CLIENT`` (default
64) leases: its oldest ends when it opens another.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass

from playground.accel import held_bytes, stale
from playground.engine.config import GPTConfig
from playground.engine.memory_check import check_memory
from playground.engine.model import GPTModel
from playground.engine.quantize import is_int8
from playground.engine.quantize import model_bytes as int8_model_bytes
from playground.engine.sizes import check_build_size
from playground.runtime.holdings import acting_for, current_client, current_owner
from playground.runtime.machine_memory import format_bytes, trim
from playground.runtime.memory import BUDGET, MemoryBudget
from playground.server.recipes import build_from_recipe, build_peak_bytes, model_label, recipe_key
from playground.server.runs import IDLE_SECONDS

IDLE_SHARE = 0.5  # of the memory budget: the most idle models may hold
COLLECT_EVERY_S = 30.0  # the least time between two full garbage collections to make room
MAX_SESSIONS_PER_CLIENT = 64  # leases one client address keeps: a classroom behind one NAT address fits


def max_sessions_per_client() -> int:
    try:
        return max(1, int(os.environ.get("PLAYGROUND_MAX_SESSIONS_PER_CLIENT", MAX_SESSIONS_PER_CLIENT)))
    except ValueError:
        return MAX_SESSIONS_PER_CLIENT


def weight_bytes(model: GPTModel) -> int:
    """A model's own parameters (an int8 model's scales too): its size, as the Model tab says it."""
    if is_int8(model):
        return int8_model_bytes(model)  # its int8 parameters and their scales (buffers), measured
    return sum(p.numel() * p.element_size() for p in model.parameters())


def model_bytes(model: GPTModel) -> int:
    """What a built model holds in the budget: its weights, and what ``accelerate`` keeps beside them (a
    stacked Q/K/V copy in each attention where this machine's decisions stack them, ``accel.held_bytes``)."""
    return weight_bytes(model) + held_bytes(model)


@dataclass
class Lease:
    """A session's hold on its model (kept, so not idle while memory allows), and who asked."""

    key: str
    model: GPTModel
    expires: float
    client: str | None = None  # the address it came from, where the app saw one


class ModelCache:
    """Recipe -> built model, least recently used evicted first, inside the process-wide budget.

    Models in the cache are only read (eval mode, no_grad), so sessions can share them; training
    always works on a fresh copy. Idle models (cached, not leased) hold at most ``idle_limit()``:
    ``IDLE_SHARE`` of the budget, and no more than ``budget_bytes`` (``PLAYGROUND_CACHE_BUDGET_GB``,
    default 4); ``budget`` is the memory account every build is checked and registered against (the
    process's ``BUDGET`` unless given), and the cache evicts idle models for any request it would
    refuse; ``max_builds`` builds run at once (``PLAYGROUND_MAX_BUILDS``, default 1), the rest wait
    their turn. ``lease_seconds``: how long a session's lease lasts without use.
    """

    def __init__(
        self,
        budget_bytes: int | None = None,
        *,
        budget: MemoryBudget | None = None,
        max_builds: int | None = None,
        lease_seconds: float = IDLE_SECONDS,
    ):
        if budget_bytes is None:
            budget_bytes = int(float(os.environ.get("PLAYGROUND_CACHE_BUDGET_GB", "4")) * 2**30)
        if max_builds is None:
            max_builds = int(os.environ.get("PLAYGROUND_MAX_BUILDS", "1"))
        self.budget_bytes = budget_bytes
        self.memory = BUDGET if budget is None else budget
        self._models: OrderedDict[str, tuple[GPTModel, int]] = OrderedDict()
        # Models evicted while someone still uses them: handed out again rather than built twice.
        self._alive: weakref.WeakValueDictionary[str, GPTModel] = weakref.WeakValueDictionary()
        self._lock = threading.RLock()
        self._building: dict[str, threading.Lock] = {}
        self._build_slots = threading.BoundedSemaphore(max(1, max_builds))
        self._leases: dict[str, Lease] = {}  # session id -> its lease
        self._collected = float("-inf")  # when make_room last ran a full garbage collection
        self.lease_seconds = lease_seconds
        self.memory.add_evictor(self.make_room)  # any request the budget would refuse evicts idle models

    def _lookup(self, key: str) -> GPTModel | None:
        with self._lock:
            if key in self._models:
                if stale(self._models[key][0]):  # built before its shape's kernels were measured: build anew
                    del self._models[key]
                    self._alive.pop(key, None)
                    return None
                self._models.move_to_end(key)
                return self._models[key][0]
            model = self._alive.get(key)
            if model is not None and stale(model):
                self._alive.pop(key, None)
                return None
        if model is not None:
            self.put(key, model)
        return model

    def get(self, recipe: dict, *, progress=None, session: str | None = None) -> GPTModel:
        """The model ``recipe`` names, built if needed; ``session``: the session that will use it
        takes (or renews) its lease on it."""
        with acting_for(session) if session else contextlib.nullcontext():
            return self._get(recipe, progress, session)

    def _get(self, recipe: dict, progress, session: str | None) -> GPTModel:
        key = recipe_key(recipe)
        model = self._lookup(key)
        if model is None:
            with self._lock:
                build_lock = self._building.setdefault(key, threading.Lock())
            with build_lock:  # two users asking for the same model build it once
                model = self._lookup(key)
                if model is None:
                    with self._build_slots:  # all builds, whoever asks, wait their turn here
                        model = self._build(recipe, progress)
                    self.put(key, model)
        if session:
            self.lease(session, key, model, model_label(recipe))
        return model

    def lease(self, session: str, key: str, model: GPTModel, label: str | None = None) -> Lease:
        """Give ``session`` a lease on ``model`` (its previous lease ends), or renew the one it has.
        The client address the request came from keeps at most ``max_sessions_per_client()``
        leases: its least recently used one ends first. (``label`` is kept for callers.)"""
        now = time.monotonic()
        self.end_expired_leases(now)
        client = current_client()
        with self._lock:
            old = self._leases.get(session)
            if old is not None and old.key == key:
                old.expires, old.client = now + self.lease_seconds, client or old.client
                return old
            self._leases.pop(session, None)
            crowded = self._oldest_over_cap(client, session)
            lease = Lease(key, model, now + self.lease_seconds, client)
            self._leases[session] = lease
        for other, ended in crowded:
            self.memory.drop_owner(ended.model, other)
        if old is not None and old.model is not model:
            self.memory.drop_owner(old.model, session)
        self.memory.add_owner(model, session)  # a refusal the session reads names it
        if crowded:
            self._keep_idle_within_limit()
        return lease

    def _oldest_over_cap(self, client: str | None, session: str) -> list[tuple[str, Lease]]:
        """End the client's least recently used leases until one more fits under the cap (callers
        hold the lock); the ended (session, lease) pairs."""
        if client is None:
            return []
        mine = sorted(
            ((s, lease) for s, lease in self._leases.items() if lease.client == client and s != session),
            key=lambda item: item[1].expires,
        )
        over = len(mine) + 1 - max_sessions_per_client()
        ended = mine[: max(0, over)]
        for s, _ in ended:
            del self._leases[s]
        return ended

    def client_leases(self, client: str | None) -> int:
        """How many leases the client address holds."""
        with self._lock:
            return sum(1 for lease in self._leases.values() if lease.client == client)

    def end_expired_leases(self, now: float | None = None) -> int:
        """End every lease unused for ``lease_seconds``: its model becomes idle."""
        now = time.monotonic() if now is None else now
        with self._lock:
            ended = [s for s, lease in self._leases.items() if lease.expires <= now]
            leases = [(s, self._leases.pop(s)) for s in ended]
        for session, lease in leases:
            self.memory.drop_owner(lease.model, session)
        if leases:
            self._keep_idle_within_limit()
        return len(leases)

    def end_lease(self, session: str) -> bool:
        """End ``session``'s lease now (the session ended); whether it had one."""
        with self._lock:
            lease = self._leases.pop(session, None)
        if lease is None:
            return False
        self.memory.drop_owner(lease.model, session)
        self._keep_idle_within_limit()
        return True

    def end_leases_of(self, key: str, keep: str | None = None) -> int:
        """End every lease on the model ``key`` but ``keep``'s (the requester's own): memory is short,
        and other sessions' leases give way before anyone is refused."""
        with self._lock:
            ended = [
                (s, self._leases.pop(s)) for s, lease in list(self._leases.items()) if lease.key == key and s != keep
            ]
        for session, lease in ended:
            self.memory.drop_owner(lease.model, session)
        return len(ended)

    def _leased_keys(self) -> set[str]:
        with self._lock:
            return {lease.key for lease in self._leases.values()}

    def _build(self, recipe: dict, progress) -> GPTModel:
        label = model_label(recipe)
        if recipe.get("kind") == "random":  # too big for the whole budget, or over the build caps?
            cfg = GPTConfig.from_dict(recipe["config"])
            check_memory(cfg, recipe.get("dtype", "float32"), self.memory.total)
            check_build_size(cfg)
        peak = build_peak_bytes(recipe)
        self.make_room(peak)
        with self.memory.reserve(peak, f"building {label}"):  # refused here if it cannot fit
            model = build_from_recipe(recipe, progress=progress)
            with acting_for(None):  # the cache's, shared: a session owns it while it leases it
                self.memory.register(model, model_bytes(model), label, "model")
        return model

    def make_room(self, nbytes: int) -> None:
        """Evict idle models, least recently used first, until ``nbytes`` fit in the budget; then the
        models of other sessions' leases, least recently used first (their leases end). What is left
        is in use (a generation, a view) or the requester's own: the reservation that follows then
        refuses with the holders. The budget calls it for every request that would not fit; it holds
        the cache's lock only while it picks a model, never while it asks the budget."""
        self.end_expired_leases()
        if self.memory.available() >= nbytes:
            return
        self._evict_idle(nbytes)
        keep, tried = current_owner(), set()
        while self.memory.available() < nbytes:
            with self._lock:
                last_use: dict[str, float] = {}
                for s, lease in self._leases.items():
                    if s != keep:
                        last_use[lease.key] = max(last_use.get(lease.key, 0.0), lease.expires)
                key = min((k for k in last_use if k not in tried), key=last_use.__getitem__, default=None)
            if key is None:
                return
            tried.add(key)
            self.end_leases_of(key, keep)
            self._evict_idle(nbytes)

    def _collect(self) -> bool:
        """Whether a full garbage collection may run now: it costs 0.1–0.4 s beside many sessions'
        records, so at most one every ``COLLECT_EVERY_S`` (a flood of refused requests stays fast)."""
        now = time.monotonic()
        with self._lock:
            if now - self._collected < COLLECT_EVERY_S:
                return False
            self._collected = now
            return True

    def _evict_idle(self, nbytes: int) -> None:
        tried: set[str] = set()
        while self.memory.available() < nbytes:
            leased = self._leased_keys()
            with self._lock:
                key = next((k for k in self._models if k not in leased and k not in tried), None)
                if key is None:
                    return
                tried.add(key)
                model, size = self._models.pop(key)
            ref = weakref.ref(model)
            del model
            if ref() is not None:  # a cycle (a finished generation's, a traceback's) may be all that holds it
                gc.collect(1)  # the young ones: milliseconds
                if ref() is not None and self._collect():
                    gc.collect()
            kept = ref()
            if kept is not None:  # in use (a generation, a view): evicting it frees nothing
                with self._lock:
                    self._models[key] = (kept, size)
                    self._models.move_to_end(key, last=False)
            del kept  # the loop's next eviction must not find this one held from here

    def put(self, key: str, model: GPTModel) -> None:
        size = model_bytes(model)
        with self._lock:
            self._models[key] = (model, size)
            self._models.move_to_end(key)
            self._alive[key] = model
        del model
        self._keep_idle_within_limit()

    def idle_limit(self) -> int:
        """The most idle models may hold: ``IDLE_SHARE`` of the memory budget, at most ``budget_bytes``."""
        return min(self.budget_bytes, int(IDLE_SHARE * self.memory.total))

    def idle_bytes(self) -> int:
        leased = self._leased_keys()
        with self._lock:
            return sum(size for key, (_, size) in self._models.items() if key not in leased)

    def _keep_idle_within_limit(self) -> None:
        """Drop idle models, least recently used first, until they hold no more than ``idle_limit()``
        (one in use by a generation is still counted by the budget, and handed out again if asked for)."""
        limit, leased = self.idle_limit(), self._leased_keys()
        with self._lock:
            for key in list(self._models):
                if self.idle_bytes() <= limit:
                    break
                if key not in leased:
                    del self._models[key]
        trim()

    def total_bytes(self) -> int:
        return sum(size for _, size in self._models.values())

    def keys(self) -> list[str]:
        """The recipes of the cached models and of the leased ones (a leased model over the idle
        limit lives outside the cache's list; its checkpoint file must stay all the same)."""
        with self._lock:
            return list(self._models) + sorted(self._leased_keys() - set(self._models))

    def checkpoints_in_use(self) -> list[str]:
        """Checkpoint files of the models held (cached or leased): the disk budget never deletes these."""
        return [path for path in (json.loads(key).get("path") for key in self.keys()) if path]

    def clear(self) -> None:
        with self._lock:
            self._models.clear()
            leases = list(self._leases.items())
            self._leases.clear()
        for session, lease in leases:
            self.memory.drop_owner(lease.model, session)
        trim()


CACHE = ModelCache()


def memory_status() -> str:
    """One sentence on the process-wide budget, for a status line or a log."""
    return (
        f"{format_bytes(BUDGET.used())} of the {format_bytes(BUDGET.total)} memory budget in use: {BUDGET.describe()}."
    )
