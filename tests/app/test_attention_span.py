"""Heatmaps for long runs (issue 12): the newest 64 positions, or the whole run with the first-token
sink in view; the title says which, and the whole map carries every T×T value of the live model."""

import numpy as np
import pytest
import torch

from playground import PRESETS
from playground import figures as F
from playground.inside import attention_stats as S
from playground.server import attention_views as views
from playground.server.model_cache import CACHE
from playground.server.recipes import random_recipe
from playground.server.runs import get_run
from playground.ui import attention_view as av
from playground.ui.generate.tab import generate_tokens

NANO = PRESETS["nano"]
N_NEW = 110  # with the prompt, past the 64-position window and the 96 labelled ones (nano: 128 max)


def _title(fig) -> str:
    """The title as read: long titles are wrapped onto two lines with <br> (figure_dress)."""
    return fig.layout.title.text.replace("<br>", " ")


@pytest.fixture(scope="module")
def long_run():
    state = {"recipe": random_recipe(NANO, seed=3), "run_id": None}
    *_, last = generate_tokens(state, "Once upon a time there was", 0.0, 0, 1.0, N_NEW, 1, True)
    state = last[0]
    run = get_run(state["run_id"])
    model = CACHE.get(state["recipe"])
    with torch.no_grad():
        _, trace = model(torch.tensor([run.token_ids]), return_attention=True)
    return state, run, trace


def test_whole_run_has_every_cell_of_the_live_model(long_run):
    state, run, trace = long_run
    T = len(run.token_ids)
    assert T > views.HEATMAP_MAX_TOKENS
    fig, query_fig, query_update, msg = av.attention_views(state, av.VIEWS[0], 1, 1, False, T - 1, av.SPANS[1])
    assert msg == ""
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    assert z.shape == (T, T)
    expected = trace.layer(1)[0, 1].numpy()
    lower = np.tril(np.ones((T, T), dtype=bool))
    np.testing.assert_allclose(z[lower], expected[lower], rtol=1e-5, atol=1e-7)
    assert np.isnan(z[~lower]).all()  # the causal triangle is blank, not a colour
    assert list(fig.data[0].x) == list(range(T)) and list(fig.data[0].y) == list(range(T))
    title = _title(fig)
    assert f"whole run, {T}×{T}" in title and "earlier keys cut" not in title
    assert T > F.LABEL_EVERY_TOKEN_MAX and fig.layout.xaxis.tickmode == "auto"  # numbered axes that follow the zoom
    assert fig.data[0].customdata is None and "p = %{z:.3g}" in fig.data[0].hovertemplate  # z only: half the bytes
    # the sink column is there: position 0 is a key of every row
    assert np.all(z[:, 0] > 0)


def test_newest_window_is_64_positions_and_says_so(long_run):
    state, run, trace = long_run
    T = len(run.token_ids)
    fig, *_ = av.attention_views(state, av.VIEWS[0], 1, 1, False, T - 1, av.SPANS[0])
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    assert z.shape == (views.HEATMAP_MAX_TOKENS, views.HEATMAP_MAX_TOKENS)
    start = T - views.HEATMAP_MAX_TOKENS
    expected = trace.layer(1)[0, 1].numpy()[start:, start:]
    lower = np.tril(np.ones(z.shape, dtype=bool))
    np.testing.assert_allclose(z[lower], expected[lower], rtol=1e-5, atol=1e-7)
    assert f"showing positions {start}–{T - 1} of {T}" in _title(fig)
    # the default (and what the API's callers got before the choice existed) is this window
    default, *_ = av.attention_views(state, av.VIEWS[0], 1, 1, False, T - 1)
    assert np.asarray(default.data[0].z).shape == z.shape


@pytest.mark.parametrize("view", [av.VIEWS[2], av.VIEWS[3]])
def test_whole_run_average_and_rollout(long_run, view):
    state, run, trace = long_run
    T = len(run.token_ids)
    fig, query_fig, _, msg = av.attention_views(state, view, 0, 0, False, 5, av.SPANS[1])
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    layers = [trace.layer(i)[0].numpy() for i in range(2)]
    expected = layers[0].mean(0) if view == av.VIEWS[2] else S.attention_rollout(layers)
    lower = np.tril(np.ones((T, T), dtype=bool))
    np.testing.assert_allclose(z[lower], expected[lower], rtol=1e-4, atol=1e-6)
    assert "whole run" in _title(fig)
    np.testing.assert_allclose(np.asarray(query_fig["value"].data[0].y)[:6], expected[5, :6], rtol=1e-4, atol=1e-6)


