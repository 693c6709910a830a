"""The views of the inside on a model with every switch since GPT-2 (issue 38): each works and agrees with
the model's own numbers, or says why not (a message key with 中文)."""

import pytest
import torch

from playground.inside import attribution, effects, lenses
from playground.inside.attention_maths import attention_maths
from playground.inside.interventions import Intervention, run_with_hooks
from tests.tiny_models import SINCE_GPT2, three_layer_model

IDS = [5, 17, 230, 9, 41, 77, 3, 230, 9, 41, 12, 8]


@pytest.fixture(scope="module")
def model():
    return three_layer_model(seed=3, std=0.15, **SINCE_GPT2)


def test_attention_maths_is_the_traced_row_of_a_query_head_with_its_shared_key_head(model):
    with torch.no_grad():
        _, trace = model(torch.tensor([IDS]), return_attention=True)
    for layer, head, position in ((0, 0, 11), (2, 3, 9), (1, 1, 2)):
        got = attention_maths(model, IDS, layer, head, position)
        want = trace.layer(layer)[0, head, position]
        assert got["softmax"] == pytest.approx(want.tolist(), abs=1e-6)
        assert got["weighted_v"] == pytest.approx(got["ctx"], abs=1e-5)
        assert got["kv_head"] == head // 2 and got["window"] == 5
        allowed = [j for j, m in enumerate(got["masked"]) if m is not None]
        assert allowed == list(range(max(0, position - 4), position + 1))  # the last 5 positions only


def test_the_lens_last_row_is_the_models_prediction(model):
    lens = lenses.logit_lens(model, IDS)
    with torch.no_grad():
        logits = model(torch.tensor([IDS]))[0]
    assert lens["top_id"][-1] == logits.argmax(-1).tolist()


def test_hooks_keep_the_window_and_gqa(model):
    plain = model(torch.tensor([IDS])).detach()
    logits, cache = run_with_hooks(model, IDS)
    torch.testing.assert_close(logits, plain, rtol=1e-5, atol=1e-5)
    assert cache.ctx[0].shape == (1, 4, len(IDS), model.cfg.head_dim)  # one output per query head
    zeroed, _ = run_with_hooks(model, IDS, Intervention(zero_heads=((1, 2),)))
    assert not torch.allclose(zeroed, plain)


def test_dose_response_at_alpha_one_is_the_plain_log_probability(model):
    d = effects.dose_response(model, IDS, 1, 2, 6, target_id=17)
    with torch.no_grad():
        want = torch.log_softmax(model(torch.tensor([IDS[:7]]))[0, -1].double(), -1)[17]
    one = d["alphas"].index(1.0)
    assert d["logprob"][one] == pytest.approx(float(want), abs=2e-5)


@pytest.mark.parametrize("position, target", [(5, None), (11, 230), (0, 9)])
def test_attribution_through_a_final_rmsnorm_sums_to_the_models_logit(model, position, target):
    d = attribution.logit_attribution(model, IDS, position, target)
    assert d["final_norm"] == "rmsnorm"
    assert d["total"] == pytest.approx(d["model_logit"], abs=1e-4)
    with torch.no_grad():
        logits = model(torch.tensor([IDS[: position + 1]]))[0, -1]
        assert d["model_logit"] == pytest.approx(float(logits[d["target_id"]]), abs=1e-5)
        # the frozen rms is the final norm's own denominator at that position
        _, cache = run_with_hooks(model, IDS[: position + 1])
        x = cache.resid[-1][0, position].double()
        assert d["final_norm_sigma"] == pytest.approx(float(torch.sqrt(x.pow(2).mean() + model.final_norm.eps)))
    # RoPE adds nothing to the residual stream, and there are no biases and no shift to read
    assert d["pos_emb"] == 0.0 and d["final_norm_shift"] == 0.0 and set(d["attn_bias"]) == {0.0}
    assert len(d["heads"][0]) == model.cfg.n_heads  # one figure per query head, GQA's shared keys or not


def test_attribution_of_a_layernorm_model_without_biases_sums_to_its_logit():
    plain = three_layer_model(seed=4, std=0.15, bias=False, qkv_bias=False)
    d = attribution.logit_attribution(plain, IDS, 7)
    assert d["final_norm"] == "layernorm" and set(d["attn_bias"]) == {0.0}
    assert d["total"] == pytest.approx(d["model_logit"], abs=1e-4)


def test_the_servers_maps_keep_a_layers_window():
    from playground.server.runs import layer_attention

    q, k = torch.randn(2, 6, 8), torch.randn(2, 6, 8)
    windowed, whole = layer_attention([(q, k, 3)], 0), layer_attention([(q, k)], 0)
    assert (windowed[:, 5, :3] == 0).all() and (windowed[:, 5, 3:] > 0).all()
    assert (whole[:, 5] > 0).all()


def test_side_by_side_marks_what_changed_since_gpt2():
    from playground.engine.presets import MODERN_PRESETS, PRESETS, REAL_SIZES
    from playground.inside.side_by_side import side_by_side

    got = side_by_side(PRESETS["tiny"], MODERN_PRESETS["llama-3.2-style"])
    marks = {row["name"]: row["mark"] for row in got["tree"]}
    assert marks["tok_emb"] == "same" and marks["trf_blocks.0.norm1"] == "changed"
    assert marks["trf_blocks.0.att.rotary"] == "only_b" and marks["trf_blocks.0.ff.layers.1"] == "only_a"
    assert marks["trf_blocks.0.ff.fc3"] == "only_b"
    rows = {r["component"]: r for r in got["breakdown"]}
    assert rows["attention QKV"]["a"] == 4 * (3 * 128 * 128 + 3 * 128)
    assert rows["attention QKV"]["b"] == 4 * (128 * 8 * 16 + 2 * 128 * 2 * 16)  # GQA: 2 key/value heads
    assert not rows["token embedding"]["differs"] and rows["layer norms"]["differs"]
    assert got["total"] == (7_259_008, 7_384_320)
    assert ("n_kv_heads", 0, 2) in got["switches"]
    assert got["kv_bytes_per_token"] == (2048.0, 512.0)
    real = side_by_side(PRESETS["gpt2-xl"], REAL_SIZES["llama-3.2-1b"])  # on the meta device: no memory
    assert real["total"] == (1_557_611_200, 1_235_814_400)


def test_the_model_tabs_side_by_side_tables():
    from playground.ui.model_words import side_by_side_tables

    tree, breakdown, summary = side_by_side_tables("gpt2-small", "llama-3.2-1b", max_depth=4)
    rows = {r[1].strip("\u2003"): r for r in tree}
    assert rows["W_key"][0] == "≠" and rows["W_key"][3] == "590,592" and rows["W_key"][5] == "1,048,576"
    assert rows["fc1"][0] == "▶" and rows["layers"][0] == "◀"
    assert all(not r[1].startswith("\u2003\u20031") for r in tree)  # block 0 only
    assert breakdown[2][2] == "21,261,312" and breakdown[2][4] == "100,663,296" and breakdown[2][5] == "≠"
    assert "1,235,814,400" in summary and "32,768" in summary and "`n_kv_heads` 0 → 8" in summary
    _, _, zh = side_by_side_tables("tiny", "qwen3-style", lang="zh")
    assert "个参数" in zh
