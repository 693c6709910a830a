"""The fast loop: nothing in tests/unit may load gradio, directly or through playground.ui (a test that
needs the UI belongs in tests/app), build native code, time kernels or load transformers (tests/native)."""

import os
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


@pytest.fixture(scope="package", autouse=True)
def plain_paths():
    """The one switch of every speed path off (``PLAYGROUND_ACCEL``, runtime.kernels.enabled): nothing
    here compiles or measures a kernel, and the server's builds take the plain path; tests/native tests
    the speed paths. Whatever was decided meanwhile is forgotten after, so the folders that run next in
    the same process decide with the switch as they find it."""
    from playground.runtime import kernels, native_gemv, native_row_summary, native_sampler, native_step

    before = os.environ.get("PLAYGROUND_ACCEL")
    os.environ["PLAYGROUND_ACCEL"] = "off"
    yield
    if before is None:
        del os.environ["PLAYGROUND_ACCEL"]
    else:
        os.environ["PLAYGROUND_ACCEL"] = before
    for m in (kernels, native_gemv, native_row_summary, native_sampler, native_step):
        m.forget()
