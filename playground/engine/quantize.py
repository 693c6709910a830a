"""Weight-only int8: every weight matrix stored as int8 with one float scale per output channel.

``quantize_int8(model)`` replaces each ``nn.Linear`` (the Q/K/V and output projections, both
feed-forward layers, the output head) by an ``Int8Linear`` and the token embedding by an
``Int8Embedding``, under the same names, in place. A weight row
w (one output channel) becomes round(w / s) with s = max|w| / 127, so the largest entry of each row
is exact and every other is within s/2. Activations, LayerNorms, biases, the position embedding
and the KV cache stay in ``activations`` (bfloat16 by default, or float32); each product is (x · qᵀ) · s + b.

Decoding streams every weight once per token, so a quarter of float32's bytes is what makes it
fast; which kernel computes the product is measured on the machine (playground.runtime.kernels). Training
an int8 model is not supported (its weights are frozen int8 parameters).

``quantize_int8(model, dynamic=True)`` (the "int8-dynamic" precision, as CTranslate2's int8 and llama.cpp's
q8_0 compute) also quantizes each product's input at run time: every activation row x becomes round(x / r)
with r = max|x| / 127, the product runs on int8 values with int32 sums, and y = (xq · qᵀ) · r · s + b. Where the
CPU's int8 dot-product instruction (VNNI) is built here (runtime.native_gemv), a one-row product can run on it,
with the same sums and the same result, bit for bit, when it measures faster.
"""

from __future__ import annotations

import collections
import functools
import weakref
from collections.abc import Callable
from typing import TypeVar

import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.errors import UserError
from playground.runtime import decode_decisions, kernels, native_gemv

ModuleT = TypeVar("ModuleT", bound=nn.Module)  # the model given is the model returned, quantized in place

ACTIVATIONS = {"bfloat16": torch.bfloat16, "float32": torch.float32}


class QuantizeError(UserError):
    pass


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, in) float weight -> int8 (out, in) and float32 scales (out,): w ≈ q · s[:, None]."""
    w = weight.detach().float()
    scale = w.abs().amax(dim=1) / 127.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero row stays zero
    q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    return q.contiguous(), scale


def _dequantize(x2d, q, scale, bias):
    return F.linear(x2d, q.to(x2d.dtype) * scale[:, None], bias)


def _int8pack(x2d, q, scale, bias):
    if x2d.dtype == torch.bfloat16 and x2d.size(1) % 16:
        # ATen's bfloat16 int8 kernel (torch 2.13) returns wrong sums, or crashes with several rows, when in is not
        # a multiple of 16: such a layer (a custom emb_dim) is dequantized instead.
        return _dequantize(x2d, q, scale, bias)
    out = torch.ops.aten._weight_int8pack_mm(x2d, q, scale)
    return out if bias is None else out + bias


def _compiled_weights(x2d, q, scale, bias, threads: int):
    if x2d.size(0) == 1:
        return native_gemv.linear_int8_weights(x2d, q, scale, bias, threads)
    return _int8pack(x2d, q, scale, bias)  # a prompt's rows: ATen's int8 kernel


_KERNELS: dict[str, Callable[..., torch.Tensor]] = {
    "dequantize": _dequantize,
    "int8pack": _int8pack,
    # one row on the compiled kernel (runtime.native_gemv: int8 widened to float32 in registers), all threads or one
    "compiled": functools.partial(_compiled_weights, threads=0),
    "compiled_1_thread": functools.partial(_compiled_weights, threads=1),
}
COMPILED_WEIGHTS = ("compiled", "compiled_1_thread")


def quantize_activations(x2d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, in) float activations -> int8 (rows, in) and float32 scales (rows, 1), one per row."""
    x = x2d.float()
    scale = x.abs().amax(dim=1, keepdim=True) / 127.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.round(x / scale).clamp_(-127, 127).to(torch.int8), scale


def _dynamic_dequantize(x2d, q, scale, bias):
    xq, xs = quantize_activations(x2d)
    out = (F.linear(xq.float(), q.float()) * (xs * scale.float())).to(x2d.dtype)
    return out if bias is None else out + bias


