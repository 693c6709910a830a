"""Classroom mode (issue 35) in Chromium: a teacher page (``?room=new``) and two student pages
(``?room=CODE``, one in English, one in 中文). The students follow the teacher's Next within a few
seconds (the time is printed), a vote from each is counted on the teacher's page (the counts shown once
the teacher ticks the box), a student's page reloaded is the same member with its vote, Reveal shows the
room's counts on both student pages, and a student who steps away and presses Follow is back in step.
Then the teacher's Generate tab, prompt, run and attention view reach the students' pages (the time is
printed); a student who types steps away; the teacher's question on its run's layer reaches both students,
and so does a question of the teacher's own, with the layer's heads or with the choices the teacher typed.
The teacher's head sweep reaches a 中文 student's page while it grows, in Chinese, and then whole.
Screenshots: tests/artifacts/room-*.png."""

import json
import re
import time

import pytest

from playground.i18n import tr
from playground.server import lessons
from playground.server.rooms import ROOMS
from tests.browser.chromium import launch, open_tab, set_number
from tests.helpers import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FOLLOW_S = 5.0
RUN_FOLLOW_S = 15.0  # the teacher's run: its map drawn once on the server, then chips and map drawn by each page
TEACHER_PROMPT = "ROMEO: What light through yonder window breaks?"  # (no newline: Enter would generate)
SELECTED = (
    "() => document.querySelector(\"button[role=tab][data-tab-id='{tab}']\")?.getAttribute('aria-selected') === 'true'"
)
SELECTED_NOW = "() => document.querySelector('button[role=tab][aria-selected=true]')?.dataset.tabId"
PROMPT_IS = "(want) => document.querySelector('#pg-prompt textarea')?.value === want"
CHIPS_ARE = "(n) => document.querySelectorAll('#pg-chips .pg-gen').length === n"
TITLE = "() => document.querySelector('#pg-heatmap .js-plotly-plot')?.layout?.title?.text ?? null"
TITLE_IS = f"(want) => ({TITLE})() === want"  # a poll a second, then the step drawn (on a 2-core machine shared with the server)


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


def start_room(teacher, base: str) -> str:
    """The teacher's page opens ``?room=new``: the room's code, once the page says it leads it."""
    teacher.goto(base + "/?room=new")
    status = teacher.locator("#pg-room-status")
    status.get_by_text("You lead room", exact=False).wait_for(timeout=60_000)
    code = re.search(r"You lead room ([A-Z0-9]{6})", status.inner_text()).group(1)
    assert f"?room={code}" in status.inner_text()
    return code


def join_room(student, base: str, code: str, query: str = "") -> None:
    student.goto(base + f"/?room={code}{query}")
    student.locator("#pg-room-status").get_by_text(code, exact=False).wait_for(timeout=60_000)


def wait_progress(page, text, timeout=FOLLOW_S) -> float:
    """Seconds until the page's lesson progress line shows ``text``."""
    t0 = time.perf_counter()
    try:
        page.locator("#pg-lesson-progress").get_by_text(text, exact=False).wait_for(timeout=timeout * 1000)
    except Exception as e:  # what the page held, to tell a slow poll from a page out of step
        shown = page.locator("#pg-lesson-progress").inner_text()
        raise AssertionError(f"{text!r} not shown: {shown!r}; {page.locator('#pg-room-status').inner_text()!r}") from e
    return time.perf_counter() - t0


