"""What the UI offers to build and load: the config's choices and presets, the hub's models.

Also the errors a build or a load refuses with.

The Model, Compare and Train tabs draw their menus from these, so a choice the engine adds shows on
the page without the UI reaching into the engine.
"""

from __future__ import annotations

from playground.engine.config import (
    ACTIVATIONS,
    ATTENTION_IMPLS,
    FEED_FORWARDS,
    NORM_PLACEMENTS,
    NORMS,
    POS_ENCODINGS,
    SINCE_GPT2_DEFAULTS,
    ConfigError,
    GPTConfig,
)
from playground.engine.hf_hub import HUB_MODELS
from playground.engine.presets import DEFAULT_PRESET, MODERN_PRESETS, PRESETS
from playground.engine.weight_layout import WeightLoadError
from playground.inside.inspection import count_parameters

__all__ = [
    "ACTIVATIONS",
    "ATTENTION_IMPLS",
    "DEFAULT_PRESET",
    "FEED_FORWARDS",
    "HUB_MODELS",
    "MODERN_PRESETS",
    "NORMS",
    "NORM_PLACEMENTS",
    "POS_ENCODINGS",
    "PRESETS",
    "SINCE_GPT2_DEFAULTS",
    "ConfigError",
    "GPTConfig",
    "WeightLoadError",
    "count_parameters",
]
