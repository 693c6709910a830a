"""Figure builders: plain data in, the figure's own data checked out."""

import json
import subprocess
import sys

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from playground import figures as F
from playground.inside import attention_stats as S


def causal_attention(H, T, seed=0):
    """Random causal softmax maps [H, T, T]: rows sum to 1, zeros above the diagonal."""
    x = np.random.default_rng(seed).normal(size=(H, T, T)) * 2
    x[:, np.triu(np.ones((T, T), dtype=bool), 1)] = -np.inf
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def z_of(trace) -> np.ndarray:
    return np.asarray(trace.z, dtype=np.float64)


# Eight tokens, three of them identical: the case that collapses to 6×6 when tokens are categories.
LABELS = ["The", "␣cat", "␣the", "␣dog", "␣the", "␣end", "␣the", "."]


# ----------------------------------------------------------------------------------------------
# Heatmap


def test_heatmap_uses_positions_and_keeps_repeated_tokens_apart():
    p = causal_attention(1, 8)[0]
    fig = F.attention_heatmap(p, LABELS)
    (trace,) = fig.data
    assert list(trace.x) == list(range(8)) and list(trace.y) == list(range(8))
    assert z_of(trace).shape == (8, 8)
    assert list(fig.layout.xaxis.ticktext) == LABELS
    assert list(fig.layout.yaxis.ticktext) == LABELS
    assert list(fig.layout.xaxis.tickvals) == list(range(8))
    assert fig.layout.yaxis.autorange == "reversed"  # query 0 on top
    assert fig.layout.yaxis.scaleanchor == "x"  # square cells


def test_heatmap_linear_values_and_blank_causal_triangle():
    p = causal_attention(1, 8)[0]
    z = z_of(F.attention_heatmap(p, LABELS).data[0])
    upper = np.triu(np.ones((8, 8), dtype=bool), 1)
    assert np.isnan(z[upper]).all()
    np.testing.assert_allclose(z[~upper], p[~upper], rtol=1e-6)
    fig = F.attention_heatmap(p, LABELS)
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0.0, 1.0)


def test_heatmap_log_scale_floors_and_labels_colourbar_in_probability():
    p = causal_attention(1, 8)[0]
    p[5, 2] = 1e-9  # below the floor
    fig = F.attention_heatmap(p, LABELS, log_scale=True, log_floor=1e-4)
    z = z_of(fig.data[0])
    lower = np.tril(np.ones((8, 8), dtype=bool))
    np.testing.assert_allclose(z[lower], np.log10(np.maximum(p[lower], 1e-4)), rtol=1e-5, atol=1e-6)
    assert z[5, 2] == pytest.approx(-4.0)
    assert np.isnan(z[~lower]).all()
    axis = fig.layout.coloraxis
    assert (axis.cmin, axis.cmax) == (-4.0, 0.0)
    assert list(axis.colorbar.tickvals) == [-4, -3, -2, -1, 0]
    assert list(axis.colorbar.ticktext) == ["≤0.0001", "0.001", "0.01", "0.1", "1"]


def test_heatmap_hover_names_positions_and_probability():
    """Hover reads p from numeric customdata (no string per cell: it doubles the browser's work);
    the tokens are the tick labels of the same row and column."""
    p = causal_attention(1, 8)[0]
    for log_scale in (False, True):
        trace = F.attention_heatmap(p, LABELS, log_scale=log_scale).data[0]
        assert trace.text is None
        assert "query %{y:d} → key %{x:d}" in trace.hovertemplate and "%{customdata:.3g}" in trace.hovertemplate
        np.testing.assert_allclose(np.asarray(trace.customdata, dtype=float), p, rtol=1e-6)
        assert trace.hoverongaps is False  # masked (future) cells say nothing


