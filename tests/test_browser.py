"""A real browser: Debian's headless Chromium driven by Playwright loads the page, generates, and
checks that the token chips and an attention heatmap are really drawn. Saves a screenshot."""

import os
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = os.environ.get("PLAYGROUND_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


def _chromium_or_skip():
    if Path(CHROMIUM).exists() or shutil.which("chromium"):
        return
    if os.environ.get("CI"):
        pytest.fail("CI must run the browser test: install Debian's chromium (.ci/run does this)")
    pytest.skip("no chromium on this machine")


@pytest.fixture(scope="module")
def page_url(app_url):
    _chromium_or_skip()
    return app_url


def _launch(p):
    return p.chromium.launch(executable_path=CHROMIUM, args=ARGS)


def test_generate_draws_chips_and_heatmap(page_url):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = _launch(p)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        errors, external = [], []
        page.on("pageerror", lambda e: errors.append(str(e)))
        # `python app.py` must work with no network: no CDN scripts, fonts or analytics.
        page.on("request", lambda r: external.append(r.url)
                if not r.url.startswith(page_url.rstrip("/")) and not r.url.startswith(("data:", "blob:")) else None)
        page.goto(page_url)
        page.get_by_text("parameters", exact=False).first.wait_for(timeout=60_000)
        page.get_by_role("tab", name="Generate").click()
        page.get_by_role("button", name="Generate", exact=True).click()
        page.get_by_text("Done:", exact=False).wait_for(timeout=120_000)
        page.wait_for_function(
            "() => { const g = document.querySelector('#pg-heatmap .js-plotly-plot');"
            " return g && g.data && g.data.length > 0 && g.querySelector('.hm image, .heatmaplayer image'); }",
            timeout=60_000,
        )
        # Chips: every prompt token and every generated token is drawn with its label.
        chip_labels = page.locator("#pg-chips .category-label, #pg-chips .label").all_inner_texts()
        prompt_chips = [c for c in chip_labels if c.strip().startswith("#")]
        generated_chips = [c for c in chip_labels if "%" in c]
        assert len(prompt_chips) >= 5, chip_labels[:10]
        assert len(generated_chips) == 40, chip_labels
        # The heatmap holds a square causal matrix: as many rows as tokens in the window.
        shape = page.evaluate(
            "() => { const g = document.querySelector('#pg-heatmap .js-plotly-plot');"
            " const d = g._fullData.find(t => t.type === 'heatmap');"
            " return [d.z.length, d.z[0].length, Number.isNaN(d.z[0][1]) || d.z[0][1] === null ? null : d.z[0][1]]; }"
        )
        assert shape[0] == shape[1] >= 40
        assert shape[2] is None  # above the diagonal: nothing, not a colour
        box = page.locator("#pg-heatmap .js-plotly-plot").bounding_box()
        assert box["width"] > 300 and box["height"] > 300
        page.screenshot(path=str(ARTIFACTS / "generate.png"), full_page=True)
        assert not errors, errors
        assert not external, external
        browser.close()


def test_chinese_interface(page_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = _launch(p)
        page = browser.new_page(locale="zh-CN", viewport={"width": 1400, "height": 1000})
        page.goto(page_url)
        page.get_by_role("tab", name="生成与注意力").wait_for(timeout=60_000)
        page.get_by_role("button", name="构建模型").wait_for(timeout=60_000)
        page.get_by_text("parameters", exact=False).first.wait_for(timeout=60_000)  # the session has loaded
        assert page.get_by_role("button", name="Build model").count() == 0
        page.screenshot(path=str(ARTIFACTS / "zh.png"))
        browser.close()
