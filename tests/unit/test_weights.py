"""Weights in and out: parity with Hugging Face GPT-2, both key layouts, the hub path without a
network, the project's own checkpoints, and untrusted files (issue 2: weights; issue 6: files)."""

import json
import shutil

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from playground.engine.config import ConfigError, GPTConfig
from playground.engine.model import GPTModel
from playground.engine.sampling import generate
from playground.engine.weights import (
    CHECKPOINT_FORMAT,
    LoadReport,
    WeightLoadError,
    hf_progress_tqdm,
    load_checkpoint,
    load_pretrained,
    read_checkpoint_metadata,
    save_checkpoint,
)

transformers = pytest.importorskip("transformers")

TINY = dict(context_length=32, emb_dim=32, n_heads=4, n_layers=2)

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


# ---------------------------------------------------------------------------------------------
# Parity with transformers


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
        WeightLoadError, match="has no model.safetensors; a GPT-2 folder needs config.json and model.safetensors"
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


# ---------------------------------------------------------------------------------------------
# The hub path, without a network


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

    def broken(*args, **kwargs):
        raise ConnectionError("connection reset by peer")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", broken)
    with pytest.raises(
        WeightLoadError, match="Cannot download config.json of x/y: ConnectionError: connection reset by peer"
    ):
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


# ---------------------------------------------------------------------------------------------
# The project's own checkpoints


def random_model(seed=0, **changes):
    torch.manual_seed(seed)
    model = GPTModel(GPTConfig(**{**TINY, **changes}))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0 if name.endswith("scale") else 0.0, 0.1)  # LayerNorms not at their init
    return model.eval()


CHECKPOINT_VARIANTS = {
    "tied": dict(),
    "untied": dict(tie_weights=False),
    "sinusoidal": dict(pos_encoding="sinusoidal"),
    "per_head": dict(attention_impl="per_head"),
    "post_norm": dict(norm_placement="post"),
    "relu": dict(activation="relu"),
    "gelu_exact_nobias": dict(activation="gelu", qkv_bias=False),
}


