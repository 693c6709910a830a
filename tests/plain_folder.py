"""What tests/unit and tests/native share (imported by their conftests): neither loads gradio, and both run
on one torch thread (tiny models; two xdist workers each running a two-thread OpenMP team on two cores spin
against each other: one test took 25 s instead of 0.3 s)."""

import sys

import pytest
import torch


def refuse_gradio_after_collection(session, folder: str) -> None:
    # Collecting imported every module of the folder: any gradio now came from one of them (when the run
    # also collects other folders, their modules may have loaded it, and the check says nothing).
    if all(f"tests/{folder}/" in item.nodeid for item in session.items) and "gradio" in sys.modules:
        raise pytest.UsageError(f"a module in tests/{folder} imports gradio: move the test to tests/app")


@pytest.fixture(autouse=True)
def no_gradio():
    loaded_before = "gradio" in sys.modules
    yield
    assert loaded_before or "gradio" not in sys.modules, "this test loaded gradio: it belongs in tests/app"


@pytest.fixture(scope="package", autouse=True)
def one_torch_thread():
    """Package scope: module fixtures are built with the same count their tests run with."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
