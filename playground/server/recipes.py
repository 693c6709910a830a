"""Recipes: a model named by a small JSON-able dict, and the one function that builds what it names.

A recipe is random init of a config with a seed, the bundled checkpoint, a hub repo, or a checkpoint
file the server wrote, each with the dtype to build it in. A session keeps only its recipe; the model
cache (model_cache.py) maps recipes to built models, so an evicted model is simply rebuilt.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
from pathlib import Path

import torch

from playground import assets
from playground.accel import DECODE_THREADS, accelerate, background, copy_plan, undecided
from playground.engine.config import GPTConfig
from playground.engine.hf_hub import HUB_MODELS, cached_config, hf_progress_tqdm, load_pretrained
from playground.engine.hf_llama import MODEL_TYPES as LLAMA_FAMILY
from playground.engine.hf_llama import config_from_hf_llama
from playground.engine.model import GPTModel
from playground.engine.presets import DEFAULT_PRESET, MODERN_PRESETS, PRESETS
from playground.engine.quantize import quantize_int8
from playground.engine.sizes import count_parameters_analytic
from playground.engine.weight_layout import WeightLoadError
from playground.engine.weights import load_checkpoint
from playground.errors import UserError
from playground.i18n import tr, tr_words
from playground.runtime import kernels
from playground.runtime.devices import default_device
from playground.runtime.threads import torch_threads

BUNDLED_CHECKPOINT = assets.path("bundled", "model.safetensors")
# A checkout (``python app.py``) keeps its models/ folder beside the package; an installed package
# (``gpt-playground``) uses the models/ folder of the directory it is started in.
CHECKOUT = Path(__file__).resolve().parents[2]
# The largest checkpoint a file recipe may name: an upload, or a checkpoint the Train tab wrote (files.py).
MAX_UPLOAD_BYTES = int(float(os.environ.get("PLAYGROUND_MAX_UPLOAD_MB", "700")) * 1e6)


def random_recipe(cfg: GPTConfig, seed: int = 0, dtype: str = "float32") -> dict:
    return {"kind": "random", "config": cfg.to_dict(), "seed": int(seed), "dtype": dtype}


def bundled_recipe(dtype: str = "float32") -> dict:
    return {"kind": "bundled", "dtype": dtype}


# Folders the server may load GPT-2 weights from (a path typed into the page is read on the server,
# so only inside these): the app's own models/ folder, and any listed in PLAYGROUND_MODEL_DIRS
# (separated by the system's path separator, ":" on Linux).
def model_dirs() -> list[Path]:
    extra = [Path(p).expanduser() for p in os.environ.get("PLAYGROUND_MODEL_DIRS", "").split(os.pathsep) if p]
    home = CHECKOUT if (CHECKOUT / "app.py").is_file() else Path.cwd()
    return [home / "models", *extra]


def looks_like_folder(name: str) -> bool:
    return any(c in str(name) for c in ("/", "\\")) or str(name).startswith(("~", "."))


def folder_recipe(path: str, dtype: str = "float32") -> dict:
    """GPT-2 weights in the Hugging Face layout (config.json + model.safetensors) from a folder on
    the server, loaded by the hub loader; the folder must lie inside one of ``model_dirs()``."""
    folder = Path(str(path).strip()).expanduser()
    roots = model_dirs()
    try:
        resolved = folder.resolve(strict=True)
    except (OSError, RuntimeError):
        resolved = None
    allowed = resolved is not None and any(resolved.is_relative_to(r.resolve()) for r in roots)
    if (
        resolved is None or not allowed
    ):  # the same words whether it is missing or outside: nothing is said about other paths
        raise UserError(
            "model.folder_not_allowed",
            "{path} is not a folder inside the model folders this server allows ({roots}). Put the model's "
            "folder (config.json + model.safetensors) there, or add its parent to PLAYGROUND_MODEL_DIRS.",
            path=str(path),
            roots=", ".join(str(r) for r in roots),
        )
    if not resolved.is_dir():
        raise UserError(
            "model.folder_not_dir",
            "{path} is a file; name the folder that holds config.json and model.safetensors.",
            path=str(path),
        )
    return {"kind": "hub", "repo": str(resolved), "dtype": dtype}


def looks_like_repo_id(name: str) -> bool:
    """owner/name as the hub spells it ("Qwen/Qwen3-0.6B")."""
    return re.fullmatch(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}", name) is not None


def hub_recipe(name: str, dtype: str = "float32") -> dict:
    """A hub model by its id (gpt2, gpt2-medium, ... or a Llama-family repo such as Qwen/Qwen3-0.6B, whose
    config.json the loader checks before any weights), or a local folder path (folder_recipe). An owner/name
    that is also an allowed folder is the folder; whether it exists elsewhere is never asked, nor said."""
    name = str(name).strip()
    if name not in HUB_MODELS and looks_like_repo_id(name):
        try:
            return folder_recipe(name, dtype)
        except UserError:
            return {"kind": "hub", "repo": name, "dtype": dtype}
    if name not in HUB_MODELS and looks_like_folder(name):
        return folder_recipe(name, dtype)
    if name not in HUB_MODELS:
        raise UserError(
            "model.unknown_hub",
            "Unknown hub model {name!r}; choose one of {choices}.",
            name=name,
            choices=", ".join(HUB_MODELS),
        )
    return {"kind": "hub", "repo": HUB_MODELS[name], "dtype": dtype}


def file_recipe(path: Path, label: str, dtype: str = "float32") -> dict:
    return {"kind": "file", "path": str(path), "label": label, "dtype": dtype}


def default_recipe() -> dict:
    if BUNDLED_CHECKPOINT.is_file():
        return bundled_recipe()
    return random_recipe(PRESETS[DEFAULT_PRESET], seed=0)


def recipe_key(recipe: dict) -> str:
    return json.dumps(recipe, sort_keys=True)


def recipe_words(recipe: dict) -> tuple[str, dict]:
    """How to name a recipe, as data the UI writes in the page's language (``i18n.tr_words``): an i18n
    key and its fields (a trained model's label and its corpus are such pairs themselves)."""
    kind = recipe["kind"]
    if kind == "random":
        return "recipe_random", {"seed": recipe["seed"]}
    if kind == "bundled":
        return "recipe_bundled", {}
    if kind == "hub":
        family = folder_family(recipe)
        if family:  # not OpenAI's: a Llama, Qwen3 or Mistral folder
            key = "recipe_family" if is_folder(recipe) else "recipe_family_hub"
            return key, {"family": family, "repo": recipe["repo"]}
        return "recipe_hub", {"repo": recipe["repo"]}
    label: str | tuple = recipe.get("label", "file")
    trained = recipe.get("trained")  # what TrainingJob trained, as data: its label in any language
    if trained:
        corpus = trained["corpus"]
        corpus = (CORPUS_LABEL_KEYS[corpus], {}) if corpus in CORPUS_LABEL_KEYS else corpus
        label = ("trained_label", {**trained, "corpus": corpus})
    return "recipe_file", {"label": label}


def describe_recipe(recipe: dict) -> str:
    """A recipe named in English, for records, files and logs (pages write ``recipe_words`` themselves)."""
    return tr_words("en", recipe_words(recipe))


CORPUS_LABEL_KEYS = {
    "Tiny Shakespeare": "n_shakespeare",
    "Aesop's fables & nursery rhymes": "n_aesop",
    "Pride and Prejudice": "n_austen",
}


def model_label(recipe: dict) -> str:
    """Short name for messages about memory: "gpt2-large (774M) random init (seed 1)"."""
    kind = recipe.get("kind")
    if kind not in ("random", "bundled", "hub", "file"):
        return "a model"
    if kind == "random":
        cfg = recipe["config"]
        preset = next((n for n, p in {**PRESETS, **MODERN_PRESETS}.items() if p.to_dict() == cfg), None)
        name = tr("en", f"preset_{preset}") if preset else f"{cfg['n_layers']}-layer d{cfg['emb_dim']}"
        return f"{name} {describe_recipe(recipe)}"
    return describe_recipe(recipe)


def build_from_recipe(recipe: dict, *, progress=None, measure: bool | None = None) -> GPTModel:
    """Build the model a recipe names, accelerated (``playground.accel``). Raises ConfigError /
    WeightLoadError with user-facing text. A random init's config is checked against the memory budget
    and the build caps by the model cache before it makes room and reserves (a loader checks its file's
    config itself). ``dtype`` "int8" builds in bfloat16, then quantizes the weights
    (playground.engine.quantize); "int8-dynamic" builds in float32 and quantizes the weights and, at run
    time, each product's activations.

    In a server that keeps this machine's decisions (``decide_kernels_at_start``) a build times no kernel
    (``measure`` None or False, what a user's request runs): decisions made before are read, and a shape met
    for the first time decodes on its plain path while its decisions are measured in the background
    (``accel.background``) for its next build. Elsewhere (a script, the bench) ``measure`` None measures
    in the call, once per process and shape."""
    if measure is None:
        measure = not kernels.keeping_decisions()
    # Decisions for the decode loop's thread count, whichever thread builds (accel.DECODE_THREADS)
    skipping: contextlib.AbstractContextManager[list[str]] = (
        kernels.decided_only() if not measure else contextlib.nullcontext([])
    )
    with skipping as skipped, torch_threads(DECODE_THREADS):
        if recipe.get("dtype") == "int8":
            model = quantize_int8(_build_plain({**recipe, "dtype": "bfloat16"}, progress))
        elif recipe.get("dtype") == "int8-dynamic":
            model = quantize_int8(_build_plain({**recipe, "dtype": "float32"}, progress), "float32", dynamic=True)
        else:
            model = _build_plain(recipe, progress)
        accelerate(model, measure=measure)
    if (skipped or undecided(model)) and kernels.keeping_decisions():
        timing = timing_recipe(model.cfg, recipe.get("dtype", "float32"))
        background.measure_later(
            json.dumps(timing, sort_keys=True),
            lambda: build_from_recipe(timing, measure=True),
            build_peak_bytes(timing, measure=True),
        )
    return model


def decide_kernels_at_start() -> None:
    """At start, before the first page: this machine's decisions kept on disk (``kernels.keep_decisions``),
    the default model's made now -- measured once per machine, read from the file after -- and GPT-2
    small's (the preset a room is most likely to build) measured in the background."""
    kernels.keep_decisions()
    build_from_recipe(default_recipe(), measure=True)
    for recipe in (random_recipe(PRESETS["gpt2-small"], seed=0),):
        cfg = GPTConfig.from_dict(recipe["config"])
        timing = timing_recipe(cfg, recipe.get("dtype", "float32"))
        background.measure_later(
            json.dumps(timing, sort_keys=True),
            functools.partial(build_from_recipe, timing, measure=True),
            build_peak_bytes(timing, measure=True),
        )


def timing_recipe(cfg: GPTConfig, dtype: str) -> dict:
    """A model of ``cfg``'s shape with random weights, in ``dtype``: what its kernel decisions are timed on."""
    return {"kind": "random", "config": cfg.to_dict(), "seed": 0, "dtype": dtype}


def _build_plain(recipe: dict, progress) -> GPTModel:
    dtype = recipe.get("dtype", "float32")
    kind = recipe.get("kind")
    if kind == "random":
        cfg = GPTConfig.from_dict(recipe["config"])
        # A generator of its own: torch's global one is what other users' unseeded sampling draws
        # from, and reseeding it here would make their tokens repeat.
        generator = torch.Generator().manual_seed(int(recipe["seed"]))
        model = GPTModel(cfg, generator=generator)
        # initialised on the CPU (the same seed gives the same weights everywhere), then moved
        return model.to(device=default_device(), dtype=_torch_dtype(dtype)).eval()
    if kind == "bundled":
        if not BUNDLED_CHECKPOINT.is_file():
            raise WeightLoadError(
                "weights.no_bundled", "The bundled model is not in this copy of the app (playground/assets/bundled/)."
            )
        return load_checkpoint(BUNDLED_CHECKPOINT, dtype=dtype, device=default_device())
    if kind == "hub":
        tqdm_class = None
        if progress is not None:
            tqdm_class = hf_progress_tqdm(progress)
        return load_pretrained(
            recipe["repo"], dtype=dtype, device=default_device(), tqdm_class=tqdm_class, from_hub=not is_folder(recipe)
        )
    if kind == "file":
        return load_checkpoint(recipe["path"], dtype=dtype, device=default_device(), max_bytes=MAX_UPLOAD_BYTES)
    raise ValueError(f"unknown model recipe {recipe!r}")


def is_folder(recipe: dict) -> bool:
    """A hub recipe names a folder on the server: folder_recipe writes its resolved, absolute path. A relative
    name is a hub repo id, even where the server's working folder has a folder of that name (not allowed)."""
    repo = Path(str(recipe.get("repo", "")))
    return repo.is_absolute() and repo.is_dir()


def folder_family(recipe: dict) -> str | None:
    """ "llama", "qwen3" or "mistral" when ``recipe`` loads such a folder (a model with its own tokenizer.json),
    else None; read from its config.json, without building the model."""
    if not isinstance(recipe, dict) or recipe.get("kind") != "hub":
        return None
    repo = str(recipe.get("repo", ""))
    config = Path(repo) / "config.json"
    try:
        hf = json.loads(config.read_text()) if is_folder(recipe) else cached_config(repo)  # a hub repo once fetched
        family = hf.get("model_type") if hf else None
    except (OSError, ValueError, AttributeError):
        return None
    return family if family in LLAMA_FAMILY else None


def own_tokenizer_name(recipe: dict) -> str | None:
    """The folder's name when ``recipe`` loads a Llama, Qwen3 or Mistral folder, else None."""
    return Path(recipe["repo"]).name if folder_family(recipe) else None


def build_peak_bytes(recipe: dict, measure: bool | None = None) -> int:
    """What building a recipe holds at its peak, reserved before the build starts.

    Random init: float32 weights (+ the converted copy for bfloat16). Loading a checkpoint: the
    file's tensors, the float32 model they are copied into, and the converted copy. A GPT-2-layout
    model of a known config (random init, OpenAI's hub models) then holds what ``accelerate`` copies
    beside it, read from this machine's decisions for its shape (``accel.copy_plan``; ``measure``:
    whether the build measures what is not decided yet, ``build_from_recipe``'s default if None).
    """
    dtype = recipe.get("dtype", "float32")
    target = 2 if dtype in ("bfloat16", "int8") else 4  # int8 is quantized from a bfloat16 build, int8-dynamic float32
    kind = recipe.get("kind")
    if kind == "random":
        cfg = GPTConfig.from_dict(recipe["config"])
        n = count_parameters_analytic(cfg)
        return max(n * 4 + (n * target if target != 4 else 0), _accelerated_peak(cfg, dtype, measure))
    if kind == "hub" and is_folder(recipe):  # a local folder: sized by its file
        weights = Path(recipe["repo"]) / "model.safetensors"
        size = weights.stat().st_size if weights.is_file() else 0  # (the loader says what is missing)
        return 3 * size + (size * target // 2 if target != 4 else 0)
    hf = cached_config(recipe["repo"]) if kind == "hub" and recipe["repo"] not in HUB_MODELS.values() else None
    if hf and hf.get("model_type") in LLAMA_FAMILY:  # a Llama-family repo fetched before: sized by its config
        try:
            n = count_parameters_analytic(config_from_hf_llama(hf))
        except UserError:
            n = 0  # (the loader says why it cannot build it)
        return n * 4 * 2 + (n * target if target != 4 else 0)
    if kind == "hub":
        name = next((k for k, v in HUB_MODELS.items() if v == recipe["repo"]), "gpt2")
        preset = next((p for n, p in PRESETS.items() if n.split(" ")[0] == name.split(" ")[0]), PRESETS[DEFAULT_PRESET])
        n = count_parameters_analytic(preset)
        return max(n * 4 * 2 + (n * target if target != 4 else 0), _accelerated_peak(preset, dtype, measure))
    path = BUNDLED_CHECKPOINT if kind == "bundled" else Path(recipe.get("path", ""))
    size = path.stat().st_size if path.is_file() else 0
    # the file's tensors, then a float32 model (twice the file for float16 files such as the bundled one)
    return 3 * size + (size * target // 2 if target != 4 else 0)


def _accelerated_peak(cfg: GPTConfig, dtype: str, measure: bool | None) -> int:
    """The built model (in ``dtype``) and what ``accelerate`` copies beside it at its peak: one matrix at a
    time where this machine's decisions for the shape are made, a stacked Q/K/V copy kept, the measurement's
    copies where the build measures (``accel.copy_plan``). int8 models take no copy worth counting beside the
    bfloat16 or float32 model they are quantized from."""
    if dtype not in ("float32", "bfloat16"):
        return 0
    if measure is None:
        measure = not kernels.keeping_decisions()
    n = count_parameters_analytic(cfg)
    torch_dtype = _torch_dtype(dtype)
    return n * torch.empty((), dtype=torch_dtype).element_size() + copy_plan(cfg, torch_dtype, measure=measure).peak


def _torch_dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]
