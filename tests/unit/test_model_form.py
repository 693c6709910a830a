"""The model form is parsed once into a frozen ``ModelForm``: whole numbers exactly (never through a float), each
bad field refused by its key with a 中文 sentence, and the typed form becomes the same recipe dict (the JSON the
model cache keys and replay files keep) as the config it describes."""

import dataclasses

import pytest

from playground.engine.config import SINCE_GPT2_DEFAULTS, ConfigError, GPTConfig
from playground.errors import UserError
from playground.i18n import ERRORS_ZH, tr_error
from playground.model_form import CONFIG_FIELDS, ModelForm, parse_config_fields
from playground.server.catalog import MODERN_PRESETS, PRESETS
from playground.server.recipes import random_recipe, recipe_key
from playground.whole_numbers import MAX_SEED

PAST_FLOAT = 2**53 + 1  # float(PAST_FLOAT) is 2**53
NANO = PRESETS["nano"]
DEFAULTS = {**SINCE_GPT2_DEFAULTS, "ln_eps": GPTConfig().ln_eps}


def typed(cfg):
    """The form's fields as the page sends them: every number as text."""
    return [str(getattr(cfg, f)) if not isinstance(getattr(cfg, f), str) else getattr(cfg, f) for f in CONFIG_FIELDS]


def form(*fields, weights="random", seed="7", dtype="float32", hub="", upload=None):
    return ModelForm.parse(weights, seed, hub, upload, dtype, *fields, defaults=DEFAULTS)


@pytest.mark.parametrize("cfg", [NANO, *MODERN_PRESETS.values()], ids=["nano", *MODERN_PRESETS])
def test_a_typed_form_becomes_the_same_recipe_and_cache_key_as_its_config(cfg):
    f = form(*typed(cfg))
    built = GPTConfig(**f.config_dict())
    assert built == cfg
    assert recipe_key(random_recipe(built, f.init_seed, f.dtype)) == recipe_key(random_recipe(cfg, 7))
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.init_seed = 1  # type: ignore[misc]


def test_whole_numbers_are_read_exactly_past_two_to_the_53():
    f = form(*typed(NANO), seed=str(PAST_FLOAT))
    assert f.init_seed == PAST_FLOAT and type(f.init_seed) is int
    assert form(*typed(NANO), seed=f" {MAX_SEED} ").init_seed == MAX_SEED
    data = parse_config_fields([str(PAST_FLOAT), *typed(NANO)[1:]])
    assert data["vocab_size"] == PAST_FLOAT  # not 2**53: the engine then refuses the number typed
    with pytest.raises(ConfigError) as caught:
        GPTConfig(**data)
    assert caught.value.key == "config.field_huge" and "9,007,199,254,740,993" in str(caught.value)


def test_number_widgets_send_floats_and_an_older_caller_only_gpt2s_fields():
    values = [getattr(NANO, f) for f in CONFIG_FIELDS]
    as_floats = [float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in values]
    data = parse_config_fields(as_floats)
    assert all(type(data[f]) is int for f in ("vocab_size", "emb_dim", "n_heads")) and GPTConfig(**data) == NANO
    assert GPTConfig(**form(*typed(NANO)[:12]).config_dict()) == NANO


def test_other_weights_ignore_the_config_fields():
    f = form("", "abc", weights="bundled", dtype="int8")
    assert (f.weights, f.dtype, f.config, f.init_seed) == ("bundled", "int8", (), 0)
    assert form(weights="hub", hub="  gpt2 ").hub_name == "gpt2"
    assert form(weights="upload", upload="/tmp/x.safetensors").upload == "/tmp/x.safetensors"


@pytest.mark.parametrize(
    "change, key",
    [
        ({"emb_dim": ""}, "config.field_empty"),
        ({"n_layers": "abc"}, "input.not_whole"),
        ({"n_heads": "2.5"}, "input.not_whole"),
        ({"context_length": float(2**60)}, "input.not_exact"),
        ({"drop_rate": "x"}, "input.not_number"),
        ({"rope_theta": "inf"}, "input.not_finite"),
        ({"qkv_bias": "maybe"}, "input.not_bool"),
    ],
)
def test_a_bad_config_field_is_refused_by_its_key_in_both_languages(change, key):
    values = dict(zip(CONFIG_FIELDS, typed(NANO))) | change
    with pytest.raises(UserError) as caught:
        form(*values.values())
    e = caught.value
    assert e.key == key and e.fields["name"] == next(iter(change)) and key in ERRORS_ZH
    assert tr_error("zh-CN", e) != str(e) and next(iter(change)) in tr_error("zh-CN", e)


@pytest.mark.parametrize(
    "args, key",
    [
        (dict(weights="cloud"), "input.not_one_of"),
        (dict(dtype="fp8"), "input.not_one_of"),
        (dict(seed="-1"), "input.between"),
        (dict(seed=str(2**63)), "input.between"),
        (dict(seed=float(2**60)), "input.not_exact"),
        (dict(seed="1.5"), "input.not_whole"),
    ],
)
def test_a_bad_choice_or_init_seed_is_refused_by_its_key(args, key):
    with pytest.raises(UserError) as caught:
        form(*typed(NANO), **args)
    assert caught.value.key == key and key in ERRORS_ZH and tr_error("zh-CN", caught.value) != str(caught.value)


def test_the_form_reads_exactly_the_configs_whole_number_fields():
    """The form is a leaf (it cannot import the engine), so its list of whole-number fields is its own: it
    names the config's int fields, no more and no fewer, and every one is a field the form shows."""
    from playground.engine.config import whole_fields
    from playground.model_form import INT_FIELDS

    assert set(INT_FIELDS) == set(whole_fields()) and set(INT_FIELDS) <= set(CONFIG_FIELDS)
    with pytest.raises(ConfigError, match="sliding_window must be a whole number"):
        GPTConfig(sliding_window=2.5)
