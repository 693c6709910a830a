"""Seeds and counts are whole numbers, exactly: 2⁵³ + 1 and 2⁶³ − 1 reach torch as they were sent
(the engine, the server's arguments, a replay file), and a float stands for one only within 2⁵³."""

import json

import pytest
import torch

from playground.errors import UserError
from playground.server.replay import read_record, replay, replay_record, write_record
from playground.server.runs import start_run
from playground.settings import parse_number, parse_seed, parse_whole
from playground.whole_numbers import MAX_SEED, exact_whole, is_inexact_whole, read_number
from tests.export_helpers import nano_model, private_dirs
from tests.helpers import ROOT

PAST_FLOAT = 2**53 + 1  # float(PAST_FLOAT) is 2**53: the seed a float() would silently use instead
SEEDS = [PAST_FLOAT, MAX_SEED]


def test_the_documented_range_is_the_one_enforced():
    assert MAX_SEED == 2**63 - 1
    assert "seeds below 2⁶³" in (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "value, whole",
    [
        (PAST_FLOAT, PAST_FLOAT),
        (MAX_SEED, MAX_SEED),
        (7.0, 7),
        (float(2**53), 2**53),
        (-3, -3),
        (2.5, None),
        (float("nan"), None),
        (float("inf"), None),
        (float(2**60), None),  # integral, but past 2⁵³: which whole number was meant is lost
        (True, None),
        ("7", None),  # text is read by read_number first
        (None, None),
    ],
)
def test_exact_whole(value, whole):
    assert exact_whole(value) == whole and (whole is None or type(exact_whole(value)) is int)


def test_text_is_read_by_int_first():
    assert read_number("9007199254740993") == PAST_FLOAT
    assert read_number(" 9223372036854775807 ") == MAX_SEED
    assert read_number("2.5") == 2.5 and read_number("1e3") == 1000.0
    assert is_inexact_whole(read_number("1.2e18")) and not is_inexact_whole(PAST_FLOAT)
    with pytest.raises(ValueError):
        read_number("abc")
    with pytest.raises(TypeError):
        read_number([1])


@pytest.mark.parametrize("seed", SEEDS)
def test_the_server_takes_a_seed_as_the_int_it_is(seed):
    assert parse_seed(seed, text=False) == seed and parse_whole(seed, "Max new tokens", text=False) == seed


@pytest.mark.parametrize(
    "value, key",
    [
        (2.5, "input.not_whole"),
        (float(2**60), "input.not_exact"),
        ("42", "input.not_number"),  # the library takes numbers; text is the UI's to parse
        (2**63, "input.between"),
        (-1, "input.between"),
    ],
)
def test_the_server_refuses_a_seed_by_key(value, key):
    with pytest.raises(UserError) as caught:
        parse_seed(value, text=False)
    assert caught.value.key == key


def test_a_huge_int_where_a_float_is_wanted_is_refused_not_an_overflow():
    with pytest.raises(UserError) as caught:
        parse_number(10**400, "Temperature", text=False)
    assert caught.value.key == "input.not_finite"


@pytest.mark.parametrize(
    "seed, key", [(2.5, "generate.seed_range"), (float(2**60), "input.not_exact"), (2**63, "generate.seed_range")]
)
def test_the_engine_refuses_a_seed_it_cannot_use_exactly(seed, key):
    from playground.engine.sampling import Generation

    with pytest.raises(UserError) as caught:
        Generation(nano_model(), [1, 2], max_new_tokens=1, seed=seed)
    assert caught.value.key == key


def _run(seed, n=8):
    model = nano_model()
    from playground.server.recipes import random_recipe

    run, gen = start_run(
        model,
        random_recipe(model.cfg, seed=0),
        "To be, or not",
        max_new_tokens=n,
        temperature=1.0,
        top_k=None,
        top_p=None,
        seed=seed,
        replaces=None,
    )
    run.steps.extend(gen)
    return model, run


def _draws(seed, n=8):
    generator = torch.Generator().manual_seed(seed)
    return [float(torch.rand((), generator=generator, dtype=torch.float64)) for _ in range(n)]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_run_seeded_past_2_53_uses_that_seed_and_replays_from_its_file(seed, tmp_path):
    model, run = _run(seed)
    assert run.settings["seed"] == seed and run.settings["seed_used"] == seed
    # The run's uniform draws are those of torch's generator seeded with exactly this seed (not its float).
    assert [s.u for s in run.steps] == _draws(seed)
    if seed == PAST_FLOAT:
        assert _draws(seed) != _draws(2**53)  # the neighbour a float() would have picked draws otherwise
    path = write_record(replay_record(run, model), tmp_path)
    assert json.loads(path.read_text())["seed"] == seed
    back = read_record(path)
    assert back["seed"] == seed and type(back["seed"]) is int
    report = replay(back, model)
    assert report.identical and report.replayed_ids == [s.token_id for s in run.steps]


def test_a_full_run_export_carries_the_seed_exactly(tmp_path, monkeypatch):
    from playground.server.exports import export_run

    private_dirs(tmp_path, monkeypatch)
    model, run = _run(PAST_FLOAT, n=4)
    back = read_record(export_run(run, model, layers=[0]))
    assert back["seed"] == PAST_FLOAT and back["token_ids"] == [s.token_id for s in run.steps]
    assert replay(back, model).identical
