"""Many users on loopback: concurrent clients generating and switching models, cancellation, memory."""

import os
import threading
import time

import psutil
import pytest

from playground import PRESETS, load_tokenizer

pytestmark = pytest.mark.slow

PRESETS_USED = ["nano", "tiny"]


def _fields(name):
    cfg = PRESETS[name]
    return [
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
                msg = client.predict(
                    "random", seed, "gpt2", None, "float32", *_fields(preset), api_name="/build_model"
                )[0]
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

    from playground.engine.sampling import Generation

    chosen = []
    original = Generation._choose

    def counting(self, *args, **kwargs):
        chosen.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Generation, "_choose", counting)
    client = Client(app_url, verbose=False)
    client.predict("random", 0, "gpt2", None, "float32", *_fields("tiny"), api_name="/build_model")
    job = client.submit("Once upon a time", 1.0, 0, 1.0, 512, 0, False, api_name="/generate")
    while not job.outputs():
        time.sleep(0.05)
    job.cancel()
    time.sleep(1.0)
    first = len(chosen)
    time.sleep(1.5)
    assert len(chosen) == first < 512


def test_stop_endpoint_ends_the_run_and_says_how_many(app_url):
    """/stop raises the run's flag: the stream ends after its current step, with the count."""
    from gradio_client import Client

    client = Client(app_url, verbose=False)
    client.predict("random", 0, "gpt2", None, "float32", *_fields("tiny"), api_name="/build_model")
    job = client.submit("Once upon a time", 1.0, 0, 1.0, 512, 0, False, api_name="/generate")
    while len(job.outputs()) < 2:
        time.sleep(0.02)
    client.predict(api_name="/stop")
    status = job.result()[1]
    made = int(status.split("data-tokens='")[1].split("'")[0])
    assert "data-state='stopped'" in status and f"Stopped by you after {made} of 512 tokens" in status
    assert made < 512 and len(client.predict(api_name="/run_data")["steps"]) == made


def test_four_sessions_of_big_models_are_refused_not_killed(app_url, monkeypatch, request):
    """Issue 10, scaled to this machine: four sessions each build a different GPT-2-small-sized random
    model under a budget that holds about two, then all generate at once. Builds and generations
    that do not fit are refused with a message naming the holders; the process's RSS stays within the
    budget (plus the baseline and slack), and a well-behaved client is served afterwards."""
    import gc

    from gradio_client import Client

    from playground.accel import background
    from playground.runtime import kernels
    from playground.server.model_cache import CACHE

    # As a server (serve.prepare): this machine's kernel decisions read from the session's kernel cache
    # (tests/conftest.py), a build copying what they choose, and a shape not decided built plain.
    kernels.keep_decisions()
    request.addfinalizer(lambda: (background.wait_idle(120), kernels.stop_keeping_decisions()))
    CACHE.clear()
    gc.collect()
    process = psutil.Process(os.getpid())
    baseline = process.memory_info().rss
    budget = 1.3 * 2**30  # GPT-2 small in float32 is 0.5 GB
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", str(budget / 2**30))
    peak, stop_sampling = [baseline], threading.Event()

    def sample():
        while not stop_sampling.is_set():
            peak.append(process.memory_info().rss)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    messages, failures = [], []

    def user(i):
        try:
            client = Client(app_url, verbose=False)
            msg = client.predict(
                "random",
                i + 1,
                "gpt2",
                None,
                "float32",
                *_fields("gpt2-small"),
                api_name="/build_model",
            )[0]
            messages.append(msg)
            start.wait()
            status = list(client.submit("Hello", 0, 0, 1.0, 4, 0, True, api_name="/generate"))[-1][1]
            messages.append(status)
        except Exception as e:
            failures.append(f"user {i}: {type(e).__name__}: {e}")

    start = threading.Event()
    threads = [threading.Thread(target=user, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(1)
    start.set()  # generations start as soon as each build has answered
    for t in threads:
        t.join(timeout=300)
    stop_sampling.set()
    sampler.join()
    assert not failures, failures
    assert all("Ready" in m or "Done: 4 tokens" in m or "memory budget" in m for m in messages), messages
    assert sum("Done: 4 tokens" in m for m in messages) >= 1
    grown = max(peak) - baseline
    assert grown < budget + 0.5 * 2**30, f"RSS grew by {grown / 2**30:.2f} GB over a {budget / 2**30:.1f} GB budget"
    # The server is alive and serves a small model to a new client.
    monkeypatch.delenv("PLAYGROUND_MEMORY_BUDGET_GB")
    client = Client(app_url, verbose=False)
    assert (
        "Ready"
        in client.predict("random", 0, "gpt2", None, "float32", *_fields(PRESETS_USED[0]), api_name="/build_model")[0]
    )
    assert "Done: 3 tokens" in list(client.submit("Hi", 0, 0, 1.0, 3, 0, True, api_name="/generate"))[-1][1]


def test_the_queue_rebuilds_its_monitoring_summary_now_and_then_not_after_every_event():
    """Gradio's default rebuilds a pandas summary of up to 10,000 past events at the end of each event,
    holding the interpreter lock: the app's queue does it every 500 events."""
    from gradio.queueing import Queue

    from playground.ui.app import build_demo

    queue = build_demo()._queue
    assert isinstance(queue, Queue) and queue.ANAYLTICS_CACHE_FREQUENCY == 500
    records = [{"status": "success", "process_time": 0.1, "function": "/generate"}] * 3
    queue.events_recorded, queue.event_count_at_last_cache = 10, 0
    queue.cached_event_analytics_summary = {"functions": {}}
    assert queue.compute_analytics_summary(records) == {"functions": {}}  # 10 events: not rebuilt yet
    queue.events_recorded = 600
    assert queue.compute_analytics_summary(records)["functions"]["/generate"]["success_rate"] == 1.0
