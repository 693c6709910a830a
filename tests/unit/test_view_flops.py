"""bench/view_flops.py's counts against torch's own FlopCounterMode, running each Inside view on tiny models."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from bench import view_flops
from playground.engine import readout
from playground.inside import attention_maths, attribution, effects, lenses
from playground.inside.interventions import Intervention
from playground.runtime import kernels
from tests.tiny_models import random_model

aten = torch.ops.aten


def _attention(q, k, v, *args, out_shape=None, **kwargs):
    return sdpa_flop_count(q, k, v)


def _mv(matrix, vector, *args, out_shape=None, **kwargs):
    return 2 * matrix[0] * matrix[1]


def _addmv(bias, matrix, vector, *args, out_shape=None, **kwargs):
    return 2 * matrix[0] * matrix[1]


def _dot(a, b, *args, out_shape=None, **kwargs):
    return 2 * a[0]


# FlopCounterMode knows mm / addmm / bmm and the GPU attention kernels; the CPU's fused attention and
# the matrix-vector and dot products the views use are added with the same convention (2 per FMA).
EXTRA = {
    aten._scaled_dot_product_flash_attention_for_cpu: _attention,
    aten.mv: _mv,
    aten.addmv: _addmv,
    aten.dot: _dot,
}


def counted(view, *args, **kwargs) -> int:
    with FlopCounterMode(display=False, custom_mapping=EXTRA) as counter:
        view(*args, **kwargs)
    return counter.get_total_flops()


@pytest.fixture(autouse=True)
def head_product_in_torch(monkeypatch):
    """The readout's product in torch, where the counter sees it (numpy's is invisible to it)."""
    monkeypatch.setattr(readout, "many_row_product", lambda weight_t: kernels.Choice("head product", "torch"))


MODELS = {
    "3 layers, d32, 4 heads": dict(n_layers=3),
    "4 layers, d48, 6 heads": dict(n_layers=4, emb_dim=48, n_heads=6),
}


@pytest.fixture(params=list(MODELS), scope="module")
def model(request):
    return random_model(seed=3, **MODELS[request.param])


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 50257, (24,), generator=torch.Generator().manual_seed(1)).tolist()


def test_logit_lens(model, ids):
    cfg, T = model.cfg, len(ids)
    for first, stop in ((0, T), (T - 8, T), (3, 11)):
        got = counted(lenses.logit_lens, model, ids, first=first, stop=stop)
        assert got == view_flops.logit_lens(cfg, T, first, stop)


def test_lens_cell(model, ids):
    for layer, position in ((0, 5), (model.cfg.n_layers, len(ids) - 2)):
        got = counted(lenses.lens_cell, model, ids, layer, position)
        assert got == view_flops.lens_cell(model.cfg, len(ids), position)


def test_logit_attribution(model, ids):
    for position in (4, len(ids) - 2):
        got = counted(attribution.logit_attribution, model, ids, position)
        assert got == view_flops.logit_attribution(model.cfg, len(ids), position)


def test_attention_maths(model, ids):
    for layer in range(model.cfg.n_layers):
        got = counted(attention_maths.attention_maths, model, ids, layer, 1, len(ids) - 3)
        assert got == view_flops.attention_maths(model.cfg, len(ids), layer)


def test_compare(model, ids):
    cfg, T = model.cfg, len(ids)
    spec = Intervention(zero_heads=((1, 0), (cfg.n_layers - 1, cfg.n_heads - 1)))
    got = counted(effects.compare, model, ids, spec, T - 2, lens_window=(T - 8, T))
    assert got == view_flops.compare(cfg, T, 1, T - 8, T)


def test_dose_response(model, ids):
    for layer, position, alphas in ((0, len(ids) - 2, None), (model.cfg.n_layers - 1, 6, [0.0, 0.5, 1.0])):
        got = counted(effects.dose_response, model, ids, layer, 1, position, alphas=alphas)
        n = 11 if alphas is None else len(alphas)
        assert got == view_flops.dose_response(model.cfg, len(ids), layer, position, n)


def test_head_sweep_layers(model, ids):
    layers = 2
    got = counted(lambda: list(zip(range(layers), effects.head_sweep_layers(model, ids, 0.0, batch=3), strict=False)))
    assert got == view_flops.head_sweep_layers(model.cfg, len(ids), layers)


def test_sweep_estimate(model, ids):
    got = counted(effects.estimate_sweep_seconds, model, ids)
    assert got == view_flops.sweep_estimate(model.cfg, len(ids))


def test_a_forward_is_what_every_count_builds_on(model, ids):
    """The plain forward, counted by hand from GPT-2's shapes for the first model."""
    got = counted(model, torch.tensor([ids]))
    cfg, T = model.cfg, len(ids)
    d, V = cfg.emb_dim, cfg.vocab_size
    by_hand = cfg.n_layers * (2 * T * 12 * d * d + 4 * T * T * d) + 2 * T * d * V
    assert got == by_hand == view_flops.forward(cfg, T, last_token_only=False)
