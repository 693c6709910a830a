"""The app's events track the same stateful outputs as Gradio's own scan finds, from a list made once."""

import importlib.util
import sys

import gradio as gr
import pytest
from gradio.state_holder import SessionState

from playground.ui import event_overhead


@pytest.fixture(scope="module")
def demo():
    from playground.ui.app import build_demo

    return build_demo()


def test_every_event_tracks_what_gradios_scan_finds(demo):
    session = SessionState(demo)
    for block_fn in demo.fns.values():
        ours = demo.get_state_ids_to_track(block_fn, session)
        gradios = gr.Blocks.get_state_ids_to_track(demo, block_fn, session)
        assert ours == gradios, block_fn.name
    assert demo.get_state_ids_to_track(next(iter(demo.fns.values())), None) == ([], [])


def test_a_state_with_a_change_listener_is_tracked_and_hashed_by_its_value():
    with gr.Blocks() as small:
        listened, quiet, shown = gr.State({"a": 1}), gr.State(0), gr.Textbox()
        gr.Button().click(lambda: ({"a": 2}, 1, "x"), None, [listened, quiet, shown])
        listened.change(lambda v: str(v), listened, shown)
    event_overhead.install(small)
    block_fn = next(f for f in small.fns.values() if len(f.outputs) == 3)
    session = SessionState(small)
    session[listened._id], session[quiet._id] = {"a": 1}, 0
    ids, before = small.get_state_ids_to_track(block_fn, session)
    assert (ids, before) == gr.Blocks.get_state_ids_to_track(small, block_fn, session)
    assert ids == [listened._id]
    session[listened._id] = {"a": 2}
    assert small.get_state_ids_to_track(block_fn, session)[1] != before


def test_an_absent_matplotlib_fails_its_import_at_once(demo):
    if importlib.util.find_spec("matplotlib") is not None and sys.modules.get("matplotlib") is not None:
        assert sys.modules["matplotlib"] is not None  # installed: left as it is
        return
    assert "matplotlib" in sys.modules and sys.modules["matplotlib"] is None
    with pytest.raises(ImportError):
        import matplotlib  # noqa: F401
    with gr.utils.MatplotlibBackendMananger():  # Gradio's wrapper of every event still passes
        pass


def test_only_this_app_is_changed(demo):
    assert demo.get_state_ids_to_track.__func__ is event_overhead._get_state_ids_to_track
    assert gr.Blocks.get_state_ids_to_track is not event_overhead._get_state_ids_to_track


def test_every_event_function_gives_back_its_threads_openmp_workers(demo):
    import inspect

    wrapped = [f for f in demo.fns.values() if f.fn is not None]
    assert wrapped and all(getattr(f.fn, "pg_releasing", False) for f in wrapped)
    for f in wrapped:  # what Gradio reads of a function is the handler's own
        inner = inspect.unwrap(f.fn)
        assert inspect.signature(f.fn) == inspect.signature(inner), f.name
        assert inspect.isgeneratorfunction(f.fn) == inspect.isgeneratorfunction(inner), f.name
        assert inspect.iscoroutinefunction(f.fn) == inspect.iscoroutinefunction(inner), f.name
    event_overhead.install(demo)  # a second install wraps nothing twice
    assert not any(getattr(f.fn.__wrapped__, "pg_releasing", False) for f in wrapped)


def test_a_wrapped_handler_still_gets_its_request():
    def handler(text: str, request: gr.Request = None):
        return f"{text} from {getattr(request, 'session_hash', None)}"

    with gr.Blocks() as small:
        box, out = gr.Textbox(), gr.Textbox()
        gr.Button().click(handler, box, out)
    event_overhead.install(small)
    fn = next(iter(small.fns.values())).fn
    assert fn is not handler and gr.utils.get_type_hints(fn)["request"] is gr.Request
    processed, *_ = gr.helpers.special_args(fn, ["hi"], request=gr.Request(session_hash="abc"))
    assert fn(*processed) == "hi from abc"


def test_serving_gives_back_the_main_threads_openmp_workers_before_the_first_page(monkeypatch):
    # The main thread built the model and warmed it up, and serves no torch work from then on.
    from playground.ui import serve

    calls = []

    class Demo:
        def launch(self, **kw):
            calls.append("launch")

    monkeypatch.setattr(serve, "warm_up", lambda: calls.append("warm_up"))
    monkeypatch.setattr(serve, "settle_heap", lambda: calls.append("settle_heap"))
    monkeypatch.setattr(serve.openmp_workers, "release", lambda: calls.append("release") or True)
    monkeypatch.setattr(serve, "launch_kwargs", lambda: {})
    serve.serve(Demo())
    assert calls == ["warm_up", "settle_heap", "release", "launch"]
