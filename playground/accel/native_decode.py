"""The native decode step: a plain generation step in one compiled call, where valid, checked and faster.

``runtime.native_step`` runs a whole GPT-2 token in compiled code; this module owns what that needs
to know about the model: which tensors it reads (the modules' own parameters, in place, and for float32
weights the output head's packed copy, ``accel.packed_head``, packed again when the head changes in place),
when it computes what the torch forward would (float32 or bfloat16 weights stored (out, in), or
engine.quantize's int8 (float32 or bfloat16 activations) and int8-dynamic (float32),
pre-norm fused attention, GELU tanh or ReLU, no torch hooks, not training, batch 1, one new token),
and the step itself: one row (``decode_step``) or many rows reading every weight once (``decode_rows``).
Whether a model uses it is ``native_choice.prepare``'s decision (from ``decode_paths.optimize_for_decode``):
the step checked against the torch forward on that model and measured against it on this machine. A
model that failed either keeps the plain path; so does any step that is not valid (an interventions'
forward passes ``hooks`` and never comes here).

A chosen step's team size (all of torch's threads or one) then follows the machine's load
(``runtime.team_under_load``): the step's barriers stall on a core another process has taken.

The step writes into the project's ``KVCache`` tensors at the position the torch forward would, so a
generation can switch between the two paths at any step.
"""

from __future__ import annotations

import ctypes
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn as nn

from playground.accel import step_weights
from playground.accel.module_watch import ModelWatch, has_hooks
from playground.accel.packed_head import packed_head
from playground.engine.decoding import Row, RowResult
from playground.engine.kv_cache import KVCache
from playground.runtime import native_gemv, native_step
from playground.runtime.machine_memory import trim
from playground.runtime.team_under_load import TeamChoice

ACTIVATIONS = {"gelu_tanh": 0, "relu": 1}
# The weights' storage, as decode_step.cpp numbers it
WEIGHTS = {"float": 0, "int8": 1, "int8-dynamic": 2}


@dataclass
class Plan:
    """What one model's step reads: its tensors (kept alive here), their addresses, its dimensions."""

    tensors: list[torch.Tensor | None]
    addresses: ctypes.Array
    key: tuple  # the tensors' addresses when the plan was made: a converted model makes a new plan
    watch: ModelWatch  # the model's modules, whose torch hooks would make the step invalid, and when last walked
    dims: list[int]
    eps: float
    bfloat16: bool
    head_version: int | None = None  # the head weight's version counter when it was packed (None: not packed)

    def head_current(self, model) -> bool:
        """Whether the packed head still holds the head's values: an in-place change to the weight (an
        optimizer's step, ``copy_`` under ``no_grad``) counts up its version and the head is packed again."""
        return self.head_version is None or model.out_head.weight._version == self.head_version


WHOLE_TEAM_ROWS = 4  # calls of at least this many rows start on every thread (_team)
_THREADS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> the step's threads (0: all)
_TEAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> TeamChoice, where native_choice chose
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> Plan
_ROW_TEAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {rows in a call: TeamChoice}


def _block_tensors(block) -> list[torch.Tensor | None]:
    att, ff = block.att, block.ff.layers
    return [
        block.norm1.scale,
        block.norm1.shift,
        *(t for m in (att.W_query, att.W_key, att.W_value, att.out_proj) for t in (m.weight, m.bias)),
        block.norm2.scale,
        block.norm2.shift,
        *(t for m in (ff[0], ff[2]) for t in (m.weight, m.bias)),
    ]


def _tensors(model) -> list[torch.Tensor | None]:
    pos = model.pos_emb.weight if model.cfg.pos_encoding == "learned" else model.pos_emb.table
    out = [model.tok_emb.weight, pos]
    for block in model.trf_blocks:
        out += _block_tensors(block)
    return out + [model.final_norm.scale, model.final_norm.shift, model.out_head.weight]


