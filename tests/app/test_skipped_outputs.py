"""An event's skipped outputs are answered exactly as Gradio answers them, without rebuilding a component each."""

import asyncio
import json

import gradio as gr
import pandas as pd
import pytest
from gradio.state_holder import SessionState

from playground.ui import skipped_outputs


def demo_with_every_kind():
    with gr.Blocks() as demo:
        state = gr.State({"a": 1})
        with gr.Tabs() as tabs:
            with gr.Tab("one", id="one"):
                outputs = [
                    gr.Textbox("t"),
                    gr.Markdown("m"),
                    gr.HTML("<b>h</b>"),
                    gr.Plot(),
                    gr.Dataframe(pd.DataFrame({"x": [1]})),
                    gr.Slider(0, 10, value=3),
                    gr.Radio(["a", "b"], value="a"),
                    gr.JSON({"j": 1}),
                    gr.Timer(1.0, active=False),
                ]
            with gr.Tab("two", id="two"):
                with gr.Accordion("acc", open=False) as accordion:
                    row = gr.Row()
        button = gr.Button()
        outputs = [state, tabs, accordion, row, *outputs]
        button.click(lambda: None, None, outputs)
    block_fn = next(f for f in demo.fns.values() if list(f.outputs) == outputs)
    return demo, block_fn, outputs


def answered(fn, demo, block_fn, predictions):
    state = SessionState(demo)
    out = asyncio.run(fn(demo, block_fn, predictions, state))
    return json.loads(json.dumps(out, default=str)), state


SKIP = gr.skip()


@pytest.mark.parametrize(
    "case",
    [
        "all skipped",
        "one skip for all",
        "mixed",
        "by component",
        "none skipped",
    ],
)
def test_the_answer_is_gradios_own(case):
    demo, block_fn, outputs = demo_with_every_kind()
    state, tabs, accordion, row, text, md, html, plot, df, slider, radio, js, timer = outputs
    predictions = lambda: {  # noqa: E731  (made anew for each: Gradio takes the values out of an update)
        "all skipped": [SKIP] * len(outputs),
        "one skip for all": SKIP,
        "mixed": [{"b": 2}, gr.Tabs(selected="two"), SKIP, gr.Row(visible=False), "new", SKIP, SKIP, None, SKIP]
        + [gr.update(maximum=20, value=5), SKIP, {"k": [1, 2]}, gr.Timer(active=True)],
        "by component": {text: "by name", html: SKIP, slider: 4, state: {"c": 3}},
        "none skipped": [{"b": 2}, gr.Tabs(selected="one"), gr.Accordion(open=True), gr.Row(visible=True), "x"]
        + ["**y**", "<i>z</i>", None, pd.DataFrame({"x": [2]}), 7, "b", [1], gr.Timer(2.0)],
    }[case]
    ours, our_state = answered(skipped_outputs.postprocess_data, demo, block_fn, predictions())
    gradios, gradio_state = answered(gr.Blocks.postprocess_data, demo, block_fn, predictions())
    assert ours == gradios
    assert our_state[state._id] == gradio_state[state._id]  # (the State output kept alike)


def test_a_skipped_output_rebuilds_no_component(monkeypatch):
    demo, block_fn, outputs = demo_with_every_kind()
    rebuilt = []
    original = SessionState._update_config
    monkeypatch.setattr(SessionState, "_update_config", lambda self, i: (rebuilt.append(i), original(self, i))[1])
    predictions = [SKIP] * len(outputs)
    predictions[9] = gr.update(maximum=20)  # (the slider's, a real update: rebuilt, as Gradio does)
    answered(skipped_outputs.postprocess_data, demo, block_fn, list(predictions))
    assert rebuilt == [outputs[9]._id]
    rebuilt.clear()
    answered(gr.Blocks.postprocess_data, demo, block_fn, list(predictions))
    assert len(rebuilt) == len(outputs) - 1  # Gradio's own: every output but the State's


def test_a_wrong_number_of_outputs_gets_gradios_message():
    demo, block_fn, outputs = demo_with_every_kind()
    with pytest.raises(Exception) as ours:
        answered(skipped_outputs.postprocess_data, demo, block_fn, [SKIP] * (len(outputs) - 1))
    with pytest.raises(Exception) as gradios:
        answered(gr.Blocks.postprocess_data, demo, block_fn, [SKIP] * (len(outputs) - 1))
    assert type(ours.value) is type(gradios.value) and str(ours.value) == str(gradios.value)


