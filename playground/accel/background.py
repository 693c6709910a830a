"""Kernel decisions for a new model shape, measured on a thread of their own, never in a user's request.

A model built for a user is accelerated with ``measure=False``: decisions this machine already made are
read, any other runs its plain path. ``measure_later`` then times that shape here, on a model of the same
config with random weights (held in the memory budget while it exists, dropped after), at background
priority; the decisions go to this machine's file (``kernels.keep_decisions``), so the next build of that
shape is fast from the start.
"""

from __future__ import annotations

import atexit
import gc
import logging
import queue
import threading
from collections.abc import Callable

import torch

from playground.runtime.memory import BUDGET
from playground.runtime.threads import as_background_work, name_os_thread, release_openmp_workers

log = logging.getLogger(__name__)

_JOBS: queue.Queue = queue.Queue()
_SEEN: set[str] = set()  # shapes queued in this process: each is measured once
_LOCK = threading.Lock()
_THREAD: threading.Thread | None = None
_IDLE = threading.Event()
_IDLE.set()
_EXITING = threading.Event()
_COMPLETED = [0]  # measurements finished in this process
EXIT_WAIT_S = 60.0  # the longest a process's exit waits for the measurement under way


def measure_later(key: str, build: Callable[[], object], nbytes: int) -> bool:
    """Queue one measurement under ``key`` (a shape's name): ``build()`` makes a model of that shape with
    its decisions measured (``accelerate(model)``), and the model is dropped; ``nbytes`` is held in the
    memory budget meanwhile. Returns False when that key was queued before in this process."""
    global _THREAD
    with _LOCK:
        if key in _SEEN:
            return False
        _SEEN.add(key)
        _IDLE.clear()
        _JOBS.put((key, build, nbytes))
        if _THREAD is None or not _THREAD.is_alive():
            _THREAD = threading.Thread(target=_work, name="kernel-timing", daemon=True)
            _THREAD.start()
    return True


def _finish_at_exit() -> None:
    # A measurement cut off by the interpreter's exit aborts the process inside OpenMP: let it end first.
    _EXITING.set()
    thread = _THREAD
    if thread is not None and thread.is_alive():
        with _LOCK:
            while not _JOBS.empty():
                _JOBS.get_nowait()
        _IDLE.wait(EXIT_WAIT_S)


atexit.register(_finish_at_exit)


def completed() -> int:
    """How many measurements finished in this process (a model built before the last one may be stale)."""
    return _COMPLETED[0]


def wait_idle(timeout: float | None = None) -> bool:
    """Wait until every queued measurement is done (tests, the bench); True if they are."""
    return _IDLE.wait(timeout)


def _work() -> None:
    # Low priority, but torch's thread count of a request: a decision is kept per thread count.
    as_background_work(threads=torch.get_num_threads())
    name_os_thread("kernel-timing")  # (its OpenMP workers take the name too)
    while True:
        try:
            key, build, nbytes = _JOBS.get(timeout=5.0)
        except queue.Empty:
            with _LOCK:
                if _JOBS.empty():
                    _IDLE.set()
            continue
        try:
            with BUDGET.reserve(nbytes, f"timing the kernels of {key}", kind="build"):
                build()
        except MemoryError:
            log.info("kernel timing for %s skipped: not enough memory now", key)
        except Exception:  # a measurement never takes the server down; the shape keeps its plain path
            if _EXITING.is_set():
                log.info("kernel timing for %s cut short by the process's exit", key)
            else:
                log.exception("kernel timing for %s failed", key)
        finally:
            gc.collect()
            release_openmp_workers()  # this thread waits for the next shape from here: its workers go
            _COMPLETED[0] += 1
            with _LOCK:
                if _JOBS.empty():
                    _IDLE.set()
