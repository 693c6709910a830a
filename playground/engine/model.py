"""A GPT-2-style model written from scratch, in the textbook's names, built to be looked inside.

Classes come in the order they are used: LayerNorm -> GELU -> FeedForward -> attention (fused and
per-head: attention.py) -> TransformerBlock -> GPTModel. What came after GPT-2 is switched on by the
config and lives beside this file: RMSNorm (norms.py), SwiGLU (swiglu.py), rotary positions (rotary.py),
grouped-query attention, QK-norm and sliding windows (attention.py). Attention maps are never stored on
modules: pass ``return_attention=True`` and the forward hands back an ``AttentionTrace`` holding
each layer's queries and keys, from which the probabilities are computed only for the layers
someone looks at.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from playground.engine.attention import AttentionTrace, MultiHeadAttention, MultiHeadAttentionWrapper
from playground.engine.config import GPTConfig
from playground.engine.kv_cache import KVCache
from playground.engine.norms import RMSNorm
from playground.engine.rotary import RotaryEmbedding
from playground.engine.swiglu import SwiGLU

# ----------------------------------------------------------------------------------------------
# Building blocks


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * scale + shift, over the last dimension (biased variance)."""

    def __init__(self, emb_dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.scale.fill_(1.0)
            self.shift.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # One fused kernel computing exactly the formula above (tests check it against the formula
        # written out); on a 1-token decode step the per-op overhead is what costs.
        return F.layer_norm(x, x.shape[-1:], self.scale, self.shift, self.eps)

    def forward_explicit(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + self.eps) * self.scale + self.shift


class GELU(nn.Module):
    """GELU; ``approximate="tanh"`` is GPT-2's 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))."""

    def __init__(self, approximate: str = "tanh"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # One fused kernel instead of the six element-wise ops written out below (tests check that
        # both give the same numbers); a decode step runs it 12 times on a single row.
        return F.gelu(x, approximate=self.approximate)

    def forward_explicit(self, x: torch.Tensor) -> torch.Tensor:
        if self.approximate == "tanh":
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def make_activation(name: str) -> nn.Module:
    if name == "gelu_tanh":
        return GELU("tanh")
    if name == "gelu":
        return GELU("none")
    return nn.ReLU()


class FeedForward(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(cfg.emb_dim, cfg.ff_dim, bias=cfg.bias),  # ff_dim: 4 · emb_dim in GPT-2
            make_activation(cfg.activation),
            nn.Linear(cfg.ff_dim, cfg.emb_dim, bias=cfg.bias),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def make_feed_forward(cfg: GPTConfig) -> nn.Module:
    return SwiGLU(cfg.emb_dim, cfg.ff_dim, cfg.bias) if cfg.ff == "swiglu" else FeedForward(cfg)


def make_norm(cfg: GPTConfig) -> nn.Module:
    return RMSNorm(cfg.emb_dim, cfg.ln_eps) if cfg.norm == "rmsnorm" else LayerNorm(cfg.emb_dim, cfg.ln_eps)


# ----------------------------------------------------------------------------------------------
# Transformer block and the model


class TransformerBlock(nn.Module):
    def __init__(self, cfg: GPTConfig, layer: int = 0):
        super().__init__()
        attention = MultiHeadAttentionWrapper if cfg.attention_impl == "per_head" else MultiHeadAttention
        self.att = attention(cfg, layer)
        self.ff = make_feed_forward(cfg)
        self.norm1 = make_norm(cfg)
        self.norm2 = make_norm(cfg)
        self.drop_shortcut = nn.Dropout(cfg.drop_rate)
        self.pre_norm = cfg.norm_placement == "pre"

    def forward(self, x, layer_cache=None, trace=None, hooks=None):
        ff = self.ff if hooks is None else hooks.mlp(self.ff)  # hooks: capture or skip the MLP
        if self.pre_norm:  # GPT-2: normalise the input of each sub-layer, keep the residual clean
            x = x + self.drop_shortcut(self.att(self.norm1(x), layer_cache, trace, hooks))
            x = x + self.drop_shortcut(ff(self.norm2(x)))
        else:  # the original Transformer: normalise after each residual add
            x = self.norm1(x + self.drop_shortcut(self.att(x, layer_cache, trace, hooks)))
            x = self.norm2(x + self.drop_shortcut(ff(x)))
        return x


class SinusoidalPositionalEmbedding(nn.Module):
    """Fixed sin/cos positions (Vaswani et al.): no parameters, a buffer rebuilt from the config."""

    table: torch.Tensor

    def __init__(self, context_length: int, emb_dim: int):
        super().__init__()
        self.register_buffer("table", torch.zeros(context_length, emb_dim), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        context_length, emb_dim = self.table.shape
        device = self.table.device
        pos = torch.arange(context_length, dtype=torch.float32, device=device).unsqueeze(1)  # (C, 1)
        freq = torch.exp(
            torch.arange(0, emb_dim, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / emb_dim)
        )
        with torch.no_grad():
            self.table[:, 0::2] = torch.sin(pos * freq).to(self.table.dtype)
            self.table[:, 1::2] = torch.cos(pos * freq).to(self.table.dtype)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.table[positions]


class RotaryPositions(nn.Module):
    """RoPE's input gets no position: positions turn the queries and keys inside attention (rotary.py).
    Adds an exact 0, so every view that reads ``tok_emb + pos_emb`` reads the same stream."""

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return torch.zeros(positions.size(0), 1, device=positions.device)  # (T, 1): broadcast over emb_dim


class _skip_default_init(TorchFunctionMode):
    """Inside: nn.init's fills (kaiming_uniform_, normal_, ...) and the random in-place ops leave
    tensors as they are."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.uniform_, torch.Tensor.normal_) or getattr(func, "__module__", "") == "torch.nn.init":
            return args[0] if args else kwargs["tensor"]
        return func(*args, **(kwargs or {}))


class GPTModel(nn.Module):
    """``GPTModel(cfg)(idx)`` -> logits (batch, seq, vocab_size).

    A plain module: building one checks no memory budget and times no kernel. Whoever builds a model
    for a user checks first (``memory_check.check_memory`` / ``sizes.check_build_size``: the server's
    recipes, training's ``build_model``, the loaders in ``weights``); speed is applied beside it, by
    ``playground.accel.accelerate(model)``, never inside it. ``generator`` makes the initialisation
    draw from that ``torch.Generator`` instead of torch's global one, so building never disturbs
    anyone else's random numbers (the app always passes one).
    """

    pos_emb: nn.Module  # learned (nn.Embedding), sinusoidal, or none with RoPE, by config
    tokenizer: Any  # a Llama-family checkpoint folder's own (hf_tokenizer.FolderTokenizer); GPT-2 models have none
    load_report: Any  # weight_layout.LoadReport, set by weights.load_checkpoint and hf_hub.load_pretrained
    checkpoint_metadata: dict[str, str]  # a loaded checkpoint's own metadata

    def __init__(self, cfg: GPTConfig, *, generator: torch.Generator | None = None):
        super().__init__()
        if not isinstance(cfg, GPTConfig):
            raise TypeError(f"GPTModel needs a GPTConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        # nn.Linear and nn.Embedding initialise themselves from torch's global generator; that
        # first init is skipped (and replaced by reset_parameters below), so building a model
        # never touches the global generator and fills each weight once.
        with _skip_default_init():
            self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.emb_dim)
            if cfg.pos_encoding == "learned":
                self.pos_emb = nn.Embedding(cfg.context_length, cfg.emb_dim)
            elif cfg.pos_encoding == "sinusoidal":
                self.pos_emb = SinusoidalPositionalEmbedding(cfg.context_length, cfg.emb_dim)
            else:
                self.pos_emb = RotaryPositions()
            self.drop_emb = nn.Dropout(cfg.drop_rate)
            self.trf_blocks = nn.ModuleList(TransformerBlock(cfg, i) for i in range(cfg.n_layers))
            # Post-norm blocks already end in a norm; a final one would normalise twice.
            self.final_norm = make_norm(cfg) if cfg.norm_placement == "pre" else nn.Identity()
            self.out_head = nn.Linear(cfg.emb_dim, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.out_head.weight = self.tok_emb.weight
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """GPT-2's initialisation: N(0, 0.02), zero biases, residual projections scaled by 1/√(2L);
        LayerNorm scale 1 and shift 0. Draws from ``generator`` (torch's global one if None)."""
        if self.tok_emb.weight.is_meta:
            return  # shapes only: nothing to fill
        residual_std = 0.02 / math.sqrt(2 * self.cfg.n_layers)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                if module.weight is self.tok_emb.weight:
                    continue  # the tied output head: initialised as the embedding
                std = residual_std if name.endswith(("out_proj", "layers.2", "ff.fc3")) else 0.02
                nn.init.normal_(module.weight, mean=0.0, std=std, generator=generator)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02, generator=generator)
            elif isinstance(module, (LayerNorm, RMSNorm, SinusoidalPositionalEmbedding, RotaryEmbedding)):
                module.reset_parameters()

    @property
    def device(self) -> torch.device:
        return self.tok_emb.weight.device

    @property
    def dtype(self) -> torch.dtype:
        """The activations' dtype (an int8-weight model computes in bfloat16 or float32)."""
        return getattr(self.tok_emb, "activation_dtype", self.tok_emb.weight.dtype)

    def new_kv_cache(self, batch_size: int = 1, capacity: int | None = None) -> KVCache:
        """An empty cache for ``capacity`` positions (default: the whole context)."""
        return KVCache(self.cfg, batch_size, self.device, self.dtype, capacity)

    def forward(
        self,
        idx: torch.Tensor,
        kv_cache: KVCache | None = None,
        return_attention: bool = False,
        last_token_only: bool = False,
        hooks=None,
        output_rows: torch.Tensor | None = None,
        return_hidden: bool = False,
    ):
        """idx (B, T) token ids -> logits (B, T, vocab_size), or (logits, AttentionTrace).

        With ``kv_cache`` the ids continue the cached sequence. ``last_token_only`` computes the
        output head for the final position only (all that sampling needs). ``output_rows``: the logits of
        those vocabulary rows only; ``return_hidden``: the final LayerNorm's output (B, T, emb_dim) instead of
        the logits, for a loss that applies the output head itself (training). ``hooks`` (a
        ``playground.inside.interventions.Hooks``) captures the residual stream and each head's and MLP's
        output, and applies an intervention; ``None`` (the default) is the plain forward, untouched.
        """
        if idx.dim() != 2:
            raise ValueError(f"idx must be (batch, seq) token ids, got shape {tuple(idx.shape)}")
        B, T = idx.shape
        start = kv_cache.length if kv_cache is not None else 0
        if T == 0:
            raise ValueError("idx has no tokens")
        if start + T > self.cfg.context_length:
            raise ValueError(f"sequence of {start + T} tokens exceeds the context length {self.cfg.context_length}")
        if kv_cache is not None and start + T > kv_cache.capacity:
            raise ValueError(f"sequence of {start + T} tokens exceeds the KV cache's {kv_cache.capacity} positions")
        positions = torch.arange(start, start + T, device=idx.device)
        trace = AttentionTrace() if return_attention else None
        x = self.tok_emb(idx) + self.pos_emb(positions).to(self.dtype)  # (B, T, emb_dim)
        if hooks is not None:
            x = hooks.embed(self.tok_emb(idx), self.pos_emb(positions).to(self.dtype))
        x = self.drop_emb(x)
        for i, block in enumerate(self.trf_blocks):
            x = block(
                x,
                kv_cache.layers[i] if kv_cache is not None else None,
                trace,
                None if hooks is None else hooks.layer(i),
            )
            if hooks is not None:
                hooks.resid(i + 1, x)
        if last_token_only:
            x = x[:, -1:, :]  # (B, 1, emb_dim)
        if return_hidden:
            logits = self.final_norm(x)  # (B, T, emb_dim): what out_head would read
        elif output_rows is not None:
            logits = F.linear(self.final_norm(x), self.out_head.weight[output_rows])  # (B, T, len(output_rows))
        else:
            logits = self.out_head(self.final_norm(x))  # (B, T, vocab_size)
        if kv_cache is not None:
            kv_cache.length += T
        return (logits, trace) if return_attention else logits
