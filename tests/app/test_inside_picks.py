"""Clicking the Inside tab's heatmaps, without a browser (tests/test_inside_browser.py clicks the real
page): what each pick handler draws and which fields it fills, against playground.inside's views on
the same model and tokens; the lens window that fits the page."""

import re

import pytest

from playground import PRESETS
from playground.engine.tokenizer import tokenizer_of
from playground.inside import attention_maths, effects, lenses
from playground.inside.interventions import Intervention
from playground.server.recipes import random_recipe
from playground.ui import common
from playground.ui.common import session_model, session_run
from playground.ui.generate import tab as generate_tab
from playground.ui.inside import picks as ip
from playground.ui.inside import tab as it
from playground.ui.inside.cell_click import PAGE_JS, PICKERS, read_pick, with_page_js

NANO = PRESETS["nano"]


@pytest.fixture(scope="module")
def run_state():
    state = {**common.new_state("en"), "recipe": random_recipe(NANO, seed=0)}
    state = list(generate_tab.generate_tokens(state, "Hello there, how are you today my", 0.8, 40, 1.0, 40, 1, False))[
        -1
    ][0]
    model, run = session_model(state), session_run(state)
    start, ids = run.window(model.cfg.context_length)
    assert start == 0 and len(ids) > 40
    return state, model, ids


def test_a_clicked_lens_cell_shows_its_top10_and_kl_and_fills_the_fields(run_state):
    state, model, ids = run_state
    out = ip.pick_lens_cell(state, None, 1, 30, 32)
    heat, note, _, bars, text, msg, layer, pos = out
    assert (layer, pos, msg) == (1, 30, "")
    want = lenses.lens_cell(model, ids, 1, 30)
    shown_ids = [int(re.search(r"\((\d+)\)$", t).group(1)) for t in bars.layout.yaxis.ticktext]
    assert shown_ids == [t for t, _ in want["top"]]
    assert list(bars.data[0].x) == pytest.approx([p for _, p in want["top"]], abs=1e-6)
    assert "after block 0, position 30" in text and f"{want['kl_to_final_nats']:.3f} nats" in text
    shape = heat.layout.shapes[0]  # the picked cell is outlined
    assert (shape.x0 + shape.x1) / 2 == 30 and (shape.y0 + shape.y1) / 2 == 1
    # nothing picked (a click the page could not read): the view keeps its fields as they are
    assert ip.pick_lens_cell(state, None, None, None)[-2:] == (it.gr.skip(), it.gr.skip())


@pytest.mark.parametrize("shown, want", [(None, 32), (12, 12), (3, 8), (99, 32), ("x", 32)])
def test_the_lens_window_is_what_fits_the_page(run_state, shown, want):
    state, _, ids = run_state
    heat, note, scroll, *_ = it.lens_view(state, None, None, None, shown)
    assert len(heat.data[0].x) == want and list(heat.data[0].x) == list(range(len(ids) - want, len(ids)))
    assert f"Showing positions {len(ids) - want}–{len(ids) - 1}" in note
    assert scroll["maximum"] == len(ids) - want and scroll["visible"]
    assert heat.data[1].textfont.size == 10  # the cells' text
    presented = it.lens_view({**state, "present": True, "lang": "zh-CN"}, None, None, None, shown)[0]
    assert presented.data[1].textfont.size == 14
    assert "<br>" not in presented.layout.title.text  # the lens spans the page: its title is not wrapped to half


def test_a_clicked_attribution_head_opens_its_maths_and_picks_it(run_state):
    state, model, ids = run_state
    shown = ip.shown_attribution(state, None, "")
    assert shown == {"position": len(ids) - 2, "target": "", "n_heads": model.cfg.n_heads}
    out = ip.pick_head(state, shown, 2, 1)
    m_layer, m_head, m_pos, scale, i_pos, target, mlps, table, fig, text, note, msg = out
    assert (m_layer, m_head, m_pos, scale, i_pos, target, msg) == (1, 2, len(ids) - 2, "1.2", len(ids) - 2, "", "")
    want = attention_maths.attention_maths(model, ids, 1, 2, len(ids) - 2)
    assert table.iloc[:, 5].tolist() == pytest.approx(want["softmax"], abs=1e-6)
    assert list(table.columns)[0] == "key position"
    assert text.startswith(f"Layer 1, head 2, query position {len(ids) - 2}") and "head 2 of layer 1" in note
    mlp = ip.pick_head(state, shown, model.cfg.n_heads, 0)  # the MLP column
    assert mlp[6] == "0" and "layer 0" in mlp[10] and mlp[0] == it.gr.skip()
    assert "Draw the heatmap first" in ip.pick_head(state, None, 1, 0)[-1]