def test_the_app_answers_its_events_this_way():
    from playground.ui.app import build_demo

    demo = build_demo()
    assert demo.postprocess_data.__func__ is skipped_outputs.postprocess_data
    assert gr.Blocks.postprocess_data is not skipped_outputs.postprocess_data  # (no other app touched)


def answered_in(fn, demo, block_fn, predictions, state):
    out = asyncio.run(fn(demo, block_fn, predictions, state))
    return json.loads(json.dumps(out, default=str))


def built(monkeypatch) -> list:
    """The ids of the components the named events' updates build (appended as each is made)."""
    made = []
    original = skipped_outputs._rebuilt

    def counted(block, value, state, postprocess):
        before = len(skipped_outputs._REBUILT)
        out = original(block, value, state, postprocess)
        if len(skipped_outputs._REBUILT) > before:
            made.append(block._id)
        return out

    monkeypatch.setattr(skipped_outputs, "_rebuilt", counted)
    return made


def test_an_update_to_the_props_the_page_has_is_sent_as_its_value_without_a_rebuild(monkeypatch):
    """For an event named by ``same_props_sent``: a second update that sets the same visibility, choices or
    range is answered as its value (or a skip), which the page draws as Gradio's own update; a property
    that differs is rebuilt as Gradio does."""
    demo, block_fn, outputs = demo_with_every_kind()
    state_c, tabs, accordion, row, text, md, html, plot, df, slider, radio, js, timer = outputs
    skipped_outputs.same_props_sent(demo, {"id": block_fn._id})
    skipped_outputs._REBUILT.clear()
    rebuilt = built(monkeypatch)

    def step(session, radio_update, slider_update, html_update):
        predictions = [SKIP] * len(outputs)
        predictions[outputs.index(radio)] = radio_update
        predictions[outputs.index(slider)] = slider_update
        predictions[outputs.index(html)] = html_update
        return answered_in(skipped_outputs.postprocess_data, demo, block_fn, predictions, session)

    ours, gradios = SessionState(demo), SessionState(demo)
    step(ours, gr.update(choices=["x", "y"], value="x", visible=True), gr.update(maximum=20), "<p>1</p>")
    assert len(rebuilt) == 2  # (new properties: rebuilt, as Gradio does)
    rebuilt.clear()
    again = step(ours, gr.update(choices=["x", "y"], value="y", visible=True), gr.update(maximum=20), "<p>2</p>")
    assert rebuilt == []
    assert again[outputs.index(radio)] == "y"  # the value alone, postprocessed
    assert again[outputs.index(slider)] == {"__type__": "update"}  # nothing but the same range: a skip
    # the page ends where Gradio's own answers leave it: the session's components and the values drawn
    step_g = lambda *a: answered_in(gr.Blocks.postprocess_data, demo, block_fn, *a)  # noqa: E731
    for updates in (
        [gr.update(choices=["x", "y"], value="x", visible=True), gr.update(maximum=20), "<p>1</p>"],
        [gr.update(choices=["x", "y"], value="y", visible=True), gr.update(maximum=20), "<p>2</p>"],
    ):
        predictions = [SKIP] * len(outputs)
        for block, update in zip((radio, slider, html), updates):
            predictions[outputs.index(block)] = update
        theirs = step_g(predictions, gradios)
    assert theirs[outputs.index(radio)]["value"] == "y" and theirs[outputs.index(html)] == again[outputs.index(html)]
    for block in (radio, slider):
        assert ours[block._id].constructor_args == gradios[block._id].constructor_args
    rebuilt.clear()
    changed = step(ours, gr.update(choices=["x", "z"], value="z"), gr.update(maximum=20, label="Top"), SKIP)
    assert sorted(rebuilt) == sorted([radio._id, slider._id])  # new choices; a new label: rebuilt
    assert changed[outputs.index(radio)]["choices"] == [["x", "x"], ["z", "z"]]


