"""A kernel decision timed while other work held the machine's cores is used, and measured again when it is
quiet (issue 33: decisions made under load cost GPT-2 small a fifth of its decode speed on the Xeon)."""

import time

import pytest
import torch

from playground.runtime import kernels

KEY = ("a test decision", 7)


def spin(seconds: float):
    def work():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    return work


@pytest.fixture
def store(tmp_path):
    kernels.forget()
    kept = kernels.keep_decisions(tmp_path)
    yield kept
    kernels.stop_keeping_decisions()
    kernels.forget()


def stored_key():
    return (*KEY, torch.get_num_threads())


def test_each_decision_records_the_share_of_its_core_it_had(store):
    kernels.choose(KEY, "spinning", {"a": spin(0.002), "b": spin(0.004)})
    assert store.get(stored_key())["share"] >= 0.5  # (the thread ran all along: the share of a loaded core at worst)
    kernels.forget()
    other = ("a sleeping decision", 1)
    kernels.choose(other, "sleeping", {"a": lambda: time.sleep(0.002), "b": lambda: time.sleep(0.004)})
    assert store.get((*other, torch.get_num_threads()))["share"] < kernels.SHARED  # off the core: as if held by others


def test_a_shared_decision_is_used_meanwhile_and_measured_again_when_quiet(store, monkeypatch):
    store.put(stored_key(), {"winner": "b", "seconds": {"a": 2e-3, "b": 1e-3}, "measured": True, "share": 0.3})
    kernels.forget()
    calls = []
    candidates = {"a": lambda: calls.append("a"), "b": lambda: (calls.append("b"), time.sleep(0.001))}
    monkeypatch.setattr(kernels.threads, "load_per_cpu", lambda: 0.1)
    with kernels.decided_only() as skipped:  # a user's request: read as it is, nothing timed
        read = kernels.choose(KEY, "test decision", candidates)
    assert read.winner == "b" and calls == [] and skipped == []
    assert kernels.decided(KEY).winner == "b"  # what the forward pass reads meanwhile
    again = kernels.choose(KEY, "test decision", candidates)  # a measuring build: the app's start, the background
    assert calls and again.winner == "a"  # "b" sleeps: measured now, "a" is faster
    assert store.get(stored_key())["winner"] == "a"
    calls.clear()
    assert kernels.choose(KEY, "test decision", candidates) is again and calls == []  # once


def test_a_shared_decision_is_not_measured_again_while_the_machine_is_still_busy(store, monkeypatch):
    store.put(stored_key(), {"winner": "b", "seconds": {"a": 2e-3, "b": 1e-3}, "measured": True, "share": 0.3})
    kernels.forget()
    calls = []
    candidates = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    monkeypatch.setattr(kernels.threads, "load_per_cpu", lambda: 1.5)
    with kernels.decided_only() as skipped:
        assert kernels.choose(KEY, "test decision", candidates).winner == "b"
    assert skipped == []
    assert kernels.choose(KEY, "test decision", candidates).winner == "b" and calls == []


def test_a_decision_measured_on_its_own_core_or_before_shares_were_kept_is_read_as_it_is(store, monkeypatch):
    monkeypatch.setattr(kernels.threads, "load_per_cpu", lambda: 0.0)
    for entry in ({"share": 0.95}, {}):  # (a file written before the share was recorded: trusted)
        store.put(stored_key(), {"winner": "b", "seconds": {"a": 2e-3, "b": 1e-3}, "measured": True, **entry})
        kernels.forget()
        calls: list = []
        candidates = {"a": calls.append, "b": calls.append}
        choice = kernels.choose(KEY, "test decision", {k: (lambda f=f: f(1)) for k, f in candidates.items()})
        assert choice.winner == "b" and calls == []
