"""Training threads run as background work (issue 14): per-thread settings that leave the caller's alone."""

import contextlib
import os
import threading

import pytest
import torch

from playground.runtime.threads import as_background_work, set_thread_count, torch_threads


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
