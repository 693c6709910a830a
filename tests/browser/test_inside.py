"""The Inside tab in a real browser (issue 11): generate, then open each view and check its figure
is drawn with the live numbers; a screenshot of each view goes to tests/artifacts/inside-*.png.
Clicking a heatmap cell (a real mouse click at the cell's pixel, found from the plot's axes) picks
it: the lens cell's top-10 and KL equal playground.inside.lenses.lens_cell on the run's ids, read through
the app's API in the browser's own session."""

import re

import pytest

from tests.browser.chromium import chromium_or_skip, launch, open_tab
from tests.helpers import ARTIFACTS
from tools.pagewalk import plot_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _trace(page, elem_id):
    return page.evaluate(
        f"() => {{ const g = document.querySelector('#{elem_id} .js-plotly-plot');"
        f" const d = g._fullData[0]; return {{type: d.type, z: d.z || null, y: d.y || null,"
        f" x: d.x || null, text: d.text || null}}; }}"
    )


def _click_cell(page, elem_id, x, y):
    """A real mouse click on the centre of the heatmap cell (x, y) of the plot in #elem_id."""
    page.locator(f"#{elem_id}").scroll_into_view_if_needed()
    at = page.evaluate(f"""() => {{ const g = document.querySelector('#{elem_id} .js-plotly-plot');
        const xa = g._fullLayout.xaxis, ya = g._fullLayout.yaxis, r = g.getBoundingClientRect();
        return [r.left + xa._offset + xa.l2p({x}), r.top + ya._offset + ya.l2p({y})]; }}""")
    page.mouse.click(*at)


def _run_ids(page) -> list[int]:
    """The page's run as token ids, from its chips (each chip's title names its position and id). Not a
    gradio_client on the page's own session: Gradio's queue then has two streams for one session, and the
    client's answer once went to the page's, leaving the client waiting for good (a fresh-clone run)."""
    chips = page.evaluate(
        "() => [...document.querySelectorAll('#pg-chips .pg-chip')].map((c) => [+c.dataset.pos, c.title])"
    )
    ids = {pos: int(re.search(r"\bid (\d+)", title).group(1)) for pos, title in chips}
    assert sorted(ids) == list(range(len(ids)))
    return [ids[p] for p in range(len(ids))]


def _check_lens_click(page):
    """Click a lens cell that is not the default one; the top-10 bars, their title and the KL text
    must name it and carry lenses.lens_cell's numbers for the run's own ids."""
    from playground.inside import lenses
    from playground.server.model_cache import CACHE
    from playground.server.recipes import default_recipe

    ids = _run_ids(page)
    model = CACHE.get(default_recipe())
    positions = _trace(page, "pg-lens")["x"]
    layer, pos = 2, positions[len(positions) // 3]
    _click_cell(page, "pg-lens", pos, layer)
    page.wait_for_function(
        f"""() => {{ const g = document.querySelector('#pg-lens-cell .js-plotly-plot');
        return g && g.layout.title.text.includes('after block {layer - 1}, position {pos}:'); }}""",
        timeout=30_000,
    )
    assert page.locator("#pg-lens-layer input").input_value() == str(layer)  # the fields follow the click
    assert page.locator("#pg-lens-pos input").input_value() == str(pos)
    want = lenses.lens_cell(model, ids, layer, pos)  # the run fits the context: window start 0
    bars = page.evaluate(
        "() => { const g = document.querySelector('#pg-lens-cell .js-plotly-plot');"
        " return {x: g.data[0].x, ticks: g.layout.yaxis.ticktext}; }"
    )
    assert [int(re.search(r"\((\d+)\)$", t).group(1)) for t in bars["ticks"]] == [t for t, _ in want["top"]]
    assert bars["x"] == pytest.approx([p for _, p in want["top"]], abs=1e-6)
    text = page.locator("#pg-lens-cell").locator("xpath=..").inner_text()
    assert f"after block {layer - 1}, position {pos}" in text
    kl = float(re.search(r"this layer\) = ([0-9.]+) nats", text).group(1))
    assert kl == pytest.approx(want["kl_to_final_nats"], abs=6e-4)
    selected = page.evaluate("() => document.querySelector('#pg-lens .js-plotly-plot').layout.shapes[0]")
    assert (selected["x0"] + selected["x1"]) / 2 == pos and (selected["y0"] + selected["y1"]) / 2 == layer
    page.wait_for_timeout(500)
    page.locator("#pg-lens").screenshot(path=str(ARTIFACTS / "inside-lens-click.png"))

    # A narrower page shows fewer positions (each cell keeps room for its text), still around the cell.
    wide = len(_trace(page, "pg-lens")["x"])
    page.set_viewport_size({"width": 1024, "height": 768})
    page.wait_for_function(
        f"() => document.querySelector('#pg-lens .js-plotly-plot').data[0].x.length < {wide}", timeout=30_000
    )
    narrow = _trace(page, "pg-lens")["x"]
    assert 8 <= len(narrow) < wide and pos in narrow
    assert page.locator("#pg-lens-layer input").input_value() == str(layer)
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "inside-lens-1024.png"), full_page=True)
    page.set_viewport_size({"width": 1500, "height": 1100})


