"""Background work (training) leaves the CPU to interactive work (generation) first.

A training job and a generation in one process otherwise split the cores evenly, and on a 2-core
machine both run their OpenMP teams on the same cores, spinning against each other: a user's tokens
came out at a fraction of their speed. ``as_background_work()``, called at the start of a training
thread, gives that thread (and the OpenMP workers it starts later, which inherit it) a lower
scheduling priority, and one intra-op thread fewer than the process default. Both are per thread:
generation keeps every core and the normal priority; training still uses whatever is idle.
``torch_threads(n)`` runs short work on fewer threads.
"""

from __future__ import annotations

import contextlib
import os
import threading

import torch

BACKGROUND_NICE = 10  # CFS weight 110 against 1024 at nice 0: about a tenth of a contested core


def as_background_work(nice: int = BACKGROUND_NICE, threads: int | None = None) -> dict:
    """Lower the calling thread's priority and torch's intra-op threads for it; returns what was set.
    Never raises: a platform without per-thread priorities just keeps the thread count change."""
    n = threads if threads is not None else max(1, torch.get_num_threads() - 1)
    torch.set_num_threads(n)  # per thread: the OpenMP setting of the calling thread only
    applied = None
    if hasattr(os, "setpriority") and hasattr(threading, "get_native_id"):
        try:  # Linux: a thread id is a PRIO_PROCESS target of its own
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
            applied = os.getpriority(os.PRIO_PROCESS, tid)
        except OSError:
            pass
    return {"threads": n, "nice": applied}


@contextlib.contextmanager
def torch_threads(n: int | None):
    """Within: the calling thread runs torch's operations on ``n`` intra-op threads (restored after;
    None changes nothing). For short work, such as the sampler's few operations on one row of
    logits, waking a second thread can cost more than it saves: on a CPU shared with other
    processes, far more."""
    before = torch.get_num_threads()
    if n is None or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
