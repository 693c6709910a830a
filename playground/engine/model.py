"""A GPT-2-style model written from scratch, in the textbook's names, built to be looked inside.

Classes come in the order they are used: LayerNorm -> GELU -> FeedForward -> attention (fused and
per-head) -> TransformerBlock -> GPTModel. Attention maps are never stored on modules: pass
``return_attention=True`` and the forward hands back an ``AttentionTrace`` holding each layer's
queries and keys, from which the probabilities are computed only for the layers someone looks at.
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from playground.engine.config import GPTConfig
from playground.engine.decode_paths import is_in_out, one_row_bfloat16_switch
from playground.engine.kv_cache import KVCache

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
            nn.Linear(cfg.emb_dim, 4 * cfg.emb_dim),
            make_activation(cfg.activation),
            nn.Linear(4 * cfg.emb_dim, cfg.emb_dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


# ----------------------------------------------------------------------------------------------
# Attention


def causal_mask(q_len: int, k_len: int, device=None) -> torch.Tensor:
    """True where a query may NOT look: the queries are the last ``q_len`` of ``k_len`` positions."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(k_len - q_len + 1)


def attention_probs(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """softmax(Q·Kᵀ/√d + causal mask) in float32: (B, H, Tq, hd), (B, H, Tk, hd) -> (B, H, Tq, Tk)."""
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Tq, Tk)
    scores = scores.masked_fill(causal_mask(q.size(-2), k.size(-2), q.device), float("-inf"))
    return torch.softmax(scores, dim=-1)


class AttentionTrace:
    """Per-layer queries and keys from one forward; attention probabilities computed on request.

    Holding Q and K costs 2·T·emb_dim numbers a layer, where the maps themselves cost n_heads·T²:
    for a full 1024-token GPT-2 small context that is 75 MB against 600 MB.
    """

    def __init__(self) -> None:
        self.queries: list[torch.Tensor] = []  # each (B, n_heads, Tq, head_dim)
        self.keys: list[torch.Tensor] = []  # each (B, n_heads, Tk, head_dim)

    def record(self, q: torch.Tensor, k: torch.Tensor) -> None:
        self.queries.append(q.detach())
        self.keys.append(k.detach())

    @property
    def n_layers(self) -> int:
        return len(self.queries)

    def layer(self, i: int) -> torch.Tensor:
        """Attention probabilities of layer ``i``: (B, n_heads, Tq, Tk), float32, rows sum to 1."""
        return attention_probs(self.queries[i], self.keys[i])

    def all_layers(self) -> list[torch.Tensor]:
        return [self.layer(i) for i in range(self.n_layers)]


def _attend(q, k, v, dropout_p: float) -> torch.Tensor:
    """The fast path: fused scaled-dot-product attention with the causal mask for Tq <= Tk."""
    q_len, k_len = q.size(-2), k.size(-2)
    if q_len == 1:  # one new token sees every cached position
        if q.dtype != torch.float32 and q.device.type == "cpu":
            # The CPU kernel for a single low-precision query is slow (bfloat16, 1024 keys: ~4x
            # the time of float32 on upcast copies); float32 is also the more exact of the two.
            out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), dropout_p=dropout_p)
            return out.to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    if q_len == k_len:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
    allowed = ~causal_mask(q_len, k_len, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout_p)