def _dynamic_int_mm(x2d, q, scale, bias):
    xq, xs = quantize_activations(x2d)
    out = (torch._int_mm(xq, q.t()) * (xs * scale.float())).to(x2d.dtype)  # int32 sums, exact
    return out if bias is None else out + bias


_ROW_SUMS: dict[int, tuple[weakref.ref, int, torch.Tensor]] = {}  # id(q) -> (q, its version, Σ_k q[row, k])


def weight_row_sums(q: torch.Tensor) -> torch.Tensor:
    """Σ_k q[row, k] of an int8 weight as int32 (out,): what the compiled int8 kernel subtracts 128 times over.
    Computed once per weight and kept while the weight lives; again if its values change in place."""
    key = id(q)
    hit = _ROW_SUMS.get(key)
    if hit is not None and hit[0]() is q and hit[1] == q._version:
        return hit[2]
    sums = q.detach().sum(dim=1, dtype=torch.int32)

    def drop(_ref: weakref.ref) -> None:  # the weight is gone: so are its sums
        _ROW_SUMS.pop(key, None)

    _ROW_SUMS[key] = (weakref.ref(q, drop), q._version, sums)
    return sums


def _dynamic_compiled(x2d, q, scale, bias, threads: int):
    if x2d.size(0) == 1 and x2d.dtype == torch.float32 and scale.dtype == torch.float32:
        return native_gemv.linear_int8_dynamic(x2d, q, weight_row_sums(q), scale, bias, threads)
    return _dynamic_int_mm(x2d, q, scale, bias)  # a prompt's rows, or bfloat16 between: torch's integer product


_DYNAMIC_KERNELS: dict[str, Callable[..., torch.Tensor]] = {
    "dequantize": _dynamic_dequantize,
    "int_mm": _dynamic_int_mm,
    # one row on the CPU's int8 dot product (runtime.native_gemv), on all of torch's threads or on one
    "compiled_vnni": functools.partial(_dynamic_compiled, threads=0),
    "compiled_vnni_1_thread": functools.partial(_dynamic_compiled, threads=1),
}
COMPILED_DYNAMIC = ("compiled_vnni", "compiled_vnni_1_thread")


def int8_linear_kernels(dynamic: bool = False, activations: torch.dtype = torch.float32) -> dict:
    """Candidate kernels, the plain one (dequantize, then an ordinary product) first; ``dynamic``: those
    that also quantize the activations per row. The compiled ones (runtime.native_gemv) only where this machine
    built and checked them (for int8 × int8: the int8 dot product, float32 activations), and on one thread
    only with several."""
    if not dynamic:
        out = {k: v for k, v in _KERNELS.items() if k not in COMPILED_WEIGHTS}
        if kernels.measuring_enabled() and native_gemv.available():  # PLAYGROUND_ACCEL=off builds nothing
            out["compiled"] = _KERNELS["compiled"]
            if torch.get_num_threads() > 1:
                out["compiled_1_thread"] = _KERNELS["compiled_1_thread"]
        return out
    out = {k: v for k, v in _DYNAMIC_KERNELS.items() if k not in COMPILED_DYNAMIC}
    if activations == torch.float32 and kernels.measuring_enabled() and native_gemv.int8_dot_ready():
        out["compiled_vnni"] = _DYNAMIC_KERNELS["compiled_vnni"]
        if torch.get_num_threads() > 1:
            out["compiled_vnni_1_thread"] = _DYNAMIC_KERNELS["compiled_vnni_1_thread"]
    return out


