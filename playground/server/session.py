"""Per-user state, the shared model cache and the runs: the facade the UI calls (no gradio here).

A model is named by a *recipe* (a small JSON-able dict: random init of a config with a seed, the
bundled checkpoint, a hub repo, or a checkpoint file the server wrote). The recipe is what a
session keeps; the cache maps recipes to built models, so switching back to a model is instant and
an evicted one is simply rebuilt. Sessions share nothing else.

Memory (playground.runtime.memory.BUDGET, one budget for the whole process):

- ``CACHE.get(recipe)`` builds through ONE build queue (``PLAYGROUND_MAX_BUILDS``, default 1),
  whoever asks (/build_model, a /generate after an eviction, "use the trained model"). Before a
  build it evicts idle models to make room; if the model still does not fit, ``MemoryBudgetError``
  (a MemoryError) says what holds the memory. A model evicted while a session still uses it stays
  counted, and is handed out again instead of being built twice. Idle models are kept up to
  ``PLAYGROUND_CACHE_BUDGET_GB`` (default 4).
- Runs are registered in ``RUNS`` under a random ``run.id``. ``start_run`` returns
  ``(run, generation)`` as before. Called with ``replaces=<the session's previous run id, or
  None>``, the server keeps the run (the session state then only needs ``run.id``; get it back with
  ``get_run(run_id)``) and the previous one is released at once. Called without ``replaces`` (the
  old way, the state holding the Run), the run lives as long as the state holds it. Either way a run
  untouched for ``PLAYGROUND_IDLE_MINUTES`` (default 15) is released by a sweeper thread (its tokens
  and attention are dropped); using it afterwards raises ``RunReleasedError`` (a ValueError) whose
  message is for the user. ``run_attention`` / ``layer_attention`` work as before.
- ``memory_status()`` is one sentence on what the server holds, for a status line.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import numbers
import os
import re
import threading
import time
import weakref
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch

from playground.engine.config import (
    DEFAULT_PRESET,
    PRESETS,
    ConfigError,
    GPTConfig,
    check_build_size,
    check_memory,
    count_parameters_analytic,
    format_bytes,
)
from playground.engine.model import GPTModel, attention_probs
from playground.engine.quantize import is_int8, quantize_int8
from playground.engine.quantize import model_bytes as int8_model_bytes
from playground.engine.sampling import Generation, GenerationStep, generate
from playground.engine.tokenizer import load_tokenizer
from playground.engine.weights import HUB_MODELS, WeightLoadError, load_checkpoint, load_pretrained
from playground.i18n.catalogue import tr, tr_formula
from playground.inside.inspection import count_parameters, module_tree, parameter_breakdown
from playground.runtime.devices import default_device, describe_device
from playground.runtime.memory import BUDGET, MemoryBudget, MemoryBudgetError, trim
from playground.runtime.threads import as_background_work

# Files the server writes and reads moved to files.py; imported here so old imports keep working.
from playground.server.files import MAX_UPLOAD_BYTES, export_model, export_run, import_upload, save_trained, work_dir  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[2]
BUNDLED_CHECKPOINT = ROOT / "assets" / "bundled" / "shakespeare.safetensors"
MAX_PROMPT_CHARS = 20_000
MAX_NEW_TOKENS = 512


# ----------------------------------------------------------------------------------------------
# Recipes


def random_recipe(cfg: GPTConfig, seed: int = 0, dtype: str = "float32") -> dict:
    return {"kind": "random", "config": cfg.to_dict(), "seed": int(seed), "dtype": dtype}


def bundled_recipe(dtype: str = "float32") -> dict:
    return {"kind": "bundled", "dtype": dtype}


def hub_recipe(name: str, dtype: str = "float32") -> dict:
    if name not in HUB_MODELS:
        raise ValueError(f"Unknown hub model {name!r}; choose one of {', '.join(HUB_MODELS)}.")
    return {"kind": "hub", "repo": HUB_MODELS[name], "dtype": dtype}


def file_recipe(path: Path, label: str, dtype: str = "float32") -> dict:
    return {"kind": "file", "path": str(path), "label": label, "dtype": dtype}


def default_recipe() -> dict:
    if BUNDLED_CHECKPOINT.is_file():
        return bundled_recipe()
    return random_recipe(PRESETS[DEFAULT_PRESET], seed=0)


def recipe_key(recipe: dict) -> str:
    return json.dumps(recipe, sort_keys=True)


def describe_recipe(recipe: dict, lang: str = "en") -> str:
    kind = recipe["kind"]
    if kind == "random":
        return tr(lang, "recipe_random", seed=recipe["seed"])
    if kind == "bundled":
        return tr(lang, "recipe_bundled")
    if kind == "hub":
        return tr(lang, "recipe_hub", repo=recipe["repo"])
    label = recipe.get("label", "file")
    trained = re.match(r"^trained (\d+)L d(\d+), (\d+) steps on (.+)$", label)  # as TrainingJob names it
    if trained and lang != "en":
        layers, d, steps, corpus = trained.groups()
        corpus = tr(
            lang,
            {"Tiny Shakespeare": "n_shakespeare", "Aesop's fables & nursery rhymes": "n_aesop"}.get(corpus, corpus),
        )
        label = tr(lang, "trained_label", layers=layers, d=d, steps=steps, corpus=corpus)
    return tr(lang, "recipe_file", label=label)


def model_label(recipe: dict) -> str:
    """Short name for messages about memory: "gpt2-large (774M) random init (seed 1)"."""
    kind = recipe.get("kind")
    if kind not in ("random", "bundled", "hub", "file"):
        return "a model"
    if kind == "random":
        cfg = recipe["config"]
        name = next((n for n, p in PRESETS.items() if p.to_dict() == cfg), f"{cfg['n_layers']}-layer d{cfg['emb_dim']}")
        return f"{name} {describe_recipe(recipe)}"
    return describe_recipe(recipe)


def build_from_recipe(recipe: dict, *, progress=None) -> GPTModel:
    """Build the model a recipe names. Raises ConfigError / WeightLoadError with user-facing text.
    ``dtype`` "int8" builds in bfloat16, then quantizes the weights (playground.engine.quantize)."""
    if recipe.get("dtype") == "int8":
        return quantize_int8(build_from_recipe({**recipe, "dtype": "bfloat16"}, progress=progress))
    dtype = recipe.get("dtype", "float32")
    kind = recipe.get("kind")
    if kind == "random":
        cfg = GPTConfig.from_dict(recipe["config"])
        # A generator of its own: torch's global one is what other users' unseeded sampling draws
        # from, and reseeding it here would make their tokens repeat.
        generator = torch.Generator().manual_seed(int(recipe["seed"]))
        model = GPTModel(cfg, generator=generator)  # refuses configs over the memory budget before allocating
        # initialised on the CPU (the same seed gives the same weights everywhere), then moved
        return model.to(device=default_device(), dtype=_torch_dtype(dtype)).eval()
    if kind == "bundled":
        if not BUNDLED_CHECKPOINT.is_file():
            raise WeightLoadError("The bundled model is not in this copy of the app (assets/bundled/).")
        return load_checkpoint(BUNDLED_CHECKPOINT, dtype=dtype, device=default_device())
    if kind == "hub":
        tqdm_class = None
        if progress is not None:
            from playground.engine.weights import hf_progress_tqdm

            tqdm_class = hf_progress_tqdm(progress)
        return load_pretrained(recipe["repo"], dtype=dtype, device=default_device(), tqdm_class=tqdm_class)
    if kind == "file":
        return load_checkpoint(recipe["path"], dtype=dtype, device=default_device(), max_bytes=MAX_UPLOAD_BYTES)
    raise ValueError(f"unknown model recipe {recipe!r}")


def build_peak_bytes(recipe: dict) -> int:
    """What building a recipe holds at its peak, reserved before the build starts.

    Random init: float32 weights (+ the converted copy for bfloat16). Loading a checkpoint: the
    file's tensors, the float32 model they are copied into, and the converted copy.
    """
    dtype = recipe.get("dtype", "float32")
    target = 2 if dtype in ("bfloat16", "int8") else 4  # int8 is quantized from a bfloat16 build
    kind = recipe.get("kind")
    if kind == "random":
        n = count_parameters_analytic(GPTConfig.from_dict(recipe["config"]))
        return n * 4 + (n * target if target != 4 else 0)
    if kind == "hub":
        name = next((k for k, v in HUB_MODELS.items() if v == recipe["repo"]), "gpt2 (124M)")
        preset = next((p for n, p in PRESETS.items() if n.split(" ")[0] == name.split(" ")[0]), PRESETS[DEFAULT_PRESET])
        n = count_parameters_analytic(preset)
        return n * 4 * 2 + (n * target if target != 4 else 0)
    path = BUNDLED_CHECKPOINT if kind == "bundled" else Path(recipe.get("path", ""))
    size = path.stat().st_size if path.is_file() else 0
    # the file's tensors, then a float32 model (twice the file for float16 files such as the bundled one)
    return 3 * size + (size * target // 2 if target != 4 else 0)


def _torch_dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


# ----------------------------------------------------------------------------------------------
# The shared cache


def model_bytes(model: GPTModel) -> int:
    if is_int8(model):
        return int8_model_bytes(model)  # its int8 parameters and their scales (buffers), measured
    return sum(p.numel() * p.element_size() for p in model.parameters())


class ModelCache:
    """Recipe -> built model, least recently used evicted first, inside the process-wide budget.

    Models in the cache are only read (eval mode, no_grad), so sessions can share them; training
    always works on a fresh copy. ``budget_bytes`` caps the idle models kept
    (``PLAYGROUND_CACHE_BUDGET_GB``, default 4); ``budget`` is the memory account every build is
    checked and registered against (the process's ``BUDGET`` unless given); ``max_builds`` builds
    run at once (``PLAYGROUND_MAX_BUILDS``, default 1), the rest wait their turn.
    """

    def __init__(
        self, budget_bytes: int | None = None, *, budget: MemoryBudget | None = None, max_builds: int | None = None
    ):
        if budget_bytes is None:
            budget_bytes = int(float(os.environ.get("PLAYGROUND_CACHE_BUDGET_GB", "4")) * 2**30)
        if max_builds is None:
            max_builds = int(os.environ.get("PLAYGROUND_MAX_BUILDS", "1"))
        self.budget_bytes = budget_bytes
        self.memory = BUDGET if budget is None else budget
        self._models: OrderedDict[str, tuple[GPTModel, int]] = OrderedDict()
        # Models evicted while someone still uses them: handed out again rather than built twice.
        self._alive: weakref.WeakValueDictionary[str, GPTModel] = weakref.WeakValueDictionary()
        self._lock = threading.RLock()
        self._building: dict[str, threading.Lock] = {}
        self._build_slots = threading.BoundedSemaphore(max(1, max_builds))

    def _lookup(self, key: str) -> GPTModel | None:
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key][0]
            model = self._alive.get(key)
        if model is not None:
            self.put(key, model)
        return model

    def get(self, recipe: dict, *, progress=None) -> GPTModel:
        key = recipe_key(recipe)
        model = self._lookup(key)
        if model is not None:
            return model
        with self._lock:
            build_lock = self._building.setdefault(key, threading.Lock())
        with build_lock:  # two users asking for the same model build it once
            model = self._lookup(key)
            if model is not None:
                return model
            with self._build_slots:  # all builds, whoever asks, wait their turn here
                model = self._build(recipe, progress)
            self.put(key, model)
            return model

    def _build(self, recipe: dict, progress) -> GPTModel:
        label = model_label(recipe)
        if recipe.get("kind") == "random":  # too big for the whole budget, or over the build caps?
            cfg = GPTConfig.from_dict(recipe["config"])
            check_memory(cfg, recipe.get("dtype", "float32"), self.memory.total)
            check_build_size(cfg)
        peak = build_peak_bytes(recipe)
        self.make_room(peak)
        with self.memory.reserve(peak, f"building {label}"):  # refused here if it cannot fit
            model = build_from_recipe(recipe, progress=progress)
            self.memory.register(model, model_bytes(model), label, "model")
        return model

    def make_room(self, nbytes: int) -> None:
        """Evict idle models, least recently used first, until ``nbytes`` fit in the budget (or
        nothing idle is left: the reservation that follows then refuses with the holders)."""
        if self.memory.available() >= nbytes:
            return
        gc.collect()  # a traceback cycle may be all that keeps an old model alive
        with self._lock:
            for key in list(self._models):
                if self.memory.available() >= nbytes:
                    break
                model, size = self._models.pop(key)
                ref = weakref.ref(model)
                del model
                if ref() is not None:  # in use by a session: evicting it frees nothing
                    self._models[key] = (ref(), size)
                    self._models.move_to_end(key, last=False)

    def put(self, key: str, model: GPTModel) -> None:
        size = model_bytes(model)
        with self._lock:
            self._models[key] = (model, size)
            self._models.move_to_end(key)
            self._alive[key] = model
            while self.total_bytes() > self.budget_bytes and len(self._models) > 1:
                self._models.popitem(last=False)  # still counted by the budget while in use
        del model
        trim()

    def total_bytes(self) -> int:
        return sum(size for _, size in self._models.values())

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._models)

    def clear(self) -> None:
        with self._lock:
            self._models.clear()
        trim()


CACHE = ModelCache()


# ----------------------------------------------------------------------------------------------
# Describing a model


def summary_line(model: GPTModel, recipe: dict, lang: str = "en") -> str:
    cfg = model.cfg
    dtype = str(model.dtype).replace("torch.", "")
    if is_int8(model):
        dtype = tr(lang, "dtype_int8", dtype=dtype)
    return tr(
        lang,
        "summary",
        n=f"{count_parameters(model):,}",
        size=format_bytes(model_bytes(model)),
        dtype=dtype,
        tied=tr(lang, "tied_yes" if cfg.tie_weights else "tied_no"),
        layers=cfg.n_layers,
        heads=cfg.n_heads,
        d=cfg.emb_dim,
        context=cfg.context_length,
        model=describe_recipe(recipe, lang),
        device=describe_device(model.device),
    )


def tree_table(model: GPTModel, max_depth: int = 10, lang: str = "en") -> list[list]:
    rows = []
    for r in module_tree(model):
        if r.depth > max_depth:
            continue
        name = r.name or "GPTModel"
        indent = "\u2003" * r.depth  # em spaces survive HTML whitespace collapsing
        tied = tr(lang, "tied_to", name=r.tied_to) if r.tied_to else ""
        rows.append(
            [
                indent + name.split(".")[-1] if r.name else name,
                r.type,
                r.shape,
                f"{r.own_params:,}",
                f"{r.total_params:,}",
                tied,
                r.name,
            ]
        )
    return rows


def breakdown_table(model_or_cfg, lang: str = "en") -> tuple[list[list], object]:
    b = parameter_breakdown(model_or_cfg)
    rows = [
        [
            tr(lang, r.component),
            tr_formula(lang, r.formula),
            f"{r.formula_value:,}",
            f"{r.measured:,}",
            "✓" if r.agrees else "✗",
        ]
        for r in b.rows
    ]
    rows.append(
        [
            tr(lang, "total"),
            "",
            f"{b.total_formula:,}",
            f"{b.total_measured:,}",
            "✓" if b.total_formula == b.total_measured else "✗",
        ]
    )
    return rows, b


def tying_explanation(cfg: GPTConfig, lang: str = "en") -> str:
    """The 163M-vs-124M puzzle, with this config's own numbers."""
    tied = parameter_breakdown(cfg.replace(tie_weights=True)).total_measured
    untied = parameter_breakdown(cfg.replace(tie_weights=False)).total_measured
    head = cfg.vocab_size * cfg.emb_dim
    state = tr(lang, "tying_state_tied" if cfg.tie_weights else "tying_state_untied")
    return tr(
        lang,
        "tying",
        state=state,
        d=cfg.emb_dim,
        V=f"{cfg.vocab_size:,}",
        head=f"{head:,}",
        tied=f"{tied:,}",
        untied=f"{untied:,}",
    )


def tree_items(model: GPTModel) -> list[tuple[str, int]]:
    """Leaf modules with their own (untied) parameter counts, for the treemap."""
    return [(r.name, r.own_params) for r in module_tree(model) if r.name and (r.own_params or r.tied_to)]


# ----------------------------------------------------------------------------------------------
# A run: prompt + generated tokens + what the model saw


IDLE_SECONDS = float(os.environ.get("PLAYGROUND_IDLE_MINUTES", "15")) * 60


class RunReleasedError(ValueError):
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
            raise RunReleasedError(released_message())
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

    def __init__(self, n_tokens: int, start: int, qk: list[tuple[torch.Tensor, torch.Tensor]]):
        self.n_tokens, self.start, self.qk = n_tokens, start, qk


RUNS: weakref.WeakValueDictionary[str, Run] = weakref.WeakValueDictionary()  # every live run, for the sweeper
_KEPT: dict[str, Run] = {}  # runs the server holds for sessions that keep only the id
_RELEASED: dict[str, None] = {}  # ids of released runs (the newest 10,000), for the message
_RUNS_LOCK = threading.Lock()


def released_message() -> str:
    minutes = IDLE_SECONDS / 60
    return (
        f"This run was released after {minutes:g} minute{'' if minutes == 1 else 's'} idle to free memory; "
        f"generate again."
    )


_SWEEPER: threading.Thread | None = None


def get_run(run_id: str | None) -> Run:
    """The run a session's state names; RunReleasedError if it was released or is unknown."""
    with _RUNS_LOCK:
        run = RUNS.get(run_id or "")
    if run is None:
        if not run_id:
            raise ValueError("Generate first: there is no run yet.")
        if run_id in _RELEASED:
            raise RunReleasedError(released_message())
        raise RunReleasedError("This run is no longer on the server (it restarted); generate again.")
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
        except Exception:  # never let the sweeper die; the next round tries again
            pass


def _start_sweeper() -> None:
    global _SWEEPER
    if _SWEEPER is None:
        with _RUNS_LOCK:
            if _SWEEPER is None:
                _SWEEPER = threading.Thread(target=_sweep_forever, name="run-sweeper", daemon=True)
                _SWEEPER.start()


def memory_status() -> str:
    """One sentence on the process-wide budget, for a status line or a log."""
    return (
        f"{format_bytes(BUDGET.used())} of the {format_bytes(BUDGET.total)} memory budget in use: {BUDGET.describe()}."
    )


_NOT_GIVEN = object()


def start_run(
    model: GPTModel,
    recipe: dict,
    prompt: str,
    *,
    max_new_tokens,
    temperature,
    top_k,
    top_p,
    seed,
    greedy=False,
    replaces=_NOT_GIVEN,
) -> tuple[Run, Generation]:
    """Validate everything a user typed, then return the run and its (not yet started) generation.

    ``replaces`` (the session's previous run or run id, or None for its first): the server keeps
    the new run under ``run.id`` and releases the previous one now rather than after the idle
    timeout. Without it, whoever holds the returned Run keeps it alive. The generation's KV cache
    is counted in the memory budget (refused here if it does not fit) until the generation object
    is gone."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("The prompt is empty: type some text for the model to continue.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(f"The prompt is {len(prompt):,} characters; the limit is {MAX_PROMPT_CHARS:,}.")
    max_new_tokens = _typed(max_new_tokens, "Max new tokens", whole=True)
    if max_new_tokens > MAX_NEW_TOKENS:
        raise ValueError(f"Max new tokens is {max_new_tokens:,}; this app generates at most {MAX_NEW_TOKENS} per run.")
    top_k = _typed(top_k, "top-k", whole=True) if top_k is not None else None
    seed = _typed(seed, "Seed", whole=True) if seed is not None else None
    temperature = _typed(temperature, "Temperature")
    top_p = _typed(top_p, "top-p") if top_p is not None else None
    if greedy:
        temperature = 0.0
    if replaces is not _NOT_GIVEN and replaces is not None:
        old = replaces if isinstance(replaces, Run) else RUNS.get(replaces)
        if old is not None:
            old.release()
    tok = load_tokenizer()
    ids = tok.encode(prompt)
    need = generation_bytes(model, len(ids))
    what = f"a generation with {model_label(recipe)}"
    BUDGET.check(need, what)
    gen = generate(
        model, ids, max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k or None, top_p=top_p, seed=seed
    )
    BUDGET.register(gen, need, what, "generation")
    release_idle_runs()  # on-access sweep, besides the sweeper thread
    # seed_used: the seed an unseeded run drew for itself, so it can be repeated by typing it in.
    settings = dict(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        seed_used=gen.seed_used,
    )
    run = Run(recipe, gen.prompt_ids, gen.n_cropped, settings)
    if replaces is not _NOT_GIVEN:
        run.keep()
    return run, gen


def generation_bytes(model: GPTModel, n_prompt_tokens: int) -> int:
    """A generation's KV cache (preallocated for the whole context) and its prompt forward."""
    cfg = model.cfg
    elem = torch.finfo(model.dtype).bits // 8
    kv = 2 * cfg.n_layers * cfg.context_length * cfg.emb_dim * elem
    T = min(n_prompt_tokens, cfg.context_length)
    forward = T * cfg.emb_dim * 4 * 8 + cfg.n_heads * T * T * 4 + cfg.vocab_size * 4 * 4
    return kv + forward


def attention_bytes(cfg: GPTConfig, n_tokens: int, elem: int = 4) -> int:
    """Queries and keys of every layer for ``n_tokens`` (what a run keeps for its views)."""
    return 2 * cfg.n_layers * min(n_tokens, cfg.context_length) * cfg.emb_dim * elem


def _typed(value, name: str, whole: bool = False):
    """A number argument as the library takes it: ints and floats only (what people type is parsed
    by the UI, playground.ui.parsing); a string, or a fraction where a count is wanted, is refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}.")
    if whole:
        if not math.isfinite(value) or not float(value).is_integer():
            raise ValueError(f"{name} must be a whole number, got {value!r}.")
        return int(value)
    return float(value)


def run_attention(model: GPTModel, run: Run) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Queries and keys of every layer for the run's last context window (one forward, cached and
    counted in the memory budget until the run is released or generates again)."""
    start, window = run.window(model.cfg.context_length)
    cached = run._trace_cache
    if cached is not None and cached.n_tokens == len(run.token_ids):
        return cached.start, cached.qk
    run._trace_cache = None  # the old window's attention goes before the new one is made
    elem = torch.finfo(model.dtype).bits // 8
    keep = attention_bytes(model.cfg, len(window), elem)
    forward = (
        generation_bytes(model, len(window))
        - 2 * model.cfg.n_layers * model.cfg.context_length * model.cfg.emb_dim * elem
    )
    what = f"the attention of a run of {len(window):,} tokens ({model_label(run.recipe)})"
    with BUDGET.reserve(keep + forward, what, "attention"), torch.no_grad():
        idx = torch.tensor([window], dtype=torch.long, device=model.device)
        _, trace = model(idx, return_attention=True, last_token_only=True)
        qk = [(q[0].cpu(), k[0].cpu()) for q, k in zip(trace.queries, trace.keys)]  # (H, T, hd) each
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


def export_bytes(cfg: GPTConfig, n_tokens: int, fmt: str = "json") -> int:
    """Peak extra memory of exporting a run: files.export_run streams one layer's maps at a time, so
    a few copies of one layer's (H, T, T) probabilities (measured: +101 to +238 MB for a 1,024-token
    GPT-2 small run, whose one layer is 50 MB), plus the window's queries and keys."""
    one_layer = all_layers_attention_bytes(cfg, n_tokens) // max(1, cfg.n_layers)
    T = min(n_tokens, cfg.context_length)
    return 5 * one_layer + 2 * cfg.n_layers * T * cfg.emb_dim * 4


def reserve_export(model: GPTModel, run: Run, fmt: str = "json"):
    """``with reserve_export(model, run, fmt): export_run(run, model, fmt)`` -- refused before
    anything is allocated if the export does not fit in the memory budget."""
    n = len(run.token_ids)
    return BUDGET.reserve(export_bytes(model.cfg, n, fmt), f"exporting a run of {n:,} tokens as .{fmt}", "export")


def _drop_attention(run_ref) -> None:
    run = run_ref()
    if run is not None:
        run._trace_cache = None


def layer_attention(qk: list, layer: int) -> np.ndarray:
    """(n_heads, T, T) float32 probabilities for one layer."""
    q, k = qk[layer]
    return attention_probs(q.unsqueeze(0), k.unsqueeze(0))[0].numpy()


__all__ = [
    "BUDGET",
    "CACHE",
    "ConfigError",
    "MemoryBudgetError",
    "ModelCache",
    "RUNS",
    "Run",
    "RunReleasedError",
    "WeightLoadError",
    "breakdown_table",
    "build_from_recipe",
    "bundled_recipe",
    "default_recipe",
    "describe_recipe",
    "export_model",
    "export_run",
    "file_recipe",
    "get_run",
    "hub_recipe",
    "import_upload",
    "layer_attention",
    "memory_status",
    "random_recipe",
    "recipe_key",
    "release_idle_runs",
    "run_attention",
    "save_trained",
    "start_run",
    "summary_line",
    "tree_items",
    "tree_table",
    "tying_explanation",
]


# ----------------------------------------------------------------------------------------------
# Training jobs: a background thread per job, polled by the UI, stoppable, keeping what it learned

MAX_TRAIN_STEPS = 5000
TRAIN_PRESETS = ("nano (2 layers, d64)", "tiny (4 layers, d128)", "decoder-only tutorial (d512)", "gpt2-small (124M)")


def training_config(cfg: GPTConfig, steps, lr, *, batch_size: int = 8, block_size: int | None = None, seed: int = 1337):
    """The TrainConfig of a Train-tab run (also what its time estimate measures); steps and lr are
    checked with messages for the user."""
    from playground.training.trainer import TrainConfig

    steps = _typed(steps, "Steps", whole=True)
    if not 1 <= steps <= MAX_TRAIN_STEPS:
        raise ValueError(f"Steps must be between 1 and {MAX_TRAIN_STEPS:,}, got {steps:,}.")
    lr = _typed(lr, "Learning rate")
    if not (0 < lr <= 1):
        raise ValueError(f"The learning rate must be in (0, 1], got {lr}.")
    block = min(block_size or 128, cfg.context_length)
    return TrainConfig(
        steps=steps,
        lr=lr,
        min_lr=lr / 10,
        warmup_steps=max(1, min(100, steps // 10)),
        batch_size=batch_size,
        block_size=block,
        eval_interval=max(5, steps // 20),
        eval_batches=4,
        seed=seed,
    )


class TrainingJob:
    """Trains a fresh copy of a config on a corpus in a background thread.

    The UI polls ``snapshot()``; ``stop()`` ends the loop after the current step, and the model
    keeps everything learned so far. The job's memory (model, gradients, AdamW state, activations)
    is counted in the process-wide budget until the job object is gone. Jobs live in ``JOBS`` under a random id, so the Stop button
    of the same session can reach the thread without the state holding it.
    """

    def __init__(
        self,
        cfg: GPTConfig,
        text: str,
        corpus_name: str,
        *,
        steps: int,
        lr: float,
        batch_size: int = 8,
        block_size: int | None = None,
        seed: int = 1337,
    ):
        from playground.training.corpus import prepare_corpus
        from playground.training.losses import unigram_loss
        from playground.training.trainer import Trainer, build_model, check_training_memory

        tcfg = training_config(cfg, steps, lr, batch_size=batch_size, block_size=block_size, seed=seed)
        block = tcfg.block_size
        need = check_training_memory(cfg, tcfg, BUDGET.total)  # refused before anything is allocated
        what = f"training a {cfg.n_layers}-layer d{cfg.emb_dim} model"
        with BUDGET.reserve(need, what, "training"):  # ... also if other holders leave too little now
            self.corpus = prepare_corpus(text, block, name=corpus_name)
            self.unigram = unigram_loss(self.corpus.train_ids, self.corpus.val_ids, cfg.vocab_size)
            self.cfg, self.tcfg = cfg, tcfg
            self.trainer = Trainer(build_model(cfg, seed=seed), self.corpus.train_ids, self.corpus.val_ids, tcfg)
            # model, gradients, AdamW state and activations: counted until the job is gone
            BUDGET.register(self, need, what, "training")
        self.id = hashlib.sha256(os.urandom(16)).hexdigest()[:16]
        self.train_points: list[tuple[int, float]] = []
        self.val_points: list[tuple[int, float]] = []
        self.last_event = None
        self.error: str | None = None
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"train-{self.id}", daemon=True)

    def start(self) -> TrainingJob:
        JOBS[self.id] = self
        self._thread.start()
        return self

    def _run(self) -> None:
        def on_event(ev):
            if ev.kind == "step" and ev.loss is not None:
                self.train_points.append((ev.step, ev.loss))
            elif ev.kind == "eval" and ev.val_loss is not None:
                self.val_points.append((ev.step, ev.val_loss))
            self.last_event = ev

        as_background_work()  # generation first: lower priority, one thread fewer (playground.runtime.threads)
        try:
            self.trainer.run(callback=on_event, should_stop=self._stop.is_set)
        except Exception as e:  # reported to the user by the polling handler
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.done.set()

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def result_recipe(self) -> dict:
        """Save what was learned (also after a stop) and name it with a recipe."""
        model = self.trainer.snapshot_model()
        steps = self.trainer.step_count
        return save_trained(
            model, f"trained {self.cfg.n_layers}L d{self.cfg.emb_dim}, {steps} steps on {self.corpus.name}"
        )


JOBS: dict[str, TrainingJob] = {}
