"""Which kernel and weight layout decode fastest on *this* machine, decided by measuring.

Decoding multiplies every weight matrix by a single row, so its speed is how fast the weights
stream through the chosen kernel. Which kernel or memory order streams fastest differs between
CPUs (a layout 35% faster on one machine, a kernel half as fast on another), so nothing here is
decided by vendor or architecture name: each decision times its candidates on matrices of the
model's own shape, once per process and shape, and caches the winner. This module is the chooser and its
tables; the decode path's decisions themselves are in ``decode_decisions``.

A measurement is short (tens of milliseconds; the working set is sized past the CPU caches, as a
whole model's weights are) and happens when a caller asks for it (engine.decode_paths.
optimize_for_decode, after a model is built or converted), never inside a forward pass: that one
reads a decision with ``decided`` and takes the plain path if none was made. ``measured()`` lists
every decision with its figures (``python -m bench`` prints them, the Model tab shows them).
``PLAYGROUND_ACCEL=off`` skips the measurements and uses each decision's first candidate (the plain
path), for reproducing a result exactly. A decision kept for the machine (``keep_decisions``) carries the
share of the machine other work took while it was measured (``machine_load``): one measured under load is
measured again by a later measuring call, never by a user's request (``LOADED``, ``RETRIES``).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from playground.runtime import library_cache, machine_load
from playground.runtime.decision_store import DecisionStore

REPS = 7
MIN_REPS = 3
BUDGET_S = 0.25  # per decision, after the warm-up; a loaded machine gets fewer repetitions, not a longer wait
SLOW_FACTOR = 4.0
TIE = 0.05  # medians this close are decided by the fastest pass (``_winner``)
# A kept decision measured while other work took this share of the machine (``machine_load``) or more is
# measured again by the next measuring call (a later start, the background timing), at most RETRIES times
# in all: then the least loaded of its measurements stands.
LOADED = 0.25
RETRIES = 3


@dataclass(frozen=True)
class Choice:
    decision: str  # e.g. "float32 weight layout (3072, 768)"
    winner: str
    seconds: dict[str, float] = field(default_factory=dict)  # candidate -> median seconds of one pass
    measured: bool = True  # False: PLAYGROUND_ACCEL=off, or nothing to measure on
    # What was decided, as data an interface can word in its own language: a kind ("layout",
    # "qkv", "int8", "rows") and the fields of ``decision`` ({"shape": (3072, 768)}, ...).
    kind: str = ""
    fields: dict = field(default_factory=dict)
    # The share of the machine other work took while it was measured (``machine_load``; None: unknown)
    others: float | None = None

    def speedup(self) -> float:
        """The winner's advantage over the slowest candidate (1.0 when not measured)."""
        if not self.measured or len(self.seconds) < 2:
            return 1.0
        return max(self.seconds.values()) / self.seconds[self.winner]

    def summary(self) -> str:
        if not self.measured:
            return f"{self.decision}: {self.winner} (not measured)"
        times = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in self.seconds.items())
        loaded = f"; other work took {self.others:.0%} of the machine" if self.loaded() else ""
        return f"{self.decision}: {self.winner} ({times}{loaded})"

    def loaded(self) -> bool:
        """Whether other work took ``LOADED`` of the machine or more while it was measured."""
        return self.others is not None and self.others >= LOADED


_CHOICES: dict[tuple, Choice] = {}
_LOCK = threading.RLock()  # the tables of decisions only: never held while candidates are built or timed
# One measurement at a time (two would time each other's load), re-entered by a decision whose candidates ask
# for another. Held apart from _LOCK: a forward's ``decided`` and a request's plain candidate never wait behind
# a measurement on another thread (the background's runs at low priority: on a loaded machine it lasts long).
_MEASURING = threading.RLock()
_STORE: DecisionStore | None = None  # this machine's decisions on disk, once keep_decisions was called
_LOCAL = threading.local()  # .decided_only: choose returns the plain candidate instead of measuring
# Each decision's plain candidate (its first) by the first element of its key: what a decision not made yet
# takes under ``decided_only`` without building the candidates' test matrices.
PLAIN = {
    "weight layout": "out_in",
    "stacked qkv": "separate",
    "one-row kernel": "aten",
    "vocabulary threads": "all",
    "many-row product": "torch",
    "native decode step": "plain",
    "int8 kernel": "dequantize",
    "int8 dynamic kernel": "dequantize",
    "weight streams": "four_rows",
}