def type_in(page, text):
    """Typed key by key, as a person does (Gradio's input event, which a fill() does not raise)."""
    box = page.locator("#pg-prompt textarea")
    box.fill("")
    box.press_sequentially(text)


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

        code = start_room(teacher, base)
        for page, lang in ((s1, "en"), (s2, "zh-CN")):
            join_room(page, base, code)
            wait_progress(page, progress_text(lang, first, 0), timeout=30)

        # the teacher's Next: both students follow
        teacher.locator("#pg-lesson-next").click()
        t0 = time.perf_counter()
        wait_progress(teacher, progress_text("en", first, 1), timeout=30)
        took = [wait_progress(page, progress_text(lang, first, 1)) for page, lang in ((s1, "en"), (s2, "zh-CN"))]
        print(f"students in step {time.perf_counter() - t0:.2f} s after the teacher's click ({took})")

        # a vote: each student's choice is counted on the teacher's page
        teacher.locator("#pg-room-open").click()
        for page in (s1, s2):
            page.locator("#pg-room-vote label").first.wait_for(timeout=10_000)
            page.locator("#pg-room-vote label").first.click()
            page.locator("#pg-room-result .pg-msg").wait_for(timeout=10_000)
        teacher.locator("#pg-room-status").get_by_text("2 of 2 here answered", exact=False).wait_for(timeout=10_000)
        assert "answered:" not in teacher.locator("#pg-room-status").inner_text()  # no counts on the class's screen
        # s1 reloads: its browser kept its member id, so it is the same student, its vote its own
        member = s1.evaluate(f"() => localStorage.getItem('pg-room-member:{code}')")
        assert member and list(ROOMS._rooms[code].members).count(member) == 1
        s1.reload()
        s1.locator("#pg-room-status").get_by_text(code, exact=False).wait_for(timeout=60_000)
        wait_progress(s1, progress_text("en", first, 1), timeout=30)
        s1.locator("#pg-room-vote input:checked").wait_for(timeout=10_000)
        assert len(ROOMS._rooms[code].members) == 2
        teacher.wait_for_timeout(1500)  # (the teacher's polls since the reload)
        assert "2 of 2 here answered" in teacher.locator("#pg-room-status").inner_text()
        # the teacher shows the counts so far on the teacher's page
        teacher.locator("#pg-room-show-counts input").check()
        teacher.locator("#pg-room-status").get_by_text("2 of 2 here answered: “", exact=False).wait_for(timeout=5_000)
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
        # (s2, on a short window scrolled to the top of the page, is shown the teacher's next step)
        s2.set_viewport_size({"width": 1280, "height": 480})
        s2.evaluate("window.scrollTo(0, 0)")
        assert not s2.evaluate(IN_SIGHT, "pg-lesson-step")
        teacher.locator("#pg-lesson-next").click()
        second = 2 if len(first.steps) > 2 else None
        lesson, index = (first, 2) if second else (lessons.lessons()[1], 0)
        wait_progress(teacher, progress_text("en", lesson, index), timeout=30)
        wait_progress(s2, progress_text("zh-CN", lesson, index))
        s2.wait_for_function(IN_SIGHT, arg="pg-lesson-step", timeout=3_000)
        s2.set_viewport_size({"width": 1280, "height": 900})
        time.sleep(1.5)
        assert progress_text("en", first, 0) in s1.locator("#pg-lesson-progress").inner_text()  # still away
        s1.locator("#pg-room-follow").click()
        wait_progress(s1, progress_text("en", lesson, index))

        # the teacher opens the Generate tab, types a prompt and generates: the students' pages open the
        # tab, show the prompt, and then the teacher's run (its chips and heatmap, not a run of their own)
        open_tab(teacher, "generate")
        for page in (s1, s2):
            try:
                page.wait_for_function(SELECTED.format(tab="generate"), timeout=FOLLOW_S * 1000)
            except Exception:
                print("room", {k: v for k, v in ROOMS._rooms[code].state.items() if k != "run"})
                print(page.locator("#pg-room-status").inner_text(), page.evaluate(SELECTED_NOW))
                page.screenshot(path=str(ARTIFACTS / "room-debug.png"))
                raise
        type_in(teacher, TEACHER_PROMPT)
        for page in (s1, s2):
            page.wait_for_function(PROMPT_IS, arg=TEACHER_PROMPT, timeout=FOLLOW_S * 1000)
        set_number(teacher, "pg-max-new", 12)
        teacher.locator("#pg-generate").click()
        teacher.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        t0 = time.perf_counter()
        while "run" not in ROOMS._rooms[code].state and time.perf_counter() - t0 < 60:  # (the server is this process)
            time.sleep(0.05)
        in_room = time.perf_counter() - t0
        for page in (s1, s2):  # (the pages draw a 12-token map on a 2-core machine shared with the server)
            page.wait_for_function(CHIPS_ARE, arg=12, timeout=RUN_FOLLOW_S * 1000)
            page.locator("#pg-heatmap .js-plotly-plot").wait_for(timeout=RUN_FOLLOW_S * 1000)
            page.locator("#pg-status [data-state=done]").wait_for(timeout=RUN_FOLLOW_S * 1000)
        print(
            f"the teacher's run in the room {in_room:.2f} s after the teacher's status said done; on both students'"
            f" pages {time.perf_counter() - t0:.2f} s after it"
        )
        chips = [p.locator("#pg-chips .pg-gen").count() for p in (teacher, s1, s2)]
        assert chips == [12, 12, 12], chips
        # the teacher picks another layer/head view: the students' maps follow
        teacher.locator("#pg-view input").click()
        teacher.locator("[role=option]").nth(2).click()
        teacher.wait_for_timeout(1500)  # (the teacher's new map drawn)
        title = teacher.evaluate(TITLE)
        s1.wait_for_function(TITLE_IS, arg=title, timeout=FOLLOW_S * 1000)  # the teacher's figure as it is
        # the Chinese page: the same figure, drawn once on the server in its own language (the room holds both)
        zh_title, t0 = None, time.perf_counter()
        while zh_title is None and time.perf_counter() - t0 < FOLLOW_S:
            run = ROOMS._rooms[code].state.get("run") or {}
            if run.get("figure") and json.loads(run["figure"])["layout"]["title"]["text"] == title:
                zh_title = json.loads(run["figure_zh"])["layout"]["title"]["text"]
            time.sleep(0.05)
        assert zh_title and zh_title != title and re.search("[\u4e00-\u9fff]", zh_title), (title, zh_title)
        s2.wait_for_function(TITLE_IS, arg=zh_title, timeout=FOLLOW_S * 1000)
        for size in ((1600, 1000), (1024, 768)):
            for page, name in ((teacher, "teacher"), (s2, "student-zh")):
                page.set_viewport_size({"width": size[0], "height": size[1]})
                page.wait_for_timeout(500)
                page.screenshot(path=str(ARTIFACTS / f"room-generate-{name}-{size[0]}x{size[1]}.png"))
        # a student who types steps away: the teacher's next prompt does not reach that page until Follow
        type_in(s1, "my own prompt")
        s1.locator("#pg-room-status").get_by_text("stepped away", exact=False).wait_for(timeout=10_000)
        type_in(teacher, TEACHER_PROMPT + " again")
        s2.wait_for_function(PROMPT_IS, arg=TEACHER_PROMPT + " again", timeout=FOLLOW_S * 1000)
        assert s1.locator("#pg-prompt textarea").input_value() == "my own prompt"
        s1.locator("#pg-room-follow").click()
        try:
            s1.wait_for_function(PROMPT_IS, arg=TEACHER_PROMPT + " again", timeout=FOLLOW_S * 1000)
        except Exception as e:  # what the page and the room held, to tell a slow poll from a lost Follow
            status = s1.locator("#pg-room-status").inner_text()
            prompt = s1.locator("#pg-prompt textarea").input_value()
            raise AssertionError(f"not back in step: {status!r}, {prompt!r}, {ROOMS._rooms[code].following}") from e

        # Ask about this view: a question on the teacher's run, on the layer its heatmap shows, reaches each
        # student in their language with the layer's heads as chips (or the teacher is told why it has no answer)
        open_tab(teacher, "lessons")  # (the classroom controls; the heatmap's layer stays the Generate tab's)
        teacher.locator("#pg-room-ask").click()
        t0, vote, refusal = time.perf_counter(), None, ""
        while time.perf_counter() - t0 < 30 and vote is None and not refusal:
            current = ROOMS._rooms[code].vote  # (the server is this process)
            vote = current if current is not None and current.text else None
            errors_shown = teacher.locator("#pg-room-result .pg-error")
            refusal = errors_shown.inner_text() if errors_shown.count() else ""
            time.sleep(0.1)
        if vote is None:
            assert "no one answer" in refusal, refusal  # two heads tie on this run: refused, never a pick
        else:
            layer = int(vote.question.rsplit("/", 1)[1])
            for page, words in ((s1, f"Which head of layer {layer}"), (s2, f"第 {layer} 层的哪个头")):
                page.locator("#pg-room-vote").get_by_text(words, exact=False).wait_for(timeout=FOLLOW_S * 1000)
                page.locator("#pg-room-vote").get_by_text(f"L{layer} H0", exact=True).wait_for(timeout=5_000)
            s2.locator("#pg-room-vote").scroll_into_view_if_needed()
            s2.screenshot(path=str(ARTIFACTS / "room-student-ask-zh.png"))
        # the teacher's own question: its box shows only for that kind; its words reach both pages as they are
        assert not teacher.locator("#pg-room-ask-text textarea").is_visible()
        teacher.locator("#pg-room-ask-kind input").click()
        teacher.get_by_role("option", name=tr("en", "room_ask_own")).click()
        own = "Which head copies the token after an earlier repeat?"
        teacher.locator("#pg-room-ask-text textarea").fill(own)
        teacher.locator("#pg-room-ask").click()
        for page in (s1, s2):
            page.locator("#pg-room-vote").get_by_text(own, exact=False).wait_for(timeout=FOLLOW_S * 1000)
        assert ROOMS._rooms[code].vote.answer is None and ROOMS._rooms[code].vote.question.startswith("own/")
        # ... and with the choices the teacher types, one a line: each student's chips are those words
        teacher.locator("#pg-room-ask-text textarea").fill("Will the model repeat the name?")
        teacher.locator("#pg-room-ask-choices textarea").fill("Yes\nNo\nOnly if the name came earlier")
        teacher.locator("#pg-room-ask").click()
        for page in (s1, s2):
            page.locator("#pg-room-vote").get_by_text("Will the model repeat", exact=False).wait_for(
                timeout=FOLLOW_S * 1000
            )
            for chip in ("Yes", "No", "Only if the name came earlier"):
                page.locator("#pg-room-vote").get_by_text(chip, exact=True).wait_for(timeout=5_000)
        assert ROOMS._rooms[code].vote.question == "own/typed"
        # presenter mode: the teacher's classroom controls, the question's row with them, stay on the screen
        teacher.evaluate("() => document.body.classList.add('pg-present')")
        teacher.wait_for_timeout(300)
        box = teacher.locator("#pg-room-ask").bounding_box()
        width = teacher.evaluate("() => window.innerWidth")
        assert box and box["width"] > 0 and box["x"] + box["width"] <= width, (box, width)
        teacher.screenshot(path=str(ARTIFACTS / "room-teacher-ask-present.png"), full_page=True)
        teacher.evaluate("() => document.body.classList.remove('pg-present')")
        open_tab(teacher, "generate")
        for page in (s1, s2):
            page.wait_for_function(SELECTED.format(tab="generate"), timeout=FOLLOW_S * 1000)

        # the teacher's page reloaded: its key kept in its browser (never in the address), it leads the room
        # again and still drives; the students' pages never held the key
        assert f"room={code}" in teacher.url and "key" not in teacher.url
        key = teacher.evaluate(f"() => localStorage.getItem('pg-room-key:{code}')")
        assert key and all(p.evaluate(f"() => localStorage.getItem('pg-room-key:{code}')") is None for p in (s1, s2))
        teacher.reload()
        teacher.locator("#pg-room-status").get_by_text(f"You lead room {code}", exact=False).wait_for(timeout=60_000)
        assert key not in teacher.content()
        teacher.wait_for_function(SELECTED.format(tab="generate"), timeout=FOLLOW_S * 1000)  # the room's tab
        open_tab(teacher, "lessons")
        teacher.locator("#pg-room-qr svg").first.wait_for(timeout=10_000)
        for page in (s1, s2):
            page.wait_for_function(SELECTED.format(tab="lessons"), timeout=FOLLOW_S * 1000)
        teacher.screenshot(path=str(ARTIFACTS / "room-teacher-reloaded.png"))

        # the teacher ends the room: the students are told
        teacher.locator("#pg-room-end").click()
        s1.locator("#pg-room-status").get_by_text("has ended", exact=False).wait_for(timeout=10_000)
        teacher.wait_for_function(f"() => localStorage.getItem('pg-room-key:{code}') === null", timeout=10_000)
        assert not errors, errors
        browser.close()


