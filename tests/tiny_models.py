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
