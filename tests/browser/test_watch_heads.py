"""The Train tab's "watch an induction head form" run in Chromium: its estimate is shown before it
starts, the head curves grow while it trains, and the scrubber at two logged steps draws two
different maps. Screenshots at 1600×1000 and 1024×768 go to tests/artifacts/watch-heads-*.png."""

from pathlib import Path

from tests.browser.chromium import launch, open_tab, set_number

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

LOGGED_POINTS = "() => { const g = document.querySelector('#pg-train-heads-plot .js-plotly-plot'); return g && g.data && g.data.length ? g.data[0].x.length : 0; }"
MAP_Z = "() => { const g = document.querySelector('#pg-train-heads-map .js-plotly-plot'); return g && g.data && g.data.length ? JSON.stringify(g.data[0].z) : ''; }"


def _map_at(page, step: int) -> str:
    set_number(page, "pg-train-heads-step", step)
    try:
        page.wait_for_function(
            f"() => {{ const f = document.querySelector('#pg-train-heads-facts .pg-heads-facts'); return f && f.dataset.step == '{step}'; }}",
            timeout=60_000,
        )
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "watch-heads-failed.png"), full_page=True)
        print("facts:", page.locator("#pg-train-heads-facts").inner_html()[:500])
        print("slider:", page.locator("#pg-train-heads-step").inner_html()[:800])
        raise
    return page.evaluate(MAP_Z)


def test_the_induction_run_draws_growing_curves_and_scrubs_two_steps(page_url):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_url)
        page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
        open_tab(page, "train")
        estimate = page.locator("#pg-heads-estimate .pg-estimate")
        estimate.wait_for(timeout=180_000)  # a few of the run's own steps are timed first
        assert float(estimate.get_attribute("data-seconds")) > 0
        page.locator("#pg-train-heads").click()
        page.wait_for_function(f"() => ({LOGGED_POINTS})() >= 2", timeout=180_000)
        first = page.evaluate(LOGGED_POINTS)
        page.wait_for_function(f"() => ({LOGGED_POINTS})() >= {first + 2}", timeout=180_000)  # the curves grow
        # Stopped, the run keeps what it logged; the scrubber reads it while the page is calm (on a loaded
        # machine a page still drawing the live curves answered a scrub slowly)
        # (the click as the page gets it, without waiting for the button to hold still: on a 2-core machine
        # training at full speed, the page redrawing the live curves kept Playwright's checks waiting 30 s)
        page.locator("#pg-train-stop").dispatch_event("click")
        try:
            page.wait_for_function(
                "() => document.querySelector('#pg-train-msg').innerText.match(/Stopped|Finished/)", timeout=240_000
            )
        except Exception:
            print("message:", page.locator("#pg-train-msg").inner_text()[:400])
            page.screenshot(path=str(ARTIFACTS / "watch-heads-stop-failed.png"), full_page=True)
            raise
        every = int(page.locator("#pg-train-heads-step input[type=number]").get_attribute("step") or 10)
        early, later = _map_at(page, every), _map_at(page, every * (first + 1))
        assert early and later and early != later
        page.screenshot(path=str(ARTIFACTS / "watch-heads-1600.png"), full_page=True)
        page.set_viewport_size({"width": 1024, "height": 768})
        page.wait_for_timeout(1500)
        page.screenshot(path=str(ARTIFACTS / "watch-heads-1024.png"), full_page=True)
        assert not errors, errors
        browser.close()
