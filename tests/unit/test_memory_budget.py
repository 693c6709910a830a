"""The process-wide memory budget (playground.runtime.memory), the cache building inside it, idle runs being
released, build size caps, and builds that leave torch's global random generator alone."""

import gc
import threading
import time

import psutil
import pytest
import torch

from playground import PRESETS
from playground.engine.config import ConfigError, GPTConfig
from playground.engine.sizes import MAX_LAYERS, check_build_size
from playground.runtime.holdings import MemoryBudgetError
from playground.runtime.memory import BUDGET, MemoryBudget
from playground.server import jobs, model_cache, runs
from playground.server.model_cache import ModelCache, model_bytes
from playground.server.recipes import build_from_recipe, random_recipe, recipe_key
from playground.server.runs import RunReleasedError, get_run, release_idle_runs, run_attention, start_run
from playground.training.trainer import build_model

NANO = PRESETS["nano"]

PROC = psutil.Process()


def rss() -> int:
    return PROC.memory_info().rss


class Blob:
    """Something the budget can count (weakref-able)."""


def test_a_shared_model_is_counted_once():
    budget = MemoryBudget(10 * 2**30)
    cache = ModelCache(budget=budget)
    a = cache.get(random_recipe(NANO, seed=1))
    b = cache.get(random_recipe(NANO, seed=1))  # a second session asking for the same model
    assert a is b
    budget.register(a, model_bytes(a), "again")  # registering the same object again changes nothing
    assert budget.used() == model_bytes(a)
    assert [h.kind for h in budget.usage()] == ["model"]


def test_an_evicted_model_in_use_stays_counted_until_freed_and_is_not_built_twice(monkeypatch):
    budget = MemoryBudget(10 * 2**30)
    one = model_bytes(build_from_recipe(random_recipe(NANO, seed=0)))
    cache = ModelCache(int(1.5 * one), budget=budget)  # keeps one idle model
    held = cache.get(random_recipe(NANO, seed=1))  # a generation still uses it
    cache.get(random_recipe(NANO, seed=2))  # evicts seed 1 from the cache ...
    assert recipe_key(random_recipe(NANO, seed=1)) not in cache.keys()
    assert budget.used() == 2 * one  # ... but it is alive, so it is still counted

    builds = []
    real = model_cache.build_from_recipe
    monkeypatch.setattr(model_cache, "build_from_recipe", lambda r, **kw: builds.append(r) or real(r, **kw))
    assert cache.get(random_recipe(NANO, seed=1)) is held  # handed out again, not rebuilt
    assert builds == []

    cache.clear()
    del held
    gc.collect()
    assert budget.used() == 0


def test_the_per_model_check_uses_the_same_budget(monkeypatch):
    blob = Blob()
    BUDGET.register(blob, BUDGET.available() - 10**6, "a test's stand-in", "export")
    try:
        with pytest.raises(MemoryBudgetError, match=r"in use by 1 export \("):  # counted, not named
            build_model(NANO)
    finally:
        BUDGET.release(blob)
    assert build_model(NANO).cfg == NANO


def test_reservations_count_while_held_and_nested_checks_on_the_same_thread_pass():
    budget = MemoryBudget(1000)
    with budget.reserve(600, "a build"):
        assert budget.used() == 600
        budget.check(900, "the model that build is making")  # same thread: counted by its reservation
        with pytest.raises(MemoryBudgetError, match="1 build in progress"):
            threading_error = []
            t = threading.Thread(target=lambda: _catch(threading_error, budget.check, 600, "another"))
            t.start()
            t.join()
            raise threading_error[0]
    assert budget.used() == 0


def _catch(out, fn, *args):
    try:
        fn(*args)
    except Exception as e:
        out.append(e)


