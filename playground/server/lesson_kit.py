"""What every lesson question is made of: a ``Question``, the refusal it raises, helpers to pick choices.

A ``Question`` holds its choices, answer and view, the numbers its texts quote, and where its view
lives in the full tab."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from playground.errors import UserError

MAX_CHOICES = 4


@dataclass
class Question:
    """``choices``: (id, label) pairs; ``words``: the labels are interface words (the UI says them
    through i18n key ``lesson_choice_<id>``); ``fields`` fill the question's text and its reveal."""

    choices: list[tuple[str, str]]
    answer: str
    view: dict[str, Any]
    fields: dict[str, Any] = field(default_factory=dict)
    words: bool = False
    # where the view lives in the full tab (ui.show_me opens it drawn): {"tab": ..., ...}
    target: dict[str, Any] = field(default_factory=dict)
    # choices the UI says through i18n with numbers: id -> (key, fields)
    said: dict[str, tuple[str, dict]] = field(default_factory=dict)
    # the i18n key of the reveal's "the answer from ...": the model now, or a recorded run's
    answer_from: str = "lesson_answer"

    @property
    def answer_label(self) -> str:
        return dict(self.choices)[self.answer]


class LessonError(UserError):
    """A lesson's question cannot be asked of this model and prompt."""


def need_tokens(ids, n: int) -> None:
    if len(ids) < n:
        raise LessonError(
            "lessons.short_prompt",
            "This question needs a prompt of at least {n} tokens (it has {got}); type a longer one in the Generate tab.",
            n=n,
            got=len(ids),
        )


def numbers(answer: int | float, others, fmt: str = "{:,}") -> tuple[list[tuple[str, str]], str]:
    """Number choices, smallest first (the order says nothing about the answer), at most MAX_CHOICES."""
    labels = {fmt.format(answer): answer}
    for value in others:
        if len(labels) >= MAX_CHOICES:
            break
        if value > 0:
            labels.setdefault(fmt.format(value), value)
    ordered = sorted(labels.items(), key=lambda kv: kv[1])
    return [(label, label) for label, _ in ordered], fmt.format(answer)


def percent(value: float) -> str:
    """A share as a whole percentage that can be negative or above 100% ("-0%" reads as "0%")."""
    text = f"{value:.0%}"
    return "0%" if text == "-0%" else text


def millions(n: int) -> str:
    return f"{n / 1e6:.1f}M"


def pick(ids_in_order: list[int], answer: int, score) -> list[int]:
    """The answer and the highest-scoring others, up to MAX_CHOICES, in their natural order."""
    others = sorted((i for i in ids_in_order if i != answer), key=lambda i: -score(i))
    chosen = {answer, *others[: MAX_CHOICES - 1]}
    return [i for i in ids_in_order if i in chosen]
