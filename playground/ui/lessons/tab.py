"""The Lessons tab's handlers: show a step on the session's model and prompt, reveal the answer.

A position in the lessons is ``{"lesson": id, "step": index from 0}``. Every handler asks the
step's question of the model and prompt as they are at that moment (``server.lessons.ask``), so
a reveal never quotes an answer computed for another model or prompt.
"""

from __future__ import annotations

import html
from dataclasses import replace

import gradio as gr
import plotly.graph_objects as go

from playground.server import lessons
from playground.server.lesson_kit import LessonError, Question
from playground.ui import redraw as drawn
from playground.ui.common import dress, fail, lang_of, md_literal, page_prefs, session_model, tr
from playground.ui.results import only, result

from . import room_lead
from . import views as lessons_views

BLANK = go.Figure(layout={"template": "none"})  # (a bare figure: no template to send with it)

Shown = result(
    "Shown", "lesson_pos", "lesson_pick", "progress", "text", "plot", "tokens_html", "question", "choice", "reveal"
)
Revealed = result("Revealed", "reveal", "plot", "tokens_html")  # a guess: the verdict, and the view with its answer


def first_position() -> dict:
    return {"lesson": lessons.lessons()[0].id, "step": 0}


def locate(pos) -> tuple[lessons.Lesson, int]:
    """(lesson, step index) of a position; an unreadable step is the nearest one, an unknown lesson
    is refused by name (``LessonError``)."""
    pos = pos if isinstance(pos, dict) else first_position()
    step = pos.get("step", 0)
    return lessons.find(pos.get("lesson"), step + 1 if isinstance(step, int) else 1)


def lesson_choices(lang: str) -> list[tuple[str, str]]:
    return [(f"{x.order} · {lessons.say(x.title, lang)}", x.id) for x in lessons.lessons()]


def choice_label(question: Question, choice_id: str, lang: str) -> str:
    if choice_id in question.said:
        key, fields = question.said[choice_id]
        return tr(lang, key, **fields)
    label = dict(question.choices).get(choice_id, str(choice_id))
    return tr(lang, f"lesson_choice_{choice_id}") if question.words else label


def asking_html(question: Question) -> str:
    """What the reveal's place holds before the guess: nothing to see, and which of the page header's
    figures the question asks for (the page's CSS masks them until the guess)."""
    hidden = " ".join(question.view.get("header", []))
    return f"<div class='pg-lesson-asking' data-hide='{html.escape(hidden)}'></div>"


def no_figure():
    """The plot on a step without a figure: kept in the page, hidden, holding a blank figure (none of an
    earlier step's numbers). Hidden rather than taken out, so the page loads plotly.js with the page
    (``layout``), not when the first figure is waited for: 5-6 s on a loaded 2-core machine."""
    return gr.update(value=BLANK, visible="hidden")


def view_updates(question: Question, lang: str, present: bool, revealed: bool):
    """(plot, tokens_html) updates: the step's view, its answer masked or drawn."""
    view = question.view
    figure = lessons_views.figure(view, question, lang, revealed)
    plot = gr.update(value=dress(figure, lang, present), visible=True) if figure is not None else no_figure()
    if view["kind"] != "tokens":
        return plot, gr.update(visible=False)
    return plot, gr.update(value=lessons_views.tokens_html(view, revealed), visible=True)


def question_markdown(step, question: Question, lang: str) -> str:
    """The step's question, bold, as the Markdown above the choices. The lesson's own words are Markdown; the
    words it quotes (a token of the prompt or of the model's output, a word, a name) are shown as they are
    (``md_literal``): a token "**" or "<b>" is text to read, not formatting. Numbers go in unchanged, so a
    lesson's format spec (``{n:,}``) still applies to them."""
    quoted = {k: md_literal(v) if isinstance(v, str) else v for k, v in question.fields.items()}
    return f"**{lessons.fill(step.ask, lang, replace(question, fields=quoted), '')}**"


def reveal_html(question: Question, step, choice_id: str, lang: str) -> str:
    right = choice_id == question.answer
    answer = choice_label(question, question.answer, lang)
    verdict = (
        tr(lang, "lesson_right") if right else tr(lang, "lesson_wrong", choice=choice_label(question, choice_id, lang))
    )
    detail = lessons.fill(step.reveal, lang, question, answer)
    return (
        f"<div class='pg-lesson-reveal {'pg-right' if right else 'pg-wrong'}' data-right='{str(right).lower()}'"
        f" data-answer='{html.escape(question.answer)}'><b>{html.escape(verdict)}</b> "
        f"{html.escape(tr(lang, question.answer_from, answer=answer))}<br>{html.escape(detail)}</div>"
    )


