"""A generation's KV cache holds the positions the run can reach, not the whole context: the same tokens
and probabilities as a cache of the whole context, and a clear error past its end."""

import pytest
import torch

from playground.accel import accelerate
from playground.engine.sampling import Generation
from tests.tiny_models import random_model


def _run(model, prompt, new, **kw):
    gen = Generation(model, prompt, new, temperature=0.9, top_k=20, seed=7, capture_attention=True, **kw)
    steps = [gen.step_alone() for _ in range(new)]
    return gen, [(s.token_id, s.prob, [a.tolist() for a in s.attention]) for s in steps]


@pytest.mark.parametrize("accelerated", [False, True])
def test_a_run_holds_its_prompt_and_new_tokens_only_and_decodes_as_with_the_whole_context(monkeypatch, accelerated):
    model = random_model(context_length=64)
    if accelerated:
        accelerate(model)
    prompt = [3, 9, 4, 1, 5]
    gen, steps = _run(model, prompt, 7)
    assert gen._cache.capacity == 12 and gen._cache.k.shape[3] == 12

    whole = model.new_kv_cache  # the cache of the whole context, as before
    monkeypatch.setattr(model, "new_kv_cache", lambda batch_size=1, capacity=None: whole(batch_size))
    gen_whole, steps_whole = _run(model, prompt, 7)
    assert gen_whole._cache.capacity == 64
    assert steps == steps_whole  # token ids, probabilities and attention rows, bit for bit


def test_a_run_past_the_context_keeps_the_whole_context_and_slides():
    model = random_model(context_length=16)
    gen = Generation(model, list(range(10)), 12, temperature=0)
    assert gen._cache.capacity == 16
    plain = Generation(model, list(range(10)), 12, temperature=0, use_cache=False)  # every window recomputed
    assert [gen.step_alone().token_id for _ in range(12)] == [plain.step_alone().token_id for _ in range(12)]
    assert gen._window_start == 6


def test_a_forward_past_the_caches_positions_is_refused_by_name():
    model = random_model(context_length=32)
    cache = model.new_kv_cache(capacity=4)
    model(torch.tensor([[1, 2, 3]]), kv_cache=cache)
    with pytest.raises(ValueError, match="exceeds the KV cache's 4 positions"):
        model(torch.tensor([[4, 5]]), kv_cache=cache)
    with pytest.raises(ValueError, match="holds 1..32 positions"):
        model.new_kv_cache(capacity=33)
