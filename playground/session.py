"""Per-user state and the shared model cache: the facade the UI calls (no gradio here).

A model is named by a *recipe* (a small JSON-able dict: random init of a config with a seed, the
bundled checkpoint, a hub repo, or a checkpoint file the server wrote). The recipe is what a
session keeps; the cache maps recipes to built models within a memory budget, so switching back to
a model is instant and an evicted one is simply rebuilt. Sessions share nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .config import DEFAULT_PRESET, PRESETS, ConfigError, GPTConfig, format_bytes
from .inspection import count_parameters, module_tree, parameter_breakdown
from .model import GPTModel, attention_probs
from .sampling import Generation, GenerationStep, generate
from .tokenizer import load_tokenizer
from .weights import HUB_MODELS, WeightLoadError, load_checkpoint, load_pretrained
# Files the server writes and reads moved to files.py; imported here so old imports keep working.
from .files import MAX_UPLOAD_BYTES, export_model, export_run, import_upload, save_trained, work_dir  # noqa: E402,F401

ROOT = Path(__file__).resolve().parent.parent
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


def describe_recipe(recipe: dict) -> str:
    kind = recipe["kind"]
    if kind == "random":
        return f"random init (seed {recipe['seed']})"
    if kind == "bundled":
        return "bundled Tiny Shakespeare model"
    if kind == "hub":
        return f"OpenAI weights: {recipe['repo']}"
    return f"checkpoint: {recipe.get('label', 'file')}"


_INIT_LOCK = threading.Lock()


def build_from_recipe(recipe: dict, *, progress=None) -> GPTModel:
    """Build the model a recipe names. Raises ConfigError / WeightLoadError with user-facing text."""
    dtype = recipe.get("dtype", "float32")
    kind = recipe.get("kind")
    if kind == "random":
        cfg = GPTConfig.from_dict(recipe["config"])
        # Initialisation draws from torch's global generator: hold it so that two users building at
        # the same moment both get the weights their seed promises.
        with _INIT_LOCK:
            torch.manual_seed(int(recipe["seed"]))
            model = GPTModel(cfg)  # refuses configs over the memory budget before allocating
        return model.to(_torch_dtype(dtype)).eval()
    if kind == "bundled":
        if not BUNDLED_CHECKPOINT.is_file():
            raise WeightLoadError("The bundled model is not in this copy of the app (assets/bundled/).")
        return load_checkpoint(BUNDLED_CHECKPOINT, dtype=dtype, device="cpu")
    if kind == "hub":
        tqdm_class = None
        if progress is not None:
            from .weights import hf_progress_tqdm

            tqdm_class = hf_progress_tqdm(progress)
        return load_pretrained(recipe["repo"], dtype=dtype, device="cpu", tqdm_class=tqdm_class)
    if kind == "file":
        return load_checkpoint(recipe["path"], dtype=dtype, device="cpu", max_bytes=MAX_UPLOAD_BYTES)
    raise ValueError(f"unknown model recipe {recipe!r}")


def _torch_dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


# ----------------------------------------------------------------------------------------------
# The shared cache


def model_bytes(model: GPTModel) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


class ModelCache:
    """Recipe -> built model, least recently used evicted first, within a byte budget.

    Models in the cache are only read (eval mode, no_grad), so sessions can share them; training
    always works on a fresh copy.
    """

    def __init__(self, budget_bytes: int | None = None):
        if budget_bytes is None:
            budget_bytes = int(float(os.environ.get("PLAYGROUND_CACHE_BUDGET_GB", "4")) * 2**30)
        self.budget_bytes = budget_bytes
        self._models: OrderedDict[str, tuple[GPTModel, int]] = OrderedDict()
        self._lock = threading.RLock()
        self._building: dict[str, threading.Lock] = {}

    def get(self, recipe: dict, *, progress=None) -> GPTModel:
        key = recipe_key(recipe)
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key][0]
            build_lock = self._building.setdefault(key, threading.Lock())
        with build_lock:  # two users asking for the same model build it once
            with self._lock:
                if key in self._models:
                    self._models.move_to_end(key)
                    return self._models[key][0]
            model = build_from_recipe(recipe, progress=progress)
            self.put(key, model)
            return model

    def put(self, key: str, model: GPTModel) -> None:
        size = model_bytes(model)
        with self._lock:
            self._models[key] = (model, size)
            self._models.move_to_end(key)
            while self.total_bytes() > self.budget_bytes and len(self._models) > 1:
                self._models.popitem(last=False)  # a session holding a reference keeps it alive

    def total_bytes(self) -> int:
        return sum(size for _, size in self._models.values())

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._models)

    def clear(self) -> None:
        with self._lock:
            self._models.clear()


CACHE = ModelCache()


# ----------------------------------------------------------------------------------------------
# Describing a model


def summary_line(model: GPTModel, recipe: dict) -> str:
    cfg = model.cfg
    n = count_parameters(model)
    bytes_now = model_bytes(model)
    dtype = str(model.dtype).replace("torch.", "")
    tied = "tied embeddings (out_head shares tok_emb)" if cfg.tie_weights else "untied embeddings"
    return (
        f"**{n:,} parameters** · {format_bytes(bytes_now)} in {dtype} · {tied} · "
        f"{cfg.n_layers} layers × {cfg.n_heads} heads, d={cfg.emb_dim}, context {cfg.context_length} · "
        f"{describe_recipe(recipe)}"
    )


def tree_table(model: GPTModel, max_depth: int = 10) -> list[list]:
    rows = []
    for r in module_tree(model):
        if r.depth > max_depth:
            continue
        name = r.name or "GPTModel"
        indent = "\u2003" * r.depth  # em spaces survive HTML whitespace collapsing
        tied = f"tied → {r.tied_to}" if r.tied_to else ""
        rows.append([indent + name.split(".")[-1] if r.name else name, r.type, r.shape, f"{r.own_params:,}",
                     f"{r.total_params:,}", tied, r.name])
    return rows


def breakdown_table(model_or_cfg) -> tuple[list[list], object]:
    b = parameter_breakdown(model_or_cfg)
    rows = [[r.component, r.formula, f"{r.formula_value:,}", f"{r.measured:,}", "✓" if r.agrees else "✗"] for r in b.rows]
    rows.append(["total", "", f"{b.total_formula:,}", f"{b.total_measured:,}",
                 "✓" if b.total_formula == b.total_measured else "✗"])
    return rows, b


def tying_explanation(cfg: GPTConfig) -> str:
    """The 163M-vs-124M puzzle, with this config's own numbers."""
    tied = parameter_breakdown(cfg.replace(tie_weights=True)).total_measured
    untied = parameter_breakdown(cfg.replace(tie_weights=False)).total_measured
    head = cfg.vocab_size * cfg.emb_dim
    state = "tied" if cfg.tie_weights else "untied"
    return (
        f"**Weight tying.** This model is *{state}*. The output head maps d={cfg.emb_dim} back to "
        f"V={cfg.vocab_size:,} tokens: a {cfg.emb_dim}×{cfg.vocab_size:,} matrix of **{head:,}** numbers, the same "
        f"shape as the token embedding. GPT-2 reuses the embedding there (tied): **{tied:,}** parameters. A separate "
        f"head (untied, as the textbook's GPT_CONFIG_124M) adds those {head:,}: **{untied:,}**. That is the "
        f"\"163M vs 124M\" difference for the textbook config (plus 27,648 qkv-bias numbers GPT-2 has and the "
        f"textbook leaves out)."
    )