def test_the_attribution_click_note_follows_a_language_switch(run_state):
    from types import SimpleNamespace

    state, model, ids = run_state
    page, other = SimpleNamespace(session_hash="note-page"), SimpleNamespace(session_hash="note-other")
    shown = ip.shown_attribution(state, None, "")
    zh = {**state, "lang": "zh-CN"}
    assert ip.redraw_note(page, zh) == it.gr.skip()  # nothing clicked yet: nothing to write again
    note = ip.pick_head(state, shown, 2, 1, request=page)[10]
    assert "head 2 of layer 1" in note
    assert (
        ip.redraw_note(page, zh) == f"已选中第 1 层第 2 头：它在位置 {len(ids) - 2} 的注意力计算见“注意力计算”；"
        "“干预”中的“缩放一个注意力头”已填入它（位置和目标相同），可做剂量-响应。"
    )
    assert ip.redraw_note(page, state) == note and ip.redraw_note(other, zh) == it.gr.skip()
    ip.pick_head(state, shown, model.cfg.n_heads, 0, request=page)  # then the MLP column
    assert ip.redraw_note(page, zh) == "“干预”中的“跳过 MLP”已填入第 0 层。"


def test_a_clicked_sweep_head_is_zeroed_alone(run_state):
    state, model, ids = run_state
    out = ip.pick_sweep_head(state, 3, 0, 0.5, None, 12)
    assert out[:6] == ("0.3", "", "", "", "", False)  # the fields say exactly what ran
    lens_after = out[8].data[0]  # the lens after it: the last 12 positions, as many as fit the page
    assert list(lens_after.x) == list(range(len(ids) - 12, len(ids)))
    want = lenses.logit_lens(model, ids, Intervention(zero_heads=((0, 3),)), first=len(ids) - 12)
    flat = lambda rows: [v for row in rows for v in row[:-1]]  # noqa: E731  (the last has no next token)
    assert flat(lens_after.z) == pytest.approx(flat(want["next_prob"]), rel=1e-4)
    tok = tokenizer_of(model)
    cells = list(out[8].data[1].text)  # row by row, each cell's top token (cut to fit)
    width = len(lens_after.x)
    for i, id_row in enumerate(want["top_id"]):
        shown_row = cells[i * width : (i + 1) * width]
        assert len(shown_row) == len(id_row) and all(
            tok.piece(t).display.startswith(cell.rstrip("…")) for cell, t in zip(shown_row, id_row)
        )
    text = out[9]
    assert text.startswith("Zero L0H3.") and out[10] == ""
    one = effects.compare(model, ids, Intervention(zero_heads=((0, 3),)), len(ids) - 1, lens=False)
    sweep = effects.head_sweep(model, ids)
    delta = one["mean_loss_after"] - one["mean_loss_before"]
    assert sweep["delta_loss"][0][3] == pytest.approx(delta, abs=1e-5)
    assert f"({delta:+.3f})" in text


def test_the_page_script_names_every_picker():
    for plot, button in PICKERS.items():
        assert f'"{plot}": "{button}"' in PAGE_JS
    js = read_pick("pg-lens", x_at=3, y_at=2)
    assert '["pg-lens"]' in js and "a[3] = p.x" in js and "a[2] = p.y" in js
    assert with_page_js("() => { a(); }", "() => { b(); }").count("})();") == 2


def test_the_lens_cell_reuses_the_lens_views_forward_until_the_run_changes(monkeypatch):
    """The lens view's cell is read from the rows its lens just read (no forward of its own); a
    cell outside that window, or of the session's next run, is computed for itself."""
    from playground.ui.inside import data as inside_data

    state = {**common.new_state("en"), "recipe": random_recipe(NANO, seed=0)}
    prompt = "Hello there, how are you today my friend, and what"
    state = list(generate_tab.generate_tokens(state, prompt, 0.8, 40, 1.0, 30, 1, False))[-1][0]
    model, ids = session_model(state), session_run(state).window(NANO.context_length)[1]
    assert len(ids) > 32
    real, calls = lenses.lens_cell, []
    monkeypatch.setattr(
        lenses, "lens_cell", lambda m, i, layer, p, **k: calls.append((layer, p)) or real(m, i, layer, p)
    )
    pos = len(ids) - 5  # inside the lens' window (its last 32 positions)
    bars = it.lens_view(state, None, 2, pos, 32).cell_plot
    assert calls == []
    want = real(model, ids, 2, pos)
    assert list(bars.data[0].x) == pytest.approx([p for _, p in want["top"]], abs=1e-6)
    assert inside_data.lens_cell_data(state, 1, 0)["top"][0][0] == real(model, ids, 1, 0)["top"][0][0]
    assert calls == [(1, 0)]  # position 0 is not in the window the lens read
    # The next run of the same session: the rows of the last one are not used for it.
    state = list(generate_tab.generate_tokens(state, prompt + " is", 0.8, 40, 1.0, 30, 2, False))[-1][0]
    new_ids = session_run(state).window(NANO.context_length)[1]
    calls.clear()
    cell = inside_data.lens_cell_data(state, 2, pos)
    assert calls == [(2, pos)]
    assert [t for t, _, _ in cell["top"]] == [t for t, _ in real(model, new_ids, 2, pos)["top"]]


