"""Sampling: parameter checks, the filters, greedy/seeded generation, what each step reports, and
the KV cache inside generate (issue 2: generation; issue 6: bad sampling input)."""

import math

import pytest
import torch

from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.sampling import (
    STAGES,
    apply_temperature,
    apply_top_k,
    apply_top_p,
    entropy_bits,
    generate,
    sampling_distribution,
)
from playground.settings import SamplingSettings

NEG_INF = float("-inf")
PROMPT = [15496, 11, 314, 716]  # "Hello, I am"


def make_model(seed=0, std=0.3, **changes) -> GPTModel:
    """A tiny model with logits spread wide enough that greedy and sampling differ."""
    torch.manual_seed(seed)
    cfg = GPTConfig(**{**dict(context_length=24, emb_dim=32, n_heads=4, n_layers=2), **changes})
    model = GPTModel(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.endswith("scale"):
                p.normal_(0.0, std)
    return model.eval()


@pytest.fixture(scope="module")
def model():
    return make_model()


def full_logits(model, ids):
    """Logits for the next token after ``ids`` (the last ``context_length`` of them), no cache."""
    window = ids[-model.cfg.context_length :]
    with torch.no_grad():
        return model(torch.tensor([window]))[0, -1].float()


def greedy_reference(model, prompt, n):
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(full_logits(model, ids).argmax()))
    return ids[len(prompt) :]


# ---------------------------------------------------------------------------------------------
# Bad parameters: ValueError with a message a UI can show as it is, raised at the call


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(temperature=-0.5), "Temperature must be 0 \\(greedy\\) or positive, got -0.5"),
        (dict(temperature=float("nan")), "Temperature must be a finite number, got nan"),
        (dict(temperature=float("inf")), "Temperature must be a finite number, got inf"),
        (dict(temperature=float("-inf")), "Temperature must be a finite number"),
        (dict(temperature="hot"), "Temperature must be a number, got 'hot'"),
        (dict(temperature=None), "Temperature must be a number, got None"),
        (dict(top_k=-1), "top-k must be 0 \\(off\\) or a positive whole number, got -1"),
        (dict(top_k=2.5), "top-k must be a whole number \\(0 or empty = off\\), got 2.5"),
        (dict(top_k="5"), "top-k must be a whole number"),
        (dict(top_k=True), "top-k must be a whole number"),
        (dict(top_p=0), "top-p must be in \\(0, 1\\] \\(1 = off\\), got 0"),
        (dict(top_p=0.0), "top-p must be in \\(0, 1\\]"),
        (dict(top_p=1.5), "top-p must be in \\(0, 1\\] \\(1 = off\\), got 1.5"),
        (dict(top_p=-0.1), "top-p must be in \\(0, 1\\]"),
        (dict(top_p=float("nan")), "top-p must be a number in \\(0, 1\\], got nan"),
        (dict(top_p="0.9"), "top-p must be a number in \\(0, 1\\]"),
        (dict(max_new_tokens=0), "Ask for at least one new token \\(got 0\\)"),
        (dict(max_new_tokens=-3), "Ask for at least one new token \\(got -3\\)"),
        (dict(max_new_tokens=2.5), "The number of new tokens must be a whole number, got 2.5"),
    ],
)
def test_bad_parameters_raise_value_error_at_the_call(model, kwargs, message):
    args = dict(max_new_tokens=3, temperature=1.0) | kwargs
    with pytest.raises(ValueError, match=message):
        generate(model, PROMPT, **args)  # not iterated: the check happens before any work


@pytest.mark.parametrize(
    "prompt, message",
    [
        ([], "The prompt is empty"),
        ([50257], r"Token id 50257 is outside the vocabulary \(0\.\.50256\)"),
        ([5, -1], r"Token id -1 is outside the vocabulary"),
    ],
)
def test_bad_prompts(model, prompt, message):
    with pytest.raises(ValueError, match=message):
        generate(model, prompt, max_new_tokens=1)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(temperature=0),
        dict(temperature=1e6),
        dict(top_k=0),
        dict(top_k=None),
        dict(top_k=10**6),
        dict(top_k=3.0),
        dict(top_p=1),
        dict(top_p=None),
        dict(top_p=1e-9),
    ],
)
def test_edge_values_that_are_allowed(model, kwargs):
    args = dict(max_new_tokens=2, temperature=1.0, seed=0) | kwargs
    steps = list(generate(model, PROMPT, **args))
    assert len(steps) == 2 and all(0 <= s.token_id < 50257 for s in steps)


