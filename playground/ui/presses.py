"""A press's name, for a Stop that reaches the server before the event it stops has started.

A long event can be queued behind other users' work, or its request can still be on its way on a busy
machine, when the user presses Stop. The page names each press of the button in a hidden input
(``press_js``) and Stop sends the page's last name (``stop_js``), so the server can stop a press it has
not seen start. Each tab keeps its own name (``var``), so Generate's Stop never names an Inside view's press.
"""

from __future__ import annotations

MAX_NAME = 64  # characters of a press's name the server keeps (a name comes from the page)


def name_js(var: str, at: int) -> str:
    """JS statements for a ``js=`` pre-processor over inputs ``a``: a fresh name for this press, kept in
    ``window[var]`` and put in input number ``at``."""
    return f"window.{var} = Date.now().toString(36) + Math.random().toString(36).slice(2); a[{at}] = window.{var};"


def press_js(var: str, at: int) -> str:
    """A button's ``js=``: input number ``at`` becomes a fresh name for this press."""
    return f"(...a) => {{ {name_js(var, at)} return a; }}"


def stop_js(var: str, at: int) -> str:
    """Stop's ``js=``: input number ``at`` becomes the name of the page's last press (empty before any)."""
    return f"(...a) => {{ a[{at}] = window.{var} || ''; return a; }}"


def press_name(ask) -> str:
    """A press's name as the server keeps it ("" for none)."""
    return str(ask or "")[:MAX_NAME]
