"""Who redraws what when the page's language or presenter mode changes: the registry tabs add to.

A tab calls ``on_change(page, fn, inputs, outputs)`` from its ``wire(page)``: ``fn(state, *inputs)``
redraws ``outputs`` in the page's new language (``lang_of(state)``) and presenter mode
(``state.get("present")``). ``prefs`` runs every registered redraw after it stored the new
preferences in the session state; it never needs to know the tabs.

A long view that streams partial figures hands each to ``streamed``; whoever registered with
``on_streamed`` (a classroom room, which publishes its teacher's) gets it, without the tab knowing who;
likewise a Generate run that has just ended goes to ``run_ended``, for whoever registered ``on_run_ended``.
"""

from __future__ import annotations

import json


def on_change(page, fn, inputs: list, outputs: list, then: tuple | None = None) -> None:
    """``fn(state, *inputs)`` redraws ``outputs`` after each change of the page's preferences; ``then``
    (fn, inputs, outputs) runs after its answer has reached the page."""
    page.__dict__.setdefault("prefs_listeners", []).append((fn, list(inputs), list(outputs), then))


def on_change_titles(page, titles: dict[str, list[str]], blocks: list) -> None:
    """Like ``on_change`` for the titles of ``blocks`` (tabs), ``titles[lang]`` in each language,
    set by a script in the page (``titles_js``)."""
    page.__dict__.setdefault("prefs_listeners", []).append((titles_js(titles), [], list(blocks), None))


def titles_js(titles: dict[str, list[str]]) -> str:
    """A ``js=`` function that sets blocks' titles to ``titles[the page's language]``, in the page.

    A title Gradio translated once would otherwise stay in the old language until its tab is
    opened. A script sets it, not a server event: Gradio's front end copies every component a
    server event has ever updated at each later event's status change, and for a tab that is
    everything inside it, figures included -- main-thread work on every click of every tab."""
    return (
        f"() => {{ const titles = {json.dumps(titles, ensure_ascii=False)};"
        " const lang = window.pgPrefs ? window.pgPrefs().lang : 'en';"
        " return (titles[lang] || titles.en).map((label) => ({__type__: 'update', label})); }"
    )


def registered(page) -> list[tuple]:
    """(fn or script, inputs, outputs) of every redraw, in the order the tabs registered them."""
    return list(page.__dict__.get("prefs_listeners", []))


# Whoever follows a session's long views as they stream (a classroom room): fn(state, key, draw, selection).
_STREAMED: list = []


def on_streamed(fn) -> None:
    """``fn(state, key, draw, selection)`` is called with each partial figure a long view streams (the Inside
    tab's dose-response curve and head sweep, by view ``key``): ``draw(lang, present)`` draws it as the view's
    outputs, ``selection`` the fields it was asked with. A classroom room publishes its teacher's to the room."""
    if fn not in _STREAMED:
        _STREAMED.append(fn)


def streamed(state, key: str, draw, selection: dict | None = None) -> None:
    """A long view's partial figure, for every ``on_streamed`` follower (each keeps its own failures to itself)."""
    for fn in list(_STREAMED):
        fn(state, key, draw, selection or {})


# Whoever wants a session's Generate run as soon as it ends (a classroom room): fn(state).
_RUN_ENDED: list = []


def on_run_ended(fn) -> None:
    """``fn(state)`` is called in the Generate handler once its run has ended, before the page is told (the
    session's last run: ``session_run(state)``). It must return at once: the page's last update waits on it."""
    if fn not in _RUN_ENDED:
        _RUN_ENDED.append(fn)


def run_ended(state) -> None:
    """The session's run has just ended, for every ``on_run_ended`` follower."""
    for fn in list(_RUN_ENDED):
        fn(state)
