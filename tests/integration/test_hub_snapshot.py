"""Llama-family repos from the hub (issue 38): ``load_pretrained("Qwen/Qwen3-0.6B")`` and the Model tab fetch
config.json first, refuse a family the playground does not build before any weights, then fetch the repo's
safetensors, config and tokenizer files (never pickles) with ``snapshot_download`` and load them as a folder.
No network: huggingface_hub's functions are patched to copy from tiny random folders built offline."""

from __future__ import annotations

import fnmatch
import json
import shutil

import pytest
import torch

from playground.engine.hf_hub import SNAPSHOT_PATTERNS, load_pretrained
from playground.engine.hf_tokenizer import FolderTokenizer
from playground.engine.sampling import generate
from playground.engine.weight_layout import WeightLoadError
from tests.fake_hub import FakeHubCache
from tests.tiny_models import write_llama_folder


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    """Qwen3 and Llama repos as the hub holds them: with a pickle and a second weights file beside the model's."""
    out = {}
    for repo_id, family in (("Qwen/Qwen3-0.6B", "qwen3"), ("meta-llama/Llama-3.2-1B", "llama")):
        folder = tmp_path_factory.mktemp(family)
        write_llama_folder(folder, family)
        (folder / "pytorch_model.bin").write_bytes(b"a pickle: never fetched")
        (folder / "consolidated.safetensors").write_bytes(b"a second copy: never fetched")
        out[repo_id] = folder
    return out


@pytest.mark.parametrize("repo_id", ["Qwen/Qwen3-0.6B", "meta-llama/Llama-3.2-1B"])
def test_a_hub_repo_loads_as_its_folder_with_transformers_greedy_tokens(repos, repo_id, tmp_path, monkeypatch):
    import transformers

    hub = FakeHubCache(repos, tmp_path).patch(monkeypatch)
    ours = load_pretrained(repo_id, device="cpu", local_files_only=False)
    assert hub.calls[0] == ("file", repo_id, "config.json")  # the family is read before anything else
    assert hub.calls[1] == ("snapshot", repo_id, tuple(SNAPSHOT_PATTERNS))
    fetched = sorted(p.name for p in (tmp_path / repo_id).iterdir())
    assert "pytorch_model.bin" not in fetched and "consolidated.safetensors" not in fetched
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(fetched)
    assert isinstance(ours.tokenizer, FolderTokenizer)
    hf = transformers.AutoModelForCausalLM.from_pretrained(repos[repo_id]).eval()
    prompt = ours.tokenizer.encode("the cat sat")
    ref = hf.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0)
    got = [step.token_id for step in generate(ours, prompt, max_new_tokens=12, temperature=0)]
    assert got == ref[0, len(prompt) :].tolist()
    # Offline afterwards: the same model from the cache, with no new fetch
    again = load_pretrained(repo_id, device="cpu", local_files_only=True)
    ids = torch.tensor([prompt])
    with torch.no_grad():
        torch.testing.assert_close(again(ids), ours(ids))


def test_the_patterns_fetch_no_pickle():
    for name in ("pytorch_model.bin", "model.bin", "pytorch_model-00001-of-00002.bin", "model.pth", "x.pkl"):
        assert not any(fnmatch.fnmatch(name, pat) for pat in SNAPSHOT_PATTERNS), name
    assert any(fnmatch.fnmatch("model-00001-of-00002.safetensors", pat) for pat in SNAPSHOT_PATTERNS)


@pytest.mark.parametrize(
    "config, named",
    [
        ({"model_type": "gemma3", "architectures": ["Gemma3ForCausalLM"]}, "'gemma3'"),
        ({"architectures": ["PhiForCausalLM"]}, "'PhiForCausalLM'"),
    ],
)
def test_an_unsupported_family_is_refused_by_name_before_its_weights(repos, config, named, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps(config))
    shutil.copy(repos["Qwen/Qwen3-0.6B"] / "model.safetensors", other / "model.safetensors")
    hub = FakeHubCache({"google/other": other}, tmp_path / "cache").patch(monkeypatch)
    with pytest.raises(
        WeightLoadError, match=f"config.json says model_type {named}; this playground loads gpt2, llama"
    ):
        load_pretrained("google/other", local_files_only=False)
    assert hub.calls == [("file", "google/other", "config.json")]


