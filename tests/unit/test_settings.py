"""One typed boundary: what a person types, what a program sends and what a replay file holds become the
same frozen ``SamplingSettings``, by one parser, and a bad value is refused by the same key (with its 中文)
whichever door it came through: the parser, the server's ``start_run`` or the engine's ``generate``."""

import dataclasses

import pytest

from playground.errors import UserError
from playground.i18n import ERRORS_ZH, tr_error
from playground.server.recipes import random_recipe
from playground.server.replay_files import ReplayError, check_settings
from playground.server.runs import start_run
from playground.settings import SamplingSettings, parse_seed, parse_whole
from playground.whole_numbers import MAX_SEED
from tests.export_helpers import nano_model

PAST_FLOAT = 2**53 + 1  # float(PAST_FLOAT) is 2**53
RAW = dict(temperature="0.8", top_k="40", top_p="0.9", max_new_tokens="5", seed="")


@pytest.fixture(scope="module")
def model():
    return nano_model()


def test_typed_text_becomes_frozen_typed_settings():
    s = SamplingSettings.parse(**RAW)
    assert s == SamplingSettings(max_new_tokens=5, temperature=0.8, top_k=40, top_p=0.9, seed=None)
    assert (type(s.max_new_tokens), type(s.temperature), type(s.top_k), type(s.top_p)) == (int, float, int, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.temperature = 2.0  # type: ignore[misc]
    assert SamplingSettings(**s.as_dict()) == s


@pytest.mark.parametrize(
    "typed, seed", [(str(PAST_FLOAT), PAST_FLOAT), (f" {MAX_SEED} ", MAX_SEED), (PAST_FLOAT, PAST_FLOAT)]
)
def test_a_seed_is_parsed_exactly_never_through_a_float(typed, seed):
    s = SamplingSettings.parse(**RAW | {"seed": typed})
    assert s.seed == seed and type(s.seed) is int
    assert s.as_dict()["seed"] == seed


def test_greedy_is_a_temperature_of_zero_and_empty_boxes_are_off():
    s = SamplingSettings.parse(**RAW | {"top_k": "", "top_p": None, "greedy": "true"})
    assert (s.temperature, s.top_k, s.top_p, s.seed) == (0.0, None, None, None)


def test_a_program_sends_numbers_a_person_may_type_digits():
    assert parse_whole("42", "Steps") == 42 and parse_seed(str(PAST_FLOAT)) == PAST_FLOAT
    for read in (lambda: parse_whole("42", "Steps", text=False), lambda: parse_seed("42", text=False)):
        with pytest.raises(UserError) as caught:
            read()
        assert caught.value.key == "input.not_number"


@pytest.mark.parametrize(
    "field, value, key",
    [
        ("temperature", -0.5, "generate.temperature_negative"),
        ("temperature", float("nan"), "input.not_finite"),
        ("top_k", -1, "generate.top_k_negative"),
        ("top_k", 2.5, "input.not_whole"),  # a count's reader refuses a fraction, naming the field
        ("top_p", 1.5, "generate.top_p_range"),
        ("max_new_tokens", 0, "generate.max_new_zero"),
        ("seed", 2**63, "input.between"),
        ("seed", float(2**60), "input.not_exact"),
    ],
)
def test_the_parser_and_the_server_refuse_by_the_same_key(model, field, value, key):
    """A value read from a box (``parse``) and the same value sent to the server by a program (``start_run``):
    one parser, one key, one 中文 sentence."""
    sent = dict(temperature=1.0, top_k=None, top_p=None, max_new_tokens=3, seed=None) | {field: value}
    with pytest.raises(UserError) as parsed:
        SamplingSettings.parse(**sent)
    with pytest.raises(UserError) as served:
        start_run(model, random_recipe(model.cfg, seed=0), "Hello", **sent)
    assert parsed.value.key == served.value.key == key
    assert key in ERRORS_ZH and tr_error("zh-CN", served.value) != str(served.value)


@pytest.mark.parametrize(
    "field, value, key",
    [
        ("temperature", -0.5, "generate.temperature_negative"),
        ("temperature", "hot", "generate.temperature_number"),
        ("top_k", -1, "generate.top_k_negative"),
        ("top_k", 2.5, "generate.top_k_whole"),
        ("top_p", 0, "generate.top_p_range"),
        ("max_new_tokens", 2.5, "generate.max_new_whole"),
        ("seed", 2**63, "generate.seed_range"),
    ],
)
def test_the_engine_takes_typed_values_and_the_settings_hold_the_rules(model, field, value, key):
    from playground.engine.sampling import generate

    args = dict(temperature=1.0, top_k=None, top_p=None, max_new_tokens=3, seed=None) | {field: value}
    with pytest.raises(UserError) as typed:
        SamplingSettings(**args)
    with pytest.raises(UserError) as engine:
        generate(model, [1, 2], **args)
    assert typed.value.key == engine.value.key == key


@pytest.mark.parametrize(
    "settings, seed, key",
    [
        ({"temperature": -1}, 1, "replay.temperature"),
        ({"temperature": "1"}, 1, "replay.temperature"),
        ({"top_k": 2.0}, 1, "replay.top_k"),
        ({"top_p": 0}, 1, "replay.top_p"),
        ([], 1, "replay.settings"),
        ({}, 2.0, "replay.seed"),
        ({}, 2**63, "replay.seed_range"),
    ],
)
def test_a_replay_files_settings_are_refused_as_its_fields(settings, seed, key):
    with pytest.raises(ReplayError) as caught:
        check_settings(settings, seed)
    assert caught.value.key == key and key in ERRORS_ZH
    assert tr_error("zh-CN", caught.value) == ERRORS_ZH[key]


def test_a_replay_files_settings_become_the_same_typed_settings():
    s = check_settings({"temperature": 0.7, "top_k": 0, "top_p": 1, "max_new_tokens": 9}, PAST_FLOAT)
    assert s == SamplingSettings(temperature=0.7, top_k=None, top_p=1.0, seed=PAST_FLOAT)
    assert check_settings({}, MAX_SEED).temperature == 0.0  # no temperature recorded: greedy


@pytest.mark.parametrize("seed", [2.7, float(PAST_FLOAT), -1, 2**63, "3", None])
def test_a_replay_files_random_recipe_needs_an_exact_seed(model, seed):
    """A random recipe's seed names its weights: 2.7 is not truncated to 2, nor 2⁵³ + 1 sent as a float
    rounded, into another model."""
    from playground.server.replay import model_for, replay_record
    from tests.export_helpers import small_run

    record = replay_record(small_run(model), model)
    record["recipe"] = {**record["recipe"], "seed": seed}
    with pytest.raises(ReplayError) as caught:
        model_for(record)
    detail = caught.value.fields["detail"]
    assert caught.value.key == "replay.needs_model" and detail.key == "replay.random_recipe"
    assert "收到的种子是" in tr_error("zh-CN", caught.value)
    record["recipe"]["seed"] = PAST_FLOAT  # a JSON int: exact, and built as it is
    built, recipe = model_for(record)
    assert recipe["seed"] == PAST_FLOAT and built.cfg == model.cfg


def test_a_recipe_is_named_as_data_and_written_in_either_language():
    """The server names a recipe by key and fields; English for records, the page's language on the page."""
    from playground.i18n import tr_words
    from playground.server.recipes import describe_recipe, recipe_words

    trained = {"kind": "file", "path": "x.safetensors", "label": "x", "dtype": "float32"}
    trained["trained"] = {"layers": 2, "d": 64, "steps": 20, "corpus": "Pride and Prejudice"}
    for recipe in ({"kind": "random", "seed": 3, "config": {}}, {"kind": "bundled"}, trained):
        words = recipe_words(recipe)
        assert describe_recipe(recipe) == tr_words("en", words)
        assert tr_words("zh-CN", words) != tr_words("en", words)
    assert tr_words("en", recipe_words({"kind": "random", "seed": 3})) == "random init (seed 3)"
