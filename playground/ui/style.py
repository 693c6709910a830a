"""The page's own CSS and the small scripts that run in the browser."""

CSS = """
.pg-msg { padding: 6px 10px; border-radius: 6px; margin: 4px 0; font-size: 15px; overflow-wrap: anywhere; }
.pg-error { background: #fef2f2; color: #991b1b; border: 1px solid #fecaca; }
.pg-ok { background: #f0fdf4; color: #166534; border: 1px solid #bbf7d0; }
.dark .pg-error { background: #450a0a; color: #fecaca; border-color: #7f1d1d; }
.dark .pg-ok { background: #052e16; color: #bbf7d0; border-color: #14532d; }
.pg-progress { background: #eff6ff; color: #1e3a8a; border: 1px solid #bfdbfe; }
.dark .pg-progress { background: #172554; color: #dbeafe; border-color: #1e3a8a; }
#pg-summary { font-size: 15px; }
.pg-status { font-size: 15px; padding: 2px 0; }
.pg-chipbox { max-height: 300px; overflow-y: auto; line-height: 2.1; padding: 4px; }
.pg-chip { display: inline-block; margin: 2px 2px; padding: 1px 6px; border-radius: 6px; font-size: 16px;
           color: #ffffff; background: #4b5563; cursor: pointer; white-space: pre; font-family: ui-monospace, monospace; }
.pg-chip small { font-size: 11px; margin-left: 5px; opacity: 0.95; font-family: system-ui, sans-serif; }
.pg-chip.pg-frag { border-bottom: 3px dotted #fbbf24; }  /* a byte of a character shared with the next chip */
.pg-chip.pg-selected { outline: 3px solid #f59e0b; outline-offset: 1px; }
.pg-swatch { display: inline-block; width: 0.9em; height: 0.9em; border-radius: 2px; vertical-align: -1px; }
/* Plotly figures are drawn on a transparent background; in dark mode their text and lines are
   recoloured here so one figure serves both themes. Text on a coloured cell keeps the black or
   white the figure chose for that cell, marked by its opacity (figures/style.py: CELL_TEXT_ALPHA;
   a selector without commas, which Gradio's scoping of this CSS would split). */
.dark .js-plotly-plot .main-svg text:not([style*="fill-opacity: 0.999"]) { fill: #e5e7eb !important; }
.dark .js-plotly-plot .main-svg .gridlayer path, .dark .js-plotly-plot .main-svg .zerolinelayer path {
  stroke: #374151 !important; }
"""

# After a tab becomes visible, tell plotly to re-measure: a figure drawn while its tab was hidden
# would otherwise keep the narrow default width.
RESIZE_JS = "() => { setTimeout(() => window.dispatchEvent(new Event('resize')), 60); }"

CSS += """
.pg-offscreen { display: none !important; }
#pg-header { align-items: center; }
#pg-header h1 { margin-bottom: 2px; }
.pg-legend { font-size: 14px; }
/* Presenter mode: type readable from the back of a room, advanced controls folded away. The class
   sits on <body>, outside the app root Gradio scopes custom CSS to, so these rules need !important
   to beat the scoped (more specific) copies of the rules above. */
body.pg-present .gradio-container { font-size: 18px !important; }
body.pg-present .pg-chip { font-size: 22px !important; padding: 2px 8px !important; }
body.pg-present .pg-chip small { font-size: 14px !important; }
body.pg-present #pg-summary *, body.pg-present .pg-status, body.pg-present .pg-msg,
body.pg-present .pg-legend, body.pg-present #pg-step-md *, body.pg-present #pg-tying * { font-size: 18px !important; }
body.pg-present .pg-advanced { display: none !important; }
/* A table header breaks between words, never inside one. */
body.pg-present .gradio-container th, body.pg-present .gradio-container th * {
  word-break: normal !important; overflow-wrap: normal !important; hyphens: none !important; }
"""


