"""The measured weight layout, stacked Q/K/V and one-row kernels, applied to a model's instances.

``optimize_for_decode(model)`` (through ``accel.accelerate``) after a model is built, loaded or converted.
Decoding one token multiplies every weight matrix by a single row, so its speed is how fast the
weights stream from memory. Which memory order and which kernel stream fastest differs between CPUs,
so playground.runtime.kernels measures them (once per machine and shape); this module applies the
winners by changing instances only (a Linear's forward, an attention's ``project_qkv``): the classes
in ``engine.model`` stay as the textbook writes them, and a model nobody accelerated runs them as is.
"""

from __future__ import annotations

import collections
import copy
import weakref

import torch
import torch.nn as nn
import torch.nn.functional as F

from playground.accel import native_choice
from playground.engine.attention import MultiHeadAttention, MultiHeadAttentionWrapper
from playground.engine.readout import many_row_product
from playground.runtime import decode_decisions, native_gemv, weight_streams


def one_row_linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, threads: int | None) -> torch.Tensor:
    """``F.linear(x, w, b)``; a one-row product on the compiled kernel (native_gemv) when ``threads``
    is not None (0: all of torch's threads) and the kernel handles these tensors."""
    if threads is not None and native_gemv.supports(x, w, b):
        return native_gemv.linear(x, w, b, threads)
    return F.linear(x, w, b)


def _compiled_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return one_row_linear(x, self.weight, self.bias, self.__dict__["compiled_threads"])


class InstanceMethod:
    """``fn`` bound to one module instance, as its own ``forward`` or ``project_qkv``, through a weak reference.

    A bound method (``types.MethodType``) in the instance's ``__dict__`` is a cycle (module -> its dict -> the
    method -> the module): a dropped model then stays in memory, its weights with it, until the cyclic
    collector's next full pass, while the memory budget has stopped counting it (issue 33: a server's RSS
    outgrew its budget by whole models). A copy (``copy.deepcopy``, a trained model's snapshot) binds the copy."""

    __slots__ = ("fn", "ref", "__weakref__")

    def __init__(self, fn, module: nn.Module):
        self.fn = fn
        self.ref = weakref.ref(module)

    def __call__(self, *args, **kwargs):
        return self.fn(self.ref(), *args, **kwargs)  # (alive: the module's own attribute called it)

    def __deepcopy__(self, memo) -> InstanceMethod:
        return InstanceMethod(self.fn, copy.deepcopy(self.module(), memo))

    @property
    def __self__(self) -> nn.Module:  # what a bound method says it is bound to
        return self.module()

    def module(self) -> nn.Module:
        module = self.ref()
        assert module is not None, "called on a module no longer alive"  # its own attribute: it is
        return module

    def __reduce__(self):
        return InstanceMethod, (self.fn, self.module())


def use_compiled_kernel(linear: nn.Linear, threads: int | None) -> None:
    """Route ``linear``'s one-row products to the compiled kernel on ``threads`` (None: back to
    nn.Linear's own forward). Only the instance's forward changes: its class, parameters and
    state_dict stay nn.Linear's, so hooks, the module tree and checkpoints see the same model."""
    linear.compiled_threads = threads  # type: ignore[assignment]  # an instance attribute nn.Linear lacks
    if threads is None:
        linear.__dict__.pop("forward", None)
    else:
        linear.forward = InstanceMethod(_compiled_forward, linear)  # type: ignore[method-assign]


def compiled_kernel_threads(linear: nn.Module) -> int | None:
    """The threads ``linear`` runs its one-row products on in the compiled kernel, None if it does not."""
    return linear.__dict__.get("compiled_threads") if "forward" in linear.__dict__ else None


def is_in_out(w: torch.Tensor) -> bool:
    """Whether an (out, in) weight is stored [in, out] (Hugging Face's Conv1D memory order)."""
    return w.dim() == 2 and w.stride() == (1, w.size(0)) and not w.is_contiguous()


