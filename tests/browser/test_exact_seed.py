"""The page keeps a seed past 2⁵³ exactly: typed in the seed box (a text box; a number box would hold
9007199254740993 as the JavaScript number 9007199254740992), it is the seed the run says it used."""

import pytest

from tests.browser.chromium import launch, open_tab, set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SEED = 2**53 + 1


def test_a_seed_typed_past_2_53_is_the_seed_of_the_run(page_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(page_url)
        page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
        open_tab(page, "generate")
        set_number(page, "pg-max-new", 3)
        box = page.locator("#pg-seed input, #pg-seed textarea").first
        box.fill(str(SEED))
        box.press("Enter")
        page.locator("#pg-generate").click()
        page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        page.wait_for_function(
            f"() => (document.querySelector('#pg-step-md') || {{}}).innerText?.includes('seed {SEED}.')",
            timeout=60_000,
        )
        assert box.input_value() == str(SEED)
        browser.close()
