"""A Llama-family hub repo id typed into the Model tab's hub field (issue 38): it loads with the repo's own
tokenizer and generates transformers' greedy tokens; an unsupported family is refused by name and the model in
use stays. No network: huggingface_hub is patched to copy from a tiny random folder built offline."""

import json

import pytest
import torch

from playground.engine.hf_tokenizer import FolderTokenizer
from playground.server.model_cache import CACHE
from playground.server.runs import get_run
from playground.ui import common, model_switch
from playground.ui.generate import tab as generate_tab
from playground.ui.model import tab as model_tab
from tests.fake_hub import FakeHubCache
from tests.helpers import plain_text
from tests.tiny_models import write_llama_folder

transformers = pytest.importorskip("transformers")


def _fields():
    return [getattr(model_switch.FORM_PRESETS["nano"], f) for f in model_switch.FIELDS]


def test_a_qwen3_repo_id_loads_and_generates_transformers_tokens(tmp_path, monkeypatch):
    source = tmp_path / "qwen"
    write_llama_folder(source, "qwen3")
    FakeHubCache({"Qwen/Qwen3-0.6B": source}, tmp_path / "cache").patch(monkeypatch)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    out = model_switch.Switch(
        *model_tab.build_model(common.new_state(), "hub", 0, "Qwen/Qwen3-0.6B", None, "float32", *_fields())
    )
    assert "Ready" in out.message, plain_text(out.message)
    assert "qwen3 weights from the hub: Qwen/Qwen3-0.6B (its own" in plain_text(out.summary).replace("\\", "")
    model = CACHE.get(out.state["recipe"])
    assert isinstance(model.tokenizer, FolderTokenizer)
    final = list(generate_tab.generate_tokens(out.state, "the cat sat", 0.0, 0, 1.0, 8, 1, True))[-1]
    run = get_run(final[0]["run_id"])
    hf = transformers.AutoModelForCausalLM.from_pretrained(source).eval()
    want = list(run.prompt_ids)
    with torch.no_grad():  # argmax step by step (the config's eos id would stop transformers' generate)
        for _ in range(8):
            want.append(int(hf(torch.tensor([want])).logits[0, -1].argmax()))
    assert run.token_ids == want


def test_an_unsupported_repo_is_refused_by_name_and_the_model_stays(tmp_path, monkeypatch):
    source = tmp_path / "gemma"
    source.mkdir()
    (source / "config.json").write_text(json.dumps({"model_type": "gemma3"}))
    hub = FakeHubCache({"google/gemma-3-1b-pt": source}, tmp_path / "cache").patch(monkeypatch)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    state = common.new_state()
    for lang, words in (("en", "model_type &#x27;gemma3&#x27;"), ("zh-CN", "model_type 是 &#x27;gemma3&#x27;")):
        out = model_switch.Switch(
            *model_tab.build_model(
                {**state, "lang": lang}, "hub", 0, "google/gemma-3-1b-pt", None, "float32", *_fields()
            )
        )
        assert words in out.message, out.message
        assert out.state.get("recipe") == state.get("recipe")
    assert {c[0] for c in hub.calls} == {"file"}  # config.json only, never the weights