def keep_decisions(folder=None) -> DecisionStore:
    """From now on read decisions from this machine's file in ``folder`` (default: the compiled kernels'
    cache folder) and write each new one there: measured once per machine, not once per process."""
    global _STORE
    with _LOCK:
        _STORE = DecisionStore(folder if folder is not None else library_cache.cache_dir())
        return _STORE


def keeping_decisions() -> bool:
    return _STORE is not None


def stop_keeping_decisions() -> None:
    global _STORE
    with _LOCK:
        _STORE = None


class Skipped(list):
    """The decisions a ``decided_only`` block found unmade, by name, and ``keys``: the keys they are made
    under, so a caller can ask later whether a measurement has made one since (``any_made``)."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[tuple] = []


@contextmanager
def decided_only():
    """Within (this thread): a decision not made yet takes the plain candidate without measuring and is
    not cached, so a later measurement still makes it. What a user's request runs under."""
    before = getattr(_LOCAL, "decided_only", None)
    skipped = Skipped()  # the decisions that took the plain candidate for want of a measurement
    _LOCAL.decided_only = skipped
    try:
        yield skipped
    finally:
        _LOCAL.decided_only = before


def deciding_only() -> bool:
    """Whether the calling thread is inside ``decided_only``: a decision not made yet takes its plain candidate."""
    return getattr(_LOCAL, "decided_only", None) is not None


def measuring_enabled() -> bool:
    """Off with ``PLAYGROUND_ACCEL=off``, the one switch of every speed path."""
    return os.environ.get("PLAYGROUND_ACCEL", "on").strip().lower() not in ("off", "0", "no")


Candidates = dict[str, Callable[[], object]]


def choose(
    key: tuple,
    decision: str,
    candidates: Candidates | Callable[[], Candidates],
    *,
    reps: int = REPS,
    budget: float = BUDGET_S,
    timer: Callable[[], float] = time.perf_counter,
    label: tuple[str, dict] = ("", {}),
) -> Choice:
    """``candidates`` maps a name to one timed pass, or is a function that builds that map (called
    only when the decision is not cached yet, so its test matrices are made only then). Time each candidate ``reps`` times, interleaved (a burst of load from another process then
    hits every candidate alike; at least MIN_REPS, then until ``budget`` seconds are spent), and
    keep the one with the smallest median. Cached under ``key`` and the calling thread's torch
    thread count (the winner may change with it):
    the first call measures, later ones return the same Choice. ``label`` is (kind, fields): what
    ``decision`` says, as data."""
    key = (*key, torch.get_num_threads())
    with _LOCK:
        known, stored = _known(key, decision, label)
    if known is not None:
        return known
    with _MEASURING:
        with _LOCK:
            if key in _CHOICES:  # measured on another thread meanwhile
                return _CHOICES[key]
        choice = _measure(key, decision, candidates, reps, budget, timer, label, stored)
        with _LOCK:
            _CHOICES[key] = choice
        return choice


def _known(key: tuple, decision: str, label: tuple) -> tuple[Choice | None, dict | None]:
    """(the Choice ``key`` has without a measurement, or None; this machine's kept record of it), under _LOCK."""
    if key in _CHOICES:
        return _CHOICES[key], None
    stored = _STORE.get(key) if _STORE is not None else None
    skipped = getattr(_LOCAL, "decided_only", None)
    again = stored is not None and _measure_again(stored)
    if stored is not None and (skipped is not None or not again):
        choice = _stored_choice(decision, stored, label)
        if not again:  # (one read under decided_only stays open for the next measuring call)
            _CHOICES[key] = choice
        return choice, stored
    if skipped is not None and measuring_enabled() and key[0] in PLAIN:
        if decision not in skipped:
            skipped.append(decision)
        if key not in skipped.keys:
            skipped.keys.append(key)
        return Choice(decision, PLAIN[key[0]], {}, False, *label), stored
    return None, stored


