"""A session's state: names only (its model's recipe, its current run's id).

A session's state: names only (its model's recipe, its current run's id); the server keeps the
model in the shared cache and the run in the run registry.
"""

from __future__ import annotations

from playground.server.model_cache import CACHE
from playground.server.recipes import default_recipe
from playground.server.runs import get_run


def new_state(lang: str = "en") -> dict:
    """A session holds names, not objects: its model's recipe and its current run's id (the server
    keeps the run, and releases it after the idle timeout), and the page's language."""
    return {"recipe": default_recipe(), "run_id": None, "lang": lang}


def session_model(state: dict):
    return CACHE.get(state["recipe"])


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
