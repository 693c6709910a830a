"""Property-based tests (hypothesis) of the sampling filters, the sampling checks and config
validation (issue 6: "property-based tests of the sampling filters and config validation")."""

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from playground.engine.config import ConfigError, GPTConfig
from playground.engine.memory_check import check_memory
from playground.engine.model import GPTModel
from playground.engine.sampling import (
    STAGES,
    apply_top_k,
    apply_top_p,
    generate,
    sampling_distribution,
)
from playground.engine.sizes import count_parameters_analytic, estimate_memory_bytes
from playground.inside.inspection import count_parameters, parameter_breakdown
from playground.settings import SamplingSettings

NEG_INF = float("-inf")
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Logit vectors: finite values over a wide range, with ties made likely by drawing from few values.
finite = st.floats(-40, 40, allow_nan=False, allow_infinity=False, width=32)
logit_lists = st.one_of(
    st.lists(finite, min_size=1, max_size=80),
    st.lists(st.sampled_from([-3.0, 0.0, 0.5, 2.0, 7.0]), min_size=1, max_size=40),  # many ties
)


def as_tensor(values):
    return torch.tensor(values, dtype=torch.float32)


# ---------------------------------------------------------------------------------------------
# Filters


@FAST
@given(values=logit_lists, k=st.integers(0, 100))
def test_top_k_keeps_exactly_the_top_k_modulo_ties(values, k):
    logits = as_tensor(values)
    out = apply_top_k(logits, k)
    kept = out > NEG_INF
    assert torch.equal(out[kept], logits[kept])  # kept logits untouched
    if k == 0 or k >= len(values):
        assert kept.all()
        return
    kth = sorted(values, reverse=True)[k - 1]  # the k-th largest value
    # Kept: exactly the values >= the k-th largest, so k of them plus any tied with the k-th.
    assert kept.tolist() == [v >= kth for v in logits.tolist()]
    assert int(kept.sum()) >= k
    assert int(kept.sum()) - k <= sum(1 for v in logits.tolist() if v == kth) - 1


@FAST
@given(values=logit_lists, p=st.floats(1e-6, 0.999))
def test_top_p_keeps_the_smallest_prefix_reaching_p(values, p):
    logits = as_tensor(values)
    out = apply_top_p(logits, p)
    kept = out > NEG_INF
    probs = torch.softmax(logits.double(), -1)
    assert torch.equal(out[kept], logits[kept])
    assert kept[logits == logits.max()].any()  # the most likely token (one of them, if tied) survives
    kept_probs, dropped_probs = probs[kept], probs[~kept]
    # A prefix of the tokens sorted by probability: nothing dropped beats anything kept.
    if len(dropped_probs):
        assert dropped_probs.max() <= kept_probs.min() + 1e-7
        # It reaches p (otherwise nothing would have been dropped)...
        assert kept_probs.sum() >= p - 1e-5
    # ...and is the smallest such prefix: without its least likely token it falls short of p.
    assert kept_probs.sum() - kept_probs.min() < p + 1e-5


@FAST
@given(values=logit_lists)
def test_top_p_of_one_and_top_k_of_zero_are_off(values):
    logits = as_tensor(values)
    assert torch.equal(apply_top_p(logits, 1.0), logits)
    assert torch.equal(apply_top_k(logits, 0), logits)


@FAST
@given(
    values=logit_lists,
    temperature=st.one_of(st.just(0.0), st.floats(1e-2, 100)),
    top_k=st.one_of(st.none(), st.integers(0, 100)),
    top_p=st.one_of(st.none(), st.floats(1e-6, 1.0)),
)
def test_sampling_distribution_stages_are_valid_distributions(values, temperature, top_k, top_p):
    logits = as_tensor(values)
    stages = sampling_distribution(logits, temperature, top_k, top_p)
    assert list(stages) == list(STAGES)
    for name, probs in stages.items():
        assert probs.shape == logits.shape and probs.dtype == torch.float32
        assert torch.isfinite(probs).all() and (probs >= 0).all(), name
        assert abs(float(probs.sum()) - 1.0) < 1e-4, name
    # Each filter only removes: the supports are nested.
    support = {name: stages[name] > 0 for name in STAGES}
    assert not (support["top_k"] & ~support["temperature"]).any()
    assert not (support["top_p"] & ~support["top_k"]).any()
    # The most likely token (one of them, if tied) survives every stage.
    assert (stages["top_p"][logits == logits.max()] > 0).any()
    # Temperature keeps the order of the tokens.
    if temperature > 0:
        t = stages["temperature"]
        i, j = torch.argsort(logits)[0], torch.argsort(logits)[-1]
        assert t[i] <= t[j]


