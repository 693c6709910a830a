"""What a following student's page takes from its room on a poll.

The teacher's tab, prompt and run (``room_follow``), model (``room_drawn``), Inside view (``room_inside``) and
lesson step, and where to scroll (``room_scroll``). The poll itself (the room's version, the vote, the
teacher's tally) is ``room``'s.
"""

from __future__ import annotations

import gradio as gr

from playground.ui.common import fail
from playground.ui.model_switch import took_model
from playground.ui.redraw import page_lock
from playground.ui.results import only

from . import room_drawn, room_follow, room_inside, room_scroll
from . import tab as lessons_tab

# What a page takes from its room again once it is back in step: its tab, its run, its step, the
# teacher's model (if the student built another meanwhile), its Inside view, and the scroll to it.
TAKEN_AGAIN = ("version", "tab", "run_version", "run_id", "drawn", "model_key", "inside_version", "scrolled")


def in_step_again(room: dict, moves: int | None) -> dict:
    """The page's room record after Follow (``moves``: the room's count of the page's Follows and steps
    away): its next poll takes everything from the room again."""
    return {**room, "follow": True, "moves": moves, **dict.fromkeys(TAKEN_AGAIN)}


def settled(room: dict, seen: dict) -> dict:
    """The page's room record when the room says the page moved since the record was written (a poll
    answered after a later Follow or step away, and wrote back what it began with)."""
    if seen.get("following"):
        return in_step_again(room, seen.get("moves"))
    return {**room, "follow": False, "moves": seen.get("moves")}


def take(state, room: dict, published: dict, prompt, lang: str, request: gr.Request | None) -> tuple[dict, dict]:
    """(the page's room record, the poll's outputs that change, by name) for a page that follows the room
    whose published state is ``published``."""
    room, followed = room_follow.follow_published(room, published, prompt, lang)
    try:
        room, modelled = room_drawn.follow_model(room["code"], published, state, room)
    except Exception as e:  # the teacher's model could not be had (memory): said, the page keeps its own
        return room, {**followed, "room_status": fail(e, lang)}
    if "state" in modelled:  # (a redraw of the Model tab that set off before this poll draws it, not its own)
        took_model(request, modelled["state"]["recipe"])
    room, inside = room_inside.follow_inside(room, published, lang)
    if inside.get("room_followed") and "tabs" not in followed:  # (the page is on the tab: no opening to skip)
        del inside["room_followed"]
    room, scroll = room_scroll.scrolled(room, published, followed, inside)
    out = {**modelled, **followed, **inside, **({"room_scroll": scroll} if scroll else {})}
    state = modelled.get("state", state)
    if not published.get("lesson"):
        return room, out
    here = published.get("prompt") if published.get("prompt") is not None else prompt
    # The lesson's step is drawn again when the teacher moves or changes model, or when the prompt changes
    # while the teacher is on the Lessons tab (not per keystroke typed in the Generate tab).
    on_lessons = published.get("tab") in (None, "lessons")
    drawn = [published["lesson"], published.get("step", 0), here if on_lessons else None, published.get("model_key")]
    before = room.get("drawn") or [None] * 4
    if drawn[:2] == before[:2] and drawn[3:] == before[3:] and (not on_lessons or drawn[2] == before[2]):
        return room, out
    pos = {"lesson": published["lesson"], "step": published.get("step", 0)}
    if isinstance(published.get("recipe"), dict):  # the teacher's model: drawn once for the room, sent to each
        present = bool((state or {}).get("present"))
        with page_lock(request):
            try:
                shown = room_drawn.step(room["code"], published, pos, here, lang, present)
            except Exception as e:
                shown = only(lessons_tab.Shown, reveal=fail(e, lang))
            shown = lessons_tab.recorded(request, shown)
    else:  # (a room published through the API names no model: the page's own)
        shown = lessons_tab.show_at(state, pos, here, request)
    choice = shown.choice if isinstance(shown.choice, dict) else {}
    shown = shown._replace(choice={**choice, "visible": False})  # the room's vote stands in for it
    return {**room, "drawn": drawn}, {**out, **shown._asdict(), "prompt": here}
