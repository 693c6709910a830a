"""Hugging Face checkpoints from the hub or a downloaded folder: the models offered, download, load.

OpenAI GPT-2, and the Llama, Qwen3 and Mistral families (``hf_llama``) with the folder's own tokenizer.
The config is read and the memory estimate checked before the weights are fetched or allocated.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from tqdm.auto import tqdm

from playground.engine.checkpoint_files import check_finite, check_header, read_header, stream_weights
from playground.engine.hf_gpt2 import config_from_hf
from playground.engine.hf_llama import MODEL_TYPES, config_from_hf_llama
from playground.engine.hf_tokenizer import FolderTokenizer
from playground.engine.memory_check import check_fits
from playground.engine.model import GPTModel
from playground.engine.weight_layout import WeightLoadError, resolve_dtype
from playground.runtime.devices import default_device, resolve_device
from playground.runtime.memory import BUDGET

HUB_MODELS = {
    "gpt2": "openai-community/gpt2",
    "gpt2-medium": "openai-community/gpt2-medium",
    "gpt2-large": "openai-community/gpt2-large",
    "gpt2-xl": "openai-community/gpt2-xl",
}


def download(repo_id: str, filename: str, cache_dir, local_files_only: bool, tqdm_class) -> Path:
    from huggingface_hub import hf_hub_download  # at use: a slow import, and tests patch it on the package

    try:
        return Path(
            hf_hub_download(
                repo_id, filename, cache_dir=cache_dir, local_files_only=local_files_only, tqdm_class=tqdm_class
            )
        )
    except Exception as e:
        raise _download_error(e, repo_id, filename) from e


def _download_error(e: Exception, repo_id: str, filename: str) -> WeightLoadError:
    if _unreachable(e):  # LocalEntryNotFoundError (offline and not cached), or no connection at all
        return WeightLoadError(
            "weights.hub_offline",
            "Cannot get {filename} of {repo_id}: the Hugging Face hub is not reachable and the file is not in "
            "the local cache. Connect to the network once, or download {repo_id} (config.json + "
            "model.safetensors) into a folder and load that folder.",
            filename=filename,
            repo_id=repo_id,
        )
    return WeightLoadError(  # unknown or gated repos, server errors...
        "weights.hub_download",
        "Cannot download {filename} of {repo_id}: {kind}: {reason}",
        filename=filename,
        repo_id=repo_id,
        kind=type(e).__name__,
        reason=e,
    )


def _unreachable(error: BaseException) -> bool:
    """The hub could not be reached at all (no network, no name server, a timeout): the same advice as
    offline, in the page's language, instead of the transport's own English."""
    import httpx  # huggingface_hub's transport

    return isinstance(error, (FileNotFoundError, ConnectionError, TimeoutError, httpx.TransportError))


# What a Llama-family repo's snapshot fetches: the model's own files only. Never pickles (*.bin, *.pth: loading
# one runs code), nor a second copy of the weights (Mistral repos also hold consolidated.safetensors).
SNAPSHOT_PATTERNS = [
    "config.json",
    "generation_config.json",
    "model*.safetensors",
    "model.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
]


def snapshot(repo_id: str, cache_dir, local_files_only: bool, tqdm_class) -> Path:
    """A Llama-family repo's files (SNAPSHOT_PATTERNS) in the hub cache the GPT-2 downloads use: its folder."""
    from huggingface_hub import snapshot_download  # at use: a slow import, and tests patch it on the package

    try:
        return Path(
            snapshot_download(
                repo_id,
                cache_dir=cache_dir,
                local_files_only=local_files_only,
                allow_patterns=SNAPSHOT_PATTERNS,
                tqdm_class=tqdm_class,
            )
        )
    except Exception as e:
        raise _download_error(e, repo_id, "model.safetensors") from e


def cached_config(repo_id: str, cache_dir=None) -> dict | None:
    """A hub repo's config.json when it is in the local cache (no network), else None."""
    from huggingface_hub import try_to_load_from_cache

    try:
        path = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir)
        config = json.loads(Path(path).read_text()) if isinstance(path, str) else None
    except (OSError, ValueError):  # not a repo id, or an unreadable file: as if not cached
        return None
    return config if isinstance(config, dict) else None


def model_family(hf_config) -> str:
    """gpt2, llama, qwen3 or mistral from config.json's model_type (or, without one, its architectures);
    any other family is refused by name before its weights are fetched."""
    if not isinstance(hf_config, dict):
        return "gpt2"
    kind = hf_config.get("model_type")
    if kind is None:
        names = hf_config.get("architectures") or []
        known = {"GPT2LMHeadModel": "gpt2", "GPT2Model": "gpt2"}
        known |= {f"{k.capitalize()}ForCausalLM": k for k in MODEL_TYPES}
        unknown = [a for a in names if a not in known] if isinstance(names, list) else [str(names)]
        if not unknown:
            return known[names[0]] if names else "gpt2"  # a bare GPT-2 config.json names neither
        kind = unknown[0]
    if kind == "gpt2" or kind in MODEL_TYPES:
        return kind
    raise WeightLoadError(
        "weights.model_type",
        "config.json says model_type {kind!r}; this playground loads gpt2, {types}.",
        kind=kind,
        types=", ".join(MODEL_TYPES),
    )