DATA = "(id) => JSON.stringify(document.querySelector(`#${id} .js-plotly-plot`)?.data ?? null)"
PLOT_TITLE = "(id) => document.querySelector(`#${id} .js-plotly-plot`)?.layout?.title?.text ?? null"
SAME_DATA = f"([id, want]) => ({DATA})(id) === want"


def test_a_student_follows_the_teachers_model_step_and_inside_view(page_url):
    """The teacher builds another model (nano: 2 layers, where the app starts on a 6-layer one), opens a
    lesson step and then the Inside tab's lens and attention maths after a run: the student's page takes
    the teacher's model (its Model form) and shows the very figures the teacher's page drew, the step's
    map with the teacher's model's 2 layers. Screenshots: tests/artifacts/room-follow-*.png."""
    from playwright.sync_api import sync_playwright

    from playground import PRESETS

    ARTIFACTS.mkdir(exist_ok=True)
    base = page_url.rstrip("/")
    attention = next(x for x in lessons.lessons() if x.id == "attention")
    with sync_playwright() as p:
        browser = launch(p)
        pages, errors = [], []
        for _ in range(2):
            page = browser.new_context(locale="en", viewport={"width": 1280, "height": 900}).new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            pages.append(page)
        teacher, student = pages
        code = start_room(teacher, base)
        join_room(student, base, code)

        # the teacher builds the nano model
        open_tab(teacher, "model")
        teacher.locator("#pg-weights").get_by_text(tr("en", "w_random"), exact=True).click()
        teacher.locator("#pg-preset input").click()
        teacher.get_by_role("option", name=tr("en", "preset_nano")).click()
        teacher.wait_for_function(
            "(want) => document.querySelector('#pg-preset input')?.value === want", arg=tr("en", "preset_nano")
        )
        teacher.wait_for_timeout(1000)  # (the preset's fields filled in)
        teacher.locator("#pg-build").click()
        teacher.locator("#pg-build-msg").get_by_text("Ready", exact=False).wait_for(timeout=120_000)

        # a student who joins now takes the teacher's model, and keeps it once the page's own load is done
        late = browser.new_context(locale="en", viewport={"width": 1280, "height": 900}).new_page()
        late.on("pageerror", lambda e: errors.append(str(e)))
        join_room(late, base, code)
        summary = teacher.locator("#pg-summary").inner_text()
        late.wait_for_function(
            "(want) => document.querySelector('#pg-summary')?.innerText === want", arg=summary, timeout=30_000
        )
        late.wait_for_timeout(3000)  # (every load event of the page has answered by now)
        assert late.locator("#pg-summary").inner_text() == summary
        late.context.close()

        # ... and opens the attention lesson's heads overview: the student's page on the teacher's model
        open_tab(teacher, "lessons")
        teacher.locator("#pg-lesson-pick input").click()
        teacher.get_by_role("option", name=lessons_choice(attention)).click()
        wait_progress(teacher, progress_text("en", attention, 0), timeout=60)
        teacher.locator("#pg-lesson-next").click()
        wait_progress(teacher, progress_text("en", attention, 1), timeout=60)
        teacher.wait_for_function(f"() => !['null', '[]'].includes(({DATA})('pg-lesson-plot'))", timeout=30_000)
        t0 = time.perf_counter()
        wait_progress(student, progress_text("en", attention, 1), timeout=30)
        want = teacher.evaluate(DATA, "pg-lesson-plot")
        student.wait_for_function(SAME_DATA, arg=["pg-lesson-plot", want], timeout=FOLLOW_S * 1000)
        print(f"the student's page drew the teacher's step {time.perf_counter() - t0:.2f} s after the teacher's")
        rows = json.loads(want)[0]["z"]
        assert len(rows) == PRESETS["nano"].n_layers, rows  # the teacher's model's layers, not the page's own 6
        student.wait_for_function(
            "() => document.querySelector('#pg-weights input:checked')?.value === 'random'", timeout=FOLLOW_S * 1000
        )
        student.screenshot(path=str(ARTIFACTS / "room-follow-step.png"))

        # a run, then the Inside tab: the lens, then the attention maths, as the teacher's page drew them
        open_tab(teacher, "generate")
        type_in(teacher, TEACHER_PROMPT)
        set_number(teacher, "pg-max-new", 8)
        teacher.locator("#pg-generate").click()
        teacher.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        open_tab(teacher, "inside")
        teacher.wait_for_function(f"() => ({DATA})('pg-lens') !== 'null'", timeout=60_000)
        want = teacher.evaluate(DATA, "pg-lens")
        t0 = time.perf_counter()
        student.wait_for_function(SELECTED.format(tab="inside"), timeout=RUN_FOLLOW_S * 1000)
        student.wait_for_function(SAME_DATA, arg=["pg-lens", want], timeout=RUN_FOLLOW_S * 1000)
        print(f"the teacher's lens on the student's page {time.perf_counter() - t0:.2f} s after the teacher's")
        assert student.evaluate(PLOT_TITLE, "pg-lens") == teacher.evaluate(PLOT_TITLE, "pg-lens")
        assert not student.locator("#pg-inside-msg").inner_text().strip()  # (no "Generate first" over the teacher's)
        student.screenshot(path=str(ARTIFACTS / "room-follow-lens.png"))
        teacher.get_by_role("tab", name=tr("en", "inside_maths"), exact=True).click()
        teacher.locator("#pg-maths-btn").click()
        teacher.wait_for_function(f"() => ({DATA})('pg-maths-plot') !== 'null'", timeout=60_000)
        want = teacher.evaluate(DATA, "pg-maths-plot")
        student.wait_for_function(SAME_DATA, arg=["pg-maths-plot", want], timeout=RUN_FOLLOW_S * 1000)
        assert student.locator("#pg-maths-table").inner_text() == teacher.locator("#pg-maths-table").inner_text()
        student.screenshot(path=str(ARTIFACTS / "room-follow-maths.png"))
        open_tab(teacher, "lessons")
        teacher.locator("#pg-room-end").click()
        student.locator("#pg-room-status").get_by_text("has ended", exact=False).wait_for(timeout=10_000)
        assert not errors, errors
        browser.close()