def step_tensors(model) -> list[torch.Tensor]:
    """The model's own tensors the step reads (a tied weight once per use), or none where it has no such layout."""
    return [t for t in _tensors(model) if t is not None] if hasattr(model, "trf_blocks") else []


def _matrices(model) -> list[nn.Module]:
    """Every block's Q, K, V, out_proj and two MLP layers in turn, then the output head."""
    out = []
    for b in model.trf_blocks:
        out += [b.att.W_query, b.att.W_key, b.att.W_value, b.att.out_proj, b.ff.layers[0], b.ff.layers[2]]
    return out + [model.out_head]


def weights_kind(model) -> str:
    """How ``model``'s weight matrices are stored: "float" (as its activations), "int8" (quantize.Int8Linear,
    weight-only) or "int8-dynamic" (activations quantized per product too); "mixed" for anything else."""
    layers = _matrices(model)
    if all(type(m) is nn.Linear for m in layers) and isinstance(model.tok_emb, nn.Embedding):
        return "float"
    # quantize.Int8Linear and Int8Embedding by what they hold: the engine's quantize imports decode_paths, which imports this
    dynamic = {getattr(m, "dynamic", None) for m in layers}
    int8 = all(m.weight.dtype == torch.int8 and isinstance(getattr(m, "scale", None), torch.Tensor) for m in layers)
    emb = model.tok_emb
    if not int8 or len(dynamic) != 1 or emb.weight.dtype != torch.int8 or not hasattr(emb, "scale"):
        return "mixed"
    return "int8-dynamic" if dynamic == {True} else "int8"


def activation_dtype(model) -> torch.dtype:
    """The dtype the model's activations and KV cache are in (an int8 model's: its scales')."""
    emb = model.tok_emb
    return emb.scale.dtype if emb.weight.dtype == torch.int8 else emb.weight.dtype


def _int8_tensors(model) -> list[torch.Tensor | None]:
    """What decode_step.cpp reads after the float tensors of an int8 model: each matrix's scales and row sums
    (Σ_k q[row, k], computed here for int8-dynamic), then the token embedding's scales."""
    dynamic = weights_kind(model) == "int8-dynamic"
    out: list[torch.Tensor | None] = []
    for m in _matrices(model):
        q = cast(torch.Tensor, m.weight)
        out += [cast(torch.Tensor, m.scale), q.sum(dim=1, dtype=torch.int32) if dynamic else None]
    return out + [model.tok_emb.scale]


def unsupported(model, any_layout: bool = False, *, planning: bool = False) -> str | None:
    """Why ``model``'s plain decode step cannot run as the native step, or None if it can.
    ``any_layout``: a weight matrix stored [in, out] does not count (``native_choice.prepare`` can store it
    (out, in)).
    ``planning``: ``model`` is a stand-in on the meta device for a CPU model not built yet (``accel.copies``)."""
    devices = ("cpu", "meta") if planning else ("cpu",)
    cfg = getattr(model, "cfg", None)
    if cfg is None or not hasattr(model, "trf_blocks"):
        return "not a GPTModel"
    if cfg.since_gpt2():
        return "a switch since GPT-2: " + ", ".join(cfg.since_gpt2())  # the step computes GPT-2's layout only
    if cfg.norm_placement != "pre" or cfg.attention_impl != "fused" or cfg.activation not in ACTIVATIONS:
        return "architecture"
    dtype = activation_dtype(model)
    if dtype not in (torch.float32, torch.bfloat16) or model.device.type not in devices:
        return "dtype or device"
    if has_hooks(model.modules()):
        return "torch hooks"
    kind = weights_kind(model)
    if kind == "mixed" or model.out_head.bias is not None:
        return "layers other than nn.Linear or int8"
    if kind == "int8-dynamic" and dtype != torch.float32:
        return "int8-dynamic with bfloat16 activations"  # the compiled int8 dot product takes float32 rows only
    if kind == "int8-dynamic" and not native_gemv.int8_dot_ready():
        return "int8-dynamic without the int8 dot product"
    norms = [n for b in model.trf_blocks for n in (b.norm1, b.norm2)] + [model.final_norm]
    if any(getattr(n, "eps", None) != cfg.ln_eps for n in norms):
        return "LayerNorm"
    matrices = {id(m.weight) for m in _matrices(model)} | {id(model.tok_emb.weight)} if kind != "float" else set()
    scales = [m.scale for m in [*_matrices(model), model.tok_emb]] if kind != "float" else []
    for t in _tensors(model) + scales:
        in_order = t is None or t.is_contiguous() or (any_layout and t.dim() == 2)
        want = torch.int8 if id(t) in matrices else dtype
        if t is not None and (t.dtype != want or not in_order or t.device.type not in devices):
            return "a tensor in another dtype or memory order"
    return None


