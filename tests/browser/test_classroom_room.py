"""Classroom mode (issue 35) in Chromium: a teacher page (``?room=new``) and two student pages
(``?room=CODE``, one in English, one in 中文). The students follow the teacher's Next within a few
seconds (the time is printed), a vote from each shows as counts on the teacher's page, Reveal shows the
room's counts on both student pages, and a student who steps away and presses Follow is back in step.
Screenshots: tests/artifacts/room-*.png."""

import re
import time

import pytest

from playground.i18n import tr
from playground.server import lessons
from tests.browser.chromium import launch
from tests.helpers import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FOLLOW_S = 5.0  # a poll a second, then the step drawn (on a 2-core machine shared with the server)


def progress_text(lang, lesson, index):
    all_lessons = lessons.lessons()
    return tr(
        lang,
        "lesson_progress",
        lesson=all_lessons.index(lesson) + 1,
        lessons=len(all_lessons),
        step=index + 1,
        steps=len(lesson.steps),
    )


def wait_progress(page, text, timeout=FOLLOW_S) -> float:
    """Seconds until the page's lesson progress line shows ``text``."""
    t0 = time.perf_counter()
    page.locator("#pg-lesson-progress").get_by_text(text, exact=False).wait_for(timeout=timeout * 1000)
    return time.perf_counter() - t0


def test_a_teacher_leads_two_students(page_url):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    base = page_url.rstrip("/")
    first = lessons.lessons()[0]
    with sync_playwright() as p:
        browser = launch(p)
        pages, errors = {}, []
        for name, lang in (("teacher", "en"), ("s1", "en"), ("s2", "zh-CN")):
            context = browser.new_context(locale=lang, viewport={"width": 1280, "height": 900})
            pages[name] = context.new_page()
            pages[name].on("pageerror", lambda e: errors.append(str(e)))
        teacher, s1, s2 = pages["teacher"], pages["s1"], pages["s2"]

        teacher.goto(base + "/?room=new")
        status = teacher.locator("#pg-room-status")
        status.get_by_text("You lead room", exact=False).wait_for(timeout=60_000)
        code = re.search(r"You lead room ([A-Z0-9]{6})", status.inner_text()).group(1)
        assert f"?room={code}" in status.inner_text()
        for page, lang in ((s1, "en"), (s2, "zh-CN")):
            page.goto(base + f"/?room={code}")
            page.locator("#pg-room-status").get_by_text(code, exact=False).wait_for(timeout=60_000)
            wait_progress(page, progress_text(lang, first, 0), timeout=30)

        # the teacher's Next: both students follow
        teacher.locator("#pg-lesson-next").click()
        t0 = time.perf_counter()
        wait_progress(teacher, progress_text("en", first, 1), timeout=30)
        took = [wait_progress(page, progress_text(lang, first, 1)) for page, lang in ((s1, "en"), (s2, "zh-CN"))]
        print(f"students in step {time.perf_counter() - t0:.2f} s after the teacher's click ({took})")

        # a vote: each student's choice shows as a count on the teacher's page
        teacher.locator("#pg-room-open").click()
        for page in (s1, s2):
            page.locator("#pg-room-vote label").first.wait_for(timeout=10_000)
            page.locator("#pg-room-vote label").first.click()
            page.locator("#pg-room-result .pg-msg").wait_for(timeout=10_000)
        teacher.locator("#pg-room-status").get_by_text("2 of 2 answered", exact=False).wait_for(timeout=10_000)
        teacher.screenshot(path=str(ARTIFACTS / "room-teacher.png"), full_page=True)

        # Reveal: the counts on both student pages
        teacher.locator("#pg-room-reveal").click()
        for page in (s1, s2):
            page.locator("#pg-room-result .pg-room-counts").wait_for(timeout=FOLLOW_S * 1000)
            counts = page.locator("#pg-room-result .pg-room-bar").evaluate_all(
                "(bars) => bars.map(b => Number(b.dataset.count))"
            )
            assert sum(counts) == 2 and max(counts) == 2, counts
        s2.screenshot(path=str(ARTIFACTS / "room-student-zh.png"), full_page=True)
        assert "答案" in s2.locator("#pg-room-result").inner_text()

        # s1 steps away; the teacher moves on; Follow brings s1 back in step
        s1.locator("#pg-lesson-back").click()
        wait_progress(s1, progress_text("en", first, 0), timeout=30)
        s1.locator("#pg-room-status").get_by_text("stepped away", exact=False).wait_for(timeout=10_000)
        teacher.locator("#pg-lesson-next").click()
        second = 2 if len(first.steps) > 2 else None
        lesson, index = (first, 2) if second else (lessons.lessons()[1], 0)
        wait_progress(teacher, progress_text("en", lesson, index), timeout=30)
        wait_progress(s2, progress_text("zh-CN", lesson, index))
        time.sleep(1.5)
        assert progress_text("en", first, 0) in s1.locator("#pg-lesson-progress").inner_text()  # still away
        s1.locator("#pg-room-follow").click()
        wait_progress(s1, progress_text("en", lesson, index))

        # the teacher ends the room: the students are told
        teacher.locator("#pg-room-end").click()
        s1.locator("#pg-room-status").get_by_text("has ended", exact=False).wait_for(timeout=10_000)
        assert not errors, errors
        browser.close()