class StackedQKV:
    """W_query, W_key and W_value stacked along the output dimension, (3 * emb_dim, emb_dim) and the biases,
    for one attention: a copy, made again whenever one of them changes (every in-place update bumps a
    tensor's version; ``.to()`` gives new storage), and the threads of its compiled product (None: plain)."""

    def __init__(self, threads: int | None):
        self.threads = threads
        self._key: tuple | None = None
        self._tensors: tuple[torch.Tensor, torch.Tensor | None] | None = None

    def tensors(self, linears) -> tuple[torch.Tensor, torch.Tensor | None]:
        parts = [t for m in linears for t in (m.weight, m.bias) if t is not None]
        key = tuple((t.data_ptr(), t._version, t.dtype) for t in parts)
        if self._tensors is None or self._key != key:
            self._tensors = None  # the stale copy goes before the new one is made: one copy held, never two
            with torch.no_grad():
                weight = torch.cat([m.weight for m in linears])
                bias = torch.cat([m.bias for m in linears]) if linears[0].bias is not None else None
                if is_in_out(linears[0].weight) and self.threads is None:
                    weight = weight.t().contiguous().t()  # the order measured fastest for the plain product
            self._key, self._tensors = key, (weight, bias)
        return self._tensors


def _stacked_project_qkv(self: MultiHeadAttention, x: torch.Tensor, start: int = 0):
    """Q, K and V from one product with the three weights stacked: one kernel instead of three. Training
    (gradients on), or a projection that is no longer an nn.Linear (quantize_int8 swaps them), takes the
    module's own three products. ``start`` (RoPE's first position) changes nothing here: only GPT-2-layout
    models are accelerated (``accel.refuses``)."""
    linears = (self.W_query, self.W_key, self.W_value)
    if torch.is_grad_enabled() or any(type(m) is not nn.Linear for m in linears):
        return type(self).project_qkv(self, x, start)
    stacked: StackedQKV = self.__dict__["stacked_qkv"]
    B, T, _ = x.shape
    qkv = one_row_linear(x, *stacked.tensors(linears), stacked.threads)  # (B, T, 3 * emb_dim)
    q, k, v = qkv.view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)  # 3 x (B, H, T, hd)
    return q, k, v


def set_stacked_qkv(attention: MultiHeadAttention, on: bool, threads: int | None = None) -> None:
    """Whether ``attention`` computes Q, K and V for inference by one stacked product, on ``threads`` of the
    compiled one-row kernel (None: the plain product). Only the instance changes: its class, parameters and
    state_dict stay the textbook module's."""
    if on:
        attention.stacked_qkv = StackedQKV(threads)  # type: ignore[assignment]
        attention.project_qkv = InstanceMethod(_stacked_project_qkv, attention)  # type: ignore[method-assign]
    else:
        attention.__dict__.pop("stacked_qkv", None)
        attention.__dict__.pop("project_qkv", None)


def stacked_qkv_of(attention: nn.Module) -> StackedQKV | None:
    return attention.__dict__.get("stacked_qkv") if "project_qkv" in attention.__dict__ else None


def linears_of(model: nn.Module) -> list[nn.Linear]:
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


def planned_layouts(model: nn.Module, compiled_kernel: bool = True) -> dict[torch.Tensor, tuple[bool, int | None]]:
    """Each weight matrix a decision applies to -> (stored [in, out], the compiled kernel's threads or None),
    from this machine's decisions (measured here if not made yet, unless within ``kernels.decided_only``).
    A model on the meta device stands in for a CPU model not built yet (``accel.copies``). (A native step
    chosen later stores its matrices (out, in) again: the layouts stay what the plain path's decisions, and
    the stacking decision read from them, were measured on.)"""
    decide_kernel = decode_decisions.one_row_kernel if compiled_kernel else lambda *a: None
    params = {id(m.weight): m.weight for m in linears_of(model)}
    shapes = collections.Counter(tuple(w.shape) for w in params.values())
    out: dict[torch.Tensor, tuple[bool, int | None]] = {}
    for w in params.values():
        if w.dim() != 2 or w.device.type not in ("cpu", "meta") or not w.is_floating_point():
            continue  # other devices have their own libraries
        shape, count = tuple(w.shape), shapes[tuple(w.shape)]
        want_in_out = decode_decisions.weight_layout(shape, w.dtype, count).winner == "in_out"
        threads = decode_decisions.compiled_threads(decide_kernel((shape[0], shape[1]), w.dtype, count))
        out[w] = (want_in_out and threads is None, threads)
    return out


