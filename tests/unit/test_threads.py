"""Training threads run as background work (issue 14): per-thread settings that leave the caller's alone."""

import os
import threading

import pytest
import torch

from playground.runtime.threads import as_background_work


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
