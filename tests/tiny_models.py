"""Tiny random models the tests share (a plain module, no gradio): every parameter random and large
enough that the logits are far from uniform (GPT-2's 0.02 init gives near-identical logits that would
hide most mistakes)."""

import torch

from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel

TINY = dict(context_length=32, emb_dim=32, n_heads=4, n_layers=2)


def random_model(seed=0, std=0.1, **changes) -> GPTModel:
    """A TINY model (``changes`` override its fields) in eval mode."""
    torch.manual_seed(seed)
    model = GPTModel(GPTConfig(**{**TINY, **changes}))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("scale"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.normal_(0.0, std)
    return model.eval()


def three_layer_model(seed=0, std=0.1, **changes) -> GPTModel:
    """random_model with a third layer, so that an intervention has blocks both before and after it."""
    return random_model(seed, std, **{"n_layers": 3, **changes})


# Every switch since GPT-2 at once (issue 38), small enough for the views' tests: RoPE, RMSNorm, SwiGLU,
# 2 key/value heads for 4 query heads, QK-norm, a 5-position window, no biases.
SINCE_GPT2 = dict(
    pos_encoding="rope",
    norm="rmsnorm",
    ff="swiglu",
    ff_hidden_dim=48,
    n_kv_heads=2,
    qk_norm=True,
    sliding_window=5,
    bias=False,
    qkv_bias=False,
)


# A character-level vocabulary for a checkpoint folder's own tokenizer.json (issue 38): small, built offline.
FOLDER_CHARS = " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'-"


def write_folder_tokenizer(folder) -> None:
    """A character-level tokenizer.json built with the tokenizers library (no network, no download)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = {"<unk>": 0, **{c: i + 1 for i, c in enumerate(FOLDER_CHARS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.save(str(folder / "tokenizer.json"))


def write_llama_folder(folder, family: str = "llama", seed: int = 0) -> None:
    """A tiny random Llama (4 query heads on 2 key/value heads) or Qwen3 checkpoint in the Hugging Face layout,
    saved with transformers' ``save_pretrained``, with its own tokenizer.json: what a downloaded folder holds."""
    import transformers

    common = dict(
        vocab_size=len(FOLDER_CHARS) + 1,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rms_norm_eps=1e-6,
    )
    torch.manual_seed(seed)
    if family == "qwen3":
        hf = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**common, head_dim=32, tie_word_embeddings=True))
    else:
        hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.copy_(1 + 0.2 * torch.randn_like(p) if name.endswith("norm.weight") else 0.15 * torch.randn_like(p))
    folder.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(folder)
    write_folder_tokenizer(folder)