def test_sampling_settings_accept_the_defaults():
    SamplingSettings(temperature=1.0, top_k=None, top_p=None, max_new_tokens=1)
    SamplingSettings(temperature=0, top_k=0, top_p=1.0, max_new_tokens=100)


def test_missing_max_new_tokens_is_a_value_error_at_the_call(model):
    with pytest.raises(ValueError, match="The number of new tokens must be a whole number, got None"):
        generate(model, PROMPT, max_new_tokens=None)


@pytest.mark.parametrize("temperature", [1e-39, 1e-45])
def test_tiny_positive_temperature_behaves_like_greedy(model, temperature):
    steps = list(generate(model, PROMPT, max_new_tokens=3, temperature=temperature, seed=0))
    assert [s.token_id for s in steps] == greedy_reference(model, PROMPT, 3)


# ---------------------------------------------------------------------------------------------
# The filters, on hand-made logits


def test_temperature_scales_logits():
    logits = torch.tensor([1.0, 2.0, 4.0])
    # divided by T after subtracting the max (softmax is shift-invariant; a tiny T cannot overflow)
    torch.testing.assert_close(apply_temperature(logits, 2.0), torch.tensor([-1.5, -1.0, 0.0]))
    torch.testing.assert_close(torch.softmax(apply_temperature(logits, 2.0), -1), torch.softmax(logits / 2.0, -1))
    torch.testing.assert_close(apply_temperature(logits, 0), logits)  # greedy: argmax taken later
    cold = sampling_distribution(logits, 0.5)["temperature"]
    hot = sampling_distribution(logits, 2.0)["temperature"]
    raw = torch.softmax(logits, -1)
    assert cold.max() > raw.max() > hot.max()


def test_top_k_keeps_the_k_largest():
    logits = torch.tensor([1.0, 3.0, 2.0, 5.0, -1.0])
    out = apply_top_k(logits, 2)
    assert out.tolist() == [NEG_INF, 3.0, NEG_INF, 5.0, NEG_INF]
    assert apply_top_k(logits, 0) is logits and apply_top_k(logits, None) is logits
    assert torch.equal(apply_top_k(logits, 5), logits) and torch.equal(apply_top_k(logits, 99), logits)
    # Ties at the k-th value are all kept.
    assert apply_top_k(torch.tensor([1.0, 2.0, 2.0, 3.0]), 2).tolist() == [NEG_INF, 2.0, 2.0, 3.0]
    # Batched: each row on its own.
    rows = apply_top_k(torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]), 1)
    assert rows.tolist() == [[NEG_INF, NEG_INF, 3.0], [3.0, NEG_INF, NEG_INF]]


def test_top_p_keeps_the_smallest_prefix_reaching_p():
    probs = torch.tensor([0.05, 0.5, 0.15, 0.3])
    logits = probs.log()
    kept = lambda p: (apply_top_p(logits, p) > NEG_INF).tolist()  # noqa: E731
    assert kept(0.4) == [False, True, False, False]  # 0.5 alone reaches 0.4
    assert kept(0.75) == [False, True, False, True]  # 0.5 + 0.3
    assert kept(0.9) == [False, True, True, True]  # 0.5 + 0.3 + 0.15 = 0.95
    assert kept(0.99) == [True, True, True, True]
    assert kept(1e-9) == [False, True, False, False]  # the most likely token always survives
    assert apply_top_p(logits, 1.0) is logits and apply_top_p(logits, None) is logits
    # Kept logits are untouched (renormalised later by the softmax).
    assert apply_top_p(logits, 0.75)[1] == logits[1]


