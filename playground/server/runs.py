"""Runs: a prompt, its generated tokens and what the model saw, released when idle.

Runs are registered in ``RUNS`` under a random ``run.id``. ``start_run`` validates what a user typed
and returns ``(run, generation)``. Called with ``replaces=<the session's previous run id, or None>``,
the server keeps the run (the session state then only needs ``run.id``; get it back with
``get_run(run_id)``) and the previous one is released at once. Called without ``replaces``, the run
lives as long as its caller holds it. Either way a run untouched for ``PLAYGROUND_IDLE_MINUTES``
(default 15) is released by a sweeper thread (its tokens and attention are dropped); using it
afterwards raises ``RunReleasedError`` (a ValueError) whose message is for the user.
``run_attention`` / ``layer_attention`` give the queries and keys a run's views draw from.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import os
import threading
import time
import weakref

import numpy as np
import torch

from playground.engine.attention import attention_probs
from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.sampling import Generation, GenerationStep, generate
from playground.engine.tokenizer import load_tokenizer, tokenizer_of
from playground.errors import UserError
from playground.runtime.machine_memory import trim
from playground.runtime.memory import BUDGET
from playground.runtime.reservation import Reservation
from playground.runtime.threads import torch_threads
from playground.server.files import remove_abandoned_uploads
from playground.server.recipes import describe_recipe, model_label
from playground.settings import SamplingSettings

MAX_PROMPT_CHARS = 20_000
MAX_NEW_TOKENS = 512
IDLE_SECONDS = float(os.environ.get("PLAYGROUND_IDLE_MINUTES", "15")) * 60


class RunReleasedError(UserError):
    """The run was released after being idle; the message is written for the user."""


class Run:
    """A prompt, the tokens generated from it, and (cached) what the model saw.

    Runs are registered in ``RUNS`` under ``run.id``; every use of its tokens counts as an access. After
    ``IDLE_SECONDS`` without one, ``release_idle_runs`` drops the tokens and the attention, and any
    later use raises ``RunReleasedError``.
    """

    def __init__(
        self,
        recipe: dict,
        prompt_ids: list[int],
        n_cropped: int,
        settings: dict,
        steps: list[GenerationStep] | None = None,
        stopped: bool = False,
        elapsed: float = 0.0,
    ):
        self.id = hashlib.sha256(os.urandom(16)).hexdigest()[:16]
        self.recipe, self.prompt_ids, self.n_cropped, self.settings = recipe, prompt_ids, n_cropped, settings
        self._steps = [] if steps is None else steps
        self.stopped = stopped
        self.elapsed = elapsed  # seconds spent generating so far
        self._trace_cache: _Trace | None = None
        self.room: Reservation | None = None  # its generation's room while it decodes (start_run)
        # What its ids mean: the model's own tokenizer (a Llama/Qwen3 folder's), else GPT-2's (start_run sets it)
        self.tokenizer = load_tokenizer()
        self.last_access = time.monotonic()
        self.released = False
        with _RUNS_LOCK:
            RUNS[self.id] = self
        _start_sweeper()

    def keep(self) -> Run:
        """Let the server hold this run (until it is released), so a session can keep just its id."""
        with _RUNS_LOCK:
            _KEPT[self.id] = self
        return self

    def touch(self) -> None:
        if self.released:
            raise released_error()
        self.last_access = time.monotonic()

    @property
    def steps(self) -> list[GenerationStep]:
        self.touch()
        return self._steps

    @steps.setter
    def steps(self, value: list[GenerationStep]) -> None:
        self.touch()
        self._steps = value

    @property
    def token_ids(self) -> list[int]:
        return self.prompt_ids + [s.token_id for s in self.steps]

    def window(self, context_length: int) -> tuple[int, list[int]]:
        ids = self.token_ids
        start = max(0, len(ids) - context_length)
        return start, ids[start:]

    def release(self) -> None:
        """Drop the tokens and the attention (the light fields stay, for the message)."""
        self.released = True
        self._steps = []
        self._trace_cache = None
        with _RUNS_LOCK:
            RUNS.pop(self.id, None)
            _KEPT.pop(self.id, None)
            _RELEASED[self.id] = None
            while len(_RELEASED) > 10_000:
                _RELEASED.pop(next(iter(_RELEASED)))

    def __repr__(self) -> str:
        state = "released" if self.released else f"{len(self._steps)} steps"
        return f"Run(id={self.id!r}, {describe_recipe(self.recipe)}, {state})"


class _Trace:
    """A run's per-layer (queries, keys) for its last window: one object, so the budget can count it."""

    def __init__(self, n_tokens: int, start: int, qk: list[tuple]):
        self.n_tokens, self.start, self.qk = n_tokens, start, qk


