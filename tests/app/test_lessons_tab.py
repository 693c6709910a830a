"""The Lessons tab's handlers as plain functions: a step shown on the session's model and prompt, the
reveal after a choice, Next/Back across lessons, links to a step, and answers that follow the model.
The question line is Markdown: the tokens and words it quotes show as they are, never as formatting."""

import html
import json
import re
from types import SimpleNamespace

from markdown_it import MarkdownIt

from playground import PRESETS
from playground.server import lessons
from playground.server.lesson_kit import Question
from playground.server.model_cache import CACHE
from playground.server.recipes import random_recipe
from playground.ui import show_me
from playground.ui.common import md_literal
from playground.ui.lessons import tab as lessons_tab
from tests.lesson_figures import library_answer

PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks? It is the east"


def state_of(seed=0, lang="en"):
    return {"recipe": random_recipe(PRESETS["nano"], seed=seed), "run_id": None, "lang": lang}


def revealed(html):
    """(right?, answer id) from the reveal's HTML (or from an answer's ``Revealed``)."""
    html = getattr(html, "reveal", html)
    right = re.search(r"data-right='(true|false)'", html).group(1) == "true"
    return right, re.search(r"data-answer='([^']*)'", html).group(1)


def test_every_step_shows_its_question_and_reveals_the_librarys_answer_in_both_languages():
    state = state_of()
    model = CACHE.get(state["recipe"])
    for lang in ("en", "zh-CN"):
        state["lang"] = lang
        for lesson in lessons.lessons():
            for index, step in enumerate(lesson.steps):
                pos = {"lesson": lesson.id, "step": index}
                shown = lessons_tab.show(state, pos, PROMPT)
                assert shown.lesson_pos == pos and "<div class='pg-msg" not in shown.reveal
                values = [v for _, v in shown.choice["choices"]]
                question, _ = lessons.ask(step, model, PROMPT)
                expected = library_answer(step, model, PROMPT, question)
                wrong = next(v for v in values if v != expected)
                assert revealed(lessons_tab.answer(state, pos, PROMPT, wrong)) == (False, expected)
                assert revealed(lessons_tab.answer(state, pos, PROMPT, expected)) == (True, expected)
                if lang == "zh-CN":  # the step's own words are Chinese
                    assert re.search(r"[\u4e00-\u9fff]", shown.text + shown.question + shown.progress)


def test_next_and_back_cross_lessons_and_the_full_tab_link_names_the_views_tab():
    state, first = state_of(), lessons.lessons()[0]
    last_step = {"lesson": first.id, "step": len(first.steps) - 1}
    assert lessons_tab.move(state, last_step, PROMPT, +1).lesson_pos == {"lesson": lessons.lessons()[1].id, "step": 0}
    assert lessons_tab.move(state, {"lesson": lessons.lessons()[1].id, "step": 0}, PROMPT, -1).lesson_pos == last_step
    assert lessons_tab.move(state, {"lesson": first.id, "step": 0}, PROMPT, -1).lesson_pos == {
        "lesson": first.id,
        "step": 0,
    }
    assert show_me.prepare(state, {"lesson": "attention", "step": 0}, PROMPT).target["tab"] == "generate"
    assert show_me.prepare(state, {"lesson": "tokens", "step": 0}, PROMPT).target["tab"] == "tokenizer"
    # the page's script reads where to land from the anchor: the tab, the Inside sub-tab and the view's element
    spot = json.loads(show_me.prepare(state, {"lesson": "gpt", "step": 2}, PROMPT).anchor)
    assert spot == {"tab": "inside", "sub": "inside-lens", "id": "pg-lens"}
    spot = json.loads(show_me.prepare(state, {"lesson": "training", "step": 0}, PROMPT).anchor)
    assert spot == {"tab": "compare", "sub": "", "id": "pg-score-a"}
    # what an API caller may send instead of a position: the first step, never a crash
    for pos in (None, "x", {"step": "two"}, {"step": -5}):
        assert lessons_tab.show(state, pos, PROMPT).lesson_pos == {"lesson": first.id, "step": 0}
    # a lesson id that names no lesson is refused by name, and the page stays where it is
    refused = lessons_tab.show(state, {"lesson": "nope", "step": "two"}, PROMPT)
    assert "There is no lesson &#x27;nope&#x27;" in refused.reveal and refused.lesson_pos == {"__type__": "update"}
    assert "There is no lesson" in lessons_tab.answer(state, {"lesson": "nope", "step": 0}, PROMPT, "a").reveal


def test_a_link_opens_its_step_and_a_short_prompt_is_said():
    request = SimpleNamespace(query_params={"lesson": "multihead", "step": "2"}, headers={})
    *shown, tabs = lessons_tab.open_from_link(state_of(), PROMPT, request)
    assert shown[0] == {"lesson": "multihead", "step": 1} and tabs.selected == "lessons"
    short = lessons_tab.show(state_of(), {"lesson": "attention", "step": 0}, "Hi")
    assert "at least 3 tokens" in short.reveal and short.choice["choices"] == []
    zh = lessons_tab.show(state_of(lang="zh-CN"), {"lesson": "attention", "step": 0}, "Hi")
    assert "至少 3 个词元" in zh.reveal


