"""The shared model cache: recipe -> built model, inside the process-wide memory budget.

``CACHE.get(recipe)`` builds through ONE build queue (``PLAYGROUND_MAX_BUILDS``, default 1), whoever
asks (/build_model, a /generate after an eviction, "use the trained model"). Before a build it evicts
idle models to make room; if the model still does not fit, ``MemoryBudgetError`` (a MemoryError) says
what holds the memory. A model evicted while a session still uses it stays counted, and is handed out
again instead of being built twice. Idle models are kept up to ``PLAYGROUND_CACHE_BUDGET_GB`` (default 4).
"""

from __future__ import annotations

import gc
import os
import threading
import weakref
from collections import OrderedDict

from playground.engine.config import GPTConfig, check_build_size, check_memory
from playground.engine.model import GPTModel
from playground.engine.quantize import is_int8
from playground.engine.quantize import model_bytes as int8_model_bytes
from playground.runtime.memory import BUDGET, MemoryBudget, format_bytes, trim
from playground.server.recipes import build_from_recipe, build_peak_bytes, model_label, recipe_key


def model_bytes(model: GPTModel) -> int:
    if is_int8(model):
        return int8_model_bytes(model)  # its int8 parameters and their scales (buffers), measured
    return sum(p.numel() * p.element_size() for p in model.parameters())


class ModelCache:
    """Recipe -> built model, least recently used evicted first, inside the process-wide budget.

    Models in the cache are only read (eval mode, no_grad), so sessions can share them; training
    always works on a fresh copy. ``budget_bytes`` caps the idle models kept
    (``PLAYGROUND_CACHE_BUDGET_GB``, default 4); ``budget`` is the memory account every build is
    checked and registered against (the process's ``BUDGET`` unless given); ``max_builds`` builds
    run at once (``PLAYGROUND_MAX_BUILDS``, default 1), the rest wait their turn.
    """

    def __init__(
        self, budget_bytes: int | None = None, *, budget: MemoryBudget | None = None, max_builds: int | None = None
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

    def _lookup(self, key: str) -> GPTModel | None:
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key][0]
            model = self._alive.get(key)
        if model is not None:
            self.put(key, model)
        return model

    def get(self, recipe: dict, *, progress=None) -> GPTModel:
        key = recipe_key(recipe)
        model = self._lookup(key)
        if model is not None:
            return model
        with self._lock:
            build_lock = self._building.setdefault(key, threading.Lock())
        with build_lock:  # two users asking for the same model build it once
            model = self._lookup(key)
            if model is not None:
                return model
            with self._build_slots:  # all builds, whoever asks, wait their turn here
                model = self._build(recipe, progress)
            self.put(key, model)
            return model

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
            self.memory.register(model, model_bytes(model), label, "model")
        return model

    def make_room(self, nbytes: int) -> None:
        """Evict idle models, least recently used first, until ``nbytes`` fit in the budget (or
        nothing idle is left: the reservation that follows then refuses with the holders)."""
        if self.memory.available() >= nbytes:
            return
        gc.collect()  # a traceback cycle may be all that keeps an old model alive
        with self._lock:
            for key in list(self._models):
                if self.memory.available() >= nbytes:
                    break
                model, size = self._models.pop(key)
                ref = weakref.ref(model)
                del model
                if ref() is not None:  # in use by a session: evicting it frees nothing
                    self._models[key] = (ref(), size)
                    self._models.move_to_end(key, last=False)

    def put(self, key: str, model: GPTModel) -> None:
        size = model_bytes(model)
        with self._lock:
            self._models[key] = (model, size)
            self._models.move_to_end(key)
            self._alive[key] = model
            while self.total_bytes() > self.budget_bytes and len(self._models) > 1:
                self._models.popitem(last=False)  # still counted by the budget while in use
        del model
        trim()

    def total_bytes(self) -> int:
        return sum(size for _, size in self._models.values())

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._models)

    def clear(self) -> None:
        with self._lock:
            self._models.clear()
        trim()


CACHE = ModelCache()


def memory_status() -> str:
    """One sentence on the process-wide budget, for a status line or a log."""
    return (
        f"{format_bytes(BUDGET.used())} of the {format_bytes(BUDGET.total)} memory budget in use: {BUDGET.describe()}."
    )