RUNS: weakref.WeakValueDictionary[str, Run] = weakref.WeakValueDictionary()  # every live run, for the sweeper
_KEPT: dict[str, Run] = {}  # runs the server holds for sessions that keep only the id
_RELEASED: dict[str, None] = {}  # ids of released runs (the newest 10,000), for the message
_RUNS_LOCK = threading.Lock()


def released_error() -> RunReleasedError:
    minutes = IDLE_SECONDS / 60
    return RunReleasedError(
        "run.released",
        "This run was released after {minutes:g} minute{plural} idle to free memory; generate again.",
        minutes=minutes,
        plural="" if minutes == 1 else "s",
    )


_SWEEPER: threading.Thread | None = None


def get_run(run_id: str | None) -> Run:
    """The run a session's state names; RunReleasedError if it was released or is unknown."""
    with _RUNS_LOCK:
        run = RUNS.get(run_id or "")
    if run is None:
        if not run_id:
            raise UserError("generate.no_run", "Generate first: there is no run yet.")
        if run_id in _RELEASED:
            raise released_error()
        raise RunReleasedError("run.restarted", "This run is no longer on the server (it restarted); generate again.")
    run.touch()
    return run


def release_idle_runs(idle_seconds: float | None = None) -> int:
    """Release every run untouched for ``idle_seconds`` (default ``IDLE_SECONDS``); how many."""
    limit = IDLE_SECONDS if idle_seconds is None else idle_seconds
    now = time.monotonic()
    with _RUNS_LOCK:
        idle = [r for r in list(RUNS.values()) if now - r.last_access > limit]
    for run in idle:
        run.release()
    if idle:
        gc.collect()
        trim()
    return len(idle)


def _sweep_forever() -> None:
    while True:
        time.sleep(max(1.0, min(60.0, IDLE_SECONDS / 4)))
        try:
            release_idle_runs()
            remove_abandoned_uploads()
        except Exception:  # never let the sweeper die; the next round tries again
            pass


def _start_sweeper() -> None:
    global _SWEEPER
    if _SWEEPER is None:
        with _RUNS_LOCK:
            if _SWEEPER is None:
                _SWEEPER = threading.Thread(target=_sweep_forever, name="run-sweeper", daemon=True)
                _SWEEPER.start()


_NOT_GIVEN = object()


