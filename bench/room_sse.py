"""A learner's /generate as a bare HTTP stream: Gradio's queue protocol (``queue/join``, then the
session's ``queue/data`` event stream) on ``http.client``, the way bench/room_llama.py reads
llama-server's ``/completion`` stream, so both servers face clients of the same weight.

gradio_client, the room's first client, runs a reader thread per session that polls every 50 ms and
a prediction processor per update; 30 of them took 2.81 s of CPU for the 1,920 tokens the server
made with 2.58 s (docs/benchmarks.md): on a 2-core machine the harness took a core from the server.
The session (its model built, its ``session_hash``) still comes from gradio_client; only the timed
request goes this way.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse

from gradio_client.utils import apply_diff


class Endpoint:
    """What a raw request to one event needs: its fn_index and its inputs in order, the session's
    state inputs left as None (the server fills them from the session), as gradio_client sends them."""

    def __init__(self, client, api_name: str):
        self.fn_index = client._infer_fn_index(api_name, None)
        self.endpoint = client.endpoints[self.fn_index]
        prefix = client.config.get("api_prefix", "/gradio_api").strip("/")
        parts = urllib.parse.urlsplit(client.src)
        self.host, self.port = parts.hostname, parts.port or 80
        self.join_path = f"/{prefix}/queue/join"
        self.data_path = f"/{prefix}/queue/data"
        # An event with queue=False is one POST, as the page sends it (``/run/predict`` with its fn_index)
        dependency = next((d for d in client.config.get("dependencies", []) if d.get("id") == self.fn_index), {})
        self.run_path = None if dependency.get("queue", True) else f"/{prefix}/run/predict"

    def data(self, kwargs: dict, parameters: list[dict]) -> list:
        values = [kwargs[p["parameter_name"]] for p in parameters]
        return list(self.endpoint.insert_empty_state(*values))


def stream_generate(
    endpoint: Endpoint,
    session_hash: str,
    data: list,
    barrier: threading.Barrier | None,
    timeout: float,
    on_update=None,
) -> tuple[float, list[tuple[float, list]]]:
    """(start, [(arrival time, full outputs)]): one event's updates with their diffs applied;
    ``on_update(time, outputs)`` is called as each arrives (from the reading thread)."""
    if barrier is not None:
        barrier.wait(timeout=timeout)
    start = time.time()
    body = {"data": data, "fn_index": endpoint.fn_index, "session_hash": session_hash, "event_data": None}
    conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=timeout)
    conn.request("POST", endpoint.join_path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    joined = resp.read()
    if resp.status != 200:
        raise RuntimeError(f"queue/join: HTTP {resp.status}: {joined[:200]!r}")
    event_id = json.loads(joined)["event_id"]
    conn.request("GET", f"{endpoint.data_path}?session_hash={session_hash}", headers={"Accept": "text/event-stream"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"queue/data: HTTP {resp.status}")
    stamped: list[tuple[float, list]] = []
    outputs: list | None = None
    deadline = start + timeout
    try:
        while time.time() < deadline:
            line = resp.readline()
            if not line:
                break
            if not line.startswith(b"data:"):
                continue
            msg = json.loads(line[5:])
            if msg.get("event_id") not in (None, event_id):
                continue
            kind = msg.get("msg")
            if kind in ("process_generating", "process_completed"):
                if kind == "process_completed" and not msg.get("success", True):
                    raise RuntimeError(f"the event failed: {str(msg.get('output'))[:200]}")
                diff = (msg.get("output") or {}).get("data") or []
                if outputs is None or kind == "process_completed" and not _is_diff(diff):
                    outputs = list(diff)
                else:
                    outputs = [apply_diff(old, new) for old, new in zip(outputs, diff)]
                stamped.append((time.time(), list(outputs)))
                if on_update is not None:
                    on_update(*stamped[-1])
                if kind == "process_completed":
                    break
            elif kind == "close_stream":
                break
    finally:
        conn.close()
    return start, stamped


class KeptConnection:
    """One HTTP connection used for request after request, as a browser keeps one open (keep-alive), so the
    server is not asked to accept a connection per request; opened again when the server closed it (uvicorn
    closes one idle for 5 s), and the request sent again once on the new one, as a browser does."""

    CLOSED = (http.client.RemoteDisconnected, http.client.CannotSendRequest, BrokenPipeError, ConnectionResetError)

    def __init__(self, host: str, port: int, timeout: float):
        self.host, self.port, self.timeout = host, port, timeout
        self.conn: http.client.HTTPConnection | None = None
        self.opened = 0  # connections opened so far

    def request(self, method: str, path: str, body: str | None = None, headers: dict | None = None):
        """(status, body) of one request."""
        for attempt in (0, 1):
            fresh = self.conn is None
            if fresh:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
                self.opened += 1
            try:
                self.conn.request(method, path, body, headers or {})
                resp = self.conn.getresponse()
                answer = resp.read()
            except self.CLOSED:
                self.close()
                if fresh or attempt:
                    raise
                continue
            except Exception:
                self.close()
                raise
            if resp.will_close:
                self.close()
            return resp.status, answer
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def post(
    endpoint, session_hash: str, data: list, timeout: float = 30.0, kept: KeptConnection | None = None
) -> tuple[float, list]:
    """(arrival time, outputs) of one unqueued event (``endpoint.run_path``), posted as the page posts it
    (on ``kept``, a connection kept open between requests, as a page's; else on a connection of its own)."""
    body = {"data": data, "fn_index": endpoint.fn_index, "session_hash": session_hash, "event_data": None}
    conn = kept or KeptConnection(endpoint.host, endpoint.port, timeout)
    try:
        status, answer = conn.request("POST", endpoint.run_path, json.dumps(body), {"Content-Type": "application/json"})
    finally:
        if kept is None:
            conn.close()
    if status != 200:
        raise RuntimeError(f"{endpoint.run_path}: HTTP {status}: {answer[:200]!r}")
    return time.time(), json.loads(answer)["data"]


def call(endpoint: Endpoint, session_hash: str, data: list, timeout: float = 30.0) -> None:
    """Queue one event of the session without reading its result (e.g. Stop, whose effect is seen
    on the running event's stream)."""
    body = {"data": data, "fn_index": endpoint.fn_index, "session_hash": session_hash, "event_data": None}
    conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=timeout)
    try:
        conn.request("POST", endpoint.join_path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"queue/join: HTTP {resp.status}")
    finally:
        conn.close()


def _is_diff(output: list) -> bool:
    """A streamed update's outputs are lists of [op, path, value] edits."""
    return all(isinstance(o, list) and all(isinstance(e, list) and len(e) == 3 for e in o) for o in output)