def planned_stacking(
    model: nn.Module, compiled_kernel: bool = True
) -> dict[MultiHeadAttention, tuple[bool, int | None]]:
    """Each fused attention -> (whether Q, K and V come from one stacked product, its compiled threads or None),
    decided as ``planned_layouts``' are (call it after the layouts are applied: the decision reads W_query's)."""
    decide_kernel = decode_decisions.one_row_kernel if compiled_kernel else lambda *a: None
    # The fused attention (the per-head one has no W_query of its own and never stacks).
    attention = [
        m
        for m in model.modules()
        if isinstance(m, MultiHeadAttention)
        and not isinstance(m, MultiHeadAttentionWrapper)
        and type(m.W_query) is nn.Linear
    ]
    out: dict[MultiHeadAttention, tuple[bool, int | None]] = {}
    for m in attention:
        w = m.W_query.weight
        stacked = (
            w.device.type in ("cpu", "meta")
            and w.is_floating_point()
            and decode_decisions.stacked_qkv(w.size(1), w.dtype, is_in_out(w), len(attention)).winner == "stacked"
        )
        d = w.size(1)
        threads = (
            decode_decisions.compiled_threads(decide_kernel((3 * d, d), w.dtype, len(attention))) if stacked else None
        )
        out[m] = (stacked, threads)
    return out


def optimize_for_decode(model: nn.Module, compiled_kernel: bool = True) -> nn.Module:
    """Apply this machine's measured decode choices to ``model`` (in place; returned for chaining).

    - Every weight matrix is stored in the memory order its one-row product reads fastest: on one
      CPU float32 ran ~35% faster with W stored [in, out], on another bfloat16 wanted nn.Linear's own
      [out, in]. Only the strides change: shapes, names, values and state_dict keys stay nn.Linear's.
    - Where the compiled one-row kernel (runtime.native_gemv: built here at first use, checked
      against F.linear) measured faster than the plain product for a weight shape, that shape's
      one-row products run on it, with the weight stored [out, in], the order it reads.
    - Q, K and V come from one stacked product where that measured faster.
    - How many weight rows the compiled products read at once (``runtime.weight_streams``), once per machine.
    - The one-row bfloat16 kernel, the readout's many-row product, and the threads of the sampler
      and of one query's attention are decided now, not in a request.
    - Plain generation steps run as one compiled call (accel.native_decode) where that step is
      valid for the model, gives its forward's numbers and measured faster (accel.native_choice).

    Call it again after a dtype or device conversion: the best layout depends on the dtype.
    ``compiled_kernel=False`` keeps every product and step plain (bench's same-run comparison).
    """
    cfg = getattr(model, "cfg", None)
    if cfg is not None and hasattr(cfg, "since_gpt2") and cfg.since_gpt2():
        return model  # every choice here is for GPT-2's layout (accel.refuses): a variant stays plain
    if compiled_kernel:
        weight_streams.weight_streams()  # how the compiled products read their rows: before anything is timed on them
    layouts = planned_layouts(model, compiled_kernel)
    for w, (want_in_out, _) in layouts.items():
        if want_in_out != is_in_out(w):
            with torch.no_grad():
                # (out, in) values over an (in, out) buffer, or back to a plain contiguous buffer
                w.data = w.data.t().contiguous().t() if want_in_out else w.data.contiguous()
    compiled = {id(w): threads for w, (_, threads) in layouts.items()}
    for linear in linears_of(model):
        use_compiled_kernel(linear, compiled.get(id(linear.weight)))
    for m, (stacked, threads) in planned_stacking(model, compiled_kernel).items():
        set_stacked_qkv(m, stacked, threads)
    device = getattr(model, "device", None)
    cfg = getattr(model, "cfg", None)
    if device is not None and device.type == "cpu" and cfg is not None:
        decode_decisions.vocabulary_threads(cfg.vocab_size)  # the sampler reads this decision each step
    head = getattr(model, "out_head", None)
    if head is not None and head.weight.dtype == torch.float32 and head.weight.device.type == "cpu":
        many_row_product(head.weight.detach().t())  # readout's product
    if compiled_kernel:
        native_choice.prepare(model)  # the whole step in one compiled call, where checked and faster
    return model