def test_all_builds_wait_for_one_build_slot(monkeypatch):
    active, peak = [0], [0]
    lock = threading.Lock()
    real = model_cache.build_from_recipe

    def counting(recipe, **kw):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            time.sleep(0.05)
            return real(recipe, **kw)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(model_cache, "build_from_recipe", counting)
    cache = ModelCache(budget=MemoryBudget(10 * 2**30), max_builds=1)
    threads = [threading.Thread(target=cache.get, args=(random_recipe(NANO, seed=s),)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1 and len(cache.keys()) == 4


def test_a_generation_counts_its_kv_cache_until_it_is_gone():
    model = build_from_recipe(random_recipe(NANO, seed=0))
    run, gen = start_run(
        model,
        {"kind": "test"} | random_recipe(NANO),
        "Hi",
        max_new_tokens=3,
        temperature=1.0,
        top_k=None,
        top_p=None,
        seed=1,
    )
    kv = 2 * NANO.n_layers * NANO.context_length * NANO.emb_dim * 4
    mine = [h for h in BUDGET.usage() if h.kind == "generation" and "nano" in h.what]
    assert mine and mine[0].nbytes >= kv
    list(gen)
    del gen
    gc.collect()
    assert not [h for h in BUDGET.usage() if h.kind == "generation" and "nano" in h.what]


# ----------------------------------------------------------------------------------------------
# Runs released when idle


def test_idle_runs_release_their_tokens_and_attention():
    model = build_from_recipe(random_recipe(NANO, seed=0))
    run, gen = start_run(
        model, random_recipe(NANO), "To be", max_new_tokens=4, temperature=1.0, top_k=None, top_p=None, seed=3
    )
    run.steps.extend(gen)
    assert get_run(run.id) is run
    run_attention(model, run)
    attention = [h for h in BUDGET.usage() if h.kind == "attention" and "a run of" in h.what]
    assert attention
    time.sleep(0.1)
    assert release_idle_runs(idle_seconds=0.05) >= 1  # the app's timeout, shortened
    assert run.released and run.id not in runs.RUNS
    with pytest.raises(RunReleasedError, match="released after .* idle to free memory; generate again"):
        get_run(run.id)
    with pytest.raises(RunReleasedError, match="generate again"):
        _ = run.steps
    with pytest.raises(RunReleasedError):
        run_attention(model, run)
    gc.collect()
    assert run._trace_cache is None
    assert len([h for h in BUDGET.usage() if h.kind == "attention" and "a run of" in h.what]) < len(attention)


def test_runs_kept_by_id_live_on_the_server_and_a_new_run_replaces_the_old():
    model = build_from_recipe(random_recipe(NANO, seed=0))
    kw = dict(max_new_tokens=1, temperature=1.0, top_k=None, top_p=None, seed=0)
    first_id = start_run(model, random_recipe(NANO), "A", replaces=None, **kw)[0].id  # the state keeps the id only
    gc.collect()
    first = get_run(first_id)
    release_idle_runs(idle_seconds=60)
    assert not first.released  # in use a moment ago
    second, _ = start_run(model, random_recipe(NANO), "B", replaces=first_id, **kw)
    assert first.released and get_run(second.id) is second
    with pytest.raises(RunReleasedError, match="generate again"):
        get_run(first_id)


def test_a_run_held_only_by_the_old_style_state_goes_with_it():
    model = build_from_recipe(random_recipe(NANO, seed=0))
    state = {
        "run": start_run(
            model, random_recipe(NANO), "A", max_new_tokens=1, temperature=1.0, top_k=None, top_p=None, seed=0
        )[0]
    }
    run_id = state["run"].id
    assert get_run(run_id) is state["run"]
    state = {"run": None}  # the next generation replaced it
    gc.collect()
    assert run_id not in runs.RUNS


def test_reclaimable_attention_makes_room_before_a_refusal():
    budget = MemoryBudget(1000)
    holder = {"blob": Blob()}
    budget.register(holder["blob"], 700, "a run's attention", "attention", reclaim=lambda: holder.pop("blob"))
    with budget.reserve(600, "a build"):  # fits once the attention (recomputable) is dropped
        assert "blob" not in holder
    assert budget.used() == 0


# ----------------------------------------------------------------------------------------------
# Build caps


def test_thousands_of_layers_are_refused_by_the_build_caps():
    cfg = GPTConfig(context_length=1024, emb_dim=128, n_heads=4, n_layers=10_000)  # 10.6 GB: under many budgets
    with pytest.raises(ConfigError, match=f"at most {MAX_LAYERS:,} layers"):
        build_model(cfg, memory_budget=10**13)  # fits that budget: the cap is what refuses, before allocating
    with pytest.raises(ConfigError, match="this server builds at most"):
        ModelCache(budget=MemoryBudget(10**13)).get(random_recipe(cfg, seed=0))


def test_gpt2_xl_sized_configs_pass_the_build_caps_and_100_layers_of_it_do_not():
    for name in ("gpt2-xl", "gpt2-large"):
        check_build_size(PRESETS[name])
    check_build_size(PRESETS["gpt2-xl"].replace(tie_weights=False))
    with pytest.raises(ConfigError, match="parameters"):
        check_build_size(PRESETS["gpt2-xl"].replace(n_layers=100))
    with pytest.raises(ConfigError, match="emb_dim"):
        check_build_size(GPTConfig(emb_dim=16384, n_heads=64, n_layers=1))


# ----------------------------------------------------------------------------------------------
# Randomness: builds use generators of their own


def test_a_random_build_leaves_the_global_generator_untouched():
    torch.manual_seed(1234)
    state = torch.random.get_rng_state()
    a = build_from_recipe(random_recipe(NANO, seed=7))
    assert torch.equal(torch.random.get_rng_state(), state)
    b = build_from_recipe(random_recipe(NANO, seed=7))
    assert torch.equal(a.tok_emb.weight, b.tok_emb.weight)  # the seed still decides the weights


def test_concurrent_builds_do_not_change_another_users_unseeded_sampling():
    torch.manual_seed(99)
    alone = [torch.rand(1).item() for _ in range(200)]
    reference = {s: build_from_recipe(random_recipe(NANO, seed=s)).tok_emb.weight.clone() for s in (1, 2)}

    torch.manual_seed(99)
    drawn, built = [], {}

    def sampler():
        for _ in range(200):
            drawn.append(torch.rand(1).item())
            time.sleep(0.0005)

    def builder(seed):
        for _ in range(3):
            built[seed] = build_from_recipe(random_recipe(NANO, seed=seed)).tok_emb.weight

    threads = [threading.Thread(target=sampler)] + [threading.Thread(target=builder, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert drawn == alone
    assert all(torch.equal(built[s], reference[s]) for s in (1, 2))


def test_a_training_job_is_counted_until_it_is_gone():
    from playground.training.train_config import estimate_training_memory_bytes

    text = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. " * 60
    gc.collect()
    before = [h for h in BUDGET.usage() if h.kind == "training"]  # jobs of other tests still finishing
    job = jobs.TrainingJob(NANO, text, "pasted", steps=2, lr=1e-3)
    mine = [h for h in BUDGET.usage() if h.kind == "training"]
    assert len(mine) == len(before) + 1
    assert estimate_training_memory_bytes(NANO, job.tcfg) in [h.nbytes for h in mine]
    assert "training a 2-layer d64 model" in [h.what for h in mine]
    del job, mine
    gc.collect()
    assert len([h for h in BUDGET.usage() if h.kind == "training"]) <= len(before)
