"""The model form, parsed once: raw values in, a frozen ``ModelForm`` out, every refusal by its key.

The Model tab's form (and the Score & compare tab's second model) names a model by its weights,
precision, init seed, hub name or uploaded file and, for random weights, the config's fields. Each
arrives as the browser or an API caller sent it (digits as text, whole numbers as floats from number
widgets). ``ModelForm.parse`` reads them with ``settings``' field readers: whole numbers exactly (a
vocab_size or init seed past 2⁵³ stays the number typed, never rounded through ``float()``), each
refused by the field's name. The server turns the typed form into the recipe dict it keeps (its JSON
shape and cache key are unchanged); the engine's ``GPTConfig`` keeps its own checks of the values'
types and the rules between fields (heads divide the width, the options of each choice).

Like ``settings``, this module imports only ``errors`` (through ``settings``): every layer may use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from playground.errors import UserError
from playground.settings import parse_bool, parse_choice, parse_number, parse_seed, parse_whole

# The config fields the form shows, in the order its widgets (and an API call's arguments) come. The
# ones after GPT-2's (issue 38) come last, so a caller that sends only GPT-2's fields still builds
# GPT-2's layout: each left out takes the default the caller of ``parse`` gives.
CONFIG_FIELDS = (
    "vocab_size",
    "context_length",
    "emb_dim",
    "n_heads",
    "n_layers",
    "drop_rate",
    "qkv_bias",
    "tie_weights",
    "pos_encoding",
    "activation",
    "norm_placement",
    "attention_impl",
    "norm",
    "ff",
    "ff_hidden_dim",
    "n_kv_heads",
    "fixed_head_dim",
    "rope_theta",
    "qk_norm",
    "sliding_window",
    "bias",
    "ln_eps",
)
INT_FIELDS = (
    "vocab_size",
    "context_length",
    "emb_dim",
    "n_heads",
    "n_layers",
    "ff_hidden_dim",
    "n_kv_heads",
    "fixed_head_dim",
    "sliding_window",
)
BOOL_FIELDS = ("qkv_bias", "tie_weights", "qk_norm", "bias")
NUMBER_FIELDS = ("drop_rate", "rope_theta", "ln_eps")
# The rest are choices (pos_encoding, activation ...): their options are the engine's, checked by GPTConfig.

WEIGHTS = ("bundled", "random", "hub", "upload", "trained")  # the ids the API sends
# int8: weight-only, bfloat16 activations; int8-dynamic: activations quantized per row too (playground.engine.quantize)
DTYPES = ("float32", "bfloat16", "int8", "int8-dynamic")

ConfigValue = int | float | bool | str


def parse_config_fields(values, defaults: Mapping[str, ConfigValue] | None = None) -> dict[str, ConfigValue]:
    """The config fields ``values`` gives (in ``CONFIG_FIELDS`` order), typed: whole numbers exactly
    (3.0 from a number widget is 3; "2.5", "abc" and an empty box are refused by the field's name),
    real numbers as floats, booleans from a checkbox or "true"/"false". Fields past those given take
    ``defaults``' values (an older API caller); a field with no default is left out."""
    data: dict = dict(zip(CONFIG_FIELDS, values))
    for name in CONFIG_FIELDS[len(data) :]:
        if defaults and name in defaults:
            data[name] = defaults[name]
    for name in INT_FIELDS:
        if name not in data:
            continue
        if data[name] is None or data[name] == "":
            raise UserError("config.field_empty", "{name} is empty: enter a whole number.", name=name)
        data[name] = parse_whole(data[name], name)
    for name in NUMBER_FIELDS:
        if name in data:
            data[name] = parse_number(data[name], name)
    for name in BOOL_FIELDS:
        if name in data:
            data[name] = parse_bool(data[name], name)
    return data


def _path(upload) -> str | None:
    """An upload as Gradio hands it: a path, or a file object with a ``name``."""
    path = upload if isinstance(upload, str) else getattr(upload, "name", None)
    return path or None


@dataclass(frozen=True)
class ModelForm:
    """A model form, typed and checked field by field: build one with ``parse``.

    ``config`` holds the typed config fields as (name, value) pairs in form order, only for random
    weights (the other weights bring their own config, and a stray field must not block loading them);
    ``init_seed`` is exact (0 when the box is empty); ``upload`` is the uploaded file's path."""

    weights: str
    dtype: str
    init_seed: int = 0
    hub_name: str | None = None
    upload: str | None = None
    config: tuple[tuple[str, ConfigValue], ...] = ()

    @classmethod
    def parse(
        cls, weights, seed, hub_name, upload, dtype, *fields, defaults: Mapping[str, ConfigValue] | None = None
    ) -> ModelForm:
        """The form as the page or an API caller sent it, in the form's order (weights, init seed, hub
        name, upload, precision, then the config fields); ``defaults``: the config fields' values when
        an older caller leaves them out."""
        weights = parse_choice(weights, WEIGHTS, "Weights")
        dtype = parse_choice(dtype, DTYPES, "Precision")
        config: tuple = ()
        init_seed = 0
        if weights == "random":
            config = tuple(parse_config_fields(fields, defaults).items())
            init_seed = parse_seed(seed, "Init seed") or 0
        hub = hub_name.strip() or None if isinstance(hub_name, str) else None
        return cls(weights, dtype, init_seed, hub, _path(upload) if weights == "upload" else None, config)

    def config_dict(self) -> dict[str, ConfigValue]:
        """The typed config fields, as keyword arguments for the engine's GPTConfig."""
        return dict(self.config)
