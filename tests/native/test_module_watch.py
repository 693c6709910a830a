"""The native step's plan stays the model's between tokens without walking its modules (engine.module_watch):
a hook registered, a module replaced in place or a parameter's data assigned after the plan was made are seen at
the next token."""

import pytest
import torch
import torch.nn as nn

from playground.accel import module_watch, native_decode
from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.runtime import native_step

pytestmark = pytest.mark.usefixtures("forget_compiled")


def ready_model() -> GPTModel:
    if not native_step.available():
        pytest.skip(f"no compiled step here: {native_step.status().reason}")
    cfg = GPTConfig(context_length=32, emb_dim=32, n_heads=4, n_layers=2)
    model = GPTModel(cfg, generator=torch.Generator().manual_seed(0)).eval()
    assert native_decode.set_native_step(model, 0)
    return model


def step_pair(model, cache, token: int):
    """(the native step's logits, the torch forward's) for ``token`` at the cache's position."""
    start = cache.length
    native = native_decode.decode_step(model, [token], cache)
    cache.length = start
    plain = model(torch.tensor([[token]]), kv_cache=cache, last_token_only=True)[0, -1].float()
    return None if native is None else native[0], plain


@torch.no_grad()
def test_a_hook_added_after_the_plan_takes_the_plain_path_until_removed():
    model = ready_model()
    cache = model.new_kv_cache()
    model(torch.tensor([[1, 2, 3]]), kv_cache=cache)
    assert native_decode.decode_step(model, [4], cache) is not None
    assert native_decode.decode_step(model, [5], cache) is not None  # the plan is reused: no walk
    plan = native_decode._current_plan(model)
    assert plan is not None and plan.watch.unchanged()
    handle = model.trf_blocks[1].ff.layers[0].register_forward_pre_hook(lambda *a: None)
    assert native_decode.decode_step(model, [6], cache) is None
    handle.remove()
    assert native_decode.decode_step(model, [6], cache) is not None


@torch.no_grad()
def test_a_module_replaced_in_place_is_read_at_the_next_token():
    model = ready_model()
    cache = model.new_kv_cache()
    model(torch.tensor([[1, 2, 3]]), kv_cache=cache)
    native, plain = step_pair(model, cache, 4)
    torch.testing.assert_close(native, plain, atol=1e-4, rtol=1e-4)
    before = module_watch._REGISTRATIONS[0]
    new = nn.Linear(32, 32)
    nn.init.normal_(new.weight, std=0.5)
    model.trf_blocks[0].att.out_proj = new  # what quantize_int8 does to every product, in place
    assert module_watch._REGISTRATIONS[0] > before
    native, plain = step_pair(model, cache, 5)
    assert native is not None
    torch.testing.assert_close(native, plain, atol=1e-4, rtol=1e-4)
    assert (
        native_decode._current_plan(model).tensors[2 + 8] is new.weight
    )  # after the embeddings, block 0: norm1 (2), Q, K, V (2 each)


@torch.no_grad()
def test_a_parameter_given_new_data_is_read_at_the_next_token():
    model = ready_model()
    cache = model.new_kv_cache()
    model(torch.tensor([[1, 2, 3]]), kv_cache=cache)
    step_pair(model, cache, 4)
    weight = model.trf_blocks[1].ff.layers[2].weight
    weight.data = torch.randn(weight.shape, generator=torch.Generator().manual_seed(1))
    native, plain = step_pair(model, cache, 5)
    assert native is not None
    torch.testing.assert_close(native, plain, atol=1e-4, rtol=1e-4)