def show(state, pos, prompt, choice=None, keep_pick: bool = False, model=None) -> Shown:
    """A step: its text and view, the question with fresh choices, and (``choice`` given) the reveal;
    asked of ``model`` (a room's teacher's, drawn once for its followers) or else the session's.

    ``keep_pick``: a redraw of the same step in another language or size (the page's preferences,
    applied while it opens). Its choices keep their ids, so it leaves the radio's value and, with no
    pick in its inputs, the reveal as the page has them: a pick made while the redraw was computed
    stays (the inputs were read before it)."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    try:
        lesson, index = locate(pos)
    except LessonError as e:  # an API caller's unknown lesson id: said, the page stays where it is
        return only(Shown, reveal=fail(e, lang))
    step = lesson.steps[index]
    all_lessons = lessons.lessons()
    progress = tr(
        lang,
        "lesson_progress",
        lesson=all_lessons.index(lesson) + 1,
        lessons=len(all_lessons),
        step=index + 1,
        steps=len(lesson.steps),
    )
    base = dict(
        lesson_pos={"lesson": lesson.id, "step": index},
        lesson_pick=gr.update(value=lesson.id, choices=lesson_choices(lang)),
        progress=f"**{lessons.say(lesson.title, lang)}** · {progress}",
        text=lessons.say(step.text, lang),
    )
    try:
        question, labels = lessons.ask(step, model if model is not None else session_model(state), prompt)
    except Exception as e:  # a prompt too short for the question, a released model: said, never a crash
        return Shown(
            **base,
            plot=no_figure(),
            tokens_html=gr.update(value="", visible=False),
            question="",
            choice=gr.update(choices=[], value=None),
            reveal=fail(e, lang),
        )
    chips = [(choice_label(question, cid, lang), cid) for cid, _ in question.choices]
    picked = choice if choice in dict(question.choices) else None
    plot, tokens = view_updates(question, lang, present, revealed=picked is not None)
    if keep_pick and picked is None:  # the page's own pick (if any) keeps its drawn answer
        plot, tokens, reveal = gr.skip(), gr.skip(), gr.skip()
    else:
        reveal = reveal_html(question, step, picked, lang) if picked is not None else asking_html(question)
    return Shown(
        **base,
        plot=plot,
        tokens_html=tokens,
        question=question_markdown(step, question, lang),
        choice=gr.update(choices=chips, label=tr(lang, "lesson_guess"))
        if keep_pick
        else gr.update(choices=chips, value=picked, label=tr(lang, "lesson_guess")),
        reveal=reveal,
    )


# A page's events run side by side, and as it opens three of them draw its step: the link's (the
# page's load), the Lessons tab's select (Gradio selects the first tab as it mounts it) and the
# preferences' redraw. Each reads the page's position as it sets off, so one that read the first
# step could finish after the link's and draw the first lesson over the linked one (and Show me then
# opens the first step's tab). So the page's drawings of its step take the page's lock one at a
# time, each records the step it drew (``STEP``), and a redraw draws the recorded step.
STEP = "lesson-step"

# The page's last answered pick and its step. A redraw reads the radio as it sets off; a pick answered
# since (the page applies its saved preferences a second after it opens, when a quick hand may have
# answered twice) is newer, and the redraw's reveal would land over the answer's and show the old one.
PICK = "lesson-pick"


def latest_pick(request, at, given):
    """The pick a redraw of step ``at`` reveals: the page's last answered one on that step, else ``given``."""
    kept = drawn.noted(request, PICK)
    return kept["choice"] if kept is not None and kept["at"] == at else given


def position(request, given) -> dict:
    """The step this page last drew, else ``given`` (the page's position as the event set off)."""
    return drawn.noted(request, STEP, given)


def recorded(request, shown: Shown) -> Shown:
    """``shown``, its step recorded as the page's (a refusal, which draws no step, records nothing), and
    the radio's value it sets as the page's pick (a step drawn anew starts unpicked)."""
    if isinstance(shown.lesson_pos, dict):
        drawn.note(request, STEP, shown.lesson_pos)
        if isinstance(shown.choice, dict) and "value" in shown.choice:
            drawn.note(request, PICK, {"at": shown.lesson_pos, "choice": shown.choice["value"]})
    return shown


def show_here(state, pos, prompt, choice=None, request: gr.Request = None) -> Shown:
    """The Lessons tab selected: the step the page last drew, on the model and prompt there now (the
    select Gradio sends as it mounts the tab, before the page has drawn a step, leaves the page to
    its load)."""
    with drawn.page_lock(request):
        if request is not None and position(request, None) is None:
            return only(Shown)
        return recorded(request, show(state, position(request, pos), prompt, choice))


def redraw(state, pos, prompt, choice=None, request: gr.Request = None) -> Shown:
    """The step again after the page's language or presenter mode changed (``show`` keeping the pick)."""
    with drawn.page_lock(request):
        if request is not None and position(request, None) is None:
            return only(Shown)  # the page's load has not drawn its step yet: it draws it in these prefs
        at = position(request, pos)
        pick = latest_pick(request, at, choice)
        shown = recorded(request, show(state, at, prompt, pick, keep_pick=True))
        drawn.note(request, REDRAWN, (shown.lesson_pos, pick))
        return shown