def test_offline_with_nothing_cached_says_so(repos, tmp_path, monkeypatch):
    from playground.i18n import tr_error

    FakeHubCache(repos, tmp_path).patch(monkeypatch)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(WeightLoadError) as caught:
        load_pretrained("Qwen/Qwen3-0.6B")
    assert caught.value.key == "weights.hub_offline"
    assert "not reachable" in str(caught.value) and "Qwen/Qwen3-0.6B" in str(caught.value)
    assert "Qwen/Qwen3-0.6B" in tr_error("zh-CN", caught.value)


def test_offline_with_only_the_config_cached_says_so(repos, tmp_path, monkeypatch):
    hub = FakeHubCache(repos, tmp_path).patch(monkeypatch)
    hub.hf_hub_download("Qwen/Qwen3-0.6B", "config.json")  # fetched once, the weights never
    with pytest.raises(WeightLoadError, match="Cannot get model.safetensors of Qwen/Qwen3-0.6B: .* not in the local"):
        load_pretrained("Qwen/Qwen3-0.6B", local_files_only=True)


def test_the_model_tab_loads_a_hub_repo_with_its_tokenizer(repos, tmp_path, monkeypatch):
    from playground.inside.inspection import count_parameters
    from playground.server.recipes import (
        build_from_recipe,
        build_peak_bytes,
        describe_recipe,
        folder_family,
        hub_recipe,
    )

    FakeHubCache(repos, tmp_path).patch(monkeypatch)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # online: the server asks the hub
    recipe = hub_recipe(" Qwen/Qwen3-0.6B ")
    assert recipe == {"kind": "hub", "repo": "Qwen/Qwen3-0.6B", "dtype": "float32"}
    model = build_from_recipe(recipe, measure=False)
    assert isinstance(model.tokenizer, FolderTokenizer)
    assert folder_family(recipe) == "qwen3" and describe_recipe(recipe) == (
        "qwen3 weights from the hub: Qwen/Qwen3-0.6B (its own tokenizer.json)"
    )
    assert build_peak_bytes(recipe) == 2 * 4 * count_parameters(model)  # sized by its cached config: file + model
    ids = torch.tensor([model.tokenizer.encode("hello there")])
    with torch.no_grad():
        torch.testing.assert_close(model(ids), load_pretrained(repos["Qwen/Qwen3-0.6B"])(ids))


def test_the_model_tab_refuses_an_unsupported_hub_repo_by_name(tmp_path, monkeypatch):
    from playground.server.recipes import build_from_recipe, hub_recipe

    other = tmp_path / "gemma"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "gemma3"}))
    hub = FakeHubCache({"google/gemma-3-1b-pt": other}, tmp_path / "cache").patch(monkeypatch)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(WeightLoadError, match="model_type 'gemma3'"):
        build_from_recipe(hub_recipe("google/gemma-3-1b-pt"), measure=False)
    assert [c[0] for c in hub.calls] == ["file"]


def test_a_relative_name_is_the_hub_never_a_folder_outside_the_allowed_ones(repos, tmp_path, monkeypatch):
    """owner/name that is a folder in the server's working folder but not an allowed one: asked of the hub,
    never loaded from the disk (folder_recipe's allow-list), nor said to exist."""
    from playground.server.recipes import build_from_recipe, hub_recipe

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLAYGROUND_MODEL_DIRS", str(tmp_path / "allowed"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    shutil.copytree(repos["Qwen/Qwen3-0.6B"], tmp_path / "secret" / "qwen")
    hub = FakeHubCache({}, tmp_path / "cache").patch(monkeypatch)
    hub.repos = {"secret/qwen": tmp_path / "not-on-the-hub"}
    recipe = hub_recipe("secret/qwen")
    assert recipe == {"kind": "hub", "repo": "secret/qwen", "dtype": "float32"}
    with pytest.raises(WeightLoadError, match="Cannot get config.json of secret/qwen"):
        build_from_recipe(recipe, measure=False)
    assert hub.calls == [("file", "secret/qwen", "config.json")]
