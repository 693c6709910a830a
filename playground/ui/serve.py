"""Serving the app: ``python app.py`` (a checkout, a Space) and the installed ``gpt-playground`` command.

``prepare`` readies the process and builds the page (a Space imports ``demo`` from app.py);
``main`` then pays the first run's one-off costs and serves."""

from __future__ import annotations

import argparse
import gc
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from playground.server import openmp_workers  # noqa: E402
from playground.server.recipes import decide_kernels_at_start  # noqa: E402
from playground.server.resources import BUDGET, DeviceError, default_device, map_large_blocks  # noqa: E402  # noqa: E402

from .app import build_demo, launch_kwargs, warm_up  # noqa: E402


def prepare() -> gr.Blocks:
    """The process set up for serving, then the page built."""
    map_large_blocks()  # before any model is built: freed weights go straight back to the OS
    BUDGET.count_whole_process()  # the budget bounds the server's resident size, not only what it names
    try:
        default_device()  # PLAYGROUND_DEVICE=auto|cpu|cuda|mps: a device this machine lacks stops here, said plainly
    except DeviceError as e:
        raise SystemExit(f"error: {e}") from None
    # Kernel decisions: the default model's made now (once per machine: read from disk after), GPT-2
    # small's in the background; a learner's Build only reads them.
    decide_kernels_at_start()
    return build_demo()


def serve(demo: gr.Blocks, **launch) -> None:
    warm_up()  # the first run's one-off costs, paid before the first page opens
    settle_heap()
    openmp_workers.release()  # this thread built the model and serves no torch work from now on
    demo.launch(**launch_kwargs(), **launch)  # prints the address it serves


def settle_heap() -> None:
    """The objects built so far (the page's blocks and configs, the modules, the default model) moved
    out of the cyclic collector's reach: they live as long as the process, and a full collection walked
    all ~400,000 of them, a 0.3-0.7 s pause of every thread (the decode and each follower's answer with
    them) several times a minute under a classroom's load (docs/benchmarks.md)."""
    gc.collect()  # (what is garbage now is freed, not kept for ever)
    gc.freeze()


def main(argv: list[str] | None = None) -> None:
    """``gpt-playground [--host H] [--port P]``: serve the app (the bundled model ships with the package)."""
    parser = argparse.ArgumentParser(prog="gpt-playground", description=main.__doc__)
    parser.add_argument(
        "--host", default=None, help="the address to listen on (default: GRADIO_SERVER_NAME or 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=None, help="the port (default: GRADIO_SERVER_PORT or 7860 upward)")
    args = parser.parse_args(argv)
    if args.host is not None:
        listen_on(args.host)
    launch = {k: v for k, v in (("server_name", args.host), ("server_port", args.port)) if v is not None}
    serve(prepare(), **launch)


def listen_on(host: str) -> None:
    """``--host`` as ``GRADIO_SERVER_NAME`` too: the room's join link reads the listening address there
    (room_views.listening_host), as it does when the variable itself was set. Gradio's server has read the
    variable at import, so ``launch`` still takes the host as an argument."""
    os.environ["GRADIO_SERVER_NAME"] = host
