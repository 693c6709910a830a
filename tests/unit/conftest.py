"""The fast loop: nothing in tests/unit may load gradio, directly or through playground.ui (a test that
needs the UI belongs in tests/app), build native code, time kernels or load transformers (tests/native)."""

import os

import pytest

from tests.plain_folder import no_gradio, one_torch_thread, refuse_gradio_after_collection  # noqa: F401 (fixtures this folder uses)


def pytest_collection_finish(session):
    refuse_gradio_after_collection(session, "unit")


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
