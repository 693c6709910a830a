"""A real browser: the Model tab's "GPT-2 ↔ today's models" accordion draws GPT-2 small and Llama 3.2 1B side
by side (both built on the meta device), with GQA's smaller W_key marked. Screenshot in tests/artifacts/."""

import pytest

from tests.browser.chromium import launch, open_tab
from tests.helpers import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_side_by_side_draws_both_trees_and_breakdowns(page_url):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1500, "height": 1400})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_url)
        open_tab(page, "model")
        page.locator("#pg-sbs").get_by_text("side by side").first.click()
        page.locator("#pg-sbs-go").click()
        page.wait_for_function(
            "() => (document.querySelector('#pg-sbs-summary')?.innerText || '').includes('1,235,814,400')",
            timeout=120_000,
        )
        tree = page.locator("#pg-sbs-tree")
        tree.get_by_text("W_key").first.wait_for(timeout=30_000)
        assert "1,048,576" in tree.inner_text() and "590,592" in tree.inner_text()  # W_key: 8 heads vs 12 heads·64
        assert "100,663,296" in page.locator("#pg-sbs-breakdown").inner_text()
        page.locator("#pg-sbs").screenshot(path=str(ARTIFACTS / "side_by_side.png"))
        browser.close()
    assert not errors, errors
