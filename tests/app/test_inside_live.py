"""The Inside tab's long views drawn as they go: the dose-response curve grows point by point
with a progress message, the head sweep a layer at a time, each ending on the same figure the
one-shot view draws; the tab's Stop ends both within one α or one head, each on Stop's message."""

import re

import pytest

from playground import PRESETS
from playground.inside import effects
from playground.server.recipes import random_recipe
from playground.ui import common
from playground.ui.app import build_demo
from playground.ui.common import session_model, session_run
from playground.ui.generate import tab as generate_tab
from playground.ui.inside import live, patching
from playground.ui.inside import tab as it

NANO = PRESETS["nano"]


@pytest.fixture(scope="module")
def run_state():
    state = {**common.new_state("en"), "recipe": random_recipe(NANO, seed=0)}
    state = list(generate_tab.generate_tokens(state, "Once upon a time there", 0.8, 40, 1.0, 20, 1, False))[-1][0]
    return state


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_dose_curve_is_drawn_point_by_point(run_state, lang, monkeypatch):
    monkeypatch.setattr(live, "MIN_UPDATE_S", 0.0)  # every point as soon as it is computed
    state = {**run_state, "lang": lang}
    updates = list(live.dose_live(None, state, "1.2", None, None))
    counts = [len(u.dose_plot.data[0].x) for u in updates]
    assert counts == list(range(1, 12))  # point by point
    assert all(it.tr(lang, "in_dose_progress", done=n) in u.msg for n, u in zip(counts[:-1], updates))
    assert updates[-1].msg == ""
    whole = it.dose_view(state, "1.2", None, None)[0]
    assert list(updates[-1].dose_plot.data[0].y) == pytest.approx(list(whole.data[0].y), abs=2e-5)


def ticking(step: float):
    """A clock that advances ``step`` seconds each time it is read."""
    now = [0.0]

    def clock():
        now[0] += step
        return now[0]

    return clock


@pytest.mark.parametrize("step, counts", [(0.01, [1, 11]), (0.1, [1, 4, 7, 10, 11])])
def test_the_dose_curve_sends_at_most_one_update_per_interval_and_always_the_whole_curve(
    run_state, monkeypatch, step, counts
):
    """Points computed within MIN_UPDATE_S of the last update wait for the next one: the first point
    and the whole curve are always sent, and the last update holds every point's value."""
    monkeypatch.setattr(live, "clock", ticking(step))
    updates = list(live.dose_live(None, run_state, "1.2", None, None))
    assert [len(u.dose_plot.data[0].x) for u in updates] == counts
    assert all(it.tr("en", "in_dose_progress", done=n) in u.msg for n, u in zip(counts[:-1], updates))
    assert updates[-1].msg == ""
    whole = it.dose_view(run_state, "1.2", None, None)[0]
    assert list(updates[-1].dose_plot.data[0].x) == pytest.approx([0.2 * i for i in range(11)])
    assert list(updates[-1].dose_plot.data[0].y) == pytest.approx(list(whole.data[0].y), abs=2e-5)


def test_stop_draws_the_points_computed_since_the_last_update(run_state, monkeypatch):
    """Stop after three points of which only the first was sent: the stopped update draws all three."""
    from types import SimpleNamespace

    monkeypatch.setattr(live, "clock", ticking(0.01))
    page = SimpleNamespace(session_hash="dose-stop-unsent")
    model, calls = session_model(run_state), []
    steps = live.dose_live(page, run_state, "1.2", None, None)
    first = next(steps)

    def count(*a):  # head 1.2's layer is the last: one call a point
        calls.append(1)
        if len(calls) == 2:  # while the third point is computed
            live.stop(page, run_state)

    handles = [model.trf_blocks[-1].register_forward_hook(count)]
    try:
        rest = list(steps)
    finally:
        for h in handles:
            h.remove()
    assert len(first.dose_plot.data[0].x) == 1
    (last,) = rest
    assert "Stopped" in last.msg and len(last.dose_plot.data[0].x) == 3


def test_the_sweep_fills_in_a_layer_at_a_time_and_ends_on_the_sweep(run_state):
    updates = list(live.sweep_live(None, run_state))
    L = NANO.n_layers
    assert len(updates) == L  # one partial figure per layer but the last, then the finished view
    for k, u in enumerate(updates[:-1]):
        z = u.sweep_plot.data[0].z
        assert all(v is not None for v in z[k]) and all(v is None for row in z[k + 1 :] for v in row)
        assert f"{k + 1} of {L} layers measured" in u.msg
    final = updates[-1]
    assert final.msg == "" and "Most harmful" in final.sweep_md
    model, run = session_model(run_state), session_run(run_state)
    want = effects.head_sweep(model, run.token_ids)["delta_loss"]
    got = [list(row) for row in final.sweep_plot.data[0].z]
    assert sum(got, []) == pytest.approx(sum(want, []), abs=1e-5)


def test_a_refused_dose_says_why_under_its_button(run_state):
    (only,) = list(live.dose_live(None, run_state, "", None, None))
    assert "Scale head: name one head" in only.msg


