"""Memory with models of real size: four 76 MB models against a budget that holds two and a half, a
build refused before it allocates, and a 1 GB model evicted from the cache giving its memory back to the
system (the budget's accounting on nano models: tests/unit/test_memory_budget.py)."""

import gc

import psutil
import pytest

from playground.engine.config import GPTConfig
from playground.engine.memory_check import check_memory
from playground.engine.sizes import count_parameters_analytic
from playground.formats import format_bytes
from playground.runtime.holdings import MemoryBudgetError
from playground.runtime.machine_memory import map_large_blocks, trim
from playground.runtime.memory import BUDGET, MemoryBudget
from playground.server.model_cache import CACHE as APP_CACHE
from playground.server.model_cache import ModelCache, model_bytes, weight_bytes
from playground.server.recipes import build_from_recipe, build_peak_bytes, random_recipe
from playground.server.runs import start_run

# ~76 MB in float32: big enough for RSS to see, small enough to build in a second
SMALL = GPTConfig(context_length=256, emb_dim=256, n_heads=4, n_layers=8)

PROC = psutil.Process()


def rss() -> int:
    return PROC.memory_info().rss


@pytest.mark.slow
def test_rss_drops_after_a_model_is_evicted_and_freed():
    cfg = GPTConfig(emb_dim=1024, n_heads=16, n_layers=16)  # ~253 M parameters: 1.01 GB in float32
    cache = ModelCache(budget=MemoryBudget(8 * 2**30))
    map_large_blocks()  # as the server's entry point (app.py) does
    gc.collect()
    trim()
    before = rss()
    model = cache.get(random_recipe(cfg, seed=0))
    size = model_bytes(model)
    assert size > 0.9e9
    built = rss()
    assert built - before > 0.8 * size
    del model
    cache.clear()
    gc.collect()
    after = rss()
    assert built - after >= 0.7 * size, (before, built, after)


def test_a_build_over_the_remaining_budget_is_refused_before_allocating_counting_the_holders():
    size = model_bytes(build_from_recipe(random_recipe(SMALL, seed=0)))
    # Room for one build (with what accelerate copies beside it where this process decided the shape) but
    # not for a second beside a model in use: the reservation follows the copies (tests/integration/test_accel_memory).
    peak = build_peak_bytes(random_recipe(SMALL, seed=2))
    budget = MemoryBudget(max(int(1.6 * size), peak, check_memory(SMALL, budget_bytes=10**12)))
    assert size + peak > budget.total
    cache = ModelCache(budget=budget)
    in_use = cache.get(random_recipe(SMALL, seed=1))  # a session is generating with it
    gc.collect()
    before = rss()
    with pytest.raises(MemoryBudgetError) as err:
        cache.get(random_recipe(SMALL, seed=2))
    message = str(err.value)
    # The holder is another user's model: counted and sized, never named.
    assert "memory budget" in message and f"in use by 1 model ({format_bytes(size)})" in message, message
    assert weight_bytes(in_use) == 4 * count_parameters_analytic(SMALL)  # 77.00 MB, and any stacked Q/K/V copy
    assert "seed 1" not in message
    assert "PLAYGROUND_MEMORY_BUDGET_GB" in message
    assert rss() - before < size / 2  # refused before the weights were allocated
    # once the first model is no longer used, the cache evicts it and the build fits
    del in_use
    model = cache.get(random_recipe(SMALL, seed=2))
    assert model.cfg == SMALL and budget.used() == size


def test_four_large_models_scaled_down_stay_inside_the_budget(monkeypatch):
    """Issue 10's report, at 1/40 scale: four sessions build four different models, then all
    generate at once. The budget holds one model in use and the build of another with half a model
    to spare (2.5 models where a build copies nothing), so some requests are refused with a
    message, and memory stays bounded instead of growing until the kernel kills the server."""
    size = model_bytes(build_from_recipe(random_recipe(SMALL, seed=0)))
    peak = build_peak_bytes(random_recipe(SMALL, seed=1))  # with what accelerate copies, where decided
    APP_CACHE.clear()  # idle models of earlier tests would be evicted for these requests: room not counted here
    gc.collect()
    base_used = BUDGET.used()
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", str((base_used + 1.5 * size + peak) / 2**30))
    cache = ModelCache(int(1.5 * size))  # the process-wide BUDGET, as in the app
    recipes = [random_recipe(SMALL, seed=s) for s in (1, 2, 3, 4)]
    before = rss()
    for r in recipes:  # each session builds; sessions keep only the recipe
        cache.get(r)
        assert BUDGET.used() <= BUDGET.total
    holds, refusals = [], []
    for r in recipes:  # all four generate at once: each holds its model and a KV cache
        try:
            model = cache.get(r)
            holds.append(
                start_run(model, r, "Hello", max_new_tokens=2, temperature=1.0, top_k=None, top_p=None, seed=0)
            )
        except MemoryBudgetError as e:
            refusals.append(str(e))
        assert BUDGET.used() <= BUDGET.total
    assert len(holds) == 2 and len(refusals) == 2, refusals
    assert "memory budget" in refusals[0] and "models (" in refusals[0] and "seed" in refusals[0], refusals[0]
    for _run, gen in holds:
        assert len(list(gen)) == 2
    assert rss() - before < 4 * size  # without the budget: 4 models + 2 rebuilt ones
    holds.clear()
    gc.collect()
    model = cache.get(recipes[3])  # the room is back once the generations are over
    assert model.cfg == SMALL