def tree_items(model: GPTModel) -> list[tuple[str, int]]:
    """Leaf modules with their own (untied) parameter counts, for the treemap."""
    return [(r.name, r.own_params) for r in module_tree(model) if r.name and (r.own_params or r.tied_to)]


# ----------------------------------------------------------------------------------------------
# A run: prompt + generated tokens + what the model saw


@dataclass
class Run:
    recipe: dict
    prompt_ids: list[int]
    n_cropped: int
    settings: dict
    steps: list[GenerationStep] = field(default_factory=list)
    stopped: bool = False
    elapsed: float = 0.0  # seconds spent generating so far
    _trace_cache: tuple | None = None  # (sequence length, window start, [per-layer (q, k)])

    @property
    def token_ids(self) -> list[int]:
        return self.prompt_ids + [s.token_id for s in self.steps]

    def window(self, context_length: int) -> tuple[int, list[int]]:
        ids = self.token_ids
        start = max(0, len(ids) - context_length)
        return start, ids[start:]


def start_run(model: GPTModel, recipe: dict, prompt: str, *, max_new_tokens, temperature, top_k, top_p, seed,
              greedy=False) -> tuple[Run, Generation]:
    """Validate everything a user typed, then return the run and its (not yet started) generation."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("The prompt is empty: type some text for the model to continue.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(f"The prompt is {len(prompt):,} characters; the limit is {MAX_PROMPT_CHARS:,}.")
    max_new_tokens = _whole(max_new_tokens, "Max new tokens")
    if max_new_tokens > MAX_NEW_TOKENS:
        raise ValueError(f"Max new tokens is {max_new_tokens:,}; this app generates at most {MAX_NEW_TOKENS} per run.")
    top_k = _whole(top_k, "top-k") if top_k not in (None, "") else None
    seed = _whole(seed, "Seed") if seed not in (None, "") else None
    temperature = _number(temperature, "Temperature")
    top_p = _number(top_p, "top-p") if top_p not in (None, "") else None
    if greedy:
        temperature = 0.0
    tok = load_tokenizer()
    ids = tok.encode(prompt)
    gen = generate(model, ids, max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k or None,
                   top_p=top_p, seed=seed)
    settings = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    return Run(recipe, gen.prompt_ids, gen.n_cropped, settings), gen


def _number(value, name: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}.")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}.") from None


def _whole(value, name: str) -> int:
    number = _number(value, name)
    if number != number or not float(number).is_integer():
        raise ValueError(f"{name} must be a whole number, got {value!r}.")
    return int(number)


def run_attention(model: GPTModel, run: Run) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Queries and keys of every layer for the run's last context window (one forward, cached)."""
    start, window = run.window(model.cfg.context_length)
    if run._trace_cache and run._trace_cache[0] == len(run.token_ids):
        return run._trace_cache[1], run._trace_cache[2]
    with torch.no_grad():
        idx = torch.tensor([window], dtype=torch.long, device=model.device)
        _, trace = model(idx, return_attention=True, last_token_only=True)
    qk = [(q[0].cpu(), k[0].cpu()) for q, k in zip(trace.queries, trace.keys)]  # (H, T, hd) each
    run._trace_cache = (len(run.token_ids), start, qk)
    return start, qk


