"""The lessons: files in ``playground/assets/lessons/``, each step's question asked of the live model.

A lesson file is data (one JSON file a lesson, see docs/lessons.md): its id, its place in the
order, a title, and steps; each step has its text, the view it shows and a question -- a type from
``lesson_questions.QUESTIONS`` with its parameters, and the question's and the reveal's text, in
English and 中文. ``ask`` computes a step's question on a model and prompt; nothing a lesson shows
as an answer is written in its file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from playground import assets
from playground.engine.tokenizer import load_tokenizer, refuse_own_tokenizer
from playground.i18n import normalize_lang
from playground.server.lesson_kit import LessonError, Question
from playground.server.lesson_questions import QUESTIONS, VIEW_TABS
from playground.server.runs import MAX_PROMPT_CHARS

LESSONS_DIR = assets.path("lessons")
TEXT_LANGS = ("en", "zh")
MAX_TOKENS = 256  # a lesson's prompt: long enough for any question, short enough for every head's map


@dataclass(frozen=True)
class Step:
    text: dict[str, str]
    view: str
    question: str
    params: dict
    ask: dict[str, str]
    reveal: dict[str, str]

    @property
    def tab(self) -> str:
        """The tab of the app that owns this step's view."""
        return VIEW_TABS[self.view]


@dataclass(frozen=True)
class Lesson:
    id: str
    order: int
    title: dict[str, str]
    steps: tuple[Step, ...]


def say(text: dict[str, str], lang: str | None) -> str:
    """A lesson text in the page's language (its ``zh`` for 中文)."""
    return text["zh" if normalize_lang(lang) == "zh-CN" else "en"]


def _texts(raw, where: str) -> dict[str, str]:
    if not isinstance(raw, dict) or any(not isinstance(raw.get(lang), str) or not raw[lang] for lang in TEXT_LANGS):
        raise ValueError(f"{where}: needs text in both languages ({', '.join(TEXT_LANGS)})")
    return {lang: raw[lang] for lang in TEXT_LANGS}


def parse_lesson(raw: dict, name: str = "lesson") -> Lesson:
    """A lesson from its file's JSON, every field checked (a ValueError naming the file and field)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not isinstance(raw.get("order"), int):
        raise ValueError(f"{name}: needs an 'id' (text) and an 'order' (a whole number)")
    steps = []
    for i, s in enumerate(raw.get("steps") or [], 1):
        where = f"{name} step {i}"
        q = s.get("question") or {}
        if q.get("type") not in QUESTIONS:
            raise ValueError(f"{where}: question type {q.get('type')!r} is not one of {', '.join(QUESTIONS)}")
        if s.get("view") not in VIEW_TABS:
            raise ValueError(f"{where}: view {s.get('view')!r} is not one of {', '.join(VIEW_TABS)}")
        params = q.get("params") or {}
        if not isinstance(params, dict):
            raise ValueError(f"{where}: question params must be an object")
        steps.append(
            Step(
                text=_texts(s.get("text"), f"{where} text"),
                view=s["view"],
                question=q["type"],
                params=params,
                ask=_texts(q.get("ask"), f"{where} question"),
                reveal=_texts(q.get("reveal"), f"{where} reveal"),
            )
        )
    if not steps:
        raise ValueError(f"{name}: has no steps")
    return Lesson(raw["id"], raw["order"], _texts(raw.get("title"), f"{name} title"), tuple(steps))


@cache
def lessons(folder: Path = LESSONS_DIR) -> tuple[Lesson, ...]:
    """Every lesson file of the folder, in the lessons' order."""
    found = [parse_lesson(json.loads(p.read_text(encoding="utf-8")), p.name) for p in sorted(folder.glob("*.json"))]
    ids = [lesson.id for lesson in found]
    if len(set(ids)) != len(ids):
        raise ValueError(f"two lesson files share an id: {ids}")
    return tuple(sorted(found, key=lambda lesson: lesson.order))


def find(lesson_id, step=1) -> tuple[Lesson, int]:
    """(lesson, step index from 0) for a lesson id and a step counted from 1. No id (None or "") is
    the first lesson; an id that names no lesson is refused by name (``LessonError``); a step out of
    range or unreadable is the nearest one (a shared link that outlived a shorter lesson still opens)."""
    all_lessons = lessons()
    if lesson_id is None or lesson_id == "":
        lesson = all_lessons[0]
    else:
        named = next((x for x in all_lessons if isinstance(lesson_id, str) and x.id == lesson_id), None)
        if named is None:
            raise LessonError(
                "lessons.unknown",
                "There is no lesson {lesson!r}; the lessons are: {ids}.",
                lesson=lesson_id,
                ids=", ".join(x.id for x in all_lessons),
            )
        lesson = named
    try:
        index = int(step) - 1
    except (TypeError, ValueError):
        index = 0
    return lesson, min(max(index, 0), len(lesson.steps) - 1)


def check_choice(question: Question, choice) -> str:
    """``choice`` if it is one of the question's choices (by id), else refused by name."""
    ids = [cid for cid, _ in question.choices]
    if not isinstance(choice, str) or choice not in ids:
        raise LessonError(
            "lessons.unknown_choice",
            "{choice!r} is not one of this question's choices ({choices}).",
            choice=choice,
            choices=", ".join(ids),
        )
    return choice


def ask(step: Step, model, prompt: str) -> tuple[Question, list[str]]:
    """The step's question computed on ``model`` and ``prompt``, with the prompt's token labels. The
    prompt's length in characters is checked before it is tokenized: a 10 MB prompt is refused at once."""
    refuse_own_tokenizer(model, "lessons")
    if prompt is not None and not isinstance(prompt, str):
        raise LessonError("lessons.no_prompt", "Type a prompt in the Generate tab: the lessons look at it.")
    limit = min(MAX_TOKENS, model.cfg.context_length)  # the same figure whichever check refuses
    if prompt is not None and len(prompt) > MAX_PROMPT_CHARS:
        raise LessonError(
            "lessons.long_prompt_chars",
            "The lessons read prompts of up to {limit:,} tokens; this one is {n:,} characters (the Generate tab "
            "takes at most {chars:,}). Shorten it in the Generate tab.",
            limit=limit,
            n=len(prompt),
            chars=MAX_PROMPT_CHARS,
        )
    tok = load_tokenizer()
    ids = tok.encode(prompt or "")
    if not ids:
        raise LessonError("lessons.no_prompt", "Type a prompt in the Generate tab: the lessons look at it.")
    if len(ids) > limit:
        raise LessonError(
            "lessons.long_prompt",
            "The lessons read prompts of up to {limit:,} tokens; this one has {n:,}. Shorten it in the Generate tab.",
            limit=limit,
            n=len(ids),
        )
    labels = [p.display for p in tok.pieces(ids)]
    return QUESTIONS[step.question](model, ids, labels, step.params), labels


def fill(text: dict[str, str], lang: str | None, question: Question, answer: str | None = None) -> str:
    """A question's or reveal's text with the numbers the question computed (``answer``: the
    answer's label in the page's language; its own label by default)."""
    return say(text, lang).format(**question.fields, answer=question.answer_label if answer is None else answer)