# The sweep's cells as plotly drew them (data may hold them base64-packed): null where a layer is not measured yet.
SWEEP_Z = """() => { const g = document.querySelector('#pg-sweep .js-plotly-plot');
  const z = g && g._fullData && g._fullData[0] && g._fullData[0].z;
  return z ? Array.from(z, r => Array.from(r, v => (v === undefined || Number.isNaN(v)) ? null : v)) : null; }"""
PARTIAL_SWEEP = f"""() => {{ const z = ({SWEEP_Z})();
  return !!z && z.some(r => r.every(v => v === null)) && z.some(r => r.some(v => v !== null)); }}"""
INTERVENE_SELECTED = (
    "() => !!document.querySelector('button[role=tab][data-tab-id=inside-intervene][aria-selected=true]')"
)
# at least half of the element (or of the window, for a taller one) in the window
IN_SIGHT = """(id) => { const b = document.getElementById(id)?.getBoundingClientRect();
  return !!b && b.height > 0 && Math.min(b.bottom, innerHeight) - Math.max(b.top, 0) >= Math.min(b.height, innerHeight) / 2; }"""


def test_a_student_sees_the_teachers_head_sweep_grow_in_the_students_language(page_url, slowed_sweep):
    """The teacher's head sweep (slowed: about 8 s) reaches a following 中文 page while it computes: the
    student's Intervene tab shows the layers measured so far, the others blank, under the sweep's progress in
    Chinese; once the sweep is done the student's figure has the teacher's numbers."""
    from playwright.sync_api import sync_playwright

    base = page_url.rstrip("/")
    with sync_playwright() as p:
        browser = launch(p)
        errors = []
        teacher = browser.new_context(locale="en", viewport={"width": 1280, "height": 900}).new_page()
        student = browser.new_context(locale="zh-CN", viewport={"width": 1280, "height": 900}).new_page()
        for page in (teacher, student):
            page.on("pageerror", lambda e: errors.append(str(e)))
        join_room(student, base, start_room(teacher, base), "&lang=zh-CN")

        open_tab(teacher, "generate")
        set_number(teacher, "pg-max-new", 8)
        teacher.locator("#pg-generate").click()
        teacher.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        open_tab(teacher, "inside")
        teacher.wait_for_function(f"() => ({DATA})('pg-lens') !== 'null'", timeout=60_000)
        open_tab(teacher, "inside-intervene")
        teacher.locator("#pg-sweep-btn").click()
        teacher.locator("#pg-intervene-msg").get_by_text("Head sweep: 1 of", exact=False).wait_for(timeout=60_000)

        student.wait_for_function(INTERVENE_SELECTED, timeout=RUN_FOLLOW_S * 1000)
        student.wait_for_function(PARTIAL_SWEEP, timeout=RUN_FOLLOW_S * 1000)
        assert "⏳" in teacher.locator("#pg-intervene-msg").inner_text()  # (the sweep still computing)
        # the page scrolled to the sweep, which stands below the fold at 1280×900 (the teacher's page too)
        assert not teacher.evaluate(IN_SIGHT, "pg-sweep")
        student.wait_for_function(IN_SIGHT, arg="pg-sweep", timeout=3_000)
        said = student.locator("#pg-sweep-md").inner_text()
        assert "⏳" in said and "Head sweep" not in said and "层" in said, said
        assert not student.locator("#pg-inside-msg").inner_text().strip()  # (no "Generate first" over the teacher's)
        student.wait_for_timeout(600)  # (the smooth scroll's end, for the picture)
        student.screenshot(path=str(ARTIFACTS / "room-follow-sweep-partial.png"))

        teacher.wait_for_function(
            "() => !(document.querySelector('#pg-intervene-msg')?.innerText || '').includes('⏳')", timeout=120_000
        )
        want = teacher.evaluate(SWEEP_Z)
        assert want and all(v is not None for row in want for v in row)
        student.wait_for_function(
            f"(want) => JSON.stringify(({SWEEP_Z})()) === JSON.stringify(want)", arg=want, timeout=RUN_FOLLOW_S * 1000
        )
        assert "⏳" not in student.locator("#pg-sweep-md").inner_text()
        student.screenshot(path=str(ARTIFACTS / "room-follow-sweep.png"))
        assert not errors, errors
        browser.close()


def lessons_choice(lesson) -> str:
    return f"{lesson.order} · {lessons.say(lesson.title, 'en')}"
