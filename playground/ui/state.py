"""A session's state: names only (its model's recipe, its current run's id).

A session's state: names only (its model's recipe, its current run's id, its own id); the server
keeps the model in the shared cache (leased to the session's id, with the room for a generation)
and the run in the run registry. ``for_the_session`` runs a handler on the session's behalf in the
memory budget: what it holds is the session's, and its refusals name the session's own holdings.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import secrets

from gradio.context import LocalContext

from playground.server.model_cache import CACHE
from playground.server.recipes import default_recipe
from playground.server.resources import acting_for
from playground.server.runs import get_run


def new_state(lang: str = "en") -> dict:
    """A session holds names, not objects: its model's recipe and its current run's id (the server
    keeps the run, and releases it after the idle timeout), the page's language, and an id the
    model cache leases the session's model to."""
    return {"recipe": default_recipe(), "run_id": None, "lang": lang, "session": _new_id()}


def _page() -> str | None:
    """The page whose event runs now, by a digest of Gradio's session hash (one per open page, the same
    for all of its events; the hash itself is the key to the page's state, so it is not kept), or None
    outside an event (a test, warm-up) or for a request that names no page."""
    request = LocalContext.request.get(None)
    page = getattr(request, "session_hash", None)
    if not (isinstance(page, str) and page):
        return None
    return "page:" + hashlib.sha256(page.encode()).hexdigest()[:16]


def _new_id() -> str:
    """A new session's id: within a page's event, the page's own, so that whichever of the page's load
    events replaces its state first, an id any of them drew is the one the page keeps; else a new one."""
    return _page() or secrets.token_hex(8)


def session_id(state: dict | None) -> str | None:
    """The id the session's model lease is under, drawn at its first use by a state that has none
    (the page's default state, which every API client's session starts from: one shared id would
    make their models and refusals one session's). None without a state."""
    if not isinstance(state, dict):
        return None
    if not state.get("session"):
        state["session"] = _new_id()  # kept: Gradio hands a handler the session's own state
    return state["session"]


def page_id(state: dict | None) -> str | None:
    """The page whose event runs now (by Gradio's session hash: one per open page, the same for all of
    its events), or outside an event (a test) ``session_id(state)``. The page's state can be replaced
    by one of its load events while another runs, so an id kept on it is not always the page's."""
    return _page() or session_id(state)


def client_address() -> str | None:
    """The address of the client whose request runs now (Gradio's, set for each event), or None
    outside one (a test, warm-up): per-client caps count by it. Behind a reverse proxy that uvicorn trusts
    (``FORWARDED_ALLOW_IPS``: by default this machine) it is the address the proxy forwards; behind any
    other it is the proxy's."""
    request = LocalContext.request.get(None)
    client = getattr(request, "client", None)
    host = getattr(client, "host", None)
    return host if isinstance(host, str) and host else None


def _acting(who: str | None, client: str | None):
    """``acting_for`` the session, from the request's address (outside a request, the address the
    caller already set stays: a test, a warm-up)."""
    return acting_for(who, client) if client is not None else acting_for(who)


_DONE = object()  # what next() gives for a generator that has finished


def for_the_session(handler):
    """``handler`` (an event handler with a ``state`` argument) run for that session: what it holds in
    the memory budget is the session's, and a refusal it meets names the session's own holdings (other
    sessions' only as counts and sizes). A generator is run so one step at a time, as Gradio may run
    each step in another thread."""
    signature = inspect.signature(handler)

    def owner(args, kwargs) -> str | None:
        return session_id(signature.bind_partial(*args, **kwargs).arguments.get("state"))

    if not inspect.isgeneratorfunction(handler):

        @functools.wraps(handler)
        def call(*args, **kwargs):
            with _acting(owner(args, kwargs), client_address()):
                return handler(*args, **kwargs)

        return call

    @functools.wraps(handler)
    def steps(*args, **kwargs):
        who, client = owner(args, kwargs), client_address()
        updates = handler(*args, **kwargs)
        try:
            while True:
                with _acting(who, client):
                    update = next(updates, _DONE)
                if update is _DONE:
                    return
                yield update
        finally:
            with _acting(who, client):
                updates.close()  # a closed page or Stop: the handler's own clean-up runs now

    return steps


def session_model(state: dict):
    """The session's model, renewing its lease (built again if it was evicted after the lease ended)."""
    return leased_model(state["recipe"], state)


def leased_model(recipe: dict, state: dict | None, progress=None):
    """The model ``recipe`` names, leased to the session, for the client address that asked."""
    sid = session_id(state)
    with _acting(sid, client_address()):
        return CACHE.get(recipe, progress=progress, session=sid)


def api_run(state: dict | None):
    """(run, None), or (None, {"error": message}) for the raw-data API endpoints."""
    try:
        run = session_run(state)
    except ValueError as e:
        return None, {"error": str(e)}
    return (run, None) if run is not None else (None, {"error": "Generate first."})


def session_run(state: dict | None):
    """The session's current run, or None before its first. A run the server released (idle
    timeout) raises RunReleasedError, a ValueError whose message is for the user."""
    run_id = (state or {}).get("run_id")
    return get_run(run_id) if run_id else None
