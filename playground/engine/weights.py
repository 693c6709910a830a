"""Weights in and out: OpenAI GPT-2 in the Hugging Face layout, and the project's own checkpoints.

Everything is safetensors (no pickle). The GPT-2 import is one table of key pairs plus a short list
of Conv1D weights to transpose; every tensor is shape-checked against the model we build, and what
does not fit is reported by name instead of failing deep inside ``load_state_dict``.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from playground.engine.config import ConfigError, GPTConfig, check_fits
from playground.engine.model import GPTModel
from playground.errors import UserError
from playground.runtime.devices import default_device, resolve_device  # noqa: F401 -- default_device was defined here before
from playground.runtime.memory import BUDGET

CHECKPOINT_FORMAT = "gpt-playground/1"
HUB_MODELS = {
    "gpt2 (124M)": "openai-community/gpt2",
    "gpt2-medium (355M)": "openai-community/gpt2-medium",
    "gpt2-large (774M)": "openai-community/gpt2-large",
    "gpt2-xl (1558M)": "openai-community/gpt2-xl",
}
DEFAULT_MAX_CHECKPOINT_BYTES = 2 * 1024**3

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class WeightLoadError(UserError):
    """Weights that cannot be loaded; the message says what is wrong, by key and shape."""


@dataclass
class LoadReport:
    missing: list[str] = field(default_factory=list)  # model keys the file does not provide
    unexpected: list[str] = field(default_factory=list)  # file keys the model has no place for
    mismatched: list[tuple[str, tuple, tuple]] = field(default_factory=list)  # (key, file, model)
    skipped: list[str] = field(default_factory=list)  # known buffers deliberately ignored

    @property
    def ok(self) -> bool:
        return not (self.missing or self.mismatched)

    def summary(self, limit: int = 5) -> str:
        parts = []
        if self.missing:
            parts.append(
                f"{len(self.missing)} missing ({', '.join(self.missing[:limit])}{'…' if len(self.missing) > limit else ''})"
            )
        if self.mismatched:
            shown = ", ".join(f"{k}: file {list(a)} vs model {list(b)}" for k, a, b in self.mismatched[:limit])
            parts.append(f"{len(self.mismatched)} with the wrong shape ({shown})")
        if self.unexpected:
            parts.append(
                f"{len(self.unexpected)} unexpected ({', '.join(self.unexpected[:limit])}{'…' if len(self.unexpected) > limit else ''})"
            )
        return "; ".join(parts) or "all tensors matched"


def resolve_dtype(dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return _DTYPES[str(dtype).replace("torch.", "")]
    except KeyError:
        raise ValueError(f"unsupported dtype {dtype!r}; use float32, bfloat16 or float16") from None


def expected_shapes(cfg: GPTConfig) -> dict[str, tuple]:
    """Every tensor a model of this config stores, built on the meta device (no memory)."""
    return dict(_expected_shapes(cfg))


@functools.lru_cache(maxsize=32)
def _expected_shapes(cfg: GPTConfig) -> dict[str, tuple]:
    with torch.device("meta"):  # ~0.7 s for GPT-2 XL on a shared core, hence the cache
        model = GPTModel(cfg)
    return {k: tuple(v.shape) for k, v in _storable_state(model).items()}


def _storable_state(model: GPTModel) -> dict[str, torch.Tensor]:
    from playground.engine.quantize import float_state_dict, is_int8

    # An int8 model is stored as the float weights its int8 values and scales stand for: the
    # checkpoint format (and every loader) stays that of the float model.
    state = float_state_dict(model) if is_int8(model) else model.state_dict()
    if model.cfg.tie_weights:
        state.pop("out_head.weight", None)  # the same tensor as tok_emb.weight; re-tied on load
    return state


# ----------------------------------------------------------------------------------------------
# Fused <-> per-head attention layouts (same numbers, different module structure)


def fused_to_per_head(tensors: dict[str, torch.Tensor], cfg: GPTConfig) -> dict[str, torch.Tensor]:
    out = {}
    pattern = re.compile(r"^(trf_blocks\.\d+\.att)\.(W_query|W_key|W_value)\.(weight|bias)$")
    for key, value in tensors.items():
        m = pattern.match(key)
        if not m:
            out[key] = value
            continue
        prefix, proj, kind = m.groups()
        for h, chunk in enumerate(value.split(cfg.head_dim, dim=0)):  # rows of a head
            out[f"{prefix}.heads.{h}.{proj}.{kind}"] = chunk.clone()
    return out


def per_head_to_fused(tensors: dict[str, torch.Tensor], cfg: GPTConfig) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    grouped: dict[str, dict[int, torch.Tensor]] = {}
    pattern = re.compile(r"^(trf_blocks\.\d+\.att)\.heads\.(\d+)\.(W_query|W_key|W_value)\.(weight|bias)$")
    for key, value in tensors.items():
        m = pattern.match(key)
        if m:
            prefix, h, proj, kind = m.groups()
            grouped.setdefault(f"{prefix}.{proj}.{kind}", {})[int(h)] = value
        else:
            out[key] = value
    for key, heads in grouped.items():
        out[key] = torch.cat([heads[h] for h in sorted(heads)], dim=0)
    return out


# ----------------------------------------------------------------------------------------------
# OpenAI GPT-2 (Hugging Face layout)

# HF key (per layer, "{i}" = layer) -> our key; Conv1D weights are stored [in, out] and transposed.
_GPT2_KEY_MAP = {
    "wte.weight": "tok_emb.weight",
    "wpe.weight": "pos_emb.weight",
    "ln_f.weight": "final_norm.scale",
    "ln_f.bias": "final_norm.shift",
    "h.{i}.ln_1.weight": "trf_blocks.{i}.norm1.scale",
    "h.{i}.ln_1.bias": "trf_blocks.{i}.norm1.shift",
    "h.{i}.ln_2.weight": "trf_blocks.{i}.norm2.scale",
    "h.{i}.ln_2.bias": "trf_blocks.{i}.norm2.shift",
    "h.{i}.attn.c_proj.weight": "trf_blocks.{i}.att.out_proj.weight",
    "h.{i}.attn.c_proj.bias": "trf_blocks.{i}.att.out_proj.bias",
    "h.{i}.mlp.c_fc.weight": "trf_blocks.{i}.ff.layers.0.weight",
    "h.{i}.mlp.c_fc.bias": "trf_blocks.{i}.ff.layers.0.bias",
    "h.{i}.mlp.c_proj.weight": "trf_blocks.{i}.ff.layers.2.weight",
    "h.{i}.mlp.c_proj.bias": "trf_blocks.{i}.ff.layers.2.bias",
}
_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
_SKIPPED_BUFFERS = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")
_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def config_from_hf(hf: dict) -> GPTConfig:
    # Options of transformers' GPT2Config that change the attention maths this model implements.
    if hf.get("scale_attn_by_inverse_layer_idx", False) or not hf.get("scale_attn_weights", True):
        raise WeightLoadError(
            "weights.attn_scaling",
            "config.json sets scale_attn_by_inverse_layer_idx or scale_attn_weights=false: this attention "
            "scaling is not GPT-2's, and the playground's model does not implement it.",
        )
    try:
        activation = _ACTIVATIONS[hf.get("activation_function", "gelu_new")]
    except KeyError:
        raise WeightLoadError(
            "weights.activation",
            "unsupported activation_function {activation!r}",
            activation=hf.get("activation_function"),
        ) from None
    try:
        return GPTConfig(
            vocab_size=int(hf["vocab_size"]),
            context_length=int(hf.get("n_positions", hf.get("n_ctx", 1024))),
            emb_dim=int(hf["n_embd"]),
            n_heads=int(hf["n_head"]),
            n_layers=int(hf["n_layer"]),
            drop_rate=0.0,
            qkv_bias=True,
            tie_weights=bool(hf.get("tie_word_embeddings", True)),
            activation=activation,
            ln_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
        )
    except KeyError as e:
        raise WeightLoadError(
            "weights.config_field", "config.json lacks the GPT-2 field {field!r}", field=e.args[0]
        ) from None


def convert_gpt2_state(hf_tensors: dict[str, torch.Tensor], cfg: GPTConfig, report: LoadReport) -> dict:
    """HF GPT-2 tensors (with or without the ``transformer.`` prefix) -> our names and layouts."""
    out: dict[str, torch.Tensor] = {}
    templates = {}
    for hf_key, ours in _GPT2_KEY_MAP.items():
        if "{i}" in hf_key:
            for i in range(cfg.n_layers):
                templates[hf_key.format(i=i)] = ours.format(i=i)
        else:
            templates[hf_key] = ours
    d = cfg.emb_dim
    for raw_key, value in hf_tensors.items():
        key = raw_key.removeprefix("transformer.")
        if _SKIPPED_BUFFERS.match(key):
            report.skipped.append(raw_key)
            continue
        if key == "lm_head.weight":
            if cfg.tie_weights:
                report.skipped.append(raw_key)  # the same numbers as wte.weight
            else:
                out["out_head.weight"] = value
            continue
        if key.endswith(_CONV1D) and value.dim() == 2:
            value = value.t()
        m = re.match(r"^h\.(\d+)\.attn\.c_attn\.(weight|bias)$", key)
        if m:
            layer, kind = m.groups()
            if value.shape[0] != 3 * d:
                report.mismatched.append((raw_key, tuple(value.shape), (3 * d,) + tuple(value.shape[1:])))
                continue
            q, k, v = value.split(d, dim=0)
            for name, part in (("W_query", q), ("W_key", k), ("W_value", v)):
                out[f"trf_blocks.{layer}.att.{name}.{kind}"] = part.contiguous()
            continue
        if key in templates:
            out[templates[key]] = value.contiguous()
        else:
            report.unexpected.append(raw_key)
    if cfg.attention_impl == "per_head":
        out = fused_to_per_head(out, cfg)
    return out


STORAGE_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


@dataclass
class CheckpointHeader:
    """What a safetensors file declares, read from its header alone (nothing is allocated)."""

    name: str  # the name to show the user (an upload's original name, not the server's hash name)
    metadata: dict
    shapes: dict[str, tuple]
    dtypes: dict[str, str]  # safetensors dtype codes: "F32", "F16", ...


def read_header(path, *, max_bytes: int | None = None, name: str | None = None) -> CheckpointHeader:
    """Keys, shapes, dtypes and metadata of a safetensors file; WeightLoadError on anything malformed.
    safetensors checks at open that the header is valid JSON and that the data covers the file."""
    path = Path(path)
    name = Path(name).name if name else path.name
    size = path.stat().st_size
    if max_bytes is not None and size > max_bytes:
        raise WeightLoadError(
            "weights.file_too_big",
            "{name} is {mb:.1f} MB, over the {limit_mb:.0f} MB limit for checkpoints.",
            name=name,
            mb=size / 1000000.0,
            limit_mb=max_bytes / 1000000.0,
        )
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = dict(f.metadata() or {})
            shapes, dtypes = {}, {}
            for key in f.keys():
                piece = f.get_slice(key)
                shapes[key], dtypes[key] = tuple(piece.get_shape()), str(piece.get_dtype())
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise WeightLoadError(
            "weights.unreadable", "{name} is not a readable safetensors file ({reason}).", name=name, reason=e
        ) from None
    unsupported = [f"{k} ({dtypes[k]})" for k in sorted(dtypes) if dtypes[k] not in STORAGE_DTYPES]
    if unsupported:
        raise WeightLoadError(
            "weights.not_float",
            "{name}: {n} tensor{plural} not stored as floating-point numbers ({first}); weights must be F32, "
            "F16, BF16 or F64.",
            name=name,
            n=len(unsupported),
            plural="s" if len(unsupported) > 1 else "",
            first=_first(unsupported),
        )
    return CheckpointHeader(name, metadata, shapes, dtypes)


def _first(items: list[str], limit: int = 5) -> str:
    return ", ".join(items[:limit]) + ("…" if len(items) > limit else "")


def _meta_tensors(header: CheckpointHeader) -> dict[str, torch.Tensor]:
    """Shape-only stand-ins for the file's tensors: conversion and checks run on them for free."""
    return {
        k: torch.empty(shape, dtype=STORAGE_DTYPES[header.dtypes[k]], device="meta")
        for k, shape in header.shapes.items()
    }


