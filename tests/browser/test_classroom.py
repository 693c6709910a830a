"""Issue 12 in a real browser: the page on a classroom projector (1024×768, 1280×720), in English
and in 中文, with presenter mode on and off. One server, one browser, a loop over the combinations.
Then the classroom features one tab at a time: the tokenizer's byte groups, the chips that name the
character a fragment builds, the whole-run heatmap, and the Train tab's estimate beside its button.

For each combination every tab is screenshotted under tests/artifacts/classroom-*.png (look at
them), and the page must not scroll sideways. In 中文 no English sentence may be visible; with
presenter mode on, chips and axis labels are large and the advanced controls are folded away.
"""

import html
import re
import time
from urllib.parse import unquote

import pytest

from playground.i18n import EN, tr
from playground.ui.model import tab as model_tab
from tests.browser.chromium import chromium_or_skip, launch, look, open_tab, set_number
from tests.helpers import ARTIFACTS
from tools.pagewalk import draw_inside, plot_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SIZES = [(1024, 768), (1280, 720)]
TABS = ("lessons", "model", "generate", "inside", "train", "compare", "tokenizer")  # every tab, in the page's order
INSIDE_VIEWS = ("inside-lens", "inside-dla", "inside-maths", "inside-intervene")  # the Inside tab's own tabs

# "An English sentence": three or more alphabetic words in a row, joined only by spaces or
# punctuation. Token text, numbers, model and preset names ("nano", "Tiny
# Shakespeare") and code identifiers (emb_dim, tok_emb, MultiHeadAttention) never match.
ENGLISH_RUN = re.compile(r"[A-Za-z]{2,}(?:[ ,;:'’\-]+[A-Za-z]{2,}){2,}")

# Visible text nodes, each on its own. Left out: what the user typed or picked as text (the prompt,
# the example prompts), the tokens (chips, figure tick labels) and hidden machinery.
VISIBLE_TEXT_JS = """() => {
  const skip = ['#pg-prompt, #pg-examples, #pg-chips, .xtick, .ytick, .pg-offscreen, script, style, textarea',
    // token text: scored and streamed chips, the tokenizer's chips, text column and merge parts, the
    // replayed prompt and text (.pg-token-text), the lens' top tokens written in its cells, a lesson's
    // prompt shown uncut before its chips are drawn (.pg-lesson-text)
    '.pg-chip, .pg-tok, .pg-tgroup, #pg-tok-table td, .pg-part, .pg-merges-word, .pg-merges-final, .pg-token-text, .textpoint',
    '.pg-lesson-text'].join(', ');
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, el = node.parentElement;
    const text = node.textContent.trim();
    if (!text || !el || el.closest(skip)) continue;
    const r = el.getBoundingClientRect(), st = getComputedStyle(el);
    if (r.width === 0 || r.height === 0 || st.visibility === 'hidden') continue;
    out.push(text);
  }
  return out;
}"""

SCROLL_JS = "() => [document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]"


def _open(browser, url, lang, size, present):
    context = browser.new_context(locale=lang, viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url + ("?present=1" if present else ""))
    # Loaded and redrawn in the page's language (the server answered the page's preferences).
    word = "参数" if lang == "zh-CN" else "parameters"
    page.locator("#pg-summary").get_by_text(word, exact=False).wait_for(timeout=60_000)
    page.wait_for_function(f"() => document.body.classList.contains('pg-present') === {str(present).lower()}")
    return context, page, errors


def _generate(page, lang, n=8):
    open_tab(page, "generate")  # a tab's content is drawn when it is first opened
    page.wait_for_function(
        "() => (document.querySelector('#pg-legend')?.innerText || '').includes("
        + ("'灰色'" if lang == "zh-CN" else "'Grey'")
        + ")",
        timeout=60_000,
    )
    box = page.locator("#pg-max-new input[type=number]")
    box.fill(str(n))
    box.press("Enter")
    page.locator("#pg-generate").click()
    page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
    page.wait_for_function("() => document.querySelector('#pg-heatmap .js-plotly-plot .xtick')", timeout=60_000)
    page.wait_for_function(
        "() => (document.querySelector('#pg-step-md')?.innerText || '').trim().length > 0", timeout=60_000
    )


def _text_in(page, selector, text, timeout=120_000):
    page.wait_for_function(
        f"() => (document.querySelector({selector!r})?.innerText || '').includes({text!r})", timeout=timeout
    )


