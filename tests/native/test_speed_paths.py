"""Every speed trick of the decode path against the plain computation it replaces (issue 5).

- weight layout: float32 weights stored [in, out] (HF Conv1D order) -- same shapes, names, values;
- the fused GELU kernel against the formula written out;
- the per-layer KV cache views: cached decoding against full forwards, float32 and bfloat16;
- a single bfloat16 query attended in float32 against the explicit softmax(QKᵀ/√d)·V;
- sampling: shared softmaxes / one top-k / entr-based entropy against the stage-by-stage recipe.
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.accel import accelerate, native_choice
from playground.accel.decode_paths import stacked_qkv_of
from playground.engine.attention import attend, attention_probs
from playground.engine.config import GPTConfig
from playground.engine.model import GELU, GPTModel
from playground.engine.sampling import (
    STAGES,
    apply_temperature,
    apply_top_k,
    apply_top_p,
    entropy_bits,
    generate,
    sampling_distribution,
)

TINY = dict(context_length=48, emb_dim=64, n_heads=4, n_layers=2)


@pytest.fixture(autouse=True)
def fixed_kernel_choices(monkeypatch):
    """The choices these tests exercise (float32 stored [in, out], bfloat16 [out, in] with Q/K/V
    stacked and ATen's one-row kernel), set instead of measured: which one a machine measures
    faster is tests/native/test_kernels.py's business, every path giving the same numbers is this file's."""
    from playground.runtime import decode_decisions, kernels

    fixed = lambda winner: kernels.Choice("fixed for the test", winner, measured=False)  # noqa: E731
    monkeypatch.setattr(
        decode_decisions,
        "weight_layout",
        lambda shape, dtype, count: fixed("in_out" if dtype == torch.float32 else "out_in"),
    )
    monkeypatch.setattr(
        decode_decisions,
        "stacked_qkv",
        lambda d, dtype, in_out, n: fixed("stacked" if dtype == torch.bfloat16 else "separate"),
    )
    monkeypatch.setattr(decode_decisions, "one_row_kernel", lambda *a: None)  # the compiled kernel: test_native_gemv.py
    monkeypatch.setattr(native_choice, "prepare", lambda model: None)  # the compiled step: test_native_step.py


def make_model(seed=0, std=0.1, dtype=torch.float32, **changes) -> GPTModel:
    """Random weights large enough that logits are far from uniform (0.02 would hide mistakes)."""
    torch.manual_seed(seed)
    model = GPTModel(GPTConfig(**{**TINY, **changes}))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.2 * torch.randn_like(p) if name.endswith("scale") else std * torch.randn_like(p))
    return accelerate(model.to(dtype).eval())


def random_ids(batch, length, seed=1):
    return torch.randint(0, 50257, (batch, length), generator=torch.Generator().manual_seed(seed))


def linear_weights(model):
    return {name: m.weight for name, m in model.named_modules() if isinstance(m, nn.Linear)}


def is_in_out(w: torch.Tensor) -> bool:
    return w.stride() == (1, w.size(0))


# ---------------------------------------------------------------------------------------------
# Weight layout


@pytest.mark.parametrize("attention_impl", ["fused", "per_head"])
def test_float32_weights_are_stored_in_out_and_bfloat16_out_in(attention_impl):
    model = make_model(attention_impl=attention_impl)
    weights = linear_weights(model)
    assert weights and all(is_in_out(w) and not w.is_contiguous() for w in weights.values())
    accelerate(model.to(torch.bfloat16))
    assert all(w.is_contiguous() and w.dtype == torch.bfloat16 for w in linear_weights(model).values())
    accelerate(model.float())
    assert all(is_in_out(w) for w in linear_weights(model).values())


def test_layout_changes_no_name_shape_value_or_tie():
    model = make_model()
    plain = {k: v.contiguous() for k, v in model.state_dict().items()}
    accelerate(model)  # idempotent
    state = model.state_dict()
    assert list(state) == list(plain)
    for key, value in state.items():
        assert value.shape == plain[key].shape
        assert torch.equal(value, plain[key]), key
    assert model.out_head.weight is model.tok_emb.weight
    assert model.trf_blocks[0].att.W_query.weight.shape == (64, 64)
    assert model.trf_blocks[0].ff.layers[0].weight.shape == (256, 64)  # nn.Linear's (out, in)
    # Round trip through bfloat16 and back keeps the tie and the (out, in) shape.
    model.to(torch.bfloat16).to(torch.float32)
    assert model.out_head.weight is model.tok_emb.weight
    assert model.out_head.weight.shape == (50257, 64)


def test_layout_gives_the_logits_of_plain_contiguous_weights():
    model = make_model()
    reference = make_model()
    with torch.no_grad():  # the same numbers in nn.Linear's own contiguous layout
        for w in linear_weights(reference).values():
            w.data = w.data.contiguous()
    assert all(w.is_contiguous() for w in linear_weights(reference).values())
    ids = random_ids(2, 20)
    with torch.no_grad():
        torch.testing.assert_close(model(ids), reference(ids), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(model(ids[:1, :1]), reference(ids[:1, :1]), atol=1e-5, rtol=1e-5)


def test_layout_survives_load_state_dict_and_an_optimiser_step():
    model = make_model(seed=0)
    other = make_model(seed=5)
    model.load_state_dict(other.state_dict())
    assert all(is_in_out(w) for w in linear_weights(model).values())
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = random_ids(2, 16)
    before = model.trf_blocks[0].att.W_key.weight.detach().clone()
    loss = F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
    loss.backward()
    opt.step()
    after = model.trf_blocks[0].att.W_key.weight
    assert is_in_out(after) and not torch.equal(after, before)  # trained in place, layout kept
    # The trained weights in the plain layout give the same logits.
    plain = make_model()
    plain.load_state_dict(model.state_dict())
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(ids), plain(ids), atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# GELU: one fused kernel against the formula


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_fused_gelu_is_the_formula(approximate):
    x = torch.linspace(-8, 8, 2001)
    gelu = GELU(approximate)
    torch.testing.assert_close(gelu(x), gelu.forward_explicit(x), atol=1e-6, rtol=1e-6)
    # In bfloat16 the fused kernel rounds once; the written-out formula rounds after each of its
    # six ops, so the fused one is the closer of the two to the float32 values.
    xb = x.to(torch.bfloat16)
    exact = gelu.forward_explicit(xb.float())
    fused_err = (gelu(xb).float() - exact).abs().mean()
    explicit_err = (gelu.forward_explicit(xb).float() - exact).abs().mean()
    assert fused_err <= explicit_err


# ---------------------------------------------------------------------------------------------
# KV cache: decoding one token at a time against full forwards


@pytest.mark.parametrize("attention_impl", ["fused", "per_head"])
def test_cached_decoding_matches_full_forward_float32(attention_impl):
    model = make_model(attention_impl=attention_impl)
    ids = random_ids(1, 40)
    with torch.no_grad():
        full = model(ids)
        cache = model.new_kv_cache()
        steps = [model(ids[:, :10], kv_cache=cache)] + [model(ids[:, t : t + 1], kv_cache=cache) for t in range(10, 40)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)
    # The cache holds exactly the keys a full forward computes.
    with torch.no_grad():
        _, trace = model(ids, return_attention=True)
    torch.testing.assert_close(cache.k[0, :, :, :40], trace.keys[0], atol=1e-6, rtol=1e-5)


def test_cached_decoding_matches_full_forward_bfloat16():
    model = make_model(dtype=torch.bfloat16)
    ref = make_model(dtype=torch.float32)
    ids = random_ids(1, 40)
    with torch.no_grad():
        full = model(ids).float()
        exact = ref(ids)
        cache = model.new_kv_cache()
        steps = [model(ids[:, :10], kv_cache=cache)] + [model(ids[:, t : t + 1], kv_cache=cache) for t in range(10, 40)]
    stepped = torch.cat(steps, dim=1).float()
    # Both bfloat16 paths sit within bfloat16 rounding of float32, and of each other.
    spread = exact.std().item()
    assert (stepped - exact).abs().mean() < 0.03 * spread
    assert (full - exact).abs().mean() < 0.03 * spread
    torch.testing.assert_close(stepped, full, atol=0.1 * spread, rtol=0)
    agree = (stepped.argmax(-1) == exact.argmax(-1)).float().mean().item()
    assert agree >= 0.9, agree


# ---------------------------------------------------------------------------------------------
# bfloat16 one-row products: ATen gemv (oneDNN off) against oneDNN


def test_one_row_bfloat16_linear_paths_agree_on_gpt2_shapes():
    torch.manual_seed(0)
    x = torch.randn(1, 768).to(torch.bfloat16)
    w = (0.02 * torch.randn(3072, 768)).to(torch.bfloat16)
    b = (0.02 * torch.randn(3072)).to(torch.bfloat16)
    torch.backends.mkldnn.enabled = True
    exact = F.linear(x.float(), w.float(), b.float())
    onednn = F.linear(x, w, b).float()
    try:
        torch.backends.mkldnn.enabled = False
        gemv = F.linear(x, w, b).float()
    finally:
        torch.backends.mkldnn.enabled = True
    # Both accumulate in float32 and round the result to bfloat16 once: within one bf16 ulp.
    ulp = exact.abs() * 2**-8 + 1e-6
    assert ((gemv - exact).abs() <= ulp).all()
    assert ((onednn - exact).abs() <= ulp).all()


def test_no_forward_flips_a_process_wide_flag():
    """Speed lives beside the model: a bfloat16 one-row forward of an accelerated model runs with oneDNN as the
    process has it, on every thread."""
    model = make_model(dtype=torch.bfloat16, n_layers=3)
    seen = []
    hook = model.trf_blocks[1].register_forward_hook(lambda mod, inp, out: seen.append(torch.backends.mkldnn.enabled))
    torch.backends.mkldnn.enabled = True
    with torch.no_grad():
        cache = model.new_kv_cache()
        model(random_ids(1, 3), kv_cache=cache)
        for i in range(4):
            model(random_ids(1, 1, seed=i), kv_cache=cache)
    hook.remove()
    assert seen == [True] * 5


# ---------------------------------------------------------------------------------------------
# bfloat16 inference: Q, K and V from one product with the stacked weights


def separate_qkv(att, x):
    """The three projections as written (what training uses)."""
    B, T, _ = x.shape
    return [
        lin(x).view(B, T, att.n_heads, att.head_dim).transpose(1, 2) for lin in (att.W_query, att.W_key, att.W_value)
    ]


@pytest.mark.parametrize("qkv_bias", [True, False])
def test_stacked_qkv_gives_the_three_projections(qkv_bias):
    model = make_model(dtype=torch.bfloat16, qkv_bias=qkv_bias)
    att = model.trf_blocks[0].att
    x = torch.randn(2, 5, 64).to(torch.bfloat16)
    with torch.no_grad():
        stacked = att.project_qkv(x)
        plain = separate_qkv(att, x)
    for got, want in zip(stacked, plain):
        assert got.shape == want.shape == (2, 4, 5, 16)
        # Each output is the same dot product, rounded to bfloat16 once: at most one bf16 ulp apart.
        assert ((got.float() - want.float()).abs() <= want.float().abs() * 2**-7 + 1e-6).all()


def test_stacked_qkv_follows_every_change_of_the_weights():
    model = make_model(dtype=torch.bfloat16)
    att = model.trf_blocks[1].att
    x = torch.randn(1, 3, 64).to(torch.bfloat16)

    def check():
        with torch.no_grad():
            for got, want in zip(att.project_qkv(x), separate_qkv(att, x)):
                torch.testing.assert_close(got.float(), want.float(), atol=0.02, rtol=0.02)

    check()
    with torch.no_grad():
        att.W_key.weight.mul_(-2.0)  # an in-place update, as an optimiser step does
        att.W_value.bias.add_(1.0)
    check()
    model.load_state_dict(make_model(seed=7, dtype=torch.bfloat16).state_dict())
    check()
    before = stacked_qkv_of(att)._tensors
    model.float().bfloat16()
    check()  # .to() gives new storage: the copy is made again
    assert stacked_qkv_of(att)._tensors is not before


def test_training_and_float32_use_the_three_modules():
    model = make_model(dtype=torch.bfloat16)
    model(random_ids(1, 4))  # grad enabled: the parameters themselves must be in the graph
    assert all(stacked_qkv_of(b.att)._tensors is None for b in model.trf_blocks)
    model32 = make_model()
    with torch.no_grad():
        model32(random_ids(1, 4))
    assert all(stacked_qkv_of(b.att) is None for b in model32.trf_blocks)
    with torch.no_grad():
        model(random_ids(1, 4))
    assert all(stacked_qkv_of(b.att)._tensors is not None for b in model.trf_blocks)


# ---------------------------------------------------------------------------------------------
# A single bfloat16 query, attended in float32


@pytest.mark.parametrize("k_len", [1, 7, 300])
def test_single_low_precision_query_matches_explicit_attention(k_len):
    torch.manual_seed(k_len)
    q, k, v = (torch.randn(1, 4, n, 16).to(torch.bfloat16) for n in (1, k_len, k_len))
    out = attend(q, k, v, 0.0)
    assert out.dtype == torch.bfloat16 and out.shape == (1, 4, 1, 16)
    explicit = attention_probs(q, k) @ v.float()  # softmax(QKᵀ/√d) in float32, then ·V
    torch.testing.assert_close(out.float(), explicit, atol=1e-2, rtol=1e-2)
    # float32 queries take the plain kernel, which must agree with the explicit formula too.
    out32 = attend(q.float(), k.float(), v.float(), 0.0)
    torch.testing.assert_close(out32, explicit, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# Sampling: shared work against the stage-by-stage recipe


@pytest.mark.parametrize(
    "temperature, top_k, top_p",
    [(0, None, None), (1.0, None, None), (1.0, 5, None), (0.7, None, 0.9), (1.3, 40, 0.8), (0, 3, 0.5)],
)
def test_sampling_distribution_equals_separate_softmaxes(temperature, top_k, top_p):
    torch.manual_seed(0)
    logits = torch.randn(50257) * 4
    t = (logits - logits.max()) / temperature if temperature not in (0, 1) else logits
    k = apply_top_k(t, top_k)
    p = apply_top_p(k, top_p)
    expected = {name: torch.softmax(x, -1) for name, x in zip(STAGES, (logits, t, k, p))}
    got = sampling_distribution(logits, temperature, top_k, top_p)
    assert list(got) == list(STAGES)
    for name in STAGES:
        assert torch.equal(got[name], expected[name]), name


def test_temperature_one_is_the_identity():
    logits = torch.randn(100)
    assert torch.equal(apply_temperature(logits, 1.0), logits / 1.0)


@pytest.mark.parametrize("seed", range(4))
def test_entropy_bits_is_minus_sum_p_log2_p(seed):
    torch.manual_seed(seed)
    probs = torch.softmax(torch.randn(1000) * (seed + 1), -1)
    probs[::7] = 0  # zeros count as 0·log 0 = 0
    probs /= probs.sum()
    nonzero = probs[probs > 0].double()
    assert entropy_bits(probs) == pytest.approx(float(-(nonzero * torch.log2(nonzero)).sum()), rel=1e-5)
    assert entropy_bits(torch.tensor([0.25] * 4)) == pytest.approx(2.0)


@pytest.mark.parametrize("temperature, top_k, top_p", [(0, None, None), (1.0, None, None), (0.8, 20, 0.9)])
def test_step_fields_match_the_plain_recipe(temperature, top_k, top_p):
    model = make_model()
    prompt = random_ids(1, 12)[0].tolist()
    seq = list(prompt)
    for step in generate(model, prompt, max_new_tokens=4, temperature=temperature, top_k=top_k, top_p=top_p, seed=1):
        with torch.no_grad():
            logits = model(torch.tensor([seq]))[0, -1].float()
        raw = torch.softmax(logits, -1)
        final = sampling_distribution(logits, temperature, top_k, top_p)["top_p"]
        assert step.raw_prob == pytest.approx(float(raw[step.token_id]), abs=1e-5)
        assert step.rank == int((raw > raw[step.token_id]).sum()) + 1
        assert step.raw_entropy == pytest.approx(-float((raw[raw > 0] * raw[raw > 0].log2()).sum()), abs=1e-3)
        assert step.entropy == pytest.approx(-float((final[final > 0] * final[final > 0].log2()).sum()), abs=1e-3)
        assert [i for i, _ in step.top] == torch.topk(final, 10).indices.tolist()
        assert all(isinstance(i, int) and isinstance(p, float) for i, p in step.top)
        raw_top = torch.topk(raw, 10).indices.tolist()
        assert step.candidates[:10] == raw_top
        for name in STAGES:
            expected = sampling_distribution(logits, temperature, top_k, top_p)[name][step.candidates]
            assert step.stages[name] == pytest.approx(expected.tolist(), abs=1e-6)
        # Each stage's row is its own list, even where two stages share one distribution.
        assert len({id(row) for row in step.stages.values()}) == len(STAGES)
        assert step.kept_tokens == int((final > 0).sum())
        seq.append(step.token_id)
