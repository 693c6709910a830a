"""Safetensors files as untrusted input: header checks, streaming one tensor at a time, NaN/inf refusal.

Every tensor is shape-checked against the model the config builds, on the header alone, before the
model or any tensor is allocated; what does not fit is reported by name instead of failing deep
inside ``load_state_dict``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from playground.engine.config import GPTConfig
from playground.engine.hf_gpt2 import convert_gpt2_state, is_skipped_buffer
from playground.engine.hf_llama import convert_llama_state
from playground.engine.model import GPTModel
from playground.engine.weight_layout import LoadReport, WeightLoadError, expected_shapes, storable_state

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
    tensors = _convert(tensors, cfg, layout, report)
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


def stream_weights(model: GPTModel, path: Path, header: CheckpointHeader, layout: str) -> None:
    """Copy the file's tensors into the model one at a time, through safetensors' memory map: the
    only memory allocated is the model (plus a converted tensor for float16 files or GPT-2 layouts)."""
    cfg = model.cfg
    targets = storable_state(model)
    filled = set()
    try:
        with safe_open(str(path), framework="pt") as f, torch.no_grad():
            for key in f.keys():
                if layout == "gpt2" and is_skipped_buffer(key):
                    continue  # causal-mask buffers: 4 MB a layer that is never used
                tensors = _convert({key: f.get_tensor(key)}, cfg, layout, LoadReport())  # reported by check_header
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


def _convert(tensors: dict, cfg: GPTConfig, layout: str, report: LoadReport) -> dict:
    """The file's tensors under our names: "gpt2" and "llama" (Llama, Qwen3, Mistral) are Hugging Face's."""
    if layout == "gpt2":
        return convert_gpt2_state(tensors, cfg, report)
    if layout == "llama":
        return convert_llama_state(tensors, cfg, report)
    return tensors


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
        for key, value in storable_state(model).items():
            if count := _non_finite_count(value):
                bad.append(f"{key} ({count:,} value{'s' if count != 1 else ''})")
    _refuse_non_finite(bad, name)


PROBE_TOKENS = 8  # a few positions: enough for huge weights to overflow, cheap even for GPT-2 XL


def check_activations(model: GPTModel, name: str = "The weights") -> None:
    """Refuse finite weights that still overflow: a short probe forward (token ids 0, 1, ...) must
    give finite logits, or every generation with the model would fail."""
    n = min(PROBE_TOKENS, model.cfg.context_length)
    device = next(model.parameters()).device
    with torch.no_grad():
        logits = model(torch.arange(n, device=device).remainder(model.cfg.vocab_size)[None])
        if bool(torch.isfinite(logits).all()):
            return
        largest = max(float(p.detach().abs().max()) for p in model.parameters() if p.is_floating_point())
    raise WeightLoadError(
        "weights.activations_not_finite",
        "{name}: every weight is finite, but a probe through the model on {n} tokens gives NaN or infinite "
        "logits (the largest weight is {largest:.3g}: some weights are far too large for {dtype}). Every "
        "generation would fail; the file is refused.",
        name=name,
        n=n,
        largest=largest,
        dtype=str(next(model.parameters()).dtype).replace("torch.", ""),
    )


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
