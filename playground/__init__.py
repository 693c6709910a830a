"""GPT Playground: a from-scratch GPT-2 you can look inside."""

from playground.engine.config import (
    DEFAULT_PRESET,
    PRESETS,
    ConfigError,
    GPTConfig,
    check_memory,
    estimate_memory_bytes,
    get_preset,
)
from playground.engine.decode_paths import optimize_for_decode
from playground.engine.kv_cache import KVCache
from playground.engine.model import AttentionTrace, GPTModel
from playground.engine.quantize import QuantizeError, quantize_int8
from playground.engine.sampling import Generation, GenerationStep, generate
from playground.engine.tokenizer import load_tokenizer
from playground.engine.weights import LoadReport, WeightLoadError, load_checkpoint, load_pretrained, save_checkpoint
from playground.inside.inspection import count_parameters, module_tree, parameter_breakdown

__all__ = [
    "AttentionTrace",
    "ConfigError",
    "DEFAULT_PRESET",
    "GPTConfig",
    "GPTModel",
    "Generation",
    "GenerationStep",
    "KVCache",
    "PRESETS",
    "check_memory",
    "count_parameters",
    "estimate_memory_bytes",
    "generate",
    "get_preset",
    "load_tokenizer",
    "module_tree",
    "parameter_breakdown",
    "LoadReport",
    "WeightLoadError",
    "load_checkpoint",
    "load_pretrained",
    "save_checkpoint",
    "QuantizeError",
    "quantize_int8",
    "optimize_for_decode",
]
