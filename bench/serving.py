"""The app as users meet it: cold start of ``python app.py`` and concurrent users via its API.

Every step skips with a message (instead of failing the whole benchmark) when the app is not
there yet or does not offer the endpoint asked for; the endpoint names are parameters.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


class App:
    """``python app.py`` on a free port; ``close()`` ends that process (and only that one).

    A subclass that starts the app another way names its ``command`` (the arguments after the
    interpreter), the ``name`` its errors use and the ``log_mode`` its log file opens with."""

    command: tuple[str, ...] = ("app.py",)
    name = "app.py"
    log_mode = "w"

    def __init__(self, timeout: float = 120.0, log_path: Path | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        env = {
            **os.environ,
            "GRADIO_SERVER_PORT": str(self.port),
            "GRADIO_SERVER_NAME": "127.0.0.1",
            "GRADIO_ANALYTICS_ENABLED": "False",
            "HF_HUB_OFFLINE": "1",
        }
        self.log_path = log_path or Path(os.devnull)
        self._log = open(self.log_path, self.log_mode)
        self.t_spawn = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, *self.command], cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.page_s = None
        deadline = self.t_spawn + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with code {self.proc.returncode} before serving the page")
            if _http_ok(self.url):
                self.page_s = time.perf_counter() - self.t_spawn
                return
            time.sleep(0.05)
        self.close()
        raise TimeoutError(f"{self.name} did not serve {self.url} within {timeout:.0f} s")

    def close(self) -> None:
        stop_process(self.proc)
        self._log.close()


def _client(url: str):
    from gradio_client import Client

    return Client(url, verbose=False)


def _endpoint_parameters(client, api_name: str) -> list[dict] | None:
    info = client.view_api(print_info=False, return_format="dict")
    endpoint = (info or {}).get("named_endpoints", {}).get(api_name)
    return None if endpoint is None else endpoint.get("parameters", [])


def _call_kwargs(parameters: list[dict], overrides: dict) -> dict:
    """Every parameter the endpoint takes: our value if we have one, else its default."""
    kwargs = {}
    for p in parameters:
        name = p.get("parameter_name")
        if name in overrides:
            kwargs[name] = overrides[name]
        elif p.get("parameter_has_default"):
            kwargs[name] = p.get("parameter_default")
        else:
            raise ValueError(f"the endpoint needs {name!r} and the benchmark has no value for it")
    return kwargs


def cold_start(ready_api: str = "/load_session", timeout: float = 120.0) -> dict:
    """Seconds from spawning ``python app.py`` to the page being served, and to the default model
    being ready (the page-load endpoint ``ready_api`` answering: it builds the default model)."""
    if not (ROOT / "app.py").is_file():
        return {"skipped": "app.py is not there yet"}
    try:
        app = App(timeout=timeout)
    except (RuntimeError, TimeoutError) as e:
        return {"skipped": f"app.py did not start: {e}"}
    try:
        out = {"page_s": app.page_s}
        client = _client(app.url)
        params = _endpoint_parameters(client, ready_api)
        if params is None:
            out["ready_note"] = f"no {ready_api} endpoint: only the page time is measured"
            return out
        client.predict(**_call_kwargs(params, {}), api_name=ready_api)
        out["ready_s"] = time.perf_counter() - app.t_spawn
        return out
    except Exception as e:  # the app is someone else's work in progress: report, don't crash
        out["ready_note"] = f"{ready_api} failed: {type(e).__name__}: {e}"
        return out
    finally:
        app.close()


def concurrent_users(
    n_users: int = 4,
    api_name: str = "/generate",
    ready_api: str = "/load_session",
    max_new_tokens: int = 64,
    prompt: str = "To be, or not to be, that is the question:",
    timeout: float = 600.0,
) -> dict:
    """One user alone, then ``n_users`` at once, each with their own session (client), asking
    ``api_name`` for ``max_new_tokens`` greedy tokens. Aggregate tokens/s counts requested tokens
    (generation does not stop early)."""
    if not (ROOT / "app.py").is_file():
        return {"skipped": "app.py is not there yet"}
    try:
        app = App()
    except (RuntimeError, TimeoutError) as e:
        return {"skipped": f"app.py did not start: {e}"}
    try:
        probe = _client(app.url)
        params = _endpoint_parameters(probe, api_name)
        if params is None:
            return {"skipped": f"the app has no {api_name} endpoint"}
        overrides = {"prompt": prompt, "max_new_tokens": max_new_tokens, "greedy": True, "temperature": 0.0}
        kwargs = _call_kwargs(params, overrides)
        ready_params = _endpoint_parameters(probe, ready_api)

        def one_user(results: list, i: int, barrier: threading.Barrier | None):
            try:
                client = _client(app.url)
                if ready_params is not None:
                    client.predict(**_call_kwargs(ready_params, {}), api_name=ready_api)
                if barrier is not None:
                    barrier.wait(timeout=timeout)
                t0 = time.perf_counter()
                job = client.submit(**kwargs, api_name=api_name)
                for _ in job:  # every streamed update
                    pass
                job.result(timeout=timeout)
                results[i] = {"latency_s": time.perf_counter() - t0, "end": time.perf_counter(), "start": t0}
            except Exception as e:
                results[i] = {"error": f"{type(e).__name__}: {e}"}

        single = [None]
        one_user(single, 0, None)  # also warms the model up
        single = [None]
        one_user(single, 0, None)
        many = [None] * n_users
        barrier = threading.Barrier(n_users)
        threads = [threading.Thread(target=one_user, args=(many, i, barrier)) for i in range(n_users)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout + 60)
        errors = (
            [r["error"] for r in single + many if r is None or "error" in r]
            if all(single + many)
            else ["a user never finished"]
        )
        out = {"users": n_users, "max_new_tokens": max_new_tokens, "api_name": api_name, "errors": errors}
        if single[0] and "latency_s" in single[0]:
            out["single_latency_s"] = single[0]["latency_s"]
            out["single_tok_s"] = max_new_tokens / single[0]["latency_s"]
        ok = [r for r in many if r and "latency_s" in r]
        if ok:
            wall = max(r["end"] for r in ok) - min(r["start"] for r in ok)
            out["aggregate_tok_s"] = len(ok) * max_new_tokens / wall
            out["worst_latency_s"] = max(r["latency_s"] for r in ok)
        return out
    finally:
        app.close()


def stop_process(proc: subprocess.Popen) -> None:
    """Terminate a server the bench started, and kill it if it has not ended 10 s later."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
