"""The app server the browser benchmark drives: app.py's demo, started as ``python -m bench.browser --serve``."""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench import serving


class AppServer(serving.App):
    """The app as ``python app.py`` builds and launches it, but started as ``python -m bench.browser
    --serve``: on a shared machine, other people's clean-ups that end processes named ``app.py``
    then leave the benchmark's server alone."""

    def __init__(self, timeout: float = 120.0, log_path: Path | None = None):
        import subprocess
        import sys

        self.port = serving.free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        env = {
            **os.environ,
            "GRADIO_SERVER_PORT": str(self.port),
            "GRADIO_SERVER_NAME": "127.0.0.1",
            "GRADIO_ANALYTICS_ENABLED": "False",
            "HF_HUB_OFFLINE": "1",
        }
        self.log_path = log_path or Path(os.devnull)
        self._log = open(self.log_path, "a")
        self.t_spawn = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.browser", "--serve"],
            cwd=serving.ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.page_s = None
        deadline = self.t_spawn + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the app exited with code {self.proc.returncode} before serving the page")
            if serving._http_ok(self.url):
                self.page_s = time.perf_counter() - self.t_spawn
                return
            time.sleep(0.05)
        self.close()
        raise TimeoutError(f"the app did not serve {self.url} within {timeout:.0f} s")


def serve() -> None:
    """What ``app.py`` does: build the demo and launch it (port from GRADIO_SERVER_PORT)."""
    from playground.ui.app import build_demo, launch_kwargs, warm_up

    demo = build_demo()
    warm_up()
    demo.launch(**launch_kwargs())
