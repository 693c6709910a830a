"""GPT Playground: a from-scratch GPT-2 you can look inside.

The names below are the public Python API (README, "Use it from Python"). They load on first use,
so importing a leaf such as ``playground.figures`` does not pull in torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "playground.engine.config": ("ConfigError", "GPTConfig"),
    "playground.engine.presets": ("DEFAULT_PRESET", "PRESETS", "get_preset"),
    "playground.engine.sizes": ("estimate_memory_bytes",),
    "playground.engine.memory_check": ("check_memory",),
    "playground.accel": ("accelerate", "optimize_for_decode"),
    "playground.engine.kv_cache": ("KVCache",),
    "playground.engine.attention": ("AttentionTrace",),
    "playground.engine.model": ("GPTModel",),
    "playground.engine.quantize": ("QuantizeError", "quantize_int8"),
    "playground.engine.sampling": ("Generation", "GenerationStep", "generate"),
    "playground.engine.tokenizer": ("load_tokenizer",),
    "playground.engine.hf_hub": ("load_pretrained",),
    "playground.engine.weight_layout": ("LoadReport", "WeightLoadError"),
    "playground.engine.weights": ("load_bundled", "load_checkpoint", "save_checkpoint"),
    "playground.inside.inspection": ("count_parameters", "module_tree", "parameter_breakdown"),
    "playground.errors": ("UserError",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = [
    "AttentionTrace",
    "ConfigError",
    "DEFAULT_PRESET",
    "GPTConfig",
    "GPTModel",
    "Generation",
    "GenerationStep",
    "KVCache",
    "LoadReport",
    "PRESETS",
    "QuantizeError",
    "UserError",
    "WeightLoadError",
    "accelerate",
    "check_memory",
    "count_parameters",
    "estimate_memory_bytes",
    "generate",
    "get_preset",
    "load_bundled",
    "load_checkpoint",
    "load_pretrained",
    "load_tokenizer",
    "module_tree",
    "optimize_for_decode",
    "parameter_breakdown",
    "quantize_int8",
    "save_checkpoint",
]


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'playground' has no attribute {name!r}")
    value = getattr(importlib.import_module(_MODULE_OF[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from playground.accel import accelerate, optimize_for_decode
    from playground.engine.attention import AttentionTrace
    from playground.engine.config import ConfigError, GPTConfig
    from playground.engine.hf_hub import load_pretrained
    from playground.engine.kv_cache import KVCache
    from playground.engine.memory_check import check_memory
    from playground.engine.model import GPTModel
    from playground.engine.presets import DEFAULT_PRESET, PRESETS, get_preset
    from playground.engine.quantize import QuantizeError, quantize_int8
    from playground.engine.sampling import Generation, GenerationStep, generate
    from playground.engine.sizes import estimate_memory_bytes
    from playground.engine.tokenizer import load_tokenizer
    from playground.engine.weight_layout import LoadReport, WeightLoadError
    from playground.engine.weights import load_bundled, load_checkpoint, save_checkpoint
    from playground.errors import UserError
    from playground.inside.inspection import count_parameters, module_tree, parameter_breakdown
