"""Weights in and out: the project's own checkpoints and untrusted files (issue 2: weights; issue 6: files).
Parity with Hugging Face GPT-2, both key layouts and the hub path: tests/integration/test_hf_checkpoints.py."""

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from playground.engine.config import ConfigError, GPTConfig
from playground.engine.hf_hub import load_pretrained
from playground.engine.model import GPTModel
from playground.engine.weight_layout import LoadReport, WeightLoadError
from playground.engine.weights import CHECKPOINT_FORMAT, load_checkpoint, read_checkpoint_metadata, save_checkpoint

TINY = dict(context_length=32, emb_dim=32, n_heads=4, n_layers=2)


def read_tensors(path):
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


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
    import playground.engine.checkpoint_files as checkpoint_files

    def no_open(*args, **kwargs):
        raise AssertionError("opened a file over the limit")

    monkeypatch.setattr(checkpoint_files, "safe_open", no_open)
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
    unknown = json.loads(metadata["config"]) | {"rope_scaling": 32}
    save_file(tensors, str(path), metadata=metadata | {"config": json.dumps(unknown)})
    with pytest.raises(WeightLoadError, match="unknown config field.*rope_scaling"):
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


@pytest.mark.parametrize(
    "failure",
    [
        lambda: FileNotFoundError("not in the cache"),
        lambda: __import__("httpx").ConnectError("[Errno -2] Name or service not known"),
        lambda: ConnectionError("connection refused"),
        lambda: TimeoutError("timed out"),
    ],
)
def test_an_unreachable_hub_is_the_offline_message_in_both_languages(monkeypatch, tmp_path, failure):
    import huggingface_hub

    from playground.errors import UserError
    from playground.i18n import tr_error

    def unreachable(*args, **kwargs):
        raise failure()

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", unreachable)
    with pytest.raises(UserError) as caught:
        load_pretrained("openai-community/gpt2", cache_dir=tmp_path)
    assert caught.value.key == "weights.hub_offline"
    assert "not reachable" in str(caught.value) and "openai-community/gpt2" in str(caught.value)
    zh = tr_error("zh-CN", caught.value)
    assert "连不上 Hugging Face hub" in zh and "Errno" not in zh and "reachable" not in zh


def test_a_hub_refusal_is_not_called_offline(monkeypatch, tmp_path):
    import huggingface_hub

    from playground.errors import UserError

    def refused(*args, **kwargs):
        raise RuntimeError("401 gated repo")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refused)
    with pytest.raises(UserError) as caught:
        load_pretrained("openai-community/gpt2", cache_dir=tmp_path)
    assert caught.value.key == "weights.hub_download" and "401 gated repo" in str(caught.value)
