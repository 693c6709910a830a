"""The switches since GPT-2 (issue 38) on the from-scratch model: each alone and all together, the fused
kernels against their written-out formulas, GQA and windows against their definitions, the count formula
against the built model (real sizes on the meta device), KV-cache bytes, and the accelerated path's refusal."""

import math

import pytest
import torch

from playground.accel import accelerate, is_accelerated, refuses
from playground.engine import decoding
from playground.engine.attention import causal_mask
from playground.engine.config import ConfigError, GPTConfig
from playground.engine.model import GPTModel
from playground.engine.norms import RMSNorm
from playground.engine.presets import MODERN_PRESETS, PRESETS, REAL_SIZES
from playground.engine.rotary import RotaryEmbedding
from playground.engine.sampling import generate
from playground.engine.sizes import count_parameters_analytic, kv_bytes_per_token, kv_cache_bytes
from playground.engine.swiglu import SwiGLU
from playground.inside.inspection import count_parameters
from tests.tiny_models import random_model

SWITCHES = {
    "rope": dict(pos_encoding="rope", rope_theta=500000.0),
    "rmsnorm": dict(norm="rmsnorm"),
    "swiglu": dict(ff="swiglu", ff_hidden_dim=48),
    "gqa": dict(n_kv_heads=2),
    "mqa": dict(n_kv_heads=1),
    "qk_norm": dict(qk_norm=True),
    "window": dict(sliding_window=5),
    "window_some_layers": dict(sliding_window=4, window_layers=(1,)),
    "no_bias": dict(bias=False, qkv_bias=False),
    "untied": dict(tie_weights=False),
    "wide_heads": dict(fixed_head_dim=16),
    "all": dict(
        pos_encoding="rope",
        norm="rmsnorm",
        ff="swiglu",
        ff_hidden_dim=40,
        n_kv_heads=2,
        qk_norm=True,
        sliding_window=6,
        bias=False,
        qkv_bias=False,
        tie_weights=False,
        fixed_head_dim=12,
    ),
    # the seeds' variants with the new switches beside them
    "post_norm_rope": dict(norm_placement="post", pos_encoding="rope", norm="rmsnorm"),
    "per_head_rope_qk_norm": dict(attention_impl="per_head", pos_encoding="rope", qk_norm=True),
}


