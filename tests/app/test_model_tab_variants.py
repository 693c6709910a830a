"""The Model tab builds the variants since GPT-2: switches and presets in the form, through the server (issue 38)."""

from __future__ import annotations

import pytest

from playground import PRESETS, count_parameters
from playground.engine.kv_cache import KVCache
from playground.engine.presets import MODERN_PRESETS
from playground.server.model_cache import CACHE
from playground.server.recipes import random_recipe
from playground.ui import common, model_switch
from playground.ui.model import tab as model_tab
from tests.helpers import plain_text

NANO = PRESETS["nano"]


def fields_of(cfg):
    return [getattr(cfg, f) for f in model_switch.FIELDS]


def nano_state():
    return {**common.new_state(), "recipe": random_recipe(NANO, seed=0), "run_id": None}


@pytest.mark.parametrize("name", list(MODERN_PRESETS))
def test_a_modern_preset_fills_the_form_with_its_switches_and_reads_back_as_itself(name):
    filled = model_tab.preset_fields(name)
    cfg = model_switch.config_from_fields(*filled[: len(model_switch.FIELDS)])
    assert cfg == MODERN_PRESETS[name]
    assert model_switch.preset_name(cfg) == name
    assert name in [value for _label, value in model_switch.preset_choices("en")]


@pytest.mark.parametrize("name", ["llama-3.2-style", "qwen3-style"])
def test_building_a_variant_shows_its_own_tree_breakdown_and_kv_cache_per_token(name):
    cfg = MODERN_PRESETS[name]
    out = model_switch.Switch(
        *model_tab.build_model(nano_state(), "random", 0, "gpt2", None, "float32", *fields_of(cfg))
    )
    assert "Ready" in out.message, out.message
    model = CACHE.get(out.state["recipe"])
    assert model.cfg == cfg and out.preset == name
    assert f"{count_parameters(model):,} parameters" in plain_text(out.summary).replace("**", "")
    # The KV figure (below the build button) is what a full-context cache of this model holds, over its positions.
    kv = plain_text(out.tying_md).replace("**", "")
    per_token = KVCache(cfg).nbytes() // cfg.context_length
    assert f"KV cache. {per_token:,} bytes a token" in kv
    assert f"{cfg.n_heads} query heads share {cfg.kv_heads} key/value heads" in kv
    assert model_tab.preset_fields(name).tying_md == out.tying_md  # choosing the preset shows it before the build
    assert all(row[4] == "✓" for row in out.breakdown_df)  # formula = measured, GQA's K heads included
    tree = {row[-1]: row for row in model_tab.show_tree(out.state, 4)}  # the tree slider one level deeper
    w_key = tree["trf_blocks.0.att.W_key"]
    assert w_key[2] == f"weight [{cfg.kv_heads * cfg.head_dim}, {cfg.emb_dim}]", w_key  # K heads, not H
    assert tree["trf_blocks.0.norm1"][1] == "RMSNorm" and tree["trf_blocks.0.ff"][1] == "SwiGLU"
    assert ("trf_blocks.0.att.q_norm" in tree) == cfg.qk_norm
    assert out.head["maximum"] == cfg.n_heads - 1  # the Generate tab's head slider reaches every query head


def test_switching_one_switch_changes_the_counts_by_its_formula():
    llama = MODERN_PRESETS["llama-3.2-style"]
    full = llama.replace(n_kv_heads=0)  # every query head with its own key and value
    built = {}
    for cfg in (llama, full):
        out = model_switch.Switch(
            *model_tab.build_model(nano_state(), "random", 0, "gpt2", None, "float32", *fields_of(cfg))
        )
        built[cfg.kv_heads] = count_parameters(CACHE.get(out.state["recipe"]))
        assert out.preset == ("llama-3.2-style" if cfg is llama else model_switch.CUSTOM)
    # W_key and W_value lose (H - K) heads of hd × d each, in every block (no bias in Llama)
    saved = llama.n_layers * 2 * (llama.n_heads - llama.kv_heads) * llama.head_dim * llama.emb_dim
    assert built[llama.n_heads] - built[llama.kv_heads] == saved


@pytest.mark.parametrize(
    "change, en, zh",
    [
        ({"n_kv_heads": 3}, "n_kv_heads (3) must divide n_heads (8)", "n_kv_heads（3）必须整除 n_heads（8）"),
        ({"emb_dim": 120}, "even head_dim", "必须是偶数"),  # 120 / 8 heads: 15 dimensions a head, RoPE needs pairs
        ({"fixed_head_dim": 15}, "RoPE turns pairs", "RoPE 成对旋转"),
        ({"attention_impl": "per_head"}, "needs the fused module", "per_head"),
        ({"norm": "batchnorm"}, "norm must be one of layernorm, rmsnorm", "batchnorm"),
        ({"rope_theta": 1}, "rope_theta must be a number above 1", "rope_theta"),
        ({"qk_norm": "maybe"}, "qk_norm must be true or false", "qk_norm"),
    ],
)
def test_a_bad_combination_is_refused_in_both_languages_and_the_model_stays(change, en, zh):
    values = dict(zip(model_switch.FIELDS, fields_of(MODERN_PRESETS["llama-3.2-style"]))) | change
    for lang, text in (("en", en), ("zh-CN", zh)):
        state = {**nano_state(), "lang": lang}
        out = model_tab.build_model(
            state, "random", 0, "gpt2", None, "float32", *[values[f] for f in model_switch.FIELDS]
        )
        assert out[0] is state  # the previous model stays
        assert text in plain_text(out[1]), plain_text(out[1])
        assert "Traceback" not in out[1]


def test_an_older_caller_that_sends_only_gpt2_fields_builds_gpt2_layout():
    gpt2_fields = fields_of(NANO)[:12]
    assert model_switch.config_from_fields(*gpt2_fields) == NANO