def packs_head(model) -> bool:
    """Whether ``model``'s step reads its output head from a packed copy (``accel.packed_head``): float32 weights."""
    return weights_kind(model) == "float" and activation_dtype(model) == torch.float32


def _plan(model, rows: dict | None = None) -> Plan:
    """The step's plan for ``model``; ``rows`` maps id(weight) to an (out, in) copy to read instead."""
    cfg = model.cfg
    kind = weights_kind(model)
    tensors = [(rows or {}).get(id(t), t) for t in _tensors(model)]
    tensors += _int8_tensors(model) if kind != "float" else []
    head_version = None
    if packs_head(model):  # after the head's weight, where an int8 model's scales would start
        head = model.out_head.weight
        head_version = head._version
        tensors.append(packed_head((rows or {}).get(id(head), head)))
    addresses = [t.data_ptr() if t is not None else 0 for t in tensors]
    dims = [cfg.emb_dim, cfg.n_heads, cfg.head_dim, cfg.n_layers, cfg.vocab_size, 4 * cfg.emb_dim]
    dims += [0, 0, 0, ACTIVATIONS[cfg.activation], 0, WEIGHTS[kind]]  # capacity, position and token: set at each step
    dims.append(int(head_version is not None))
    bf16 = activation_dtype(model) == torch.bfloat16
    addressed = native_step.pointer_array(addresses)
    watch = ModelWatch(model, tensors)
    return Plan(tensors, addressed, tuple(addresses), watch, dims, cfg.ln_eps, bf16, head_version)


def _current_plan(model) -> Plan | None:
    """The model's plan, made again when its tensors moved (a conversion); None while the step is not
    valid for the model (training, torch hooks, a layout or dtype it does not read)."""
    if model.training or torch.nn.modules.module._global_forward_hooks:
        return None
    plan = _PLANS.get(model)
    if plan is not None and not plan.head_current(model):
        plan = None  # the head changed in place since it was packed: a new plan packs it again
    if plan is not None and plan.watch.unchanged():  # nothing swapped since the last walk
        return None if plan.watch.hooked() else plan
    # the model's own tensors now, not the plan's (which it keeps alive): a module replaced in place (quantize_int8)
    # has tensors at other addresses; the int8 scales and row sums after them belong to the same modules
    if plan is not None and all((t.data_ptr() if t is not None else 0) == a for t, a in zip(_tensors(model), plan.key)):
        plan.watch.mark()
        return None if plan.watch.hooked() else plan
    if unsupported(model) is not None:
        _PLANS.pop(model, None)
        return None
    plan = _PLANS[model] = _plan(model)
    return plan


def _run(model, plan: Plan, token: int, cache: KVCache, threads: int, attention: bool):
    """One token through the compiled step; its logits (vocab,) float32 and each layer's (heads, keys)
    attention probabilities if asked."""
    position = cache.length
    dims = list(plan.dims)
    dims[6], dims[7], dims[8] = cache.capacity, position, token
    logits = torch.empty(model.cfg.vocab_size)
    probs = torch.empty(model.cfg.n_layers, model.cfg.n_heads, position + 1) if attention else None
    native_step.run(
        plan.bfloat16,
        plan.addresses,
        native_step.dims_array(dims),
        plan.eps,
        cache.k.data_ptr(),
        cache.v.data_ptr(),
        logits.data_ptr(),
        probs.data_ptr() if probs is not None else None,
        threads or torch.get_num_threads(),
    )
    cache.length += 1
    return logits, (list(probs.unbind(0)) if probs is not None else None)


