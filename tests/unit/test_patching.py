"""Activation patching on tiny random models: the batched grid against one plain forward per cell, the
refusals (lengths, same tokens, path order), Stop, and the shortcuts (a window of positions, a batch that
grows layer by layer) against the whole forward. transformers' GPT-2 is the reference in
tests/integration/test_patching_hf.py."""

import pytest
import torch

from playground.inside import patching, patching_paths
from playground.inside.interventions import StopRequested
from tests.tiny_models import SINCE_GPT2, three_layer_model

CLEAN = [5, 17, 230, 9, 41, 77, 3]
CORRUPTED = [5, 17, 231, 9, 41, 78, 3]


@pytest.fixture(scope="module", params=["gpt2", "since_gpt2"])
def model(request):
    return three_layer_model(seed=4, std=0.2, **(SINCE_GPT2 if request.param == "since_gpt2" else {}))


def tokens(model):
    with torch.no_grad():
        a = model(torch.tensor([CLEAN]))[0, -1].argmax().item()
        b = model(torch.tensor([CORRUPTED]))[0, -1].topk(2).indices.tolist()
    return a, b[0] if b[0] != a else b[1]


def plain_stream(model, ids):
    """Each block's input of a plain forward (the blocks called one by one, no hooks)."""
    idx = torch.tensor([ids])
    x = model.tok_emb(idx) + model.pos_emb(torch.arange(len(ids)))
    inputs = []
    with torch.no_grad():
        for block in model.trf_blocks:
            inputs.append(x)
            x = block(x)
    return inputs


def naive_resid_pre(model, layer, pos, answer, wrong):
    clean = plain_stream(model, CLEAN)
    x = plain_stream(model, CORRUPTED)[layer].clone()
    x[:, pos] = clean[layer][:, pos]
    with torch.no_grad():
        for block in model.trf_blocks[layer:]:
            x = block(x)
        logits = model.out_head(model.final_norm(x))[0, -1]
    return float(logits[answer] - logits[wrong])


def test_resid_pre_grid_is_one_plain_forward_per_cell(model):
    answer, wrong = tokens(model)
    got = patching.activation_patching(model, CLEAN, CORRUPTED, answer, wrong, "resid_pre")
    lo, hi = got["corrupted_logit_diff"], got["clean_logit_diff"]
    for layer in range(model.cfg.n_layers):
        for pos in range(len(CLEAN)):
            want = (naive_resid_pre(model, layer, pos, answer, wrong) - lo) / (hi - lo)
            assert got["values"][layer][pos] == pytest.approx(want, abs=1e-5)
    # the positions where the prompts agree carry the same vector into layer 0: nothing changes
    assert got["values"][0][0] == pytest.approx(0.0, abs=1e-5)
    assert len(got["attribution"]) == model.cfg.n_layers


def test_shapes_and_labels_of_every_target(model):
    answer, wrong = tokens(model)
    L, H, T = model.cfg.n_layers, model.cfg.n_heads, len(CLEAN)
    shapes = {"resid_pre": (L, T), "attn_head": (L, H), "attn_head_pos": (H, T), "mlp_out": (L, T)}
    for target, (rows, cols) in shapes.items():
        d = patching.activation_patching(model, CLEAN, CORRUPTED, answer, wrong, target, layer=1)
        assert (len(d["values"]), len(d["values"][0])) == (rows, cols)
        assert (len(d["rows"]), len(d["columns"])) == (rows, cols)
        assert torch.tensor(d["attribution"]).shape == (rows, cols)


def test_lengths_differ_is_refused_with_both_lengths(model):
    with pytest.raises(patching.PatchingError) as e:
        patching.check_pair(model, CLEAN, CORRUPTED[:-2], 1, 2)
    assert e.value.key == "inside.patch_lengths"
    assert "7 tokens" in str(e.value) and "5 tokens" in str(e.value)
    with pytest.raises(patching.PatchingError, match="same token"):
        patching.check_pair(model, CLEAN, CORRUPTED, 3, 3)
    with pytest.raises(patching.PatchingError, match="nothing to bring back"):
        patching.activation_patching(model, CLEAN, CLEAN, 3, 4, "resid_pre")
    with pytest.raises(patching.PatchingError, match="resid_pre"):
        patching.activation_patching(model, CLEAN, CORRUPTED, 3, 4, "everything")


def test_path_patching_refuses_a_receiver_before_the_sender(model):
    answer, wrong = tokens(model)
    pair = patching.check_pair(model, CLEAN, CORRUPTED, answer, wrong)
    with pytest.raises(patching.PatchingError, match="later layer"):
        patching_paths.path_patching(model, pair, (1, 0), (1, 2), "k")
    with pytest.raises(patching.PatchingError, match="q, k or v"):
        patching_paths.path_patching(model, pair, (0, 0), (1, 2), "x")
    d = patching_paths.path_patching(model, pair, (0, 1), (2, 3), "v")
    assert d["values"][0] == [None] * model.cfg.n_heads and d["value"] == pytest.approx(d["values"][2][3], abs=1e-6)


def test_stop_ends_the_grid(model):
    answer, wrong = tokens(model)
    pair = patching.check_pair(model, CLEAN, CORRUPTED, answer, wrong)
    with pytest.raises(StopRequested):
        list(patching.patching_steps(model, pair, "resid_pre", stop=lambda: True))


def test_small_batches_give_the_same_grid(model, monkeypatch):
    answer, wrong = tokens(model)
    whole = patching.activation_patching(model, CLEAN, CORRUPTED, answer, wrong, "attn_head_pos", layer=1)
    monkeypatch.setattr(patching, "BATCH_TOKENS", 1)  # one variant per batch
    one = patching.activation_patching(model, CLEAN, CORRUPTED, answer, wrong, "attn_head_pos", layer=1)
    flat = lambda g: [v for row in g for v in row]  # noqa: E731
    assert flat(one["values"]) == pytest.approx(flat(whole["values"]), abs=1e-5)