def test_each_inside_view_is_drawn(app_url):
    chromium_or_skip()
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(app_url)
        page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
        open_tab(page, "generate")
        box = page.locator("#pg-max-new input[type=number]")
        box.fill("24")
        box.press("Enter")
        page.locator("#pg-generate").click()
        page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        n_tokens = page.locator("#pg-chips .pg-chip").count()

        open_tab(page, "inside")  # opening the tab draws the lens
        plot_ready(page, "pg-lens")
        lens = _trace(page, "pg-lens")
        assert lens["type"] == "heatmap"
        assert len(lens["z"]) == 7  # embeddings + 6 blocks of the bundled model
        shown = int(page.locator("#pg-lens-cols input").input_value())  # as many as fit the page: 8-32
        assert len(lens["z"][0]) == min(shown, n_tokens) and 8 <= shown <= 32
        assert "Scroll" in page.locator("#pg-lens-note").inner_text() or n_tokens <= shown
        assert "Click a cell" in page.locator(".pg-click-hint").first.inner_text()
        plot_ready(page, "pg-lens-cell")
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "inside-lens.png"), full_page=True)
        _check_lens_click(page)

        open_tab(page, "inside-dla")
        page.locator("#pg-dla-btn").click()
        plot_ready(page, "pg-dla-heat")
        plot_ready(page, "pg-dla-fall")
        assert "Parts sum to" in page.locator("#pg-dla-md").inner_text()
        heat = _trace(page, "pg-dla-heat")
        assert len(heat["z"]) == 6 and len(heat["z"][0]) == 5  # 4 heads + the MLP column
        _click_cell(page, "pg-dla-heat", 2, 3)  # head 2 of layer 3: its maths, and picked for the dose
        page.locator("#pg-dla-pick-md").get_by_text("Picked head 2 of layer 3", exact=False).wait_for(timeout=30_000)
        picked = page.evaluate(
            "() => document.querySelector('#pg-dla-heat .js-plotly-plot').layout.shapes"
            ".filter(s => s.name === 'pg-pick')"
        )
        assert [((s["x0"] + s["x1"]) / 2, (s["y0"] + s["y1"]) / 2) for s in picked] == [(2, 3)]  # outlined
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "inside-attribution.png"), full_page=True)

        open_tab(page, "inside-maths")
        plot_ready(page, "pg-maths-plot")  # drawn by the click
        assert page.locator("#pg-maths-md").inner_text().startswith("Layer 3, head 2, query position")
        page.locator("#pg-maths-btn").click()
        plot_ready(page, "pg-maths-plot")
        assert "head_dim" in page.locator("#pg-maths-md").inner_text()
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "inside-maths.png"), full_page=True)

        open_tab(page, "inside-intervene")
        page.get_by_label("Zero-ablate heads", exact=False).fill("3.0")
        page.get_by_label("Scale one head", exact=False).fill("3.0")
        page.locator("#pg-intervene-btn").click()
        plot_ready(page, "pg-intervene-bars")
        plot_ready(page, "pg-intervene-loss")
        plot_ready(page, "pg-intervene-lens")
        page.locator("#pg-dose-btn").click()
        plot_ready(page, "pg-dose")  # drawn as it grows: wait for the whole curve
        page.wait_for_function(
            "() => document.querySelector('#pg-dose .js-plotly-plot')._fullData[0].x.length === 11", timeout=120_000
        )
        dose = _trace(page, "pg-dose")
        assert len(dose["x"]) == 11
        page.locator("#pg-sweep-btn").click()
        page.locator("#pg-sweep-md").get_by_text("Most harmful", exact=False).wait_for(timeout=120_000)
        sweep = _trace(page, "pg-sweep")
        assert len(sweep["z"]) == 6 and len(sweep["z"][0]) == 4
        assert "Most harmful" in page.locator("#pg-sweep-md").inner_text()
        _click_cell(page, "pg-sweep", 1, 4)  # zero head 1 of layer 4 alone: Δ mean loss = the sweep's cell
        page.wait_for_function(
            "() => document.querySelector('#pg-intervene-md').innerText.startsWith('Zero L4H1.')", timeout=30_000
        )
        assert page.get_by_label("Zero-ablate heads", exact=False).input_value() == "4.1"
        delta = float(re.search(r"nats \(([-+][0-9.]+)\)", page.locator("#pg-intervene-md").inner_text()).group(1))
        assert delta == pytest.approx(sweep["z"][4][1], abs=6e-4)
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "inside-interventions.png"), full_page=True)
        assert not errors, errors
        browser.close()
