"""Who gets the memory budget's room: idle models give it up to any request and hold at most half of
it, idle sessions hold no generation's room and their models give way before anyone is refused, and a
server counts its whole resident size (playground.runtime.memory, playground.server.model_cache)."""

import gc
import threading
import time

import pytest
import torch

from playground import PRESETS
from playground.runtime.holdings import MemoryBudgetError
from playground.runtime.machine_memory import resident_bytes
from playground.runtime.memory import MemoryBudget
from playground.server import jobs, runs
from playground.server.model_cache import IDLE_SHARE, ModelCache, model_bytes
from playground.server.recipes import build_from_recipe, build_peak_bytes, random_recipe, recipe_key
from playground.server.runs import generation_bytes, start_run

NANO = PRESETS["nano"]
TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. " * 60


@pytest.fixture(scope="module")
def one():
    """Bytes of one nano model, and of its build's peak."""
    recipe = random_recipe(NANO, seed=0)
    return model_bytes(build_from_recipe(recipe)), build_peak_bytes(recipe)


def fill(cache, seeds):
    for seed in seeds:
        cache.get(random_recipe(NANO, seed=seed))
        assert cache.idle_bytes() <= cache.idle_limit()


def test_idle_models_never_hold_more_than_half_the_budget(one):
    model, peak = one
    budget = MemoryBudget(9 * model + peak)
    cache = ModelCache(budget=budget)  # PLAYGROUND_CACHE_BUDGET_GB's 4 GiB would hold them all
    assert cache.idle_limit() == int(IDLE_SHARE * budget.total) < cache.budget_bytes
    fill(cache, range(1, 9))
    gc.collect()
    kept = len(cache.keys())
    assert kept == int(IDLE_SHARE * budget.total) // model  # the newest that fit in half
    assert budget.used() == kept * model  # the rest is freed, not only forgotten


@pytest.mark.parametrize("request_kind", ["export", "generation", "training"])
def test_any_request_evicts_idle_models(one, request_kind, monkeypatch):
    """A 3 GB budget whose idle cache held 2.93 GB refused an export "wait for other generations"
    with nothing running: now whatever asks for the room gets it from idle models."""
    model, peak = one
    budget = MemoryBudget(9 * model + peak)
    cache = ModelCache(budget=budget)
    fill(cache, range(1, 9))
    idle = cache.idle_bytes()
    assert idle > 0.4 * budget.total
    need = budget.total - model  # fits only if the idle models go
    assert budget.available() < need
    if request_kind == "export":
        with budget.reserve(need, "exporting a run", "export"):
            assert budget.used() <= budget.total
    elif request_kind == "generation":  # start_run checks, then registers, the generation's KV cache
        generator = build_from_recipe(random_recipe(NANO, seed=0))
        monkeypatch.setattr(runs, "generation_bytes", lambda m, n, new=0: need - model)
        monkeypatch.setattr(runs, "BUDGET", budget)
        budget.register(generator, model, "the model generating", "model")
        run, gen = start_run(
            generator, random_recipe(NANO), "Hi", max_new_tokens=2, temperature=0, top_k=0, top_p=1, seed=0
        )
        assert [h.kind for h in budget.usage()].count("generation") == 1
        del run, gen
    else:  # a training job reserves its model, gradients, AdamW state and activations
        monkeypatch.setattr(jobs, "BUDGET", budget)
        job = jobs.TrainingJob(NANO, TEXT, "pasted", steps=2, lr=1e-3, batch_size=1, block_size=32)
        assert [h.kind for h in budget.usage()].count("training") == 1
        del job
    assert cache.idle_bytes() < idle