def start_run(
    model: GPTModel,
    recipe: dict,
    prompt: str,
    sampling: SamplingSettings | None = None,
    *,
    max_new_tokens=None,
    temperature=1.0,
    top_k=None,
    top_p=None,
    seed=None,
    greedy=False,
    replaces=_NOT_GIVEN,
) -> tuple[Run, Generation]:
    """Validate everything a user typed, then return the run and its (not yet started) generation.

    ``sampling``: the settings the page parsed (``SamplingSettings.parse``); without it the keyword
    arguments are parsed here as a program's (numbers only, each refused by its name).

    ``replaces`` (the session's previous run or run id, or None for its first): the server keeps
    the new run under ``run.id`` and releases the previous one now rather than after the idle
    timeout. Without it, whoever holds the returned Run keeps it alive. The generation's room
    (``generation_room``: its KV cache and the forward of its prompt, at the size this run asked for)
    is taken here, refused if it does not fit, and given back when the generation object is gone;
    ``run.room`` is that ``Reservation`` (a decoder that ends the run earlier may ``release()`` it)."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise UserError("generate.prompt_empty_ui", "The prompt is empty: type some text for the model to continue.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise UserError(
            "generate.prompt_too_long",
            "The prompt is {n:,} characters; the limit is {limit:,}.",
            n=len(prompt),
            limit=MAX_PROMPT_CHARS,
        )
    if sampling is None:
        sampling = SamplingSettings.parse(
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
            greedy=greedy,
            text=False,
        )
    elif greedy:
        sampling = dataclasses.replace(sampling, temperature=0.0)
    if sampling.max_new_tokens is None:
        raise UserError("generate.max_new_none", "The number of new tokens must be a whole number, got None.")
    max_new_tokens = sampling.max_new_tokens
    if max_new_tokens > MAX_NEW_TOKENS:
        raise UserError(
            "generate.max_new_cap",
            "Max new tokens is {max_new_tokens:,}; this app generates at most {limit} per run.",
            max_new_tokens=max_new_tokens,
            limit=MAX_NEW_TOKENS,
        )
    if replaces is not _NOT_GIVEN and replaces is not None:
        old = replaces if isinstance(replaces, Run) else RUNS.get(replaces)
        if old is not None:
            old.release()
    tok = tokenizer_of(model)  # a checkpoint folder's own tokenizer, else GPT-2's
    ids = tok.encode(prompt)
    # The room is taken now and given back when the generation ends (its iterator is gone); a
    # session's lease holds none between runs.
    room = generation_room(model, model_label(recipe), len(ids), max_new_tokens)
    try:
        # The KV cache is zeroed by this thread alone: its first parallel torch operation would start OpenMP
        # workers of its own for a fill of a millisecond or less, thirty handlers at once when a room presses
        # Generate, beside the decode loop's team on the same cores (docs/benchmarks.md).
        with torch_threads(1):
            gen = generate(
                model,
                ids,
                max_new_tokens=max_new_tokens,
                temperature=sampling.temperature,
                top_k=sampling.top_k or None,
                top_p=sampling.top_p,
                seed=sampling.seed,
            )
    except BaseException:
        room.release()
        raise
    # Given back when the last step is made, when a step fails, or when the run is closed (Stop, a
    # closed page: the decode loop closes it), and at the generation's garbage collection at the latest.
    gen.on_finish.append(room.release)
    room.tie(gen)
    release_idle_runs()  # on-access sweep, besides the sweeper thread
    # seed_used: the seed an unseeded run drew for itself, so it can be repeated by typing it in.
    settings = sampling.as_dict() | {"seed_used": gen.seed_used}
    run = Run(recipe, gen.prompt_ids, gen.n_cropped, settings)
    run.room = room
    run.tokenizer = tok
    if replaces is not _NOT_GIVEN:
        run.keep()
    return run, gen


def kv_cache_bytes(model: GPTModel, rows: int | None = None) -> int:
    """A KV cache of ``rows`` positions in the model's dtype (``rows=None``: the whole context). The engine
    preallocates the positions a run can reach and fills them with zeros: every page is touched at once."""
    cfg = model.cfg
    elem = torch.finfo(model.dtype).bits // 8
    return (
        2 * cfg.n_layers * (cfg.context_length if rows is None else min(rows, cfg.context_length)) * cfg.emb_dim * elem
    )


def forward_bytes(model: GPTModel, rows: int) -> int:
    """One forward over ``rows`` positions besides the KV cache: activations, the attention scores of
    the rows computed (n_heads · rows² · 4 bytes) and the logits."""
    cfg = model.cfg
    T = min(rows, cfg.context_length)
    return T * cfg.emb_dim * 4 * 8 + cfg.n_heads * T * T * 4 + cfg.vocab_size * 4 * 4


def generation_bytes(model: GPTModel, n_prompt_tokens: int, max_new_tokens: int = 0) -> int:
    """What a generation of ``max_new_tokens`` after a prompt of ``n_prompt_tokens`` really holds at
    its peak: the KV cache as the engine allocates it (the positions the run can reach), and the largest forward it runs -- the
    prompt's, or the whole window's once the window slides (prompt and new tokens past the context).
    Decode steps compute one attention row each, which the budget's headroom covers."""
    ctx = model.cfg.context_length
    rows = ctx if n_prompt_tokens + max_new_tokens > ctx else n_prompt_tokens
    return kv_cache_bytes(model, n_prompt_tokens + max_new_tokens) + forward_bytes(model, rows)


