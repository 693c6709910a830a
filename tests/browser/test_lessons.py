"""The Lessons tab in a real page: every step of every lesson, in English and in 中文, at 1024×768 in
presenter mode (light and dark), each question answered once wrongly and once rightly, the revealed
answer checked against the library's own figure for the page's model and prompt."""

import re
from pathlib import Path

import pytest

from playground.i18n import tr
from playground.server import lessons
from playground.server.model_cache import CACHE
from playground.server.recipes import default_recipe
from tests.browser.chromium import launch, open_tab
from tests.lesson_figures import library_answer

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
SCROLL_JS = "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
# Three English words in a row in the lesson's own text (token labels are left out: they are the model's).
ENGLISH_RUN = re.compile(r"[A-Za-z]{2,}(?:[ ,;:'’\-]+[A-Za-z]{2,}){2,}")
LESSON_TEXT_JS = """() => ['#pg-lesson-progress', '#pg-lesson-text', '#pg-lesson-question', '#pg-lesson-reveal',
  '#pg-lesson-intro', '#pg-lesson-nav', '#pg-lesson-full', '#pg-lesson-choice [data-testid=block-info]']
  .map(s => document.querySelector(s)?.innerText || '').join('\\n')"""


def _progress(page):
    return page.locator("#pg-lesson-progress").inner_text()


def _reveal(page, right: bool):
    found = page.locator(f"#pg-lesson-reveal .pg-lesson-reveal[data-right={str(right).lower()}]")
    found.wait_for(timeout=60_000)
    return found.get_attribute("data-answer")


def _walk(page, lang, scheme, prompt, model, problems):
    total = sum(len(x.steps) for x in lessons.lessons())
    seen = 0
    for number, lesson in enumerate(lessons.lessons(), 1):
        for index, step in enumerate(lesson.steps):
            want = tr(
                lang,
                "lesson_progress",
                lesson=number,
                lessons=len(lessons.lessons()),
                step=index + 1,
                steps=len(lesson.steps),
            )
            page.wait_for_function(
                f"() => (document.querySelector('#pg-lesson-progress')?.innerText || '').includes({want!r})",
                timeout=60_000,
            )
            page.locator("#pg-lesson-choice input[type=radio]").first.wait_for(timeout=60_000)
            question, _ = lessons.ask(step, model, prompt)
            expected = library_answer(step, model, prompt, question)
            values = page.locator("#pg-lesson-choice input[type=radio]").evaluate_all("xs => xs.map(x => x.value)")
            assert expected in values, (lesson.id, index, expected, values)
            wrong = next(v for v in values if v != expected)
            page.locator(f"#pg-lesson-choice input[value='{wrong}']").click()
            assert _reveal(page, False) == expected, (lesson.id, index)
            page.locator(f"#pg-lesson-choice input[value='{expected}']").click()
            assert _reveal(page, True) == expected, (lesson.id, index)
            shot = f"lesson-{lang}-{scheme}-1024x768-present-{lesson.order}-{lesson.id}-{index + 1}"
            page.wait_for_timeout(300)
            page.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)
            width, client = page.evaluate(SCROLL_JS)
            if width != client:
                problems.append(f"{shot}: scrolls sideways ({width} > {client})")
            if lang == "zh-CN" and (runs := ENGLISH_RUN.findall(page.evaluate(LESSON_TEXT_JS))):
                problems.append(f"{shot}: English in the Chinese lesson: {runs}")
            seen += 1
            if seen < total:
                page.locator("#pg-lesson-next").click()
    assert seen == total


def test_every_lesson_step_in_both_languages_reveals_the_librarys_answer(page_url):
    from playwright.sync_api import sync_playwright

    from playground.ui.generate_layout import EXAMPLES

    model, prompt = CACHE.get(default_recipe()), EXAMPLES[0][0]
    ARTIFACTS.mkdir(exist_ok=True)
    problems = []
    with sync_playwright() as p:
        browser = launch(p)
        for lang, scheme in (("en", "light"), ("zh-CN", "dark")):
            context = browser.new_context(locale=lang, viewport={"width": 1024, "height": 768}, color_scheme=scheme)
            page = context.new_page()
            errors = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.goto(page_url.rstrip("/") + "/?present=1")
            word = "参数" if lang == "zh-CN" else "parameters"
            page.locator("#pg-summary").get_by_text(word, exact=False).wait_for(timeout=60_000)
            # A new visitor opens on the Lessons tab.
            assert page.get_by_role("tab", name=tr(lang, "tab_lessons")).get_attribute("aria-selected") == "true"
            _walk(page, lang, scheme, prompt, model, problems)
            assert not errors, errors
            context.close()
        browser.close()
    assert not problems, "\n".join(problems)


def test_a_link_opens_a_step_the_full_tab_link_goes_there_and_the_last_tab_is_remembered(page_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        context = browser.new_context(viewport={"width": 1024, "height": 768})
        page = context.new_page()
        page.goto(page_url.rstrip("/") + "/?lesson=attention&step=2")
        page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
        lesson = lessons.find("attention")[0]
        page.locator("#pg-lesson-progress").get_by_text(
            tr(
                "en",
                "lesson_progress",
                lesson=lessons.lessons().index(lesson) + 1,
                lessons=len(lessons.lessons()),
                step=2,
                steps=len(lesson.steps),
            )
        ).wait_for(timeout=60_000)
        page.locator("#pg-lesson-full").click()  # the attention map belongs to the Generate tab
        generate = page.get_by_role("tab", name=tr("en", "tab_generate"))
        page.wait_for_function(
            "() => [...document.querySelectorAll('button[role=tab]')].some(b =>"
            f" b.innerText === {tr('en', 'tab_generate')!r} && b.getAttribute('aria-selected') === 'true')",
            timeout=30_000,
        )
        # A returning visitor (same browser, bare address) gets the tab they last used.
        open_tab(page, "tokenizer")
        page.goto(page_url)
        page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
        page.wait_for_function(
            "() => [...document.querySelectorAll('button[role=tab]')].some(b =>"
            f" b.innerText === {tr('en', 'tab_tokenizer')!r} && b.getAttribute('aria-selected') === 'true')",
            timeout=30_000,
        )
        assert generate.get_attribute("aria-selected") == "false"
        context.close()
        browser.close()