def test_heatmap_window_shows_last_positions_and_says_so():
    T, m = 20, 8
    p = causal_attention(1, T)[0]
    labels = [f"t{i}" for i in range(T)]
    fig = F.attention_heatmap(p, labels, title="L0 H0", max_tokens=m)
    trace = fig.data[0]
    assert list(trace.x) == list(range(12, 20)) and list(trace.y) == list(range(12, 20))
    np.testing.assert_allclose(np.nan_to_num(z_of(trace)), p[12:, 12:], rtol=1e-6)
    assert list(fig.layout.xaxis.ticktext) == labels[12:]
    assert "L0 H0" in fig.layout.title.text
    assert "showing positions 12–19 of 20" in fig.layout.title.text
    # No cut, no note.
    assert "showing" not in (F.attention_heatmap(p, labels, max_tokens=T).layout.title.text or "")


def test_heatmap_few_queries_are_aligned_to_the_end():
    """A [2, 6] map (the last two queries) puts its rows at positions 4 and 5."""
    p = causal_attention(1, 6)[0][4:]
    fig = F.attention_heatmap(p, LABELS[:6])
    assert list(fig.data[0].y) == [4, 5]
    assert list(fig.layout.yaxis.ticktext) == LABELS[4:6]
    z = z_of(fig.data[0])
    assert np.isnan(z[0, 5]) and not np.isnan(z[1, 5])


def test_heatmap_highlight_query_boxes_that_row():
    fig = F.attention_heatmap(causal_attention(1, 8)[0], LABELS, highlight_query=3)
    (shape,) = fig.layout.shapes
    assert (shape.y0, shape.y1) == (2.5, 3.5) and (shape.x0, shape.x1) == (-0.5, 7.5)
    assert not F.attention_heatmap(causal_attention(1, 8)[0], LABELS, highlight_query=3, max_tokens=4).layout.shapes


def test_heatmap_rejects_mismatched_labels():
    with pytest.raises(ValueError, match="7 labels for 8"):
        F.attention_heatmap(causal_attention(1, 8)[0], LABELS[:7])
    with pytest.raises(ValueError, match="2-D"):
        F.attention_heatmap(causal_attention(2, 8), LABELS)


def test_every_token_is_labelled_and_long_labels_shortened():
    """Up to the window size, every position has its tick label (never every other one)."""
    T = 64
    labels = [f"␣averyveryverylongtoken{i}" for i in range(T)]
    fig = F.attention_heatmap(causal_attention(1, T)[0], labels, max_tokens=64)
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert list(axis.tickvals) == list(range(T))
        assert len(axis.ticktext) == T
        assert axis.tickfont.size == F.token_tick_font(T) < F.TICK_FONT_SIZE
    assert all(len(t) <= F.MAX_TICK_CHARS for t in fig.layout.xaxis.ticktext)


def test_offset_numbers_positions_as_in_the_sequence():
    """A window that starts at position 300 is drawn and labelled 300.., and its query highlighted there."""
    T = 10
    labels = [f"w{i}" for i in range(T)]
    fig = F.attention_heatmap(causal_attention(1, T)[0], labels, offset=300, highlight_query=305)
    assert list(fig.data[0].x) == list(range(300, 310)) and list(fig.layout.yaxis.tickvals) == list(range(300, 310))
    (box,) = fig.layout.shapes
    assert (box.y0, box.y1) == (304.5, 305.5)
    bars = F.query_attention_bars(causal_attention(1, T)[0][5], labels, offset=300)
    assert list(bars.data[0].x) == list(range(300, 310))


# ----------------------------------------------------------------------------------------------
# Grid and overview


def test_grid_has_one_subplot_per_head_with_its_data():
    H, T = 6, 8
    A = causal_attention(H, T)
    fig = F.attention_grid(A, LABELS, title="layer 2")
    assert len(fig.data) == H
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [f"head {h}" for h in range(H)]
    upper = np.triu(np.ones((T, T), dtype=bool), 1)
    for h, trace in enumerate(fig.data):
        z = z_of(trace)
        np.testing.assert_allclose(z[~upper], A[h][~upper], rtol=1e-6)
        assert np.isnan(z[upper]).all()
        assert trace.coloraxis == "coloraxis"  # one colour scale for all heads
    assert len({t.xaxis for t in fig.data}) == H  # separate panels, not overlaid


