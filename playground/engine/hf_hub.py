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
        if _unreachable(e):  # LocalEntryNotFoundError (offline and not cached), or no connection at all
            raise WeightLoadError(
                "weights.hub_offline",
                "Cannot get {filename} of {repo_id}: the Hugging Face hub is not reachable and the file is not in "
                "the local cache. Connect to the network once, or download {repo_id} (config.json + "
                "model.safetensors) into a folder and load that folder.",
                filename=filename,
                repo_id=repo_id,
            ) from e
        raise WeightLoadError(  # unknown or gated repos, server errors...
            "weights.hub_download",
            "Cannot download {filename} of {repo_id}: {kind}: {reason}",
            filename=filename,
            repo_id=repo_id,
            kind=type(e).__name__,
            reason=e,
        ) from e


def _unreachable(error: BaseException) -> bool:
    """The hub could not be reached at all (no network, no name server, a timeout): the same advice as
    offline, in the page's language, instead of the transport's own English."""
    import httpx  # huggingface_hub's transport

    return isinstance(error, (FileNotFoundError, ConnectionError, TimeoutError, httpx.TransportError))


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
) -> GPTModel:
    """OpenAI GPT-2, Llama, Qwen3 or Mistral weights in the Hugging Face layout, from a folder or a hub repo id.

    The config is read first and the memory estimate checked before the weights are fetched or
    allocated. The returned model has a ``load_report`` (what was skipped, unexpected, ...).
    ``device`` ("cpu", "cuda", "cuda:1", "mps"; default ``PLAYGROUND_DEVICE``, see playground.runtime.devices)
    is where the model is put; a device this machine lacks raises DeviceError (a ValueError).
    A Llama-family model carries its folder's tokenizer as ``model.tokenizer`` (a ``FolderTokenizer``).
    """
    target = resolve_device(device) if device is not None else default_device()  # a missing GPU is said first
    folder = Path(source)
    if folder.is_dir():
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
    family = hf_config.get("model_type", "gpt2") if isinstance(hf_config, dict) else "gpt2"
    layout = "llama" if family in MODEL_TYPES else "gpt2"
    cfg = config_from_hf_llama(hf_config) if layout == "llama" else config_from_hf(hf_config)
    tokenizer = None
    if layout == "llama":  # the folder's own vocabulary: GPT-2's BPE would give its ids other meanings
        tokenizer_path = folder / "tokenizer.json" if folder.is_dir() else None
        if tokenizer_path is None:
            tokenizer_path = download(repo_id, "tokenizer.json", cache_dir, bool(local_files_only), tqdm_class)
        if not tokenizer_path.is_file():
            raise WeightLoadError(
                "weights.folder_no_tokenizer",
                "{folder} has no tokenizer.json: a {family} model's token ids mean the words of its own tokenizer.",
                folder=folder,
                family=family,
            )
        tokenizer = FolderTokenizer(tokenizer_path)
    if attention_impl != "fused":
        cfg = cfg.replace(attention_impl=attention_impl)
    torch_dtype = resolve_dtype(dtype)
    check_fits(cfg, str(torch_dtype).replace("torch.", ""), BUDGET if memory_budget is None else memory_budget)
    if not folder.is_dir():
        weights_path = download(repo_id, "model.safetensors", cache_dir, bool(local_files_only), tqdm_class)
    header = read_header(weights_path)
    report = check_header(header, cfg, layout, allow_unexpected=True)
    model = GPTModel(cfg)  # already checked above, in the requested dtype
    stream_weights(model, Path(weights_path), header, layout)
    model = model.to(device=target, dtype=torch_dtype).eval()
    check_finite(model, f"{repo_id if not folder.is_dir() else folder.name}")
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