def each(selectors: str, rule: str) -> str:
    """``rule`` written once for each of ``selectors`` ("#a, .b"), in place of its ``{}``.

    A rule whose subject is ``:is(#a, .b)`` is tried on every element of the page at each style
    update (plotly forces dozens while it draws a figure); one whose subject is ``#a`` only on that
    element, one whose subject is ``.b`` only on elements of that class."""
    return ", ".join(rule.replace("{}", one.strip()) for one in selectors.split(","))


GENERATE_VIEWS = "#pg-heatmap, #pg-query-plot, #pg-step-md, #pg-prob-plot, #pg-stages-plot"
CSS += f"""
/* While a new run streams, the last run's figures and step panel are dimmed under a label that
   says so (generate_layout.previous_run_js sets the flag and the label's text). */
{each(GENERATE_VIEWS, "body[data-pg-previous] {}")} {{
  position: relative !important; }}
{each(GENERATE_VIEWS, "body[data-pg-previous] {} > *")} {{
  opacity: 0.35 !important; }}
{each(GENERATE_VIEWS, "body[data-pg-previous] {}::before")} {{
  content: var(--pg-previous-text); position: absolute; z-index: 10; top: 6px; left: 50%;
  transform: translateX(-50%); background: #fde68a; color: #1f2937; padding: 3px 12px; border-radius: 6px;
  font-size: 15px; font-weight: 600; white-space: nowrap; }}
"""

SMALL_TYPE = "small, code, .info-text, .min_value, .max_value, .reset-button, button.sm, .meta-text, .meta-text-center, .progress-text, .timer"
CSS += f"""
/* Nothing under 14 px on a projector: small print (token ids, merge ranks), code, help text, small
   buttons, the sliders' range and reset marks, and Gradio's progress timers ("processing | 2.2s"). */
{each(SMALL_TYPE, "body.pg-present .gradio-container {}")} {{
  font-size: max(14px, 0.8em) !important; }}
"""

HIDE_EMPTY = ["pg-hide-empty"]  # a text that takes no room (not even the gaps around it) while it is empty

# The Inside tab's views of a run (generate_layout.previous_run_js marks them when a new run starts,
# inside_layout clears the mark once opening the tab has drawn the new run's): a figure only when
# one is drawn, a text only when it has any.
INSIDE_VIEWS = (
    "#pg-lens, #pg-lens-cell, #pg-dla-heat, #pg-dla-fall, #pg-maths-plot, #pg-intervene-bars, #pg-intervene-loss,"
    " #pg-intervene-lens, #pg-dose, #pg-sweep"
)
INSIDE_TEXTS = (
    "#pg-lens-note, #pg-lens-cell-md, #pg-dla-md, #pg-dla-pick-md, #pg-maths-md, #pg-intervene-md, #pg-sweep-md"
)

PREVIOUS = "body[data-pg-inside-previous] "
CSS += f"""
/* The Inside tab's views of the previous run, while the tab draws the new run's: dimmed under a
   label that says so (as the Generate tab's, above). */
{each(INSIDE_VIEWS, PREVIOUS + "{}:has(.js-plotly-plot)")},
{each(INSIDE_TEXTS, PREVIOUS + "{}")}, {PREVIOUS}#pg-maths-table:has(td) {{
  position: relative !important; }}
{each(INSIDE_VIEWS, PREVIOUS + "{}:has(.js-plotly-plot) > *")},
{each(INSIDE_TEXTS, PREVIOUS + "{} > *")}, {PREVIOUS}#pg-maths-table:has(td) > * {{
  opacity: 0.35 !important; }}
{each(INSIDE_VIEWS, PREVIOUS + "{}:has(.js-plotly-plot)::before")},
{PREVIOUS}#pg-maths-table:has(td)::before {{
  content: var(--pg-inside-previous-text); position: absolute; z-index: 10; top: 6px; left: 50%;
  transform: translateX(-50%); background: #fde68a; color: #1f2937; padding: 3px 12px; border-radius: 6px;
  font-size: 15px; font-weight: 600; white-space: nowrap; }}
"""

