"""Many users on loopback: concurrent clients generating and switching models, cancellation, memory."""

import os
import threading
import time

import psutil
import pytest

from playground import PRESETS, load_tokenizer

pytestmark = pytest.mark.slow

PRESETS_USED = ["nano (2 layers, d64)", "tiny (4 layers, d128)"]


def _fields(name):
    cfg = PRESETS[name]
    return [cfg.vocab_size, cfg.context_length, cfg.emb_dim, cfg.n_heads, cfg.n_layers, cfg.drop_rate,
            cfg.qkv_bias, cfg.tie_weights, cfg.pos_encoding, cfg.activation, cfg.norm_placement, cfg.attention_impl]


def test_eight_clients_generate_and_switch_models_without_leaks(app_url):
    from gradio_client import Client

    tok = load_tokenizer()
    deadline = time.monotonic() + 40
    failures, checks = [], []
    process = psutil.Process(os.getpid())
    rss_before = process.memory_info().rss

    def user(i):
        try:
            client = Client(app_url, verbose=False)
            round_ = 0
            while time.monotonic() < deadline and round_ < 4:
                preset = PRESETS_USED[(i + round_) % 2]
                seed = 100 * i + round_
                msg = client.predict("random init", seed, "gpt2 (124M)", None, "float32", *_fields(preset),
                                     api_name="/build_model")[0]
                assert "Ready" in msg, msg
                prompt = f"User {i} round {round_}:"
                list(client.submit(prompt, 0.9, 30, 1.0, 8, i, False, api_name="/generate"))
                run = client.predict(api_name="/run_data")
                # Each client sees only its own model and tokens.
                assert run["model"] == f"random init (seed {seed})", run["model"]
                assert run["prompt_ids"] == tok.encode(prompt)
                assert len(run["steps"]) == 8
                checks.append(i)
                round_ += 1
        except Exception as e:  # collected, reported below
            failures.append(f"user {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=user, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures, failures
    assert len(set(checks)) == 8, "every client completed at least one round"
    grown = process.memory_info().rss - rss_before
    assert grown < 1.5 * 2**30, f"memory grew by {grown / 2**20:.0f} MB"


def test_cancelled_generation_stops(app_url, monkeypatch):
    """Cancelling (what the Stop button and a closed tab do) ends the server-side loop."""
    from gradio_client import Client

    from playground.sampling import Generation

    chosen = []
    original = Generation._choose

    def counting(self, *args, **kwargs):
        chosen.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Generation, "_choose", counting)
    client = Client(app_url, verbose=False)
    client.predict("random init", 0, "gpt2 (124M)", None, "float32", *_fields("tiny (4 layers, d128)"),
                   api_name="/build_model")
    job = client.submit("Once upon a time", 1.0, 0, 1.0, 512, 0, False, api_name="/generate")
    while not job.outputs():
        time.sleep(0.05)
    job.cancel()
    time.sleep(1.0)
    first = len(chosen)
    time.sleep(1.5)
    assert len(chosen) == first < 512