@pytest.mark.parametrize("scale, top_k", [(12.0, None), (2.0, None), (0.3, None), (3.0, 40), (1.0, 1000)])
def test_top_p_on_a_full_vocabulary_equals_the_whole_sort(scale, top_k):
    """apply_top_p looks at the top 64, then 4,096, then every token, only as far as the nucleus
    reaches: its kept set is the one a sort of the whole (50,257-token) row gives -- peaked rows
    (a few tokens), flat ones (tens of thousands) and rows already cut by top-k -- except where
    float32 rounding decides, i.e. the true (float64) mass before the boundary token is within
    1e-5 of p. Rows and their p come from a seeded generator; the batched path agrees too."""
    g = torch.Generator().manual_seed(int(scale * 10) + (top_k or 0))
    sizes = []
    for _ in range(40):
        logits = torch.randn(50257, generator=g) * scale
        logits = apply_top_k(logits, top_k) if top_k else logits
        p = float(torch.rand((), generator=g)) * 0.98 + 0.01
        got = apply_top_p(logits, p)
        order = torch.sort(logits.double(), descending=True).indices
        probs = torch.softmax(logits.double(), -1)[order]
        before = torch.cumsum(probs, 0) - probs
        want = torch.full_like(logits, NEG_INF)
        want[order[before < p]] = logits[order[before < p]]
        n_got, n_want = int((got > NEG_INF).sum()), int((want > NEG_INF).sum())
        if n_got != n_want:  # only a rounding-level boundary may differ, by one token
            assert abs(n_got - n_want) == 1 and abs(float(before[min(n_got, n_want)]) - p) < 1e-5
        else:
            assert torch.equal(got, want)
        assert torch.equal(apply_top_p(logits[None], p)[0], got)
        sizes.append(n_got)
    assert max(sizes) >= 1  # (the sizes each case reaches: below 64, up to 4,096, beyond)
    if scale == 0.3:
        assert max(sizes) > 4096
    if scale == 12.0:
        assert min(sizes) < 64


def test_top_p_after_top_k_ignores_the_removed_tokens():
    logits = torch.tensor([0.2, 0.35, 0.45]).log()
    stages = sampling_distribution(logits, 1.0, top_k=2, top_p=0.5)
    # After top-k: {0.35, 0.45} renormalised -> 0.4375, 0.5625: 0.5625 alone reaches 0.5.
    torch.testing.assert_close(stages["top_k"], torch.tensor([0.0, 0.4375, 0.5625]), atol=1e-6, rtol=0)
    assert stages["top_p"].tolist() == [0.0, 0.0, 1.0]


def test_sampling_distribution_stages_are_distributions():
    torch.manual_seed(0)
    logits = torch.randn(1000) * 3
    stages = sampling_distribution(logits, 0.7, top_k=50, top_p=0.8)
    assert list(stages) == list(STAGES)
    for name, probs in stages.items():
        assert probs.dtype == torch.float32
        assert probs.min() >= 0
        assert probs.sum().item() == pytest.approx(1.0, abs=1e-5), name
    assert int((stages["top_k"] > 0).sum()) == 50
    assert 1 <= int((stages["top_p"] > 0).sum()) <= 50
    torch.testing.assert_close(stages["raw"], torch.softmax(logits, -1))


def test_entropy_bits():
    assert entropy_bits(torch.tensor([0.5, 0.5])) == pytest.approx(1.0)
    assert entropy_bits(torch.full((8,), 1 / 8)) == pytest.approx(3.0)
    assert entropy_bits(torch.tensor([1.0, 0.0, 0.0])) == 0.0  # 0·log 0 counted as 0, not NaN


# ---------------------------------------------------------------------------------------------
# Generation


def test_temperature_zero_is_greedy(model):
    steps = list(generate(model, PROMPT, max_new_tokens=12, temperature=0))
    assert [s.token_id for s in steps] == greedy_reference(model, PROMPT, 12)
    assert all(s.rank == 1 for s in steps)