def check_header(header: CheckpointHeader, cfg: GPTConfig, layout: str, *, allow_unexpected: bool) -> LoadReport:
    """Every tensor the model needs is in the file with the right shape (and, for untrusted files,
    nothing else): checked on the header alone, before the model or any tensor is allocated."""
    report = LoadReport()
    tensors = _meta_tensors(header)
    if layout == "gpt2":
        tensors = convert_gpt2_state(tensors, cfg, report)
    expected = expected_shapes(cfg)
    report.unexpected.extend(sorted(tensors.keys() - expected.keys()))
    report.missing.extend(sorted(expected.keys() - tensors.keys()))
    for key in sorted(expected.keys() & tensors.keys()):
        if tuple(tensors[key].shape) != expected[key]:
            report.mismatched.append((key, tuple(tensors[key].shape), expected[key]))
    if not report.ok or (report.unexpected and not allow_unexpected):
        raise WeightLoadError(
            "weights.do_not_fit", "The weights do not fit this model: {report}.", report=report.summary()
        )
    return report


def _stream_weights(model: GPTModel, path: Path, header: CheckpointHeader, layout: str) -> None:
    """Copy the file's tensors into the model one at a time, through safetensors' memory map: the
    only memory allocated is the model (plus a converted tensor for float16 files or GPT-2 layouts)."""
    cfg = model.cfg
    targets = _storable_state(model)
    filled = set()
    try:
        with safe_open(str(path), framework="pt") as f, torch.no_grad():
            for key in f.keys():
                if layout == "gpt2" and _SKIPPED_BUFFERS.match(key.removeprefix("transformer.")):
                    continue  # causal-mask buffers: 4 MB a layer that is never used
                tensors = {key: f.get_tensor(key)}
                if layout == "gpt2":
                    tensors = convert_gpt2_state(tensors, cfg, LoadReport())  # already reported by check_header
                for ours, value in tensors.items():
                    if ours in targets:
                        targets[ours].copy_(value.to(targets[ours].dtype))
                        filled.add(ours)
                del tensors
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise WeightLoadError(
            "weights.unreadable", "{name} is not a readable safetensors file ({reason}).", name=header.name, reason=e
        ) from None
    if filled != targets.keys():  # check_header makes this unreachable; never hand out random weights
        raise WeightLoadError(
            "weights.not_filled",
            "{name}: {first} not filled.",
            name=header.name,
            first=_first(sorted(targets.keys() - filled)),
        )