class MultiHeadAttention(nn.Module):
    """Causal multi-head attention, "logical split": one d->d projection each for Q, K and V,
    viewed as n_heads slices of head_dim."""

    _stacked: tuple | None = None  # (version key, weight, bias): see stacked_qkv
    stack_qkv = False  # one product for Q, K and V when inferring: set by decode_paths.optimize_for_decode (measured)

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        d = cfg.emb_dim
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        self.W_query = nn.Linear(d, d, bias=cfg.qkv_bias)
        self.W_key = nn.Linear(d, d, bias=cfg.qkv_bias)
        self.W_value = nn.Linear(d, d, bias=cfg.qkv_bias)
        self.out_proj = nn.Linear(d, d)
        self.dropout = cfg.drop_rate

    def project_qkv(self, x: torch.Tensor):
        B, T, _ = x.shape
        if self.stack_qkv and not torch.is_grad_enabled():
            # Inference: Q, K and V from one product with the three weights stacked -- one kernel
            # instead of three, where a measurement on this machine found it faster
            # (playground.runtime.kernels). Training uses the three modules as written below.
            qkv = F.linear(x, *self.stacked_qkv())  # (B, T, 3 * emb_dim)
            q, k, v = qkv.view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)  # 3 x (B, H, T, hd)
            return q, k, v
        q = self.W_query(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        k = self.W_key(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        v = self.W_value(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        return q, k, v

    def stacked_qkv(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """W_query, W_key, W_value stacked along the output dimension: (3 * emb_dim, emb_dim) and the
        biases (3 * emb_dim,). A copy, rebuilt whenever one of them changes: every in-place update
        (optimiser step, load_state_dict, init) bumps a tensor's version, .to() gives new storage."""
        linears = (self.W_query, self.W_key, self.W_value)
        tensors = [t for m in linears for t in (m.weight, m.bias) if t is not None]
        key = tuple((t.data_ptr(), t._version, t.dtype) for t in tensors)
        if self._stacked is None or self._stacked[0] != key:
            with torch.no_grad():
                weight = torch.cat([m.weight for m in linears])
                bias = torch.cat([m.bias for m in linears]) if self.W_query.bias is not None else None
                if is_in_out(self.W_query.weight):  # the memory order measured fastest for these products
                    weight = weight.t().contiguous().t()
            self._stacked = (key, weight, bias)
        return self._stacked[1], self._stacked[2]

    def set_stacked_qkv(self, on: bool) -> None:
        """Whether inference computes Q, K and V by one product with the three weights stacked."""
        self.stack_qkv = on
        self._stacked = None

    def _apply(self, fn, recurse=True):
        self._stacked = None  # .to() and friends: the stacked copy would be of the old tensors
        return super()._apply(fn, recurse)

    def forward(self, x, layer_cache=None, trace: AttentionTrace | None = None, hooks=None):
        B, T, d = x.shape
        q, k, v = self.project_qkv(x)
        if layer_cache is not None:
            k, v = layer_cache.append(k, v)  # (B, H, T_cached + T, hd)
        if trace is not None:
            trace.record(q, k)
        if hooks is None:
            ctx = _attend(q, k, v, self.dropout if self.training else 0.0)  # (B, H, T, hd)
        else:  # playground.inside.interventions: capture / ablate / scale heads, or lift the mask
            ctx = hooks.attend(q, k, v)  # (B, H, T, hd)
        ctx = ctx.transpose(1, 2).reshape(B, T, d)  # (B, T, emb_dim)
        return self.out_proj(ctx)


class CausalAttention(nn.Module):
    """One attention head with its own W_query / W_key / W_value (emb_dim -> head_dim)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.W_query = nn.Linear(cfg.emb_dim, cfg.head_dim, bias=cfg.qkv_bias)
        self.W_key = nn.Linear(cfg.emb_dim, cfg.head_dim, bias=cfg.qkv_bias)
        self.W_value = nn.Linear(cfg.emb_dim, cfg.head_dim, bias=cfg.qkv_bias)


class MultiHeadAttentionWrapper(MultiHeadAttention):
    """Causal multi-head attention, "physical split": a list of single-head modules whose outputs
    are concatenated. Same maths and parameter count as the fused version."""

    def __init__(self, cfg: GPTConfig):
        nn.Module.__init__(self)
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        self.heads = nn.ModuleList(CausalAttention(cfg) for _ in range(cfg.n_heads))
        self.out_proj = nn.Linear(cfg.emb_dim, cfg.emb_dim)
        self.dropout = cfg.drop_rate

    def project_qkv(self, x: torch.Tensor):
        heads = cast(list[CausalAttention], list(self.heads))
        q = torch.stack([h.W_query(x) for h in heads], dim=1)  # (B, H, T, hd)
        k = torch.stack([h.W_key(x) for h in heads], dim=1)  # (B, H, T, hd)
        v = torch.stack([h.W_value(x) for h in heads], dim=1)  # (B, H, T, hd)
        return q, k, v


# ----------------------------------------------------------------------------------------------
# Transformer block and the model


class TransformerBlock(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.att = MultiHeadAttentionWrapper(cfg) if cfg.attention_impl == "per_head" else MultiHeadAttention(cfg)
        self.ff = FeedForward(cfg)
        self.norm1 = LayerNorm(cfg.emb_dim, cfg.ln_eps)
        self.norm2 = LayerNorm(cfg.emb_dim, cfg.ln_eps)
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
    for a user checks first (``config.check_memory`` / ``check_build_size``: the server's recipes,
    training's ``build_model``, the loaders in ``weights``), and ``decode_paths.optimize_for_decode``
    applies this machine's fastest decode layout afterwards. ``generator`` makes the initialisation
    draw from that ``torch.Generator`` instead of torch's global one, so building never disturbs
    anyone else's random numbers (the app always passes one).
    """

    pos_emb: nn.Module  # learned (nn.Embedding) or sinusoidal, by config
    load_report: Any  # weights.LoadReport, set by the loaders in engine.weights
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
            else:
                self.pos_emb = SinusoidalPositionalEmbedding(cfg.context_length, cfg.emb_dim)
            self.drop_emb = nn.Dropout(cfg.drop_rate)
            self.trf_blocks = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.n_layers))
            # Post-norm blocks already end in a LayerNorm; a final one would normalise twice.
            self.final_norm = LayerNorm(cfg.emb_dim, cfg.ln_eps) if cfg.norm_placement == "pre" else nn.Identity()
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
                std = residual_std if name.endswith(("out_proj", "layers.2")) else 0.02
                nn.init.normal_(module.weight, mean=0.0, std=std, generator=generator)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02, generator=generator)
            elif isinstance(module, (LayerNorm, SinusoidalPositionalEmbedding)):
                module.reset_parameters()

    @property
    def device(self) -> torch.device:
        return self.tok_emb.weight.device

    @property
    def dtype(self) -> torch.dtype:
        """The activations' dtype (an int8-weight model computes in bfloat16 or float32)."""
        return getattr(self.tok_emb, "activation_dtype", self.tok_emb.weight.dtype)

    def new_kv_cache(self, batch_size: int = 1) -> KVCache:
        return KVCache(self.cfg, batch_size, self.device, self.dtype)

    def forward(
        self,
        idx: torch.Tensor,
        kv_cache: KVCache | None = None,
        return_attention: bool = False,
        last_token_only: bool = False,
        hooks=None,
    ):
        """idx (B, T) token ids -> logits (B, T, vocab_size), or (logits, AttentionTrace).

        With ``kv_cache`` the ids continue the cached sequence. ``last_token_only`` computes the
        output head for the final position only (all that sampling needs). ``hooks`` (a
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
        positions = torch.arange(start, start + T, device=idx.device)
        trace = AttentionTrace() if return_attention else None
        with one_row_bfloat16_switch(self.dtype, idx.device, B * T):
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
            logits = self.out_head(self.final_norm(x))  # (B, T, vocab_size)
        if kv_cache is not None:
            kv_cache.length += T
        return (logits, trace) if return_attention else logits