def _measure(key, decision: str, candidates, reps: int, budget: float, timer, label: tuple, stored) -> Choice:
    """The candidates timed (or the first, with measuring off or nothing to race) and the result kept for the
    machine; under _MEASURING, _LOCK only to keep it."""
    if callable(candidates):
        candidates = candidates()
    names = list(candidates)
    if not measuring_enabled() or len(names) < 2:
        return Choice(decision, names[0], {}, False, *label)
    with machine_load.others() as load:
        seconds, times = _timed(candidates, reps, budget, timer)
    choice = Choice(decision, _winner(seconds, times), seconds, True, label[0], label[1], others=load.share)
    if stored is not None:  # measured again (the kept one was loaded): the quieter measurement stands
        kept = _stored_choice(decision, stored, label)
        choice = kept if (kept.others or 0.0) < (choice.others or 0.0) else choice
    with _LOCK:
        if _STORE is not None:
            tries = int(stored.get("tries", 1)) + 1 if stored is not None else 1
            fields = {"winner": choice.winner, "seconds": choice.seconds, "measured": True}
            _STORE.put(key, {**fields, "others": choice.others, "tries": tries})
    return choice


def _timed(candidates: Candidates, reps: int, budget: float, timer) -> tuple[dict[str, float], dict[str, list[float]]]:
    """(each candidate's median seconds, every timed pass of the ones that raced)."""
    names = list(candidates)
    warm = {}
    for name, fn in candidates.items():  # warm-up: kernel selection, page faults, packing
        t0 = timer()
        fn()
        warm[name] = timer() - t0
    # A candidate 4x slower than the best even on its first pass cannot win: its warm-up
    # time is its figure, and the repetitions are spent on the others.
    best = min(warm.values())
    racing = [n for n in names if warm[n] <= SLOW_FACTOR * best] or names
    times: dict[str, list[float]] = {n: [] for n in racing}
    start = timer()
    for rep in range(reps):
        order = racing[rep % len(racing) :] + racing[: rep % len(racing)]  # rotate who goes first
        for name in order:
            t0 = timer()
            candidates[name]()
            times[name].append(timer() - t0)
        if rep >= MIN_REPS - 1 and timer() - start > budget:
            break
    return {n: float(statistics.median(times[n])) if n in times else warm[n] for n in names}, times


def _stored_others(stored: dict) -> float | None:
    """The share of the machine other work took while a kept decision was measured (None: not recorded)."""
    others = stored.get("others")
    return float(others) if isinstance(others, (int, float)) and not isinstance(others, bool) else None


def _stored_choice(decision: str, stored: dict, label: tuple) -> Choice:
    measured = bool(stored.get("measured", True))
    others = _stored_others(stored)
    return Choice(decision, stored["winner"], stored["seconds"], measured, label[0], label[1], others=others)


def _measure_again(stored: dict) -> bool:
    """Whether a kept decision was measured under load and may be measured again (``LOADED``, ``RETRIES``)."""
    others = _stored_others(stored)
    loaded = others is not None and others >= LOADED
    return loaded and int(stored.get("tries", 1)) < RETRIES and measuring_enabled()


def _winner(seconds: dict[str, float], times: dict[str, list[float]]) -> str:
    """The smallest median, unless the best two are within TIE of each other: then the one with the
    fastest single pass. On a loaded machine (other processes, or the page of the app that is being
    built, drawing its progress on the same cores) the load slows every candidate alike and the
    medians tie; the least disturbed passes still show which is faster once the load is gone, and
    the process keeps its decision after that."""
    ranked = sorted(seconds, key=lambda n: seconds[n])
    first, second = ranked[0], ranked[1]
    if seconds[second] <= seconds[first] * (1 + TIE) and times.get(first) and times.get(second):
        return min((first, second), key=lambda n: min(times[n]))
    return first


def decided(key: tuple) -> Choice | None:
    """The Choice ``choose`` made under ``key`` for the calling thread's thread count, or None if none
    was made yet. Never measures: what a forward pass asks, which must not start a measurement."""
    with _LOCK:
        return _CHOICES.get((*key, torch.get_num_threads()))


def any_made(keys) -> bool:
    """Whether a decision is made now, in this process or in this machine's file, under any of ``keys``
    (a ``Skipped``'s): a model built without it would take a faster path if built again."""
    with _LOCK:
        return any(key in _CHOICES or (_STORE is not None and _STORE.get(key) is not None) for key in keys)


def measured() -> list[Choice]:
    """Every decision made so far in this process, in the order they were made."""
    with _LOCK:
        return list(_CHOICES.values())


def forget() -> None:
    """Drop the cached decisions (tests; a process whose CPU share changed a lot)."""
    with _LOCK:
        _CHOICES.clear()