def test_stop_names_the_last_press_and_lets_each_view_end_on_its_message():
    """Stop cancels no event (a cancelled view's update sent just before could land after Stop's answer and
    stay): it raises the views' flags and names the page's last press of a long view's button."""
    demo = build_demo()
    cfg = demo.get_config_file()
    comps = {c["id"]: c["props"].get("elem_id") for c in cfg["components"]}
    by_button = {}
    for dep in cfg["dependencies"]:
        for target, _ in dep["targets"]:
            by_button.setdefault(comps.get(target), []).append(dep)
    long = {d["id"] for name in ("pg-dose-btn", "pg-sweep-btn") for d in by_button[name]}
    (stop,) = by_button["pg-inside-stop"]
    assert len(long) == 2 and not stop.get("cancels") and "window.pgLongAsk ||" in stop["js"]
    assert all("window.pgLongAsk = " in d["js"] for name in ("pg-dose-btn", "pg-sweep-btn") for d in by_button[name])
    assert all(d["show_progress"] == "hidden" for name in ("pg-dose-btn", "pg-sweep-btn") for d in by_button[name])


def test_stop_ends_the_dose_curve_within_one_alpha(run_state):
    """Stop after the first point: no block of the model runs again, the curve keeps its one point
    and the message says it was stopped."""
    from types import SimpleNamespace

    page = SimpleNamespace(session_hash="dose-stop")
    model, calls = session_model(run_state), []
    handles = [b.register_forward_hook(lambda *a: calls.append(1)) for b in model.trf_blocks]
    try:
        steps = live.dose_live(page, run_state, "1.2", None, None)
        first = next(steps)
        blocks = len(calls)
        assert blocks > 0 and "Stopped" in live.stop(page, run_state)
        rest = list(steps)
    finally:
        for h in handles:
            h.remove()
    assert len(first.dose_plot.data[0].x) == 1 and len(calls) == blocks
    assert len(rest) == 1 and "Stopped" in rest[0].msg


def test_stop_ends_every_long_view_the_page_has_running(run_state):
    """A page's dose-response curve and head sweep running at once: one Stop ends both, each on its message."""
    from types import SimpleNamespace

    page = SimpleNamespace(session_hash="two-views")
    dose, sweep = live.dose_live(page, run_state, "1.2", None, None), live.sweep_live(page, run_state)
    next(dose), next(sweep)
    assert len(live.STOP_FLAGS["two-views"]) == 2
    assert "Stopped" in live.stop(page, run_state)
    ends = [list(dose), list(sweep)]
    assert all(len(rest) == 1 and "Stopped" in rest[0].msg for rest in ends)
    assert "two-views" not in live.STOP_FLAGS


@pytest.mark.parametrize("view", ["dose", "sweep", "patch"])
def test_a_stop_that_arrives_before_its_view_starts_stops_it(run_state, view):
    """A Stop reaching the server before the press it names has started (queued, or on its way on a
    busy machine): that view runs no block and ends on Stop's message; another press, or one never
    named, runs whole."""
    from types import SimpleNamespace

    page = SimpleNamespace(session_hash=f"early-stop-{view}")
    model, calls = session_model(run_state), []
    handles = [b.register_forward_hook(lambda *a: calls.append(1)) for b in model.trf_blocks]

    def press(ask):
        if view == "dose":
            return list(live.dose_live(page, run_state, "1.2", None, None, ask))
        if view == "patch":
            pair = ("When Mary and John went, John gave it to", "When Mary and John went, Mary gave it to")
            args = (*pair, " Mary", " John", "resid_pre", 0, "0.2", "1.3", "k")
            return [u.pt_msg for u in patching.patch_live(page, run_state, *args, ask)]
        return list(live.sweep_live(page, run_state, ask))

    try:
        assert "Stopped" in live.stop(page, run_state, "press-1")
        stopped_early = press("press-1")
        blocks_then = len(calls)
        whole = press("press-2")
    finally:
        for h in handles:
            h.remove()
    assert blocks_then == 0
    said = [getattr(u, "msg", u) for u in (stopped_early[0], whole[-1])]
    assert len(stopped_early) == 1 and "Stopped" in said[0]
    assert len(calls) > 0 and said[1] == ""
    assert f"early-stop-{view}" not in live.STOP_FLAGS


@pytest.mark.slow
def test_stop_ends_a_sweep_within_a_block_not_a_layer():
    """Stop pressed while a layer is being measured: the sweep ends long before that layer would
    finish (it reads the page's stop flag between blocks and heads' readouts), ending on the
    message Stop gives. Timed against the first layer on a model where a layer takes a while."""
    import queue
    import threading
    import time
    from types import SimpleNamespace

    state = {**common.new_state("en"), "recipe": random_recipe(PRESETS["tutorial-d512"], seed=0)}
    state = list(generate_tab.generate_tokens(state, "Once upon a time there", 0.8, 40, 1.0, 100, 1, False))[-1][0]
    page = SimpleNamespace(session_hash="stop-timing")
    got: queue.Queue = queue.Queue()
    updates: list = []

    def consume():
        for u in live.sweep_live(page, state):
            updates.append(u)
            got.put(time.perf_counter())

    worker = threading.Thread(target=consume)
    worker.start()
    got.get(timeout=120)  # the first layer is drawn
    first = updates[0]
    layer_s = float(re.search(r"\(([\d.]+) s so far", first.msg).group(1))  # the first layer's time
    time.sleep(0.05)  # into the second layer
    t0 = time.perf_counter()
    assert "Stopped" in live.stop(page, state)
    worker.join(timeout=120)
    took = time.perf_counter() - t0
    assert not worker.is_alive()
    assert "Stopped" in updates[-1].msg and len(updates) == 2  # the first layer, then the stop
    assert "stop-timing" not in live.STOP_FLAGS
    print(f"stop took {took:.3f} s; the first layer {layer_s} s")
    assert took < layer_s / PRESETS["tutorial-d512"].n_heads  # within one head of the first layer
