"""The app server the browser benchmark drives: app.py's demo, started as ``python -m bench.browser --serve``."""

from __future__ import annotations

import json
import os
import signal
import tempfile
from pathlib import Path

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

    signal.signal(signal.SIGUSR2, _write_shared_steps)  # (bench.room_profile --rounds)
    launch(prepare())


def shared_steps_path(pid: int) -> Path:
    """Where the server of process ``pid`` writes its decode loop's latest shared steps when sent SIGUSR2."""
    return Path(tempfile.gettempdir()) / f"playground-shared-steps-{pid}.json"


def _write_shared_steps(signum=None, frame=None) -> None:
    from playground.server.decode_loop import LOOP

    path = shared_steps_path(os.getpid())
    part = path.with_suffix(".part")
    part.write_text(json.dumps([step._asdict() for step in list(LOOP.timeline)]))
    part.replace(path)  # whole or not at all for the reader
