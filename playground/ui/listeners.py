"""Who redraws what when the page's language or presenter mode changes: the registry tabs add to.

A tab calls ``on_change(page, fn, inputs, outputs)`` from its ``wire(page)``: ``fn(state, *inputs)``
redraws ``outputs`` in the page's new language (``lang_of(state)``) and presenter mode
(``state.get("present")``). ``prefs`` runs every registered redraw after it stored the new
preferences in the session state; it never needs to know the tabs.
"""

from __future__ import annotations


def on_change(page, fn, inputs: list, outputs: list) -> None:
    page.__dict__.setdefault("prefs_listeners", []).append((fn, list(inputs), list(outputs)))


def registered(page) -> list[tuple]:
    """(fn, inputs, outputs) of every redraw, in the order the tabs registered them."""
    return list(page.__dict__.get("prefs_listeners", []))
