"""Exports are written where Gradio serves files from, so a download needs no copy."""

import pytest

from playground.server.exports import export_run
from playground.server.files import exports_dir
from tests.export_helpers import nano_model, private_dirs, small_run


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    return private_dirs(tmp_path, monkeypatch)


def test_exports_live_in_gradios_cache_so_gradio_serves_them_without_a_copy(dirs):
    import gradio as gr

    model = nano_model()
    path = export_run(small_run(model), model, "json")
    assert path.parent == exports_dir() and str(path).startswith(str((dirs / "gradio").resolve()))
    block = gr.File()  # reads GRADIO_TEMP_DIR when built, as the app's components do
    assert block.move_resource_to_block_cache(str(path)) == str(path)
    elsewhere = dirs / "elsewhere.json"
    elsewhere.write_text("{}")
    assert block.move_resource_to_block_cache(str(elsewhere)) != str(elsewhere)  # what used to happen