def test_grid_says_it_keeps_its_window_and_bad_span_is_refused(long_run):
    state, run, _ = long_run
    fig, *_ = av.attention_views(state, av.VIEWS[1], 0, 0, True, None, av.SPANS[1])
    T = len(run.token_ids)
    assert f"the grid shows positions {T - views.GRID_MAX_TOKENS}–{T - 1} ({views.GRID_MAX_TOKENS}," in _title(fig)
    out = av.attention_views(state, av.VIEWS[0], 0, 0, True, None, "everything")
    assert "Heatmap range must be one of" in out[3]


@pytest.mark.parametrize("query", [10, 100])
@pytest.mark.parametrize("view", [av.VIEWS[0], av.VIEWS[1]])
def test_window_holds_the_querys_keys_and_its_bars_agree(long_run, query, view):
    """An early query: the map's window ends at the query or later, never starts at it, and the
    bars under it cover the same keys, up to the query."""
    state, run, trace = long_run
    T = len(run.token_ids)
    fig, query_fig, _, msg = av.attention_views(state, view, 1, 1, False, query, av.SPANS[0])
    assert msg == ""
    limit = views.GRID_MAX_TOKENS if view == av.VIEWS[1] else views.HEATMAP_MAX_TOKENS
    hi = max(query, limit - 1)
    lo = hi - limit + 1
    assert hi < T - 1 and lo <= query  # the early query is inside, with every key the window can hold
    keys = [list(d.x) for d in fig.data]
    assert all(k == list(range(lo, hi + 1)) for k in keys)
    bars = query_fig["value"].data[0]
    assert list(bars.x) == list(range(lo, query + 1))  # the same window, and no masked future keys
    layer = trace.layer(1)[0].numpy()
    expected = layer[1, query, lo : query + 1] if view == av.VIEWS[0] else layer.mean(0)[query, lo : query + 1]
    np.testing.assert_allclose(np.asarray(bars.y), expected, rtol=1e-4, atol=1e-6)
    if view == av.VIEWS[0]:
        z = np.asarray(fig.data[0].z, dtype=np.float64)
        np.testing.assert_allclose(z[query - lo, : query - lo + 1], expected, rtol=1e-4, atol=1e-6)
        assert f"showing positions {lo}–{hi} of {T}, up to the query" in _title(fig)
    assert f"keys {lo}–{query}" in query_fig["value"].layout.title.text


def test_a_run_longer_than_the_context_says_so_and_the_status_agrees():
    """Past the context: "whole run" is the model's last window, said in the title, and the status
    line names the same first position as the figures."""
    from playground.ui.chips import status_html

    state = {"recipe": random_recipe(NANO, seed=3), "run_id": None}
    ctx = NANO.context_length
    *_, last = generate_tokens(state, "Once upon a time there was", 0.0, 0, 1.0, ctx + 12, 1, True)
    state, status = last[0], last[2]
    run = get_run(state["run_id"])
    T = len(run.token_ids)
    start = T - ctx
    assert start > 0
    fig, *_ = av.attention_views(state, av.VIEWS[0], 0, 0, False, None, av.SPANS[1])
    title = _title(fig)
    assert f"window: positions {start}–{T - 1}" in title
    assert f"the model's last context window, {ctx}×{ctx} (positions before {start} are outside it)" in title
    assert f"the window now starts at position {start} " in status
    zh = status_html(run, 1.0, "done", "zh-CN", ctx)
    assert f"窗口现在从位置 {start} 开始" in zh


def test_overview_and_rollout_are_computed_once_per_trace(long_run, monkeypatch):
    state, run, _ = long_run
    av.attention_views(state, av.VIEWS[3], 0, 0, True, None)
    av.attention_views(state, av.VIEWS[4], 0, 0, True, None)
    calls = []
    monkeypatch.setattr(views, "attention_rollout", lambda *a, **k: calls.append(1))
    monkeypatch.setattr(views, "head_stats", lambda *a, **k: calls.append(1))
    for view in av.VIEWS[3:]:
        fig, *_, msg = av.attention_views(state, view, 0, 0, True, 7)
        assert msg == ""
    assert calls == []  # the query slider and the overview metrics reuse what was computed