INSIDE_MESSAGES = (
    "#pg-inside-msg, #pg-lens-msg, #pg-lens-plot-msg, #pg-dla-msg, #pg-dla-pick-msg, #pg-maths-msg, #pg-intervene-msg,"
    " #pg-sweep-msg"
)
CSS += f"""
/* A text drawn only after a view (its numbers, a note): hidden while empty, so a tab that has not
   drawn it yet shows no gaps between its controls and figures. */
.pg-hide-empty:has(span.md:empty) {{ display: none !important; }}
/* The Inside tab's messages sit under their controls: an empty one takes no room between them. */
{each(INSIDE_MESSAGES, "{}:not(:has(.pg-msg))")} {{ display: none !important; }}
"""

CSS += """
/* The first screen holds a run's chips beside its heatmap (generate_layout): the header is one line,
   the title's subtitle beside it. */
#pg-title h1 { display: inline; font-size: 1.6em; margin: 0 0.6em 0 0; }
#pg-title p { display: inline; margin: 0; }
#pg-header { gap: 8px; }
/* The sampling knobs four in a row: a label and a short number box side by side, the seed one line. */
#pg-knobs .head { flex-wrap: nowrap; }
#pg-knobs .head input[type=number] { width: 4.2em; min-width: 0; }
#pg-knobs .pg-advanced label:has(input[type=number]) { display: flex; align-items: center; gap: 8px; }
#pg-knobs .pg-advanced label:has(input[type=number]) input { max-width: 10em; }
/* The map's controls share a narrow column: a label keeps its words on one line (the number box moves
   under it when both do not fit, as a four-character Chinese label's would otherwise stand one
   character a line), and the track shrinks so the range's last value stays inside the column. */
#pg-att-controls .head { flex-wrap: wrap; row-gap: 2px; }
#pg-att-controls .head label { white-space: nowrap; }
#pg-att-controls .slider_input_container { min-width: 0; }
#pg-att-controls .slider_input_container input[type=range] { min-width: 0; flex: 1 1 auto; }
#pg-att-controls .slider_input_container .max_value { flex: none; }
/* On a projector the header is the title alone, and the model's summary one line (the Model tab
   has all of it); the four sampling knobs are a label and a number each (typed, or stepped with
   the arrow keys): their tracks would take a second row of the 768 px. The map's controls keep
   their tracks in their narrow column, without the reset marks and range ends that would not fit. */
body.pg-present #pg-title p { display: none !important; }
body.pg-present #pg-title h1 { font-size: 26px !important; }
body.pg-present #pg-summary p { white-space: nowrap !important; overflow: hidden !important;
  text-overflow: ellipsis !important; margin: 0 !important; }
body.pg-present #pg-knobs .slider_input_container, body.pg-present #pg-knobs .reset-button { display: none !important; }
body.pg-present #pg-summary { margin: -8px 0 !important; }
body.pg-present #pg-att-controls .reset-button, body.pg-present #pg-att-controls .min_value,
body.pg-present #pg-att-controls .max_value { display: none !important; }
body.pg-present #pg-prompt .block-title, body.pg-present #pg-prompt label > span:first-child { display: none !important; }
/* An empty message takes no room between the attention controls and the heatmap. */
#pg-att-msg:not(:has(.pg-msg)), #pg-input-msg:not(:has(.pg-msg)) { display: none !important; }
"""

CSS += f"""
/* An Inside view not drawn yet is not an empty box with a chart icon: it takes no height (its width
   stays, so plotly sizes the figure to it when it is drawn) until its button draws it. */
{each(INSIDE_VIEWS, "{}:not(:has(.js-plotly-plot))")} {{
  height: 0 !important; min-height: 0 !important; padding: 0 !important; border: 0 !important;
  overflow: hidden !important; }}
"""

CSS += """
/* Before a run the Generate tab's empty chip box and step figures take no room (their width stays,
   for the figures plotly draws into them), nor does the status line before it says anything, so the
   example prompts sit right under the legend. */
#pg-status:not(:has(.pg-status)) { display: none !important; }
#pg-chips:not(:has(.pg-chip)), #pg-prob-plot:not(:has(.js-plotly-plot)), #pg-stages-plot:not(:has(.js-plotly-plot)) {
  height: 0 !important; min-height: 0 !important; padding: 0 !important; border: 0 !important;
  overflow: hidden !important; }
"""
