"""GPT-2 checkpoints in transformers' layout: logits, attention and greedy tokens equal transformers' own
GPT2LMHeadModel; every way a Hugging Face folder or the hub can be wrong gets a specific message (the
project's own checkpoint format: tests/unit/test_weights.py)."""

import json
import shutil

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from playground.engine.config import ConfigError
from playground.engine.hf_hub import hf_progress_tqdm, load_pretrained
from playground.engine.sampling import generate
from playground.engine.weight_layout import WeightLoadError
from playground.engine.weights import load_checkpoint

transformers = pytest.importorskip("transformers")


# Two random GPT-2s: a small one, and a wider one whose activations are not trivially tiny.
# initializer_range above GPT-2's 0.02 spreads the logits (std > 1) so greedy choices are decisive.
HF_CONFIGS = {
    "d64": dict(n_embd=64, n_layer=2, n_head=4, n_positions=64, initializer_range=0.2),
    "d256": dict(n_embd=256, n_layer=3, n_head=4, n_positions=64, initializer_range=0.08),  # 64-dim heads
}


def read_tensors(path):
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


_HF_CACHE = {}


def _hf_model(name, tmp_path_factory):
    """(folder written by save_pretrained, the eager-attention HF model it came from), built once."""
    if name not in _HF_CACHE:
        torch.manual_seed(1234)
        cfg = transformers.GPT2Config(**HF_CONFIGS[name], attn_implementation="eager")
        hf = transformers.GPT2LMHeadModel(cfg).eval()
        folder = tmp_path_factory.mktemp(f"hf_{name}")
        hf.save_pretrained(folder)
        _HF_CACHE[name] = folder, hf
    return _HF_CACHE[name]


@pytest.fixture(scope="module", params=list(HF_CONFIGS))
def hf_folder(request, tmp_path_factory):
    """Both random GPT-2s: for the parity tests."""
    return _hf_model(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def hf_small(tmp_path_factory):
    """The small one only: for the error paths, where the size does not matter."""
    return _hf_model("d64", tmp_path_factory)


def hf_ids(length=12, seed=0):
    return torch.randint(0, 50257, (2, length), generator=torch.Generator().manual_seed(seed))


def assert_same_logits(model, hf, tolerance=1e-4):
    ids = hf_ids()
    with torch.no_grad():
        diff = (model(ids) - hf(ids).logits).abs().max().item()
    assert diff <= tolerance, diff


def test_hf_parity_logits_and_attention(hf_folder):
    folder, hf = hf_folder
    model = load_pretrained(folder, device="cpu")
    assert model.cfg.emb_dim == hf.config.n_embd and model.cfg.n_layers == hf.config.n_layer
    assert model.out_head.weight is model.tok_emb.weight
    ids = hf_ids()
    with torch.no_grad():
        ref = hf(ids, output_attentions=True)
        ours, trace = model(ids, return_attention=True)
    assert ref.logits.std() > 1.0  # not trivially small logits
    assert (ours - ref.logits).abs().max().item() <= 1e-4
    for i, hf_probs in enumerate(ref.attentions):
        torch.testing.assert_close(trace.layer(i), hf_probs, atol=1e-5, rtol=1e-4)
    assert model.load_report.ok and not model.load_report.unexpected


def test_hf_parity_30_greedy_tokens(hf_folder):
    folder, hf = hf_folder
    model = load_pretrained(folder, device="cpu")
    prompt = [15496, 11, 314, 716]
    with torch.no_grad():
        ref = hf.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=30, pad_token_id=50256)
    ours = [s.token_id for s in generate(model, prompt, max_new_tokens=30, temperature=0)]
    assert ours == ref[0, len(prompt) :].tolist()
    assert len(set(ours)) > 3  # a real sequence, not one token repeated


def test_hf_parity_per_head_layout(hf_small):
    folder, hf = hf_small
    model = load_pretrained(folder, device="cpu", attention_impl="per_head")
    assert model.cfg.attention_impl == "per_head"
    assert_same_logits(model, hf)


def test_hf_untied_lm_head(tmp_path):
    torch.manual_seed(7)
    cfg = transformers.GPT2Config(**HF_CONFIGS["d64"], tie_word_embeddings=False)
    hf = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        hf.lm_head.weight.normal_(0, 0.2)  # make the head really differ from wte
    hf.save_pretrained(tmp_path)
    assert "lm_head.weight" in read_tensors(tmp_path / "model.safetensors")[0]
    model = load_pretrained(tmp_path, device="cpu")
    assert model.cfg.tie_weights is False and model.out_head.weight is not model.tok_emb.weight
    assert_same_logits(model, hf)