def check_file_finite(path, header: CheckpointHeader) -> None:
    """check_finite on a file, one tensor in memory at a time (for checking an upload before keeping
    it). Names the file's own keys."""
    bad = []
    try:
        with safe_open(str(path), framework="pt") as f:
            for key in f.keys():
                if count := _non_finite_count(f.get_tensor(key)):
                    bad.append(f"{key} ({count:,} value{'s' if count != 1 else ''})")
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise WeightLoadError(
            "weights.unreadable", "{name} is not a readable safetensors file ({reason}).", name=header.name, reason=e
        ) from None
    _refuse_non_finite(bad, header.name)


def check_finite(model: GPTModel, name: str = "The weights") -> None:
    """Refuse weights holding NaN or ±inf (they would turn every logit into NaN), naming each tensor
    and how many of its values are bad. One pass over the parameters, in their final dtype."""
    bad = []
    with torch.no_grad():
        for key, value in _storable_state(model).items():
            if count := _non_finite_count(value):
                bad.append(f"{key} ({count:,} value{'s' if count != 1 else ''})")
    _refuse_non_finite(bad, name)


def _non_finite_count(value: torch.Tensor) -> int:
    """How many values are NaN or ±inf. Any NaN or inf makes the sum non-finite, so one fast
    reduction clears a healthy tensor (30 ms for GPT-2's embedding, against 1.6 s for isfinite);
    only a tensor whose sum is not finite (bad, or finite values overflowing the sum) is counted
    element by element."""
    if not value.is_floating_point() or bool(torch.isfinite(value.sum())):
        return 0
    return int((~torch.isfinite(value)).sum())