def test_format_prob_never_rounds_a_real_chance_to_zero():
    cases = {
        0.0: "0%",
        1.0: "100%",
        0.45: "45%",
        0.045: "4.5%",
        0.00045: "0.045%",
        0.0000123: "0.0012%",
        0.996: "99.6%",
        0.9996: "99.96%",
    }
    for p, text in cases.items():
        assert F.format_prob(p) == text, p
    assert F.format_prob(1e-9) != "0%"


def test_grid_log_scale_and_window():
    A = causal_attention(3, 20)
    fig = F.attention_grid(A, [f"t{i}" for i in range(20)], log_scale=True, max_tokens=5, cols=2)
    assert "showing positions 15–19 of 20" in fig.layout.title.text
    for h, trace in enumerate(fig.data):
        assert list(trace.x) == list(range(15, 20))
        np.testing.assert_allclose(np.asarray(trace.customdata, dtype=float), A[h, 15:, 15:], rtol=1e-6)
        lower = np.tril(np.ones((5, 5), dtype=bool))
        np.testing.assert_allclose(z_of(trace)[lower], np.log10(np.maximum(A[h, 15:, 15:], 1e-4))[lower], rtol=1e-5)


def test_overview_colour_scale_can_be_fixed():
    values = np.array([[0.40, 0.42], [0.41, 0.43]])
    fig = F.attention_overview(values, zrange=(0.0, 1.0))
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0.0, 1.0)  # a 0.03 spread stays a small one
    free = F.attention_overview(values)
    assert (free.data[0].zmin, free.data[0].zmax) == (0.40, 0.43)


def test_overview_is_layer_by_head_with_integer_axes_and_values_printed():
    values = np.arange(12, dtype=float).reshape(3, 4) / 12
    fig = F.attention_overview(values, metric_name="previous-token")
    trace = fig.data[0]
    np.testing.assert_array_equal(z_of(trace), values)
    assert list(trace.x) == [0, 1, 2, 3] and list(trace.y) == [0, 1, 2]
    assert list(fig.layout.xaxis.ticktext) == ["H0", "H1", "H2", "H3"]
    assert list(fig.layout.yaxis.ticktext) == ["L0", "L1", "L2"]
    cells = fig.data[1]  # the values, each in the text colour that reads on its cell
    assert cells.mode == "text" and list(cells.text) == [f"{v:.2f}" for v in values.ravel()]
    big = F.attention_overview(np.zeros((48, 25)))
    assert len(big.data) == 1  # 1200 cells: numbers would be unreadable


# ----------------------------------------------------------------------------------------------
# Statistics


def test_head_stats_on_hand_built_heads():
    T = 6
    prev = np.zeros((T, T))
    prev[0, 0] = 1
    prev[np.arange(1, T), np.arange(T - 1)] = 1  # every token looks at the one before
    first = np.zeros((T, T))
    first[:, 0] = 1  # the attention sink
    self_ = np.eye(T)
    uniform = np.tril(np.ones((T, T)))
    uniform /= uniform.sum(1, keepdims=True)
    layer = np.stack([prev, first, self_, uniform])  # [4 heads, T, T]
    stats = S.head_stats([layer, layer[::-1]])
    assert set(stats) == {"previous-token", "first-token", "self", "entropy"}
    for v in stats.values():
        assert v.shape == (2, 4)
    t = np.arange(1, T)
    s0 = {k: v[0] for k, v in stats.items()}
    np.testing.assert_allclose(s0["previous-token"], [1, 1 / (T - 1), 0, np.mean(1 / (t + 1))])
    np.testing.assert_allclose(s0["first-token"], [1 / (T - 1), 1, 0, np.mean(1 / (t + 1))])
    np.testing.assert_allclose(s0["self"], [0, 0, 1, np.mean(1 / (t + 1))])
    np.testing.assert_allclose(s0["entropy"], [0, 0, 0, np.mean(np.log2(t + 1))])
    np.testing.assert_allclose(stats["previous-token"][1], s0["previous-token"][::-1])


