"""One anonymous client must not lock a room out (issue 40), through the running app's API: 600 one-call
sessions (``reset_session`` then a one-token /generate) under a 3 GB budget, then a fresh user builds and
generates at once; a refusal beside 600 leases is fast and says when to try again; and the sessions'
records grow the process by a bounded amount."""

import os
import time

import psutil
import pytest

from playground import PRESETS
from playground.runtime.memory import BUDGET
from playground.server.model_cache import CACHE
from playground.server.runs import release_idle_runs
from tests.helpers import build_fields

pytestmark = pytest.mark.slow

SESSIONS = 600
CAPACITY = 200  # session records the app keeps here (PLAYGROUND_MAX_SESSIONS)


@pytest.fixture(scope="module")
def app_url():
    """The real app, keeping at most CAPACITY session records."""
    from playground.ui.app import build_demo, launch_kwargs
    from tests.conftest import wait_for_app_threads

    before = os.environ.get("PLAYGROUND_MAX_SESSIONS")
    os.environ["PLAYGROUND_MAX_SESSIONS"] = str(CAPACITY)
    try:
        demo = build_demo()
        _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs())
    finally:
        if before is None:
            os.environ.pop("PLAYGROUND_MAX_SESSIONS")
        else:
            os.environ["PLAYGROUND_MAX_SESSIONS"] = before
    try:
        yield url
    finally:
        wait_for_app_threads()
        demo.close()


MID = {**PRESETS["nano"].to_dict(), "n_layers": 12, "emb_dim": 1024, "n_heads": 16}  # ~0.9 GB to build


@pytest.fixture
def three_gb(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", "3")  # read at every check


def test_600_one_call_sessions_do_not_lock_out_the_next_user(app_url, three_gb):
    from gradio_client import Client

    c = Client(app_url, verbose=False)
    process = psutil.Process()
    list(c.submit("Warm", 0, 0, 1.0, 1, 0, True, api_name="/generate"))
    rss = [process.memory_info().rss]
    for i in range(SESSIONS):
        c.reset_session()
        status = list(c.submit(f"Call {i}", 0, 0, 1.0, 1, i, True, api_name="/generate"))[-1][1]
        assert "Done: 1 token" in status, status
        if i + 1 in (2 * CAPACITY, SESSIONS):
            rss.append(process.memory_info().rss)
    grown, later = rss[-1] - rss[0], rss[2] - rss[1]
    assert CACHE.client_leases("127.0.0.1") <= 64  # one address keeps a bounded number of sessions
    assert not [h for h in BUDGET.usage() if h.kind in ("generation", "reserved")], BUDGET.describe()

    fresh = Client(app_url, verbose=False)
    t0 = time.perf_counter()
    built = fresh.predict("random", 7, "gpt2", None, "float32", *build_fields(PRESETS["nano"]), api_name="/build_model")
    status = list(fresh.submit("Once upon a time", 0, 0, 1.0, 8, 0, True, api_name="/generate"))[-1][1]
    fresh_s = time.perf_counter() - t0
    assert "Ready" in built[0] and "Done: 8 tokens" in status, (built[0], status)
    assert fresh_s < 10, fresh_s

    # The run sweeper releases runs idle for 15 minutes (earlier tests' runs, in a full suite) with a full
    # collection of this process's heap: every earlier test's objects, seconds on a slow machine, which a timed
    # refusal below once waited for (2.3 s). Released here, outside the timing; the app's own heap is far smaller.
    release_idle_runs(idle_seconds=0)
    took = []
    # Most of the 3 GB held by work that cannot give way (earlier tests' trainings may hold some of it still)
    with BUDGET.take(max(0, BUDGET.available() - 64 * 2**20), "someone's long work", "training"):
        for seed in range(5):
            t0 = time.perf_counter()
            message = fresh.predict(
                "random", seed, "gpt2", None, "float32", *build_fields(MID), api_name="/build_model"
            )[0]
            took.append(time.perf_counter() - t0)
            assert "Not enough memory" in message and "Try again in about" in message, message
    # Fast beside 600 leases: the median round trip under 0.5 s (about 0.14 s here, 27 ms of it the
    # handler); none waits for memory to come back (a loaded machine's one-off pause stays under 2 s).
    assert sorted(took)[len(took) // 2] < 0.5 and max(took) < 2, took
    print(
        f"\n{SESSIONS} sessions: RSS +{grown / 2**20:.0f} MiB, of which +{later / 2**20:.0f} MiB over the last "
        f"{SESSIONS - 2 * CAPACITY} (records kept: {CAPACITY}); fresh build+generate {fresh_s:.2f} s; "
        f"refusals {', '.join(f'{t * 1000:.0f} ms' for t in took)}"
    )
    # The records are bounded: past the capacity, new sessions reuse the memory of forgotten ones.
    assert later < 0.1 * 2**20 * (SESSIONS - 2 * CAPACITY), f"{later / 2**20:.0f} MiB past the capacity"
    assert grown < 2 * 2**20 * CAPACITY, f"{grown / 2**20:.0f} MiB for {SESSIONS} sessions"
