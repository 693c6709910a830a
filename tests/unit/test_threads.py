"""Training threads run as background work (issue 14): per-thread settings that leave the caller's alone."""

import contextlib
import os
import threading

import pytest
import torch

from playground.runtime.threads import as_background_work, set_thread_count, torch_threads
from tests.helpers import os_threads_named


def test_background_work_changes_only_its_own_thread():
    main_threads = torch.get_num_threads()
    main_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) if hasattr(os, "getpriority") else None
    seen = {}

    def worker():
        before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) if hasattr(os, "getpriority") else None
        seen["settings"] = as_background_work(nice=1, threads=1)
        seen["threads"] = torch.get_num_threads()
        seen["before"] = before
        with torch.no_grad():  # it still computes
            seen["sum"] = float(torch.ones(1000, 1000).sum())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["threads"] == 1 and seen["settings"]["threads"] == 1 and seen["sum"] == 1e6
    assert torch.get_num_threads() == main_threads  # the caller keeps every thread
    if main_nice is not None and seen["settings"]["nice"] is not None:
        assert seen["settings"]["nice"] == min(19, seen["before"] + 1)
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main_nice  # ... and its priority


def test_default_is_one_thread_fewer_never_zero():
    out = {}
    t = threading.Thread(target=lambda: out.update(as_background_work(nice=0)))
    t.start()
    t.join()
    assert out["threads"] == max(1, torch.get_num_threads() - 1)


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="no per-thread priorities here")
def test_the_training_job_thread_uses_it(monkeypatch):
    import playground.server.jobs as jobs

    calls = []
    monkeypatch.setattr(jobs, "as_background_work", lambda: calls.append(threading.current_thread().name))

    class FakeTrainer:
        def run(self, callback, should_stop):
            pass

    job = object.__new__(jobs.TrainingJob)
    job.trainer, job.train_points, job.val_points, job.last_event, job.error = FakeTrainer(), [], [], None, None
    job.done, job._stop = threading.Event(), threading.Event()
    job._run()
    assert calls == [threading.current_thread().name] and job.done.is_set()


def threads_of_a_new_thread() -> int:
    out = []
    t = threading.Thread(target=lambda: out.append(torch.get_num_threads()))
    t.start()
    t.join()
    return out[0]


@pytest.mark.parametrize(
    "setting",
    [
        lambda: set_thread_count(1) or contextlib.nullcontext(),
        lambda: as_background_work(nice=0, threads=1) and contextlib.nullcontext(),
        lambda: torch_threads(1),
    ],
    ids=["set_thread_count", "as_background_work", "torch_threads"],
)
def test_a_threads_own_count_is_not_every_later_threads(setting):
    # torch.set_num_threads in a thread also sets the count every thread started afterwards takes: a sampler
    # pool's one thread each put the decode loop, started later, on one core.
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the process's count (this folder runs on one): new threads take it
    try:
        seen = run_in_a_thread(setting)
        assert seen["own"] == 1 and seen["computed"] and seen["others"] == 2
        assert threads_of_a_new_thread() == 2
        assert torch.get_num_threads() == 2  # and the caller keeps its own
    finally:
        torch.set_num_threads(before)


def run_in_a_thread(setting) -> dict:
    seen: dict = {}

    def worker():
        with setting():
            seen["own"] = torch.get_num_threads()
            seen["computed"] = float(torch.ones(300, 300).sum()) == 90_000.0
            seen["others"] = threads_of_a_new_thread()  # started while this one runs on its own count

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    return seen


# ---------------------------------------------------------------------------------------------
# A thread's OpenMP workers, given back when its torch work is done


def _in_named_thread(name: bytes, work):
    """``work(count)`` in a new thread named ``name`` at the OS level; ``count()`` counts it and its workers."""
    import ctypes

    out = {}

    def run():
        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME
        set_thread_count(2)  # (whatever count earlier tests left new threads)
        out["result"] = work(lambda: os_threads_named(name.decode()))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out["result"]


def _parallel_op() -> float:
    return float(torch.ones(4_000_000).mul_(2).sum())  # elementwise over millions of entries: a parallel region


needs_a_team = pytest.mark.skipif(
    not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2,
    reason="needs Linux and two torch threads",
)


