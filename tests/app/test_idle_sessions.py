"""The running app's idle sessions give their memory back (the budget itself is checked in
tests/unit/test_memory_budget.py)."""

import gc

import pytest

from playground.runtime.memory import BUDGET
from playground.server import runs
from playground.server.runs import release_idle_runs


@pytest.mark.slow
def test_idle_sessions_of_the_running_app_release_their_runs(app_url):
    """API sessions that generated and looked at attention, then went quiet: the sweeper finds
    their runs inside Gradio's session state and drops the tokens and the attention."""
    from gradio_client import Client

    clients = [Client(app_url, verbose=False) for _ in range(3)]
    for i, c in enumerate(clients):
        list(c.submit(f"Session {i} says", 0.8, 40, 1.0, 6, i, False, api_name="/generate"))
        assert "attention" in c.predict(0, 0, api_name="/attention_data")
    gc.collect()
    live = [r for r in list(runs.RUNS.values()) if not r.released]
    assert len(live) >= len(clients)
    assert [h for h in BUDGET.usage() if h.kind == "attention"]
    assert release_idle_runs(idle_seconds=0) >= len(clients)
    gc.collect()
    assert not [h for h in BUDGET.usage() if h.kind == "attention"]
    assert all(r.released for r in live)
    # a session that comes back simply generates again
    list(clients[0].submit("Back again", 0.8, 40, 1.0, 3, 0, False, api_name="/generate"))
    assert len(clients[0].predict(api_name="/run_data")["steps"]) == 3
