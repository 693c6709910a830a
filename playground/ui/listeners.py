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
import logging

import gradio as gr
from gradio import utils
from gradio.helpers import special_args

from .skipped_outputs import as_update

log = logging.getLogger(__name__)


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


def combined(state, parts: list[tuple]) -> tuple:
    """(fn, inputs, outputs) of one event that does what ``parts`` ((fn, inputs, outputs) each, ``fn(state,
    *inputs)`` as ``on_change`` registers it) would do as events chained one after another.

    Each event costs the server a few milliseconds and the page a status change whatever it carries, and a
    page's first preferences run every tab's redraw. The parts run in order, each with the values the page
    sent (a part's own outputs do not become a later part's inputs, as they would between events); where two
    write the same component, the page ends with what the later one said, as it would after both events. A
    part that fails leaves its outputs as they were and is logged: the other tabs are still redrawn."""
    inputs, outputs = [state], []
    for _, part_inputs, part_outputs in parts:
        inputs += [c for c in part_inputs if all(c is not k for k in inputs)]
        outputs += [c for c in part_outputs if all(c is not k for k in outputs)]
    where_in = {id(c): i for i, c in enumerate(inputs)}
    where_out = {id(c): i for i, c in enumerate(outputs)}

    def redraw_all(request: gr.Request, *values):
        said: list = [_UNSAID] * len(outputs)
        for fn, part_inputs, part_outputs in parts:
            args = [values[0]] + [values[where_in[id(c)]] for c in part_inputs]
            try:
                args = special_args(fn, args, request)[0]
                answer = fn(*args)
            except Exception:
                log.exception("a redraw after the page's preferences failed: %s", getattr(fn, "__qualname__", fn))
                continue
            answers = [answer] if len(part_outputs) == 1 else list(answer)
            if len(answers) != len(part_outputs):
                raise ValueError(f"{fn.__qualname__} gave {len(answers)} values for {len(part_outputs)} outputs")
            for component, value in zip(part_outputs, answers):
                i = where_out[id(component)]
                said[i] = _after(said[i], as_update(value))
        return [gr.skip() if value is _UNSAID else value for value in said]

    vars(redraw_all)["parts"] = tuple(fn for fn, _, _ in parts)  # (what it runs, for whoever inspects the app)
    return redraw_all, inputs, outputs


_UNSAID = object()


def _after(before, value):
    """What a component shows after it was given ``before`` and then ``value`` (each a value or an update)."""
    if before is _UNSAID or not utils.is_prop_update(value):
        return value
    if utils.is_prop_update(before):
        return {**before, **value}
    return {"value": before, **value}


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