# The step and pick a language redraw drew, for the check chained after its answer has reached the page.
REDRAWN = "lesson-redrawn"


def redrawn_again(state, pos, prompt, choice=None, request: gr.Request = None) -> Shown:
    """Chained after ``redraw``'s answer has reached the page: the page's step drawn again when the page
    drew another step or answered another pick since that redraw read them (a classroom follower's poll
    taking the teacher's step, a quick second guess), else nothing. The lock orders when they read the
    page, not in which order their answers reach it: the redraw's, of the step or pick before, could
    land after the other's and stay."""
    with drawn.page_lock(request):
        at = position(request, None)
        if request is None or drawn.noted(request, REDRAWN) == (at, latest_pick(request, at, None)):
            return only(Shown)
    return redraw(state, pos, prompt, choice, request)


def next_step(state, pos, prompt, request: gr.Request = None) -> Shown:
    """Next: the step after the one the page shows."""
    with drawn.page_lock(request):
        return recorded(request, move(state, position(request, pos), prompt, +1))


def step_back(state, pos, prompt, request: gr.Request = None) -> Shown:
    """Back: the step before the one the page shows."""
    with drawn.page_lock(request):
        return recorded(request, move(state, position(request, pos), prompt, -1))


def show_at(state, pos, prompt, request: gr.Request = None) -> Shown:
    """Step ``pos`` drawn as the page's step (a lesson picked, a room's step followed)."""
    with drawn.page_lock(request):
        return recorded(request, show(state, pos, prompt))


def open_lesson(state, lesson_id, prompt, request: gr.Request = None) -> Shown:
    """A lesson picked from the list: its first step."""
    pos = {"lesson": lesson_id, "step": 0}
    try:
        locate(pos)
        room_lead.moved(state, pos, prompt)  # (a teacher's: its room follows at once)
    except LessonError:  # (an unknown lesson: ``show`` says so)
        pass
    return show_at(state, pos, prompt, request)


def move(state, pos, prompt, delta: int) -> Shown:
    """Next (+1) or Back (−1): across the end of a lesson into the next or previous one."""
    try:
        lesson, index = locate(pos)
    except LessonError as e:
        return only(Shown, reveal=fail(e, lang_of(state)))
    all_lessons = list(lessons.lessons())
    at = all_lessons.index(lesson)
    index += delta
    if index >= len(lesson.steps) and at + 1 < len(all_lessons):
        lesson, index = all_lessons[at + 1], 0
    elif index < 0 and at > 0:
        lesson = all_lessons[at - 1]
        index = len(lesson.steps) - 1
    index = min(max(index, 0), len(lesson.steps) - 1)
    room_lead.moved(state, {"lesson": lesson.id, "step": index}, prompt)  # (a teacher's: its room follows at once)
    return show(state, {"lesson": lesson.id, "step": index}, prompt)


def answer(state, pos, prompt, choice, request: gr.Request = None) -> Revealed:
    """A choice was clicked: the answer computed now, whether the choice was it, and the view with the
    answer drawn on it (a choice that is not one of the question's is refused by name)."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    # Under the page's lock, as its redraws are: the pick is noted, and a redraw that reads it next
    # lands after this answer, not over it.
    with drawn.page_lock(request):
        try:
            at = position(request, pos)
            lesson, index = locate(at)
            step = lesson.steps[index]
            question, _ = lessons.ask(step, session_model(state), prompt)
            if choice is None:
                return only(Revealed, reveal=asking_html(question))
            verdict = reveal_html(question, step, lessons.check_choice(question, choice), lang)
            drawn.note(request, PICK, {"at": at, "choice": choice})
            return Revealed(verdict, *view_updates(question, lang, present, revealed=True))
        except Exception as e:
            return only(Revealed, reveal=fail(e, lang))


def open_from_link(state, prompt, request: gr.Request = None):
    """Page load: ``?lesson=attention&step=3`` opens that step (and the Lessons tab). Without one, a page
    that has drawn a step already keeps it: a room's poll (``?room=CODE``) drew the teacher's step while
    this load waited its turn."""
    params = dict(request.query_params) if request is not None else {}
    lang, present = page_prefs(request)
    state = {**(state or {}), "lang": lang, "present": present}
    lesson_id = params.get("lesson")
    try:
        lesson, index = lessons.find(lesson_id, params.get("step", 1))
        refused = None
    except LessonError as e:  # a link naming no lesson: the first one opens, and the link's id is said
        lesson, index, refused = lessons.lessons()[0], 0, e
    with drawn.page_lock(request):
        if not lesson_id and request is not None and position(request, None) is not None:
            return (*only(Shown), gr.skip())
        shown = recorded(request, show(state, {"lesson": lesson.id, "step": index}, prompt))
    if refused is not None:
        shown = shown._replace(reveal=fail(refused, lang))
    return (*shown, gr.Tabs(selected="lessons") if lesson_id else gr.skip())
