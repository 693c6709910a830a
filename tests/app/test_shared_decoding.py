"""Generate through the server's shared decode loop: many learners at once get the tokens each would get
alone, the status line names the room, and Stop still answers."""

import threading

from playground.server.decode_loop import LOOP
from playground.ui.chips import status_html
from playground.ui.generate import tab as generate_tab

PROMPTS = [f"Learner {i} writes:" for i in range(8)]


def _settings(i):
    """(prompt, temperature, top-k, top-p, max new tokens, seed, greedy): each learner's own."""
    return (PROMPTS[i], 0.6 + 0.1 * i, [0, 40, 5][i % 3], [1.0, 0.9][i % 2], 10 + i, 100 + i, i == 3)


def _tokens(client, i):
    list(client.submit(*_settings(i), api_name="/generate"))
    run = client.predict(api_name="/run_data")
    return run["token_ids"], [s["prob"] for s in run["steps"]]


def test_eight_learners_at_once_get_the_tokens_each_gets_alone(app_url):
    from gradio_client import Client

    clients = [Client(app_url, verbose=False) for _ in PROMPTS]
    alone = [_tokens(c, i) for i, c in enumerate(clients)]
    together, failures = [None] * len(clients), []

    def learner(i):
        try:
            together[i] = _tokens(clients[i], i)
        except Exception as e:  # reported below
            failures.append(f"learner {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=learner, args=(i,)) for i in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures, failures
    assert together == alone
    assert LOOP.active() == 0


def test_the_status_names_the_room_while_others_share_the_step():
    class Run:
        steps, n_cropped, prompt_ids, token_ids, settings = [], 0, [1], [1], {"max_new_tokens": 5}

    assert "decoding with 11 others" in status_html(Run(), 1.0, "running", "en", 256, others=11)
    assert "decoding with 1 other<" in status_html(Run(), 1.0, "running", "en", 256, others=1)
    assert "与另外 11 人一起解码" in status_html(Run(), 1.0, "running", "zh-CN", 256, others=11)
    assert "decoding with" not in status_html(Run(), 1.0, "running", "en", 256, others=0)
    assert "decoding with" not in status_html(Run(), 1.0, "done", "en", 256, others=11)


def test_a_streamed_status_says_how_many_others_decode(monkeypatch):
    """Two sessions generate at once: the streamed status of one names the other."""
    from playground import PRESETS
    from playground.server.recipes import random_recipe

    monkeypatch.setattr(generate_tab, "update_interval", lambda active: 0.0)  # an update after every step
    state = {"recipe": random_recipe(PRESETS["nano"], seed=0), "run_id": None}
    other = generate_tab.generate_tokens(dict(state), "Someone else", 1.0, 0, 1.0, 60, 2, False)
    next(other)  # the other learner's run is in the loop
    try:
        statuses = [u[2] for u in generate_tab.generate_tokens(dict(state), "Hello", 1.0, 0, 1.0, 30, 1, False)]
    finally:
        other.close()  # its handler ends: the loop drops its run
    assert any("decoding with 1 other<" in s for s in statuses[1:-1])
    assert "decoding with" not in statuses[-1]
