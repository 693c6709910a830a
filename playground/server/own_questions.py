"""A question the teacher writes for a classroom vote: its words and the choices typed with it, checked once.

The teacher's page and ``/room_ask_own`` send the question and, optionally, its choices as text, one choice
a line (a choice may then hold a comma or a semicolon: "Yes, the name again"). Lines left blank are skipped,
so a last Enter or a blank line between choices costs nothing. Typed choices number 2 to ``MAX_OWN_CHOICES``,
each at most ``MAX_CHOICE_CHARS`` and said once (letter case and spacing aside: "Paris" and "paris " would be
two chips no student can tell apart). With no choice typed the vote's chips are the heads of the layer the
teacher's heatmap shows (``ui.lessons.room_ask``). Each refusal names the choice and the rule it breaks.
Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.errors import UserError
from playground.server.room_checks import MAX_LABEL_CHARS

# A poll's choices stand as radio options on a student's laptop and as bars on the projector: a handful of
# short lines reads at a glance (8 also fits a lesson's longest list of chips).
MAX_OWN_CHOICES = 8
MAX_CHOICE_CHARS = 80
# How a choice is quoted in a refusal: enough to find it in the box.
QUOTED_CHARS = 40


class OwnQuestionError(UserError):
    """The teacher's question or its typed choices cannot be put to the room: the message says which and why."""


@dataclass(frozen=True)
class OwnQuestion:
    """The teacher's question as the pages show it, and its typed choices (empty: the layer's heads)."""

    text: str
    choices: tuple[str, ...] = ()


def one_line(value) -> str:
    """``value`` as one line: spaces and line breaks inside collapsed to single spaces, none at the ends."""
    return " ".join(str(value or "").split())


def question_text(question) -> str:
    """The teacher's question, on one line, within ``MAX_LABEL_CHARS``."""
    text = one_line(question)
    if not text:
        raise OwnQuestionError("room_ask.empty", "Type your question first: the room votes on your words.")
    if len(text) > MAX_LABEL_CHARS:
        raise OwnQuestionError(
            "room_ask.too_long",
            "A question is at most {n} characters; this one has {got}.",
            n=MAX_LABEL_CHARS,
            got=len(text),
        )
    return text


def typed_choices(typed) -> tuple[str, ...]:
    """The choices in ``typed`` (one a line; blank lines skipped), each on one line; () when none is typed."""
    if typed is None:
        return ()
    if not isinstance(typed, str):
        raise OwnQuestionError(
            "room_ask.choices_not_text",
            "The choices are text, one choice a line; got {kind}.",
            kind=type(typed).__name__,
        )
    choices = tuple(line for line in (one_line(raw) for raw in typed.splitlines()) if line)
    if not choices:
        return ()
    if len(choices) < 2:
        raise OwnQuestionError(
            "room_ask.one_choice",
            "Type at least 2 choices, each on its own line (the box holds one: “{choice}”), or empty the box to "
            "vote on the layer's heads.",
            choice=quoted(choices[0]),
        )
    if len(choices) > MAX_OWN_CHOICES:
        raise OwnQuestionError(
            "room_ask.too_many_choices",
            "A vote takes at most {cap} choices; the box has {n} lines with words.",
            cap=MAX_OWN_CHOICES,
            n=len(choices),
        )
    seen: dict[str, int] = {}
    for number, choice in enumerate(choices, 1):
        if len(choice) > MAX_CHOICE_CHARS:
            raise OwnQuestionError(
                "room_ask.choice_too_long",
                "Choice {number} (“{choice}”) has {got} characters; a choice is at most {n}.",
                number=number,
                choice=quoted(choice),
                got=len(choice),
                n=MAX_CHOICE_CHARS,
            )
        first = seen.setdefault(choice.casefold(), number)
        if first != number:
            raise OwnQuestionError(
                "room_ask.same_choice",
                "Choice {number} (“{choice}”) is choice {first} again: each choice once (letter case aside).",
                number=number,
                choice=quoted(choice),
                first=first,
            )
    return choices


def own_question(question, typed=None) -> OwnQuestion:
    """The teacher's ``question`` and the choices ``typed`` with it, checked (the question first)."""
    return OwnQuestion(question_text(question), typed_choices(typed))


def quoted(choice: str) -> str:
    return choice if len(choice) <= QUOTED_CHARS else choice[: QUOTED_CHARS - 1] + "…"
