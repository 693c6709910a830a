"""The page's sliders, number boxes, dropdowns and radios are the app's own widget classes, built as such
(no patching of Gradio, no swapping of a component's class after the page is built): each hands its
handler the value as sent, and the app's one parser names the field it refuses."""

import ast
import subprocess
import sys
from pathlib import Path

import gradio as gr

from playground.ui import widgets
from playground.ui.app import build_demo

UI = Path(widgets.__file__).parent
OWN = (widgets.Slider, widgets.Number, widgets.Dropdown, widgets.Radio)


def test_every_value_widget_on_the_page_hands_over_what_was_sent():
    demo = build_demo()
    try:
        found = [b for b in demo.blocks.values() if isinstance(b, (gr.Slider, gr.Number, gr.Dropdown, gr.Radio))]
        assert len(found) > 50
        assert [b for b in found if not isinstance(b, OWN)] == []
        for block in found:
            assert block.get_block_name() in ("slider", "number", "dropdown", "radio")  # drawn as Gradio's own
            assert block.preprocess(2.5) == 2.5 and block.preprocess("abc") == "abc"
    finally:
        demo.close()


def test_no_ui_module_patches_gradio_or_swaps_a_class():
    for path in sorted(UI.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(n.startswith("unittest") for n in names), f"{path.name} imports unittest"
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    assert not (isinstance(target, ast.Attribute) and target.attr == "__class__"), path.name


def test_the_widget_stub_gradio_keeps_is_committed_and_current():
    """Gradio's component metaclass writes ``widgets.pyi`` when it differs: importing changes nothing."""
    stub = UI / "widgets.pyi"
    assert stub.is_file()
    before = stub.read_bytes()
    subprocess.run([sys.executable, "-c", "import playground.ui.widgets"], check=True, cwd=UI.parents[1])
    assert stub.read_bytes() == before
