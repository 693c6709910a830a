"""The fast loop: nothing in tests/unit may load gradio, directly or through playground.ui. A test that
needs the UI belongs in tests/app."""

import sys

import pytest
import torch


def pytest_collection_finish(session):
    # Collecting imported every unit module: any gradio now came from one of them (when the run also
    # collects other folders, their modules may have loaded it, and the check says nothing).
    if all("tests/unit/" in item.nodeid for item in session.items) and "gradio" in sys.modules:
        raise pytest.UsageError("a module in tests/unit imports gradio: move the test to tests/app")


@pytest.fixture(autouse=True)
def no_gradio():
    loaded_before = "gradio" in sys.modules
    yield
    assert loaded_before or "gradio" not in sys.modules, "this test loaded gradio: it belongs in tests/app"


@pytest.fixture(scope="package", autouse=True)
def one_torch_thread():
    """One intra-op thread for the whole folder: the models here are tiny, and two xdist workers each
    running a two-thread OpenMP team on two cores spin against each other (one test took 25 s instead
    of 0.3 s). Package scope: module fixtures are built with the same count their tests run with."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def forget_compiled():
    """Each test decides kernels and builds or loads the compiled kernel and decode step afresh, and
    leaves none of its choices to the next (files that test them use it for every test)."""
    from playground.runtime import kernels, native_gemv, native_step

    for m in (kernels, native_gemv, native_step):
        m.forget()
    yield
    for m in (kernels, native_gemv, native_step):
        m.forget()