def test_an_output_a_script_of_the_page_updates_is_always_rebuilt(monkeypatch):
    """The page may have changed what a script sets (its visibility, its label) since the server last sent it."""
    with gr.Blocks() as demo:
        shown, scripted, source = gr.Textbox(visible=True), gr.Textbox(visible=True), gr.Radio(["a", "b"])
        button = gr.Button()
        button.click(lambda: None, None, [shown, scripted])
        source.change(None, source, scripted, js="(s) => ({__type__: 'update', visible: s === 'a'})")
    block_fn = next(f for f in demo.fns.values() if list(f.outputs) == [shown, scripted])
    skipped_outputs.same_props_sent(demo, {"id": block_fn._id})
    session = SessionState(demo)
    both = lambda: [gr.update(visible=True, value="1"), gr.update(visible=True, value="1")]  # noqa: E731
    answered_in(skipped_outputs.postprocess_data, demo, block_fn, both(), session)
    again = answered_in(skipped_outputs.postprocess_data, demo, block_fn, both(), session)
    assert again[0] == "1"  # the value alone
    assert again[1] == {"__type__": "update", "visible": True, "value": "1"}  # sent as an update, as Gradio does


def test_events_not_named_rebuild_as_before(monkeypatch):
    demo, block_fn, outputs = demo_with_every_kind()
    rebuilt = []
    original = SessionState._update_config
    monkeypatch.setattr(SessionState, "_update_config", lambda self, i: (rebuilt.append(i), original(self, i))[1])
    session = SessionState(demo)
    for _ in range(2):
        predictions = [SKIP] * len(outputs)
        predictions[outputs.index(outputs[9])] = gr.update(maximum=20)
        answered_in(skipped_outputs.postprocess_data, demo, block_fn, predictions, session)
    assert rebuilt == [outputs[9]._id] * 2


def test_the_room_polls_and_the_preferences_redraws_are_named():
    from playground.ui.app import build_demo

    demo = build_demo()
    # Follow, the watcher's poke, the timer, the join by link; the redraws after the page's preferences and
    # what runs after them (prefs.wire)
    assert sorted(demo.fns[i].name for i in demo.pg_same_props) == ["poll"] * 4 + ["redraw_all"] * 2


def test_a_named_events_rebuilds_leave_each_session_as_gradios_own_do(monkeypatch):
    """Two pages polling the same room get the same updates: each answer, each session's components and
    their config are what Gradio's own postprocessing gives; the component is built once for both, and a
    value one page is sent never shows in the other's config."""
    demo, block_fn, outputs = demo_with_every_kind()
    state_c, tabs, accordion, row, text, md, html, plot, df, slider, radio, js, timer = outputs
    skipped_outputs.same_props_sent(demo, {"id": block_fn._id})
    skipped_outputs._REBUILT.clear()
    rebuilt = built(monkeypatch)

    def updates(value):
        predictions = [SKIP] * len(outputs)
        predictions[outputs.index(tabs)] = gr.Tabs(selected="two")
        predictions[outputs.index(plot)] = gr.update(visible=False)
        predictions[outputs.index(slider)] = gr.update(minimum=0, maximum=value, value=value, visible=True)
        predictions[outputs.index(timer)] = gr.Timer(active=True)
        return predictions

    pages = [SessionState(demo), SessionState(demo)]
    theirs = [SessionState(demo), SessionState(demo)]
    for n, value in ((0, 30), (1, 40)):
        ours = answered_in(skipped_outputs.postprocess_data, demo, block_fn, updates(value), pages[n])
        gradios = answered_in(gr.Blocks.postprocess_data, demo, block_fn, updates(value), theirs[n])
        assert ours == gradios
    for block in (tabs, plot, slider, timer):
        for page, their in zip(pages, theirs):
            assert page[block._id].constructor_args == their[block._id].constructor_args
            assert page.config_values[block._id] == their.config_values[block._id]
    assert sorted(rebuilt) == sorted([tabs._id, plot._id, slider._id, timer._id] + [slider._id])  # (40: a new range)
    assert pages[0][plot._id] is pages[1][plot._id]  # one component for both pages
    assert pages[0].config_values[slider._id]["props"]["value"] == 30
    assert pages[1].config_values[slider._id]["props"]["value"] == 40


def test_the_rebuilds_kept_are_bounded():
    demo, block_fn, outputs = demo_with_every_kind()
    slider = outputs[9]
    skipped_outputs.same_props_sent(demo, {"id": block_fn._id})
    skipped_outputs._REBUILT.clear()
    page = SessionState(demo)
    for top in range(skipped_outputs.REBUILT_KEPT + 20):
        predictions = [SKIP] * len(outputs)
        predictions[outputs.index(slider)] = gr.update(maximum=top + 1)
        answered_in(skipped_outputs.postprocess_data, demo, block_fn, predictions, page)
        assert page[slider._id].maximum == top + 1
    assert len(skipped_outputs._REBUILT) == skipped_outputs.REBUILT_KEPT
