"""Threads give back their OpenMP workers when their torch work is done.

Workers kept by idle threads make every team's waits sleep, a small forward 2.5 times slower
(``runtime.threads``'s docstring says why).

``releasing(fn)`` is ``fn`` (a function or a generator function, as an event handler is) that gives back its
thread's workers after each call, or after each step a generator makes, in the thread that ran it: Gradio
runs a generator's steps in whichever worker thread is free. ``release()`` does it for the calling thread.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from playground.runtime.threads import release_openmp_workers


def release() -> bool:
    """The calling thread's OpenMP workers end (they start again at its next parallel torch operation)."""
    return release_openmp_workers()


def releasing(fn: Callable) -> Callable:
    """``fn`` giving back its thread's OpenMP workers after each call (each step of a generator). Coroutine
    functions and async generators are returned as they are: they run on the event loop's thread, which
    runs no torch work of its own."""
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return fn
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def steps(*args, **kwargs):
            inner = fn(*args, **kwargs)
            try:
                while True:
                    try:
                        item = next(inner)
                    except StopIteration as stop:
                        return stop.value
                    finally:
                        release_openmp_workers()
                    yield item
            finally:
                inner.close()

        return steps

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            release_openmp_workers()

    return call