def test_sessions_told_ready_hold_no_room_and_give_way_when_memory_is_short(one, monkeypatch):
    """Each "Ready" once kept a whole context's generation room for 15 minutes: 563 one-call sessions
    filled a 3 GB budget. Now a lease holds only its (shared) model; five users each build a model
    under a budget that holds three, every build succeeds (the least recently used sessions' models
    give way), and every session generates, rebuilding its model if it went."""
    model, peak = one
    gen_room = generation_bytes(build_from_recipe(random_recipe(NANO, seed=0)), 5, 2)
    budget = MemoryBudget(3 * model + 2 * gen_room + peak)
    monkeypatch.setattr(runs, "BUDGET", budget)
    cache = ModelCache(budget=budget)
    for user in range(5):
        cache.get(random_recipe(NANO, seed=user + 1), session=f"user{user}")
        assert not [h for h in budget.usage() if h.kind in ("reserved", "generation")]
    gc.collect()
    assert budget.used() <= budget.total and len(cache.keys()) < 5  # the oldest sessions' models went
    for user in range(5):
        m = cache.get(random_recipe(NANO, seed=user + 1), session=f"user{user}")
        run, gen = start_run(
            m, random_recipe(NANO, seed=user + 1), "Hello", max_new_tokens=2, temperature=0, top_k=0, top_p=1, seed=0
        )
        assert [h.kind for h in budget.usage()].count("generation") == 1
        assert len(list(gen)) == 2
        del run, gen, m
        gc.collect()
        assert not [h for h in budget.usage() if h.kind == "generation"]  # given back when it ended


def test_a_lease_moves_with_the_session_and_ends_when_unused(one):
    model, peak = one
    budget = MemoryBudget(20 * model + peak)
    cache = ModelCache(budget=budget, lease_seconds=0.2)
    cache.get(random_recipe(NANO, seed=1), session="a")
    cache.get(random_recipe(NANO, seed=2), session="a")  # the session built another model
    assert not [h for h in budget.usage() if h.kind == "reserved"]  # a lease keeps no room
    assert cache.idle_bytes() == model  # seed 1 is idle now
    time.sleep(0.25)
    assert cache.end_expired_leases() == 1
    assert cache.idle_bytes() == 2 * model


def test_counting_the_whole_process_counts_its_resident_size():
    gc.collect()  # what earlier tests left behind is freed before the floor is measured, not after
    budget = MemoryBudget(resident_bytes() + 2**30)
    assert budget.used() == 0
    budget.count_whole_process()
    before = budget.available()
    assert before <= 2**30 - budget.headroom()
    assert "server process" in budget.describe()
    # 256 MiB no holding names: large against what other threads of the process free meanwhile
    blob = torch.ones(256 * 2**20, dtype=torch.uint8)
    grown = resident_bytes()
    assert budget.available() <= budget.total - grown - budget.headroom() + 16 * 2**20
    assert budget.available() <= before - 192 * 2**20
    with pytest.raises(MemoryBudgetError, match="server process"):
        budget.check(before, "a request that fitted before")
    del blob


def test_evicting_from_many_threads_does_not_deadlock(one):
    model, peak = one
    budget = MemoryBudget(6 * model + peak)
    cache = ModelCache(budget=budget)
    errors = []

    def user(seed):
        try:
            for i in range(3):
                cache.get(random_recipe(NANO, seed=10 * seed + i))
                with budget.reserve(2 * model, "an export", "export"):
                    pass
        except MemoryBudgetError:
            pass
        except Exception as e:  # collected, reported below
            errors.append(e)

    threads = [threading.Thread(target=user, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads) and not errors


def test_a_leased_model_over_the_idle_limit_is_kept_and_listed(one):
    model, peak = one
    budget = MemoryBudget(10 * model + peak)
    cache = ModelCache(model // 2, budget=budget)  # idle models may hold half a model: none
    recipe = random_recipe(NANO, seed=1)
    cache.get(recipe, session="s")
    gc.collect()
    assert cache.idle_bytes() == 0 and budget.used() >= model  # kept for its session, not idle
    assert recipe_key(recipe) in cache.keys()  # so its checkpoint file is never cleaned away


def test_a_whole_process_budget_trims_the_heap_before_it_refuses(monkeypatch):
    import playground.runtime.memory as memory

    trims = []
    monkeypatch.setattr(memory, "trim", lambda: trims.append(1) or False)
    budget = MemoryBudget(resident_bytes() + 2**30)
    budget.check(2**20, "a request that fits")
    budget.count_whole_process()
    budget.check(2**20, "a request that fits")
    assert trims == []  # fits: the heap is left as it is
    with pytest.raises(MemoryBudgetError):
        budget.check(budget.total, "a request over what is free")
    assert trims == [1]  # the free heap pages handed back before anything is dropped or refused
