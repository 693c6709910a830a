"""The Inside tab in a real browser (issue 11): generate, then open each view and check its figure
is drawn with the live numbers; a screenshot of each view goes to tests/artifacts/inside-*.png."""

import pytest

from test_browser import ARTIFACTS, _chromium_or_skip, _launch

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _plot_ready(page, elem_id, timeout=90_000):
    page.wait_for_function(
        f"() => {{ const g = document.querySelector('#{elem_id} .js-plotly-plot');"
        f" return g && g.data && g.data.length > 0; }}", timeout=timeout)


def _trace(page, elem_id):
    return page.evaluate(f"() => {{ const g = document.querySelector('#{elem_id} .js-plotly-plot');"
                         f" const d = g._fullData[0]; return {{type: d.type, z: d.z || null, y: d.y || null,"
                         f" x: d.x || null, text: d.text || null}}; }}")


def test_each_inside_view_is_drawn(app_url):
    _chromium_or_skip()
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = _launch(p)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(app_url)
        page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
        page.locator("button[role=tab]").nth(1).click()
        box = page.locator("#pg-max-new input[type=number]")
        box.fill("24")
        box.press("Enter")
        page.locator("#pg-generate").click()
        page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        n_tokens = page.locator("#pg-chips .pg-chip").count()

        page.get_by_role("tab", name="Inside").click()  # opening the tab draws the lens
        _plot_ready(page, "pg-lens")
        lens = _trace(page, "pg-lens")
        assert lens["type"] == "heatmap"
        assert len(lens["z"]) == 7  # embeddings + 6 blocks of the bundled model
        assert len(lens["z"][0]) == min(32, n_tokens)
        assert "Scroll" in page.locator("#pg-lens-note").inner_text() or n_tokens <= 32
        _plot_ready(page, "pg-lens-cell")
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "inside-lens.png"), full_page=True)

        page.get_by_role("tab", name="Logit attribution").click()
        page.locator("#pg-dla-btn").click()
        _plot_ready(page, "pg-dla-heat")
        _plot_ready(page, "pg-dla-fall")
        assert "Parts sum to" in page.locator("#pg-dla-md").inner_text()
        heat = _trace(page, "pg-dla-heat")
        assert len(heat["z"]) == 6 and len(heat["z"][0]) == 5  # 4 heads + the MLP column
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "inside-attribution.png"), full_page=True)

        page.get_by_role("tab", name="Attention maths").click()
        page.locator("#pg-maths-btn").click()
        _plot_ready(page, "pg-maths-plot")
        assert "head_dim" in page.locator("#pg-maths-md").inner_text()
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "inside-maths.png"), full_page=True)

        page.get_by_role("tab", name="Interventions").click()
        page.get_by_label("Zero-ablate heads", exact=False).fill("3.0")
        page.get_by_label("Scale one head", exact=False).fill("3.0")
        page.locator("#pg-intervene-btn").click()
        _plot_ready(page, "pg-intervene-bars")
        _plot_ready(page, "pg-intervene-loss")
        _plot_ready(page, "pg-intervene-lens")
        page.locator("#pg-dose-btn").click()
        _plot_ready(page, "pg-dose")
        dose = _trace(page, "pg-dose")
        assert len(dose["x"]) == 11
        page.locator("#pg-sweep-btn").click()
        _plot_ready(page, "pg-sweep")
        sweep = _trace(page, "pg-sweep")
        assert len(sweep["z"]) == 6 and len(sweep["z"][0]) == 4
        assert "Most harmful" in page.locator("#pg-sweep-md").inner_text()
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "inside-interventions.png"), full_page=True)
        assert not errors, errors
        browser.close()
