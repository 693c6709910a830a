"""Where things sit and when they show, in the page (issue 23): a text not drawn yet takes no
room; Score & compare shows only the chosen text source's input; a lens message appears by the
control that caused it; the Inside tab's views of the last run are marked while a new run's are
not drawn yet."""

import pytest

from playground.i18n import tr
from tests.browser.chromium import launch, open_tab, set_number
from tests.helpers import ARTIFACTS
from tools.pagewalk import plot_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _page(p, page_url, lang="en"):
    browser = launch(p)
    page = browser.new_page(viewport={"width": 1600, "height": 1000}, locale=lang)
    page.goto(f"{page_url}?lang={lang}")
    page.locator("#pg-summary").get_by_text("参数" if lang == "zh-CN" else "parameters", exact=False).wait_for(
        timeout=60_000
    )
    return browser, page


def _run(page, n):
    open_tab(page, "generate")
    set_number(page, "pg-max-new", n)
    page.locator("#pg-generate").click()
    page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)


def _gap(page, upper, lower):
    a, b = page.locator(upper).bounding_box(), page.locator(lower).bounding_box()
    return b["y"] - (a["y"] + a["height"])


def test_texts_not_drawn_yet_take_no_room(page_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page = _page(p, page_url)
        _run(page, 8)
        open_tab(page, "inside")
        plot_ready(page, "pg-lens")
        open_tab(page, "inside-dla")
        page.locator("#pg-dla-btn").wait_for()
        # Before attribution: its texts are empty and hidden, the hint follows the button row closely.
        for elem_id in ("pg-dla-md", "pg-dla-pick-md"):
            assert page.locator(f"#{elem_id}").is_hidden(), elem_id
        button_row_to_hint = _gap(page, "#pg-dla-btn", "#pg-dla-heat")
        page.locator("#pg-dla-btn").click()
        page.locator("#pg-dla-md").get_by_text("sum", exact=False).first.wait_for(timeout=60_000)
        assert page.locator("#pg-dla-md").is_visible()  # drawn: it shows, and takes its room
        assert _gap(page, "#pg-dla-btn", "#pg-dla-heat") > button_row_to_hint
        open_tab(page, "inside-maths")
        assert page.locator("#pg-maths-md").is_hidden()
        open_tab(page, "inside-intervene")
        assert page.locator("#pg-intervene-md").is_hidden() and page.locator("#pg-sweep-md").is_hidden()
        browser.close()


def test_score_and_compare_shows_only_the_chosen_text_source(page_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        for lang in ("en", "zh-CN"):
            browser, page = _page(p, page_url, lang)
            open_tab(page, "compare")
            text, upload = page.locator("#pg-score-text"), page.locator("#pg-score-upload")
            replace = page.locator("#pg-score-replace")  # how to decode an uploaded file
            text.wait_for()
            assert text.is_visible() and upload.is_hidden() and replace.is_hidden()  # "paste" is the default
            page.get_by_label(tr(lang, "src_upload"), exact=True).check()
            upload.wait_for(state="visible", timeout=10_000)
            assert text.is_hidden() and replace.is_visible()
            page.get_by_label(tr(lang, "src_run"), exact=True).check()
            upload.wait_for(state="hidden", timeout=10_000)
            assert text.is_hidden() and replace.is_hidden()
            page.get_by_label(tr(lang, "src_paste"), exact=True).check()
            text.wait_for(state="visible", timeout=10_000)
            assert upload.is_hidden()
            browser.close()


def test_a_lens_click_message_sits_by_the_heatmap(page_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page = _page(p, page_url)
        _run(page, 8)
        open_tab(page, "inside")
        plot_ready(page, "pg-lens")
        # A click the page read badly: the reason sits just above the heatmap, not under the button.
        page.evaluate(
            "() => { window.pgPicked['pg-lens'] = {x: 2.5, y: 1}; document.querySelector('#pg-lens-pick').click(); }"
        )
        msg = page.locator("#pg-lens-plot-msg")
        msg.get_by_text("whole number", exact=False).wait_for(timeout=60_000)
        assert 0 <= _gap(page, "#pg-lens-plot-msg", "#pg-lens") < 80
        assert page.locator("#pg-lens-msg").is_hidden() and page.locator("#pg-inside-msg").is_hidden()
        page.locator("#pg-lens").screenshot(path=str(ARTIFACTS / "inside-lens-click-message.png"))
        browser.close()


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_inside_views_of_the_last_run_are_marked_until_the_tab_draws_the_new_one(page_url, lang):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page = _page(p, page_url, lang)
        _run(page, 8)
        open_tab(page, "inside")
        plot_ready(page, "pg-lens")
        open_tab(page, "inside-dla")
        page.locator("#pg-dla-btn").click()
        plot_ready(page, "pg-dla-heat")
        assert not page.evaluate("() => document.body.dataset.pgInsidePrevious")
        # A new run: the Inside tab's figures and texts of the last one are marked as such.
        open_tab(page, "generate")
        set_number(page, "pg-max-new", 60)
        page.locator("#pg-generate").click()
        page.wait_for_function("() => document.body.dataset.pgInsidePrevious === '1'", timeout=30_000)
        label = page.evaluate("() => getComputedStyle(document.querySelector('#pg-dla-heat'), '::before').content")
        assert tr(lang, "previous_run_inside") in label
        assert page.evaluate("() => getComputedStyle(document.querySelector('#pg-dla-md > *')).opacity") == "0.35"
        assert page.evaluate("() => getComputedStyle(document.querySelector('#pg-lens'), '::before').content") == label
        page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        open_tab(page, "inside")
        page.screenshot(path=str(ARTIFACTS / f"inside-previous-run-{lang}.png"))
        # Opening the tab draws the new run's lens and clears the rest: the mark goes.
        page.wait_for_function("() => !document.body.dataset.pgInsidePrevious", timeout=60_000)
        page.wait_for_function(
            "() => !document.querySelector('#pg-dla-heat .js-plotly-plot')?.data?.length", timeout=30_000
        )
        browser.close()


def test_a_message_with_a_long_name_stays_in_its_box_on_a_projector(page_url):
    """A refusal naming PLAYGROUND_MEMORY_BUDGET_GB (one unbroken word) in a narrow column at
    1024×768 in presenter mode breaks inside the word rather than run out of its box."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1024, "height": 768}, locale="zh-CN")
        page.goto(f"{page_url}?lang=zh-CN&present=1")
        page.locator("#pg-summary").get_by_text("参数", exact=False).wait_for(timeout=60_000)
        open_tab(page, "model")
        box = page.locator("#pg-build")
        box.wait_for()
        fits = page.evaluate(
            """() => { const m = document.createElement('div'); m.className = 'pg-msg pg-error';
            m.textContent = '⚠ 或调高 PLAYGROUND_MEMORY_BUDGET_GB_AND_A_LONGER_NAME_STILL。';
            const b = document.querySelector('#pg-build'); b.parentElement.appendChild(m);
            const ok = m.scrollWidth <= m.clientWidth && m.getBoundingClientRect().right <= b.parentElement.getBoundingClientRect().right + 1;
            m.remove(); return ok; }"""
        )
        assert fits
        # Gradio's "processing | 1.2s" under a view that computes is no smaller than 14 px either.
        size = page.evaluate(
            """() => { const t = document.createElement('div'); t.className = 'progress-text meta-text-center';
            t.textContent = 'processing | 1.2s'; t.style.fontSize = '12px'; document.querySelector('#pg-build').parentElement.appendChild(t);
            const px = parseFloat(getComputedStyle(t).fontSize); t.remove(); return px; }"""
        )
        assert size >= 14
        browser.close()