class Int8Linear(nn.Module):
    """y = (x · qᵀ) · scale + bias, with q int8 (out, in) and one scale per output channel.

    ``weight`` holds q as a frozen int8 parameter (so parameter counts and names stay those of
    nn.Linear); ``scale`` is a buffer in the activations' dtype."""

    weight: nn.Parameter
    scale: torch.Tensor

    def __init__(
        self, q: torch.Tensor | nn.Parameter, scale: torch.Tensor, bias: torch.Tensor | None, dynamic: bool = False
    ):
        super().__init__()
        self.dynamic = dynamic  # activations quantized per row at run time too
        self.out_features, self.in_features = q.shape
        self.weight = q if isinstance(q, nn.Parameter) else nn.Parameter(q, requires_grad=False)
        self.register_buffer("scale", scale)
        self.bias = None if bias is None else nn.Parameter(bias.detach().to(scale.dtype).clone(), requires_grad=False)
        self.kernel = "dequantize"  # set from a measurement by quantize_int8

    def dequantized_weight(self) -> torch.Tensor:
        """The (out, in) float32 weight these int8 values and scales stand for."""
        return self.weight.float() * self.scale.float()[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2d = x.reshape(-1, self.in_features).to(self.scale.dtype).contiguous()
        out = (_DYNAMIC_KERNELS if self.dynamic else _KERNELS)[self.kernel](x2d, self.weight, self.scale, self.bias)
        return out.view(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        kind = "int8 weights and activations" if self.dynamic else "int8"
        return f"in_features={self.in_features}, out_features={self.out_features}, {kind}, kernel={self.kernel}"


class Int8Embedding(nn.Module):
    """Rows of an int8 (V, d) table times their own scale; shares both with a tied Int8Linear head."""

    weight: nn.Parameter
    scale: torch.Tensor

    def __init__(self, q: nn.Parameter, scale: torch.Tensor):
        super().__init__()
        self.num_embeddings, self.embedding_dim = q.shape
        self.weight = q
        self.register_buffer("scale", scale)

    @property
    def activation_dtype(self) -> torch.dtype:
        return self.scale.dtype

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return F.embedding(idx, self.weight).to(self.scale.dtype) * self.scale[idx].unsqueeze(-1)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, int8"


def int8_kernel(shape: tuple[int, ...], activations: torch.dtype, count: int, dynamic: bool = False) -> kernels.Choice:
    """How an int8-weight product runs: ATen's int8 matrix-vector kernel with per-channel scales
    (``_weight_int8pack_mm``), or the weight dequantized to the activations' dtype per product;
    ``dynamic``: int8 × int8 with int32 sums (``torch._int_mm``, or the compiled kernel on the CPU's int8 dot
    product where it is built) or the plain float product of the same integers. Measured on ``count`` weights
    of ``shape`` (up to the kernel working set)."""
    n = decode_decisions.copies(shape, torch.int8, count)

    def candidates() -> kernels.Candidates:
        gen = torch.Generator().manual_seed(0)
        ws = [torch.randint(-127, 128, shape, dtype=torch.int8, generator=gen) for _ in range(n)]
        scales = torch.full((shape[0],), 0.02 / 127).to(activations)
        x = torch.randn(1, shape[1], generator=torch.Generator().manual_seed(0)).to(activations)
        impls = int8_linear_kernels(dynamic, activations)

        def run(kernel):
            def one_pass():
                for w in ws:
                    impls[kernel](x, w, scales, None)

            return one_pass

        return {k: run(k) for k in impls}

    name = str(activations).replace("torch.", "")
    if dynamic:
        return kernels.choose(
            ("int8 dynamic kernel", tuple(shape), activations, n),
            f"int8 weights × int8 activations (per row, {name} between) {tuple(shape)}",
            candidates,
            label=("int8dyn", {"dtype": name, "shape": tuple(shape)}),
        )
    return kernels.choose(
        ("int8 kernel", tuple(shape), activations, n),
        f"int8 weights × {name} {tuple(shape)}",
        candidates,
        label=("int8", {"dtype": name, "shape": tuple(shape)}),
    )


def is_int8(model: nn.Module) -> bool:
    return any(isinstance(m, (Int8Linear, Int8Embedding)) for m in model.modules())


def is_dynamic_int8(model: nn.Module) -> bool:
    """Whether the model's products also quantize their activations (``quantize_int8(..., dynamic=True)``)."""
    return any(isinstance(m, Int8Linear) and m.dynamic for m in model.modules())


def _quantized(weight: torch.Tensor, act: torch.dtype) -> tuple[nn.Parameter, torch.Tensor]:
    q, scale = quantize_rows(weight)
    return nn.Parameter(q, requires_grad=False), scale.to(act)


def quantize_int8(model: ModuleT, activations: str | torch.dtype = "bfloat16", dynamic: bool = False) -> ModuleT:
    """Quantize ``model``'s weight matrices to int8 in place (see the module docstring); returns it.

    Every nn.Linear becomes an Int8Linear of the same name; the token embedding becomes an
    Int8Embedding (per-row scales), and a tied output head keeps sharing it -- the head's output
    channels are the embedding's rows, so one set of int8 values and scales serves both.
    ``dynamic``: every product quantizes its input rows too (int8 × int8, int32 sums).
    """
    if is_int8(model):
        raise QuantizeError("quantize.already_int8", "This model is already int8.")
    act = ACTIVATIONS.get(str(activations).replace("torch.", ""))
    if act is None:
        raise QuantizeError(
            "quantize.activations",
            "int8 activations must be bfloat16 or float32, not {activations!r}.",
            activations=activations,
        )
    device = next(model.parameters()).device
    if device.type != "cpu":
        raise QuantizeError(
            "quantize.cpu_only", "int8 weights run on the CPU only; this model is on {device}.", device=device
        )
    linears = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise QuantizeError("quantize.no_linear", "This model has no linear layers to quantize.")
    emb = getattr(model, "tok_emb", None)
    matrices = {id(m.weight) for _, m in linears} | ({id(emb.weight)} if isinstance(emb, nn.Embedding) else set())
    with torch.no_grad():  # what stays floating point (position embedding, norms, biases), in place:
        for t in list(model.parameters()) + list(model.buffers()):  # model.to() would re-time float layouts
            if id(t) not in matrices and t.is_floating_point():
                t.data = t.data.to(act)
    shapes = collections.Counter(tuple(m.weight.shape) for _, m in linears)
    done: dict[int, tuple[nn.Parameter, torch.Tensor]] = {}  # id(float weight) -> its int8 form (ties)
    if isinstance(emb, nn.Embedding):
        done[id(emb.weight)] = _quantized(emb.weight, act)
        model.tok_emb = Int8Embedding(*done[id(emb.weight)])
    for name, linear in linears:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        if id(linear.weight) not in done:
            done[id(linear.weight)] = _quantized(linear.weight, act)
        q = Int8Linear(*done[id(linear.weight)], linear.bias, dynamic=dynamic)
        q.kernel = int8_kernel(tuple(q.weight.shape), act, shapes[tuple(q.weight.shape)], dynamic).winner
        setattr(parent, child, q)
    return model.eval()


def int8_bytes(model: nn.Module, activations: torch.dtype = torch.bfloat16) -> int:
    """What ``quantize_int8(model)`` will hold, computed from the model's own tensors: each weight
    matrix (and the token embedding) one byte an entry plus a scale per row, everything else in
    the activations' dtype. Tied tensors once. For an int8 model, its measured size."""
    if is_int8(model):
        return model_bytes(model)
    act = torch.empty((), dtype=activations).element_size()
    matrices = {
        id(m.weight)
        for m in model.modules()
        if isinstance(m, (nn.Linear, nn.Embedding)) and m is not getattr(model, "pos_emb", None)
    }
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) in seen:
            continue
        seen.add(id(t))
        total += t.numel() + t.size(0) * act if id(t) in matrices else t.numel() * act
    return total


def float_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """An int8 model's state_dict with nn.Linear / nn.Embedding's keys and float values (each
    weight dequantized to the activations' dtype; the scales folded in)."""
    state = {}
    for key, value in model.state_dict().items():
        module_name, _, leaf = key.rpartition(".")
        module = model.get_submodule(module_name) if module_name else model
        if isinstance(module, (Int8Linear, Int8Embedding)):
            if leaf == "scale":
                continue
            if leaf == "weight":
                value = (value.float() * module.scale.float()[:, None]).to(module.scale.dtype)
        state[key] = value
    return state


def model_bytes(model: nn.Module) -> int:
    """Bytes the model holds: every parameter and buffer once (tied tensors counted once)."""
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        if t.data_ptr() in seen:
            continue
        seen.add(t.data_ptr())
        total += t.numel() * t.element_size()
    return total
