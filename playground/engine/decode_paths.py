"""Decode speed, applied explicitly: the measured weight layout, stacked Q/K/V and one-row kernels.

Decode speed, applied explicitly: ``optimize_for_decode(model)`` after a model is built, loaded or
converted (the server's recipes do it for every model they build).

Decoding one token multiplies every weight matrix by a single row, so its speed is how fast the
weights stream from memory. Which memory order and which kernel stream fastest differs between CPUs,
so playground.runtime.kernels measures them (once per process and shape); this module applies the
winners. A model nobody optimized computes the same numbers on the plain path, and nothing here
runs inside a forward pass except the one-row bfloat16 switch, which uses a decision only once one
was made.
"""

from __future__ import annotations

import collections
import contextlib
import platform
import threading
import types
from typing import Protocol, runtime_checkable

import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.engine import native_decode
from playground.engine.readout import many_row_product
from playground.runtime import kernels, native_gemv


@runtime_checkable
class StacksQKV(Protocol):
    """An attention whose Q/K/V can come from one stacked product (attention.MultiHeadAttention)."""

    W_query: nn.Linear

    def set_stacked_qkv(self, on: bool, compiled_threads: int | None = None) -> None: ...


X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def one_row_bfloat16_kernel() -> str:
    """The kernel one-row bfloat16 products use: the measured winner once ``optimize_for_decode``
    decided it (on this thread count), else oneDNN, PyTorch's default. Never measures."""
    choice = kernels.one_row_bfloat16_decided()
    return choice.winner if choice is not None else "onednn"


