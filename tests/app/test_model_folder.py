"""GPT-2 weights from a folder on the server (config.json + model.safetensors), typed into the Model
tab's hub field: loaded with the hub loader when the folder lies inside an allowed model folder,
refused (with the allowed folders named) anywhere else."""

import json

import torch
from safetensors.torch import save_file

from playground import PRESETS
from playground.server import recipes
from playground.server.model_cache import CACHE
from playground.ui import common, model_switch
from playground.ui.model import tab as model_tab

D, LAYERS, VOCAB, CTX = 32, 2, 50257, 32


def write_gpt2_folder(folder):
    """A small GPT-2 in the Hugging Face layout: Conv1D weights stored [in, out]."""
    g = torch.Generator().manual_seed(1)
    shapes = {"wte.weight": (VOCAB, D), "wpe.weight": (CTX, D), "ln_f.weight": (D,), "ln_f.bias": (D,)}
    for i in range(LAYERS):
        shapes |= {
            f"h.{i}.ln_1.weight": (D,),
            f"h.{i}.ln_1.bias": (D,),
            f"h.{i}.ln_2.weight": (D,),
            f"h.{i}.ln_2.bias": (D,),
            f"h.{i}.attn.c_attn.weight": (D, 3 * D),
            f"h.{i}.attn.c_attn.bias": (3 * D,),
            f"h.{i}.attn.c_proj.weight": (D, D),
            f"h.{i}.attn.c_proj.bias": (D,),
            f"h.{i}.mlp.c_fc.weight": (D, 4 * D),
            f"h.{i}.mlp.c_fc.bias": (4 * D,),
            f"h.{i}.mlp.c_proj.weight": (4 * D, D),
            f"h.{i}.mlp.c_proj.bias": (D,),
        }
    tensors = {k: torch.randn(*s, generator=g) * 0.02 for k, s in shapes.items()}
    folder.mkdir(parents=True)
    save_file(tensors, str(folder / "model.safetensors"))
    config = {"vocab_size": VOCAB, "n_positions": CTX, "n_embd": D, "n_head": 4, "n_layer": LAYERS}
    (folder / "config.json").write_text(json.dumps(config))
    return tensors


def fields():
    return [getattr(PRESETS["nano"], f) for f in model_switch.FIELDS]


def test_a_folder_inside_an_allowed_dir_loads_with_its_own_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MODEL_DIRS", str(tmp_path / "models"))
    tensors = write_gpt2_folder(tmp_path / "models" / "my-gpt2")
    out = model_tab.build_model(
        common.new_state(), "hub", 0, str(tmp_path / "models" / "my-gpt2"), None, "float32", *fields()
    )
    state, message = out[0], out[1]
    assert "Ready" in message, message
    model = CACHE.get(state["recipe"])
    assert (model.cfg.n_layers, model.cfg.emb_dim, model.cfg.context_length) == (LAYERS, D, CTX)
    torch.testing.assert_close(model.tok_emb.weight.detach(), tensors["wte.weight"])
    # the Conv1D [in, out] weight is transposed into the nn.Linear [out, in] layout
    torch.testing.assert_close(model.trf_blocks[1].ff.layers[0].weight.detach(), tensors["h.1.mlp.c_fc.weight"].T)
    assert model_switch.Switch(*out).hub_name == str((tmp_path / "models" / "my-gpt2").resolve())


def test_a_folder_outside_the_allowed_dirs_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MODEL_DIRS", str(tmp_path / "models"))
    write_gpt2_folder(tmp_path / "elsewhere" / "gpt2")
    state = common.new_state()
    for path in (tmp_path / "elsewhere" / "gpt2", tmp_path / "models" / ".." / "elsewhere" / "gpt2", "/etc"):
        out = model_tab.build_model(state, "hub", 0, str(path), None, "float32", *fields())
        assert out[0] is state
        assert "is not a folder inside the model folders this server allows" in out[1]
        assert str(tmp_path / "models") in out[1] and str(recipes.CHECKOUT / "models") in out[1]
    zh = model_tab.build_model({**state, "lang": "zh-CN"}, "hub", 0, "/etc", None, "float32", *fields())
    assert "PLAYGROUND_MODEL_DIRS" in zh[1] and "不是本服务器允许的模型文件夹" in zh[1]


def test_a_hub_name_that_is_no_path_is_still_an_unknown_hub_model():
    out = model_tab.build_model(common.new_state(), "hub", 0, "gpt5", None, "float32", *fields())
    assert "Unknown hub model &#x27;gpt5&#x27;" in out[1]


def test_a_failed_build_puts_the_tying_text_back_to_the_model_still_loaded(monkeypatch):
    """GPT-2 small from the hub while offline: the build fails, the bundled model stays, and the
    weight-tying text (previewed for GPT-2 small's d=768 when its preset was picked) describes the
    bundled model again, as the form does."""
    from playground.ui.model_words import tying_explanation

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")
    state = common.new_state()
    small = model_tab.preset_fields("gpt2-small", state)
    assert "d=768" in small.tying_md
    out = model_switch.Switch(*model_tab.build_model(state, "hub", 0, "gpt2", None, "float32", *small[:-1]))
    assert "Still loaded" in out.message
    kept = common.session_model(state)
    assert out.tying_md == tying_explanation(kept.cfg, "en") and f"d={kept.cfg.emb_dim}" in out.tying_md