def generation_room(model: GPTModel, label: str, n_prompt_tokens: int, max_new_tokens: int) -> Reservation:
    """The memory-budget room of one generation, taken now (``MemoryBudgetError`` if it does not
    fit, or if the client address already runs its most work at once): a ``Reservation`` sized by
    ``generation_bytes``. A decoder holds it while the run decodes and ``release()``s it when the
    run ends (or ``tie``s it to the run's iterator); one that allocates the KV cache as it fills
    ``resize``s it (``kv_cache_bytes(model, rows)`` + ``forward_bytes``) or ``grow``s it per token."""
    need = generation_bytes(model, n_prompt_tokens, max_new_tokens)
    return BUDGET.take(need, f"a generation with {label}", "generation")


def attention_bytes(cfg: GPTConfig, n_tokens: int, elem: int = 4) -> int:
    """Queries and keys of every layer for ``n_tokens`` (what a run keeps for its views)."""
    return 2 * cfg.n_layers * min(n_tokens, cfg.context_length) * cfg.emb_dim * elem


def run_attention(
    model: GPTModel, run: Run
) -> tuple[int, list[tuple]]:  # (q, k) per layer, (q, k, window) where windowed
    """Queries and keys of every layer for the run's last context window (one forward, cached and
    counted in the memory budget until the run is released or generates again)."""
    start, window = run.window(model.cfg.context_length)
    cached = run._trace_cache
    if cached is not None and cached.n_tokens == len(run.token_ids):
        return cached.start, cached.qk
    run._trace_cache = None  # the old window's attention goes before the new one is made
    elem = torch.finfo(model.dtype).bits // 8
    keep = attention_bytes(model.cfg, len(window), elem)
    forward = forward_bytes(model, len(window))
    what = f"the attention of a run of {len(window):,} tokens ({model_label(run.recipe)})"
    with BUDGET.reserve(keep + forward, what, "attention"), torch.no_grad():
        idx = torch.tensor([window], dtype=torch.long, device=model.device)
        _, trace = model(idx, return_attention=True, last_token_only=True)
        # (H, T, hd) each; a layer with a sliding window also carries it: (q, k, window)
        qk = [
            (q[0].cpu(), k[0].cpu(), trace.window(i)) if trace.window(i) else (q[0].cpu(), k[0].cpu())
            for i, (q, k) in enumerate(zip(trace.queries, trace.keys))
        ]
        del trace
        cached = _Trace(len(run.token_ids), start, qk)
        run_ref = weakref.ref(run)
        # recomputed on the next view if the budget needs the room first
        BUDGET.register(cached, keep, what, "attention", reclaim=lambda: _drop_attention(run_ref))
    run._trace_cache = cached
    return start, qk


def all_layers_attention_bytes(cfg: GPTConfig, n_tokens: int) -> int:
    """Probabilities of every layer and head, (L, H, T, T) float32: what the rollout and overview
    views and a run export build at once (3 GB for gpt2-large at 1,024 tokens)."""
    T = min(n_tokens, cfg.context_length)
    return cfg.n_layers * cfg.n_heads * T * T * 4


def _drop_attention(run_ref) -> None:
    run = run_ref()
    if run is not None:
        run._trace_cache = None


def layer_attention(qk: list, layer: int) -> np.ndarray:
    """(n_heads, T, T) float32 probabilities for one layer."""
    q, k, *window = qk[layer]  # (q, k) or, for a windowed layer, (q, k, window)
    return attention_probs(q.unsqueeze(0), k.unsqueeze(0), *window)[0].numpy()
