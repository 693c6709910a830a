"""GPT Playground: a from-scratch GPT-2 you can look inside."""

from .config import (
    DEFAULT_PRESET,
    PRESETS,
    ConfigError,
    GPTConfig,
    check_memory,
    estimate_memory_bytes,
    get_preset,
)
from .inspection import count_parameters, module_tree, parameter_breakdown
from .model import AttentionTrace, GPTModel, KVCache
from .quantize import QuantizeError, quantize_int8
from .sampling import Generation, GenerationStep, generate
from .tokenizer import load_tokenizer
from .weights import LoadReport, WeightLoadError, load_checkpoint, load_pretrained, save_checkpoint

__all__ = [
    "AttentionTrace", "ConfigError", "DEFAULT_PRESET", "GPTConfig", "GPTModel", "Generation",
    "GenerationStep", "KVCache", "PRESETS", "check_memory", "count_parameters", "estimate_memory_bytes",
    "generate", "get_preset", "load_tokenizer", "module_tree", "parameter_breakdown",
    "LoadReport", "WeightLoadError", "load_checkpoint", "load_pretrained", "save_checkpoint",
    "QuantizeError", "quantize_int8",
]
