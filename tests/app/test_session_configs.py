"""A new session of the app makes its blocks' configs when they are read: what Gradio's eager copy holds,
in the same order, without the copy's time and memory when a session opens."""

import tracemalloc

import gradio as gr
import pytest
from gradio import state_holder

from playground.ui import session_configs


@pytest.fixture(scope="module")
def demo():
    from playground.ui.app import build_demo

    return build_demo()


def _gradios(demo) -> state_holder.SessionState:
    return session_configs._GRADIOS(demo)


def test_the_app_builds_its_sessions_lazily_and_another_app_keeps_gradios(demo):
    from gradio import blocks, route_utils

    for module in (state_holder, route_utils, blocks):
        assert module.SessionState is session_configs.SessionState, module.__name__
    with gr.Blocks() as other:
        gr.Textbox("x")
    assert state_holder.SessionState(other).config_values  # Gradio's own, made at once
    assert state_holder.SessionState(demo).config_values == {}


def test_a_lazy_session_holds_gradios_attributes_and_its_components(demo):
    lazy, eager = state_holder.SessionState(demo), _gradios(demo)
    # every attribute Gradio's __init__ sets (a Gradio that adds one fails here)
    assert set(vars(lazy)) - {"pg_block_ids"} == set(vars(eager))
    assert list(lazy.components) == list(eager.components)
    assert len(list(eager.components)) > 400


def test_updates_then_the_deep_link_read_match_gradios(demo):
    textbox = next(b for b in demo.blocks.values() if isinstance(b, gr.Textbox))
    state = next(b for b in demo.blocks.values() if isinstance(b, gr.State))
    sessions = state_holder.SessionState(demo), _gradios(demo)
    for session in sessions:
        session[state._id] = {"kept": 1}
        session[textbox._id] = gr.Textbox("a new one", label="changed")
        session._update_value_in_config(textbox._id, "typed by the learner")
    lazy, eager = ([c for c in s.components] for s in sessions)
    assert lazy == eager
    assert [c["id"] for c in lazy] == [c["id"] for c in eager]
    typed = next(c for c in lazy if c["id"] == textbox._id)["props"]["value"]
    assert typed == "typed by the learner"


def test_opening_a_session_holds_a_list_of_ids_not_every_config(demo):
    def held_by(make) -> int:
        tracemalloc.start()
        session = make(demo)
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert session.blocks_config.blocks
        return held

    eager, lazy = held_by(_gradios), held_by(state_holder.SessionState)
    # Gradio's copy of ~480 configs: about 0.7 MiB; the lazy session: its list of block ids
    assert eager > 300_000 and lazy < 50_000, (eager, lazy)