# ---------------------------------------------------------------------------------------------
# Sampling parameters: a ValueError with a message, or accepted; never another exception

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=5),
    st.just([]),
    st.just({}),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**6), 10**6),
)


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    return GPTModel(GPTConfig(context_length=8, emb_dim=16, n_heads=2, n_layers=1)).eval()


@settings(max_examples=300, deadline=None)
@given(temperature=junk, top_k=junk, top_p=junk, max_new_tokens=junk)
def test_sampling_checks_raise_only_value_error(tiny_model, temperature, top_k, top_p, max_new_tokens):
    try:
        SamplingSettings(temperature=temperature, top_k=top_k, top_p=top_p, max_new_tokens=max_new_tokens)
    except ValueError as e:
        assert len(str(e)) > 20  # a sentence a UI can show as it is
        with pytest.raises(ValueError):
            generate(
                tiny_model, [1, 2], max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p
            )
        return
    if max_new_tokens is None:
        return  # SamplingSettings alone treats None as "not given"; see test_sampling for generate()
    gen = generate(tiny_model, [1, 2], max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p)
    assert gen.temperature >= 0 and (gen.top_k is None or gen.top_k > 0)
    assert gen.top_p is None or 0 < gen.top_p <= 1


@pytest.mark.parametrize("kwargs", [dict(temperature=10**400), dict(top_p=10**400)])
def test_huge_integers_are_value_errors_or_accepted(kwargs):
    args = dict(temperature=1.0, top_k=None, top_p=None, max_new_tokens=1) | kwargs
    try:
        SamplingSettings(**args)
    except ValueError:
        pass


# ---------------------------------------------------------------------------------------------
# Config validation: a ConfigError, or a model whose formula and measured counts agree


def field(valid):
    return st.one_of(valid, junk)


config_fields = st.fixed_dictionaries(
    {},
    optional={
        "vocab_size": field(st.integers(50200, 50400)),
        "context_length": field(st.integers(-2, 64)),
        "emb_dim": field(st.integers(-2, 96)),
        "n_heads": field(st.integers(-2, 12)),
        "n_layers": field(st.integers(-2, 4)),
        "drop_rate": field(st.floats(-0.5, 1.5)),
        "qkv_bias": field(st.booleans()),
        "tie_weights": field(st.booleans()),
        "pos_encoding": field(st.sampled_from(["learned", "sinusoidal"])),
        "activation": field(st.sampled_from(["gelu_tanh", "gelu", "relu"])),
        "norm_placement": field(st.sampled_from(["pre", "post"])),
        "attention_impl": field(st.sampled_from(["fused", "per_head"])),
        "ln_eps": field(st.floats(1e-8, 1e-2)),
    },
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=config_fields)
def test_config_is_accepted_and_consistent_or_a_config_error(fields):
    try:
        cfg = GPTConfig(**fields)
    except ConfigError as e:
        assert any(name in str(e) for name in GPTConfig().to_dict()), str(e)  # it names the field
        return
    # Accepted: every numeric field is a sane value.
    assert cfg.emb_dim % cfg.n_heads == 0 and min(cfg.emb_dim, cfg.n_heads, cfg.n_layers, cfg.context_length) > 0
    assert 0 <= cfg.drop_rate < 1 and cfg.vocab_size >= 50257
    breakdown = parameter_breakdown(cfg)  # built on the meta device
    assert all(row.agrees for row in breakdown.rows), [
        (r.component, r.formula_value, r.measured) for r in breakdown.rows
    ]
    with torch.device("meta"):
        model = GPTModel(cfg)
    assert count_parameters(model) == count_parameters_analytic(cfg) == breakdown.total_measured
    assert estimate_memory_bytes(cfg) > 4 * count_parameters_analytic(cfg)


@settings(max_examples=100, deadline=None)
@given(
    emb_dim=st.integers(1, 10**6),
    n_layers=st.integers(1, 10**5),
    context_length=st.integers(1, 10**6),
    budget=st.integers(10**6, 10**12),
)
def test_memory_check_refuses_exactly_what_exceeds_the_budget(emb_dim, n_layers, context_length, budget):
    cfg = GPTConfig(emb_dim=emb_dim, n_heads=1, n_layers=n_layers, context_length=context_length)
    estimate = estimate_memory_bytes(cfg)
    if estimate > budget:
        with pytest.raises(ConfigError, match="more than the memory budget"):
            check_memory(cfg, budget_bytes=budget)
    else:
        assert check_memory(cfg, budget_bytes=budget) == estimate


@settings(max_examples=50, deadline=None)
@given(extra=st.dictionaries(st.text(min_size=1, max_size=8), st.integers(), min_size=1, max_size=3))
def test_from_dict_with_unknown_fields_is_a_config_error(extra):
    known = set(GPTConfig().to_dict())
    assume(not set(extra) <= known)
    with pytest.raises(ConfigError, match="unknown config field"):
        GPTConfig.from_dict(extra)
