"""Whether a model's plain steps run as the native decode step: checked against its torch forward, measured here.

``prepare(model)`` (from ``decode_paths.optimize_for_decode``) checks the step (``native_decode``) against the
torch forward on that model (logits and the keys and values it writes) and measures both on this machine, once
per process and model shape like the kernel choices (``kernels.choose``); a model that failed either keeps the
plain path. A chosen step's team size (all of torch's threads or one) then follows the machine's load
(``runtime.team_under_load``). ``known_step``, ``can_prepare`` and ``check_bytes`` answer what ``prepare``
would do and hold without measuring (``accel.copies``' planning); ``products_alone`` times the step's matrix
products alone (bench).

The step's plan, its run and what it keeps per model (its threads, team sizes and plan) are
``native_decode``'s; ``prepare`` sets them.
"""

from __future__ import annotations

import dataclasses

import torch

from playground.accel import native_decode, step_weights
from playground.engine.kv_cache import KVCache
from playground.runtime import kernels, native_step
from playground.runtime.team_under_load import TeamChoice

CHECK_PROMPT = 8  # tokens the check and the measurement put in their cache before stepping
MEASURE_STEPS = 4  # steps in one timed pass, at most
PASS_BYTES = 256 * 2**20  # weights streamed in one timed pass, about: a large model times one step a pass
CHECK_CAPACITY = CHECK_PROMPT + MEASURE_STEPS + 4
# The step's logits against the torch forward's, largest difference over the largest logit: float32
# only differs in summation order; bfloat16 in where a value rounds one way instead of the other.
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 6e-2}
# The tolerance for float32 activations and int8 weights: int8-dynamic's integer sums are exact, but a LayerNorm
# or attention output a last bit away from torch's can quantize to the next int8 step, and on GPT-2 small's random
# weights such a step moves the logits by up to 2% of the largest (a wrong step moves them by its whole size).
INT8_TOLERANCE = {"int8": 1e-4, "int8-dynamic": 5e-2}


def _small_cache(model) -> KVCache:
    cfg = dataclasses.replace(model.cfg, context_length=min(CHECK_CAPACITY, model.cfg.context_length))
    return KVCache(cfg, 1, model.device, native_decode.activation_dtype(model))


def _prompt(model) -> torch.Tensor:
    n = min(CHECK_PROMPT, model.cfg.context_length - MEASURE_STEPS - 1)
    return (torch.arange(n) * 7919 % model.cfg.vocab_size).view(1, n)


def parity_error(model, rows: dict | None = None) -> str | None:
    """None if the native step gives the torch forward's logits, keys and values (and attention) on
    ``model`` for a step after a short prompt; else what differed. ``rows``: as ``native_decode._plan``'s."""
    plan = native_decode._plan(model, rows)
    cache = _small_cache(model)
    prompt = _prompt(model)
    token = int(prompt[0, -1]) + 1
    with torch.no_grad():
        model(prompt, kv_cache=cache)
        start = cache.length
        want, trace = model(torch.tensor([[token]]), kv_cache=cache, return_attention=True)
        want_k, want_v = cache.k[..., start, :].clone(), cache.v[..., start, :].clone()
        cache.k[..., start, :] = 0
        cache.v[..., start, :] = 0
        cache.length = start
        got, probs = native_decode._run(model, plan, token, cache, 0, True)
    want = want[0, -1].float()
    scale = float(want.abs().max()) + 1e-6
    kind = native_decode.weights_kind(model)
    tol = TOLERANCE[native_decode.activation_dtype(model)] if kind == "float" or plan.bfloat16 else INT8_TOLERANCE[kind]
    for name, a, b in (
        ("logits", got, want),
        ("keys", cache.k[..., start, :].float(), want_k.float()),
        ("values", cache.v[..., start, :].float(), want_v.float()),
    ):
        err = float((a - b).abs().max()) / (scale if name == "logits" else float(b.abs().max()) + 1e-6)
        if not err <= tol:  # also catches NaN
            return f"{name}: relative difference {err:.2e} > {tol:.0e}"
    for i, p in enumerate(probs or []):
        ref = trace.layer(i)[0, :, -1, :]  # (heads, keys)
        if not torch.allclose(p, ref, atol=1e-3 if plan.bfloat16 else 1e-5):
            return f"attention of layer {i} differs"
    return None


