"""Which kernel and weight layout decode fastest on *this* machine, decided by measuring.

Decoding multiplies every weight matrix by a single row, so its speed is how fast the weights
stream through the chosen kernel. Which kernel or memory order streams fastest differs between
CPUs (a layout 35% faster on one machine, a kernel half as fast on another), so nothing here is
decided by vendor or architecture name: each decision times its candidates on matrices of the
model's own shape, once per process and shape, and caches the winner.

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
import torch.nn.functional as F

from playground.runtime import library_cache, machine_load, native_gemv
from playground.runtime.decision_store import DecisionStore
from playground.runtime.threads import torch_threads

WORKING_SET_BYTES = 64 * 2**20  # > the last-level cache of the CPUs we met (32 MB): weights stream from RAM
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
# a measurement on another thread (the background's, at low priority, took over a minute on a loaded machine).
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


@contextmanager
def decided_only():
    """Within (this thread): a decision not made yet takes the plain candidate without measuring and is
    not cached, so a later measurement still makes it. What a user's request runs under."""
    before = getattr(_LOCAL, "decided_only", None)
    skipped: list[str] = []  # the decisions that took the plain candidate for want of a measurement
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


def measured() -> list[Choice]:
    """Every decision made so far in this process, in the order they were made."""
    with _LOCK:
        return list(_CHOICES.values())


def forget() -> None:
    """Drop the cached decisions (tests; a process whose CPU share changed a lot)."""
    with _LOCK:
        _CHOICES.clear()


# ----------------------------------------------------------------------------------------------
# The working set: enough copies of one weight shape to stream from memory, as a model's do


