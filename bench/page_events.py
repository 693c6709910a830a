"""A page's own events, sent as the page sends them: by fn_index, in the page's session, the session's state
inputs left as None (the server fills them from the session).

A page's private events (its room's Join, its hidden poll, the lessons' Next and Back) have no ``api_name``;
gradio_client cannot call them, so the benches post them as the browser does. ``page_route`` finds an event by
the ``elem_id`` of the button that triggers it, ``then_route`` the event chained after it, and ``output_of`` where
a component's value sits in an event's answer.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from .room_sse import KeptConnection, post, stream_generate

SKIP = {"__type__": "update"}  # an output the event left as it was


@dataclass
class Route:
    """What a request to one event needs (picklable: a follower process gets it)."""

    fn_index: int
    host: str
    port: int
    join_path: str
    data_path: str
    run_path: str | None  # (set when the event is unqueued: one POST)

    @classmethod
    def of(cls, endpoint) -> Route:
        return cls(
            endpoint.fn_index, endpoint.host, endpoint.port, endpoint.join_path, endpoint.data_path, endpoint.run_path
        )


def route_of(client, fn_index: int) -> Route:
    """The route of event ``fn_index`` of ``client``'s app (unqueued: one POST; else through the queue)."""
    prefix = "/" + client.config.get("api_prefix", "/gradio_api").strip("/")
    parts = urllib.parse.urlsplit(client.src)
    dependency = _dependency(client, fn_index)
    run_path = None if dependency.get("queue", True) else f"{prefix}/run/predict"
    return Route(fn_index, parts.hostname, parts.port or 80, f"{prefix}/queue/join", f"{prefix}/queue/data", run_path)


def page_route(client, elem_id: str) -> Route:
    """The route of the click event of the page's button ``elem_id``."""
    ids = _elem_ids(client)
    return route_of(
        client,
        next(
            d["id"]
            for d in client.config["dependencies"]
            if any(ids.get(t[0]) == elem_id and t[1] == "click" for t in d.get("targets", []))
        ),
    )


def then_route(client, elem_id: str) -> Route:
    """The route of the event chained after the click of ``elem_id`` (the page runs it when that ends)."""
    first = page_route(client, elem_id).fn_index
    return route_of(client, next(d["id"] for d in client.config["dependencies"] if d.get("trigger_after") == first))


def output_of(client, route: Route, elem_id: str) -> int:
    """Where the component ``elem_id`` sits among the outputs of ``route``'s event."""
    ids = _elem_ids(client)
    outputs = _dependency(client, route.fn_index)["outputs"]
    return next(i for i, component in enumerate(outputs) if ids.get(component) == elem_id)


def send(route: Route, session: str, data: list, kept: KeptConnection | None = None) -> list:
    """One event of the page's session ``session``: its outputs."""
    if route.run_path:
        return post(route, session, data, timeout=120, kept=kept)[1]
    _, stamped = stream_generate(route, session, data, None, timeout=120)
    return stamped[-1][1] if stamped else []


def drawn(outputs: list) -> int:
    """How many of an event's outputs changed something on the page."""
    return sum(1 for value in outputs if value is not None and value != SKIP)


def _dependency(client, fn_index: int) -> dict:
    return next(d for d in client.config["dependencies"] if d["id"] == fn_index)


def _elem_ids(client) -> dict:
    return {c["id"]: c.get("props", {}).get("elem_id") for c in client.config["components"]}
