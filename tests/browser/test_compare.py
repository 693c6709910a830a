"""A real browser: a link with query parameters opens the Generate tab pre-filled (out-of-range values
clamped and said), and the Score & compare views render. Screenshots go to tests/artifacts/."""

from urllib.parse import urlencode

import pytest

from tests.browser.chromium import launch, open_tab
from tests.helpers import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_link_prefills_generate_and_side_by_side_views_render(page_url):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    query = urlencode(
        {
            "prompt": "JULIET:\nO Romeo, Romeo!",
            "temperature": 0.55,
            "top_k": 7,
            "top_p": 0.9,
            "seed": 1234,
            "max_new": 999,
            "greedy": "false",
            "tab": "generate",
        }
    )
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_url.rstrip("/") + "/?" + query)
        prompt = page.locator("#pg-prompt textarea")
        prompt.wait_for(timeout=60_000)
        page.wait_for_function(
            "() => document.querySelector('#pg-prompt textarea').value.startsWith('JULIET')", timeout=60_000
        )
        assert prompt.is_visible()  # the Generate tab is the one shown
        assert prompt.input_value() == "JULIET:\nO Romeo, Romeo!"
        msg = page.locator("#pg-input-msg")
        msg.get_by_text("max_new=999 is outside 1–512; set to 512").wait_for(timeout=30_000)
        max_new = page.locator("#pg-max-new input[type=number]").input_value()
        assert max_new == "512"
        numbers = page.evaluate(
            "() => [...document.querySelectorAll('input[type=number]')].filter(e => e.offsetParent).map(e => e.value)"
        )
        assert "0.55" in numbers and "7" in numbers and "0.9" in numbers, numbers
        assert page.locator("#pg-seed input, #pg-seed textarea").first.input_value() == "1234"  # a text box
        page.screenshot(path=str(ARTIFACTS / "url_prefill.png"), full_page=False)

        # Score & compare: score a text (chips coloured by surprisal), then two settings side by side.
        open_tab(page, "compare")
        page.locator("#pg-score-text textarea").fill("ROMEO:\nBut soft, what light through yonder window breaks?")
        page.locator("#pg-score").click()
        page.locator("#pg-score-a .pg-chip[data-bits]").first.wait_for(timeout=60_000)
        assert page.locator("#pg-score-a .pg-chip[data-bits]").count() >= 10
        assert "loss (nats/token)" in page.locator("#pg-score-table").inner_text()
        page.locator("#pg-two-settings").click()
        page.locator("#pg-side-msg").get_by_text("Done").wait_for(timeout=120_000)
        assert page.locator("#pg-side .pg-stream").count() == 2
        assert page.locator("#pg-side .pg-stream").first.locator(".pg-chip").count() >= 40
        note = page.locator("#pg-side .pg-diverge-note").inner_text()
        assert "diverge at step" in note or "differ from their first" in note or "identical" in note
        page.locator("#pg-side").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)

        # Two models on the same text: model B (the form's default, a random nano model), then A and B.
        page.get_by_text("Second model (B)").click()
        page.locator("#pg-load-b").click()
        page.locator("#pg-b-msg").get_by_text("Model B ready").wait_for(timeout=120_000)
        page.locator("#pg-score-ab").click()
        page.locator("#pg-score-diff .pg-chip[data-diff]").first.wait_for(timeout=120_000)
        assert (
            page.locator("#pg-score-b .pg-chip[data-bits]").count()
            == page.locator("#pg-score-a .pg-chip[data-bits]").count()
        )
        page.locator("#pg-score-diff").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "score_two_models.png"), full_page=False)

        # A run in the Generate tab, then its receipt for one step.
        open_tab(page, "generate")
        page.locator("#pg-max-new input[type=number]").fill("12")
        page.locator("#pg-max-new input[type=number]").press("Enter")
        page.get_by_role("button", name="Generate", exact=True).click()
        page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        open_tab(page, "compare")
        page.get_by_text("Sampling receipt").click()
        page.locator("#pg-receipt-btn").click()
        page.locator("#pg-receipt .pg-receipt-bar .pg-u").wait_for(timeout=60_000)
        assert "u fell into" in page.locator("#pg-receipt").inner_text()
        page.locator("#pg-receipt").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "receipt.png"), full_page=False)
        assert not errors, errors
        browser.close()
