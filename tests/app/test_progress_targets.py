"""Where the page's events show progress (ui/progress): Gradio's front end copies every component
an event has shown progress on at each later status change, so no event reports to a block that
holds others, an event with hidden progress reports to the one hidden sink, and each Inside view
reports to the figure it redraws, not to all of its outputs."""

from playground.ui.app import build_demo
from playground.ui.progress import holds_others


def _events(demo):
    return [fn for fn in demo.fns.values() if fn.fn is not None]


def test_no_event_reports_progress_to_a_layout_block_and_hidden_progress_goes_to_the_sink():
    demo = build_demo()
    config = demo.get_config_file()
    sink = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "pg-progress-sink")
    assert sink.visible is False and sink.value == ""
    layout_ids = {b._id for b in demo.blocks.values() if holds_others(b)}
    events = _events(demo)
    # The app does have events whose outputs are layout blocks (tab titles are set in the page;
    # a lesson's "Show me" selects a tab): they must not carry progress there.
    assert any(b._id in layout_ids for fn in events for b in fn.outputs)
    for dep in config["dependencies"]:
        targets = dep["show_progress_on"] or dep["outputs"]
        if dep["backend_fn"]:
            assert not set(targets) & layout_ids, dep["id"]
    hidden = [fn for fn in events if fn.show_progress == "hidden"]
    assert hidden and all(fn.show_progress_on == [sink] for fn in hidden)


def test_each_inside_view_shows_progress_on_the_figure_it_redraws():
    demo = build_demo()
    by_elem = {getattr(b, "elem_id", None): b for b in demo.blocks.values()}
    want = {
        "lens_view": "pg-lens",
        "open_tab": "pg-lens",
        "pick_lens_cell": "pg-lens-cell",
        "pick_sweep_head": "pg-intervene-bars",
    }
    seen = set()
    for fn in _events(demo):
        name = getattr(fn.fn, "__name__", "")
        if name in want:
            assert fn.show_progress_on == [by_elem[want[name]]], name
            seen.add(name)
        if name in ("lens_view", "open_tab", "handler"):
            # the runtime only, no spinner over the figure: its animation took the server's core
            assert fn.show_progress == "minimal", name
        if name == "handler":  # inside_redraw.remembering: attribution, maths, intervention
            (target,) = fn.show_progress_on
            assert target.elem_id in {"pg-dla-heat", "pg-maths-plot", "pg-intervene-bars"}
            assert target in fn.outputs
            seen.add(target.elem_id)
    assert seen == set(want) | {"pg-dla-heat", "pg-maths-plot", "pg-intervene-bars"}
