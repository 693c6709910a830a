"""Every bad input a person can type: a specific message, nothing lost, and the next request works.
Checked against the library here, through the running app in tests/app/test_bad_input_api.py."""

import math

import pytest

from playground import PRESETS, ConfigError, GPTConfig, GPTModel, generate
from playground.server.runs import start_run
from playground.training.trainer import build_model
from tests.bad_inputs import SAMPLING_CASES

NANO = PRESETS["nano"]


@pytest.fixture(scope="module")
def nano():
    return GPTModel(NANO).eval()


@pytest.mark.parametrize("prompt, temperature, top_k, top_p, n, message", SAMPLING_CASES)
def test_library_sampling_inputs(nano, prompt, temperature, top_k, top_p, n, message):
    if message is None:
        run, gen = start_run(
            nano, {}, prompt, max_new_tokens=n, temperature=temperature, top_k=top_k, top_p=top_p, seed=0
        )
        steps = list(gen)
        assert len(steps) == n
        assert all(0 <= s.token_id < NANO.vocab_size and 0 < s.prob <= 1 and math.isfinite(s.entropy) for s in steps)
    else:
        with pytest.raises(ValueError) as err:
            start_run(nano, {}, prompt, max_new_tokens=n, temperature=temperature, top_k=top_k, top_p=top_p, seed=0)
        assert message in str(err.value)
    # and the model still serves a normal request
    assert len(list(generate(nano, [15496, 11], max_new_tokens=2, temperature=0))) == 2


CONFIG_CASES = [
    (dict(emb_dim=100, n_heads=3), "divisible by n_heads"),
    (dict(n_layers=0), "n_layers must be positive"),
    (dict(n_layers=-2), "n_layers must be positive"),
    (dict(emb_dim=0), "emb_dim must be positive"),
    (dict(context_length=-1), "context_length must be positive"),
    (dict(n_heads=1.5), "n_heads must be a whole number"),
    (dict(vocab_size="lots"), "vocab_size must be a whole number"),
    (dict(drop_rate=1.0), "drop_rate must be in [0, 1)"),
    (dict(drop_rate=-0.1), "drop_rate must be in [0, 1)"),
    (dict(vocab_size=100), "smaller than the GPT-2 tokenizer"),
    (dict(activation="swish"), "activation must be one of"),
]


@pytest.mark.parametrize("changes, message", CONFIG_CASES)
def test_library_config_inputs(changes, message):
    with pytest.raises(ConfigError) as err:
        GPTConfig(**(NANO.to_dict() | changes))
    assert message in str(err.value)


def test_absurd_layer_count_is_refused_before_allocation():
    cfg = NANO.replace(n_layers=100_000, emb_dim=1024, n_heads=16)
    with pytest.raises(ConfigError, match="memory budget"):
        build_model(cfg, memory_budget=8 * 2**30)
