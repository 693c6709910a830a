"""Steps that drive the running app's page in Playwright, shared by the browser tests and
tools/screenshot.py, so both draw the views the same way."""

from __future__ import annotations


def open_tab(page, tab_id: str) -> None:
    """Click the tab made by ``gr.Tab(id=tab_id)`` (a page tab such as "generate", or a sub-tab such
    as "inside-dla"): Gradio marks its button with ``data-tab-id``, so a caller does not depend on
    the tabs' order or on the words of their titles."""
    page.locator(f"button[role=tab][data-tab-id='{tab_id}']").click()


def plot_ready(page, elem_id: str, timeout: int = 120_000) -> None:
    """Wait until the plotly figure inside ``#elem_id`` has data drawn."""
    page.wait_for_function(
        f"() => {{ const g = document.querySelector('#{elem_id} .js-plotly-plot');"
        f" return g && g.data && g.data.length > 0; }}",
        timeout=timeout,
    )


def draw_inside(page, lang: str) -> None:
    """After a run: open the Inside tab (which draws the logit lens) and draw every other view --
    attribution, the attention maths, an intervention (head 1.0 zeroed, the scaled head at 0.1),
    the dose-response curve and the head sweep -- then go back to the lens."""
    from playground.i18n import tr

    tab = lambda key: page.get_by_role("tab", name=tr(lang, key), exact=True)  # noqa: E731
    tab("tab_inside").click()
    plot_ready(page, "pg-lens")
    tab("inside_dla").click()
    page.locator("#pg-dla-btn").click()
    plot_ready(page, "pg-dla-fall")
    tab("inside_maths").click()
    page.locator("#pg-maths-btn").click()
    plot_ready(page, "pg-maths-plot")
    tab("inside_interventions").click()
    page.get_by_label(tr(lang, "inside_zero_heads"), exact=False).fill("1.0")
    page.get_by_label(tr(lang, "inside_scale_head"), exact=False).fill("0.1")
    page.locator("#pg-intervene-btn").click()
    plot_ready(page, "pg-intervene-lens")
    page.locator("#pg-dose-btn").click()
    plot_ready(page, "pg-dose")
    page.wait_for_function("() => !document.querySelector('#pg-intervene-msg .pg-progress')", timeout=120_000)
    page.locator("#pg-sweep-btn").click()
    plot_ready(page, "pg-sweep")
    page.wait_for_function("() => !document.querySelector('#pg-intervene-msg .pg-progress')", timeout=120_000)
    tab("inside_lens").click()