def copies(shape: tuple[int, ...], dtype: torch.dtype, count: int) -> int:
    """As many matrices of ``shape`` as the model has (``count``), up to the working set's size."""
    one = shape[0] * shape[1] * torch.empty((), dtype=dtype).element_size()
    return max(1, min(count, WORKING_SET_BYTES // one))


def _probe_generator() -> torch.Generator:
    """Measurements draw their inputs from a generator of their own: a user's seeded run never sees
    whether, or when, this process measured a kernel."""
    return torch.Generator().manual_seed(0)


def matrices(shape, dtype, n, in_out: bool) -> list[torch.Tensor]:
    out = []
    gen = torch.Generator().manual_seed(0)
    for _ in range(n):
        w = torch.empty(shape[::-1] if in_out else shape, dtype=dtype).uniform_(-0.02, 0.02, generator=gen)
        out.append(w.t() if in_out else w)  # always (out, in) values, as nn.Linear holds them
    return out


def _gemv_pass(x, weights):
    for w in weights:
        F.linear(x, w)


# ----------------------------------------------------------------------------------------------
# The decisions


def weight_layout(shape: tuple[int, ...], dtype: torch.dtype, count: int) -> Choice:
    """nn.Linear's own (out, in) memory order or its transpose (in, out) -- Hugging Face's Conv1D
    order -- for one-row products with a weight of ``shape`` (out, in), of which a model has ``count``."""
    n = copies(shape, dtype, count)

    def candidates() -> Candidates:
        x = torch.randn(1, shape[1], generator=_probe_generator()).to(dtype)
        plain = matrices(shape, dtype, n, in_out=False)
        transposed = matrices(shape, dtype, n, in_out=True)
        return {"out_in": lambda: _gemv_pass(x, plain), "in_out": lambda: _gemv_pass(x, transposed)}

    name = str(dtype).replace("torch.", "")
    return choose(
        ("weight layout", tuple(shape), dtype, n),
        f"{name} weight layout {tuple(shape)}",
        candidates,
        label=("layout", {"dtype": name, "shape": tuple(shape)}),
    )


def stacked_qkv(emb_dim: int, dtype: torch.dtype, in_out: bool, n_layers: int) -> Choice:
    """Q, K and V from three (d, d) products or from one (3d, d) product with the weights stacked."""
    n = copies((3 * emb_dim, emb_dim), dtype, n_layers)

    def candidates() -> Candidates:
        x = torch.randn(1, 1, emb_dim, generator=_probe_generator()).to(dtype)
        separate = matrices((emb_dim, emb_dim), dtype, 3 * n, in_out)
        stacked = matrices((3 * emb_dim, emb_dim), dtype, n, in_out)
        return {"separate": lambda: _gemv_pass(x, separate), "stacked": lambda: _gemv_pass(x, stacked)}

    name = str(dtype).replace("torch.", "")
    return choose(
        ("stacked qkv", emb_dim, dtype, in_out, n),
        f"{name} Q/K/V projections d={emb_dim}",
        candidates,
        label=("qkv", {"dtype": name, "d": emb_dim}),
    )


def compiled_threads(choice: Choice | None) -> int | None:
    """The threads a ``one_row_kernel`` decision runs the compiled kernel on: 0 for all of the calling
    thread's (torch.get_num_threads at the call), 1 for one, None for the plain product."""
    winner = choice.winner if choice is not None else ""
    return {"compiled": 0, "compiled_1_thread": 1}.get(winner)


def one_row_kernel(shape: tuple[int, int], dtype: torch.dtype, count: int) -> Choice | None:
    """The plain product (``F.linear`` on the weight layout ``weight_layout`` chose) or the compiled
    one-row kernel (native_gemv: W stored (out, in), rows split over torch's threads, or on one
    thread: on a CPU shared with other work, waking a second thread for every product can cost
    more than it brings). None when the compiled kernel is unavailable here (no compiler, a failed
    build or check) or does not handle ``dtype``, and under PLAYGROUND_ACCEL=off (nothing is
    built then): the plain product runs, undecided."""
    if dtype not in native_gemv.DTYPES or not measuring_enabled() or not native_gemv.available():
        return None
    n = copies(shape, dtype, count)

    def candidates() -> Candidates:
        plain_in_out = weight_layout(shape, dtype, count).winner == "in_out"
        x = torch.randn(1, shape[1], generator=_probe_generator()).to(dtype)
        plain = matrices(shape, dtype, n, in_out=plain_in_out)
        rows = matrices(shape, dtype, n, in_out=False)

        def compiled(threads: int):
            for w in rows:
                native_gemv.linear(x, w, None, threads)

        out: Candidates = {"aten": lambda: _gemv_pass(x, plain), "compiled": lambda: compiled(0)}
        if torch.get_num_threads() > 1:
            out["compiled_1_thread"] = lambda: compiled(1)
        return out

    name = str(dtype).replace("torch.", "")
    return choose(
        ("one-row kernel", tuple(shape), dtype, n),
        f"{name} one-row kernel {tuple(shape)}",
        candidates,
        label=("kernel", {"dtype": name, "shape": tuple(shape)}),
    )


def vocabulary_threads(vocab: int) -> Choice | None:
    """All of torch's threads or one for a decode step's work on one row of ``vocab`` logits (a
    softmax, a top-k, a few reductions: the sampler's). Each operation is short, so a second thread
    saves microseconds when it is awake and costs milliseconds when the CPU is busy with other work
    and the thread must wait its turn to wake. None with one thread: nothing to choose."""
    if torch.get_num_threads() < 2:
        return None

    def candidates() -> Candidates:
        logits = torch.randn(vocab, generator=_probe_generator()) * 3

        def work():
            for _ in range(4):
                p = torch.softmax(logits, dim=-1)
                bool(torch.isfinite(logits).all())
                torch.topk(p, 10)
                float(torch.special.entr(p).sum())
                int((p > p[0]).sum())

        def one():
            with torch_threads(1):
                work()

        return {"all": work, "one": one}

    return choose(
        ("vocabulary threads", vocab),
        f"threads for one row of {vocab} logits (the sampler)",
        candidates,
        label=("vocab", {"vocab": vocab}),
    )


def vocabulary_threads_decided(vocab: int) -> int | None:
    """1 if ``vocabulary_threads`` chose one thread (for the calling thread's thread count), else
    None (all threads, or not decided); never measures: what a decode step asks."""
    choice = decided(("vocabulary threads", vocab))
    return 1 if choice is not None and choice.winner == "one" else None
