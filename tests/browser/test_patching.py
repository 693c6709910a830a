"""The Activation patching view in a real browser (issue 37): each target and the path view drawn, in
English at 1600×1000 and in 中文 at 1024×768; screenshots go to tests/artifacts/patching-*.png."""

import pytest

from playground.engine.tokenizer import load_tokenizer
from playground.i18n import tr
from playground.server.patching_views import SUGGESTED_PAIRS
from tests.browser.chromium import chromium_or_skip, launch, open_tab
from tests.helpers import ARTIFACTS
from tools.pagewalk import plot_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TARGETS = ("resid_pre", "attn_head", "attn_head_pos", "mlp_out", "path")


def _figure(page, elem_id):
    return page.evaluate(
        f"() => {{ const g = document.querySelector('#{elem_id} .js-plotly-plot');"
        f" return g && g.data.length ? {{type: g.data[0].type, z: g.data[0].z || null, y: g.data[0].y || null,"
        f" title: g.layout.title.text}} : null; }}"
    )


def _choose_target(page, lang, target):
    page.locator("#pg-patch-target input").click()
    page.get_by_role("option", name=tr(lang, f"pt_t_{target}"), exact=True).click()


@pytest.mark.parametrize("lang,size", [("en", (1600, 1000)), ("zh-CN", (1024, 768))])
def test_each_target_and_the_path_view_are_drawn(app_url, lang, size):
    chromium_or_skip()
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch(p)
        context = browser.new_context(locale=lang, viewport={"width": size[0], "height": size[1]})
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(app_url)
        page.locator("#pg-summary").wait_for(timeout=60_000)
        open_tab(page, "inside")
        open_tab(page, "inside-patching")
        page.locator("#pg-patch-btn").wait_for()
        for target in TARGETS:
            _choose_target(page, lang, target)
            before = page.locator("#pg-patch-md").inner_text()
            page.locator("#pg-patch-btn").click()
            page.wait_for_function(
                "(before) => { const el = document.querySelector('#pg-patch-md');"
                " return el && el.innerText !== before && el.innerText.length > 0; }",
                arg=before,
                timeout=120_000,
            )
            page.wait_for_function("() => !document.querySelector('#pg-patch-msg .pg-progress')", timeout=120_000)
            plot_ready(page, "pg-patch-exact")
            plot_ready(page, "pg-patch-attr")
            exact = _figure(page, "pg-patch-exact")
            assert exact["type"] == "heatmap", target
            rows = {"attn_head_pos": 4}.get(target, 6)  # the bundled model: 6 layers of 4 heads
            assert len(exact["z"]) == rows, target
            assert all(v is not None for row in exact["z"][2 if target == "path" else 0 :] for v in row), target
            text = page.locator("#pg-patch-md").inner_text()
            if target == "path":
                assert _figure(page, "pg-patch-attr")["type"] == "bar"
                assert "L0H2 → L1H3" in text
            else:
                assert _figure(page, "pg-patch-attr")["type"] == "heatmap"
                word = "correlation" if lang == "en" else "相关系数"
                assert word in text, text
            page.wait_for_timeout(400)
            page.screenshot(path=str(ARTIFACTS / f"patching-{lang}-{size[0]}-{target}.png"), full_page=True)
        # a corrupted prompt of another length is refused with both lengths, in the page's language
        page.locator("#pg-patch-corrupted").locator("input, textarea").first.fill("When Elizabeth went to the store")
        page.locator("#pg-patch-btn").click()
        n = len(load_tokenizer().encode(SUGGESTED_PAIRS[0]["clean"]))
        page.locator("#pg-patch-msg").get_by_text(f"{n} tokens" if lang == "en" else f"{n} 个", exact=False).wait_for(
            timeout=60_000
        )
        page.screenshot(path=str(ARTIFACTS / f"patching-{lang}-{size[0]}-lengths.png"), full_page=True)
        assert not errors, errors
        browser.close()
