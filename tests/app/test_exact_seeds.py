"""A seed reaches the run as it was typed or sent (2⁵³ + 1 and 2⁶³ − 1 included) through the Generate
tab's handler and through the running app's API, and comes back exactly from the run's replay file; the
API's run data and the run export say every token the same way."""

import dataclasses
import html
import json

import pytest

from playground import PRESETS
from playground.server import exports
from playground.server.model_cache import CACHE
from playground.server.recipes import random_recipe
from playground.server.runs import get_run
from playground.ui.compare import tab as compare_tab
from playground.ui.generate import tab as generate_tab
from tests.helpers import build_fields

NANO = PRESETS["nano"]
PAST_FLOAT = 2**53 + 1  # float(PAST_FLOAT) is 2**53
MAX_SEED = 2**63 - 1


def _generate(seed, n=4):
    state = {"recipe": random_recipe(NANO, seed=0), "run_id": None}
    outs = list(generate_tab.generate_tokens(state, "Hello, I am", 1.0, 0, 1.0, n, seed, False))
    return outs[-1]


@pytest.mark.parametrize(
    "typed, seed",
    [
        (PAST_FLOAT, PAST_FLOAT),
        (str(PAST_FLOAT), PAST_FLOAT),  # what the page's seed box (a text box) sends
        (MAX_SEED, MAX_SEED),
        (f" {MAX_SEED} ", MAX_SEED),
        (7.0, 7),
    ],
)
def test_the_generate_handler_keeps_the_seed_exact(typed, seed):
    final = _generate(typed)
    run = get_run(final[0]["run_id"])
    assert run.settings["seed"] == seed and run.settings["seed_used"] == seed
    assert type(run.settings["seed"]) is int


@pytest.mark.parametrize("typed, seed", [(str(PAST_FLOAT), PAST_FLOAT), (str(MAX_SEED), MAX_SEED)])
def test_the_seed_comes_back_exactly_from_the_replay_file(typed, seed):
    """Typed in the page's box, written in the run's replay file, read back and replayed token for token."""
    state = _generate(typed)[0]
    path, message = compare_tab.export_replay(state)
    assert "pg-ok" in message, message
    record = json.loads(open(path, encoding="utf-8").read())
    assert record["seed"] == seed and type(record["seed"]) is int
    report, data = compare_tab.replay_file(state, path)
    assert "pg-ok" in report and data["identical"], data
    assert data["replayed_token_ids"] == [s.token_id for s in get_run(state["run_id"]).steps]


@pytest.mark.parametrize(
    "typed, message",
    [
        (float(2**60), "Sampling seed 1.152921504606847e+18 is past 2⁵³"),
        (str(2**63), "Sampling seed must be between 0 and 9,223,372,036,854,775,807"),
        ("2.5", "Sampling seed must be a whole number, got '2.5'"),
    ],
)
def test_a_seed_it_cannot_use_exactly_is_refused_by_name(typed, message):
    assert message in html.unescape(_generate(typed)[2])


def test_the_api_and_the_export_say_each_token_the_same_way():
    """A leading space, a newline and a fragment of a character, where the display form and decode differ."""
    final = _generate(1, n=3)
    state = final[0]
    run = get_run(state["run_id"])
    ids = [262, 198, 447]  # " the", "\n", the bytes e2 80 (the start of a curly quote)
    run.steps[:] = [dataclasses.replace(s, token_id=i) for s, i in zip(run.steps, ids)]
    api_run = generate_tab.run_data(state)
    export_run = exports._run_metadata(run, CACHE.get(run.recipe), 0, [])
    api, export = api_run["steps"], export_run["steps"]
    assert [s["token"] for s in api] == [s["token"] for s in export] == ["␣the", "↵", "⟨e2 80⟩"]
    assert [s["text"] for s in api] == [s["text"] for s in export] == [" the", "\n", "\ufffd"]
    # One serializer: the export is the API's record of the run, plus its attention, config and replay record.
    assert {k: export_run[k] for k in api_run} == api_run
    assert set(export_run) - set(api_run) == {"config", "attention_window_start", "attention_layers", "replay"}
    assert api_run["tokens"][-3:] == ["␣the", "↵", "⟨e2 80⟩"] and api_run["text"] == " the\n\ufffd"


@pytest.mark.slow
def test_the_api_keeps_the_seed_exact(app_url):
    from gradio_client import Client, handle_file

    client = Client(app_url, verbose=False)
    assert (
        "Ready" in client.predict("random", 1, "gpt2", None, "float32", *build_fields(NANO), api_name="/build_model")[0]
    )
    for sent, seed in [(PAST_FLOAT, PAST_FLOAT), (str(PAST_FLOAT), PAST_FLOAT), (MAX_SEED, MAX_SEED)]:
        status = client.predict("Hello", 1.0, 0, 1.0, 3, sent, False, api_name="/generate")[1]
        assert "Done: 3 tokens" in status, status
        settings = client.predict(api_name="/run_data")["settings"]
        assert settings["seed"] == seed and settings["seed_used"] == seed, settings
        path = client.predict(api_name="/export_replay")[0]
        with open(path, encoding="utf-8") as f:
            assert json.load(f)["seed"] == seed
        report = client.predict(handle_file(path), api_name="/replay")[1]
        assert report["identical"], report
