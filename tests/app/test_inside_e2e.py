"""The Inside tab end to end (issue 11): the real app driven by gradio_client; every endpoint's
numbers against the library called directly on the same model and tokens, and bad input answered
with a message while the session keeps working."""

import pytest

from playground.inside import attribution, effects, lenses
from playground.inside.interventions import Intervention
from playground.server.model_cache import CACHE
from playground.server.recipes import default_recipe

pytestmark = pytest.mark.slow

PROMPT = "ROMEO:\nWhat light through yonder window breaks?\n"


@pytest.fixture(scope="module")
def client(app_url):
    from gradio_client import Client

    c = Client(app_url, verbose=False)
    assert "error" in c.predict(api_name="/logit_lens")  # no run yet: a message, not a crash
    list(c.submit(PROMPT, 0, 0, 1.0, 12, 1, True, api_name="/generate"))
    return c


def test_every_view_returns_the_librarys_numbers(client):
    model = CACHE.get(default_recipe())
    ids = client.predict(api_name="/run_data")["token_ids"]
    T = len(ids)

    lens = client.predict(api_name="/logit_lens")
    want = lenses.logit_lens(model, ids)
    assert lens["top_id"] == want["top_id"] and lens["window_start"] == 0
    # float32 through differently blocked kernels (the app's decode layout): equal to ~2e-6 relative
    assert lens["next_prob"][-1][:-1] == pytest.approx(want["next_prob"][-1][:-1], rel=1e-5)

    cell = client.predict(3, 10, api_name="/lens_cell")
    assert [t for t, _, _ in cell["top"]] == [t for t, _ in lenses.lens_cell(model, ids, 3, 10)["top"]]

    dla = client.predict(T - 2, "", api_name="/logit_attribution")
    assert dla["target_id"] == ids[-1]
    assert dla["total"] == pytest.approx(dla["model_logit"], abs=1e-3)
    flat = lambda rows: [v for row in rows for v in row]  # noqa: E731
    assert flat(dla["heads"]) == pytest.approx(
        flat(attribution.logit_attribution(model, ids, T - 2)["heads"]), abs=1e-9
    )

    maths = client.predict(2, 1, 9, api_name="/attention_maths")
    att = client.predict(2, 1, api_name="/attention_data")["attention"]
    assert maths["softmax"] == pytest.approx(att[9], abs=1e-6)  # the Generate tab's heatmap row

    out = client.predict("1.2, 3.0", "", "", 1.0, "", "", False, 5, api_name="/intervene")
    direct = effects.compare(model, ids, Intervention(zero_heads=((1, 2), (3, 0))), 5, lens=False)
    assert out["loss_after"] == pytest.approx(direct["loss_after"], abs=1e-5)
    assert out["shown_ids"] == direct["shown_ids"] and out["tokens"] == lens["tokens"]

    dose = client.predict("4.1", 6, "", api_name="/dose_response")
    assert dose["logprob"] == pytest.approx(effects.dose_response(model, ids, 4, 1, 6)["logprob"], abs=1e-5)

    sweep = client.predict(api_name="/head_sweep")
    assert len(sweep["delta_loss"]) == model.cfg.n_layers and len(sweep["delta_loss"][0]) == model.cfg.n_heads
    one = effects.compare(model, ids, Intervention(zero_heads=((2, 3),)), 0, lens=False)
    assert sweep["delta_loss"][2][3] == pytest.approx(one["mean_loss_after"] - one["mean_loss_before"], abs=1e-4)


@pytest.mark.parametrize(
    "args, api, message",
    [
        (("9.0", "", "", 1.0, "", "", False, None), "/intervene", "head 0 of layer 9"),
        (("x", "", "", 1.0, "", "", False, None), "/intervene", "could not read 'x'"),
        (("1.1", 3, "two words"), "/dose_response", "exactly one token"),
        ((3, "hello world"), "/logit_attribution", "exactly one token"),
        ((0, 7, 2), "/attention_maths", "Head must be between 0 and 3"),
    ],
)
def test_bad_input_gets_a_message_and_the_app_keeps_serving(client, args, api, message):
    out = client.predict(*args, api_name=api)
    assert message in out["error"], out
    assert "top_id" in client.predict(api_name="/logit_lens")  # still serving this session


def test_alpha_outside_the_range_is_refused_and_the_app_keeps_serving(client):
    # The app's own check answers, naming the field (Gradio's slider check no longer runs first).
    refused = client.predict("", "", "1.1", 2.5, "", "", False, None, api_name="/intervene")
    assert "α must be a number from 0 to 2" in refused["error"], refused
    ok = client.predict("", "", "1.1", 2.0, "", "", False, None, api_name="/intervene")
    assert "error" not in ok and ok["intervention"]["scale_head"] == [1, 1, 2.0]