def test_top_k_one_is_greedy(model):
    steps = list(generate(model, PROMPT, max_new_tokens=12, temperature=1.5, top_k=1, seed=123))
    assert [s.token_id for s in steps] == greedy_reference(model, PROMPT, 12)
    assert all(s.prob == pytest.approx(1.0) and s.kept_tokens == 1 for s in steps)


def test_sampling_is_not_greedy(model):
    # The control for the two tests above: with T = 1.5 the tokens are not simply the argmax.
    steps = list(generate(model, PROMPT, max_new_tokens=12, temperature=1.5, seed=123))
    assert [s.token_id for s in steps] != greedy_reference(model, PROMPT, 12)


def test_seed_reproducibility(model):
    run = lambda seed: [s.token_id for s in generate(model, PROMPT, max_new_tokens=10, temperature=1.0, seed=seed)]  # noqa: E731
    assert run(7) == run(7)
    assert run(7) != run(8)
    # The seed owns its generator: the global RNG state does not leak in.
    torch.manual_seed(999)
    first = run(7)
    torch.rand(100)
    assert run(7) == first


def test_sampled_tokens_respect_top_k_and_top_p(model):
    for step in generate(model, PROMPT, max_new_tokens=10, temperature=2.0, top_k=5, seed=1):
        assert step.rank <= 5 and 1 <= step.kept_tokens <= 5
    seq = list(PROMPT)
    for step in generate(model, PROMPT, max_new_tokens=10, temperature=1.0, top_p=0.5, seed=1):
        raw = torch.softmax(full_logits(model, seq), -1)
        # A kept token's more likely neighbours hold less than p; otherwise it would be cut.
        assert float(raw[raw > raw[step.token_id]].sum()) < 0.5
        seq.append(step.token_id)


def test_step_reports_match_a_manual_computation(model):
    """prob, raw_prob, rank, entropy, top and stages, recomputed from an uncached forward."""
    gen = generate(model, PROMPT, max_new_tokens=6, temperature=0.8, top_k=40, top_p=0.9, seed=3, n_top=5)
    seq = list(PROMPT)
    for i, step in enumerate(gen):
        logits = full_logits(model, seq)
        dists = sampling_distribution(logits, 0.8, 40, 0.9)
        final, raw = dists["top_p"], torch.softmax(logits, -1)
        assert step.index == i and step.position == len(seq)
        assert step.prob == pytest.approx(float(final[step.token_id]), abs=1e-5)
        assert step.prob > 0  # the chosen token survived the filters
        assert step.raw_prob == pytest.approx(float(raw[step.token_id]), abs=1e-5)
        assert step.rank == int((raw > raw[step.token_id]).sum()) + 1
        manual_entropy = -sum(float(p) * math.log2(float(p)) for p in final if p > 0)
        assert step.entropy == pytest.approx(manual_entropy, abs=1e-3)
        assert step.raw_entropy == pytest.approx(-float((raw * raw.log2()).sum()), abs=1e-3)
        assert step.kept_tokens == int((final > 0).sum())
        top_ids = torch.topk(final, 5).indices.tolist()
        assert [t for t, _ in step.top] == top_ids
        assert [p for _, p in step.top] == pytest.approx(final[top_ids].tolist(), abs=1e-5)
        assert step.token_id in step.candidates
        for name in STAGES:
            assert step.stages[name] == pytest.approx(dists[name][step.candidates].tolist(), abs=1e-5)
        seq.append(step.token_id)


def test_step_attention_is_the_last_row_of_a_full_forward(model):
    steps = list(generate(model, PROMPT, max_new_tokens=5, temperature=0, capture_attention=True))
    seq = list(PROMPT)
    for step in steps:
        with torch.no_grad():
            _, trace = model(torch.tensor([seq]), return_attention=True)
        assert len(step.attention) == model.cfg.n_layers
        for layer, row in enumerate(step.attention):
            assert row.shape == (model.cfg.n_heads, len(seq))
            torch.testing.assert_close(row.sum(-1), torch.ones(model.cfg.n_heads), atol=1e-5, rtol=0)
            torch.testing.assert_close(row, trace.layer(layer)[0, :, -1, :], atol=1e-5, rtol=1e-4)
        seq.append(step.token_id)


