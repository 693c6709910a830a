"""The forms outside the Generate tab go through the typed boundary: the Score & compare tab's two streams each
get one ``SamplingSettings`` from the Generate tab's parser, and the model form (Model tab, model B) one
``ModelForm`` turned into the recipe dict the cache keys (exact seeds, the same refusal keys with their 中文)."""

import html

import pytest

from playground.errors import UserError
from playground.i18n import ERRORS_ZH, tr_error
from playground.server.catalog import PRESETS, ConfigError
from playground.server.recipes import random_recipe, recipe_key
from playground.settings import SamplingSettings
from playground.ui import model_switch
from playground.ui.compare.streams import MAX_COMPARE_NEW, sampling_settings, shared_length_and_seed

PAST_FLOAT = 2**53 + 1  # float(PAST_FLOAT) is 2**53
MAX_SEED = 2**63 - 1


@pytest.mark.parametrize("typed", [str(PAST_FLOAT), str(MAX_SEED), f" {MAX_SEED} "])
def test_compare_streams_share_one_exact_seed_in_typed_settings(typed):
    max_new, seed = shared_length_and_seed("12", typed)
    a = sampling_settings("0.7", "", "1", max_new, seed)
    b = sampling_settings("1.5", "40", "0.9", max_new, seed)
    assert isinstance(a, SamplingSettings) and isinstance(b, SamplingSettings)
    assert a.seed == b.seed == int(typed) and type(a.seed) is int
    assert (a.max_new_tokens, a.temperature, a.top_k, a.top_p) == (12, 0.7, None, 1.0)
    assert (b.temperature, b.top_k, b.top_p) == (1.5, 40, 0.9)


def test_compare_without_a_seed_draws_one_both_streams_share():
    max_new, seed = shared_length_and_seed(3, "")
    assert max_new == 3 and isinstance(seed, int) and 0 <= seed < 2**32


def _refusal(read) -> UserError:
    with pytest.raises(UserError) as caught:
        read()
    assert caught.value.key in ERRORS_ZH
    assert tr_error("zh-CN", caught.value) != str(caught.value)  # said in 中文, from its key
    return caught.value


@pytest.mark.parametrize(
    "length, seed, key",
    [
        (MAX_COMPARE_NEW + 1, "", "input.between"),
        ("2.5", "", "input.not_whole"),
        (5, str(2**63), "input.between"),
        (5, float(2**60), "input.not_exact"),
        (5, "-1", "input.between"),
    ],
)
def test_compare_refuses_a_length_or_seed_by_its_key(length, seed, key):
    assert _refusal(lambda: shared_length_and_seed(length, seed)).key == key


@pytest.mark.parametrize(
    "temperature, top_k, top_p, key",
    [
        ("hot", "", "", "input.not_number"),
        ("-1", "", "", "generate.temperature_negative"),
        ("1", "2.5", "", "input.not_whole"),
        ("1", "-3", "", "generate.top_k_negative"),
        ("1", "", "1.5", "generate.top_p_range"),
    ],
)
def test_compare_refuses_a_streams_settings_by_the_generate_tabs_keys(temperature, top_k, top_p, key):
    e = _refusal(lambda: sampling_settings(temperature, top_k, top_p, 5, 1))
    assert e.key == key
    with pytest.raises(UserError) as generate_tab:
        SamplingSettings.parse(temperature=temperature, top_k=top_k, top_p=top_p, max_new_tokens=5, seed=1)
    assert generate_tab.value.key == key


def _form(cfg, seed="0", **change):
    fields = dict(zip(model_switch.FIELDS, (getattr(cfg, f) for f in model_switch.FIELDS))) | change
    return model_switch.recipe_from_form("random", seed, "", None, "float32", *fields.values())


def test_the_model_form_keeps_an_init_seed_past_two_to_the_53_and_the_recipes_shape():
    nano = PRESETS["nano"]
    recipe = _form(nano, seed=str(PAST_FLOAT))
    assert recipe["seed"] == PAST_FLOAT and type(recipe["seed"]) is int
    assert recipe_key(recipe) == recipe_key(random_recipe(nano, seed=PAST_FLOAT))  # the same cache key as before
    assert f'"seed": {PAST_FLOAT}' in recipe_key(recipe)


def test_the_model_form_refuses_a_config_field_as_a_config_error_and_a_seed_as_itself():
    nano = PRESETS["nano"]
    with pytest.raises(ConfigError) as field:
        _form(nano, n_heads="2.5")
    assert field.value.key == "input.not_whole" and tr_error("zh-CN", field.value) != str(field.value)
    with pytest.raises(ConfigError) as rule:  # the engine's rule between fields, after the typed parse
        _form(nano, n_heads="5")
    assert rule.value.key == "config.heads_divide"
    seed = _refusal(lambda: _form(nano, seed=str(2**63)))
    assert seed.key == "input.between" and not isinstance(seed, ConfigError)


def test_two_settings_stream_with_one_exact_seed_past_two_to_the_53():
    """The handler end to end: both streams run with the typed settings, and the seed said is the one typed."""
    from playground.ui import common
    from playground.ui.compare import tab as compare_tab

    state = {**common.new_state(), "recipe": random_recipe(PRESETS["nano"], seed=0), "run_id": None}
    out = list(compare_tab.generate_two_settings(state, "Hello", str(PAST_FLOAT), "3", "0", "", "", "1.5", "5", "0.9"))
    message, side = out[-1]
    assert f"{PAST_FLOAT}" in message.replace(",", "") and "⚠️" not in message, message
    assert "temperature 0.0" in side and "top-k 5" in side and "top-p 0.9" in side
    refused = list(compare_tab.generate_two_settings(state, "Hello", "1", "3", "hot", "", "", "1", "", ""))[-1]
    assert "Temperature must be a number, got 'hot'" in html.unescape(refused[0])
