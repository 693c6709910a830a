"""What a classroom room accepts from its teacher: the published place, the run, a vote's choices and question.

Each is checked for its kind and size before the room stores it (so a room's memory stays bounded:
``server.rooms``). A refusal is a ``RoomError`` naming the field and the limit. Pure Python.
"""

from __future__ import annotations

import json
from typing import Any

from playground.errors import UserError

STATE_FIELDS = {"tab": 40, "lesson": 80, "step": None, "model": 400, "prompt": 20_000, "view": None}
MAX_VIEW_FIELDS = 20
MAX_CHOICES = (
    64  # one per head of a layer (a question on the view: server.view_questions): GPT-2 XL has 25, Llama 2 70B 64
)
MAX_LABEL_CHARS = 200
MAX_RUN_CHARS = 1_500_000  # a published run: its chips, status and figure (a 64-token map is about 150 k)
# None: within MAX_RUN_CHARS together. The status line and the figure in English and in Chinese
# (``status_zh``, ``figure_zh``): each follower's page shows them in its own language, not the teacher's.
RUN_FIELDS = {"id": 80, "chips": None, "status": 4_000, "status_zh": 4_000, "figure": None, "figure_zh": None}


class RoomError(UserError):
    """A room refused a request: the message says what to do."""


def check_state(state: Any) -> dict:
    """The fields of a published state, each checked for its kind and size."""
    if not isinstance(state, dict):
        raise RoomError("room.state_not_dict", "A room's state is a dict of {fields}.", fields=list(STATE_FIELDS))
    unknown = sorted(str(k) for k in state if k not in STATE_FIELDS)
    if unknown:
        raise RoomError("room.state_unknown", "A room's state has no field {names}.", names=unknown)
    clean: dict = {}
    for name, value in state.items():
        limit = STATE_FIELDS[name]
        if name == "step":
            ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1000
        elif name == "view":
            ok = (
                isinstance(value, dict)
                and len(value) <= MAX_VIEW_FIELDS
                and all(
                    isinstance(k, str)
                    and len(k) <= 40
                    and (v is None or isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= 200))
                    for k, v in value.items()
                )
            )
        else:
            ok = value is None or (isinstance(value, str) and len(value) <= (limit or 0))
        if not ok:
            raise RoomError("room.state_bad_field", "The room's {name} cannot be {value!r}.", name=name, value=value)
        clean[name] = dict(value) if isinstance(value, dict) else value
    return clean


def check_run(run: Any) -> dict:
    """A published run's fields, each a string of its size; the figure left out when the whole would pass
    ``MAX_RUN_CHARS`` (the chips and status alone may not)."""
    ok = isinstance(run, dict) and set(run) <= set(RUN_FIELDS) and isinstance(run.get("id"), str)
    ok = ok and all(
        v is None or (isinstance(v, str) and len(v) <= (RUN_FIELDS[k] or MAX_RUN_CHARS)) for k, v in run.items()
    )
    if not ok:
        raise RoomError(
            "room.bad_run",
            "A room's run is a dict of {fields} (strings) within {n} characters.",
            fields=list(RUN_FIELDS),
            n=MAX_RUN_CHARS,
        )
    clean = {k: run.get(k) for k in RUN_FIELDS}
    if sum(len(v) for v in clean.values() if v) > MAX_RUN_CHARS:  # Chinese pages then show the English figure
        clean["figure_zh"] = None
    if sum(len(v) for v in clean.values() if v) > MAX_RUN_CHARS:
        clean["figure"], clean["figure_left_out"] = None, True
        if sum(len(v) for v in clean.values() if isinstance(v, str)) > MAX_RUN_CHARS:
            raise RoomError(
                "room.bad_run",
                "A room's run is a dict of {fields} (strings) within {n} characters.",
                fields=list(RUN_FIELDS),
                n=MAX_RUN_CHARS,
            )
    return clean


INSIDE_FIELDS = ("view", "sub", "id", "selection", "out", "out_zh")


def check_inside(inside: Any) -> dict:
    """A published Inside view: its key and sub-tab, its run's id, its selection (scalars by name) and
    its outputs in each language (strings, or a table's headers and rows), within ``MAX_RUN_CHARS``."""
    ok = isinstance(inside, dict) and set(inside) <= set(INSIDE_FIELDS)
    ok = ok and all(isinstance(inside.get(k), str) and len(inside[k]) <= 80 for k in ("view", "sub", "id"))
    selection = inside.get("selection") if ok else None
    if not isinstance(selection, dict):
        selection, ok = {}, False
    ok = ok and len(selection) <= MAX_VIEW_FIELDS
    ok = ok and all(
        isinstance(k, str)
        and (v is None or isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) < 2000))
        for k, v in selection.items()
    )
    ok = ok and all(isinstance(inside.get(k), dict) for k in ("out", "out_zh"))
    try:
        size = len(json.dumps(inside)) if ok else 0
    except (TypeError, ValueError):
        ok = False
    if not ok or size > MAX_RUN_CHARS:
        raise RoomError(
            "room.bad_inside",
            "A room's Inside view is a dict of {fields} within {n} characters.",
            fields=list(INSIDE_FIELDS),
            n=MAX_RUN_CHARS,
        )
    return json.loads(json.dumps(inside))  # (a copy of plain data: nothing of the caller's kept)


def label_ok(label) -> bool:
    """A label: a string, or a {language: string} dict of up to 4 languages, each at most MAX_LABEL_CHARS."""
    if isinstance(label, str):
        return len(label) <= MAX_LABEL_CHARS
    return (
        isinstance(label, dict)
        and len(label) <= 4
        and all(
            isinstance(k, str) and len(k) <= 10 and isinstance(v, str) and len(v) <= MAX_LABEL_CHARS
            for k, v in label.items()
        )
    )


def check_text(text: Any) -> dict | str | None:
    """A vote's question as its pages show it (a label: a string or one per language), or None: a
    lesson's vote, whose question each page reads from the lesson."""
    if text is None:
        return None
    if not label_ok(text) or not text:
        raise RoomError(
            "room.bad_text",
            "A vote's question is a string or a {{language: string}} dict of up to 4 languages, each at most {n} "
            "characters.",
            n=MAX_LABEL_CHARS,
        )
    return dict(text) if isinstance(text, dict) else text


def check_choices(choices: Any) -> list[list]:
    """[[id, label], ...]: ids short strings, labels a string or a {language: string} dict."""
    ok = isinstance(choices, (list, tuple)) and 2 <= len(choices) <= MAX_CHOICES
    clean = []
    for pair in choices if ok else []:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[0], str) and len(pair[0]) <= 80):
            ok = False
            break
        if not label_ok(pair[1]):
            ok = False
            break
        clean.append([pair[0], dict(pair[1]) if isinstance(pair[1], dict) else pair[1]])
    if not ok or len({cid for cid, _ in clean}) != len(clean):
        raise RoomError(
            "room.bad_choices", "A vote needs 2 to {n} distinct choices as [id, label] pairs.", n=MAX_CHOICES
        )
    return clean