def _step_candidates(model, rows: dict) -> kernels.Candidates:
    cache = _small_cache(model)
    prompt = _prompt(model)
    with torch.no_grad():
        model(prompt, kv_cache=cache)
    start = cache.length
    plan = native_decode._plan(model, rows)
    weight_bytes = sum(t.nbytes for t in plan.tensors if t is not None)
    steps = max(1, min(MEASURE_STEPS, PASS_BYTES // max(1, weight_bytes)))

    def plain():
        cache.length = start
        with torch.no_grad():
            for i in range(steps):
                model(torch.tensor([[i]]), kv_cache=cache, last_token_only=True)

    def native(threads: int):
        cache.length = start
        with torch.no_grad():
            for i in range(steps):
                native_decode._run(model, plan, i, cache, threads, False)

    out: kernels.Candidates = {"plain": plain, "native_step": lambda: native(0)}
    if torch.get_num_threads() > 1:
        out["native_step_1_thread"] = lambda: native(1)
    return out


def _decision(model) -> tuple[tuple, str, tuple]:
    """The native step's decision for ``model``'s shape: its key, its words, its label."""
    cfg, dtype, kind = model.cfg, native_decode.activation_dtype(model), native_decode.weights_kind(model)
    name = str(dtype).replace("torch.", "")
    name = name if kind == "float" else kind + ("-bfloat16" if dtype == torch.bfloat16 else "")
    return (
        ("native decode step", cfg.emb_dim, cfg.n_heads, cfg.n_layers, cfg.vocab_size, dtype, kind),
        f"{name} decode step ({cfg.n_layers} blocks, d={cfg.emb_dim})",
        ("step", {"dtype": name, "layers": cfg.n_layers, "d": cfg.emb_dim}),
    )


def can_prepare(model, *, planning: bool = False) -> bool:
    """Whether ``prepare`` has a decision to make for ``model``: the step built here and valid for it, room
    for the check's prompt and steps. (A meta stand-in with ``planning``: the same, for a model not built yet.)"""
    return (
        kernels.measuring_enabled()
        and native_step.available()
        and native_decode.unsupported(model, True, planning=planning) is None
        and model.cfg.context_length >= CHECK_PROMPT + MEASURE_STEPS + 1
    )


def check_bytes(model) -> int:
    """What the step's check holds beside the weights, about: its cache, the logits of its prompt and step
    (the forward's and the step's), and the last 2 MB page of the weights' mapping."""
    cfg = model.cfg
    cache = 2 * cfg.n_layers * cfg.n_heads * min(CHECK_CAPACITY, cfg.context_length) * cfg.head_dim * 4
    return cache + 3 * CHECK_PROMPT * cfg.vocab_size * 4 + 2 * 2**20


def known_step(model, *, planning: bool = False) -> kernels.Choice | None:
    """The native step's decision for ``model``'s shape where it is made already (in this process, or in this
    machine's file that ``kernels.keep_decisions`` reads), else None; never measures. None too where
    ``prepare`` has nothing to decide."""
    if not can_prepare(model, planning=planning):
        return None
    key, decision, label = _decision(model)
    with kernels.decided_only() as skipped:
        choice = kernels.choose(key, decision, dict, label=label)  # a decision not made takes "plain", listed
    return None if skipped else choice


def prepare(model) -> kernels.Choice | None:
    """Decide whether ``model``'s plain generation steps run as the native step: built here, valid
    for this model, equal to its torch forward (checked on this model) and measured faster here (once
    per process and model shape). The plain candidate runs on the weight layout the kernel choices
    gave it; the step reads (out, in) copies of any matrix stored [in, out], which become the weights
    if it wins, all then moved onto 2 MB pages (``step_weights``). A decision made before (this process,
    this machine's file) copies nothing beside the model: "plain" leaves it as it is; the step stores each
    matrix (out, in) in place, one at a time, before its check. Returns the decision, None when there was
    nothing to decide."""
    native_decode.forget(model)
    if not can_prepare(model):
        return None
    key, decision, label = _decision(model)
    strided = [t for t in native_decode._tensors(model) if t is not None and not t.is_contiguous()]
    known = known_step(model)
    if known is None and kernels.deciding_only():  # a user's request: plain, listed for a later measurement
        return kernels.choose(key, decision, dict, label=label)
    if known is not None and known.winner == "plain":
        return known  # nothing to check or copy
    if known is not None:  # decided for the step: its matrices stored (out, in) in place, one at a time
        step_weights.to_rows(strided)
        if parity_error(model) is not None:
            step_weights.to_columns(strided)
            return None
        choice, rows = known, {}
    else:  # measured now: the plain candidate on its own layout, the step on (out, in) copies beside it
        if sum(t.nbytes for t in strided) > step_weights.MAX_COPY_BYTES:
            return None
        rows = step_weights.row_copies(native_decode._tensors(model))
        if parity_error(model, rows) is not None:
            return None
        choice = kernels.choose(key, decision, lambda: _step_candidates(model, rows), label=label)
    if choice.winner != "plain":
        step_weights.store(native_decode._tensors(model), rows)
        native_decode._THREADS[model] = 1 if choice.winner == "native_step_1_thread" else 0
        native_decode.plan_now(model)
        if torch.get_num_threads() > 1:  # the team size follows the load from here (runtime.team_under_load)
            native_decode._TEAMS[model] = TeamChoice(native_decode._THREADS[model])
    return choice


def products_alone(model):
    """A function running only the matrix products of ``model``'s native step, in the step's own
    parallel region with its split and barriers (no norms, attention, activations or cache writes):
    a step's time minus this one's is its time outside the products. None if the step is not chosen."""
    plan = native_decode._current_plan(model) if native_decode.uses_native_step(model) else None
    if plan is None:
        return None
    cache = _small_cache(model)
    dims = native_step.dims_array([*plan.dims[:6], cache.capacity, 0, 0, plan.dims[9], 1, *plan.dims[11:]])
    logits = torch.empty(model.cfg.vocab_size)
    team = native_decode.team_choice(model)

    def run():  # on the team size the steps use now
        n = (team.current if team is not None else native_decode._THREADS.get(model, 0)) or torch.get_num_threads()
        args = (plan.addresses, dims, plan.eps, cache.k.data_ptr(), cache.v.data_ptr(), logits.data_ptr(), None, n)
        native_step.run(plan.bfloat16, *args)

    return run
