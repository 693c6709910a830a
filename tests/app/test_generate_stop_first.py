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
    """The page's Generate (button and Enter) and Stop carry the press's name; /generate and /stop keep the
    inputs API callers send."""
    demo = build_demo()
    cfg = demo.get_config_file()
    comps = {c["id"]: c for c in cfg["components"]}
    by_elem = {}
    for dep in cfg["dependencies"]:
        for target, _ in dep["targets"]:
            by_elem.setdefault(comps.get(target, {}).get("props", {}).get("elem_id"), []).append(dep)
    (press,) = [d for d in by_elem["pg-generate"] if d["api_name"] == "generate_tokens"]
    (stop,) = by_elem["pg-stop"]
    ask = press["inputs"][-1]
    assert comps[ask]["type"] == "textbox" and comps[ask]["props"].get("visible") is False
    assert stop["inputs"] == [press["inputs"][0], ask] and not stop.get("cancels")
    assert "window.pgGenAsk = " in press["js"] and f"a[{len(press['inputs']) - 1}] = window.pgGenAsk" in press["js"]
    assert "a[1] = window.pgGenAsk ||" in stop["js"]
    enter = [d for d in by_elem["pg-prompt"] if d["inputs"] == press["inputs"]]
    assert len(enter) == 1 and enter[0]["js"] == press["js"]
    by_api = {d["api_name"]: d for d in cfg["dependencies"] if d["api_visibility"] == "public"}
    assert by_api["generate"]["inputs"] == press["inputs"][:-1] and not by_api["generate"].get("js")
    assert by_api["stop"]["inputs"] == [press["inputs"][0]]
    fns = {fn._id: fn for fn in demo.fns.values()}  # the API's runs share the page's queue slots
    assert fns[by_api["generate"]["id"]].concurrency_id == fns[press["id"]].concurrency_id
