"""GPTConfig validation, presets and the memory guard (issue 2: config and presets; issue 6: bad input)."""

import dataclasses

import pytest
import torch

from playground.engine.config import GPT2_VOCAB_SIZE, ConfigError, GPTConfig
from playground.engine.memory_check import check_memory
from playground.engine.model import GPTModel
from playground.engine.presets import PRESETS, get_preset
from playground.engine.sizes import count_parameters_analytic, estimate_memory_bytes
from playground.errors import UserError
from playground.runtime.machine_memory import format_bytes
from playground.training.trainer import build_model

TINY = dict(context_length=16, emb_dim=32, n_heads=4, n_layers=2)


# ---------------------------------------------------------------------------------------------
# Presets are the published architectures


@pytest.mark.parametrize(
    "name, layers, heads, dim",
    [
        ("gpt2-small", 12, 12, 768),
        ("gpt2-medium", 24, 16, 1024),
        ("gpt2-large", 36, 20, 1280),
        ("gpt2-xl", 48, 25, 1600),
    ],
)
def test_gpt2_presets_match_openai(name, layers, heads, dim):
    cfg = PRESETS[name]
    assert (cfg.n_layers, cfg.n_heads, cfg.emb_dim) == (layers, heads, dim)
    assert (cfg.vocab_size, cfg.context_length) == (50257, 1024)
    assert cfg.qkv_bias and cfg.tie_weights
    assert (cfg.pos_encoding, cfg.activation, cfg.norm_placement) == ("learned", "gelu_tanh", "pre")
    assert cfg.ln_eps == 1e-5


def test_textbook_presets_as_written():
    cfg = PRESETS["textbook-124m"]
    # LLMs-from-scratch ch. 4: GPT_CONFIG_124M
    assert (cfg.vocab_size, cfg.context_length, cfg.emb_dim, cfg.n_heads, cfg.n_layers) == (50257, 1024, 768, 12, 12)
    assert cfg.drop_rate == 0.1 and cfg.qkv_bias is False and cfg.tie_weights is False
    assert PRESETS["textbook-124m-8-heads"].n_heads == 8


def test_decoder_only_tutorial_preset():
    cfg = PRESETS["tutorial-d512"]
    assert (cfg.pos_encoding, cfg.activation, cfg.emb_dim, cfg.n_heads, cfg.n_layers) == (
        "sinusoidal",
        "relu",
        512,
        8,
        6,
    )


def test_tiny_preset_builds_and_generates():
    # How fast is measured by bench/ (ratios in one run), not by a timed unit test on a shared box.
    from playground.engine.sampling import generate

    torch.manual_seed(0)
    model = GPTModel(PRESETS["tiny"])
    steps = list(generate(model, [15496, 11, 314, 716], max_new_tokens=20, temperature=0))
    assert len(steps) == 20


def test_get_preset_unknown_name():
    with pytest.raises(ConfigError, match="unknown preset 'gpt5'"):
        get_preset("gpt5")
    assert get_preset("gpt2-small") is PRESETS["gpt2-small"]


def test_config_is_frozen_and_round_trips():
    cfg = GPTConfig(**TINY, pos_encoding="sinusoidal", activation="relu", norm_placement="post")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.emb_dim = 64  # frozen dataclass
    assert GPTConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.head_dim == 8
    assert cfg.replace(n_layers=3).n_layers == 3


def test_from_dict_rejects_unknown_fields():
    with pytest.raises(ConfigError, match="unknown config field.*n_embd"):
        GPTConfig.from_dict({**TINY, "n_embd": 32})


# ---------------------------------------------------------------------------------------------
# Validation: one specific message per mistake


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(emb_dim=30, n_heads=4), r"emb_dim \(30\) must be divisible by n_heads \(4\)"),
        (dict(emb_dim=768, n_heads=7), r"Try n_heads in \[6, 8"),
        (dict(emb_dim=0), "emb_dim must be positive, got 0"),
        (dict(n_heads=-2), "n_heads must be positive, got -2"),
        (dict(n_layers=0), "n_layers must be positive, got 0"),
        (dict(context_length=-1), "context_length must be positive, got -1"),
        (dict(vocab_size=0), "vocab_size must be positive, got 0"),
        (dict(emb_dim=32.5), "emb_dim must be a whole number, got 32.5"),
        (dict(n_layers="2"), "n_layers must be a whole number, got '2'"),
        (dict(n_heads=None), "n_heads must be a whole number, got None"),
        (dict(n_layers=True), "n_layers must be a whole number, got True"),
        (dict(context_length=16.0), "context_length must be a whole number"),
        (dict(drop_rate=1.0), r"drop_rate must be in \[0, 1\), got 1.0"),
        (dict(drop_rate=-0.1), r"drop_rate must be in \[0, 1\), got -0.1"),
        (dict(drop_rate=float("nan")), r"drop_rate must be in \[0, 1\), got nan"),
        (dict(drop_rate=float("inf")), r"drop_rate must be in \[0, 1\)"),
        (dict(drop_rate="0.1"), "drop_rate must be a number, got '0.1'"),
        (dict(vocab_size=50000), r"vocab_size \(50000\) is smaller than the GPT-2 tokenizer's 50257"),
        (dict(pos_encoding="rotary"), "pos_encoding must be one of learned, sinusoidal, rope; got 'rotary'"),
        (dict(activation="swiglu"), "activation must be one of gelu_tanh, gelu, relu; got 'swiglu'"),
        (dict(norm_placement="sandwich"), "norm_placement must be one of pre, post; got 'sandwich'"),
        (dict(attention_impl="flash"), "attention_impl must be one of fused, per_head; got 'flash'"),
        (dict(emb_dim=33, n_heads=3, pos_encoding="sinusoidal"), "sinusoidal positions need an even emb_dim, got 33"),
        (dict(ln_eps=0.0), r"ln_eps must be in \(0, 1\), got 0.0"),
        (dict(ln_eps=float("nan")), r"ln_eps must be in \(0, 1\)"),
        (dict(ln_eps="1e-5"), "ln_eps must be a number"),
    ],
)
def test_invalid_configs_have_specific_messages(changes, message):
    with pytest.raises(ConfigError, match=message):
        GPTConfig(**{**TINY, **changes})


