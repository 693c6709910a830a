"""A model's views drawn once for each (recipe, depth, language, presenter mode) and model object: every page
that opens asks for the default model's, twice. What a caller gets is what drawing them anew gives."""

from __future__ import annotations

import pytest
import torch

from playground import PRESETS, GPTModel
from playground.server.recipes import random_recipe
from playground.ui import model_switch

NANO = PRESETS["nano"]


def _model(seed: int = 0) -> GPTModel:
    torch.manual_seed(seed)
    return GPTModel(NANO).eval()


@pytest.fixture(autouse=True)
def nothing_kept():
    model_switch._DRAWN.clear()
    yield
    model_switch._DRAWN.clear()


def _fresh(model, recipe, depth=3, lang="en", present=False):
    return model_switch._drawn_views(model, recipe, depth, lang, present)


@pytest.mark.parametrize(("lang", "present", "depth"), [("en", False, 3), ("zh-CN", True, 2)])
def test_views_drawn_again_are_those_drawn_anew(lang, present, depth):
    model, recipe = _model(), random_recipe(NANO, seed=0)
    first = model_switch.model_views(model, recipe, depth, lang, present)
    second = model_switch.model_views(model, recipe, depth, lang, present)
    fresh = _fresh(model, recipe, depth, lang, present)
    for views in (first, second):
        assert views.summary == fresh[0] and views.tying_md == fresh[1]
        assert _rows(views.breakdown_df) == _rows(fresh[2]) and _rows(views.tree_df) == _rows(fresh[5])
        assert views.treemap.to_json() == fresh[3].to_json()
        assert views.memory_plot.to_json() == fresh[4].to_json()
        assert views.layer["maximum"] == NANO.n_layers - 1 and views.head["maximum"] == NANO.n_heads - 1
    assert second.treemap is first.treemap and second.memory_plot is first.memory_plot  # drawn once
    assert len(model_switch._DRAWN) == 1


def test_each_caller_owns_its_tables_and_slider_updates():
    model, recipe = _model(), random_recipe(NANO, seed=0)
    first = model_switch.model_views(model, recipe)
    want = _rows(first.tree_df)
    first.tree_df[0][0] = "changed by a caller"
    first.layer.pop("maximum")  # (Gradio takes an update's value out of its dict)
    second = model_switch.model_views(model, recipe)
    assert _rows(second.tree_df) == want
    assert second.layer is not first.layer and second.layer["maximum"] == NANO.n_layers - 1


def test_another_model_object_or_setting_is_drawn_anew():
    recipe = random_recipe(NANO, seed=0)
    model = _model()
    en = model_switch.model_views(model, recipe)
    rebuilt = model_switch.model_views(_model(), recipe)  # (the model cache built the recipe again)
    assert rebuilt.treemap is not en.treemap and rebuilt.treemap.to_json() == en.treemap.to_json()
    zh = model_switch.model_views(model, recipe, lang="zh-CN")
    assert zh.summary != en.summary and zh.treemap is not en.treemap
    deeper = model_switch.model_views(model, recipe, depth=4)
    assert len(_rows(deeper.tree_df)) > len(_rows(en.tree_df))


def test_the_kept_views_stay_within_their_bound():
    model = _model()
    for seed in range(model_switch.DRAWN_KEPT + 5):
        model_switch.model_views(model, random_recipe(NANO, seed=seed))
    assert len(model_switch._DRAWN) == model_switch.DRAWN_KEPT


def _rows(table) -> list:
    return table.values.tolist() if hasattr(table, "values") else [list(row) for row in table]
