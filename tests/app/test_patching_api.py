"""The Activation patching endpoints end to end: the real app through gradio_client, its numbers against
the library called directly on the same model, and a pair of different lengths refused with both lengths."""

import pytest

from playground.engine.tokenizer import load_tokenizer
from playground.inside import patching
from playground.server.model_cache import CACHE
from playground.server.patching_views import SUGGESTED_PAIRS
from playground.server.recipes import default_recipe

pytestmark = pytest.mark.slow

PAIR = SUGGESTED_PAIRS[0]


@pytest.fixture(scope="module")
def client(app_url):
    from gradio_client import Client

    return Client(app_url, verbose=False)


def test_activation_patching_endpoint_returns_the_librarys_grid(client):
    model = CACHE.get(default_recipe())
    tok = load_tokenizer()
    clean, corrupted = tok.encode(PAIR["clean"]), tok.encode(PAIR["corrupted"])
    answer, wrong = tok.encode(PAIR["answer"])[0], tok.encode(PAIR["wrong"])[0]
    out = client.predict(
        PAIR["clean"], PAIR["corrupted"], PAIR["answer"], PAIR["wrong"], "resid_pre", api_name="/activation_patching"
    )
    want = patching.activation_patching(model, clean, corrupted, answer, wrong, "resid_pre")
    L, T = model.cfg.n_layers, len(clean)
    assert len(out["values"]) == L and all(len(row) == T for row in out["values"])
    assert out["rows"] == [f"L{i}" for i in range(L)] and len(out["columns"]) == T
    assert out["columns"][-1].startswith(f"{T - 1}·")
    assert out["clean_logit_diff"] == pytest.approx(want["clean_logit_diff"], abs=1e-4)
    assert out["corrupted_logit_diff"] == pytest.approx(want["corrupted_logit_diff"], abs=1e-4)
    flat = lambda grid: [v for row in grid for v in row]  # noqa: E731
    assert flat(out["values"]) == pytest.approx(flat(want["values"]), abs=1e-4)
    # layer 0's input where the two prompts have the same token is the same vector: patching it changes nothing
    same = [p for p in range(T) if clean[p] == corrupted[p]]
    assert [out["values"][0][p] for p in same] == pytest.approx([0.0] * len(same), abs=1e-5)
    assert -1.0 <= out["correlation"] <= 1.0

    heads = client.predict(
        PAIR["clean"], PAIR["corrupted"], PAIR["answer"], PAIR["wrong"], "attn_head", api_name="/activation_patching"
    )
    assert len(heads["values"]) == L and len(heads["columns"]) == model.cfg.n_heads

    path = client.predict(
        PAIR["clean"], PAIR["corrupted"], PAIR["answer"], PAIR["wrong"], "0.2", "1.3", "k", api_name="/path_patching"
    )
    assert set(path["by_input"]) == {"q", "k", "v"} and path["value"] == path["values"][1][3]


def test_different_lengths_are_refused_with_both_lengths(client):
    out = client.predict("When Mary and John went", "When Elizabeth went", " Mary", " John", "resid_pre",
                         api_name="/activation_patching")  # fmt: skip
    assert "error" in out and "5 tokens" in out["error"] and "3 tokens" in out["error"]
    assert "same number of tokens" in out["error"]
    out = client.predict(
        PAIR["clean"], PAIR["corrupted"], " Mary", " Mary", "resid_pre", api_name="/activation_patching"
    )
    assert "error" in out
    out = client.predict(PAIR["clean"], PAIR["corrupted"], " Mary", " John", "nope", api_name="/activation_patching")
    assert "resid_pre" in out["error"]


def test_the_view_and_its_redraw_say_it_in_chinese_with_the_same_numbers():
    from playground.server.patching_views import activation_patching
    from playground.ui.inside import patching as ip

    model = CACHE.get(default_recipe())
    d = activation_patching(model, PAIR["clean"], PAIR["corrupted"], PAIR["answer"], PAIR["wrong"], "mlp_out")
    en = ip.draw(d, "en", False)
    zh = ip.redraw({"lang": "zh-CN"}, d)
    assert en[0].layout.title.text.startswith("Activation patching") and "correlation" in en[2]
    assert zh.pt_exact.layout.title.text.startswith("激活修补") and "相关系数" in zh.pt_md
    assert zh.pt_attr.layout.title.text.startswith("归因修补") and zh.pt_exact.layout.xaxis.title.text.startswith(
        "位置"
    )
    assert [list(r) for r in zh.pt_exact.data[0].z] == [list(r) for r in en[0].data[0].z]
    path = activation_patching(
        model, PAIR["clean"], PAIR["corrupted"], PAIR["answer"], PAIR["wrong"], "path",
        sender=(0, 2), receiver=(1, 3), via="q",
    )  # fmt: skip
    zh_path = ip.draw(path, "zh-CN", False)
    assert "L0H2 → L1H3" in zh_path[2] and zh_path[1].data[0].type == "bar"
