"""What every tab shares: translated labels, messages, the session state and input parsing.

Handlers receive whatever the browser or a ``gradio_client`` caller sends, so every value is
parsed here into the type the engine expects, or refused with a message that names the field.
"""

from __future__ import annotations

import html
import logging
import math
import traceback

import gradio as gr

from ..config import ConfigError
from ..session import CACHE, default_recipe, get_run
from ..translations import EN, ZH
from ..weights import WeightLoadError

log = logging.getLogger("playground.ui")
I18N = gr.I18n(en=EN, **{"zh-CN": ZH, "zh": ZH})
T = I18N  # T("key") -> a label translated in the browser
MAX_SEED = 2**63 - 1  # torch.Generator.manual_seed takes a signed 64-bit seed


def warn(message: str) -> str:
    return f"<div class='pg-msg pg-error'>⚠️ {html.escape(str(message))}</div>"


def ok(message: str) -> str:
    return f"<div class='pg-msg pg-ok'>✓ {html.escape(str(message))}</div>"


def fail(e: Exception) -> str:
    """User errors keep their own message; anything else is logged and reported briefly."""
    if isinstance(e, (ValueError, ConfigError, WeightLoadError, FileNotFoundError, MemoryError)):
        return warn(str(e))
    log.error("unexpected error: %s", traceback.format_exc())
    return warn(f"Something went wrong ({type(e).__name__}: {e}). Your model and results are unchanged.")


def new_state() -> dict:
    """A session holds names, not objects: its model's recipe and its current run's id (the server
    keeps the run, and releases it after the idle timeout)."""
    return {"recipe": default_recipe(), "run_id": None}


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


# ----------------------------------------------------------------------------------------------
# Parsing what a widget (or an API caller) sent


def parse_number(value, name: str) -> float:
    if isinstance(value, bool) or value is None or value == "":
        raise ValueError(f"{name} must be a number, got {value!r}.")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}.") from None
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {value!r}.")
    return number


def parse_whole(value, name: str, lo: int | None = None, hi: int | None = None) -> int:
    try:
        number = parse_number(value, name)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {value!r}.") from None
    if not number.is_integer():
        raise ValueError(f"{name} must be a whole number, got {value!r}.")
    whole = int(number)
    if (lo is not None and whole < lo) or (hi is not None and whole > hi):
        span = f"between {lo:,} and {hi:,}" if lo is not None and hi is not None else \
            f"at least {lo:,}" if lo is not None else f"at most {hi:,}"
        raise ValueError(f"{name} must be {span}, got {whole:,}.")
    return whole


def parse_seed(value, name: str = "Seed") -> int | None:
    """None or empty means "no seed"; otherwise a whole number torch accepts."""
    if value is None or value == "":
        return None
    return parse_whole(value, name, 0, MAX_SEED)


def parse_bool(value, name: str) -> bool:
    """A checkbox sends True/False; API callers sometimes send strings, which bool() would misread."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise ValueError(f"{name} must be true or false, got {value!r}.")


def parse_choice(value, choices, name: str) -> str:
    if value not in choices:
        shown = ", ".join(f"“{c}”" for c in choices)
        raise ValueError(f"{name} must be one of {shown}; got {value!r}.")
    return value


def slider_range(maximum: int, value: int = 0) -> dict:
    """A 0..maximum slider; with a single choice there is nothing to slide, so it hides (Gradio
    refuses a slider whose minimum equals its maximum)."""
    return gr.update(minimum=0, maximum=max(1, maximum), value=min(max(0, value), max(0, maximum)),
                     visible=maximum > 0)