def load_pretrained(
    source: str | os.PathLike,
    *,
    dtype="float32",
    device=None,
    memory_budget: int | None = None,
    cache_dir=None,
    local_files_only: bool | None = None,
    tqdm_class=None,
    attention_impl: str = "fused",
    from_hub: bool | None = None,
) -> GPTModel:
    """OpenAI GPT-2, Llama, Qwen3 or Mistral weights in the Hugging Face layout, from a folder or a hub repo id.

    The config is read and its family and memory estimate checked before the weights are fetched or
    allocated. A hub repo of the Llama family ("Qwen/Qwen3-0.6B", "meta-llama/Llama-3.2-1B") is fetched
    with ``snapshot_download`` (safetensors, config and tokenizer files only) into the hub cache, then loaded
    as a folder; ``local_files_only`` (default: ``HF_HUB_OFFLINE``) reads that cache only.
    The returned model has a ``load_report`` (what was skipped, unexpected, ...).
    ``device`` ("cpu", "cuda", "cuda:1", "mps"; default ``PLAYGROUND_DEVICE``, see playground.runtime.devices)
    is where the model is put; a device this machine lacks raises DeviceError (a ValueError).
    A Llama-family model carries its folder's tokenizer as ``model.tokenizer`` (a ``FolderTokenizer``).
    ``from_hub`` True reads ``source`` as a repo id even where a folder of that name exists (the server's
    allow-list); None: a folder when there is one.
    """
    target = resolve_device(device) if device is not None else default_device()  # a missing GPU is said first
    folder = Path(source)
    on_disk = not from_hub and folder.is_dir()
    if on_disk:
        config_path, weights_path = folder / "config.json", folder / "model.safetensors"
        for p in (config_path, weights_path):
            if not p.is_file():
                raise WeightLoadError(
                    "weights.folder_missing",
                    "{folder} has no {file}; a model folder needs config.json and model.safetensors.",
                    folder=folder,
                    file=p.name,
                )
    else:
        repo_id = str(source)
        if local_files_only is None:
            local_files_only = os.environ.get("HF_HUB_OFFLINE", "0") in ("1", "true", "True")
        config_path = download(repo_id, "config.json", cache_dir, local_files_only, tqdm_class)
    try:
        hf_config = json.loads(Path(config_path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise WeightLoadError("weights.config_json", "config.json is not readable JSON ({reason}).", reason=e) from None
    family = model_family(hf_config)
    layout = "llama" if family in MODEL_TYPES else "gpt2"
    cfg = config_from_hf_llama(hf_config) if layout == "llama" else config_from_hf(hf_config)
    if attention_impl != "fused":
        cfg = cfg.replace(attention_impl=attention_impl)
    torch_dtype = resolve_dtype(dtype)
    check_fits(cfg, str(torch_dtype).replace("torch.", ""), BUDGET if memory_budget is None else memory_budget)
    if not on_disk and layout == "llama":  # the repo's files, then loaded as the folder they make
        folder = snapshot(repo_id, cache_dir, bool(local_files_only), tqdm_class)
        weights_path = folder / "model.safetensors"
        if not weights_path.is_file():
            raise WeightLoadError(
                "weights.folder_missing",
                "{folder} has no {file}; a model folder needs config.json and model.safetensors.",
                folder=repo_id,
                file=weights_path.name,
            )
    elif not on_disk:
        weights_path = download(repo_id, "model.safetensors", cache_dir, bool(local_files_only), tqdm_class)
    tokenizer = None
    if layout == "llama":  # the folder's own vocabulary: GPT-2's BPE would give its ids other meanings
        tokenizer_path = folder / "tokenizer.json"
        if not tokenizer_path.is_file():
            raise WeightLoadError(
                "weights.folder_no_tokenizer",
                "{folder} has no tokenizer.json: a {family} model's token ids mean the words of its own tokenizer.",
                folder=folder if on_disk else repo_id,
                family=family,
            )
        tokenizer = FolderTokenizer(tokenizer_path)
    header = read_header(weights_path)
    report = check_header(header, cfg, layout, allow_unexpected=True)
    model = GPTModel(cfg)  # already checked above, in the requested dtype
    stream_weights(model, Path(weights_path), header, layout)
    model = model.to(device=target, dtype=torch_dtype).eval()
    check_finite(model, f"{folder.name if on_disk else repo_id}")
    model.load_report = report
    if tokenizer is not None:
        model.tokenizer = tokenizer
    return model


def hf_progress_tqdm(callback: Callable[[float, str], None]):
    """A tqdm class for ``hf_hub_download`` that reports (fraction, description) to ``callback``."""

    class _Reporter(tqdm):
        def update(self, n=1):
            out = super().update(n)
            if self.total:
                callback(min(1.0, self.n / self.total), str(self.desc or "downloading"))
            return out

    return _Reporter
