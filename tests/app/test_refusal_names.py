"""Two API sessions share the running app's memory budget: a refusal names the reader's own model,
and says the other session's only as counts and sizes (never its name, file or seed)."""

import gc
import html

import pytest

from playground.runtime.holdings import current_owner
from playground.runtime.memory import BUDGET
from playground.server.model_cache import CACHE
from playground.ui.state import for_the_session, session_id
from tests.helpers import build_fields

pytestmark = pytest.mark.slow

FILLER = dict(n_layers=4, emb_dim=512, n_heads=8)  # 155 MB in float32: the budget then fits a nano's training
NANO = {}


def build(client, seed, fields) -> str:
    return html.unescape(
        client.predict("random", seed, "gpt2", None, "float32", *build_fields(fields), api_name="/build_model")[0]
    )


def yours_and_besides(message: str) -> tuple[str, str]:
    assert "Yours: " in message, message
    own, others = message.split("Yours: ", 1)[1].split(" Besides: ", 1)
    return own, others


def test_each_session_reads_its_own_holdings_by_name_and_the_others_as_counts(app_url, monkeypatch):
    from gradio_client import Client

    filler, other = Client(app_url, verbose=False), Client(app_url, verbose=False)
    assert "Ready" in build(filler, 31337, FILLER)
    assert "Ready" in build(other, 4242, NANO)
    CACHE.make_room(0)  # expired leases end
    gc.collect()
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", repr((BUDGET.used() + 4096) / 2**30))

    # The filler's model is another session's idle holding: it gives way before anyone is refused (issue 40),
    # and the message of the build that displaced it says nothing of it.
    built = build(other, 7, NANO)
    assert "Ready" in built and "31337" not in built and "d512" not in built, built


def test_every_session_draws_its_own_id_from_the_shared_default_state():
    default = {"recipe": None, "run_id": None, "lang": "en", "session": None}
    first, second = dict(default), dict(default)
    assert session_id(first) != session_id(second)
    assert session_id(first) == first["session"]  # kept in the session's state
    assert session_id(None) is None


def test_a_streaming_handler_acts_for_its_session_at_every_step_and_is_closed_with_it():
    seen, closed = [], []

    @for_the_session
    def handler(state, n):
        try:
            for _ in range(n):
                seen.append(current_owner())
                yield len(seen)
        finally:
            closed.append(current_owner())

    state = {"session": "s1"}
    steps = handler(state, 5)
    assert [next(steps), next(steps)] == [1, 2] and current_owner() is None  # nothing leaks between steps
    steps.close()  # a closed page: the handler's own clean-up runs at once
    assert seen == ["s1", "s1"] and closed == ["s1"]
    assert list(handler(state, 2)) == [3, 4]
