"""The project's own checkpoints: safetensors with the config in the header, saved and loaded.

Everything is safetensors (no pickle). Saving is atomic; loading treats the file as untrusted input
(size, header, memory budget, then the tensors, then NaN/inf).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from playground import assets
from playground.engine.checkpoint_files import (
    CheckpointHeader,
    check_activations,
    check_finite,
    check_header,
    read_header,
    stream_weights,
)
from playground.engine.config import ConfigError, GPTConfig
from playground.engine.hf_gpt2 import infer_gpt2_config, to_gpt2_state
from playground.engine.memory_check import check_fits
from playground.engine.model import GPTModel
from playground.engine.weight_layout import WeightLoadError, resolve_dtype, storable_state
from playground.runtime.devices import default_device, resolve_device
from playground.runtime.memory import BUDGET

CHECKPOINT_FORMAT = "gpt-playground/1"
DEFAULT_MAX_CHECKPOINT_BYTES = 2 * 1024**3


def save_checkpoint(model: GPTModel, path, *, dtype=None, metadata: dict | None = None, layout="playground") -> Path:
    """Safetensors with the config in the header. Tied weights are stored once and re-tied on load.
    ``dtype`` (e.g. "bfloat16") stores a smaller copy; the model itself is not changed.

    ``layout="gpt2"`` stores the tensors under Hugging Face GPT-2's names and orientations, so the
    file is also a ``model.safetensors`` transformers' ``GPT2LMHeadModel`` loads (beside the
    ``config.json`` of ``hf_gpt2.gpt2_config_dict``); the header still carries the exact config."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    store = resolve_dtype(dtype) if dtype is not None else None
    state = storable_state(model)
    if layout == "gpt2":
        state = to_gpt2_state(state, model.cfg)
    elif layout != "playground":
        raise ValueError(f"layout must be 'playground' or 'gpt2', got {layout!r}")
    tensors = {
        k: (v.detach().to(store) if store is not None else v.detach()).cpu().contiguous() for k, v in state.items()
    }
    # "format": "pt" is what transformers expects of a model.safetensors header.
    header = {"format": "pt" if layout == "gpt2" else CHECKPOINT_FORMAT, "config": model.cfg.to_json()}
    for k, v in (metadata or {}).items():
        header[str(k)] = v if isinstance(v, str) else json.dumps(v)
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata=header)
    os.replace(tmp, path)  # a crash mid-write never leaves a half checkpoint under the real name
    return path


def read_checkpoint_metadata(path) -> dict:
    try:
        with safe_open(str(path), framework="pt") as f:
            return dict(f.metadata() or {})
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise WeightLoadError(
            "weights.unreadable",
            "{name} is not a readable safetensors file ({reason}).",
            name=Path(path).name,
            reason=e,
        ) from None


def load_checkpoint(
    path,
    *,
    dtype="float32",
    device=None,
    memory_budget: int | None = None,
    max_bytes: int | None = DEFAULT_MAX_CHECKPOINT_BYTES,
    name: str | None = None,
) -> GPTModel:
    """A checkpoint written by ``save_checkpoint`` (or a bare HF GPT-2 ``model.safetensors``, whose
    config is then inferred from the shapes, assuming GPT-2's 64-dimensional heads).

    Untrusted input, in order of cost: the size; the header (keys, shapes, dtypes, config) against
    the model the config describes, on the meta device; the memory budget; only then the model is
    built and the tensors streamed in one at a time; finally NaN/inf are refused, and so are finite
    weights whose probe forward overflows (``check_activations``). ``name`` is what
    messages call the file (an upload's original name; default: the file's own name). ``device`` as
    for ``load_pretrained`` (default ``PLAYGROUND_DEVICE``)."""
    target = resolve_device(device) if device is not None else default_device()  # a missing GPU is said first
    path = Path(path)
    if not path.is_file():
        raise WeightLoadError("weights.no_checkpoint", "No checkpoint at {path}.", path=path)
    header = read_header(path, max_bytes=max_bytes, name=name)
    cfg, layout = checkpoint_config(header)
    report = check_header(header, cfg, layout, allow_unexpected=False)
    torch_dtype = resolve_dtype(dtype)
    check_fits(cfg, str(torch_dtype).replace("torch.", ""), BUDGET if memory_budget is None else memory_budget)
    model = GPTModel(cfg)
    stream_weights(model, path, header, layout)
    model = model.to(device=target, dtype=torch_dtype).eval()
    check_finite(model, header.name)
    check_activations(model, header.name)
    model.load_report = report
    model.checkpoint_metadata = {k: v for k, v in header.metadata.items() if k not in ("config", "format")}
    return model


def load_bundled(*, dtype="float32", device=None) -> GPTModel:
    """The bundled model that ships with the package (``playground/assets/bundled``: a 7.7M-parameter
    GPT-2 trained on Tiny Shakespeare), found wherever the package is installed."""
    return load_checkpoint(assets.path("bundled", "model.safetensors"), dtype=dtype, device=device)


def checkpoint_config(header: CheckpointHeader) -> tuple[GPTConfig, str]:
    """The config a checkpoint declares (or, for a bare GPT-2 file, implies) and its key layout."""
    layout = "gpt2" if any(k.removeprefix("transformer.") == "wte.weight" for k in header.shapes) else "playground"
    if "config" in header.metadata:
        try:
            return GPTConfig.from_dict(json.loads(header.metadata["config"])), layout
        except (json.JSONDecodeError, TypeError, AttributeError) as e:
            raise WeightLoadError(
                "weights.checkpoint_config_json", "The checkpoint's config is not valid JSON ({reason}).", reason=e
            ) from None
        except ConfigError as e:
            raise WeightLoadError(
                "weights.checkpoint_config", "The checkpoint's config is invalid: {reason}", reason=e
            ) from None
    if layout == "gpt2":
        return infer_gpt2_config(header.shapes), "gpt2"
    raise WeightLoadError(
        "weights.no_config",
        "This safetensors file has no GPT Playground config and is not a GPT-2 checkpoint; save it with "
        "playground.save_checkpoint (or the app's export).",
    )
