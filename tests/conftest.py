"""For every folder: no network, and the real app as a fixture (its import stays inside the fixture, so
tests/unit never loads gradio)."""

import os
import sys

import pytest

from tests.helpers import ROOT

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def own_kernel_cache() -> str:
    """A kernel cache of this test session's own (``PLAYGROUND_KERNEL_CACHE``, for the apps and processes the
    tests start too): the kernel decisions a developer's machine keeps (issue 33: they changed what a build
    copies, and test_load's result with it) are not read. The compiled libraries are copied in from the usual
    cache, where there are any: they are the same sources built for this CPU, and each is checked before it
    loads. ``PLAYGROUND_TEST_KERNEL_CACHE`` names a folder to use instead (one holding decisions, say)."""
    import atexit
    import shutil
    import tempfile
    from pathlib import Path

    chosen = os.environ.get("PLAYGROUND_TEST_KERNEL_CACHE")
    if chosen:
        return chosen
    usual = Path(os.environ.get("PLAYGROUND_KERNEL_CACHE") or "")
    if not usual.parts:
        usual = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpt-playground" / "kernels"
    folder = Path(tempfile.mkdtemp(prefix="playground-kernels-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for lib in usual.glob("*.so") if usual.is_dir() else []:
        summed = lib.with_name(lib.name + ".sum")
        if summed.is_file():
            try:
                shutil.copy2(lib, folder / lib.name)
                shutil.copy2(summed, folder / summed.name)
            except OSError:
                pass  # built again at first use
    return str(folder)


os.environ["PLAYGROUND_KERNEL_CACHE"] = own_kernel_cache()


@pytest.fixture(scope="module")
def app_url():
    """The real app on a free local port for the tests of one module; closed afterwards."""
    from playground.ui.app import build_demo, launch_kwargs

    demo = build_demo()
    for attempt in range(3):
        try:
            _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, server_port=free_port(), **launch_kwargs())
            break
        except (
            ValueError
        ) as e:  # Gradio's check of its new server timed out (a loaded machine): again, three tries in all
            demo.close()
            if "localhost is not accessible" not in str(e) or attempt == 2:
                raise
    try:
        yield url
    finally:
        wait_for_app_threads()
        demo.close()


def free_port() -> int:
    """A port the system has just handed out as free (an ephemeral one). Gradio's own search tries
    7860, 7861, ... in turn and binds the port it found only later: another worker's app started at the
    same moment took the same one, and this module's requests went to that app (its rooms, its sessions)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


IDLE_LOOPS = {"_sweep_forever", "_decode_forever", "_work"}  # threads that wait for ever between rounds: never "busy"


def wait_for_app_threads(timeout: float = 60.0) -> None:
    """Let requests still running in server threads finish (a page that was just closed may have
    left one). The interpreter kills daemon threads at exit, and one killed inside a torch call
    aborts the whole process ("terminate called without an active exception")."""
    import threading
    import time

    package = str(ROOT / "playground")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        frames = sys._current_frames()
        busy = False
        for thread in threading.enumerate():
            frame = frames.get(thread.ident)
            # The idle-run sweeper (playground.server.runs) sleeps in playground code for the life of
            # the process: it is never a request in flight, and waiting for it cost every app
            # module the whole timeout.
            if thread is threading.current_thread() or frame is None or thread.name == "run-sweeper":
                continue
            while frame is not None:
                if frame.f_code.co_filename.startswith(package):
                    # (the run registry's sweeper sleeps in playground code for the life of the process)
                    busy = busy or frame.f_code.co_name not in IDLE_LOOPS
                    break
                frame = frame.f_back
        if not busy:
            return
        time.sleep(0.1)


@pytest.fixture
def training_on_every_core(monkeypatch):
    """A training job takes one thread fewer than the process (generation first: one on two cores).
    The tests that train through the tab or the API have the machine to themselves, and what they
    assert does not depend on the thread count: they train on every core (docs/benchmarks.md, the
    test suite's time)."""
    import torch

    from playground.runtime import threads
    from playground.server import jobs

    cores = torch.get_num_threads()
    monkeypatch.setattr(jobs, "as_background_work", lambda: threads.as_background_work(threads=cores))


@pytest.fixture
def no_downloads(monkeypatch):
    """The corpus loaders' downloads fail loudly: the training tests never reach the network."""
    from playground.training import corpus

    def refuse(url, timeout, max_bytes):
        raise AssertionError(f"test tried to download {url}")

    monkeypatch.setattr(corpus, "_fetch_url", refuse)


@pytest.fixture
def one_torch_thread():
    """One torch thread for the test: the same count for every run a test compares, and gentle on a shared CPU."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_corpus():
    """tests/training_support.py's made-up text, prepared for its TINY model."""
    from playground.training.corpus import prepare_corpus
    from tests.training_support import TINY, small_text

    return prepare_corpus(small_text(), TINY.context_length, name="small")
