"""A real browser builds a Llama-3.2-style model in the Model tab (RoPE, RMSNorm, SwiGLU, 8 query heads on 2
key/value heads), generates, and the Generate tab's heatmaps show each query head with the KV head it shares
named (and, in the all-heads grid, coloured by it). Screenshots in tests/artifacts/ (issue 38)."""

import pytest

from playground.engine.presets import MODERN_PRESETS
from playground.i18n import tr
from tests.browser.chromium import launch, open_tab
from tests.helpers import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LLAMA = MODERN_PRESETS["llama-3.2-style"]
GROUP = LLAMA.n_heads // LLAMA.kv_heads
FIGURE = "document.querySelector('#pg-heatmap .js-plotly-plot')"


def test_build_a_gqa_variant_generate_and_see_the_shared_kv_heads(page_url):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1500, "height": 1300})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_url)
        open_tab(page, "model")
        page.locator("#pg-weights").get_by_text(tr("en", "w_random"), exact=True).click()
        page.locator("#pg-preset input").click()
        page.get_by_role("option", name=tr("en", "preset_llama-3.2-style")).click()
        # choosing the preset previews its KV cache a token before anything is built
        shares = f"{LLAMA.n_heads} query heads share {LLAMA.kv_heads} key/value heads"
        page.locator("#pg-tying").get_by_text(shares, exact=False).wait_for(timeout=30_000)
        page.locator("#pg-build").click()
        page.locator("#pg-build-msg").get_by_text("Ready", exact=False).wait_for(timeout=120_000)
        summary = page.locator("#pg-model-in-use").inner_text() + page.locator("#pg-tying").inner_text()
        assert "since GPT-2" in summary and "n_kv_heads" in summary, summary
        tree = page.locator("#pg-tree").inner_text()
        assert "RMSNorm" in tree and "SwiGLU" in tree, tree[:400]
        page.screenshot(path=str(ARTIFACTS / "gqa-build-model-tab.png"), full_page=False)

        open_tab(page, "generate")
        page.locator("#pg-generate").click()
        page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        # the one-head map: head 0 reads KV head 0, shared with query heads 0..GROUP-1
        page.wait_for_function(
            f"(want) => ({FIGURE}?.layout?.title?.text || '').replace(/<br>/g, ' ').includes(want)",
            arg=f"reads KV head 0, shared by query heads 0–{GROUP - 1}",
            timeout=60_000,
        )
        page.locator("#pg-heatmap").screenshot(path=str(ARTIFACTS / "gqa-one-head.png"))
        page.locator("#pg-view input").click()
        page.get_by_role("option", name=tr("en", "v_all")).click()
        page.wait_for_function(
            f"(want) => ({FIGURE}?.layout?.annotations || []).some(a => a.text === want)",
            arg=f"head {LLAMA.n_heads - 1} · KV {LLAMA.kv_heads - 1}",
            timeout=60_000,
        )
        titles = page.evaluate(
            f"() => {FIGURE}.layout.annotations.filter(a => a.text.startsWith('head ')).map(a => [a.text, a.font.color])"
        )
        assert [t for t, _ in titles] == [f"head {h} · KV {h // GROUP}" for h in range(LLAMA.n_heads)]
        colours = [c for _, c in titles]
        assert all((colours[h] == colours[j]) == (h // GROUP == j // GROUP) for h in range(8) for j in range(8))
        assert page.locator("#pg-heatmap .heatmaplayer image, #pg-heatmap .hm image").count() >= LLAMA.n_heads
        page.locator("#pg-heatmap").scroll_into_view_if_needed()
        page.locator("#pg-heatmap").screenshot(path=str(ARTIFACTS / "gqa-all-heads.png"))
        browser.close()
    assert not errors, errors


def test_a_llama_folder_loads_and_its_chips_show_its_own_tokens(page_url, tmp_path):
    """A tiny random Llama checkpoint folder (transformers' save_pretrained, a character-level tokenizer.json)
    typed into the Model tab's hub field: built, generated, its chips in the folder's own tokens."""
    import os

    from playwright.sync_api import sync_playwright

    from playground.engine.hf_tokenizer import FolderTokenizer
    from tests.tiny_models import write_llama_folder

    pytest.importorskip("transformers")
    folder = tmp_path / "models" / "tiny-llama"
    write_llama_folder(folder)
    tok = FolderTokenizer(folder / "tokenizer.json")
    prompt = "the cat sat"
    old = os.environ.get("PLAYGROUND_MODEL_DIRS")
    os.environ["PLAYGROUND_MODEL_DIRS"] = str(tmp_path / "models")  # the server reads it at each build
    try:
        with sync_playwright() as p:
            browser = launch(p)
            page = browser.new_page(viewport={"width": 1500, "height": 1300})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_url)
            open_tab(page, "model")
            page.locator("#pg-weights").get_by_text(tr("en", "w_hub"), exact=True).click()
            box = page.locator("#pg-hub-name input")
            box.fill(str(folder))
            box.press("Enter")
            page.locator("#pg-build").click()
            page.locator("#pg-build-msg").get_by_text("Ready", exact=False).wait_for(timeout=120_000)
            assert "llama weights from the folder" in page.locator("#pg-build-msg").inner_text()
            open_tab(page, "generate")
            prompt_box = page.locator("#pg-prompt textarea")
            prompt_box.fill("")
            prompt_box.press_sequentially(prompt)
            page.locator("#pg-generate").click()
            page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
            chips = page.locator("#pg-chips .pg-prompt").all_inner_texts()
            ids = tok.encode(prompt)
            assert len(chips) == len(ids) == len(prompt)  # one character a token, not GPT-2's 3 words
            assert [c.split("#")[0].strip() for c in chips][:3] == [tok.piece(i).display for i in ids][:3]
            page.wait_for_function(f"() => {FIGURE}?.layout?.xaxis?.ticktext?.length > 0", timeout=60_000)
            page.screenshot(path=str(ARTIFACTS / "llama-folder-generate.png"), full_page=False)
            browser.close()
    finally:
        if old is None:
            os.environ.pop("PLAYGROUND_MODEL_DIRS", None)
        else:
            os.environ["PLAYGROUND_MODEL_DIRS"] = old
    assert not errors, errors
