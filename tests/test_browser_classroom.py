"""Issue 12 in a real page (headless Chromium): the Tokenizer tab on Chinese and emoji text, and the
whole-run heatmap. Screenshots go to tests/artifacts/ (tokenizer.png, heatmap_whole.png)."""

import html

import pytest
from test_browser import ARTIFACTS, _chromium_or_skip, _launch, _set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TEXT = "从前有座山 🦙 unbelievable 👩‍👧!"


@pytest.fixture(scope="module")
def page_url(app_url):
    _chromium_or_skip()
    return app_url


def _open(p, url, **context):
    browser = _launch(p)
    page = browser.new_page(viewport={"width": 1280, "height": 900}, **context)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
    return browser, page, errors


def test_tokenizer_tab_groups_bytes_under_their_characters(page_url):
    from playwright.sync_api import sync_playwright

    from playground.engine.tokenizer import load_tokenizer

    tok = load_tokenizer()
    ids = tok.encode(TEXT)
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser, page, errors = _open(p, page_url)
        page.get_by_role("tab", name="Tokenizer").click()
        page.locator("#pg-tok-text textarea").fill(TEXT)
        page.locator("#pg-tok-btn").click()
        page.locator(f"#pg-tok-summary [data-tokens='{len(ids)}']").wait_for(timeout=30_000)
        chips = page.locator("#pg-tok-chips .pg-tok")
        assert chips.count() == len(ids)
        assert [int(x) for x in chips.evaluate_all("cs => cs.map(c => c.dataset.id)")] == ids
        # every chip's title carries tiktoken's own bytes for its id
        titles = chips.evaluate_all("cs => cs.map(c => c.title)")
        for token_id, title in zip(ids, titles):
            raw = tok.encoding.decode_single_token_bytes(token_id)
            assert f"bytes {' '.join(f'{b:02x}' for b in raw)}" in title
        # fragments sit under the characters they build; nothing is drawn as U+FFFD
        groups = page.locator("#pg-tok-chips .pg-tgroup")
        chars = [html.unescape(c) for c in groups.evaluate_all("gs => gs.map(g => g.dataset.chars)")]
        assert "从" in chars and "␣🦙" in chars and "␣👩" in chars and "⟨U+200D⟩" in chars
        cong = page.locator("#pg-tok-chips .pg-tgroup[data-chars='从'] .pg-tok")
        assert cong.count() == 2
        assert "\ufffd" not in page.locator("#pg-tok-chips").inner_text()
        # the most-split word is replayed, merge by merge, ending in its tokens
        merges = page.locator("#pg-tok-merges .pg-merges").first
        merges.wait_for(timeout=30_000)
        word = merges.get_attribute("data-word")
        assert int(merges.get_attribute("data-tokens")) == len(tok.encode(word))
        assert page.locator("#pg-tok-merges tr[data-rank]").count() >= 1
        page.screenshot(path=str(ARTIFACTS / "tokenizer.png"), full_page=True)
        # a typed word (not one of the text's) is replayed too
        page.locator("#pg-tok-word input").fill("tokenization")
        page.locator("#pg-tok-word input").press("Enter")
        page.locator("#pg-tok-merges .pg-merges[data-word='tokenization'][data-tokens='2']").wait_for(timeout=30_000)
        width = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert width[0] <= width[1]  # no horizontal scroll at 1280 wide
        assert not errors, errors
        browser.close()


def test_generate_chips_name_the_character_of_a_fragment(page_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page, errors = _open(p, page_url)
        page.locator("button[role=tab]").nth(1).click()
        page.locator("#pg-prompt textarea").fill("从前")
        _set_number(page, "pg-max-new", 2)
        page.locator("#pg-generate").click()
        page.locator("#pg-status [data-state=done]").wait_for(timeout=60_000)
        first = page.locator("#pg-chips .pg-prompt.pg-frag").first
        assert "bytes 1–2 of 3 of 从" in first.get_attribute("title")
        assert "从 1/2" in first.inner_text()
        assert not errors, errors
        browser.close()


def test_whole_run_heatmap_in_the_page(page_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page, errors = _open(p, page_url)
        page.locator("button[role=tab]").nth(1).click()
        _set_number(page, "pg-max-new", 200)
        page.locator("#pg-generate").click()
        page.locator("#pg-status [data-state=done]").wait_for(timeout=180_000)
        page.wait_for_function(
            "() => (document.querySelector('#pg-heatmap .js-plotly-plot')?.layout?.title?.text"
            " || '').includes('showing positions')",
            timeout=60_000,
        )
        t0 = page.evaluate("() => performance.now()")
        page.locator("#pg-span").get_by_text("whole run").click()
        page.wait_for_function(
            "() => (document.querySelector('#pg-heatmap .js-plotly-plot')?.layout?.title?.text"
            " || '').includes('whole run')",
            timeout=60_000,
        )
        shown_ms = page.evaluate("() => performance.now()") - t0
        n, title = page.evaluate(
            "() => { const g = document.querySelector('#pg-heatmap .js-plotly-plot');"
            " const d = g._fullData.find(t => t.type === 'heatmap');"
            " return [d.z.length, g.layout.title.text]; }"
        )
        assert n > 200 and f"whole run, {n}×{n}" in title
        assert page.locator("#pg-heatmap .heatmaplayer image, #pg-heatmap .hm image").count() >= 1
        page.locator("#pg-heatmap").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "heatmap_whole.png"), full_page=False)
        print(f"whole-run heatmap of {n}×{n} shown {shown_ms:.0f} ms after the click")
        assert not errors, errors
        browser.close()


def test_train_tab_estimate_and_messages_are_beside_the_button(page_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = _launch(p)
        page = browser.new_page(viewport={"width": 1024, "height": 768})
        page.goto(page_url)
        page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
        page.get_by_role("tab", name="Train").click()
        estimate = page.locator("#pg-train-estimate .pg-estimate")
        estimate.wait_for(timeout=180_000)  # a few real steps of nano are timed the first time
        assert float(estimate.get_attribute("data-seconds")) > 0
        assert "80 steps" in estimate.inner_text()
        # the estimate and the Train button are on the first screen of a 1024×768 projector
        for selector in ("#pg-train", "#pg-train-estimate"):
            box = page.locator(selector).bounding_box()
            assert box and box["y"] + box["height"] <= 768, (selector, box)
        page.locator("#pg-train-steps input").fill("160")
        page.locator("#pg-train-steps input").press("Enter")
        page.wait_for_function(
            "() => document.querySelector('#pg-train-estimate').innerText.includes('160 steps')", timeout=60_000
        )
        page.screenshot(path=str(ARTIFACTS / "train.png"))
        browser.close()