def _use_every_view(page, lang):
    """Draw what each of the other tabs shows after the run _generate made: every Inside view, the
    Score & compare sections (model B, A and B scores, both side-by-side streams, a receipt, an
    exported replay file replayed, a share link) and the Tokenizer's text and typed word."""
    draw_inside(page, lang)

    open_tab(page, "compare")
    page.get_by_text(tr(lang, "model_b"), exact=True).click()
    page.locator("#pg-load-b").click()
    page.locator("#pg-b-msg .pg-msg").wait_for(timeout=120_000)
    box = page.locator("#pg-side-max input[type=number]")  # the side-by-side streams' length
    box.fill("12")
    box.press("Enter")
    page.locator("#pg-score-text textarea").fill("ROMEO:\nBut soft, what light through yonder window breaks?")
    page.locator("#pg-score-ab").click()
    page.locator("#pg-score-diff .pg-chip[data-diff]").first.wait_for(timeout=120_000)
    plot_ready(page, "pg-score-plot")
    done = tr(lang, "cmp_streams_done").split("{")[0]
    page.locator("#pg-two-models").click()
    _text_in(page, "#pg-side-msg", done)
    page.locator("#pg-two-settings").click()
    page.wait_for_function("() => document.querySelector('#pg-side .pg-stream-head small')", timeout=60_000)
    _text_in(page, "#pg-side-msg", done)
    page.get_by_text(tr(lang, "receipt_section"), exact=True).click()
    page.locator("#pg-receipt-btn").click()
    page.locator("#pg-receipt .pg-receipt-bar").wait_for(timeout=60_000)
    page.get_by_text(tr(lang, "replay_section"), exact=True).click()
    page.get_by_role("button", name=tr(lang, "export_replay")).click()
    link = page.locator("#pg-export-file a[href*='file=']").first
    link.wait_for(timeout=60_000)
    exported = unquote(link.get_attribute("href").split("file=", 1)[1])
    page.locator("#pg-replay-file input[type=file]").set_input_files(exported)
    page.locator("#pg-replay").click()
    page.locator("#pg-replay-msg .pg-msg").first.wait_for(timeout=120_000)
    page.get_by_role("button", name=tr(lang, "share_link")).click()
    page.wait_for_function(
        "() => (document.querySelector('#pg-share-link textarea, #pg-share-link input')?.value || '').includes('?')",
        timeout=60_000,
    )

    open_tab(page, "tokenizer")
    page.locator("#pg-tok-text textarea").fill("从前有座山 🦙 unbelievable!")
    page.locator("#pg-tok-btn").click()
    page.locator("#pg-tok-summary [data-tokens]").wait_for(timeout=60_000)
    page.locator("#pg-tok-merges .pg-merges").first.wait_for(timeout=60_000)


def _english_runs(page):
    return sorted({m.group(0) for text in page.evaluate(VISIBLE_TEXT_JS) for m in ENGLISH_RUN.finditer(text)})


def _presenter_problems(page, height):
    problems = []
    chip_px = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('#pg-chips .pg-chip')).fontSize)")
    if chip_px < 20:
        problems.append(f"token chips are {chip_px} px")
    tick_px = page.evaluate(
        "() => Math.min(...[...document.querySelectorAll("
        "'#pg-heatmap .xtick text, #pg-heatmap .ytick text, #pg-heatmap .g-xtitle text')]"
        ".map(t => parseFloat(getComputedStyle(t).fontSize)))"
    )
    if tick_px < 16:
        problems.append(f"heatmap axis labels are {tick_px} px")
    fig = page.locator("#pg-heatmap .js-plotly-plot").bounding_box()
    if fig["height"] > height:
        problems.append(f"the heatmap is {fig['height']} px high on a {height} px screen")
    if not page.evaluate(
        "() => [...document.querySelectorAll('.pg-advanced')].every(e => getComputedStyle(e).display === 'none')"
    ):
        problems.append("advanced controls are shown")
    return problems


def _chips_and_heatmap_apart(page, height):
    """Scrolled to the chips, the heatmap must be on screen too (at least 150 px of it)."""
    page.evaluate("() => window.scrollBy(0, document.querySelector('#pg-chips').getBoundingClientRect().top - 8)")
    heat = page.evaluate("() => document.querySelector('#pg-heatmap .js-plotly-plot').getBoundingClientRect().top")
    page.evaluate("() => window.scrollTo(0, 0)")
    return [] if heat < height - 150 else [f"scrolled to the chips, the heatmap starts at {heat} px"]


