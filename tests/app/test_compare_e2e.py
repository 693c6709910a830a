"""End to end through gradio_client: scoring with two models (checked against the library called
directly), the side-by-side streams, a receipt, and replaying an exported run."""

import json

import pytest

from playground.engine.presets import PRESETS
from playground.inside.scoring import score_text
from playground.server.model_cache import CACHE
from playground.server.recipes import bundled_recipe, random_recipe

pytestmark = pytest.mark.slow

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak."


@pytest.fixture(scope="module")
def client(app_url):
    from gradio_client import Client

    return Client(app_url, verbose=False)


def test_score_two_models_matches_the_library(client):
    msg = client.predict("random", "nano", 3, "gpt2", None, "float32", api_name="/second_model")
    assert "Model B ready" in msg
    out = client.predict("paste", TEXT, None, False, 0, api_name="/score_compare")
    message, table, chips_a, chips_b, diff, _, data = out
    assert "Scored" in message and "loss (nats/token)" in table and "pg-chip" in chips_b and "B − A" in diff
    a = score_text(CACHE.get(bundled_recipe()), TEXT)
    b = score_text(CACHE.get(random_recipe(PRESETS["nano"], seed=3)), TEXT)
    # the message counts the tokens scored as the table does: every one but the first
    assert f"Scored {a.n_scored:,} of {len(a.token_ids):,} tokens" in message
    assert a.n_scored == len(a.token_ids) - 1
    # Equal to float32 rounding: the head's product is measured per torch thread count
    # (kernels.many_row_product), and the app's request thread may have another count than this
    # one, so another BLAS may sum the same products in another order (seen: 1.6e-6 relative).
    close = dict(rel=1e-5, abs=1e-5)
    assert data["a"]["surprisal_bits"] == pytest.approx(a.surprisal_bits.tolist(), **close)
    assert data["b"]["loss_nats_per_token"] == pytest.approx(b.loss_nats, **close)
    assert data["difference_bits"] == pytest.approx((b.surprisal_bits - a.surprisal_bits).tolist(), **close)
    assert data["b"]["loss_nats_per_token"] > data["a"]["loss_nats_per_token"]  # random B: more surprised


@pytest.mark.parametrize("text, words", [("", "empty"), ("\ufffd\ufffd", "undecodable")])
def test_bad_texts_say_why(client, text, words):
    message = client.predict("paste", text, None, False, 0, api_name="/score_text")[0]
    assert words in message and "pg-error" in message


def test_two_settings_side_by_side_and_receipt_and_replay(client, tmp_path):
    from gradio_client import handle_file

    updates = list(client.submit("ROMEO:\n", 11, 20, 0.7, 0, 1.0, 1.5, 0, 1.0, api_name="/generate_two_settings"))
    message, html = updates[-1]
    assert "Done: 20 tokens" in message and "mean surprisal" in html and "pg-side" in html

    client.submit("ROMEO:\nWhat", 1.1, 40, 0.95, 10, 9, False, api_name="/generate").result()
    receipt_html, receipt = client.predict(3, api_name="/sampling_receipt")
    assert receipt["step"] == 3 and receipt["chosen_slice"][0] <= receipt["u"] < receipt["chosen_slice"][1]
    path, msg = client.predict(api_name="/export_replay")
    record = json.loads(open(path).read())
    assert record["seed"] == 9 and len(record["token_ids"]) == 10
    report_html, report = client.predict(handle_file(path), api_name="/replay")
    assert report["identical"] and report["steps"] == 10 and "Identical" in report_html

    # A replay file from a model this server cannot load says which weights it needs.
    other = {
        **record,
        "model": "checkpoint: my model",
        "recipe": {"kind": "file", "path": "/nowhere.safetensors", "label": "my model", "dtype": "float32"},
        "weights_sha256": "0" * 64,
    }
    bad = tmp_path / "other.replay.json"
    bad.write_text(json.dumps(other))
    report_html, report = client.predict(handle_file(str(bad)), api_name="/replay")
    assert "my model" in report_html and "weights sha256 0000000000000000" in report_html and "error" in report


def test_readme_scoring_example_runs(app_url, capsys):
    import re

    from tests.helpers import DOCS

    text = (DOCS / "python.md").read_text()
    code = re.search(r"```python\n(from gradio_client import Client, handle_file.*?)```", text, re.S).group(1)
    scope = {}
    exec(code.replace('"http://127.0.0.1:7860/"', repr(app_url)), scope)
    assert scope["scores"]["a"]["loss_nats_per_token"] < scope["scores"]["b"]["loss_nats_per_token"]
    assert scope["report"]["identical"] and "Identical: all 20 steps" in capsys.readouterr().out
