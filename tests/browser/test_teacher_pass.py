"""What a room sees in the page (issue 23): an early token of a long run keeps its keys in the
heatmap and the bars under it agree; a new run marks the last one's figures as the previous run
and clears the Inside tab's views of it; a message appears next to the button or heatmap that
caused it; the query slider waits for a run."""

import pytest

from tests.browser.chromium import SLOW_JOIN, launch, open_tab, set_number, wait_on_generate
from tests.helpers import ARTIFACTS
from tools.pagewalk import plot_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _page(p, page_url):
    browser = launch(p)
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(page_url)
    page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
    open_tab(page, "generate")
    page.locator("#pg-generate").wait_for()
    return browser, page


def _xs(page, elem_id):
    return page.evaluate(
        f"() => {{ const g = document.querySelector('#{elem_id} .js-plotly-plot');"
        f" return g && g.data && g.data.length ? Array.from(g._fullData[0].x) : null; }}"
    )


def test_early_token_of_a_long_run_keeps_its_keys_and_a_new_run_marks_the_old(page_url):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser, page = _page(p, page_url)
        assert not page.locator("#pg-query").is_visible()  # no 0–1 slider before any run
        set_number(page, "pg-max-new", 80)
        page.locator("#pg-generate").click()
        page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        n = page.locator("#pg-chips .pg-chip").count()
        assert n > 64 + 20
        wait_on_generate(
            page,
            f"() => {{ const g = document.querySelector('#pg-heatmap .js-plotly-plot');"
            f" return g && g.data && g.data.length && Array.from(g._fullData[0].x).at(-1) === {n - 1}; }}",
            "teacher-map-after-run",
        )
        assert page.locator("#pg-query").is_visible()
        chip = page.locator("#pg-chips .pg-chip[data-pos='20']")
        chip.click()
        page.wait_for_function(
            "() => { const g = document.querySelector('#pg-query-plot .js-plotly-plot');"
            " return g && g.layout.title.text.startsWith('Where position 20 '); }",
            timeout=60_000,
        )
        page.wait_for_function(
            "() => document.querySelector('#pg-heatmap .js-plotly-plot')._fullData[0].x[0] === 0", timeout=60_000
        )
        keys = _xs(page, "pg-heatmap")
        assert keys == list(range(64))  # the window holds query 20 and every key it sees
        assert _xs(page, "pg-query-plot") == list(range(21))  # the bars: the same keys, up to the query
        row = page.evaluate(
            "() => { const g = document.querySelector('#pg-heatmap .js-plotly-plot');"
            " const d = g._fullData[0]; return Array.from(d.customdata ? d.customdata[20] : d.z[20]); }"
        )
        bars = page.evaluate(
            "() => Array.from(document.querySelector('#pg-query-plot .js-plotly-plot')._fullData[0].y)"
        )
        assert row[:21] == pytest.approx(bars, abs=1e-6)
        title = page.evaluate("() => document.querySelector('#pg-heatmap .js-plotly-plot').layout.title.text")
        assert f"showing positions 0–63 of {n}" in title.replace("<br>", " ")
        page.locator("#pg-heatmap").screenshot(path=str(ARTIFACTS / "teacher-early-query.png"))

        # A new run: the last one's figures and step panel are dimmed under "previous run" until
        # the new run's own are drawn.
        set_number(page, "pg-max-new", 512)
        page.locator("#pg-generate").click()
        page.wait_for_function("() => document.body.dataset.pgPrevious === '1'", timeout=30_000)
        label = page.evaluate("() => getComputedStyle(document.querySelector('#pg-heatmap'), '::before').content")
        assert "previous run" in label
        assert page.evaluate("() => getComputedStyle(document.querySelector('#pg-step-md'), '::before').content") == (
            label
        )
        page.screenshot(path=str(ARTIFACTS / "teacher-previous-run.png"))
        page.locator("#pg-stop").click()
        # (stopped, or done when the run ended first on a quiet machine)
        page.locator("#pg-status [data-state=stopped], #pg-status [data-state=done]").wait_for(timeout=120_000)
        page.wait_for_function("() => !document.body.dataset.pgPrevious", timeout=60_000)
        assert page.evaluate("() => getComputedStyle(document.querySelector('#pg-heatmap'), '::before').content") in (
            "none",
            "normal",
        )
        browser.close()