def test_streamed_layers_give_the_same_statistics_as_a_list():
    rng = np.random.default_rng(0)
    layers = []
    for _ in range(3):
        x = rng.normal(size=(2, 9, 9)) * 2
        x[:, np.triu(np.ones((9, 9), dtype=bool), 1)] = -np.inf
        e = np.exp(x - x.max(-1, keepdims=True))
        layers.append((e / e.sum(-1, keepdims=True)).astype(np.float32))
    a, b = S.head_stats(layers), S.head_stats(iter(layers))
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    ref64 = S.head_stats([x.astype(np.float64) for x in layers])
    for k in a:
        np.testing.assert_allclose(a[k], ref64[k], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(S.attention_rollout(iter(layers)), S.attention_rollout(layers))


def test_big_heatmap_numbers_its_axes_small_one_labels_every_token():
    small = F.attention_heatmap(np.eye(10), [f"t{i}" for i in range(10)])
    assert small.layout.xaxis.tickmode == "array" and len(small.layout.xaxis.ticktext) == 10
    n = F.LABEL_EVERY_TOKEN_MAX + 1
    big = F.attention_heatmap(np.eye(n), [f"t{i}" for i in range(n)])
    assert big.layout.xaxis.tickmode == "auto" and big.layout.xaxis.ticktext is None


def test_the_induction_overview_scores_every_head_of_the_live_model():
    """A sentence said twice: the overview's cell for each head is the mass it puts on the token after
    the earlier occurrence, averaged over the repeating queries, recomputed here from the model's trace."""
    state = {"recipe": random_recipe(NANO, seed=4), "run_id": None}
    line = "The quick brown fox jumps over the lazy dog. "
    *_, last = generate_tokens(state, line + line, 0.0, 0, 1.0, 4, 1, True)
    state = last[0]
    run = get_run(state["run_id"])
    model = CACHE.get(state["recipe"])
    ids = torch.tensor(run.token_ids)
    with torch.no_grad():
        _, trace = model(ids[None], return_attention=True)
    for lang in ("en", "zh-CN"):
        fig, query_fig, _, msg = av.attention_views({**state, "lang": lang}, "overview-induction", 0, 0, False, None)
        assert msg == "" and query_fig["visible"] is False
        z = np.asarray(fig.data[0].z, dtype=np.float64)
        assert z.shape == (NANO.n_layers, NANO.n_heads)
        T = len(ids)
        match = torch.zeros(T, T, dtype=torch.bool)
        for q in range(T):
            for k in range(1, q + 1):
                match[q, k] = bool(ids[k - 1] == ids[q])
        rows = match.any(1)
        expected = np.stack(
            [(trace.layer(i)[0][:, rows] * match[rows]).sum(-1).mean(-1).numpy() for i in range(NANO.n_layers)]
        )
        np.testing.assert_allclose(z, expected, rtol=1e-4, atol=1e-6)
        assert f"{int(rows.sum())}" in _title(fig)


@pytest.mark.parametrize("view", av.VIEWS)
def test_the_servers_view_data_is_the_live_models_attention(long_run, view):
    """One server call returns a view's numbers: each map is the model's own attention (or its head
    average, rollout or overview scores) over the shown positions, and the query's row is the map's."""
    state, run, trace = long_run
    model = CACHE.get(state["recipe"])
    w = views.window(model, run)
    T = len(run.token_ids)
    assert (w.start, w.end, len(w.labels)) == (0, T - 1, T)
    query, layer, head = T - 5, 1, 2
    data = views.view_data(model, w, view, layer, head, query)
    if view in views.OVERVIEW_METRICS:
        assert data.row is None and data.matrix.shape == (model.cfg.n_layers, model.cfg.n_heads)
        return
    lo, hi = data.lo, data.hi
    assert hi - lo + 1 == (views.GRID_MAX_TOKENS if view == "all" else views.HEATMAP_MAX_TOKENS)
    a, q = lo, query
    one = trace.layer(layer)[0].numpy()  # (H, T, T): the live model's own forward
    want = {
        "one": one[head][a : hi + 1, a : hi + 1],
        "all": one[:, a : hi + 1, a : hi + 1],
        "average": one.mean(0)[a : hi + 1, a : hi + 1],
    }
    if view in want:
        np.testing.assert_allclose(data.matrix, want[view], atol=1e-6)
    matrix = data.matrix.mean(0) if view == "all" else data.matrix
    np.testing.assert_allclose(data.row, matrix[q - lo, : q - lo + 1], atol=1e-6)
    if view != "all":
        # each shown row holds all of a query's attention when the shown keys start at position 0
        full = views.view_data(model, w, view, layer, head, query, whole=True)
        np.testing.assert_allclose(full.matrix.sum(-1), 1.0, atol=1e-5)


def test_the_map_alone_is_the_map_drawn_with_the_query_bars(long_run):
    """A classroom room publishes the teacher's map alone (``bars=False``): the very map the page draws,
    without the query's bars (left as they are on the page)."""
    state = long_run[0]
    for view in (av.VIEWS[0], "overview-induction"):
        both = av.attention_views(state, view, 1, 1, True, None, av.SPANS[0])
        alone = av.attention_views(state, view, 1, 1, True, None, av.SPANS[0], bars=False)
        assert alone.heatmap.to_json() == both.heatmap.to_json() and alone.query == both.query
    assert alone.query_plot == both.query_plot == {"__type__": "update", "visible": False}  # (an overview: hidden)
    assert av.attention_views(state, av.VIEWS[0], 1, 1, True, None, av.SPANS[0], bars=False).query_plot == av.gr.skip()