@pytest.mark.parametrize("variant", CHECKPOINT_VARIANTS)
def test_checkpoint_round_trip(tmp_path, variant):
    model = random_model(**CHECKPOINT_VARIANTS[variant])
    path = save_checkpoint(model, tmp_path / "ckpt.safetensors", metadata={"step": 12, "note": "hi"})
    assert not list(tmp_path.glob("*.tmp"))  # written atomically
    loaded = load_checkpoint(path, device="cpu")
    assert loaded.cfg == model.cfg
    ids = torch.randint(0, 50257, (2, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(loaded(ids), model(ids))
    if model.cfg.tie_weights:
        assert loaded.out_head.weight is loaded.tok_emb.weight  # re-tied, not two copies
    else:
        assert loaded.out_head.weight is not loaded.tok_emb.weight
    assert loaded.checkpoint_metadata == {"step": "12", "note": "hi"}
    meta = read_checkpoint_metadata(path)
    assert meta["format"] == CHECKPOINT_FORMAT and json.loads(meta["config"]) == model.cfg.to_dict()


def test_tied_checkpoint_stores_one_copy(tmp_path):
    tied = save_checkpoint(random_model(), tmp_path / "tied.safetensors")
    untied = save_checkpoint(random_model(tie_weights=False), tmp_path / "untied.safetensors")
    assert "out_head.weight" not in read_tensors(tied)[0]
    assert untied.stat().st_size - tied.stat().st_size >= 50257 * 32 * 4


def test_bfloat16_checkpoint(tmp_path):
    model = random_model()
    full = save_checkpoint(model, tmp_path / "fp32.safetensors")
    half = save_checkpoint(model, tmp_path / "bf16.safetensors", dtype="bfloat16")
    assert model.dtype == torch.float32  # saving a smaller copy leaves the model alone
    assert half.stat().st_size < 0.55 * full.stat().st_size
    assert all(t.dtype == torch.bfloat16 for t in read_tensors(half)[0].values())
    loaded = load_checkpoint(half, device="cpu")  # back to float32
    assert loaded.dtype == torch.float32 and loaded.out_head.weight is loaded.tok_emb.weight
    for key, value in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value, atol=0, rtol=2**-8)  # bf16 rounding
    ids = torch.randint(0, 50257, (1, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref, got = model(ids), loaded(ids)
    assert (got - ref).abs().max().item() < 0.05 * ref.std().item() + 0.02
    as_bf16 = load_checkpoint(half, device="cpu", dtype="bfloat16")
    assert as_bf16.dtype == torch.bfloat16 and as_bf16.out_head.weight is as_bf16.tok_emb.weight


def test_checkpoint_memory_budget(tmp_path):
    path = save_checkpoint(random_model(), tmp_path / "c.safetensors")
    with pytest.raises(ConfigError, match="more than the memory budget"):
        load_checkpoint(path, memory_budget=1000)


# ---------------------------------------------------------------------------------------------
# Untrusted files: every way a file can be wrong gives WeightLoadError with a specific message


@pytest.fixture
def good_checkpoint(tmp_path):
    return save_checkpoint(random_model(), tmp_path / "good.safetensors")


def _header_file(path, header: dict, payload: bytes = b""):
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + payload)
    return path


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda p, good: p.write_bytes(b""), id="empty"),
        pytest.param(lambda p, good: p.write_bytes(b"\x00" * 4), id="shorter-than-header-length"),
        pytest.param(lambda p, good: p.write_bytes(good.read_bytes()[: good.stat().st_size // 2]), id="truncated"),
        pytest.param(lambda p, good: p.write_bytes(good.read_bytes()[:200]), id="truncated-in-header"),
        pytest.param(lambda p, good: p.write_bytes(bytes(range(256)) * 40), id="random-bytes"),
        pytest.param(lambda p, good: p.write_bytes((10**12).to_bytes(8, "little") + b"{}"), id="huge-header-length"),
        pytest.param(lambda p, good: _header_file(p, {"x": "not a tensor"}), id="bad-header-json-shape"),
        pytest.param(lambda p, good: p.write_bytes((5).to_bytes(8, "little") + b"{oops"), id="header-not-json"),
        pytest.param(
            lambda p, good: _header_file(
                p, {"a": {"dtype": "F32", "shape": [1000], "data_offsets": [0, 4000]}}, b"\0" * 16
            ),
            id="offsets-past-the-end",
        ),
        pytest.param(
            lambda p, good: _header_file(
                p, {"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 4]}}, b"\0" * 4
            ),
            id="shape-disagrees-with-offsets",
        ),
    ],
)
def test_malformed_files_are_refused(tmp_path, good_checkpoint, make):
    path = tmp_path / "bad.safetensors"
    make(path, good_checkpoint)
    with pytest.raises(WeightLoadError, match=r"bad\.safetensors is not a readable safetensors file \(.+\)"):
        load_checkpoint(path)


def test_pickle_renamed_is_refused_without_unpickling(tmp_path, monkeypatch):
    path = tmp_path / "model.safetensors"
    torch.save(random_model().state_dict(), path)  # a .pt pickle (zip) under a safetensors name

    def never(*args, **kwargs):
        raise AssertionError("a checkpoint must never be unpickled")

    monkeypatch.setattr(torch, "load", never)
    monkeypatch.setattr("pickle.load", never)
    monkeypatch.setattr("pickle.loads", never)
    with pytest.raises(WeightLoadError, match="model.safetensors is not a readable safetensors file"):
        load_checkpoint(path)


def test_oversize_file_is_refused_before_reading(tmp_path, good_checkpoint, monkeypatch):
    import playground.engine.weights as weights

    def no_open(*args, **kwargs):
        raise AssertionError("opened a file over the limit")

    monkeypatch.setattr(weights, "safe_open", no_open)
    size = good_checkpoint.stat().st_size
    with pytest.raises(WeightLoadError, match=rf"good\.safetensors is {size / 1e6:.1f} MB, over the 1 MB limit"):
        load_checkpoint(good_checkpoint, max_bytes=10**6)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda t: t.update({"trf_blocks.1.att.W_key.weight": torch.zeros(32, 16)}),
            r"1 with the wrong shape \(trf_blocks\.1\.att\.W_key\.weight: file \[32, 16\] vs model \[32, 32\]\)",
        ),
        (lambda t: t.pop("final_norm.shift"), r"1 missing \(final_norm\.shift\)"),
        # An uploaded checkpoint with a tensor the model has no place for is refused, not ignored.
        (
            lambda t: t.update({"trf_blocks.0.att.backdoor": torch.zeros(3)}),
            r"1 unexpected \(trf_blocks\.0\.att\.backdoor\)",
        ),
    ],
    ids=["wrong-shape", "missing-key", "extra-key"],
)
def test_tensors_that_do_not_fit_are_named(tmp_path, good_checkpoint, edit, message):
    tensors, metadata = read_tensors(good_checkpoint)
    edit(tensors)
    path = tmp_path / "edited.safetensors"
    save_file(tensors, str(path), metadata=metadata)
    with pytest.raises(WeightLoadError, match="The weights do not fit this model: " + message):
        load_checkpoint(path)


