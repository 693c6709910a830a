"""Generate's Stop names the page's last press of Generate: a Stop that reaches the server before the run it
stops has started (queued behind others, or its request still on its way on a busy machine) stops it as it
starts, and a Stop that arrives before the page has the new run's id in its state stops that run."""

import threading
import time
from types import SimpleNamespace

import pytest

from playground import PRESETS
from playground.server.recipes import random_recipe
from playground.ui import common
from playground.ui.app import build_demo
from playground.ui.generate import tab as generate_tab

PROMPT = "Once upon a time there"


@pytest.fixture(scope="module")
def state():
    return {**common.new_state("en"), "recipe": random_recipe(PRESETS["nano"], seed=0)}


def _status(update) -> str:
    return update[2]


def test_a_stop_before_the_run_starts_stops_it_and_another_press_runs_whole(state):
    page = SimpleNamespace(session_hash="gen-stop-first")
    assert generate_tab.stop_generation(state, "press-1", page) is None
    stopped = list(generate_tab.generate_tokens(state, PROMPT, 0.8, 40, 1.0, 64, 1, False, "press-1", page))
    assert "data-state='stopped'" in _status(stopped[-1]) and "data-tokens='0'" in _status(stopped[-1])
    assert "after 0 of 64 tokens</div>" in _status(stopped[-1])  # (and no rate: none was made)
    whole = list(generate_tab.generate_tokens(state, PROMPT, 0.8, 40, 1.0, 8, 1, False, "press-2", page))
    assert "data-state='done'" in _status(whole[-1]) and "data-tokens='8'" in _status(whole[-1])
    # A press with no name (the API, a direct call) is not held back by a page's earlier Stop.
    plain = list(generate_tab.generate_tokens(state, PROMPT, 0.8, 40, 1.0, 8, 1, False, "", page))
    assert "data-state='done'" in _status(plain[-1])


def test_a_stop_naming_a_running_press_stops_it_though_the_state_has_the_previous_run(state):
    """The page's state still holds the run before (the new run's first update has not reached it): Stop
    ends the run its press name started, not only the state's."""
    page = SimpleNamespace(session_hash="gen-stop-running")
    before = list(generate_tab.generate_tokens(state, PROMPT, 0.8, 40, 1.0, 4, 1, False, "old", page))[-1][0]
    updates, started = [], threading.Event()

    def run():
        for u in generate_tab.generate_tokens(before, PROMPT, 0.8, 40, 1.0, 256, 2, False, "new", page):
            updates.append(u)
            started.set()

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(60)
    time.sleep(0.05)
    generate_tab.stop_generation(before, "new", page)  # (before: the old run's id)
    t.join(60)
    assert not t.is_alive()
    final = _status(updates[-1])
    assert "data-state='stopped'" in final
    made = int(final.split("data-tokens='")[1].split("'")[0])
    assert made < 256


def test_generate_names_each_press_and_stop_sends_the_last_one():
    demo = build_demo()
    cfg = demo.get_config_file()
    comps = {c["id"]: c for c in cfg["components"]}
    by_api = {d.get("api_name"): d for d in cfg["dependencies"]}
    gen, stop = by_api["generate"], by_api["stop"]
    ask = gen["inputs"][-1]
    assert comps[ask]["type"] == "textbox" and comps[ask]["props"].get("visible") is False
    assert stop["inputs"][-1] == ask and not stop.get("cancels")
    assert "window.pgGenAsk = " in gen["js"] and f"a[{len(gen['inputs']) - 1}] = window.pgGenAsk" in gen["js"]
    assert "a[1] = window.pgGenAsk ||" in stop["js"]
    # The prompt's Enter is a press too.
    submits = [d for d in cfg["dependencies"] if d["inputs"] == gen["inputs"] and d is not gen and d.get("js")]
    assert submits and all("window.pgGenAsk = " in d["js"] for d in submits)
