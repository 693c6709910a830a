"""The figure builders' shortcuts against the plain way they replace: the same figure, made faster."""

import math
import random

import pytest
from plotly.colors import get_colorscale, sample_colorscale

from playground.figures.style import scale_colors


@pytest.mark.parametrize("colorscale", ["Viridis", "RdBu", "RdBu_r", "Blues"])
@pytest.mark.parametrize("zmin, zmax", [(0.0, 1.0), (-0.5, 0.7), (3.0, 3.0)])
def test_scale_colors_sampled_at_once_equal_one_cell_at_a_time(colorscale, zmin, zmax):
    rng = random.Random(7)
    values = [None, float("nan"), float("inf"), 2.0, -1.0] + [rng.uniform(-1, 2) for _ in range(200)]
    scale = [[float(v), c] for v, c in get_colorscale(colorscale)]  # plotly reads the hex stops itself
    span = (zmax - zmin) or 1.0
    one_by_one = [
        None if v is None or not math.isfinite(v) else sample_colorscale(scale, [min(max((v - zmin) / span, 0), 1)])[0]
        for v in values
    ]
    assert scale_colors(values, colorscale, zmin, zmax) == one_by_one
    assert scale_colors([], colorscale, zmin, zmax) == []


def test_figures_with_many_labels_have_margins_that_hold_them_at_presenter_size():
    """The lens heatmap and the loss lines do without plotly's automatic margins (measured while the page
    draws); theirs must hold the widest tick label at 16 px, the y labels left, the turned x labels below."""
    from playground.figures import inside as lf

    layers = ["embeddings"] + [f"after block {i}" for i in range(12)]
    positions = list(range(200, 232))
    labels = [f"·word{i}xyz" for i in positions]
    grid = [[0.5] * len(positions) for _ in layers]
    lens = lf.lens_heatmap(layers, positions, labels, [["t"] * len(positions)] * len(layers), grid, grid, title="t")
    loss = lf.loss_lines(positions, labels, [1.0] * 32, [2.0] * 32, title="t")
    for fig in (lens, loss):
        assert fig.layout.xaxis.automargin is False and fig.layout.yaxis.automargin is False
        widest_x = max(len(t) for t in fig.layout.xaxis.ticktext) * 0.6 * 16
        assert fig.layout.margin.b >= widest_x * math.sin(math.radians(60))
    assert lens.layout.margin.l >= len("after block 11") * 0.6 * 16
    before_after = lf.before_after_bars(["a", "b"], [0.1, 0.2], [0.3, 0.1], title="t")
    assert before_after.layout.xaxis.automargin is None  # a small figure keeps plotly's own margins