def _refuse_non_finite(bad: list[str], name: str) -> None:
    if bad:
        raise WeightLoadError(
            "weights.non_finite",
            "{name}: {n} tensor{verb} NaN or infinity: {first}. Such weights turn every prediction into NaN; "
            "the file is refused.",
            name=name,
            n=len(bad),
            verb="s contain" if len(bad) > 1 else " contains",
            first=_first(bad),
        )


def _download(repo_id: str, filename: str, cache_dir, local_files_only: bool, tqdm_class) -> Path:
    from huggingface_hub import hf_hub_download

    try:
        return Path(
            hf_hub_download(
                repo_id, filename, cache_dir=cache_dir, local_files_only=local_files_only, tqdm_class=tqdm_class
            )
        )
    except FileNotFoundError as e:  # LocalEntryNotFoundError: offline and not cached
        raise WeightLoadError(
            "weights.hub_offline",
            "Cannot get {filename} of {repo_id}: the Hugging Face hub is not reachable and the file is not in "
            "the local cache. Connect to the network once, or download {repo_id} (config.json + "
            "model.safetensors) into a folder and load that folder.",
            filename=filename,
            repo_id=repo_id,
        ) from e
    except Exception as e:  # network errors, unknown repos, gated repos...
        raise WeightLoadError(
            "weights.hub_download",
            "Cannot download {filename} of {repo_id}: {kind}: {reason}",
            filename=filename,
            repo_id=repo_id,
            kind=type(e).__name__,
            reason=e,
        ) from e


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
    """OpenAI GPT-2 weights in the Hugging Face layout, from a folder or a hub repo id.

    The config is read first and the memory estimate checked before the weights are fetched or
    allocated. The returned model has a ``load_report`` (what was skipped, unexpected, ...).
    ``device`` ("cpu", "cuda", "cuda:1", "mps"; default ``PLAYGROUND_DEVICE``, see playground.runtime.devices)
    is where the model is put; a device this machine lacks raises DeviceError (a ValueError).
    """
    target = resolve_device(device) if device is not None else default_device()  # a missing GPU is said first
    folder = Path(source)
    if folder.is_dir():
        config_path, weights_path = folder / "config.json", folder / "model.safetensors"
        for p in (config_path, weights_path):
            if not p.is_file():
                raise WeightLoadError(
                    "weights.folder_missing",
                    "{folder} has no {file}; a GPT-2 folder needs config.json and model.safetensors.",
                    folder=folder,
                    file=p.name,
                )
    else:
        repo_id = str(source)
        if local_files_only is None:
            local_files_only = os.environ.get("HF_HUB_OFFLINE", "0") in ("1", "true", "True")
        config_path = _download(repo_id, "config.json", cache_dir, local_files_only, tqdm_class)
    try:
        hf_config = json.loads(Path(config_path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise WeightLoadError("weights.config_json", "config.json is not readable JSON ({reason}).", reason=e) from None
    cfg = config_from_hf(hf_config)
    if attention_impl != "fused":
        cfg = cfg.replace(attention_impl=attention_impl)
    torch_dtype = resolve_dtype(dtype)
    check_fits(cfg, str(torch_dtype).replace("torch.", ""), BUDGET if memory_budget is None else memory_budget)
    if not folder.is_dir():
        weights_path = _download(repo_id, "model.safetensors", cache_dir, bool(local_files_only), tqdm_class)
    header = read_header(weights_path)
    report = check_header(header, cfg, "gpt2", allow_unexpected=True)
    model = GPTModel(cfg)  # already checked above, in the requested dtype
    _stream_weights(model, Path(weights_path), header, "gpt2")
    model = model.to(device=target, dtype=torch_dtype).eval()
    check_finite(model, f"{repo_id if not folder.is_dir() else folder.name}")
    model.load_report = report
    return model


# ----------------------------------------------------------------------------------------------
# The project's own checkpoints


def save_checkpoint(model: GPTModel, path, *, dtype=None, metadata: dict | None = None) -> Path:
    """Safetensors with the config in the header. Tied weights are stored once and re-tied on load.
    ``dtype`` (e.g. "bfloat16") stores a smaller copy; the model itself is not changed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    store = resolve_dtype(dtype) if dtype is not None else None
    tensors = {
        k: (v.detach().to(store) if store is not None else v.detach()).cpu().contiguous()
        for k, v in _storable_state(model).items()
    }
    header = {"format": CHECKPOINT_FORMAT, "config": model.cfg.to_json()}
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
    built and the tensors streamed in one at a time; finally NaN/inf are refused. ``name`` is what
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
    _stream_weights(model, path, header, layout)
    model = model.to(device=target, dtype=torch_dtype).eval()
    check_finite(model, header.name)
    model.load_report = report
    model.checkpoint_metadata = {k: v for k, v in header.metadata.items() if k not in ("config", "format")}
    return model


def checkpoint_config(header: CheckpointHeader) -> tuple[GPTConfig, str]:
    """The config a checkpoint declares (or, for a bare GPT-2 file, implies) and its key layout."""
    if "config" in header.metadata:
        try:
            return GPTConfig.from_dict(json.loads(header.metadata["config"])), "playground"
        except (json.JSONDecodeError, TypeError, AttributeError) as e:
            raise WeightLoadError(
                "weights.checkpoint_config_json", "The checkpoint's config is not valid JSON ({reason}).", reason=e
            ) from None
        except ConfigError as e:
            raise WeightLoadError(
                "weights.checkpoint_config", "The checkpoint's config is invalid: {reason}", reason=e
            ) from None
    if any(k.removeprefix("transformer.") == "wte.weight" for k in header.shapes):
        return _infer_gpt2_config(header.shapes), "gpt2"
    raise WeightLoadError(
        "weights.no_config",
        "This safetensors file has no GPT Playground config and is not a GPT-2 checkpoint; save it with "
        "playground.save_checkpoint (or the app's export).",
    )


def _infer_gpt2_config(shapes: dict[str, tuple]) -> GPTConfig:
    plain = {k.removeprefix("transformer."): v for k, v in shapes.items()}
    try:
        vocab, d = plain["wte.weight"]
        (context, _) = plain["wpe.weight"]
    except (KeyError, ValueError):
        raise WeightLoadError(
            "weights.gpt2_no_embeddings", "GPT-2 checkpoint without wte/wpe embeddings of rank 2."
        ) from None
    layers = {int(m.group(1)) for k in plain if (m := re.match(r"^h\.(\d+)\.", k))}
    if not layers:
        raise WeightLoadError("weights.gpt2_no_layers", "GPT-2 checkpoint without any transformer layer (h.N.*).")
    try:
        return GPTConfig(
            vocab_size=int(vocab),
            context_length=int(context),
            emb_dim=int(d),
            n_heads=max(1, int(d) // 64),
            n_layers=max(layers) + 1,
            tie_weights="lm_head.weight" not in plain,
        )
    except ConfigError as e:
        raise WeightLoadError(
            "weights.gpt2_shape", "GPT-2 checkpoint with an unusable shape: {reason}", reason=e
        ) from None


def hf_progress_tqdm(callback: Callable[[float, str], None]):
    """A tqdm class for ``hf_hub_download`` that reports (fraction, description) to ``callback``."""
    from tqdm.auto import tqdm

    class _Reporter(tqdm):
        def update(self, n=1):
            out = super().update(n)
            if self.total:
                callback(min(1.0, self.n / self.total), str(self.desc or "downloading"))
            return out

    return _Reporter
