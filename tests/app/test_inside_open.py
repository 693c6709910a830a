"""Opening the Inside tab (inside_open): a run not seen before gets its lens and position fields,
and the previous run's views are cleared and forgotten (a language switch does not bring them back);
the same run keeps them; with no run, the message is the tab's own."""

from types import SimpleNamespace

import pandas as pd
import pytest

from playground import PRESETS
from playground.server.recipes import random_recipe
from playground.ui import common, redraw
from playground.ui.common import session_model, session_run
from playground.ui.generate import tab as generate_tab
from playground.ui.inside import opening as io
from playground.ui.inside import redraw as ir

NANO = PRESETS["nano"]


def _run(state, prompt):
    return list(generate_tab.generate_tokens(state, prompt, 0.8, 40, 1.0, 6, 1, False))[-1][0]


@pytest.fixture(scope="module")
def two_runs():
    """Two runs that both stay on the server (a session's new run releases its previous one): the
    second stands for the session's next run."""
    fresh = lambda: {**common.new_state("en"), "recipe": random_recipe(NANO, seed=0)}  # noqa: E731
    return _run(fresh(), "Once upon a time"), _run(fresh(), "The cat sat on")


def _skipped(x):
    return isinstance(x, dict) and x.get("__type__") == "update" and len(x) == 1


def test_a_new_run_clears_the_last_runs_views_and_forgets_them(two_runs):
    first, second = two_runs
    page = SimpleNamespace(session_hash="open-1")
    opened = io.open_tab(first, None, None, None, None, 40, request=page)
    assert opened.seen_run == session_run(first).id and opened.msg == "" and opened.lens_msg == ""
    model, run = session_model(first), session_run(first)
    assert (opened.lens_layer, opened.lens_pos) == (model.cfg.n_layers, len(run.token_ids) - 1)
    ir.remembering("dla")(page, first, None, "")
    assert redraw.order(page, ["inside_dla"]) == ["inside_dla"]
    # The same run again: the views stay (nothing of theirs is sent).
    again = io.open_tab(first, opened.seen_run, None, None, None, 40, request=page)
    assert all(_skipped(getattr(again, f)) for f in io.STALE) and _skipped(again.m_table)
    assert redraw.order(page, ["inside_dla"]) == ["inside_dla"]
    # A new run: every other view is cleared and the page no longer redraws the old one.
    new = io.open_tab(second, opened.seen_run, None, None, None, 40, request=page)
    assert new.seen_run == session_run(second).id != opened.seen_run
    assert {f: getattr(new, f) for f in io.STALE} == io.STALE
    assert isinstance(new.m_table, pd.DataFrame) and len(new.m_table) == 0
    assert list(new.m_table.columns) == io.MATHS_SYMBOLS
    assert redraw.order(page, ["inside_" + k for k in ir.VIEWS]) == []
    assert all(_skipped(x) for x in ir.redraw_views(page, {**second, "lang": "zh-CN"}, None, None)[5:-1])


def test_no_run_is_said_at_the_tabs_top_and_clears_what_was_shown(two_runs):
    first, _ = two_runs
    page = SimpleNamespace(session_hash="open-2")
    no_run = {**first, "run_id": None}
    opened = io.open_tab(no_run, "an-old-run", None, None, None, 40, request=page)
    assert "Generate first" in opened.msg and opened.seen_run is None
    assert {f: getattr(opened, f) for f in io.STALE} == io.STALE
    nothing_shown = io.open_tab(no_run, None, None, None, None, 40, request=page)
    assert "Generate first" in nothing_shown.msg and _skipped(nothing_shown.dla_heat)


def test_a_view_drawn_while_the_lens_of_a_new_run_is_computed_is_not_cleared(two_runs, monkeypatch):
    """The tab's opening and a view's button run at once (the Inside events may run two at a time): an
    attribution drawn for the new run before the opening's lens is done stays, the other views are cleared."""
    first, second = two_runs
    page = SimpleNamespace(session_hash="open-3")
    opened = io.open_tab(first, None, None, None, None, 40, request=page)
    ir.remembering("maths")(page, first, 0, 0, 1)  # drawn for the first run: stale once the second opens
    real_lens = io.lens_view

    def lens_while_dla_is_drawn(*args, **kwargs):
        ir.remembering("dla")(page, second, None, "")  # the button pressed during the opening
        return real_lens(*args, **kwargs)

    monkeypatch.setattr(io, "lens_view", lens_while_dla_is_drawn)
    new = io.open_tab(second, opened.seen_run, None, None, None, 40, request=page)
    dla = {f for f in io.STALE if f.startswith("dla_")}
    assert dla and all(_skipped(getattr(new, f)) for f in dla)
    assert {f: getattr(new, f) for f in io.STALE if f not in dla} == {f: v for f, v in io.STALE.items() if f not in dla}
    assert redraw.order(page, ["inside_" + k for k in ir.VIEWS]) == ["inside_dla"]
