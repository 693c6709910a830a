"""End to end: launch the real app on a local port and drive it with gradio_client, then check what
comes back against the engine called directly."""

import math

import pytest
import torch

from playground import PRESETS, GPTModel, generate, load_tokenizer
from playground.server.model_cache import CACHE
from playground.server.recipes import random_recipe
from tests.helpers import build_fields, plain_text

pytestmark = pytest.mark.slow

PRESET = "nano"


def _build(client, preset=PRESET, seed=3):
    cfg = PRESETS[preset]
    fields = [
        cfg.vocab_size,
        cfg.context_length,
        cfg.emb_dim,
        cfg.n_heads,
        cfg.n_layers,
        cfg.drop_rate,
        cfg.qkv_bias,
        cfg.tie_weights,
        cfg.pos_encoding,
        cfg.activation,
        cfg.norm_placement,
        cfg.attention_impl,
    ]
    return client.predict("random", seed, "gpt2", None, "float32", *fields, api_name="/build_model")


def test_build_generate_and_attention_match_the_engine(app_url):
    from gradio_client import Client

    client = Client(app_url, verbose=False)
    out = _build(client)
    message, summary = out[0], out[1]
    assert "Ready" in message, message
    assert "3,324,736 parameters" in plain_text(summary)  # the nano preset, counted on the live model

    prompt = "Hello, I am"
    job = client.submit(prompt, 0.9, 20, 0.95, 12, 7, False, api_name="/generate")
    updates = list(job)
    assert len(updates) >= 1
    run = client.predict(api_name="/run_data")

    # The same model, built directly from the same recipe, and the same sampling call.
    torch.manual_seed(3)
    model = GPTModel(PRESETS[PRESET]).eval()
    tok = load_tokenizer()
    ids = tok.encode(prompt)
    assert run["prompt_ids"] == ids == [15496, 11, 314, 716]
    steps = list(generate(model, ids, max_new_tokens=12, temperature=0.9, top_k=20, top_p=0.95, seed=7))
    assert [s["token_id"] for s in run["steps"]] == [s.token_id for s in steps]
    for got, want in zip(run["steps"], steps):
        assert math.isclose(got["prob"], want.prob, rel_tol=1e-5)
        assert math.isclose(got["entropy_bits"], want.entropy, rel_tol=1e-5)

    data = client.predict(1, 2, api_name="/attention_data")
    assert data["token_ids"] == ids + [s.token_id for s in steps]
    with torch.no_grad():
        _, trace = model(torch.tensor([data["token_ids"]]), return_attention=True)
    expected = trace.layer(1)[0, 2]
    got = torch.tensor(data["attention"])
    assert got.shape == expected.shape == (16, 16)
    assert torch.allclose(got, expected, atol=1e-5)
    assert torch.allclose(got.sum(-1), torch.ones(16), atol=1e-5)
    assert torch.all(got.triu(1) == 0)


def test_bad_input_gets_a_message_and_the_session_keeps_working(app_url):
    from gradio_client import Client

    client = Client(app_url, verbose=False)
    _build(client)
    before = client.predict(api_name="/run_data")
    updates = list(client.submit("   ", 0.8, 40, 1.0, 5, 1, False, api_name="/generate"))
    status = updates[-1][1]
    assert "prompt is empty" in status
    cfg = PRESETS[PRESET]
    out = client.predict(
        "random",
        0,
        "gpt2",
        None,
        "float32",
        cfg.vocab_size,
        cfg.context_length,
        100,
        3,
        2,
        0.0,
        True,
        True,
        "learned",
        "gelu_tanh",
        "pre",
        "fused",
        api_name="/build_model",
    )
    assert "divisible" in out[0]
    # The previous model is still the session's model: generating works and uses it.
    list(client.submit("Hi", 0, 0, 1.0, 3, 1, True, api_name="/generate"))
    after = client.predict(api_name="/run_data")
    assert after["model"] == "random init (seed 3)"
    assert len(after["steps"]) == 3
    assert before == {"error": "Generate first."}


def test_two_clients_do_not_share_state(app_url):
    from gradio_client import Client

    a, b = Client(app_url, verbose=False), Client(app_url, verbose=False)
    _build(a, seed=1)
    _build(b, seed=2)
    list(a.submit("Alpha", 0, 0, 1.0, 4, 1, True, api_name="/generate"))
    list(b.submit("Beta", 0, 0, 1.0, 4, 1, True, api_name="/generate"))
    ra, rb = a.predict(api_name="/run_data"), b.predict(api_name="/run_data")
    assert ra["model"] == "random init (seed 1)" and rb["model"] == "random init (seed 2)"
    assert ra["prompt_ids"] == load_tokenizer().encode("Alpha")
    assert rb["prompt_ids"] == load_tokenizer().encode("Beta")
    assert CACHE.get(random_recipe(PRESETS[PRESET], seed=1)) is not CACHE.get(random_recipe(PRESETS[PRESET], seed=2))


def test_exports_download_and_the_model_loads_back(app_url):
    import json

    from gradio_client import Client, handle_file

    client = Client(app_url, verbose=False)
    _build(client, seed=5)
    list(client.submit("Hello, I am", 0, 0, 1.0, 4, 0, True, api_name="/generate"))
    run_path, message = client.predict(api_name="/export_run_json")
    assert "exported" in message
    exported = json.loads(open(run_path).read())
    assert exported["token_ids"] == client.predict(api_name="/run_data")["token_ids"]
    model_path, _ = client.predict(api_name="/export_model")
    cfg = PRESETS[PRESET]
    fields = build_fields(cfg)
    out = client.predict("upload", 0, "gpt2", handle_file(model_path), "float32", *fields, api_name="/build_model")
    assert "Ready" in out[0] and "3,324,736 parameters" in plain_text(out[1])
    list(client.submit("Hello, I am", 0, 0, 1.0, 4, 0, True, api_name="/generate"))
    again = client.predict(api_name="/run_data")
    assert again["token_ids"] == exported["token_ids"]  # the reloaded model is the same model