def test_head_stats_accepts_a_batch_of_one_and_single_tokens():
    A = causal_attention(2, 5)
    a = S.head_stats([A])
    b = S.head_stats([A[None]])
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert np.isnan(S.head_stats([np.ones((2, 1, 1))])["entropy"]).all()
    with pytest.raises(ValueError, match="layer 0"):
        S.head_stats([np.ones((2, 3, 4))])


def test_rollout_matches_manual_product_and_is_causal_and_stochastic():
    A1, A2 = causal_attention(3, 5, seed=1), causal_attention(3, 5, seed=2)
    eye = np.eye(5)

    def step(a):
        m = 0.5 * a.mean(0) + 0.5 * eye
        return m / m.sum(1, keepdims=True)

    expected = step(A2) @ step(A1)
    R = S.attention_rollout([A1, A2])
    np.testing.assert_allclose(R, expected, rtol=1e-12)
    np.testing.assert_allclose(R.sum(1), 1.0)
    assert np.all(R[np.triu(np.ones((5, 5), dtype=bool), 1)] == 0)
    # Without the residual, a single layer's rollout is just its head average.
    np.testing.assert_allclose(S.attention_rollout([A1], add_residual=False), A1.mean(0), rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# Bars


def test_query_attention_bars():
    row = np.array([0.5, 0.1, 0.3, 0.1])
    fig = F.query_attention_bars(row, LABELS[:4], query_label="␣dog")
    (bar,) = fig.data
    assert list(bar.x) == [0, 1, 2, 3]
    np.testing.assert_array_equal(np.asarray(bar.y), row)
    assert list(fig.layout.xaxis.ticktext) == LABELS[:4]
    assert "␣dog" in fig.layout.title.text


def test_token_probability_bars_highlight_the_chosen_token():
    labels, probs = ["␣the", "␣a", "␣his"], [0.5, 0.3, 0.2]
    for chosen in (1, "␣a"):
        (bar,) = F.token_probability_bars(labels, probs, chosen=chosen).data
        np.testing.assert_array_equal(np.asarray(bar.x), probs)
        assert list(bar.text) == ["50%", "30%", "20%"]
        colours = list(bar.marker.color)
        assert colours[1] == F.HIGHLIGHT and colours[0] == colours[2] != F.HIGHLIGHT
    assert F.HIGHLIGHT not in F.token_probability_bars(labels, probs).data[0].marker.color


def test_sampling_stages_figure_shows_each_stage_and_marks_removed_tokens():
    labels = ["␣the", "␣a", "␣his", "␣my"]
    stages = {
        "raw": [0.4, 0.3, 0.2, 0.1],
        "temperature": [0.55, 0.3, 0.1, 0.05],
        "top_k": [0.6, 0.33, 0.07, 0.0],
        "top_p": [0.65, 0.35, 0.0, 0.0],
    }
    fig = F.sampling_stages_figure(labels, stages, chosen=1)
    bars = [t for t in fig.data if t.type == "bar"]
    marks = [t for t in fig.data if t.type == "scatter"]
    assert len(bars) == 4
    for bar, name in zip(bars, stages):
        np.testing.assert_array_equal(np.asarray(bar.x), stages[name])
        assert bar.marker.color[1] == F.HIGHLIGHT
    assert [a.text for a in fig.layout.annotations] == [
        "raw softmax",
        "after temperature",
        "after top-k",
        "after top-p",
    ]
    # top-k removed "␣my"; top-p then removed "␣his" (␣my was already gone, so it is not marked again).
    assert [list(m.y) for m in marks] == [[3], [2]]
    assert list(marks[0].customdata) == ["␣my"] and list(marks[1].customdata) == ["␣his"]
    assert marks[0].xaxis == bars[2].xaxis and marks[1].xaxis == bars[3].xaxis
    # One x range for all panels, so the reshaping is visible.
    ranges = {tuple(fig.layout[f"xaxis{i or ''}"].range) for i in ("", 2, 3, 4)}
    assert len(ranges) == 1


def test_sampling_stages_custom_names_and_length_check():
    fig = F.sampling_stages_figure(["x", "y"], {"raw": [0.5, 0.5], "top_k": [1, 0]}, stage_names=["A", "B"])
    assert [a.text for a in fig.layout.annotations] == ["A", "B"]
    with pytest.raises(ValueError, match="stage 'top_k'"):
        F.sampling_stages_figure(["x", "y"], {"raw": [0.5, 0.5], "top_k": [1.0]})


# ----------------------------------------------------------------------------------------------
# Parameters, training, memory


def test_parameter_treemap_sums_and_parents_are_consistent():
    items = [
        ("tok_emb", 1000),
        ("pos_emb", 100),
        ("trf_blocks.0.att.W_query", 16),
        ("trf_blocks.0.att.out_proj", 20),
        ("trf_blocks.0.ff.layers.0", 64),
        ("trf_blocks.1.att.W_query", 16),
        ("final_norm", 8),
        ("out_head", 0),  # tied to tok_emb
    ]
    (tm,) = F.parameter_treemap(items).data
    ids, parents, values = list(tm.ids), list(tm.parents), list(tm.values)
    assert list(tm.labels)[ids.index(F.ROOT_ID)] == "model"
    (zh,) = F.parameter_treemap(items, root_label="模型").data
    assert list(zh.labels)[ids.index(F.ROOT_ID)] == "模型" and list(zh.ids) == ids
    assert len(set(ids)) == len(ids)
    value = dict(zip(ids, values))
    root = F.ROOT_ID
    assert value[root] == sum(c for _, c in items) == 1224
    assert parents[ids.index(root)] == ""
    for node, parent in zip(ids, parents):
        if node != root:
            assert parent in value  # every parent is a node
            assert parent == root or node.startswith(parent + ".")
    for node in ids:
        children = [c for c, p in zip(ids, parents) if p == node]
        if children:
            assert value[node] == sum(value[c] for c in children)
    assert value["trf_blocks.0"] == 100 and value["trf_blocks"] == 116 and value["out_head"] == 0
    assert tm.branchvalues == "total"
    assert list(tm.labels)[ids.index("trf_blocks.0")] == "trf_blocks.0"
    assert "%{value:,}" in tm.hovertemplate
    share = dict(zip(ids, (c[1] for c in tm.customdata)))
    assert share["tok_emb"] == pytest.approx(1000 / 1224)


def test_parameter_components_bar():
    fig = F.parameter_components_bar(["token embedding", "feed-forward"], [10, 20], [10, 21])
    formula, measured = fig.data
    assert list(formula.x) == [10, 20] and list(measured.x) == [10, 21]
    assert list(measured.text) == ["10", "21"]
    assert list(fig.layout.yaxis.ticktext) == ["token embedding", "feed-forward"]


def test_loss_curve_traces_and_baselines():
    train = [(0, 10.9), (10, 8.0), (20, 6.5)]
    val = [(10, 8.3), (20, 7.0)]
    fig = F.loss_curve(train, val, baselines={"unigram": 7.6, "random init": 10.8})
    tr, va = fig.data
    assert (tr.name, list(tr.x), list(tr.y)) == ("train", [0, 10, 20], [10.9, 8.0, 6.5])
    assert (va.name, list(va.x), list(va.y)) == ("validation", [10, 20], [8.3, 7.0])
    assert sorted(s.y0 for s in fig.layout.shapes) == [7.6, 10.8]
    assert all(s.line.dash == "dash" for s in fig.layout.shapes)
    assert {a.text for a in fig.layout.annotations} == {"unigram: 7.60", "random init: 10.80"}
    empty = F.loss_curve([], [])  # before the first step
    assert [list(t.x) for t in empty.data] == [[], []]


def test_memory_bars_units():
    fig = F.memory_bars({"fp32": 497_758_232, "KV cache (1024 tokens, fp32)": 37_748_736})
    (bar,) = fig.data
    assert bar.orientation == "h" and fig.layout.xaxis.title.text == "MB"
    np.testing.assert_allclose(list(bar.x), [497.758232, 37.748736])
    assert list(bar.text) == ["497.76 MB", "37.75 MB"]
    # Outside labels are never shrunk, so presenter mode's minimum text size cannot hide them.
    assert bar.constraintext == "none"
    assert list(fig.layout.yaxis.ticktext) == ["fp32", "KV cache<br>(1024 tokens, fp32)"]
    big = F.memory_bars({"training": 1_991_036_928})
    assert big.layout.xaxis.title.text == "GB" and list(big.data[0].text) == ["1.99 GB"]


def test_empty_figure_message():
    fig = F.empty_figure("Generate some text first")
    assert fig.layout.annotations[0].text == "Generate some text first"
    assert not fig.data


# ----------------------------------------------------------------------------------------------
# Every builder: serialisable, readable, self-contained


def all_figures():
    A = causal_attention(4, 8)
    stats = S.head_stats([A, A])
    return {
        "heatmap": F.attention_heatmap(A[0], LABELS, log_scale=True, highlight_query=2, max_tokens=6),
        "grid": F.attention_grid(A, LABELS, log_scale=True),
        "overview": F.attention_overview(stats["entropy"], metric_name="entropy (bits)"),
        "rollout": F.attention_heatmap(S.attention_rollout([A, A]), LABELS),
        "query": F.query_attention_bars(A[0, 7], LABELS),
        "tokens": F.token_probability_bars(["a", "b"], [0.6, 0.4], chosen=0),
        "stages": F.sampling_stages_figure(["a", "b"], {"raw": [0.6, 0.4], "top_k": [1.0, 0.0]}, chosen="a"),
        "treemap": F.parameter_treemap([("a.b", 3), ("a.c", 0), ("d", 5)]),
        "components": F.parameter_components_bar(["x"], [1], [1]),
        "loss": F.loss_curve([(0, 3.0)], [(0, 3.1)], baselines={"unigram": 2.0}),
        "memory": F.memory_bars({"fp32": 4000}),
        "empty": F.empty_figure("nothing yet"),
    }


@pytest.mark.parametrize("name", list(all_figures()))
def test_every_figure_serialises_and_is_readable(name):
    fig = all_figures()[name]
    assert isinstance(fig, go.Figure)
    data = json.loads(fig.to_json())
    assert data["layout"]["font"]["size"] >= 13
    assert 200 <= data["layout"]["height"] <= 900  # fits a laptop screen
    assert fig.layout.template == pio.templates["plotly_white"]
    assert "http" not in fig.to_json()  # no CDN or remote assets


@pytest.mark.parametrize(
    "module", ["playground.figures", "playground.figures.inside", "playground.inside.attention_stats"]
)
def test_figure_modules_import_neither_torch_nor_gradio(module):
    code = f"import sys, {module}\nprint(sorted(k for k in ('torch', 'gradio') if k in sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_probability_axes_are_percentages_not_si_prefixes():
    """Small probabilities must not read as "200µ" (plotly's default SI format)."""
    from playground.figures import inside as lf

    tiny = [2e-4, 1e-4, 5e-5]
    figs = {
        "top": (lf.top_bars(["a", "b", "c"], tiny, title=""), "xaxis"),
        "before_after": (lf.before_after_bars(["a", "b", "c"], tiny, tiny, title=""), "xaxis"),
        "maths": (lf.attention_steps_figure([0, 1, 2], ["a", "b", "c"], [0.1, 0.2, 0.3], tiny, title=""), "yaxis2"),
    }
    for name, (fig, axis) in figs.items():
        assert fig.layout[axis].tickformat == ".3~%", name


def test_a_token_label_keeps_its_id_whole_and_fits_the_tick_budget():
    from playground.figures.style import TOKEN_LABEL_CHARS, token_id_label

    assert token_id_label("\u2423thee", 17903) == "\u2423thee (17903)"
    long = token_id_label("\u2423unbelievable", 24479)
    assert long.endswith(" (24479)") and "…" in long and len(long) == TOKEN_LABEL_CHARS
    fig = F.token_probability_bars([token_id_label("\u2423thee", 17903), long], [0.43, 0.2], chosen=0)
    assert list(fig.layout.yaxis.ticktext) == ["\u2423thee (17903)", long]
