"""Compiled kernels, the decode step, kernel timing and the bench's peers: the tests that need a C++
compiler, time code or load transformers. Kept out of tests/unit so the fast loop stays fast; CI runs
them with every other folder. Like tests/unit, nothing here loads gradio."""

import pytest

from tests.plain_folder import no_gradio, one_torch_thread, refuse_gradio_after_collection  # noqa: F401 (fixtures this folder uses)


def pytest_collection_finish(session):
    refuse_gradio_after_collection(session, "native")


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