def test_sinusoidal_with_even_dim_is_fine():
    # 36 is even: the parametrised case above only checks the odd one is refused.
    assert GPTConfig(**{**TINY, "emb_dim": 36, "pos_encoding": "sinusoidal"}).emb_dim == 36


def test_config_error_is_a_value_error():
    # The UI catches ValueError for every user mistake; ConfigError must be one.
    assert issubclass(ConfigError, ValueError)


def test_vocab_at_and_above_tokenizer_size_is_accepted():
    assert GPTConfig(**TINY, vocab_size=GPT2_VOCAB_SIZE).vocab_size == 50257
    assert GPTConfig(**TINY, vocab_size=50304).vocab_size == 50304  # nanoGPT's padded vocab


# ---------------------------------------------------------------------------------------------
# Memory guard: refused before allocation, with the estimate in the message


def test_memory_estimate_is_weights_plus_cache_plus_activations():
    cfg = PRESETS["gpt2-small"]
    est = estimate_memory_bytes(cfg, "float32")
    weights = 124_439_808 * 4
    kv = 2 * 12 * 1024 * 768 * 4
    logits = 1024 * 50257 * 4
    assert est > weights + kv + logits
    assert est < 2 * (weights + kv + logits)
    assert estimate_memory_bytes(cfg, "bfloat16") < est


def test_check_memory_message_contains_the_estimate():
    cfg = PRESETS["gpt2-xl"]
    est = estimate_memory_bytes(cfg, "float32")
    with pytest.raises(ConfigError) as info:
        check_memory(cfg, "float32", budget_bytes=10**9)
    msg = str(info.value)
    assert format_bytes(est) in msg and "1,557,611,200 parameters" in msg and "1.00 GB" in msg
    assert check_memory(cfg, "float32", budget_bytes=est) == est


def test_gpt2_xl_refused_before_allocation(monkeypatch):
    # Allocation would go through nn.Embedding / nn.Linear; make any allocation fail loudly so
    # the test proves the refusal comes first, not after gigabytes were touched.
    def no_alloc(*args, **kwargs):
        raise AssertionError("allocated before the memory check")

    monkeypatch.setattr(torch.nn.Embedding, "__init__", no_alloc)
    monkeypatch.setattr(torch.nn.Linear, "__init__", no_alloc)
    with pytest.raises(ConfigError, match=r"about 7\.\d\d GB in float32"):
        build_model(PRESETS["gpt2-xl"], memory_budget=1e9)


def test_absurd_layer_count_refused_by_default_budget(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", "4")
    cfg = PRESETS["gpt2-small"].replace(n_layers=10_000)
    with pytest.raises(ConfigError, match=r"more than the memory budget of 4\.29 GB"):
        build_model(cfg)


def test_budget_env_must_be_a_number(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", "lots")
    with pytest.raises(UserError, match="PLAYGROUND_MEMORY_BUDGET_GB must be a number, got 'lots'"):
        check_memory(GPTConfig(**TINY))


def test_unknown_dtype_in_estimate():
    with pytest.raises(ConfigError, match="unknown dtype 'float8'"):
        estimate_memory_bytes(GPTConfig(**TINY), "float8")


def test_analytic_count_is_independent_of_attention_layout():
    base = GPTConfig(**TINY)
    assert count_parameters_analytic(base) == count_parameters_analytic(base.replace(attention_impl="per_head"))
    # Untying adds exactly one V x d matrix; sinusoidal drops the C x d table.
    assert count_parameters_analytic(base.replace(tie_weights=False)) - count_parameters_analytic(base) == 50257 * 32
    assert (
        count_parameters_analytic(base) - count_parameters_analytic(base.replace(pos_encoding="sinusoidal")) == 16 * 32
    )


def test_gpt_model_rejects_non_config():
    with pytest.raises(TypeError, match="GPTModel needs a GPTConfig, got dict"):
        GPTModel(dict(TINY))