def _set_presenter(page, on: bool):
    """The header's toggle; waits until the server has redrawn the figures at the new size."""
    if page.evaluate("() => document.body.classList.contains('pg-present')") != on:
        page.locator("#pg-present input[type=checkbox]").click()
    open_tab(page, "generate")
    page.wait_for_function(
        "() => { const t = document.querySelector('#pg-heatmap .xtick text');"
        f" return t && (parseFloat(getComputedStyle(t).fontSize) >= 16) === {str(on).lower()}; }}",
        timeout=60_000,
    )
    assert ("present=1" in page.url) == on  # the address follows the toggle, for a reload or a shared link


def test_every_tab_fits_the_projector_in_both_languages_with_and_without_presenter_mode(app_url):
    """Per language one page and one run; then each size, presenter mode off and on (the Chinese page
    starts from ``?present=1``, the English one from the toggle)."""
    from playwright.sync_api import sync_playwright

    chromium_or_skip()
    ARTIFACTS.mkdir(exist_ok=True)
    problems = []
    with sync_playwright() as p:
        browser = launch(p)
        for lang in ("en", "zh-CN"):
            context, page, errors = _open(browser, app_url, lang, SIZES[0], present=lang == "zh-CN")
            _generate(page, lang)
            if lang == "zh-CN":  # (the English page's views are checked by their own tabs' browser tests)
                _use_every_view(page, lang)
            for size in SIZES:
                page.set_viewport_size({"width": size[0], "height": size[1]})
                for present in (False, True):
                    _set_presenter(page, present)
                    name = f"classroom-{lang}-{size[0]}x{size[1]}-{'present' if present else 'normal'}"
                    for tab in TABS:
                        open_tab(page, tab)
                        for view in INSIDE_VIEWS if tab == "inside" else (None,):
                            shot = f"{name}-{tab}" + (f"-{view.removeprefix('inside-')}" if view else "")
                            if view:
                                open_tab(page, view)
                            page.wait_for_timeout(700)  # plotly re-measures a tab's figures when it shows
                            look(page, ARTIFACTS / f"{shot}.png", full_page=True)
                            width, client = page.evaluate(SCROLL_JS)
                            if width != client:
                                problems.append(f"{shot}: scrolls sideways ({width} > {client})")
                            if lang == "zh-CN" and (runs := _english_runs(page)):
                                problems.append(f"{shot}: English in the Chinese page: {runs}")
                        if tab == "generate":
                            found = _chips_and_heatmap_apart(page, size[1])
                            found += _presenter_problems(page, size[1]) if present else []
                            problems += [f"{name}: {problem}" for problem in found]
            assert not errors, errors
            context.close()
        browser.close()
    assert not problems, "\n".join(problems)


