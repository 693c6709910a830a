"""The tabs' redraws after a change of the page's preferences, run as one event (listeners.combined)."""

import logging
from types import SimpleNamespace

import gradio as gr
import pytest

from playground.ui import listeners

SKIP = {"__type__": "update"}


@pytest.fixture
def blocks():
    with gr.Blocks():
        c = SimpleNamespace(
            state=gr.State({"lang": "en"}),
            text=gr.Textbox("typed"),
            depth=gr.Slider(0, 5, value=2),
            title=gr.Markdown(),
            plot_note=gr.Markdown(),
            picker=gr.Dropdown(["a", "b"]),
        )
    return c


def test_each_part_reads_the_pages_values_and_the_later_part_has_the_last_word(blocks):
    c, calls = blocks, []

    def first(state, text, depth):
        calls.append(("first", state["lang"], text, depth))
        return f"{text} at {depth}", "a note"

    def second(state, depth):
        calls.append(("second", depth))
        return "the second title", gr.update(choices=["x", "y"])

    def third(state):
        return gr.update(visible=False)

    fn, inputs, outputs = listeners.combined(
        c.state,
        [
            (first, [c.text, c.depth], [c.title, c.plot_note]),
            (second, [c.depth], [c.title, c.picker]),
            (third, [], [c.plot_note]),
        ],
    )
    # Each component once, the session's state first.
    assert inputs == [c.state, c.text, c.depth]
    assert outputs == [c.title, c.plot_note, c.picker]
    said = fn(None, {"lang": "zh-CN"}, "hello", 4)
    assert calls == [("first", "zh-CN", "hello", 4), ("second", 4)]
    assert said[0] == "the second title"
    # A value then an update of its properties: the page shows both, as after two events.
    assert said[1] == {"__type__": "update", "value": "a note", "visible": False}
    assert said[2] == {"__type__": "update", "choices": ["x", "y"]}


def test_an_update_after_an_update_keeps_both_properties_and_a_skip_changes_nothing(blocks):
    c = blocks
    parts = [
        (lambda s: gr.update(choices=["p"], value="p"), [], [c.picker]),
        (lambda s: gr.skip(), [], [c.picker]),
        (lambda s: gr.update(label="Pick"), [], [c.picker]),
    ]
    fn, _, outputs = listeners.combined(c.state, parts)
    assert fn(None, {}) == [{"__type__": "update", "choices": ["p"], "value": "p", "label": "Pick"}]


def test_a_part_that_fails_leaves_its_outputs_and_the_others_are_still_drawn(blocks, caplog):
    c = blocks

    def broken(state):
        raise RuntimeError("a redraw's bug")

    fn, _, outputs = listeners.combined(
        c.state, [(broken, [], [c.title, c.plot_note]), (lambda s: "drawn", [], [c.plot_note])]
    )
    with caplog.at_level(logging.ERROR, logger="playground.ui.listeners"):
        said = fn(None, {})
    assert said == [SKIP, "drawn"]
    assert "a redraw's bug" in caplog.text and "broken" in caplog.text


def test_a_part_that_answers_the_wrong_number_of_values_is_said_to(blocks):
    c = blocks
    fn, _, _ = listeners.combined(c.state, [(lambda s: ("one", "two", "three"), [], [c.title, c.plot_note])])
    with pytest.raises(ValueError, match="3 values for 2 outputs"):
        fn(None, {})


def test_a_part_that_asks_for_the_request_gets_the_events(blocks):
    c, seen = blocks, []

    def needs_request(request: gr.Request, state, depth):
        seen.append((request, state, depth))
        return "ok"

    fn, _, _ = listeners.combined(c.state, [(needs_request, [c.depth], [c.title])])
    request = gr.Request(username="teacher")
    assert fn(request, {"lang": "en"}, 3) == ["ok"]
    assert seen == [(request, {"lang": "en"}, 3)]


def test_a_pages_preferences_redraw_every_tab_in_two_events_and_the_shared_empty_figures_stay_as_drawn():
    """The app as a page drives it: its session loaded, then its preferences (Chinese, then English again)
    sent and the redraws chained after them run through Gradio's own ``process_api``."""
    import asyncio

    from gradio.state_holder import SessionState
    from starlette.requests import Request

    from bench import page_redraws
    from playground.figures import empty_figure
    from playground.ui.app import build_demo
    from playground.ui.figure_dress import dress, empty
    from playground.ui.i18n import tr

    demo = build_demo()
    config = demo.get_config_file()
    props = {c["id"]: c.get("props", {}) for c in config["components"]}
    load = next(d["id"] for d in config["dependencies"] if demo.fns[d["id"]].name == "load_session")
    prefs_event, server = page_redraws._chain(demo, config)
    assert [demo.fns[i].name for i in server] == ["redraw_all", "redraw_all"]
    before = empty(tr("en", "generate_to_see"), "en", False).to_json()

    scope = {"type": "http", "headers": [], "query_string": b"", "path": "/", "method": "GET"}
    send = page_redraws._session(demo, props, gr.Request(request=Request(scope), session_hash="a-page"), SessionState)

    async def page(lang):
        await send(prefs_event, first=f'{{"lang": "{lang}", "present": false}}')
        first = await send(server[0])
        await send(server[1])
        return first

    async def run():
        await send(load)
        return await page("zh-CN"), await page("en")

    zh, en = asyncio.run(run())
    heatmap_zh, heatmap_en = (str(answer["pg-heatmap"]) for answer in (zh, en))
    assert tr("zh-CN", "generate_to_see") in heatmap_zh and "Generate to see attention" in heatmap_en
    # Each tab's redraw reached the page in the one event: the Model, Generate and Train tabs' choices.
    for elem_id in ("pg-weights", "pg-view", "pg-train-corpus"):
        assert zh[elem_id]["choices"] != en[elem_id]["choices"], elem_id
    assert en["pg-view"]["choices"][0][0] == "one head"
    # The empty figures every page shares are what they were made as.
    assert empty(tr("en", "generate_to_see"), "en", False).to_json() == before
    assert before == dress(empty_figure(tr("en", "generate_to_see")), "en", False).to_json()


def test_the_redraws_bench_runs_the_apps_chain(capsys):
    from bench import page_redraws

    page_redraws.main(["--pages", "1"])
    said = capsys.readouterr().out
    assert "server events after the preferences: 2" in said
    assert "ms of CPU" in said and "over 1 pages" in said