def drawn(markdown: str) -> tuple[str, set[str]]:
    """The text a Markdown renderer shows for ``markdown``, and the tags it draws besides paragraphs."""
    out = MarkdownIt("commonmark").render(markdown)
    return html.unescape(re.sub(r"<[^>]+>", "", out)).strip(), set(re.findall(r"</?([a-z0-9]+)", out)) - {"p"}


def test_the_question_line_shows_the_tokens_it_quotes_as_they_are():
    attention = {"lesson": "attention", "step": 0}  # 'From “{token}”, ...': the prompt's last token
    step = lessons.find("attention")[0].steps[0]
    for lang in ("en", "zh-CN"):
        state = state_of(lang=lang)
        for ending in ("**", "_", "`", "<", "$$", "#", "[", "&"):
            token = f"␣{ending}"  # (one token of GPT-2's, a space before it)
            shown = lessons_tab.show(state, attention, f"But soft, what light {ending}")
            assert md_literal(token) in shown.question, shown.question
            question, _ = lessons.ask(step, CACHE.get(state["recipe"]), f"But soft, what light {ending}")
            assert question.fields["token"] == token
            assert drawn(shown.question) == (lessons.fill(step.ask, lang, question, ""), {"strong"}), shown.question

    # longer quoted words, of the prompt ({token}) and of the model's output ({target}): each shows as it is, and a
    # number keeps its value
    lens = next(s for lesson in lessons.lessons() for s in lesson.steps if s.question == "lens_first_top")
    typed = {"pos": 3, "token": "*x* _y_", "target": "<b>z</b> $$a$$ [l](u) `c`"}
    quoted = Question([("0", "0")], "0", {}, typed)
    for lang in ("en", "zh-CN"):
        markdown = lessons_tab.question_markdown(lens, quoted, lang)
        assert r"\*x\* \_y\_" in markdown and r"\<b\>z\</b\> \$\$a\$\$" in markdown, markdown
        assert "$$" not in markdown  # (nothing for Gradio's LaTeX)
        assert drawn(markdown) == (lessons.fill(lens.ask, lang, quoted, ""), {"strong"}), markdown


def test_another_model_or_prompt_changes_a_revealed_answer():
    def answers(state, prompt):
        out = {}
        for lesson in lessons.lessons():
            for index, _ in enumerate(lesson.steps):
                pos = {"lesson": lesson.id, "step": index}
                value = lessons_tab.show(state, pos, prompt).choice["choices"][0][1]
                out[lesson.id, index] = revealed(lessons_tab.answer(state, pos, prompt, value))[1]
        return out

    here = answers(state_of(0), PROMPT)
    assert sum(here[k] != v for k, v in answers(state_of(7), PROMPT).items()) >= 1
    assert sum(here[k] != v for k, v in answers(state_of(0), "The cat sat on the mat and then the dog").items()) >= 1


def test_the_pages_preference_redraw_keeps_a_pick_made_while_it_was_computed():
    """The page applies its saved language as it opens: that redraw read the radio before the user
    picked, so it must not set the radio's value nor clear the reveal; with a pick in its inputs it
    redraws that reveal in the new language. A step opened anew still starts unpicked."""
    state, pos = state_of(lang="zh-CN"), {"lesson": "attention", "step": 0}
    fresh = lessons_tab.show(state, pos, PROMPT)
    assert fresh.choice["value"] is None and "pg-lesson-asking" in fresh.reveal
    again = lessons_tab.redraw(state, pos, PROMPT, None)
    assert "value" not in again.choice and again.reveal == lessons_tab.gr.skip() == again.plot
    assert again.choice["choices"] == fresh.choice["choices"]  # the same ids: the page's pick stays valid
    pick = fresh.choice["choices"][0][1]
    picked = lessons_tab.redraw(state, pos, PROMPT, pick)
    assert "value" not in picked.choice
    assert revealed(picked.reveal)[1] == revealed(lessons_tab.answer(state, pos, PROMPT, pick))[1]
    assert re.search(r"[\u4e00-\u9fff]", picked.reveal)


