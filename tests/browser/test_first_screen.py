"""Issue 34: a link's ``?tab=`` opens that tab; and after Generate, the token chips and the per-head heatmap stand side by side on the first
screen, with the heatmap's controls: at 1600×1000, and on a 1024×768 projector in presenter mode,
in English and in 中文. Measured from the elements' boxes at the page's top (nothing scrolled),
after a 40-token run; each case is screenshotted under tests/artifacts/first-screen-*.png."""

import pytest

from tests.browser.chromium import launch, open_tab, set_number, wait_on_generate
from tests.helpers import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CASES = [((1600, 1000), False), ((1024, 768), True)]
# The core view: the run's chips, its heatmap, and the controls that choose what the heatmap shows.
CORE = ("#pg-chips", "#pg-heatmap .js-plotly-plot", "#pg-view", "#pg-layer", "#pg-head", "#pg-query", "#pg-generate")


def _after_a_run(browser, page_url: str, lang: str, size: tuple[int, int], present: bool, tokens: int):
    """(context, page): the app's Generate tab in ``lang`` at ``size``, after a run of ``tokens`` tokens."""
    context = browser.new_context(locale=lang, viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.goto(f"{page_url}?lang={lang}" + ("&present=1" if present else ""))
    page.locator("#pg-summary").get_by_text("参数" if lang == "zh-CN" else "parameters", exact=False).wait_for(
        timeout=60_000
    )
    open_tab(page, "generate")
    set_number(page, "pg-max-new", tokens)
    page.locator("#pg-generate").click()
    page.locator(f"#pg-status [data-state=done][data-tokens='{tokens}']").wait_for(timeout=120_000)
    return context, page


def _boxes(page) -> dict:
    return {selector: page.locator(selector).first.bounding_box() for selector in CORE}


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_chips_heatmap_and_its_controls_share_the_first_screen(page_url, lang):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    problems = []
    with sync_playwright() as p:
        browser = launch(p)
        for (width, height), present in CASES:
            context, page = _after_a_run(browser, page_url, lang, (width, height), present, 40)
            wait_on_generate(
                page,
                "() => document.querySelector('#pg-heatmap .js-plotly-plot .xtick')"
                " && document.querySelector('#pg-query input[type=number]')?.value > 0",
                f"first-screen-map-{lang}-{width}",
            )
            page.wait_for_timeout(500)  # plotly's last relayout
            page.evaluate("() => window.scrollTo(0, 0)")
            name = f"{lang}-{width}x{height}{'-present' if present else ''}"
            page.screenshot(path=str(ARTIFACTS / f"first-screen-{name}.png"))
            boxes = _boxes(page)
            for selector, box in boxes.items():
                if box is None:
                    problems.append(f"{name}: {selector} is not shown")
                elif box["y"] < 0 or box["y"] + box["height"] > height or box["x"] + box["width"] > width:
                    problems.append(f"{name}: {selector} is not within the first screen: {box}")
            chips, heat = boxes["#pg-chips"], boxes["#pg-heatmap .js-plotly-plot"]
            if chips and heat:
                beside = chips["x"] + chips["width"] <= heat["x"]
                overlap = min(chips["y"] + chips["height"], heat["y"] + heat["height"]) - max(chips["y"], heat["y"])
                if not beside or overlap < 0.5 * chips["height"]:
                    problems.append(f"{name}: the chips {chips} do not stand beside the heatmap {heat}")
            if present:  # the chips are the projector's size, not shrunk to fit
                chip_px = page.evaluate(
                    "() => parseFloat(getComputedStyle(document.querySelector('#pg-chips .pg-chip')).fontSize)"
                )
                if chip_px < 20:
                    problems.append(f"{name}: chips are {chip_px} px")
            print(name, {k: (round(v["y"]), round(v["y"] + v["height"])) for k, v in boxes.items() if v})
            context.close()
        browser.close()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("tab", ["tokenizer", "inside"])
def test_a_link_naming_a_tab_opens_it(page_url, tab):
    """``?tab=tokenizer`` and ``?tab=inside`` opened Lessons: they open their tab (and stay there)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{page_url}?tab={tab}")
        page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
        selected = f"button[role=tab][data-tab-id='{tab}'][aria-selected=true]"
        page.locator(selected).wait_for(timeout=30_000)
        page.wait_for_timeout(1500)  # the page's own scripts (a remembered tab, a lesson link) have run
        assert page.locator(selected).count() == 1
        assert page.locator("button[role=tab][data-tab-id='lessons'][aria-selected=true]").count() == 0
        browser.close()


# Each label of the map's sliders on one line, and each range's last value inside the narrow column.
CONTROLS_FIT = """() => {
  const column = document.querySelector('#pg-att-controls').getBoundingClientRect();
  return ['#pg-layer', '#pg-head', '#pg-query'].map(id => {
    const range = document.createRange();
    range.selectNodeContents(document.querySelector(id + ' .head label [data-testid=block-info]'));
    const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
    const end = document.querySelector(id + ' .max_value').getBoundingClientRect();
    return {id, lines, end: end.right, column: column.right, shown: end.width > 0};
  });
}"""


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_maps_controls_fit_their_column_at_1024(page_url, lang):
    """At 1024×768 the controls' column is narrow: "查询位置" stood one character a line beside its number
    box, and the ranges' last values (5, 3) were cut off at the column's edge."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        context, page = _after_a_run(browser, page_url, lang, (1024, 768), False, 8)
        wait_on_generate(
            page, "() => document.querySelector('#pg-query input[type=number]')?.value > 0", f"controls-{lang}"
        )
        fits = page.evaluate(CONTROLS_FIT)
        context.close()
        browser.close()
    for f in fits:
        assert f["shown"] and f["lines"] == 1, f
        assert f["end"] <= f["column"] + 0.5, f
