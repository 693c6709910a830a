"""Clicking a heatmap cell picks it (issue 11: "click a cell to see the top-10 at that layer and
position"). ``gr.Plot`` has no click event in Gradio 6, so a page script listens to plotly.js's own
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

# plot elem_id -> elem_id of the hidden button its click presses
PICKERS = {"pg-lens": "pg-lens-pick", "pg-dla-heat": "pg-dla-pick", "pg-sweep": "pg-sweep-pick"}

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
        window.pgPicked[plot] = {x: Math.round(Number(pt.x)), y: Math.round(Number(pt.y))};
        document.querySelector('#' + button)?.click();
      });
    }
  };
  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; attach(); });
  }).observe(document.body, {childList: true, subtree: true});
  attach();
}
""" % json.dumps(PICKERS)


# A pointer over a clickable heatmap (plotly sets its drag layer's cursor inline, hence !important).
CSS = "\n".join(f"#{plot} .nsewdrag {{ cursor: pointer !important; }}" for plot in PICKERS) + """
/* The lens heatmaps keep 32 positions at least ~28 px apart (readable cell text); on a narrower
   page they scroll sideways instead of squeezing the cells. */
#pg-lens, #pg-intervene-lens { overflow-x: auto !important; }
#pg-lens .js-plotly-plot, #pg-intervene-lens .js-plotly-plot { min-width: 1100px; }
.pg-click-hint { font-size: 13px; opacity: 0.85; }
.pg-click-hint p { margin: 0 !important; }
"""


def read_pick(plot: str, x_at: int, y_at: int) -> str:
    """A ``js=`` pre-processor: the clicked cell of ``plot`` replaces the event's input number
    ``x_at`` (its x: a position or a head) and ``y_at`` (its y: a layer)."""
    return (f"(...a) => {{ const p = (window.pgPicked || {{}})[{json.dumps(plot)}];"
            f" if (p) {{ a[{x_at}] = p.x; a[{y_at}] = p.y; }} return a; }}")


def with_page_js(*scripts: str) -> str:
    """One ``launch(js=...)`` function that runs each page script in turn."""
    return "() => {\n" + "\n".join(f"  ({s.strip()})();" for s in scripts) + "\n}"