def cache_fits(model, cache: KVCache | None, n_tokens: int = 1) -> bool:
    """Whether ``cache`` is one the step can append ``n_tokens`` to: this model's shape, batch 1, contiguous,
    room left."""
    cfg = model.cfg
    return (
        cache is not None
        and cache.k.dtype == cache.v.dtype == activation_dtype(model)
        and tuple(cache.k.shape) == tuple(cache.v.shape) == (cfg.n_layers, 1, cfg.n_heads, cache.capacity, cfg.head_dim)
        and cache.k.is_contiguous()
        and cache.v.is_contiguous()
        and cache.length + n_tokens <= cache.capacity
        and cache.length + n_tokens <= model.cfg.context_length
    )


def decode_step(model, new_ids: list[int], cache: KVCache | None, attention: bool = False):
    """(logits (vocab,) float32, per-layer (heads, keys) attention or None) for one new token on the
    native step, or None when this model and step take the plain path (not chosen for the model,
    not valid now, more than one new token)."""
    if len(new_ids) != 1 or cache is None:
        return None
    return decode_rows(model, [Row(int(new_ids[0]), cache, attention)])[0]


def decode_rows(model, rows: Sequence[Row]) -> list[RowResult | None]:
    """Each row's ``decode_step`` (its token continuing its own cache), the rows the step can take in one
    compiled call that reads every weight once for all of them; None for a row it cannot take (its cache
    does not fit, a token outside the vocabulary, a cache already in this call) and for every row while the
    step is not chosen or not valid for the model. A row's numbers are those it gets alone, whatever rows
    are beside it and whatever the team size. int8 and int8-dynamic models are batched too (int8-dynamic
    reads each weight block once for all rows but multiplies it by one row at a time). Gradients on: every
    row None, as for ``decode_step`` (a server calls it under ``torch.no_grad``, as ``Generation`` does)."""
    out: list[RowResult | None] = [None] * len(rows)
    threads = _THREADS.get(model)
    if threads is None or torch.is_grad_enabled():
        return out
    plan = _current_plan(model)
    if plan is None:
        return out
    take, seen = [], set()
    vocab = model.cfg.vocab_size
    for i, row in enumerate(rows):
        fits = cache_fits(model, row.cache, row.n_tokens) and id(row.cache) not in seen
        if fits and all(0 <= int(t) < vocab for t in (*row.before, row.token)):
            seen.add(id(row.cache))
            take.append(i)
    if not take:
        return out
    team = _team(model, len(take))
    size = threads if team is None else team.next_size()  # now and then the other size: the load may have changed
    start = time.perf_counter()
    if len(take) == 1 and not rows[take[0]].before:
        row = rows[take[0]]
        out[take[0]] = _run(model, plan, int(row.token), row.cache, size, row.capture)
    else:
        for i, result in zip(take, _run_rows(model, plan, [rows[i] for i in take], size)):
            out[i] = result
    if team is not None:
        team.record(size, time.perf_counter() - start)
    return out


def _team(model, n_rows: int) -> TeamChoice | None:
    """The team-size choice for calls of ``n_rows`` rows (a call's time grows with its rows, so each count
    keeps its own), starting from the one native_choice.prepare measured; None where the team size is fixed."""
    first = _TEAMS.get(model)
    if first is None or n_rows == 1:
        return first
    teams = _ROW_TEAMS.setdefault(model, {})
    if n_rows not in teams:
        # Many rows start on the whole team whatever one row's choice: each thread's share of every product
        # is then many rows' work between two barriers, which pays for waking the team (a busy machine still
        # moves them to one thread, below)
        teams[n_rows] = TeamChoice(first.sizes[0] if n_rows >= WHOLE_TEAM_ROWS else first.current)
    return teams[n_rows]