def layer_attention(qk: list, layer: int) -> np.ndarray:
    """(n_heads, T, T) float32 probabilities for one layer."""
    q, k = qk[layer]
    return attention_probs(q.unsqueeze(0), k.unsqueeze(0))[0].numpy()


__all__ = [
    "CACHE", "ConfigError", "ModelCache", "Run", "WeightLoadError", "breakdown_table", "build_from_recipe",
    "bundled_recipe", "default_recipe", "describe_recipe", "export_model", "export_run", "file_recipe",
    "hub_recipe", "import_upload", "layer_attention", "random_recipe", "recipe_key", "run_attention",
    "save_trained", "start_run", "summary_line", "tree_items", "tree_table", "tying_explanation",
]


# ----------------------------------------------------------------------------------------------
# Training jobs: a background thread per job, polled by the UI, stoppable, keeping what it learned

MAX_TRAIN_STEPS = 5000
TRAIN_PRESETS = ("nano (2 layers, d64)", "tiny (4 layers, d128)", "decoder-only tutorial (d512)",
                 "gpt2-small (124M)")


class TrainingJob:
    """Trains a fresh copy of a config on a corpus in a background thread.

    The UI polls ``snapshot()``; ``stop()`` ends the loop after the current step, and the model
    keeps everything learned so far. Jobs live in ``JOBS`` under a random id, so the Stop button
    of the same session can reach the thread without the state holding it.
    """

    def __init__(self, cfg: GPTConfig, text: str, corpus_name: str, *, steps: int, lr: float,
                 batch_size: int = 8, block_size: int | None = None, seed: int = 1337):
        from .corpus import prepare_corpus
        from .train import TrainConfig, Trainer, build_model, check_training_memory, unigram_loss

        steps = _whole(steps, "Steps")
        if not 1 <= steps <= MAX_TRAIN_STEPS:
            raise ValueError(f"Steps must be between 1 and {MAX_TRAIN_STEPS:,}, got {steps:,}.")
        lr = _number(lr, "Learning rate")
        if not (0 < lr <= 1):
            raise ValueError(f"The learning rate must be in (0, 1], got {lr}.")
        block = min(block_size or 128, cfg.context_length)
        tcfg = TrainConfig(steps=steps, lr=lr, min_lr=lr / 10, warmup_steps=max(1, min(100, steps // 10)),
                           batch_size=batch_size, block_size=block, eval_interval=max(5, steps // 20),
                           eval_batches=4, seed=seed)
        check_training_memory(cfg, tcfg)  # refused before anything is allocated
        self.corpus = prepare_corpus(text, block, name=corpus_name)
        self.unigram = unigram_loss(self.corpus.train_ids, self.corpus.val_ids, cfg.vocab_size)
        self.cfg, self.tcfg = cfg, tcfg
        self.trainer = Trainer(build_model(cfg, seed=seed), self.corpus.train_ids, self.corpus.val_ids, tcfg)
        self.id = hashlib.sha256(os.urandom(16)).hexdigest()[:16]
        self.train_points: list[tuple[int, float]] = []
        self.val_points: list[tuple[int, float]] = []
        self.last_event = None
        self.error: str | None = None
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"train-{self.id}", daemon=True)

    def start(self) -> "TrainingJob":
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
        return save_trained(model, f"trained {self.cfg.n_layers}L d{self.cfg.emb_dim}, {steps} steps on {self.corpus.name}")


JOBS: dict[str, TrainingJob] = {}