def _rewrite(folder, dest, change):
    """A copy of an HF folder whose tensors went through ``change`` (editing the dict or returning a new one)."""
    tensors, metadata = read_tensors(folder / "model.safetensors")
    changed = change(tensors)
    tensors = changed if isinstance(changed, dict) else tensors
    dest.mkdir(exist_ok=True)
    save_file(tensors, str(dest / "model.safetensors"), metadata=metadata)
    shutil.copy(folder / "config.json", dest / "config.json")
    return dest


def hub_layout_copy(folder, dest):
    """The hub files' layout: no ``transformer.`` prefix, plus each layer's causal-mask buffer."""
    config = json.loads((folder / "config.json").read_text())
    n = config["n_positions"]

    def to_hub(tensors):
        plain = {k.removeprefix("transformer."): v for k, v in tensors.items()}
        for i in range(config["n_layer"]):
            plain[f"h.{i}.attn.bias"] = torch.ones(n, n).tril().view(1, 1, n, n)
        return plain

    return _rewrite(folder, dest, to_hub)


def test_hub_key_layout_without_prefix(hf_folder, tmp_path):
    folder, hf = hf_folder
    copy = hub_layout_copy(folder, tmp_path / "hub")
    assert not any(k.startswith("transformer.") for k in read_tensors(copy / "model.safetensors")[0])
    model = load_pretrained(copy, device="cpu")
    assert_same_logits(model, hf)
    assert sorted(model.load_report.skipped) == sorted(f"h.{i}.attn.bias" for i in range(hf.config.n_layer))


def test_bare_hf_file_through_load_checkpoint(tmp_path_factory):
    """A lone model.safetensors: config inferred from the shapes (64-dimensional heads, as GPT-2)."""
    folder, hf = _hf_model("d256", tmp_path_factory)
    model = load_checkpoint(folder / "model.safetensors", device="cpu")
    assert (model.cfg.n_heads, model.cfg.n_layers, model.cfg.emb_dim) == (4, 3, 256)
    assert_same_logits(model, hf)


def test_hf_wrong_shape_names_key_and_shapes(hf_small, tmp_path):
    folder, hf = hf_small
    d = hf.config.n_embd

    def shrink(t):
        t["transformer.h.1.mlp.c_fc.weight"] = torch.zeros(d, 3 * d)  # [in, out] should be [d, 4d]

    with pytest.raises(WeightLoadError) as info:
        load_pretrained(_rewrite(folder, tmp_path / "bad", shrink), device="cpu")
    msg = str(info.value)
    assert "1 with the wrong shape" in msg
    assert f"trf_blocks.1.ff.layers.0.weight: file [{3 * d}, {d}] vs model [{4 * d}, {d}]" in msg


def test_hf_wrong_qkv_shape(hf_small, tmp_path):
    folder, hf = hf_small
    d = hf.config.n_embd

    def shrink(t):
        t["transformer.h.0.attn.c_attn.bias"] = torch.zeros(2 * d)

    with pytest.raises(
        WeightLoadError, match=rf"transformer\.h\.0\.attn\.c_attn\.bias: file \[{2 * d}\] vs model \[{3 * d}\]"
    ):
        load_pretrained(_rewrite(folder, tmp_path / "bad", shrink), device="cpu")


def test_hf_missing_key_is_named(hf_small, tmp_path):
    folder, _ = hf_small
    copy = _rewrite(folder, tmp_path / "bad", lambda t: t.pop("transformer.h.1.ln_2.bias"))
    with pytest.raises(WeightLoadError, match=r"1 missing \(trf_blocks\.1\.norm2\.shift\)"):
        load_pretrained(copy, device="cpu")


def test_hf_unexpected_key_is_reported(hf_small, tmp_path):
    folder, hf = hf_small
    copy = _rewrite(folder, tmp_path / "extra", lambda t: t.update({"transformer.h.0.adapter.weight": torch.zeros(2)}))
    model = load_pretrained(copy, device="cpu")  # extra HF tensors are reported, the model still loads
    assert model.load_report.unexpected == ["transformer.h.0.adapter.weight"]
    assert "1 unexpected (transformer.h.0.adapter.weight)" in model.load_report.summary()