def _run_rows(model, plan: Plan, rows: list[Row], threads: int) -> list[RowResult]:
    """Several tokens through one compiled step, as ``_run`` runs one."""
    cfg = model.cfg
    made: list = []
    args: list[tuple[int, int, int, int, int, int | None, int | None]] = []
    for row in rows:
        k, v = row.cache.k.data_ptr(), row.cache.v.data_ptr()
        start = row.cache.length
        # a prompt's earlier tokens: their keys and values into the cache, no logits, no attention kept
        for j, token in enumerate(row.before):
            args.append((int(token), start + j, row.cache.capacity, k, v, None, None))
        position = start + len(row.before)
        logits = torch.empty(cfg.vocab_size)
        probs = torch.empty(cfg.n_layers, cfg.n_heads, position + 1) if row.capture else None
        made.append((logits, probs))
        p = probs.data_ptr() if probs is not None else None
        args.append((int(row.token), position, row.cache.capacity, k, v, logits.data_ptr(), p))
    dims = native_step.dims_array(plan.dims)
    native_step.run_rows(plan.bfloat16, plan.addresses, dims, plan.eps, args, threads or torch.get_num_threads())
    for row in rows:
        row.cache.length += row.n_tokens
    return [(logits, list(probs.unbind(0)) if probs is not None else None) for logits, probs in made]


def forget(model) -> None:
    """Drop what was decided and planned for ``model``'s step (its threads, teams and plan), before deciding again."""
    for per_model in (_THREADS, _TEAMS, _ROW_TEAMS, _PLANS):
        per_model.pop(model, None)


def set_native_step(model, threads: int | None) -> bool:
    """Run ``model``'s plain steps as the native step on ``threads`` (0: all of torch's) without
    measuring, or never (None): what tests and bench's same-run comparisons use. Weight matrices
    stored [in, out] are stored (out, in), and all on 2 MB pages (``step_weights``). Returns whether
    the step is available and valid for the model (if not, nothing changes)."""
    _TEAMS.pop(model, None)
    _ROW_TEAMS.pop(model, None)
    if threads is None:
        _THREADS.pop(model, None)
        return True
    if not native_step.available() or unsupported(model, any_layout=True) is not None:
        return False
    tensors = _tensors(model)
    step_weights.store(tensors, step_weights.row_copies(tensors))
    _THREADS[model] = threads
    plan_now(model)
    return True


def plan_now(model) -> None:
    """Make the chosen step's plan now (its packed head too), where the model is built, not at its first token."""
    if unsupported(model) is None:
        if packs_head(model):
            trim()  # the heap the matrices' moves freed goes back to the OS before the head's copy is made
        _PLANS[model] = _plan(model)


def team_choice(model) -> TeamChoice | None:
    """How ``model``'s chosen step picks its team size under the load (None: a fixed one, or no step)."""
    return _TEAMS.get(model)


# The longest prompt fed as rows of the native step (its earlier positions fill the cache in the same call
# as the room's other rows, every weight read once for all); a longer one goes through torch's forward,
# whose matrix products are faster for many rows (docs/benchmarks.md, "prompts as rows").
PROMPT_ROWS = 48


def prompt_rows(model) -> int:
    """The longest prompt ``model``'s generations hand the decoder as one row: PROMPT_ROWS where the native
    step is chosen for the model, else 0 (a prompt runs alone, through the forward)."""
    return PROMPT_ROWS if uses_native_step(model) and _current_plan(model) is not None else 0


def uses_native_step(model) -> bool:
    """Whether ``native_choice.prepare`` chose the native step for ``model`` (its steps take it while valid)."""
    return _THREADS.get(model) is not None