def test_the_lens_cell_reuses_rows_of_a_lens_drawn_again_from_the_cache_within_a_byte_bound(monkeypatch):
    """A window drawn again comes from the shared lens cache, and its cell still needs no forward;
    rows beyond LENS_ROWS_BYTES are dropped oldest first, and that window's cell is then computed."""
    from playground.server import inside_views
    from playground.ui.inside import data as inside_data

    state = {**common.new_state("en"), "recipe": random_recipe(NANO, seed=3)}
    state = list(generate_tab.generate_tokens(state, "Once upon a time there was a", 0.8, 40, 1.0, 50, 4, False))[-1][0]
    model, ids = session_model(state), session_run(state).window(NANO.context_length)[1]
    assert len(ids) > 40
    real, calls = lenses.lens_cell, []
    monkeypatch.setattr(
        lenses, "lens_cell", lambda m, i, layer, p, **k: calls.append((layer, p)) or real(m, i, layer, p)
    )
    start = session_run(state).window(NANO.context_length)[0]
    it.lens_view(state, start, 1, start + 3, 16)  # window A: positions 0-15
    it.lens_view(state, start + 20, 1, start + 23, 16)  # window B: 20-35
    it.lens_view(state, start, 1, start + 3, 16)  # A again, from the cache
    cell = inside_data.lens_cell_data(state, 2, start + 5)
    assert calls == []
    assert [t for t, _, _ in cell["top"]] == [t for t, _ in real(model, ids, 2, 5)["top"]]
    # Room for one window's rows only: drawing B keeps B's and drops A's.
    one = (model.cfg.n_layers + 1) * 16 * model.cfg.emb_dim * 4
    monkeypatch.setattr(inside_views, "LENS_ROWS_BYTES", one)
    it.lens_view(state, start + 40, 1, start + 43, 16)  # a new window C: computed, its rows kept
    it.lens_view(state, start, 1, start + 3, 16)  # A again: from the cache, without rows now
    inside_data.lens_cell_data(state, 2, start + 5)
    assert calls == [(1, 3), (2, 5)]  # the view's own cell, then the asked one: each a forward


def test_the_kept_lens_rows_are_counted_and_given_up_when_a_request_needs_the_room(monkeypatch):
    """The residual rows a lens keeps are a named holding of the memory budget while kept; a request
    that would not fit otherwise takes their room first, and the cell is then computed again."""
    from playground.runtime.memory import BUDGET
    from playground.server import inside_views
    from playground.ui.inside import data as inside_data

    state = {**common.new_state("en"), "recipe": random_recipe(NANO, seed=5)}
    state = list(generate_tab.generate_tokens(state, "A tale of two cities and", 0.8, 30, 1.0, 30, 6, False))[-1][0]
    model, (start, ids) = session_model(state), session_run(state).window(NANO.context_length)
    it.lens_view(state, start, 1, start + 3, 16)
    key = inside_views._lens_key(state["recipe"], session_run(state), ids, 0, 16)
    rows = inside_views._LENS_CACHE[key][1]
    assert rows is not None
    held = [h for h in BUDGET.usage() if h.kind == "lens rows" and "positions 0–15" in h.what]
    assert [h.nbytes for h in held] == [rows.nbytes] == [(model.cfg.n_layers + 1) * 16 * model.cfg.emb_dim * 4]
    del rows
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", repr((BUDGET.used() + 1024) / 2**30))
    # a request as large as everything recomputable the budget counts (runs' attention, lens rows)
    recomputable = sum(h.nbytes for h in BUDGET.usage() if h.kind in ("attention", "lens rows"))
    BUDGET.check(BUDGET.available() + recomputable, "a request that needs the rows' room")
    assert inside_views._LENS_CACHE[key][1] is None
    assert not [h for h in BUDGET.usage() if h.kind == "lens rows" and "positions 0–15" in h.what]
    real, calls = lenses.lens_cell, []
    monkeypatch.setattr(
        lenses, "lens_cell", lambda m, i, layer, p, **k: calls.append((layer, p)) or real(m, i, layer, p)
    )
    inside_data.lens_cell_data(state, 2, start + 5)
    assert calls == [(2, 5)]
