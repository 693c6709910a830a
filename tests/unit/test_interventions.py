"""Interventions and capture (issue 11): every change the spec names is checked against the same
change made by hand with torch's own module hooks (the capture against transformers' hidden states:
tests/integration/test_hf_hidden_states.py)."""

import pytest
import torch

from playground.inside.interventions import Hooks, Intervention, InterventionError, run_with_hooks
from tests.tiny_models import SINCE_GPT2, three_layer_model


@pytest.fixture(scope="module", params=["fused", "per_head", "since_gpt2"])
def model(request):
    if request.param == "since_gpt2":
        return three_layer_model(**SINCE_GPT2)
    return three_layer_model(attention_impl=request.param)


IDS = torch.randint(0, 50257, (1, 12), generator=torch.Generator().manual_seed(5))


def plain(model, ids=IDS):
    with torch.no_grad():
        return model(ids)


def by_hand(model, edit_ctx=None, ids=IDS):
    """The forward with the out_proj input of some layers edited by an ordinary torch pre-hook:
    ``edit_ctx(layer, ctx)`` gets ctx as (B, T, H, hd) and returns the replacement."""
    handles = []
    for i, block in enumerate(model.trf_blocks):

        def pre(module, args, i=i):
            (x,) = args
            B, T, d = x.shape
            ctx = x.view(B, T, model.cfg.n_heads, model.cfg.head_dim).clone()
            return (edit_ctx(i, ctx).reshape(B, T, d),)

        handles.append(block.att.out_proj.register_forward_pre_hook(pre))
    try:
        return plain(model, ids)
    finally:
        for h in handles:
            h.remove()


def hooked(model, spec, ids=IDS):
    return run_with_hooks(model, ids, spec, capture=False)[0]


def test_no_intervention_and_alpha_one_equal_the_plain_forward(model):
    ref = plain(model)
    assert torch.equal(hooked(model, None), ref)
    assert torch.equal(hooked(model, Intervention()), ref)
    torch.testing.assert_close(hooked(model, Intervention(scale_head=(1, 2, 1.0))), ref, rtol=0, atol=1e-6)


def test_zero_every_head_of_a_layer_equals_zeroing_out_proj_input_by_hand(model):
    spec = Intervention(zero_heads=tuple((1, h) for h in range(model.cfg.n_heads)))
    want = by_hand(model, lambda i, ctx: ctx * 0 if i == 1 else ctx)
    got = hooked(model, spec)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert (got - plain(model)).abs().max() > 1e-2  # the change is real


def test_zero_one_head_and_scale_one_head_match_the_hand_edit(model):
    def zero(i, ctx):
        if i == 2:
            ctx[:, :, 3] = 0
        return ctx

    torch.testing.assert_close(
        hooked(model, Intervention(zero_heads=((2, 3),))), by_hand(model, zero), rtol=1e-5, atol=1e-5
    )

    def scale(i, ctx):
        if i == 0:
            ctx[:, :, 1] *= 1.7
        return ctx

    torch.testing.assert_close(
        hooked(model, Intervention(scale_head=(0, 1, 1.7))), by_hand(model, scale), rtol=1e-5, atol=1e-5
    )


def test_mean_ablation_replaces_the_head_by_its_mean_over_positions(model):
    def mean(i, ctx):
        if i == 1:
            ctx[:, :, 0] = ctx[:, :, 0].mean(dim=1, keepdim=True)
        return ctx

    torch.testing.assert_close(
        hooked(model, Intervention(mean_heads=((1, 0),))), by_hand(model, mean), rtol=1e-5, atol=1e-5
    )


def test_skip_mlp_and_drop_positions_match_the_hand_edit(model):
    handle = model.trf_blocks[1].ff.register_forward_hook(lambda m, a, out: torch.zeros_like(out))
    try:
        want = plain(model)
    finally:
        handle.remove()
    torch.testing.assert_close(hooked(model, Intervention(skip_mlps=(1,))), want, rtol=1e-5, atol=1e-5)

    handle = model.pos_emb.register_forward_hook(lambda m, a, out: torch.zeros_like(out))
    try:
        want = plain(model)
    finally:
        handle.remove()
    torch.testing.assert_close(hooked(model, Intervention(drop_pos_emb=True)), want, rtol=1e-5, atol=1e-5)


def test_no_causal_mask_lets_the_future_leak_in(model):
    changed = IDS.clone()
    changed[0, -1] = (changed[0, -1] + 1) % 50257  # only the last token differs
    # The plain model: position 0 cannot see the last token, its logits are bit-identical.
    assert torch.equal(plain(model)[0, :-1], plain(model, changed)[0, :-1])
    spec = Intervention(unmasked_layers=(0,))
    a, b = hooked(model, spec), hooked(model, spec, changed)
    assert (a[0, 0] - b[0, 0]).abs().max() > 1e-4  # earlier logits now depend on a later token


def test_batched_head_gain_rows_equal_single_interventions(model):
    cfg = model.cfg
    gain = torch.ones(cfg.n_layers, 3, cfg.n_heads)
    gain[0, 0, 2] = 0.0
    gain[2, 1, 1] = 0.5
    logits, _ = run_with_hooks(model, IDS.expand(3, -1), capture=False, head_gain=gain)
    torch.testing.assert_close(logits[0], hooked(model, Intervention(zero_heads=((0, 2),)))[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits[1], hooked(model, Intervention(scale_head=(2, 1, 0.5)))[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits[2], plain(model)[0], rtol=1e-5, atol=1e-5)


def test_capture_parts_sum_to_the_residual_stream(model):
    logits, cache = run_with_hooks(model, IDS)
    assert len(cache.resid) == model.cfg.n_layers + 1
    x = cache.tok_emb + cache.pos_emb
    torch.testing.assert_close(cache.resid[0], x)
    for i, block in enumerate(model.trf_blocks):
        B, H, T, hd = cache.ctx[i].shape
        attn = block.att.out_proj(cache.ctx[i].transpose(1, 2).reshape(B, T, H * hd))
        x = x + attn + cache.mlp_out[i]
        torch.testing.assert_close(cache.resid[i + 1], x, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model.out_head(model.final_norm(x)), logits, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "spec, message",
    [
        (Intervention(zero_heads=((0, 9),)), "head 9 of layer 0"),
        (Intervention(zero_heads=((5, 0),)), "layers 0–2"),
        (Intervention(mean_heads=((0, -1),)), "heads 0–3"),
        (Intervention(scale_head=(0, 0, 2.5)), "α must be a number from 0 to 2"),
        (Intervention(scale_head=(0, 0, -0.1)), "α must be"),
        (Intervention(scale_head=(0, 0, float("nan"))), "α must be"),
        (Intervention(skip_mlps=(3,)), "skip the MLP of layer 3"),
        (Intervention(unmasked_layers=(1.5,)), "mask of layer 1.5"),
    ],
)
def test_bad_interventions_are_refused_with_a_message(model, spec, message):
    with pytest.raises(InterventionError, match=message):
        Hooks(model.cfg, spec)
    with pytest.raises(ValueError):  # InterventionError is a ValueError: the UI shows its message
        run_with_hooks(model, IDS, spec)


def test_intervention_round_trips_through_json():
    spec = Intervention(zero_heads=[[0, 1]], scale_head=[1, 2, 0.4], skip_mlps=[2], drop_pos_emb=True)
    assert Intervention.from_dict(spec.to_dict()) == spec
    with pytest.raises(InterventionError, match="Unknown intervention field"):
        Intervention.from_dict({"zero_head": [[0, 1]]})