def test_a_preference_redraw_read_before_a_second_guess_reveals_the_second_guess():
    """The page applies its saved preferences a second after it opens. A quick hand may answer wrong,
    then right, while that redraw is on its way with the wrong pick in its inputs: the redraw reveals the
    page's last answered pick, and the check chained after it redraws when a pick was answered since
    it read it. A step opened anew starts unpicked: a redraw there reveals nothing of the old pick."""
    from playground.ui import redraw

    state, page = state_of(), _page("quick-hand")
    try:
        first = lessons_tab.Shown(*lessons_tab.open_from_link(state, PROMPT, page)[:-1])
        pos = first.lesson_pos
        ids = [cid for _, cid in first.choice["choices"]]
        question, _ = lessons.ask(lessons_tab.locate(pos)[0].steps[pos["step"]], CACHE.get(state["recipe"]), PROMPT)
        right = question.answer
        wrong = next(x for x in ids if x != right)
        assert revealed(lessons_tab.answer(state, pos, PROMPT, wrong, page)) == (False, right)
        assert revealed(lessons_tab.answer(state, pos, PROMPT, right, page)) == (True, right)
        stale = lessons_tab.redraw(state, pos, PROMPT, wrong, page)  # read the radio between the two guesses
        assert revealed(stale.reveal) == (True, right)
        skip = lessons_tab.gr.skip()
        assert all(x == skip for x in lessons_tab.redrawn_again(state, pos, PROMPT, right, page))
        # its answer landed, and then another guess was answered: the chained check draws that one
        assert revealed(lessons_tab.answer(state, pos, PROMPT, wrong, page))[0] is False
        again = lessons_tab.redrawn_again(state, pos, PROMPT, wrong, page)
        assert revealed(again.reveal) == (False, right)
        lessons_tab.next_step(state, pos, PROMPT, page)
        back = lessons_tab.step_back(state, pos, PROMPT, page)
        assert back.choice["value"] is None
        assert lessons_tab.redraw(state, pos, PROMPT, None, page).reveal == skip
    finally:
        redraw.forget(page)


def _page(session, query=""):
    """A page's request as Gradio gives it to a handler: its session hash and its address's query."""
    return SimpleNamespace(session_hash=session, query_params=dict(p.split("=") for p in query.split("&") if p))


def test_a_rooms_step_drawn_before_the_pages_load_is_kept():
    """A student's page opened with ``?room=CODE``: the room's poll may draw the teacher's step before the
    page's load event has its turn; the load then leaves it (it drew the first lesson over it before)."""
    state = state_of()
    page = _page("room-page", "room=ABCDEF")
    try:
        followed = lessons_tab.show_at(state, {"lesson": "gpt", "step": 1}, PROMPT, page)
        assert followed.lesson_pos == {"lesson": "gpt", "step": 1}
        skip = lessons_tab.gr.skip()
        assert all(x == skip for x in lessons_tab.open_from_link(state, PROMPT, page))
        assert lessons_tab.redraw(state, lessons_tab.first_position(), PROMPT, None, page).lesson_pos == {
            "lesson": "gpt",
            "step": 1,
        }
        # a link naming its step still opens it (the page's own choice, not a room's)
        linked = lessons_tab.open_from_link(state, PROMPT, _page("room-page", "lesson=multihead&step=2"))
        assert linked[0] == {"lesson": "multihead", "step": 1}
    finally:
        from playground.ui import redraw

        redraw.forget(page)


def test_the_pages_own_redraws_as_it_opens_never_draw_an_older_step_over_the_linked_one():
    import threading
    import time

    from playground.ui import redraw

    state, first = state_of(), lessons_tab.first_position()
    page = _page("opening-page", "lesson=gpt&step=2")
    try:
        # Gradio's select of the Lessons tab as it mounts it, and the preferences' redraw, both set off
        # with the page's first position before the link's step is drawn: they leave the page to the link.
        skip = lessons_tab.gr.skip()
        assert all(x == skip for x in lessons_tab.show_here(state, first, PROMPT, None, page))
        assert all(x == skip for x in lessons_tab.redraw(state, first, PROMPT, None, page))
        linked = lessons_tab.open_from_link(state, PROMPT, page)
        assert linked[0] == {"lesson": "gpt", "step": 1}
        # Once it is drawn, they draw the linked step although they read the first one as they set off,
        # and Show me and an answer are those of the linked step.
        assert lessons_tab.show_here(state, first, PROMPT, None, page).lesson_pos == {"lesson": "gpt", "step": 1}
        assert lessons_tab.redraw(state, first, PROMPT, None, page).lesson_pos == {"lesson": "gpt", "step": 1}
        gpt = lessons.find("gpt", 2)[0].steps[1]
        target = lessons.ask(gpt, CACHE.get(state["recipe"]), PROMPT)[0].target
        assert show_me.target_of(state, first, PROMPT, page) == dict(target) != {}
        assert lessons_tab.next_step(state, first, PROMPT, page).lesson_pos == {"lesson": "gpt", "step": 2}
        # A drawing under way holds the page: one that sets off meanwhile draws after it, from its step.
        original = lessons_tab.show

        def slow(*args, **kwargs):
            time.sleep(0.3)
            return original(*args, **kwargs)

        lessons_tab.show = slow
        try:
            other = threading.Thread(target=lessons_tab.step_back, args=(state, first, PROMPT, page))
            other.start()
            time.sleep(0.05)
            after = lessons_tab.redraw(state, first, PROMPT, None, page)
            other.join()
        finally:
            lessons_tab.show = original
        assert after.lesson_pos == {"lesson": "gpt", "step": 1}  # drawn after Back, from Back's step
    finally:
        redraw.forget(page)
    assert lessons_tab.position(page, first) == first  # a closed page's step is forgotten