@needs_a_team
def test_release_openmp_workers_ends_the_threads_own_workers_and_the_next_op_starts_them():
    from playground.runtime.threads import release_openmp_workers

    def work(count):
        alone = count()
        value = _parallel_op()
        with_workers = count()
        released = release_openmp_workers()
        after = count()
        again = _parallel_op()
        return alone, with_workers, released, after, value, again, count()

    alone, with_workers, released, after, value, again, restarted = _in_named_thread(b"pg-omp-test", work)
    assert alone == 1 and with_workers > 1  # the parallel operation started workers named as their thread
    assert released and after == 1
    assert value == again == 8_000_000.0 and restarted == with_workers


@needs_a_team
def test_releasing_gives_back_the_workers_after_each_call_and_each_step():
    from playground.server.openmp_workers import releasing

    during = []  # the thread's own count inside each call: its workers were there

    def handler(n, count=None, scale=1.0):
        """A handler's docstring."""
        value = _parallel_op() * scale + n
        if count is not None:
            during.append(count())
        return value

    def steps(n, count=None):
        for i in range(n):
            value = _parallel_op() + i
            if count is not None:
                during.append(count())
            yield value
        return "done"

    wrapped, wrapped_steps = releasing(handler), releasing(steps)
    import inspect

    assert inspect.signature(wrapped) == inspect.signature(handler) and wrapped.__doc__ == handler.__doc__
    assert inspect.isgeneratorfunction(wrapped_steps)  # Gradio streams it as a generator

    def work(count):
        value = wrapped(1, count, scale=0.5)
        after_call = count()
        made, left = [], []
        gen = wrapped_steps(2, count)
        for v in gen:
            made.append(v)
            left.append(count())
        return value, after_call, made, left

    value, after_call, made, left = _in_named_thread(b"pg-omp-wrap", work)
    assert value == 4_000_001.0 and after_call == 1
    assert made == [8_000_000.0, 8_000_001.0] and left == [1, 1]
    assert len(during) == 3 and min(during) > 1

    def fails():
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        releasing(fails)()
    gen = releasing(steps)(3)
    assert next(gen) == 8_000_000.0
    gen.close()  # a closed page: the handler's own generator is closed too
    with pytest.raises(StopIteration):
        next(gen)


def test_releasing_leaves_coroutines_as_they_are():
    from playground.server.openmp_workers import releasing

    async def handler():
        return 1

    assert releasing(handler) is handler


@needs_a_team
def test_the_kernel_timing_thread_gives_back_its_workers_between_shapes():
    # It waits for the next shape for the rest of the process: workers it kept would throttle every team.
    from playground.accel import background

    during = []

    def build():
        before = torch.get_num_threads()
        set_thread_count(2)  # (this folder's tests run on one thread)
        try:
            _parallel_op()
            during.append(os_threads_named("kernel-timing"))
        finally:
            set_thread_count(before)

    assert background.measure_later("test: a parallel build", build, 0)
    assert background.wait_idle(60)
    assert during and during[0] > 1  # the thread and the workers it started
    assert os_threads_named("kernel-timing") == 1


@needs_a_team
def test_starting_a_run_starts_no_openmp_workers_in_the_handlers_thread():
    """A Generate handler's start_run zeroes the run's KV cache on its own thread: thirty handlers of a room
    would otherwise each start workers beside the decode loop's team."""
    from playground.engine.config import GPTConfig
    from playground.engine.model import GPTModel
    from playground.server.recipes import random_recipe
    from playground.server.runs import start_run

    cfg = GPTConfig(vocab_size=50257, context_length=256, emb_dim=64, n_heads=4, n_layers=4, qkv_bias=True)
    model = GPTModel(cfg)
    recipe = random_recipe(cfg, 0)
    start_run(model, recipe, "Hi", max_new_tokens=2, temperature=0, seed=0)[1].close()  # the process's sweeper thread

    def work(count):
        alone = count()
        run, gen = start_run(model, recipe, "Hello there", max_new_tokens=200, temperature=0, seed=0)
        cache = gen._cache.k.numel()  # big enough for a parallel fill (torch's grain: 32,768)
        started = count()
        gen.close()
        return alone, started, cache, torch.get_num_threads()

    alone, started, cache, threads_after = _in_named_thread(b"pg-omp-run", work)
    assert cache > 32_768
    assert alone == started == 1
    assert threads_after == 2  # the thread's own count (_in_named_thread sets 2) is as it was
