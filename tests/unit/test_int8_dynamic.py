"""Dynamic int8 (the "int8-dynamic" precision): activations quantized per row at run time, int8 weights per
output channel, int32 sums -- each kernel against the float product of the same integers, the model's quality
against float32 (KL, greedy and teacher-forced agreement), the recipe, and the Model tab's words for it."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from bench.decode import first_divergence, mean_kl, run_ours, teacher_forced_agreement
from playground.engine.config import GPTConfig
from playground.engine.quantize import (
    Int8Linear,
    int8_linear_kernels,
    is_dynamic_int8,
    is_int8,
    quantize_activations,
    quantize_int8,
    quantize_rows,
)
from playground.engine.sizes import estimate_memory_bytes
from playground.server.recipes import build_from_recipe, random_recipe
from playground.ui.model_words import summary_line
from tests.unit.test_int8 import _model


@pytest.fixture(scope="module")
def trio():
    m32 = _model(seed=0)
    weight_only = quantize_int8(copy.deepcopy(m32), "float32")
    dynamic = quantize_int8(copy.deepcopy(m32), "float32", dynamic=True)
    return m32, weight_only, dynamic


def test_activation_rows_round_to_their_own_step_and_the_largest_is_exact():
    torch.manual_seed(0)
    x = torch.randn(6, 50) * torch.rand(6, 1) * 10
    x[2] = 0
    xq, xs = quantize_activations(x)
    assert xq.dtype == torch.int8 and xs.shape == (6, 1)
    back = xq.float() * xs
    assert ((back - x).abs() <= xs / 2 + 1e-6).all()
    assert torch.equal(xq.abs().amax(1)[torch.arange(6) != 2], torch.full((5,), 127, dtype=torch.int8))
    assert torch.equal(back[2], torch.zeros(50))


@pytest.mark.parametrize("rows", [1, 3, 17])
@pytest.mark.parametrize("shape", [(160, 96), (33, 97)])
def test_every_dynamic_kernel_is_the_product_of_the_quantized_rows_and_weights(rows, shape):
    torch.manual_seed(1)
    lin = nn.Linear(shape[1], shape[0])
    q, s = quantize_rows(lin.weight)
    x = torch.randn(rows, shape[1])
    xq, xs = quantize_activations(x)
    exact = F.linear(xq.double() * xs.double(), q.double() * s.double()[:, None], lin.bias.double())
    for name, kernel in int8_linear_kernels(dynamic=True).items():
        got = kernel(x, q, s, lin.bias.detach()).double()
        assert ((got - exact).abs() <= 1e-5 * (exact.abs() + 1)).all(), name


def test_dynamic_model_is_int8_in_float32_with_the_measured_kernel(trio):
    m32, weight_only, dynamic = trio
    assert is_int8(dynamic) and is_dynamic_int8(dynamic) and not is_dynamic_int8(weight_only)
    assert dynamic.dtype == torch.float32 and dynamic.new_kv_cache().k.dtype == torch.float32
    linears = [m for m in dynamic.modules() if isinstance(m, Int8Linear)]
    assert linears and all(m.dynamic and m.kernel in int8_linear_kernels(dynamic=True) for m in linears)
    assert "int8 weights and activations" in repr(dynamic.out_head)
    # The weights are the weight-only model's: one int8 form, two ways of multiplying by it.
    assert torch.equal(dynamic.out_head.weight, weight_only.out_head.weight)


def test_quality_against_float32_beside_weight_only(trio):
    """KL to float32, teacher-forced top-1 and greedy agreement. Measured on this tiny model (seed 0): KL 2.7e-5
    nats (weight-only 1.5e-5), teacher-forced agreement 100%, the same 24 greedy tokens; over seeds 0-5 KL
    2.5e-5-3.7e-5 (weight-only 1.1e-5-2.0e-5), agreement >= 95.8% -- its near-flat distributions have near ties."""
    m32, weight_only, dynamic = trio
    prompt = list(range(100, 116))
    t32 = run_ours(m32, prompt, 24)[1]
    for model in (weight_only, dynamic):
        assert mean_kl(m32, model, prompt, t32) < 2e-4
        assert teacher_forced_agreement(m32, model, prompt, t32) >= 0.9
        div = first_divergence(t32, run_ours(model, prompt, 24)[1])
        assert div is None or div >= 12
    # Rounding the activations too costs something: the dynamic model is further from float32 than the
    # weight-only one reading the same tokens, and not by orders of magnitude.
    kl_w, kl_d = mean_kl(m32, weight_only, prompt, t32), mean_kl(m32, dynamic, prompt, t32)
    assert kl_w < kl_d < 10 * kl_w


def test_cached_dynamic_decoding_matches_its_full_forward(trio):
    _, _, dynamic = trio
    ids = torch.randint(0, 50257, (1, 20), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = dynamic(ids)
        cache = dynamic.new_kv_cache()
        steps = [dynamic(ids[:, :6], kv_cache=cache)] + [
            dynamic(ids[:, t : t + 1], kv_cache=cache) for t in range(6, 20)
        ]
    # Each row's activations are quantized on their own, so the cache changes nothing but the order of sums.
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-4, rtol=1e-4)


def test_recipe_builds_dynamic_int8_and_the_model_tab_says_so():
    cfg = GPTConfig(context_length=32, emb_dim=32, n_heads=2, n_layers=1)
    recipe = random_recipe(cfg, seed=1, dtype="int8-dynamic")
    q = build_from_recipe(recipe)
    f = build_from_recipe(random_recipe(cfg, seed=1, dtype="float32"))
    assert is_dynamic_int8(q) and q.dtype == torch.float32
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert (q(ids) - f(ids)).abs().mean() < 0.03 * f(ids).std()
    assert "int8 activations" in summary_line(q, recipe, "en")
    assert "int8 激活" in summary_line(q, recipe, "zh")
    assert estimate_memory_bytes(cfg, "int8-dynamic") == estimate_memory_bytes(cfg, "int8")
