"""A long Inside job leaves the page responsive (issue 23): while the head sweep computes, the page's
main thread never runs a task over 200 ms, a click on another tab answers within 200 ms, progress
is shown under the sweep's button, and Stop ends the sweep.

The bundled model's sweep takes well under a second, so each head's forward here also keeps the
CPU busy for SLOW_S with torch's own matrix products, on the threads the sweep runs on, as GPT-2
small's sweep does for up to a minute."""

import time

import pytest

from tests.browser.chromium import launch, open_tab, set_number
from tests.browser.conftest import SLOW_S
from tools.pagewalk import plot_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The target is 0.2 s (bench --browser keeps it); measured here 0.05-0.18 s. The bound leaves room for a loaded
# CI machine, where tasks ran 1.4-2.2x longer; the page before its CSS was mended (0.23-0.38 s here, 0.52 s on CI)
# fails it.
LONGEST_TASK_S = 0.35
TAB_ANSWER_S = 0.2

LONG_TASKS_JS = """
() => { window.__lt = [];
  new PerformanceObserver(l => { for (const e of l.getEntries()) window.__lt.push([e.startTime, e.duration]); })
    .observe({type: 'longtask'}); }
"""

# Click a tab's button and wait until the element it shows is laid out and a frame has been drawn.
TAB_ANSWER_JS = """
async ([tab, shown]) => {
  const t0 = performance.now();
  document.querySelector(`button[role=tab][data-tab-id='${tab}']`).click();
  const frame = () => new Promise(r => requestAnimationFrame(r));
  while (!document.querySelector(shown)?.offsetParent) await frame();
  await frame();
  return (performance.now() - t0) / 1000;
}
"""


def test_the_page_stays_responsive_during_a_long_head_sweep_and_stop_ends_it(page_url, slowed_sweep):
    from playwright.sync_api import sync_playwright

    from playground.i18n import EN

    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(page_url)
        page.locator("#pg-summary").get_by_text("parameters", exact=False).wait_for(timeout=60_000)
        open_tab(page, "generate")
        set_number(page, "pg-max-new", 24)
        page.locator("#pg-generate").click()
        page.locator("#pg-status [data-state=done]").wait_for(timeout=120_000)
        open_tab(page, "inside")
        plot_ready(page, "pg-lens")
        open_tab(page, "inside-intervene")
        page.wait_for_timeout(500)
        page.evaluate(LONG_TASKS_JS)

        t_click = page.evaluate("() => performance.now()")
        page.locator("#pg-sweep-btn").click()
        msg = page.locator("#pg-intervene-msg")
        msg.get_by_text("Head sweep: 1 of 6 layers", exact=False).wait_for(timeout=60_000)
        # progress is shown under the sweep's button (its row), not at the top of the tab
        button, box = page.locator("#pg-sweep-btn").bounding_box(), msg.bounding_box()
        assert 0 <= box["y"] - (button["y"] + button["height"]) < 80

        answers = []
        for _ in range(2):  # another tab and back, while the sweep computes
            answers.append(page.evaluate(TAB_ANSWER_JS, ["inside-lens", "#pg-lens"]))
            page.wait_for_timeout(400)
            answers.append(page.evaluate(TAB_ANSWER_JS, ["inside-intervene", "#pg-sweep-btn"]))
            page.wait_for_timeout(400)
        assert "⏳" in msg.inner_text()  # still computing: the answers above were measured during the sweep

        page.locator("#pg-inside-stop").click()
        msg.get_by_text(EN["in_stopped"], exact=False).wait_for(timeout=10_000)
        t_end = page.evaluate("() => performance.now()")
        tasks = [d / 1000 for s, d in page.evaluate("() => window.__lt") if t_click <= s <= t_end]
        measured = len(slowed_sweep)
        time.sleep(2 * SLOW_S)
        assert len(slowed_sweep) <= measured + 1 < 24  # no head after the Stop but the one running then
        browser.close()

    assert max(answers) <= TAB_ANSWER_S, answers
    assert max(tasks, default=0.0) <= LONGEST_TASK_S, tasks