def test_the_language_chosen_in_settings_reaches_every_tab_and_survives_a_reload(app_url, monkeypatch):
    from playwright.sync_api import sync_playwright

    chromium_or_skip()
    with sync_playwright() as p:
        browser = launch(p)
        context, page, _ = _open(browser, app_url, "en-US", (1280, 720), False)
        # Views drawn in English before the switch: an attribution, a sampling receipt.
        _generate(page, "en", n=6)
        open_tab(page, "inside")
        open_tab(page, "inside-dla")
        page.locator("#pg-dla-btn").click()
        _text_in(page, "#pg-dla-md", "Parts sum to")
        open_tab(page, "compare")
        page.get_by_text(tr("en", "receipt_section"), exact=True).click()
        page.locator("#pg-receipt-btn").click()
        _text_in(page, "#pg-receipt", "the seeded draw was")
        receipt_numbers = re.findall(r"\d\.\d{6}", page.locator("#pg-receipt").inner_text())
        page.get_by_text("Settings").last.click()
        page.get_by_label("Language").click()
        page.locator("[role=option]").filter(has_text="简体中文").first.click()
        page.keyboard.press("Escape")
        # Every tab's title (the Inside tab's own tabs too), not only the open one; the server-built text follows.
        n_tabs = len([k for k in EN if k.startswith("tab_")])
        page.wait_for_function(
            "() => { const t = [...document.querySelectorAll('button[role=tab]')].map(b => b.innerText);"
            f" return t.length >= {n_tabs} && t.every(x => /[\u4e00-\u9fff]/.test(x)); }}",
            timeout=30_000,
        )
        titles = page.locator("button[role=tab]").all_inner_texts()
        assert {"1 · 模型", "2 · 生成与注意力", tr("zh-CN", "tab_train")} <= set(titles), titles
        page.locator("#pg-summary").get_by_text("个参数", exact=False).wait_for(timeout=30_000)
        assert "lang=zh-CN" in page.url
        # ...and the views drawn before it, with the same numbers (nothing recomputed)
        _text_in(page, "#pg-dla-md", "各部分之和为", timeout=30_000)
        _text_in(page, "#pg-receipt", "按种子抽到", timeout=30_000)
        assert re.findall(r"\d\.\d{6}", page.locator("#pg-receipt").inner_text()) == receipt_numbers
        title = page.evaluate("() => document.querySelector('#pg-dla-heat .js-plotly-plot').layout.title.text")
        assert "直接 logit 归因" in title, title
        page.reload()
        page.locator("#pg-summary").get_by_text("个参数", exact=False).wait_for(timeout=60_000)
        page.wait_for_function(
            "() => document.querySelector(\"button[role=tab][data-tab-id='generate']\")?.innerText === '2 · 生成与注意力'",
            timeout=30_000,
        )
        # The bare address in the same browser: the choice was remembered. The session's load is slowed,
        # as on a loaded server: the page sends its language only once the load has answered (the load's
        # answer replaces the session's state; a language stored before it was lost).
        slow = model_tab.form_values  # (load_session's own: the language's redraws do not call it)
        monkeypatch.setattr(model_tab, "form_values", lambda *a, **k: (time.sleep(2), slow(*a, **k))[1])
        page.goto(app_url)
        page.locator("#pg-summary").get_by_text("个参数", exact=False).wait_for(timeout=60_000)
        page.wait_for_function(
            "() => document.querySelector(\"button[role=tab][data-tab-id='lessons']\")?.innerText === '0 · 课程'",
            timeout=30_000,
        )
        # The API is not a page: it stays in English.
        from gradio_client import Client

        loaded = str(Client(app_url, verbose=False).predict(api_name="/load_session"))
        assert "parameters" in loaded and "参数" not in loaded
        context.close()
        browser.close()


# ----------------------------------------------------------------------------------------------
# One tab at a time, at 1280×900

TEXT = "从前有座山 🦙 unbelievable 👩‍👧!"


def _open_tab_page(p, url, **context):
    browser = launch(p)
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
        browser, page, errors = _open_tab_page(p, page_url)
        open_tab(page, "tokenizer")
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
        browser, page, errors = _open_tab_page(p, page_url)
        open_tab(page, "generate")
        page.locator("#pg-prompt textarea").fill("从前")
        set_number(page, "pg-max-new", 2)
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
        browser, page, errors = _open_tab_page(p, page_url)
        open_tab(page, "generate")
        set_number(page, "pg-max-new", 200)
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
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1024, "height": 768})
        page.goto(page_url)
        page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
        open_tab(page, "train")
        estimate = page.locator("#pg-train-estimate .pg-estimate")
        estimate.wait_for(timeout=180_000)  # a few real steps of nano are timed the first time
        assert float(estimate.get_attribute("data-seconds")) > 0
        assert "200 steps" in estimate.inner_text()
        # the estimate and the Train button are on the first screen of a 1024×768 projector
        for selector in ("#pg-train", "#pg-train-estimate"):
            box = page.locator(selector).bounding_box()
            assert box and box["y"] + box["height"] <= 768, (selector, box)
        # the corpus is chosen before Train is pressed: it sits above the button
        corpus, button = page.locator("#pg-train-corpus").bounding_box(), page.locator("#pg-train").bounding_box()
        assert corpus["y"] + corpus["height"] <= button["y"], (corpus, button)
        page.locator("#pg-train-steps input").fill("160")
        page.locator("#pg-train-steps input").press("Enter")
        page.wait_for_function(
            "() => document.querySelector('#pg-train-estimate').innerText.includes('160 steps')", timeout=60_000
        )
        page.screenshot(path=str(ARTIFACTS / "train.png"))
        browser.close()
