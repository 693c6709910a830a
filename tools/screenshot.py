"""Screenshots of the running app in headless Chromium (Playwright).

    python tools/screenshot.py          # README's assets/screenshot.png: the core loop at 1600×1000
    python tools/screenshot.py --all    # every tab at 1600×1000 and 1024×768, light and dark, English
                                        # and 中文, after using its views -> tests/artifacts/look-*.png
    python tools/screenshot.py --all --present --size 1024x768   # the same on a projector: presenter
                                        # mode at 1024×768 only -> tests/artifacts/look-present-*.png
    python tools/screenshot.py --heads  # the Train tab's heads view after a short run, scrubbed, both
                                        # sizes, themes and languages, and in presenter mode
                                        # -> tests/artifacts/look-heads-*.png

The README's picture is the Generate & attention tab in English and the light theme, after a seeded
40-token run of the bundled model with one generated token clicked: the first screen, where the token
chips stand beside the whole attention heatmap and its controls. The app runs in this process
on a free local port; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CHROMIUM = os.environ.get("CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
ARTIFACTS = ROOT / "tests" / "artifacts"

from tools.chromium_args import ARGS  # noqa: E402  (needs ROOT on sys.path)
from tools.pagewalk import draw_inside, open_tab, plot_ready  # noqa: E402


def start_app() -> tuple[object, str]:
    from playground.ui.app import build_demo, launch_kwargs

    demo = build_demo()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs())
    return demo, url


def open_page(browser, url: str, lang: str, size: tuple[int, int], theme: str = "light", present: bool = False):
    context = browser.new_context(locale=lang, viewport={"width": size[0], "height": size[1]}, color_scheme=theme)
    page = context.new_page()
    page.goto(f"{url}?lang={'zh-CN' if lang.startswith('zh') else 'en'}{'&present=1' if present else ''}")
    word = "参数" if lang.startswith("zh") else "parameters"
    page.locator("#pg-summary").get_by_text(word, exact=False).wait_for(timeout=60_000)
    return context, page


def generate(page, prompt: str | None = None, n: int = 40, seed: int = 42) -> None:
    open_tab(page, "generate")
    if prompt is not None:
        page.locator("#pg-prompt textarea").fill(prompt)
    for elem_id, value in (("pg-max-new", n), ("pg-seed", seed)):
        box = page.locator(f"#{elem_id} input[type=number], #{elem_id} input[type=text], #{elem_id} textarea")
        if box.count() and box.first.is_visible():  # (presenter mode folds the seed away)
            box.fill(str(value))
            box.press("Enter")
    page.locator("#pg-generate").click()
    page.locator("#pg-status [data-state=done]").wait_for(timeout=180_000)
    page.wait_for_function("() => document.querySelector('#pg-heatmap .js-plotly-plot .xtick')", timeout=60_000)


def readme_screenshot(browser, url: str, out: Path) -> None:
    context, page = open_page(browser, url, "en-US", (1600, 1000))
    generate(page)
    chips = page.locator("#pg-chips .pg-chip:not(.pg-prompt)")
    chips.nth(min(12, chips.count() - 1)).click()  # a step with some context to look back at
    page.wait_for_timeout(1500)  # the step's query row and figures redraw
    # The first screen holds the chips, the map's controls and the whole map (scrolled only should it not).
    bottom = page.evaluate(
        "() => { const r = document.querySelector('#pg-heatmap').getBoundingClientRect();"
        " return r.bottom + window.scrollY; }"
    )
    page.evaluate(f"() => window.scrollTo(0, {max(0, bottom + 12 - 1000)})")
    page.mouse.move(1, 999)  # no hover: no figure toolbar, no tooltip
    page.wait_for_timeout(500)
    page.screenshot(path=str(out))
    context.close()
    print(f"wrote {out}")


def every_tab(browser, url: str, sizes=((1600, 1000), (1024, 768)), present: bool = False) -> list[Path]:
    from playground.i18n import tr

    shots = []
    for lang in ("en", "zh-CN"):
        for theme in ("light", "dark"):
            for size in sizes:
                context, page = open_page(browser, url, lang, size, theme, present)
                generate(page, n=20)
                tab = lambda key, page=page, lang=lang: page.get_by_role("tab", name=tr(lang, key), exact=True)
                draw_inside(page, lang)
                tab("tab_compare").click()
                page.locator("#pg-score-text textarea").fill(
                    "ROMEO:\nBut soft, what light through yonder window breaks?"
                )
                page.locator("#pg-score").click()
                plot_ready(page, "pg-score-plot")
                page.get_by_text(tr(lang, "receipt_section"), exact=True).click()
                page.locator("#pg-receipt-btn").click()
                page.locator("#pg-receipt .pg-receipt-bar").wait_for(timeout=60_000)
                name = f"look-{'present-' if present else ''}{lang}-{theme}-{size[0]}x{size[1]}"
                for key in (
                    "tab_lessons",
                    "tab_model",
                    "tab_generate",
                    "tab_inside",
                    "tab_train",
                    "tab_compare",
                    "tab_tokenizer",
                ):
                    open_tab(page, key[4:])
                    views = (
                        ("inside_lens", "inside_dla", "inside_maths", "inside_interventions")
                        if key == "tab_inside"
                        else (None,)
                    )
                    for view in views:
                        if view:
                            tab(view).click()
                        page.wait_for_timeout(800)
                        path = ARTIFACTS / f"{name}-{key[4:]}{'-' + view[7:] if view else ''}.png"
                        page.screenshot(path=str(path), full_page=True)
                        shots.append(path)
                context.close()
                print(f"{name}: done")
    return shots


HEADS_STEPS = 40  # a short run: curves and maps to look at within seconds (the induction run takes minutes)


def heads_views(browser, url: str, configs=None) -> list[Path]:
    """The Train tab's heads view (curves, scrubber, map, facts) after a short nano run scrubbed to its
    middle: by default at 1600×1000 and 1024×768, light and dark, English and 中文, and presenter mode at
    1024×768; ``configs``: (lang, theme, (width, height), present) tuples instead."""
    shots = []
    if configs is None:
        configs = [
            (lang, theme, size, False)
            for lang in ("en", "zh-CN")
            for theme in ("light", "dark")
            for size in ((1600, 1000), (1024, 768))
        ]
        configs += [(lang, theme, (1024, 768), True) for lang, theme in (("en", "light"), ("zh-CN", "dark"))]
    for lang, theme, size, present in configs:
        context, page = open_page(browser, url, lang, size, theme, present)
        open_tab(page, "train")
        box = page.locator("#pg-train-steps input[type=number]")
        box.fill(str(HEADS_STEPS))
        box.press("Enter")
        page.locator("#pg-train").click()
        page.wait_for_function(
            "() => (document.querySelector('#pg-train-msg')?.innerText || '').match(/Finished|训练完成/)",
            timeout=240_000,
        )
        step = page.locator("#pg-train-heads-step input[type=number]")
        step.fill(str(HEADS_STEPS // 2))
        step.press("Enter")
        page.wait_for_function(
            f"() => document.querySelector('#pg-train-heads-facts .pg-heads-facts')?.dataset.step == '{HEADS_STEPS // 2}'",
            timeout=120_000,
        )
        plot_ready(page, "pg-train-heads-map")
        page.locator("#pg-train-heads-plot").scroll_into_view_if_needed()
        page.mouse.move(1, size[1] - 1)
        page.wait_for_timeout(800)
        name = f"look-heads-{'present-' if present else ''}{lang}-{theme}-{size[0]}x{size[1]}"
        for suffix, full in (("", True), ("-screen", False)):
            path = ARTIFACTS / f"{name}{suffix}.png"
            page.screenshot(path=str(path), full_page=full)
            shots.append(path)
        context.close()
        print(f"{name}: done", flush=True)
    return shots


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="every tab, both sizes, themes and languages")
    parser.add_argument("--heads", action="store_true", help="the Train tab's heads view in every look")
    parser.add_argument(
        "--look", action="append", help="with --heads: only this look, e.g. zh-CN,dark,1024x768,present (repeatable)"
    )
    parser.add_argument("--present", action="store_true", help="with --all: in presenter mode (?present=1)")
    parser.add_argument("--size", action="append", help="with --all: only this size, e.g. 1024x768 (repeatable)")
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "screenshot.png", help="the README picture")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    demo, url = start_app()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            if args.heads:
                ARTIFACTS.mkdir(exist_ok=True)
                looks = [look.split(",") for look in args.look or []]
                configs = [
                    (x[0], x[1], tuple(int(n) for n in x[2].split("x")), "present" in x[3:]) for x in looks
                ] or None
                print(f"{len(heads_views(browser, url, configs))} screenshots in {ARTIFACTS}")
            elif args.all:
                ARTIFACTS.mkdir(exist_ok=True)
                sizes = [tuple(int(x) for x in s.split("x")) for s in args.size] if args.size else None
                shots = every_tab(browser, url, sizes or ((1600, 1000), (1024, 768)), args.present)
                print(f"{len(shots)} screenshots in {ARTIFACTS}")
            else:
                readme_screenshot(browser, url, args.out)
            browser.close()
    finally:
        demo.close()


if __name__ == "__main__":
    main()