def test_config_in_header_is_validated(tmp_path, good_checkpoint):
    tensors, metadata = read_tensors(good_checkpoint)
    path = tmp_path / "cfg.safetensors"
    save_file(tensors, str(path), metadata=metadata | {"config": "{broken"})
    with pytest.raises(WeightLoadError, match="The checkpoint's config is not valid JSON"):
        load_checkpoint(path)
    bad = json.loads(metadata["config"]) | {"n_heads": 5}
    save_file(tensors, str(path), metadata=metadata | {"config": json.dumps(bad)})
    with pytest.raises(
        WeightLoadError, match=r"The checkpoint's config is invalid: emb_dim \(32\) must be divisible by n_heads \(5\)"
    ):
        load_checkpoint(path)
    unknown = json.loads(metadata["config"]) | {"rope_theta": 10000}
    save_file(tensors, str(path), metadata=metadata | {"config": json.dumps(unknown)})
    with pytest.raises(WeightLoadError, match="unknown config field.*rope_theta"):
        load_checkpoint(path)


def test_checkpoint_without_config_or_gpt2_keys(tmp_path):
    path = tmp_path / "other.safetensors"
    save_file({"encoder.weight": torch.zeros(2, 2)}, str(path))
    with pytest.raises(WeightLoadError, match="has no GPT Playground config and is not a GPT-2 checkpoint"):
        load_checkpoint(path)


def test_no_checkpoint_at_path(tmp_path):
    with pytest.raises(WeightLoadError, match="No checkpoint at .*nothing.safetensors"):
        load_checkpoint(tmp_path / "nothing.safetensors")
    with pytest.raises(WeightLoadError, match="No checkpoint at"):
        load_checkpoint(tmp_path)  # a directory is not a checkpoint file


def test_load_report_summary():
    report = LoadReport(missing=[f"k{i}" for i in range(7)], mismatched=[("w", (1, 2), (2, 1))])
    text = report.summary(limit=3)
    assert "7 missing (k0, k1, k2…)" in text and "1 with the wrong shape (w: file [1, 2] vs model [2, 1])" in text
    assert not report.ok and LoadReport().ok and LoadReport().summary() == "all tensors matched"


def test_public_names_are_importable_from_the_package():
    import playground

    names = [
        "GPTConfig",
        "PRESETS",
        "ConfigError",
        "GPTModel",
        "KVCache",
        "AttentionTrace",
        "load_tokenizer",
        "generate",
        "Generation",
        "GenerationStep",
        "count_parameters",
        "module_tree",
        "parameter_breakdown",
        "load_pretrained",
        "save_checkpoint",
        "load_checkpoint",
        "WeightLoadError",
        "LoadReport",
    ]
    missing = [n for n in names if not hasattr(playground, n)]
    assert not missing, missing
    assert set(names) <= set(playground.__all__)
    assert playground.load_pretrained is load_pretrained