def test_no_attention_unless_asked(model):
    step = next(iter(generate(model, PROMPT, max_new_tokens=1, temperature=0)))
    assert step.attention is None


def test_generation_restores_training_mode(model):
    model.train()
    try:
        list(generate(model, PROMPT, max_new_tokens=2, temperature=0))
        assert model.training
    finally:
        model.eval()


def test_generation_runs_every_module_in_eval_mode(model):
    # the root in eval mode but one block left training (dropout on): the run still decodes in eval mode
    model.eval()
    model.trf_blocks[0].train()
    try:
        during = [any(m.training for m in model.modules()) for _ in generate(model, PROMPT, max_new_tokens=2)]
        assert during == [False, False]
        assert not any(m.training for m in model.modules())  # the root's mode, as train(False) leaves it
    finally:
        model.eval()


# ---------------------------------------------------------------------------------------------
# The KV cache inside generate, and the sliding window


@pytest.mark.parametrize(
    "variant", [dict(), dict(attention_impl="per_head"), dict(norm_placement="post"), dict(pos_encoding="sinusoidal")]
)
def test_cached_and_uncached_generation_agree_past_the_window(variant):
    model = make_model(**variant, context_length=12)
    prompt = list(range(1000, 1008))  # 8 tokens; 20 new ones slide the 12-token window
    kwargs = dict(max_new_tokens=20, temperature=0, n_top=3)
    cached = list(generate(model, prompt, use_cache=True, **kwargs))
    uncached = list(generate(model, prompt, use_cache=False, **kwargs))
    assert [s.token_id for s in cached] == [s.token_id for s in uncached]
    assert [s.token_id for s in cached] == greedy_reference(model, prompt, 20)
    for a, b in zip(cached, uncached):
        assert a.raw_prob == pytest.approx(b.raw_prob, abs=1e-5)
        assert [p for _, p in a.top] == pytest.approx([p for _, p in b.top], abs=1e-5)
    # The window start is reported: step i sees positions max(0, 8 + i - 12) ...
    assert [s.context_start for s in cached] == [max(0, 8 + i - 12) for i in range(20)]
    assert [s.position for s in cached] == [8 + i for i in range(20)]


def test_cached_and_uncached_sampling_agree():
    model = make_model(context_length=12)
    # Temperature 0.3: the nucleus holds 2-150 tokens, as with a trained model. At 1.0 this random
    # model's nucleus is ~25,000 near-equal tokens, and the cache's float rounding (~1e-7) moves a
    # slice edge or the nucleus boundary across u in a few percent of steps: a coin flip per run.
    kwargs = dict(max_new_tokens=20, temperature=0.3, top_p=0.95, seed=5)
    cached = [s.token_id for s in generate(model, PROMPT, use_cache=True, **kwargs)]
    assert cached == [s.token_id for s in generate(model, PROMPT, use_cache=False, **kwargs)]


def test_long_prompt_is_cropped_and_the_crop_reported():
    model = make_model(context_length=12)
    prompt = list(range(2000, 2030))  # 30 tokens for a 12-token window
    gen = generate(model, prompt, max_new_tokens=4, temperature=0, capture_attention=True)
    assert gen.n_cropped == 18
    assert gen.prompt_ids == prompt[18:]
    steps = list(gen)
    # The model saw exactly the last 12 prompt tokens: the same choice as a direct forward on them.
    assert [s.token_id for s in steps] == greedy_reference(model, prompt[18:], 4)
    assert [s.context_start for s in steps] == [0, 1, 2, 3]
    assert all(row.shape[-1] == 12 for s in steps for row in s.attention)
    assert gen.token_ids == [s.token_id for s in steps]


def test_generation_is_lazy_and_can_stop_early(model):
    gen = generate(model, PROMPT, max_new_tokens=1000, temperature=0)
    first = [next(gen) for _ in range(3)]
    assert [s.index for s in first] == [0, 1, 2]
    assert len(gen.steps) == 3