def test_a_refusal_appears_under_its_own_button(page_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page = _page(p, page_url)
        set_number(page, "pg-max-new", 8)
        page.locator("#pg-generate").click()
        page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        open_tab(page, "inside")
        plot_ready(page, "pg-lens")
        open_tab(page, "inside-intervene")
        # A placeholder reads as an example, not as a value already filled in.
        assert page.get_by_label("Zero-ablate heads", exact=False).get_attribute("placeholder") == "e.g. 0.1, 2.3"
        page.locator("#pg-dose-btn").click()  # no head named: refused, with the reason under the buttons
        msg = page.locator("#pg-intervene-msg")
        msg.get_by_text("Scale head", exact=False).wait_for(timeout=60_000)
        button, said = page.locator("#pg-dose-btn").bounding_box(), msg.bounding_box()
        assert 0 <= said["y"] - (button["y"] + button["height"]) < 80
        assert page.locator("#pg-inside-msg").inner_text().strip() == ""
        # Named, the curve is drawn (streamed point by point) with all 11 α values, and the progress
        # message under the buttons goes once it is complete.
        page.get_by_label("Scale one head", exact=False).fill("1.2")
        page.locator("#pg-dose-btn").click()
        page.wait_for_function(
            "() => { const g = document.querySelector('#pg-dose .js-plotly-plot');"
            " return g && g._fullData && g._fullData.length && g._fullData[0].x.length === 11; }",
            timeout=120_000,
        )
        page.wait_for_function("() => !document.querySelector('#pg-intervene-msg .pg-progress')", timeout=30_000)
        # Stop answers next to the buttons.
        page.locator("#pg-sweep-btn").click()
        page.locator("#pg-inside-stop").click()
        msg.get_by_text("Stopped", exact=False).wait_for(timeout=120_000)
        # A Stop that reaches the server before the sweep it stops has joined the queue (a busy
        # machine): the sweep still ends on Stop's message, having drawn nothing.
        page.wait_for_function("() => !document.querySelector('#pg-intervene-msg .pg-progress')", timeout=60_000)
        page.evaluate(SLOW_JOIN)
        page.locator("#pg-sweep-btn").click()
        page.locator("#pg-inside-stop").click()
        page.wait_for_function("() => window.pgJoined >= 1", timeout=30_000)
        page.wait_for_timeout(3_000)  # the sweep's own answer, if it ran, replaces Stop's
        assert "Stopped" in msg.inner_text()
        assert not page.locator("#pg-intervene-msg .pg-progress").count()
        browser.close()


def _below(page, control, message, most=80):
    """``message`` is drawn just under ``control`` (less than ``most`` px between them)."""
    a, b = page.locator(control).bounding_box(), page.locator(message).bounding_box()
    gap = b["y"] - (a["y"] + a["height"])
    assert 0 <= gap < most, (control, message, gap)


def _above(page, message, plot, most=80):
    a, b = page.locator(message).bounding_box(), page.locator(plot).bounding_box()
    gap = b["y"] - (a["y"] + a["height"])
    assert 0 <= gap < most, (message, plot, gap)


def _drawn(page, elem_id) -> bool:
    return page.evaluate(
        f"() => {{ const g = document.querySelector('#{elem_id} .js-plotly-plot');"
        " return !!(g && g.data && g.data.length); }"
    )


def test_inside_messages_sit_by_their_controls_and_a_new_run_clears_the_old_views(page_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page = _page(p, page_url)
        top = page.locator("#pg-inside-msg")
        # No run yet: opening the tab says so at its top (the tab was the control); the lens button
        # says it under itself.
        open_tab(page, "inside")
        top.get_by_text("Generate first", exact=False).wait_for(timeout=60_000)
        page.locator("#pg-lens-btn").click()
        lens_msg = page.locator("#pg-lens-msg")
        lens_msg.get_by_text("Generate first", exact=False).wait_for(timeout=60_000)
        _below(page, "#pg-lens-btn", "#pg-lens-msg")

        open_tab(page, "generate")
        set_number(page, "pg-max-new", 8)
        page.locator("#pg-generate").click()
        page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        open_tab(page, "inside")
        plot_ready(page, "pg-lens")
        page.wait_for_function("() => !document.querySelector('#pg-inside-msg').innerText.trim()", timeout=30_000)
        assert lens_msg.inner_text().strip() == ""
        assert lens_msg.is_hidden() and top.is_hidden()  # an empty message takes no room

        # A click on the attribution heatmap that names no cell: the reason sits just above the heatmap.
        open_tab(page, "inside-dla")
        page.locator("#pg-dla-btn").click()
        plot_ready(page, "pg-dla-heat")
        page.evaluate(
            "() => { window.pgPicked['pg-dla-heat'] = {x: null, y: null};"
            " document.querySelector('#pg-dla-pick').click(); }"
        )
        pick_msg = page.locator("#pg-dla-pick-msg")
        pick_msg.get_by_text("Draw the heatmap first", exact=False).wait_for(timeout=60_000)
        _above(page, "#pg-dla-pick-msg", "#pg-dla-heat")
        assert top.inner_text().strip() == "" and lens_msg.inner_text().strip() == ""
        page.locator("#pg-dla-md").get_by_text("sum", exact=False).first.wait_for(timeout=10_000)
        assert _drawn(page, "pg-dla-heat") and _drawn(page, "pg-dla-fall")

        # A new run: opening the tab again draws the lens for it and clears the views of the last run.
        open_tab(page, "generate")
        set_number(page, "pg-max-new", 9)
        page.locator("#pg-generate").click()
        page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        open_tab(page, "inside")
        page.wait_for_function(
            "() => !document.querySelector('#pg-dla-heat .js-plotly-plot')?.data?.length", timeout=30_000
        )
        assert not _drawn(page, "pg-dla-fall")
        assert page.locator("#pg-dla-md").inner_text().strip() == "" and pick_msg.inner_text().strip() == ""
        page.screenshot(path=str(ARTIFACTS / "teacher-inside-cleared.png"), full_page=True)
        browser.close()


def test_the_train_choices_and_the_module_tree_fit_a_1024_projector(page_url):
    """At 1024×768 in presenter mode, in English and 中文: each Train dropdown shows its whole
    choice, and the module tree breaks no class or module name across lines."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        for lang in ("en", "zh-CN"):
            page = browser.new_page(viewport={"width": 1024, "height": 768}, locale=lang)
            page.goto(f"{page_url}?present=1&lang={lang}")
            page.locator("#pg-summary").get_by_text("参数" if lang == "zh-CN" else "parameters").wait_for(
                timeout=60_000
            )
            open_tab(page, "train")
            for elem_id in ("pg-train-preset", "pg-train-corpus"):
                box = page.locator(f"#{elem_id} input")
                box.wait_for()
                assert box.evaluate("(e) => e.scrollWidth <= e.clientWidth"), (lang, elem_id, box.input_value())
            open_tab(page, "model")
            page.wait_for_function(
                "() => [...document.querySelectorAll('#pg-tree .body-cell span')]"
                ".some((s) => s.textContent.trim() === 'MultiHeadAttention' && s.offsetParent)",
                timeout=30_000,
            )
            broken = page.evaluate(
                """() => [...document.querySelectorAll('#pg-tree .body-cell')]
                    .filter((c) => c.parentElement.children[0] === c || c.parentElement.children[1] === c)
                    .map((c) => c.querySelector('span')).filter((s) => s && s.textContent.trim())
                    .filter((s) => s.getClientRects().length > 1 || s.getBoundingClientRect().height > 30)
                    .map((s) => s.textContent)"""
            )
            assert broken == [], (lang, broken)
            page.close()
        browser.close()
