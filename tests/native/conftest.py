"""Compiled kernels, the decode step, kernel timing and the bench's peers: the tests that need a C++
compiler, time code or load transformers. Kept out of tests/unit so the fast loop stays fast; CI runs
them with every other folder. Like tests/unit, nothing here loads gradio."""

import sys

import pytest
import torch


def pytest_collection_finish(session):
    if all("tests/native/" in item.nodeid for item in session.items) and "gradio" in sys.modules:
        raise pytest.UsageError("a module in tests/native imports gradio: move the test to tests/app")


@pytest.fixture(autouse=True)
def no_gradio():
    loaded_before = "gradio" in sys.modules
    yield
    assert loaded_before or "gradio" not in sys.modules, "this test loaded gradio: it belongs in tests/app"


@pytest.fixture(scope="package", autouse=True)
def one_torch_thread():
    """One intra-op thread, as in tests/unit: tiny models, and two xdist workers each running a two-thread
    OpenMP team on two cores spin against each other. A test that times threads sets its own."""
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
