"""Weight-only int8 (issue 14): each kernel against the float product of the dequantized weights,
the int8 model against float32, its measured size, exports, and the bundled model's greedy text."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.quantize import (
    Int8Embedding,
    Int8Linear,
    QuantizeError,
    float_state_dict,
    int8_bytes,
    int8_linear_kernels,
    is_int8,
    model_bytes,
    quantize_int8,
    quantize_rows,
)
from playground.engine.weights import load_checkpoint, save_checkpoint
from playground.inside.inspection import count_parameters, parameter_breakdown
from playground.server.recipes import build_from_recipe, random_recipe

TINY = GPTConfig(context_length=48, emb_dim=64, n_heads=4, n_layers=2)


def _model(cfg=TINY, seed=0):
    torch.manual_seed(seed)
    model = GPTModel(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.2 * torch.randn(p.shape) if name.endswith("scale") else 0.05 * torch.randn(p.shape))
    return model.eval()


@pytest.fixture(scope="module")
def pair():
    m32 = _model()
    return m32, quantize_int8(copy.deepcopy(m32))


def test_rows_round_to_the_nearest_step_and_the_largest_entry_is_exact():
    torch.manual_seed(0)
    w = torch.randn(40, 24) * torch.rand(40, 1)
    w[3] = 0  # an all-zero row stays zero (no division by zero)
    q, s = quantize_rows(w)
    assert q.dtype == torch.int8 and q.shape == w.shape and s.shape == (40,)
    back = q.float() * s[:, None]
    assert ((back - w).abs() <= s[:, None] / 2 + 1e-7).all()
    assert torch.equal(q.abs().amax(1)[torch.arange(40) != 3], torch.full((39,), 127, dtype=torch.int8))
    assert torch.equal(back[3], torch.zeros(24))


@pytest.mark.parametrize("act", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("rows", [1, 5])
def test_every_int8_kernel_is_the_float_product_of_the_dequantized_weight(act, rows):
    torch.manual_seed(1)
    lin = nn.Linear(96, 160)
    q, s = quantize_rows(lin.weight)
    x = torch.randn(rows, 96)
    exact = F.linear(x.to(act).float(), q.float() * s.to(act).float()[:, None], lin.bias.to(act).float())
    for name, kernel in int8_linear_kernels().items():
        got = kernel(x.to(act), q, s.to(act), lin.bias.detach().to(act)).float()
        tol = 1e-5 if act == torch.float32 else 2**-7
        assert ((got - exact).abs() <= tol * (exact.abs() + 1)).all(), name


@pytest.mark.parametrize("rows", [1, 3, 17])
@pytest.mark.parametrize("width", [24, 100])
def test_int8pack_with_a_width_atens_bfloat16_kernel_gets_wrong_is_still_the_product(width, rows):
    q, s = quantize_rows(torch.randn(40, width))
    x = torch.randn(rows, width).bfloat16()
    exact = F.linear(x.float(), q.float() * s.bfloat16().float()[:, None])
    got = int8_linear_kernels()["int8pack"](x, q, s.bfloat16(), None).float()
    assert (got - exact).abs().max() <= 2**-6 * exact.abs().max()  # bfloat16 weights' rounding; ATen's: 1e19, NaN


def test_int8_model_keeps_names_counts_ties_and_dtype(pair):
    m32, q = pair
    assert is_int8(q) and not is_int8(m32)
    assert isinstance(q.out_head, Int8Linear) and isinstance(q.tok_emb, Int8Embedding)
    assert q.out_head.weight is q.tok_emb.weight  # the tied head shares the int8 table
    assert q.out_head.scale is q.tok_emb.scale
    assert q.trf_blocks[0].att.W_query.weight.dtype == torch.int8
    assert q.dtype == torch.bfloat16 and q.new_kv_cache().k.dtype == torch.bfloat16
    assert count_parameters(q) == count_parameters(m32)
    assert list(float_state_dict(q)) == list(m32.state_dict())  # nn.Linear's keys, scales folded in


def test_int8_logits_are_close_to_float32(pair):
    m32, q = pair
    ids = torch.randint(0, 50257, (2, 30), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want, got = m32(ids), q(ids).float()
    spread = want.std().item()
    # int8 rows carry ~1% relative error per weight, bfloat16 activations 0.4%: the logits stay
    # within a few percent of their spread (measured 1.4% mean, 9% max on this config).
    assert (got - want).abs().mean() < 0.03 * spread
    assert (got - want).abs().max() < 0.25 * spread
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() >= 0.9


def test_cached_int8_decoding_matches_its_full_forward(pair):
    _, q = pair
    ids = torch.randint(0, 50257, (1, 20), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = q(ids).float()
        cache = q.new_kv_cache()
        steps = [q(ids[:, :6], kv_cache=cache)] + [q(ids[:, t : t + 1], kv_cache=cache) for t in range(6, 20)]
    stepped = torch.cat(steps, 1).float()
    assert (stepped - full).abs().mean() < 0.02 * full.std()


def test_float32_activations_too():
    m32 = _model(seed=3)
    q = quantize_int8(copy.deepcopy(m32), activations="float32")
    assert q.dtype == torch.float32
    ids = torch.randint(0, 50257, (1, 16), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        want = m32(ids)
        # Against float32 with the dequantized weights put back: only the kernels' order of sums differs.
        ref = copy.deepcopy(m32)
        ref.load_state_dict({k: v.float() for k, v in float_state_dict(q).items()})
        torch.testing.assert_close(q(ids), ref(ids), atol=1e-4, rtol=1e-4)
        assert (q(ids) - want).abs().mean() < 0.02 * want.std()


def test_size_is_measured_and_the_breakdown_predicted_it(pair):
    m32, q = pair
    predicted = parameter_breakdown(m32).memory["int8"]
    measured = sum(
        t.numel() * t.element_size()
        for t in {t.data_ptr(): t for t in list(q.parameters()) + list(q.buffers())}.values()
    )
    assert model_bytes(q) == measured == predicted == int8_bytes(m32)
    assert parameter_breakdown(q).memory["int8"] == measured
    assert measured < 0.3 * model_bytes(m32)  # vs float32: a quarter, plus scales and float extras


def test_export_of_an_int8_model_loads_as_float_with_its_numbers(pair, tmp_path):
    _, q = pair
    path = save_checkpoint(q, tmp_path / "q.safetensors")
    back = load_checkpoint(path, dtype="bfloat16")
    assert not is_int8(back)
    ids = torch.randint(0, 50257, (1, 12), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        a, b = q(ids).float(), back(ids).float()
    assert (a - b).abs().mean() < 0.01 * a.std()


def test_refusals():
    m = _model(seed=4)
    with pytest.raises(QuantizeError, match="bfloat16 or float32"):
        quantize_int8(copy.deepcopy(m), activations="float16")
    q = quantize_int8(m)
    with pytest.raises(QuantizeError, match="already int8"):
        quantize_int8(q)
    assert issubclass(QuantizeError, ValueError)


def test_recipe_builds_int8():
    cfg = GPTConfig(context_length=32, emb_dim=32, n_heads=2, n_layers=1)
    q = build_from_recipe(random_recipe(cfg, seed=1, dtype="int8"))
    f = build_from_recipe(random_recipe(cfg, seed=1, dtype="float32"))
    assert is_int8(q) and not is_int8(f)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert (q(ids).float() - f(ids)).abs().mean() < 0.03 * f(ids).std()
