"""Text on coloured cells reads on its cell: WCAG 2 contrast of at least 4.5:1 in every figure that writes it."""

import numpy as np
import pytest

from playground import figures as F
from playground.figures import inside as lf
from playground.figures.model_charts import ROOT_ID, parameter_treemap
from playground.figures.style import (
    CELL_TEXT_ALPHA,
    CELL_TEXT_DARK,
    CELL_TEXT_LIGHT,
    MIN_CONTRAST,
    cell_text_fill,
    contrast_ratio,
    relative_luminance,
    scale_colors,
    text_color_on,
)


def wcag_luminance(hex_colour: str) -> float:
    """The WCAG 2 definition, written out independently of the module under test."""
    rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


@pytest.mark.parametrize("colour", ["#000000", "#ffffff", "#fde725", "#440154", "#777777", "#2a3f5f", "#f59e0b"])
def test_luminance_is_the_wcag_formula(colour):
    assert relative_luminance(colour) == pytest.approx(wcag_luminance(colour), abs=1e-12)
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    assert relative_luminance(f"rgb({r}, {g}, {b})") == pytest.approx(wcag_luminance(colour), abs=1e-12)


def test_contrast_ratio_known_values():
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#ffffff", "#000000") == pytest.approx(21.0)
    assert contrast_ratio("#123456", "#123456") == pytest.approx(1.0)
    # WCAG's own borderline examples: #777 on white just misses AA, #767676 just reaches it
    assert contrast_ratio("#777777", "#ffffff") < 4.5 < contrast_ratio("#767676", "#ffffff")


@pytest.mark.parametrize("scale", ["Viridis", "RdBu", "RdBu_r", "Blues"])
def test_the_chosen_text_reads_on_every_colour_of_the_scales_the_figures_use(scale):
    for colour in scale_colors(np.linspace(0, 1, 101), scale, 0.0, 1.0):
        text = text_color_on(colour)
        assert text in (CELL_TEXT_DARK, CELL_TEXT_LIGHT)
        assert contrast_ratio(text, colour) >= MIN_CONTRAST, (scale, colour, text)


def test_bright_yellow_gets_dark_text_and_deep_purple_light_text():
    assert text_color_on("#fde725") == CELL_TEXT_DARK
    assert text_color_on("#440154") == CELL_TEXT_LIGHT
    assert scale_colors([None, float("nan"), 2.0, -1.0], "Viridis", 0, 1)[:2] == [None, None]


def _cells_read(fig):
    """Every cell text of a heatmap figure against the colour its cell is drawn in."""
    heat = next(t for t in fig.data if t.type == "heatmap")
    text = next(t for t in fig.data if t.type == "scatter" and t.mode == "text")
    z = np.asarray(heat.z, dtype=float)
    xs, ys = list(heat.x), list(heat.y)
    zmin, zmax = heat.zmin, heat.zmax
    checked = 0
    for x, y, colour in zip(text.x, text.y, text.textfont.color):
        v = z[ys.index(y), xs.index(x)]
        if not np.isfinite(v):
            continue
        background = scale_colors([v], heat.colorscale, zmin, zmax)[0]
        assert contrast_ratio(colour, background) >= MIN_CONTRAST, (x, y, v, colour, background)
        checked += 1
    assert checked == np.isfinite(z).sum() and checked > 0
    return text


def test_logit_lens_cells_read_yellow_ones_included():
    probs = [[0.0, 0.3, 0.99], [0.5, None, 1.0]]
    fig = lf.lens_heatmap(
        ["emb", "L0"], [4, 5, 6], ["a", "b", "c", "d"], [["x", "y", "z"]] * 2, probs, probs, title="t"
    )
    text = _cells_read(fig)
    assert text.textfont.color[2] == cell_text_fill(CELL_TEXT_DARK)  # p = 0.99: Viridis' bright yellow
    assert text.textfont.color[0] == cell_text_fill(CELL_TEXT_LIGHT)  # p = 0: its deep purple
    assert cell_text_fill(CELL_TEXT_LIGHT) == f"rgba(255, 255, 255, {CELL_TEXT_ALPHA})"
    assert "fill-opacity" not in text.textfont.color[4]  # the missing cell (no next token) keeps the page's colour
    assert str(CELL_TEXT_ALPHA) not in text.textfont.color[4]
    assert text.hoverinfo == "skip"  # the heatmap under the text answers hovers and clicks


def test_sweep_attribution_and_overview_cells_read():
    delta = np.linspace(-1, 1, 12).reshape(3, 4).tolist()
    _cells_read(lf.sweep_heatmap(delta, title="t"))
    _cells_read(lf.attribution_heatmap(delta, [0.1, -0.7, 0.0], title="t"))
    text = _cells_read(F.attention_overview(np.linspace(0, 1, 12).reshape(3, 4), zrange=(0.0, 1.0)))
    assert list(text.text)[:2] == ["0.00", "0.09"]


def test_treemap_tiles_read():
    fig = parameter_treemap([("tok_emb", 3_000_000), ("trf_blocks.0.att.W_query", 4096), ("final_norm", 128)])
    trace = fig.data[0]
    assert len(trace.marker.colors) == len(trace.ids)
    root = list(trace.ids).index(ROOT_ID)
    for i, (tile, text) in enumerate(zip(trace.marker.colors, trace.textfont.color)):
        if i != root:
            assert contrast_ratio(text, tile) >= MIN_CONTRAST, (tile, text)
    # The frame around the tiles shows the page through it, in both themes; its label is the page's
    # text colour (unmarked, so the dark theme's CSS recolours it), readable on the light page.
    assert trace.marker.colors[root] == "rgba(0,0,0,0)"
    assert f"{CELL_TEXT_ALPHA}" not in trace.textfont.color[root]
    assert contrast_ratio(trace.textfont.color[root], "#ffffff") >= MIN_CONTRAST


def test_the_dark_theme_css_keeps_exactly_the_marked_cell_text():
    from playground.ui.style import CSS

    rule = next(line for line in CSS.splitlines() if "main-svg text" in line)
    assert f'fill-opacity: {CELL_TEXT_ALPHA}"' in rule and ":not(" in rule
    assert "," not in rule.split("{")[0]  # Gradio's scoping splits selectors at commas
