"""Clicks on the Inside tab's heatmap cells, turned into events by a page script.

A click on a cell picks it (the lens: that cell's top-10 at its layer and position). ``gr.Plot``
has no click event in Gradio 6, so a page script listens to plotly.js's own
``plotly_click`` on the figure's graph div, remembers the cell in ``window.pgPicked[plot id]`` and
clicks the plot's hidden "pick" button. That button's event reads the cell through
``read_pick(...)`` (a ``js=`` pre-processor that puts it in place of some of the event's inputs),
so the server gets the clicked values in the same request: no race with the fields' own bindings.

Gradio draws a figure with ``Plotly.react`` into a ``.js-plotly-plot`` div inside the component's
``elem_id``; a full redraw (``newPlot``) or a re-mounted component purges the div's listeners and
gives it a new emitter (``gd._ev``), so the script re-attaches whenever it sees a div whose emitter
is not the one it attached to (a MutationObserver on the page, coalesced per animation frame).
"""

from __future__ import annotations

import json

from .data import LENS_WINDOW, MIN_WINDOW

# plot elem_id -> elem_id of the hidden button its click presses
PICKERS = {"pg-lens": "pg-lens-pick", "pg-dla-heat": "pg-dla-pick", "pg-sweep": "pg-sweep-pick"}

CELL_PX, CELL_PX_PRESENT = 30, 40  # a lens cell: 5 characters of its 10 px text (presenter: larger)
LENS_MARGIN_PX = 230  # layer names, colour bar and the block's padding

PAGE_JS = """
() => {
  const pickers = %s;
  window.pgPicked = window.pgPicked || {};
  const attach = () => {
    for (const [plot, button] of Object.entries(pickers)) {
      const gd = document.querySelector('#' + plot + ' .js-plotly-plot');
      if (!gd || !gd._ev || typeof gd.on !== 'function' || gd._pgPickEv === gd._ev) continue;
      gd._pgPickEv = gd._ev;
      gd.on('plotly_click', (ev) => {
        const pt = ev && ev.points && ev.points.find((p) => p.data && p.data.type === 'heatmap');
        if (!pt) return;
        const cell = window.pgPicked[plot] = {x: Math.round(Number(pt.x)), y: Math.round(Number(pt.y))};
        if (plot !== 'pg-lens' && window.Plotly) {  // outline the picked cell (the lens is redrawn with one)
          const shapes = (gd.layout.shapes || []).filter((s) => s.name !== 'pg-pick');
          shapes.push({name: 'pg-pick', type: 'rect', x0: cell.x - 0.5, x1: cell.x + 0.5, y0: cell.y - 0.5,
                       y1: cell.y + 0.5, line: {color: '#f59e0b', width: 3}});
          window.Plotly.relayout(gd, {shapes});
        }
        document.querySelector('#' + button)?.click();
      });
    }
  };
  // How many lens positions fit the page (cells of CELL_PX, minus the layer names and colour bar),
  // measured on the always-visible summary line; the lens events read it as they are sent
  // (cols_js), and the hidden field keeps it for the redraw after a language switch. After a
  // resize (a presenter-mode switch sends one) that changes it, the lens is drawn again around
  // its selected cell. Not measured on every redraw of the page.
  window.pgLensCols = () => {
    const page = document.querySelector('#pg-summary');
    if (!page || !page.clientWidth) return null;
    const cell = document.body.classList.contains('pg-present') ? %d : %d;
    return Math.max(%d, Math.min(%d, Math.floor((page.clientWidth - %d) / cell)));
  };
  let fitted = false;
  const fit = () => {
    const box = document.querySelector('#pg-lens-cols input'), n = window.pgLensCols();
    if (!box || !n) return;
    fitted = true;
    if (box.value === String(n)) return;
    box.value = String(n);
    box.dispatchEvent(new Event('input', {bubbles: true}));
    const gd = document.querySelector('#pg-lens .js-plotly-plot');
    const layer = document.querySelector('#pg-lens-layer input'), pos = document.querySelector('#pg-lens-pos input');
    if (gd && gd.data && gd.data.length && layer && pos && layer.value !== '' && pos.value !== '') {
      window.pgPicked['pg-lens'] = {x: Number(pos.value), y: Number(layer.value)};
      document.querySelector('#pg-lens-pick')?.click();
    }
  };
  let resized = null;
  window.addEventListener('resize', () => { clearTimeout(resized); resized = setTimeout(fit, 300); });
  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; attach(); if (!fitted) fit(); });
  }).observe(document.body, {childList: true, subtree: true});
  attach();
}
""" % (json.dumps(PICKERS), CELL_PX_PRESENT, CELL_PX, MIN_WINDOW, LENS_WINDOW, LENS_MARGIN_PX)  # noqa: UP031 -- JavaScript braces


# A pointer over a clickable heatmap (plotly sets its drag layer's cursor inline, hence !important).
CSS = (
    "\n".join(f"#{plot} .nsewdrag {{ cursor: pointer !important; }}" for plot in PICKERS)
    + """
.pg-click-hint { font-size: 13px; opacity: 0.85; }
.pg-click-hint p { margin: 0 !important; }
"""
)


def read_pick(plot: str, x_at: int, y_at: int, cols_at: int | None = None) -> str:
    """A ``js=`` pre-processor: the clicked cell of ``plot`` replaces the event's input number
    ``x_at`` (its x: a position or a head) and ``y_at`` (its y: a layer); ``cols_at``: as cols_js."""
    cols = "" if cols_at is None else _COLS.format(i=cols_at)
    return (
        f"(...a) => {{ const p = (window.pgPicked || {{}})[{json.dumps(plot)}];"
        f" if (p) {{ a[{x_at}] = p.x; a[{y_at}] = p.y; }} {cols}return a; }}"
    )


_COLS = "const n = window.pgLensCols && window.pgLensCols(); if (n) a[{i}] = n; "


def cols_js(cols_at: int) -> str:
    """A ``js=`` pre-processor: input number ``cols_at`` becomes how many lens positions fit the page."""
    return "(...a) => { " + _COLS.format(i=cols_at) + "return a; }"


def with_page_js(*scripts: str) -> str:
    """One ``launch(js=...)`` function that runs each page script in turn."""
    return "() => {\n" + "\n".join(f"  ({s.strip()})();" for s in scripts) + "\n}"