class _OneRowBfloat16Switch:
    """Decoding multiplies every weight by one row. For that shape PyTorch sends bfloat16 matmuls
    to oneDNN, which on CPUs with AVX512-BF16 runs at about half the speed of ATen's own
    matrix-vector kernel (bench/ measures both; tests/test_speed_paths.py checks they agree).
    ATen's kernel is only used while oneDNN is switched off -- a process-wide flag -- so one-row
    bfloat16 forwards switch it off and any larger forward (a prompt, a training batch) switches it
    back on for its duration, counted under a lock so that threads never leave it in the wrong
    state. A bfloat16 backward pass in another thread during a decode step may take the slow path:
    the speed changes, the results do not beyond bfloat16 rounding.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._one_row = 0  # forwards in flight that want oneDNN off
        self._larger = 0  # forwards in flight that need it on
        self._user_setting = True  # torch.backends.mkldnn.enabled before we touched it

    @contextlib.contextmanager
    def __call__(self, dtype: torch.dtype, device: torch.device, rows: int):
        if dtype != torch.bfloat16 or device.type != "cpu" or one_row_bfloat16_kernel() != "aten":
            yield
            return
        one_row = rows == 1
        with self._lock:
            if self._one_row == 0 and self._larger == 0:
                self._user_setting = bool(torch.backends.mkldnn.enabled)
            self._count(one_row, +1)
        try:
            yield
        finally:
            with self._lock:
                self._count(one_row, -1)

    def _count(self, one_row: bool, delta: int) -> None:
        if one_row:
            self._one_row += delta
        else:
            self._larger += delta
        off = self._one_row > 0 and self._larger == 0
        torch.backends.mkldnn.enabled = self._user_setting and not off  # type: ignore[assignment]  # a flag behind a descriptor


one_row_bfloat16_switch = _OneRowBfloat16Switch()


def one_row_linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, threads: int | None) -> torch.Tensor:
    """``F.linear(x, w, b)``; a one-row product on the compiled kernel (native_gemv) when ``threads``
    is not None (0: all of torch's threads) and the kernel handles these tensors."""
    if threads is not None and native_gemv.supports(x, w, b):
        return native_gemv.linear(x, w, b, threads)
    return F.linear(x, w, b)


def _compiled_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return one_row_linear(x, self.weight, self.bias, self.__dict__["compiled_threads"])


def use_compiled_kernel(linear: nn.Linear, threads: int | None) -> None:
    """Route ``linear``'s one-row products to the compiled kernel on ``threads`` (None: back to
    nn.Linear's own forward). Only the instance's forward changes: its class, parameters and
    state_dict stay nn.Linear's, so hooks, the module tree and checkpoints see the same model."""
    linear.compiled_threads = threads  # type: ignore[assignment]  # an instance attribute nn.Linear lacks
    if threads is None:
        linear.__dict__.pop("forward", None)
    else:
        linear.forward = types.MethodType(_compiled_forward, linear)  # type: ignore[method-assign]


def compiled_kernel_threads(linear: nn.Module) -> int | None:
    """The threads ``linear`` runs its one-row products on in the compiled kernel, None if it does not."""
    return linear.__dict__.get("compiled_threads") if "forward" in linear.__dict__ else None


def is_in_out(w: torch.Tensor) -> bool:
    """Whether an (out, in) weight is stored [in, out] (Hugging Face's Conv1D memory order)."""
    return w.dim() == 2 and w.stride() == (1, w.size(0)) and not w.is_contiguous()


def optimize_for_decode(model: nn.Module, compiled_kernel: bool = True) -> nn.Module:
    """Apply this machine's measured decode choices to ``model`` (in place; returned for chaining).

    - Every weight matrix is stored in the memory order its one-row product reads fastest: on one
      CPU float32 ran ~35% faster with W stored [in, out], on another bfloat16 wanted nn.Linear's own
      [out, in]. Only the strides change: shapes, names, values and state_dict keys stay nn.Linear's.
    - Where the compiled one-row kernel (runtime.native_gemv: built here at first use, checked
      against F.linear) measured faster than the plain product for a weight shape, that shape's
      one-row products run on it, with the weight stored [out, in], the order it reads.
    - Q, K and V come from one stacked product where that measured faster.
    - The one-row bfloat16 kernel, the readout's many-row product, and the threads of the sampler
      and of one query's attention are decided now, not in a request.
    - Plain generation steps run as one compiled call (engine.native_decode) where that step is
      valid for the model, gives its forward's numbers and measured faster.

    Call it again after a dtype or device conversion: the best layout depends on the dtype.
    ``compiled_kernel=False`` keeps every product and step plain (bench's same-run comparison).
    """
    decide_kernel = kernels.one_row_kernel if compiled_kernel else lambda *a: None
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    params = {id(m.weight): m.weight for m in linears}
    shapes = collections.Counter(tuple(w.shape) for w in params.values())
    compiled: dict[int, int | None] = {}  # weight id -> threads of the compiled kernel, None: plain
    for w in params.values():
        if w.dim() != 2 or w.device.type != "cpu" or not w.is_floating_point():
            continue  # meta tensors have nothing to time; other devices have their own libraries
        shape, count = tuple(w.shape), shapes[tuple(w.shape)]
        want_in_out = kernels.weight_layout(shape, w.dtype, count).winner == "in_out"
        compiled[id(w)] = kernels.compiled_threads(decide_kernel((shape[0], shape[1]), w.dtype, count))
        want_in_out = want_in_out and compiled[id(w)] is None
        if want_in_out != is_in_out(w):
            with torch.no_grad():
                # (out, in) values over an (in, out) buffer, or back to a plain contiguous buffer
                w.data = w.data.t().contiguous().t() if want_in_out else w.data.contiguous()
    # The fused attention (the per-head one has no W_query of its own and never stacks).
    attention = [m for m in model.modules() if isinstance(m, StacksQKV) and isinstance(m.W_query, nn.Linear)]
    for linear in linears:
        use_compiled_kernel(linear, compiled.get(id(linear.weight)))
    for m in attention:
        w = m.W_query.weight
        stacked = (
            w.device.type == "cpu"
            and w.is_floating_point()
            and kernels.stacked_qkv(w.size(1), w.dtype, is_in_out(w), len(attention)).winner == "stacked"
        )
        d = w.size(1)
        threads = kernels.compiled_threads(decide_kernel((3 * d, d), w.dtype, len(attention))) if stacked else None
        m.set_stacked_qkv(stacked, threads)
    dtype, device = getattr(model, "dtype", None), getattr(model, "device", None)
    if dtype == torch.bfloat16 and device is not None and device.type == "cpu":
        kernels.one_row_bfloat16_kernel()  # the forward's switch reads this decision (an int8 model's too)
    cfg = getattr(model, "cfg", None)
    if device is not None and device.type == "cpu" and cfg is not None:
        kernels.vocabulary_threads(cfg.vocab_size)  # the sampler reads this decision each step
        kernels.one_query_attention_threads(cfg.n_heads, cfg.head_dim)  # attention.attend reads it for one query
    head = getattr(model, "out_head", None)
    if head is not None and head.weight.dtype == torch.float32 and head.weight.device.type == "cpu":
        many_row_product(head.weight.detach().t())  # readout's product
    if compiled_kernel:
        native_decode.prepare(model)  # the whole step in one compiled call, where checked and faster
    return model
