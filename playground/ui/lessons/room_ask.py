"""A question on the teacher's view put to the room: "which head of this layer ...?", or the teacher's own.

The teacher's page (its classroom controls) picks a kind of question and asks it about the layer its
Generate heatmap shows; the question is answered on the teacher's last run, from that run's attention on
the teacher's model (``server.view_questions``), and the answer stays on the server until the reveal, as a
lesson's does. The question's text and its chips ("L2 H0", ...) go to the room in each language (the vote's
``text``), so each student's page shows them in its own. Only the teacher's key opens one: the page's
button and the ``/room_ask_view`` endpoint alike.

The teacher may also write the question ("own"; ``/room_ask_own``) and, optionally, its choices, one a line
(``server.own_questions`` checks both); with none typed its chips are the same heads of the layer. Nothing
computes its answer, so its reveal shows the room's counts alone, in the words the teacher wrote (the same
on every page, choices too).
"""

from __future__ import annotations

from playground.i18n import LANGS
from playground.server import own_questions, view_questions
from playground.server.rooms import ROOMS
from playground.ui.common import client_address, fail, lang_of, ok, session_model, session_run, tr, warn

from .room_layout import no_room


def head_chips(layer: int, ids: list[str]) -> list[list]:
    """The vote's choices for the heads of ``layer`` (``ids``: one per head, in order): [id, its chip
    ("L2 H0") in each language]."""
    return [
        [cid, {lg: tr(lg, "room_ask_chip", layer=layer, head=head) for lg in LANGS}] for head, cid in enumerate(ids)
    ]


def ask_view(state, code, key, kind, layer) -> dict:
    """Open a vote in room ``code`` (``key``: the teacher's) on ``kind`` about ``layer`` of the session's
    last run: the vote's id, its question and its choices in each language."""
    ROOMS.check_teacher(code, key, client_address())  # first: a wrong key costs no model work
    run = session_run(state)
    model = session_model(state) if run is not None else None
    asked = view_questions.ask(model, run, kind, layer)
    text = {lg: tr(lg, f"room_ask_q_{asked.kind}", layer=asked.layer) for lg in LANGS}
    choices = head_chips(asked.layer, asked.choices)
    question = f"view/{asked.kind}/{asked.layer}"
    vote = ROOMS.open_vote(code, key, question, choices, asked.answer, client_address(), text=text)
    return {"vote": vote, "question": text, "choices": choices}


def typed_chips(choices: tuple[str, ...]) -> list[list]:
    """The vote's choices as the teacher typed them: [id ("c1", ...), the same words in each language]."""
    return [[f"c{number}", {lg: choice for lg in LANGS}] for number, choice in enumerate(choices, 1)]


def ask_own(state, code, key, question, layer, typed=None) -> dict:
    """Open a vote in room ``code`` (``key``: the teacher's) on the teacher's own ``question``: its choices
    the ones ``typed`` (one a line), else the heads of ``layer`` of the session's model; it has no answer
    (the reveal shows the counts). The vote's id, its question and its choices in each language."""
    ROOMS.check_teacher(code, key, client_address())
    asked = own_questions.own_question(question, typed)
    if asked.choices:  # (the layer is not asked about: any model, or none yet, takes typed choices)
        choices, about = typed_chips(asked.choices), "own/typed"
    else:
        model = session_model(state)
        layer = view_questions.asked_layer(model, layer)
        choices, about = head_chips(layer, [f"h{head}" for head in range(model.cfg.n_heads)]), f"own/{layer}"
    shown = {lg: asked.text for lg in LANGS}
    vote = ROOMS.open_vote(code, key, about, choices, None, client_address(), text=shown)
    return {"vote": vote, "question": shown, "choices": choices}


def ask_room(state, room, kind, layer, own="", typed="") -> str:
    """The teacher's button: the question of ``kind`` about ``layer`` (the Generate heatmap's) put to the
    room; ``own`` is the teacher's question when ``kind`` is "own", ``typed`` its choices (one a line; none:
    the layer's heads)."""
    lang = lang_of(state)
    room = room or no_room()
    if not room.get("key"):
        return warn(tr(lang, "room_not_teacher"))
    try:
        if kind == "own":
            opened = ask_own(state, room.get("code"), room.get("key"), own, layer, typed)
        else:
            opened = ask_view(state, room.get("code"), room.get("key"), kind, layer)
    except Exception as e:
        return fail(e, lang)
    said = opened["question"][lang if lang in LANGS else "en"]
    if kind != "own":
        return ok(tr(lang, "room_ask_opened", question=said))
    if own_questions.one_line(typed):  # (the vote opened, so what the teacher typed are its choices)
        return ok(tr(lang, "room_ask_typed_opened", question=said, n=len(opened["choices"])))
    return ok(tr(lang, "room_ask_own_opened", question=said))