def test_hf_folder_missing_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(
        WeightLoadError, match="has no model.safetensors; a model folder needs config.json and model.safetensors"
    ):
        load_pretrained(tmp_path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: "{not json", "config.json is not readable JSON"),
        (
            lambda c: json.dumps({k: v for k, v in c.items() if k != "n_head"}),
            "config.json lacks the GPT-2 field 'n_head'",
        ),
        (lambda c: json.dumps(c | {"activation_function": "swish"}), "unsupported activation_function 'swish'"),
        # Options that change the attention maths would load and silently give wrong logits.
        (lambda c: json.dumps(c | {"scale_attn_by_inverse_layer_idx": True}), "scale_attn_by_inverse_layer_idx"),
        (lambda c: json.dumps(c | {"scale_attn_weights": False}), "scale_attn_weights=false"),
    ],
)
def test_hf_config_problems(hf_small, tmp_path, edit, message):
    folder, _ = hf_small
    shutil.copy(folder / "model.safetensors", tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(edit(json.loads((folder / "config.json").read_text())))
    with pytest.raises(WeightLoadError, match=message):
        load_pretrained(tmp_path)


def test_hf_bfloat16_load(hf_small):
    folder, hf = hf_small
    model = load_pretrained(folder, device="cpu", dtype="bfloat16")
    assert model.dtype == torch.bfloat16 and model.out_head.weight is model.tok_emb.weight
    ids = hf_ids()
    with torch.no_grad():
        ref = hf(ids).logits
        diff = (model(ids).float() - ref).abs()
    assert diff.mean().item() < 0.05 * ref.std().item()


def test_hub_offline_gives_a_clear_message(tmp_path):
    with pytest.raises(WeightLoadError) as info:
        load_pretrained("openai-community/gpt2", cache_dir=tmp_path, local_files_only=True)
    msg = str(info.value)
    assert "Cannot get config.json of openai-community/gpt2" in msg
    assert "not in the local cache" in msg and "load that folder" in msg


def test_hub_offline_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(WeightLoadError, match="not in the local cache"):
        load_pretrained("openai-community/gpt2", cache_dir=tmp_path)


class FakeHub:
    """Stands in for huggingface_hub.hf_hub_download: serves files from a folder, records asks."""

    def __init__(self, folder):
        self.folder, self.calls = folder, []

    def __call__(self, repo_id, filename, *, cache_dir=None, local_files_only=False, tqdm_class=None, **kwargs):
        self.calls.append((repo_id, filename))
        path = self.folder / filename
        if not path.is_file():
            from huggingface_hub.errors import LocalEntryNotFoundError

            raise LocalEntryNotFoundError(f"{filename} not found")
        return str(path)


def test_hub_download_flow(hf_small, monkeypatch):
    import huggingface_hub

    folder, hf = hf_small
    fake = FakeHub(folder)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    model = load_pretrained("someone/tiny-gpt2", device="cpu", local_files_only=False)
    assert fake.calls == [("someone/tiny-gpt2", "config.json"), ("someone/tiny-gpt2", "model.safetensors")]
    assert_same_logits(model, hf)


def test_hub_too_large_config_refused_before_weights_are_fetched(tmp_path, monkeypatch):
    import huggingface_hub

    xl = dict(vocab_size=50257, n_positions=1024, n_embd=1600, n_head=25, n_layer=48, activation_function="gelu_new")
    (tmp_path / "config.json").write_text(json.dumps(xl))
    fake = FakeHub(tmp_path)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    with pytest.raises(ConfigError, match=r"about 7\.\d\d GB in float32 \(1,557,611,200 parameters\)"):
        load_pretrained("openai-community/gpt2-xl", memory_budget=10**9, local_files_only=False)
    assert fake.calls == [("openai-community/gpt2-xl", "config.json")]


def test_hub_missing_weights_file_is_named(hf_small, tmp_path, monkeypatch):
    import huggingface_hub

    folder, _ = hf_small
    shutil.copy(folder / "config.json", tmp_path / "config.json")
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", FakeHub(tmp_path))
    with pytest.raises(WeightLoadError, match="Cannot get model.safetensors of someone/tiny-gpt2"):
        load_pretrained("someone/tiny-gpt2", local_files_only=False)


def test_hub_other_errors_are_wrapped(monkeypatch):
    import huggingface_hub

    def broken(*args, **kwargs):  # not a network failure (those get the offline message)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", broken)
    with pytest.raises(WeightLoadError, match="Cannot download config.json of x/y: OSError: .*No space left on device"):
        load_pretrained("x/y", local_files_only=False)


def test_progress_reporter():
    seen = []
    bar = hf_progress_tqdm(lambda frac, desc: seen.append((frac, desc)))(
        total=200, desc="model.safetensors", disable=False
    )
    bar.update(50)
    bar.update(150)
    bar.close()
    assert seen == [(0.25, "model.safetensors"), (1.0, "model.safetensors")]
