"""A stand-in for the ``spaces`` package as it behaves on a ZeroGPU Space, for tests on this CPU machine.

spaces 0.51.3 (``spaces/zero/wrappers.py``) runs a ``@spaces.GPU`` function in a worker process forked from
the app, its arguments and results pickled through ``multiprocessing`` queues; a generator's items come back
one by one, and closing it in the app sets an event that the worker checks after each item; the worker
lives on after a call (tensors come back as shared-memory handles that the app opens through it). ``GPU``
here does the same minus the scheduler (no network, no CUDA): what crosses the boundary must pickle, nothing
the work changes reaches the app, and ``worker_pid``/``items`` say where and how far the work ran."""

from __future__ import annotations

import functools
import inspect
import multiprocessing
import os
import traceback

_CTX = multiprocessing.get_context("fork")
worker_pid = _CTX.Value("i", 0)  # the process the last call's work ran in
items = _CTX.Value("i", 0)  # items the worker made in the last generator call
durations: list = []  # the duration each call asked for, as ZeroGPU would read it


def GPU(task=None, *, duration=None, size=None):
    if task is None:
        return functools.partial(GPU, duration=duration, size=size)
    wrapper = _generator if inspect.isgeneratorfunction(task) else _regular
    return functools.wraps(task)(wrapper(task, duration))


def _asked(duration, args, kwargs):
    durations.append(duration(*args, **kwargs) if callable(duration) else duration)


def _regular(task, duration):
    def handler(*args, **kwargs):
        _asked(duration, args, kwargs)
        args_q, res_q, done = _CTX.SimpleQueue(), _CTX.SimpleQueue(), _CTX.Event()
        worker = _CTX.Process(target=_run_regular, args=(task, args_q, res_q, done), daemon=True)
        worker.start()
        args_q.put((args, kwargs))
        ok, value = res_q.get()
        done.set()
        worker.join(30)
        if not ok:
            raise RuntimeError(value)
        return value

    return handler


def _run_regular(task, args_q, res_q, done):
    worker_pid.value = os.getpid()
    args, kwargs = args_q.get()
    try:
        res_q.put((True, task(*args, **kwargs)))
    except Exception:
        res_q.put((False, traceback.format_exc()))
    done.wait(30)


def _generator(task, duration):
    def handler(*args, **kwargs):
        _asked(duration, args, kwargs)
        args_q, res_q, stop, done = _CTX.SimpleQueue(), _CTX.SimpleQueue(), _CTX.Event(), _CTX.Event()
        worker = _CTX.Process(target=_run_generator, args=(task, args_q, res_q, stop, done), daemon=True)
        worker.start()
        args_q.put((args, kwargs))
        try:
            while True:
                kind, value = res_q.get()
                if kind == "end":
                    return
                if kind == "error":
                    raise RuntimeError(value)
                try:
                    yield value
                except GeneratorExit:
                    stop.set()
                    raise
        finally:
            done.set()
            worker.join(5)
            if worker.is_alive():  # blocked writing an item nobody reads any more
                worker.terminate()
                worker.join(5)

    return handler


def _run_generator(task, args_q, res_q, stop, done):
    worker_pid.value = os.getpid()
    items.value = 0
    args, kwargs = args_q.get()
    try:
        gen = task(*args, **kwargs)
        for item in gen:
            items.value += 1
            if stop.is_set():
                gen.close()
                break
            res_q.put(("item", item))
        res_q.put(("end", None))
    except Exception:
        res_q.put(("error", traceback.format_exc()))
    done.wait(30)
