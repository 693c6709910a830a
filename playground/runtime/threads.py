"""Background work (training) leaves the CPU to interactive work (generation) first.

A training job and a generation in one process otherwise split the cores evenly, and on a 2-core
machine both run their OpenMP teams on the same cores, spinning against each other: a user's tokens
came out at a fraction of their speed. ``as_background_work()``, called at the start of a training
thread, gives that thread (and the OpenMP workers it starts later, which inherit it) a lower
scheduling priority, and one intra-op thread fewer than the process default. Both are per thread:
generation keeps every core and the normal priority; training still uses whatever is idle.
``torch_threads(n)`` runs short work on fewer threads.

Each thread that runs a parallel torch operation gets OpenMP worker threads of its own, kept until it ends.
libgomp counts every such worker in the process, and once they outnumber the cores, every team's waits spin
100 times and then sleep: a small forward in a thread beside another that kept its workers takes 2.5 times as
long (docs/benchmarks.md). ``release_openmp_workers()`` gives the calling thread's workers back; threads that
run torch work now and then (the app's event handlers, the decode loop when no run is left, the thread that
built the model) call it when their work is done, so the workers alive are those of threads computing now.

``torch.set_num_threads`` is not per thread alone: besides the calling thread's OpenMP setting it sets the
count every thread started afterwards takes at its first torch operation: called in a pool's initializer or
a training thread, it would put every later thread -- the decode loop among them -- on that one core.
``set_thread_count`` sets the calling thread's count through OpenMP itself and leaves the process's count
for new threads as it was; every per-thread setting here goes through it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from functools import cache

import torch

from playground.runtime.library_cache import torch_openmp

BACKGROUND_NICE = 10  # CFS weight 110 against 1024 at nice 0: about a tenth of a contested core


def as_background_work(nice: int = BACKGROUND_NICE, threads: int | None = None) -> dict:
    """Lower the calling thread's priority and torch's intra-op threads for it; returns what was set.
    Never raises: a platform without per-thread priorities just keeps the thread count change."""
    n = threads if threads is not None else max(1, torch.get_num_threads() - 1)
    set_thread_count(n)
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
    set_thread_count(n)
    try:
        yield
    finally:
        set_thread_count(before)


def set_thread_count(n: int) -> None:
    """The calling thread runs torch's operations on ``n`` intra-op threads from now on; threads started
    later keep the process's count (see the module's docstring). Where torch's OpenMP runtime cannot be
    reached (another parallel backend), ``torch.set_num_threads`` does it, process count included."""
    n = max(1, int(n))
    torch.get_num_threads()  # torch's own set-up of this thread first: it would overwrite ours at its first op
    omp_set = _omp_set_num_threads()
    if omp_set is not None:
        omp_set(n)
        if torch.get_num_threads() == n:  # torch reads OpenMP's setting back: it took
            return
    torch.set_num_threads(n)


PR_SET_NAME = 15
OMP_PAUSE_SOFT = 1  # omp_pause_resource_t: the workers end, the runtime stays ready to start them again


def name_os_thread(name: str) -> None:
    """The calling thread's name as the OS shows it (``top -H``, ``perf``, /proc) and as the OpenMP workers it
    starts take it; Linux only (its first 15 bytes), nothing elsewhere."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def release_openmp_workers() -> bool:
    """End the calling thread's OpenMP worker threads (``omp_pause_resource_all``, OpenMP 5.0); its next
    parallel torch operation starts them again (a thread start, tens of microseconds). A no-op without a
    team, inside a parallel region, or where torch's OpenMP runtime cannot be reached. Whether it ran."""
    pause = _omp_pause_resource_all()
    return pause is not None and pause(OMP_PAUSE_SOFT) == 0


@cache
def _omp_pause_resource_all():
    """``omp_pause_resource_all`` of torch's OpenMP runtime, called holding the interpreter lock (ending one
    or two workers is quick, and a thread that gave the lock up might wait behind another for it), or None."""
    return _torch_openmp_function("omp_pause_resource_all", [ctypes.c_int], ctypes.c_int, ctypes.PyDLL)


@cache
def _omp_set_num_threads():
    """``omp_set_num_threads`` of the OpenMP runtime torch has loaded (never loads one), or None."""
    return _torch_openmp_function("omp_set_num_threads", [ctypes.c_int], None)


def _torch_openmp_function(name: str, argtypes: list, restype, loader=ctypes.CDLL):
    """The function ``name`` of the OpenMP runtime torch has loaded (never loads one), or None."""
    if "OpenMP" not in torch.__config__.parallel_info().split("ATen parallel backend:")[-1]:
        return None
    path = torch_openmp()
    if path is None:
        return None
    try:
        fn = getattr(loader(str(path), mode=os.RTLD_NOLOAD | os.RTLD_LOCAL), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = argtypes, restype
    return fn