def ids(length, seed=1):
    return torch.randint(0, 50257, (1, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", SWITCHES)
def test_each_switch_counts_caches_and_traces(name):
    model = random_model(**SWITCHES[name])
    cfg = model.cfg
    assert count_parameters(model) == count_parameters_analytic(cfg)
    x = ids(20)
    with torch.no_grad():
        full, trace = model(x, return_attention=True)
        cache = model.new_kv_cache()
        steps = [model(x[:, :7], kv_cache=cache)] + [model(x[:, t : t + 1], kv_cache=cache) for t in range(7, 20)]
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-5)
    assert cache.k.shape == (cfg.n_layers, 1, cfg.kv_heads, cfg.context_length, cfg.head_dim)
    for i in range(cfg.n_layers):
        probs = trace.layer(i)  # one map per query head, GQA or not
        assert probs.shape == (1, cfg.n_heads, 20, 20)
        assert torch.allclose(probs.sum(-1), torch.ones(1, cfg.n_heads, 20))
        window = cfg.windowed(i)
        if window:
            assert (probs[0, :, -1, : 20 - window] == 0).all() and (probs[0, :, -1, 20 - window :] > 0).all()
        assert trace.groups[i] == cfg.n_heads // cfg.kv_heads


def test_gpt2_configs_keep_their_record_and_layout():
    for cfg in PRESETS.values():
        assert cfg.since_gpt2() == []
        assert set(cfg.to_dict()) == {
            "vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate", "qkv_bias",
            "tie_weights", "pos_encoding", "activation", "norm_placement", "attention_impl", "ln_eps",
        }  # fmt: skip
    names = [n for n, _ in GPTModel(GPTConfig(n_layers=1, emb_dim=32, n_heads=4)).named_parameters()]
    assert names == [
        "tok_emb.weight", "pos_emb.weight",
        "trf_blocks.0.att.W_query.weight", "trf_blocks.0.att.W_query.bias",
        "trf_blocks.0.att.W_key.weight", "trf_blocks.0.att.W_key.bias",
        "trf_blocks.0.att.W_value.weight", "trf_blocks.0.att.W_value.bias",
        "trf_blocks.0.att.out_proj.weight", "trf_blocks.0.att.out_proj.bias",
        "trf_blocks.0.ff.layers.0.weight", "trf_blocks.0.ff.layers.0.bias",
        "trf_blocks.0.ff.layers.2.weight", "trf_blocks.0.ff.layers.2.bias",
        "trf_blocks.0.norm1.scale", "trf_blocks.0.norm1.shift", "trf_blocks.0.norm2.scale", "trf_blocks.0.norm2.shift",
        "final_norm.scale", "final_norm.shift",
    ]  # fmt: skip


def test_variant_configs_round_trip():
    for cfg in [*MODERN_PRESETS.values(), *REAL_SIZES.values(), GPTConfig(sliding_window=8, window_layers=(0, 3))]:
        assert GPTConfig.from_dict(cfg.to_dict()) == cfg
        assert GPTConfig.from_dict(__import__("json").loads(cfg.to_json())) == cfg


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(n_kv_heads=5), r"n_kv_heads \(5\) must divide n_heads \(12\)"),
        (dict(n_kv_heads=24), r"n_kv_heads \(24\) must divide n_heads \(12\)"),
        (dict(n_kv_heads=-1), "n_kv_heads must be positive"),
        (
            dict(pos_encoding="rope", fixed_head_dim=15),
            r"RoPE turns pairs .* even head_dim \(emb_dim / n_heads, or fixed_head_dim\), got 15",
        ),
        (dict(rope_theta=0.5), "rope_theta must be a number above 1"),
        (dict(norm="batchnorm"), "norm must be one of layernorm, rmsnorm"),
        (dict(ff="moe"), "ff must be one of mlp, swiglu"),
        (dict(ff_hidden_dim=2.5), "ff_hidden_dim must be a whole number"),
        (dict(qk_norm="yes"), "qk_norm must be true or false"),
        (dict(window_layers=(0,)), "sliding_window is 0"),
        (dict(sliding_window=4, window_layers=(12,)), "window_layers must list layers from 0 to 11"),
        (dict(attention_impl="per_head", n_kv_heads=4), "grouped-query attention .* needs the fused module"),
        (dict(vocab_size=1000), "smaller than the GPT-2 tokenizer"),
    ],
)
def test_invalid_switches_have_specific_messages(changes, message):
    with pytest.raises(ConfigError, match=message):
        GPTConfig(**changes)


def test_own_tokenizer_allows_any_vocabulary_and_wide_heads_skip_the_divisibility_rule():
    assert GPTConfig(vocab_size=1000, tokenizer="own").vocab_size == 1000
    assert GPTConfig(emb_dim=100, n_heads=3, fixed_head_dim=32).head_dim == 32


# ---------------------------------------------------------------------------------------------
# Fused kernels against their written-out formulas


def test_rmsnorm_fused_equals_formula():
    norm = RMSNorm(48, eps=1e-6)
    with torch.no_grad():
        norm.scale.normal_()
    x = torch.randn(3, 5, 48) * 4
    rms = x.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()
    assert torch.allclose(norm(x), x / rms * norm.scale, atol=1e-5)
    assert torch.allclose(norm(x), norm.forward_explicit(x), atol=1e-6)


def test_swiglu_fused_equals_formula():
    torch.manual_seed(0)
    ff = SwiGLU(16, 40)
    x = torch.randn(2, 3, 16)
    assert torch.allclose(ff(x), ff.forward_explicit(x), atol=1e-6)


