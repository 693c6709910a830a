"""The app server the browser benchmark drives: app.py's demo, started as ``python -m bench.browser --serve``."""

from __future__ import annotations

from bench import serving


class AppServer(serving.App):
    """The app as ``python app.py`` builds and launches it, but started as ``python -m bench.browser
    --serve``: on a shared machine, other people's clean-ups that end processes named ``app.py``
    then leave the benchmark's server alone. Its log appends, so a restarted server logs after the one it replaces."""

    command = ("-m", "bench.browser", "--serve")
    name = "the app"
    log_mode = "a"


def serve() -> None:
    """What ``app.py`` does (``playground.ui.serve``): ready the process, build the demo, pay the first run's
    one-off costs, settle the heap and launch it (port from GRADIO_SERVER_PORT)."""
    from playground.ui.serve import prepare
    from playground.ui.serve import serve as launch

    launch(prepare())
