"""Saving in Hugging Face GPT-2's layout: transformers' GPT2LMHeadModel loads the file (with the
config.json written beside it) and computes the same logits and attention; the playground loads it
back with its exact config; architectures GPT-2 cannot express are refused by name."""

import json

import pytest
import torch

from playground.engine.hf_gpt2 import gpt2_config_dict
from playground.engine.weight_layout import WeightLoadError
from playground.engine.weights import load_checkpoint, save_checkpoint
from tests.tiny_models import random_model

transformers = pytest.importorskip("transformers")


def export(model, folder, dtype=None):
    save_checkpoint(model, folder / "model.safetensors", layout="gpt2", dtype=dtype, metadata={"note": "test"})
    (folder / "config.json").write_text(json.dumps(gpt2_config_dict(model.cfg)))
    return folder


@pytest.mark.parametrize("changes", [{}, {"tie_weights": False}, {"attention_impl": "per_head"}])
def test_transformers_loads_the_file_and_agrees(tmp_path, changes):
    model = random_model(seed=3, std=0.2, **changes)
    export(model, tmp_path)
    hf = transformers.GPT2LMHeadModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    idx = torch.randint(0, 50257, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours, trace = model(idx, return_attention=True)
        theirs = hf(idx, output_attentions=True)
    assert ours.std() > 1.0  # far from uniform, so a wrong tensor would show
    torch.testing.assert_close(theirs.logits, ours, atol=2e-4, rtol=1e-4)
    for layer in range(model.cfg.n_layers):
        torch.testing.assert_close(theirs.attentions[layer], trace.layer(layer), atol=1e-5, rtol=1e-4)


def test_playground_loads_its_gpt2_layout_file_with_the_exact_config(tmp_path):
    # 4 heads of 8 dimensions: a bare GPT-2 file would be read as 64-dimensional heads.
    model = random_model(seed=4, std=0.2)
    export(model, tmp_path, dtype="float16")
    back = load_checkpoint(tmp_path / "model.safetensors")
    assert back.cfg == model.cfg
    assert back.checkpoint_metadata["note"] == "test"
    assert back.tok_emb.weight.data_ptr() == back.out_head.weight.data_ptr()
    idx = torch.randint(0, 50257, (1, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(back(idx), model.half().float()(idx), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"pos_encoding": "sinusoidal"}, "pos_encoding"),
        ({"norm_placement": "post"}, "norm_placement"),
        ({"qkv_bias": False}, "qkv_bias"),
    ],
)
def test_architectures_gpt2_cannot_hold_are_refused_by_name(tmp_path, changes, field):
    model = random_model(**changes)
    with pytest.raises(WeightLoadError, match=field) as e:
        save_checkpoint(model, tmp_path / "model.safetensors", layout="gpt2")
    assert e.value.key == "weights.not_gpt2_architecture"
    assert not (tmp_path / "model.safetensors").exists()
