"""The attention maths view draws what a person can read: the keys up to the query (the masked
later ones summed up in one table row), the most-attended keys labelled, the live model's numbers."""

import numpy as np
import pytest
import torch

from playground import PRESETS
from playground.server.recipes import random_recipe
from playground.ui import common
from playground.ui.common import session_model, session_run
from playground.ui.generate import tab as generate_tab
from playground.ui.inside import tab as it

NANO = PRESETS["nano"]


@pytest.fixture(scope="module")
def run_state():
    state = {**common.new_state("en"), "recipe": random_recipe(NANO, seed=0)}
    prompt = "Hello there, how are you today my friend? " * 3
    state = list(generate_tab.generate_tokens(state, prompt, 0.8, 40, 1.0, 40, 1, False))[-1][0]
    model, run = session_model(state), session_run(state)
    start, ids = run.window(model.cfg.context_length)
    assert start == 0 and len(ids) > 60
    return state, model, ids


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_maths_draws_the_keys_up_to_the_query_and_labels_the_top_ones(run_state, lang):
    state, model, ids = run_state
    pos, layer, head = 30, 1, 2
    table, fig, text, msg = it.maths_view({**state, "lang": lang}, layer, head, pos)
    assert msg == ""
    keys = list(range(pos + 1))
    assert [list(d.x) for d in fig.data] == [keys, keys]  # no masked future key is drawn
    with torch.no_grad():
        _, trace = model(torch.tensor([ids]), return_attention=True)
    want = trace.layer(layer)[0, head, pos, : pos + 1].double().numpy()
    np.testing.assert_allclose(np.asarray(fig.data[1].y), want, rtol=1e-5, atol=1e-7)
    ticks = list(fig.layout.xaxis2.tickvals)
    top = set(np.argsort(-want)[:12].tolist())
    assert set(ticks) == top | {pos} and len(ticks) <= 13  # the top keys and the query itself
    assert len(table) == pos + 2  # a row per visible key, and one for the masked later keys
    later = table.iloc[-1].tolist()
    assert later[0] == f"{pos + 1}–{len(ids) - 1}" and later[-1] == 0.0
    assert (it.tr(lang, "in_maths_later", a=pos + 1, b=len(ids) - 1)) == later[1]
    np.testing.assert_allclose(table.iloc[:-1, -1].astype(float).to_numpy(), want, atol=1e-6)


def test_maths_at_the_last_position_has_no_masked_row(run_state):
    state, _, ids = run_state
    table, fig, _, msg = it.maths_view(state, 0, 0, len(ids) - 1)
    assert msg == "" and len(table) == len(ids) and list(fig.data[0].x) == list(range(len(ids)))


@pytest.mark.parametrize("pos", [12, 19, 30, 60])
def test_every_labelled_key_shows_in_both_languages_on_a_projector(run_state, pos):
    """A short row of keys is labelled key by key (no gap that reads as a missing key); a long one
    names its top keys and the query. Presenter mode, English or 中文, keeps every one of them."""
    state, _, _ = run_state
    shown = {}
    for lang in ("en", "zh-CN"):
        for present in (False, True):
            _, fig, _, msg = it.maths_view({**state, "lang": lang, "present": present}, 1, 2, pos)
            assert msg == ""
            shown[lang, present] = (list(fig.layout.xaxis2.tickvals), list(fig.layout.xaxis2.ticktext))
    ticks, text = shown["en", False]
    assert all(v == (ticks, text) for v in shown.values()), shown
    if pos + 1 <= 20:
        assert ticks == list(range(pos + 1))
    else:
        assert len(ticks) == 13 and ticks[-1] == pos
    assert [t.split("·")[0] for t in text] == [str(k) for k in ticks]
