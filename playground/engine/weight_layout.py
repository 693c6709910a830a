"""What a model's weights are: the tensors a config stores, their dtypes and attention layouts.

Also the report of what a weights file lacks or has in the wrong shape (LoadReport), and the error
that names it (WeightLoadError).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import torch

from playground.engine.config import GPTConfig
from playground.engine.model import GPTModel
from playground.engine.quantize import float_state_dict, is_int8
from playground.errors import UserError

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
    return {k: tuple(v.shape) for k, v in storable_state(model).items()}


def storable_state(model: GPTModel) -> dict[str, torch.Tensor]:
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
