"""The shared model cache and recipes: instant switching back, eviction within budget, one build."""

import threading

import pytest
import torch

from playground import PRESETS, count_parameters
from playground.server.model_cache import ModelCache, model_bytes
from playground.server.recipes import build_from_recipe, random_recipe, recipe_key

NANO = PRESETS["nano"]


def test_same_recipe_same_model_and_seeded_weights_are_reproducible():
    cache = ModelCache(budget_bytes=10 * 2**30)
    a = cache.get(random_recipe(NANO, seed=1))
    assert cache.get(random_recipe(NANO, seed=1)) is a
    fresh = build_from_recipe(random_recipe(NANO, seed=1))
    assert torch.equal(fresh.tok_emb.weight, a.tok_emb.weight)
    other = cache.get(random_recipe(NANO, seed=2))
    assert not torch.equal(other.tok_emb.weight, a.tok_emb.weight)


def test_cache_evicts_least_recently_used_within_budget():
    one = model_bytes(build_from_recipe(random_recipe(NANO, seed=0)))
    cache = ModelCache(budget_bytes=int(2.5 * one))
    recipes = [random_recipe(NANO, seed=s) for s in range(4)]
    cache.get(recipes[0])
    cache.get(recipes[1])
    cache.get(recipes[0])  # used again: recipe 1 is now the least recent
    cache.get(recipes[2])
    keys = cache.keys()
    assert recipe_key(recipes[1]) not in keys
    assert recipe_key(recipes[0]) in keys and recipe_key(recipes[2]) in keys
    assert cache.total_bytes() <= cache.budget_bytes
    # an evicted model is simply rebuilt, with the same weights
    again = cache.get(recipes[1])
    assert torch.equal(again.tok_emb.weight, build_from_recipe(recipes[1]).tok_emb.weight)


def test_concurrent_requests_build_once(monkeypatch):
    import playground.server.model_cache as model_cache

    calls = []
    real = model_cache.build_from_recipe

    def counting(recipe, **kw):
        calls.append(recipe["seed"])
        return real(recipe, **kw)

    monkeypatch.setattr(model_cache, "build_from_recipe", counting)
    cache = ModelCache(budget_bytes=10 * 2**30)
    got = []
    threads = [threading.Thread(target=lambda: got.append(cache.get(random_recipe(NANO, seed=9)))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [9]
    assert all(m is got[0] for m in got)


def test_bfloat16_recipe():
    model = build_from_recipe(random_recipe(NANO, seed=0, dtype="bfloat16"))
    assert model.dtype == torch.bfloat16
    assert model_bytes(model) == 2 * count_parameters(model)


def test_unknown_recipe_is_refused():
    with pytest.raises(ValueError, match="unknown model recipe"):
        build_from_recipe({"kind": "pickle", "path": "/etc/passwd"})
