"""Parity with transformers (issue 38): tiny random LlamaForCausalLM, Qwen3ForCausalLM and MistralForCausalLM,
built offline and saved with ``save_pretrained``, loaded by ``load_pretrained(folder)`` with the folder's own
tokenizer.json. Logits within 1e-4 in float32, the same greedy continuation, equal parameter counts, and every
query head's attention equal to transformers' eager attentions (GQA's shared keys, Mistral's window)."""

import json

import pytest
import torch

from playground.engine.hf_hub import load_pretrained
from playground.engine.hf_tokenizer import FolderTokenizer
from playground.engine.sampling import generate
from playground.engine.weight_layout import WeightLoadError
from playground.inside.inspection import count_parameters

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

VOCAB = 96
CHARS = "<unk> " + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'-"
COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    rms_norm_eps=1e-6,
)
FAMILIES = {
    "llama": lambda: transformers.LlamaForCausalLM(
        transformers.LlamaConfig(**COMMON, rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    ),
    "llama3_scaled_rope": lambda: transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            **COMMON,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 32.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        )
    ),
    "llama_tied_mqa": lambda: transformers.LlamaForCausalLM(
        transformers.LlamaConfig(**{**COMMON, "num_key_value_heads": 1}, tie_word_embeddings=True)
    ),
    "qwen3": lambda: transformers.Qwen3ForCausalLM(
        transformers.Qwen3Config(**COMMON, head_dim=32, tie_word_embeddings=True)
    ),
    "qwen3_window_some_layers": lambda: transformers.Qwen3ForCausalLM(
        transformers.Qwen3Config(**COMMON, use_sliding_window=True, sliding_window=6, max_window_layers=1)
    ),
    "mistral": lambda: transformers.MistralForCausalLM(transformers.MistralConfig(**COMMON, sliding_window=8)),
}


def write_tokenizer(folder) -> None:
    """A character-level tokenizer.json built with the tokenizers library (no network, no download)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = {"<unk>": 0, **{c: i + 1 for i, c in enumerate(CHARS[5:])}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.save(str(folder / "tokenizer.json"))


def build(family: str, folder):
    """A random transformers model whose weights are large enough that the logits are far from uniform."""
    torch.manual_seed(0)
    hf = FAMILIES[family]().eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.copy_(1 + 0.2 * torch.randn_like(p) if name.endswith("norm.weight") else 0.15 * torch.randn_like(p))
    hf.save_pretrained(folder)
    write_tokenizer(folder)
    return hf


@pytest.fixture(scope="module", params=list(FAMILIES))
def pair(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    hf = build(request.param, folder)
    hf.config._attn_implementation = "eager"  # attentions as weights, the reference maths
    ours = load_pretrained(folder, local_files_only=True)
    return request.param, hf, ours, folder


def test_config_and_counts(pair):
    family, hf, ours, _ = pair
    assert count_parameters(ours) == sum(p.numel() for p in hf.parameters())
    assert ours.cfg.kv_heads == hf.config.num_key_value_heads
    assert ours.cfg.head_dim == (getattr(hf.config, "head_dim", None) or 16)
    assert ours.cfg.tokenizer == "own" and ours.cfg.vocab_size == VOCAB


def test_logits_and_per_head_attention_equal_transformers(pair):
    family, hf, ours, _ = pair
    ids = torch.randint(0, VOCAB, (2, 20), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = hf(ids, output_attentions=True)
        logits, trace = ours(ids, return_attention=True)
    assert (logits - ref.logits).abs().max() <= 1e-4
    assert len(ref.attentions) == trace.n_layers
    for i, attn in enumerate(ref.attentions):
        assert attn.shape == (2, 4, 20, 20)  # one map per query head
        assert (trace.layer(i) - attn).abs().max() <= 1e-5, f"layer {i}"
    if family == "mistral":  # the window: the last query sees exactly its 8 latest positions
        assert (trace.layer(0)[0, :, -1, :12] == 0).all() and (trace.layer(0)[0, :, -1, 12:] > 0).all()


def test_greedy_continuation_is_the_same(pair):
    family, hf, ours, _ = pair
    prompt = ours.tokenizer.encode("the cat sat")
    ref = hf.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0)[
        0, len(prompt) :
    ].tolist()
    got = [step.token_id for step in generate(ours, prompt, max_new_tokens=12, temperature=0)]
    assert got == ref


def test_the_folder_tokenizer_round_trips():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        write_tokenizer(Path(d))
        tok = FolderTokenizer(Path(d) / "tokenizer.json")
    ids = tok.encode("Hi, cat!")
    assert ids == [CHARS[5:].index(c) + 1 for c in "Hi, cat!"]
    assert tok.decode(ids) == "Hi, cat!"
    assert [p.display for p in tok.pieces(ids[2:4])] == [",", "␣"]


def test_a_scaled_rope_checkpoint_is_refused_by_name(tmp_path):
    build("llama", tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(WeightLoadError, match="scales RoPE's frequencies \\('yarn'\\)"):
        load_pretrained(tmp_path, local_files_only=True)


def test_a_folder_without_tokenizer_json_is_refused(tmp_path):
    build("qwen3", tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(WeightLoadError, match="has no tokenizer.json"):
        load_pretrained(tmp_path, local_files_only=True)


def test_the_app_builds_a_folder_with_its_own_tokenizer(tmp_path):
    """The app's recipe for a Llama folder loads it with its tokenizer.json (tests/app/test_folder_tokenizer.py
    shows it in the tabs); its logits are the library's load of the same folder."""
    from playground.server.recipes import build_from_recipe

    build("llama", tmp_path)
    model = build_from_recipe({"kind": "hub", "repo": str(tmp_path), "dtype": "float32"}, measure=False)
    assert isinstance(model.tokenizer, FolderTokenizer)
    ids = torch.tensor([model.tokenizer.encode("hello there")])
    with torch.no_grad():
        torch.testing.assert_close(model(ids), load_pretrained(tmp_path, local_files_only=True)(ids))
