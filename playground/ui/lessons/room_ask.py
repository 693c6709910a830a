"""A question on the teacher's view put to the room: "which head of this layer ...?", chips of the layer's heads.

The teacher's page (its classroom controls) picks a kind of question and asks it about the layer its
Generate heatmap shows; the question is answered on the teacher's last run, from that run's attention on
the teacher's model (``server.view_questions``), and the answer stays on the server until the reveal, as a
lesson's does. The question's text and its chips ("L2 H0", ...) go to the room in each language (the vote's
``text``), so each student's page shows them in its own. Only the teacher's key opens one: the page's
button and the ``/room_ask_view`` endpoint alike.

The teacher may also write the question ("own"; ``/room_ask_own``): its chips are the same heads of the
layer, and nothing computes its answer, so its reveal shows the room's counts alone, in the words the
teacher wrote (the same on every page).
"""

from __future__ import annotations

from playground.errors import UserError
from playground.i18n import LANGS
from playground.server import view_questions
from playground.server.room_checks import MAX_LABEL_CHARS
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


def ask_own(state, code, key, question, layer) -> dict:
    """Open a vote in room ``code`` (``key``: the teacher's) on the teacher's own ``question`` about ``layer``
    of the session's model: the layer's heads are its choices and it has no answer (the reveal shows the
    counts). The vote's id, its question and its choices in each language."""
    ROOMS.check_teacher(code, key, client_address())
    text = " ".join(str(question or "").split())
    if not text:
        raise UserError("room_ask.empty", "Type your question first: the heads of the layer are its choices.")
    if len(text) > MAX_LABEL_CHARS:
        raise UserError(
            "room_ask.too_long",
            "A question is at most {n} characters; this one has {got}.",
            n=MAX_LABEL_CHARS,
            got=len(text),
        )
    model = session_model(state)
    layer = view_questions.asked_layer(model, layer)
    choices = head_chips(layer, [f"h{head}" for head in range(model.cfg.n_heads)])
    shown = {lg: text for lg in LANGS}
    vote = ROOMS.open_vote(code, key, f"own/{layer}", choices, None, client_address(), text=shown)
    return {"vote": vote, "question": shown, "choices": choices}


def ask_room(state, room, kind, layer, own="") -> str:
    """The teacher's button: the question of ``kind`` about ``layer`` (the Generate heatmap's) put to the
    room; ``own`` is the teacher's question when ``kind`` is "own"."""
    lang = lang_of(state)
    room = room or no_room()
    if not room.get("key"):
        return warn(tr(lang, "room_not_teacher"))
    try:
        if kind == "own":
            opened = ask_own(state, room.get("code"), room.get("key"), own, layer)
        else:
            opened = ask_view(state, room.get("code"), room.get("key"), kind, layer)
    except Exception as e:
        return fail(e, lang)
    said = opened["question"][lang if lang in LANGS else "en"]
    return ok(tr(lang, "room_ask_own_opened" if kind == "own" else "room_ask_opened", question=said))