def test_rope_is_a_rotation_by_position_times_frequency():
    hd, theta = 8, 100.0
    rope = RotaryEmbedding(hd, theta)
    x = torch.randn(1, 2, 6, hd)
    got = rope(x, start=3)
    for t in range(6):
        for i in range(hd // 2):
            angle = (3 + t) * theta ** (-2 * i / hd)
            a, b = x[0, :, t, i], x[0, :, t, i + hd // 2]
            assert torch.allclose(got[0, :, t, i], a * math.cos(angle) - b * math.sin(angle), atol=1e-5)
            assert torch.allclose(got[0, :, t, i + hd // 2], b * math.cos(angle) + a * math.sin(angle), atol=1e-5)
    # the score of a query and a key depends on their distance only
    q, k = torch.randn(hd), torch.randn(hd)
    s1 = rope(q.view(1, 1, 1, hd), 5)[0, 0, 0] @ rope(k.view(1, 1, 1, hd), 2)[0, 0, 0]
    s2 = rope(q.view(1, 1, 1, hd), 13)[0, 0, 0] @ rope(k.view(1, 1, 1, hd), 10)[0, 0, 0]
    assert torch.allclose(s1, s2, atol=1e-5)


def test_window_mask_keeps_the_last_window_positions():
    mask = causal_mask(4, 6, window=3)  # queries at positions 2..5
    allowed = [[int(not m) for m in row] for row in mask.tolist()]
    assert allowed == [[1, 1, 1, 0, 0, 0], [0, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1]]


def test_gqa_is_mha_with_each_key_value_head_copied_to_its_group():
    gqa = random_model(n_kv_heads=2, pos_encoding="rope", qk_norm=True)
    mha = GPTModel(gqa.cfg.replace(n_kv_heads=0)).eval()
    state = gqa.state_dict()
    hd, group = gqa.cfg.head_dim, gqa.cfg.n_heads // 2
    for key in list(state):
        if key.endswith(("W_key.weight", "W_value.weight")):
            state[key] = state[key].view(2, hd, -1).repeat_interleave(group, 0).reshape(-1, state[key].size(1))
        if key.endswith(("W_key.bias", "W_value.bias")):
            state[key] = state[key].view(2, hd).repeat_interleave(group, 0).reshape(-1)
    mha.load_state_dict(state)
    x = ids(12)
    with torch.no_grad():
        (a, ta), (b, tb) = gqa(x, return_attention=True), mha(x, return_attention=True)
    assert torch.allclose(a, b, atol=1e-5)
    assert torch.allclose(ta.layer(1), tb.layer(1), atol=1e-6)


def test_window_as_wide_as_the_context_changes_nothing():
    narrow = random_model(sliding_window=32)
    plain = GPTModel(narrow.cfg.replace(sliding_window=0)).eval()
    plain.load_state_dict(narrow.state_dict())
    x = ids(30)
    with torch.no_grad():
        assert torch.equal(narrow(x), plain(x))


# ---------------------------------------------------------------------------------------------
# Counts and KV-cache bytes


def test_formula_equals_measured_for_every_preset_real_sizes_on_meta():
    for name, cfg in {**PRESETS, **MODERN_PRESETS, **REAL_SIZES}.items():
        with torch.device("meta"):
            model = GPTModel(cfg)
        assert count_parameters(model) == count_parameters_analytic(cfg), name
    assert count_parameters_analytic(REAL_SIZES["llama-3.2-1b"]) == 1_235_814_400
    assert count_parameters_analytic(REAL_SIZES["qwen3-0.6b"]) == 596_049_920
    assert count_parameters_analytic(MODERN_PRESETS["llama-3.2-style"]) == 7_384_320


def test_kv_bytes_per_token_show_what_gqa_and_windows_save():
    llama = REAL_SIZES["llama-3.2-1b"]
    assert kv_bytes_per_token(llama, "bfloat16") == 2 * 16 * 8 * 64 * 2 == 32768
    assert kv_bytes_per_token(llama.replace(n_kv_heads=0), "bfloat16") == 4 * 32768  # 32 heads, not 8
    assert kv_bytes_per_token(REAL_SIZES["qwen3-0.6b"], "bfloat16") == 2 * 28 * 8 * 128 * 2 == 114688
    mistral = MODERN_PRESETS["mistral-style"]  # window 64 of 256 positions on every layer
    assert kv_bytes_per_token(mistral) == kv_bytes_per_token(mistral.replace(sliding_window=0)) / 4
    assert kv_cache_bytes(mistral, 64) == kv_cache_bytes(mistral.replace(sliding_window=0), 64)
    for cfg in (*PRESETS.values(), MODERN_PRESETS["qwen3-style"]):
        small = cfg.replace(context_length=16, vocab_size=cfg.vocab_size)
        with torch.device("meta"):
            cache = GPTModel(small).new_kv_cache()
        assert cache.nbytes() == kv_cache_bytes(small, 16)


# ---------------------------------------------------------------------------------------------
# The accelerated path refuses what it does not compute


def test_accelerate_leaves_variants_plain_and_still_generates():
    model = GPTModel(MODERN_PRESETS["llama-3.2-style"], generator=torch.Generator().manual_seed(0)).eval()
    assert "n_kv_heads" in refuses(model) and "pos_encoding" in refuses(model)
    accelerate(model)
    assert not is_accelerated(model) and decoding.decoder_of(model) is decoding.PLAIN
    assert "project_qkv" not in model.trf_blocks[0].att.__dict__  # no stacked-QKV swap on the instance
    assert all("forward" not in m.__dict__ for m in model.modules())  # no compiled one-row kernels
    steps = list(generate(model, [464, 3290, 318], max_new_tokens=6, temperature=0, capture_attention=True))
    with torch.no_grad():
        x = torch.tensor([[464, 3290, 318]])
        for _ in range(6):
            x = torch.cat([x, model(x)[:, -1:].argmax(-1)], 1)
        _, trace = model(x[:, :-1], return_attention=True)
    assert [s.token_id for s in steps] == x[0, 3:].tolist()
    assert steps[-1].attention[0].shape == (8, 8)  # every query head's row, though only 2 key/value heads
    assert torch.allclose(steps[-1].attention[0], trace.layer(0)[0, :, -1], atol=1e-5)
    assert refuses(random_model()) is None


def test_breakdown_rows_agree_per_component_for_every_variant_preset():
    from playground.inside.inspection import parameter_breakdown

    for name, cfg in {**MODERN_PRESETS, **REAL_SIZES}.items():
        b = parameter_breakdown(cfg)
        assert all(r.agrees for r in b.rows), name
        assert b.total_formula == b.total_measured == count_parameters_analytic(cfg)
    b = parameter_breakdown(REAL_SIZES["llama-3.2-1b"])
    assert b.total_measured == 1_235_814_400
    assert b.kv_cache_bytes_per_token == {"float32": 65536, "bfloat16": 32768}
    qkv = next(r for r in b.rows if r.component == "attention QKV")
    assert qkv.measured == 16 * (2048 * 32 * 64 + 2 * 2048 * 8 * 64)  # K = 8 key/value heads, not 32
    # FLOPs: 2 per weight a token multiplies through, 4·H·hd per key; a window caps the keys read
    mistral = MODERN_PRESETS["mistral-style"]
    full, windowed = parameter_breakdown(mistral.replace(sliding_window=0)), parameter_breakdown(mistral)
    assert full.flops_per_token - windowed.flops_per_token == 4 * 8 * 16 * 4 * (256 - 64)


def test_any_mix_of_switches_is_refused_by_name_or_counts_and_runs():
    """Hypothesis over the switches since GPT-2: a ConfigError naming a field, or a model whose formula per
    component equals the measured count and whose cached decode equals its full forward."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from playground.inside.inspection import parameter_breakdown

    fields = st.fixed_dictionaries(
        {"context_length": st.just(16), "emb_dim": st.sampled_from([24, 32]), "n_layers": st.integers(1, 2)},
        optional={
            "n_heads": st.sampled_from([1, 2, 3, 4, 8]),
            "n_kv_heads": st.integers(-1, 5),
            "fixed_head_dim": st.sampled_from([0, 0, 5, 6, 12]),
            "pos_encoding": st.sampled_from(["learned", "sinusoidal", "rope"]),
            "norm": st.sampled_from(["layernorm", "rmsnorm", "batchnorm"]),
            "ff": st.sampled_from(["mlp", "swiglu"]),
            "ff_hidden_dim": st.integers(0, 40),
            "qk_norm": st.booleans(),
            "sliding_window": st.integers(0, 20),
            "window_layers": st.sampled_from([(), (0,), (1,), (0, 1)]),
            "bias": st.booleans(),
            "qkv_bias": st.booleans(),
            "tie_weights": st.booleans(),
            "norm_placement": st.sampled_from(["pre", "post"]),
            "attention_impl": st.sampled_from(["fused", "per_head"]),
        },
    )

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(fields=fields)
    def check(fields):
        try:
            cfg = GPTConfig(**fields)
        except ConfigError as e:
            assert any(name in str(e) for name in GPTConfig.__dataclass_fields__), str(e)
            return
        assert all(row.agrees for row in parameter_breakdown(cfg).rows)
        model = GPTModel(cfg, generator=torch.Generator().manual_seed(0)).eval()
        x = ids(10)
        with torch.no_grad():
            full = model(x)
            cache = model.new_kv_cache()
            steps = [model(x[:, :4], kv_cache=cache)] + [model(x[:, t : t + 1], kv_cache=cache) for t in range(4, 10)]
        assert torch.allclose(torch.cat(steps, 1), full, atol=1e-5)

    check()
