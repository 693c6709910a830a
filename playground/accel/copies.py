"""What ``accelerate`` copies beside a model's weights, read before it is built: its peak and what it keeps.

The memory budget reserves a build before any weight exists, so what acceleration will copy is read
from this machine's decisions for the model's shape, on a stand-in of it on the meta device (shapes, no
memory), never timed. With the decisions made (this process, or this machine's file):

- a weight matrix whose layout changes, and each matrix moved onto the native step's 2 MB pages, is
  copied one at a time, its old storage freed before the next: one matrix more, at the moment of the copy;
- stacked Q/K/V keeps a (3d, d) copy of W_query, W_key and W_value beside them in every fused attention,
  for as long as the model lives (``resident``);
- the native step of a float32 model keeps its output head packed in tiles (``accel.packed_head``), and its
  check holds one more while it runs.

A decision not made yet takes its plain path in a server's build (nothing copied, measured later in the
background); a build that measures in the call (a script, the bench, a background measurement) holds the
measurement's test matrices, and the native step's check holds an (out, in) copy of every matrix stored
[in, out] while it is timed: reserved as if every matrix the step reads were.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from playground.accel import native_choice, native_decode, packed_head, step_weights
from playground.accel.decode_paths import is_in_out, planned_layouts, planned_stacking, stacked_qkv_of
from playground.engine.attention import MultiHeadAttention
from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.runtime import decode_decisions, kernels


@dataclass(frozen=True)
class Copies:
    """Bytes beside a model's own weights: at the peak of ``accelerate`` (``resident`` included), and kept after it."""

    peak: int = 0
    resident: int = 0


def stacked_bytes(attention: MultiHeadAttention) -> int:
    """The stacked Q/K/V copy of one attention: its three weights and biases, in their dtype."""
    linears: list[nn.Linear] = [attention.W_query, attention.W_key, attention.W_value]
    parts = [t for m in linears for t in (m.weight, m.bias) if t is not None]
    return sum(t.numel() * t.element_size() for t in parts)


def head_bytes(model: nn.Module) -> int:
    """The native step's packed output head (``accel.packed_head``) where the step reads one: a float32 model
    whose step is chosen."""
    if not isinstance(model, GPTModel) or not native_decode.uses_native_step(model):
        return 0
    return packed_head.packed_head_bytes(model.cfg) if native_decode.packs_head(model) else 0


def held_bytes(model: nn.Module) -> int:
    """What an accelerated model keeps beside its parameters: every stacked Q/K/V copy, made at its first
    forward, and the native step's packed head, made when the step is chosen (each counted from the moment it
    is planned, so a model's size in the budget does not grow later)."""
    stacked = sum(
        stacked_bytes(m) for m in model.modules() if isinstance(m, MultiHeadAttention) and stacked_qkv_of(m) is not None
    )
    return stacked + head_bytes(model)


def plan(model: nn.Module, *, measure: bool, compiled_kernel: bool = True) -> Copies:
    """What ``optimize_for_decode(model)`` would copy, on ``model`` (a meta stand-in, changed as the real one
    would be), from the decisions made; ``measure``: whether the build measures what is not decided yet."""
    with kernels.decided_only() as skipped:
        layouts = planned_layouts(model, compiled_kernel)
        moved = [w for w, (in_out, _) in layouts.items() if in_out != is_in_out(w)]
        with torch.no_grad():
            for w in moved:  # the meta stand-in takes the layout: the stacking decision reads W_query's
                w.data = w.data.t().contiguous().t() if not is_in_out(w) else w.data.contiguous()
        stacking = planned_stacking(model, compiled_kernel)
        choice = native_choice.known_step(model, planning=True) if compiled_kernel else None
        step = choice is not None and choice.winner != "plain"
        if compiled_kernel and choice is None and native_choice.can_prepare(model, planning=True):
            skipped.append("native decode step")  # (asked in a decided_only of its own)
    one = max((w.nbytes for w in moved), default=0)  # each layout copy in turn
    resident = sum(stacked_bytes(m) for m, (on, _) in stacking.items() if on)
    tensors = native_decode.step_tensors(model)
    # The packed head a float32 model's chosen step reads, kept: made after the check (which holds one of its
    # own) and after the matrices moved, so at the peak it stands in for the largest matrix's copy.
    head = packed_head.packed_head_bytes(model.cfg) if native_decode.packs_head(model) else 0
    if step:  # each matrix (out, in) in place, then onto 2 MB pages, one at a time, and the step's check
        one = max(one, max((t.nbytes for t in tensors), default=0), head) + native_choice.check_bytes(model)
    peak = resident + one
    resident += head if step else 0
    if skipped and measure and compiled_kernel:  # measured in the build: as if nothing were decided
        matrices = sum(w.nbytes for w in layouts)  # the weight matrices, each once (a tied one too)
        rows = min(matrices, step_weights.MAX_COPY_BYTES) if native_choice.can_prepare(model, planning=True) else 0
        attention = sum(stacked_bytes(m) for m in stacking)
        largest = max((t.nbytes for t in tensors), default=0)
        check = native_choice.check_bytes(model) + head  # the check's packed head, then the timed step's
        peak = attention + rows + max(largest, 2 * decode_decisions.WORKING_SET_BYTES) + check
        resident = attention + head
    return Copies(peak, resident)


def copy_plan(cfg: GPTConfig, dtype: torch.dtype, *, measure: bool) -> Copies:
    """What ``accelerate`` will copy beside a ``cfg`` model built in ``dtype`` on this machine's CPU; nothing
    where the model stays plain (acceleration off, a switch since GPT-2, a dtype it does not take)."""
    from playground.accel import DECODE_THREADS, enabled  # (the package imports this module)
    from playground.runtime.threads import torch_threads

    if not enabled() or cfg.since_gpt2() or dtype not in (torch.float32, torch.bfloat16):
        return Copies()
    with torch.device("meta"):
        model = GPTModel(cfg).to(dtype).eval()
    with torch_threads(DECODE_THREADS):  # decisions are kept per thread count: the decode loop's
        return plan(model, measure=measure)
