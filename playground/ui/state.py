"""A session's state: names only (its model's recipe, its current run's id).

A session's state: names only (its model's recipe, its current run's id, its own id); the server
keeps the model in the shared cache (leased to the session's id, with the room for a generation)
and the run in the run registry.
"""

from __future__ import annotations

import secrets

from playground.server.model_cache import CACHE
from playground.server.recipes import default_recipe
from playground.server.runs import get_run


def new_state(lang: str = "en") -> dict:
    """A session holds names, not objects: its model's recipe and its current run's id (the server
    keeps the run, and releases it after the idle timeout), the page's language, and an id the
    model cache leases the session's model to."""
    return {"recipe": default_recipe(), "run_id": None, "lang": lang, "session": secrets.token_hex(8)}


def session_id(state: dict | None) -> str | None:
    """The id the session's model lease is under (None for a state from before sessions had one)."""
    return (state or {}).get("session") or None


def session_model(state: dict):
    """The session's model, renewing its lease (built again if it was evicted after the lease ended)."""
    return CACHE.get(state["recipe"], session=session_id(state))


def session_reservation(state: dict | None):
    """The room the session's lease holds for its next generation (None without a lease)."""
    return CACHE.reservation(session_id(state))


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
