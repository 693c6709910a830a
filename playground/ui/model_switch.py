"""The session's model: the form that describes a model, and switching the session to a new one.

Shared by the tabs that load a model (Model: Build; Train: use the trained model; Score & compare:
model B's recipe). A switch gives the session a fresh state (the old run belonged to the old
model), redraws the model's views and sets the form from the loaded model itself, so the form
always tells the truth about the model in use.
"""

from __future__ import annotations

import gradio as gr
import pandas as pd

from playground import figures
from playground.errors import UserError
from playground.server.catalog import HUB_MODELS, MODERN_PRESETS, PRESETS, SINCE_GPT2_DEFAULTS, ConfigError, GPTConfig
from playground.server.files import import_upload, is_trained_checkpoint
from playground.server.recipes import bundled_recipe, hub_recipe, random_recipe
from playground.ui.model_words import breakdown_table, summary_line, tree_items, tree_table, tying_explanation

from .chips import RESET
from .common import (
    choices,
    dress,
    lang_of,
    new_state,
    parse_bool,
    parse_choice,
    parse_number,
    parse_seed,
    parse_whole,
    slider_range,
    tr,
)
from .results import outputs, result

FIELDS = (
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
    # Since GPT-2 (issue 38), after GPT-2's fields so that an API call that sends only those still builds
    # GPT-2's layout: each left out takes its GPT-2 value.
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
# A field an older caller leaves out: its value in GPT-2's layout (the form's own widgets start there too).
FIELD_DEFAULTS = {**SINCE_GPT2_DEFAULTS, "ln_eps": GPTConfig().ln_eps}
WEIGHT_KEYS = {
    "bundled": "w_bundled",
    "random": "w_random",
    "hub": "w_hub",
    "upload": "w_upload",
    "trained": "w_trained",
}
WEIGHT_CHOICES = list(WEIGHT_KEYS)  # the ids the API sends and gets back; labels follow the language
CUSTOM = "custom"  # the form's own fields, not a preset
# The form's presets: GPT-2's family and the tiny, trainable "what changed since GPT-2" ones (the real
# sizes are for counting only: they stay in the side-by-side view, built on the meta device).
FORM_PRESETS = {**PRESETS, **MODERN_PRESETS}
PRESET_KEYS = {name: f"preset_{name}" for name in FORM_PRESETS}  # preset id -> its label's key
HUB_KEYS = {name: f"hubm_{name}" for name in HUB_MODELS}  # hub model id -> its label's key
PRESET_CHOICES = list(FORM_PRESETS) + [CUSTOM]
# int8: weight-only, bfloat16 activations; int8-dynamic: activations quantized per row too (playground.engine.quantize)
DTYPES = ("float32", "bfloat16", "int8", "int8-dynamic")

# What describes a model on the page: its views (the layer/head sliders live in the Generate tab)
# and the form's fields (named as the Model tab's components).
VIEW_FIELDS = ("summary", "tying_md", "breakdown_df", "treemap", "memory_plot", "tree_df", "layer", "head")
FORM_FIELDS = ("weights", "preset", "seed_init", "hub_name", "dtype") + FIELDS
ModelViews = result("ModelViews", *VIEW_FIELDS)
FormValues = result("FormValues", *FORM_FIELDS)
# A switch: the new state, a message, the views, the kernels box (the Model tab draws it), the form,
# then what the old run showed in the Generate tab.
Switch = result("Switch", "state", "message", *VIEW_FIELDS, "kernels_md", *FORM_FIELDS, "heatmap", "chips", "head_box")


def preset_choices(lang: str | None = None) -> list[tuple]:
    return choices(PRESET_KEYS, lang) + choices({CUSTOM: "custom"}, lang)


def hub_choices(lang: str | None = None) -> list[tuple]:
    return choices(HUB_KEYS, lang)


def config_from_fields(*values) -> GPTConfig:
    """The config the form's fields describe; fields past those given (an older API caller) keep GPT-2's values."""
    data = dict(zip(FIELDS, values))
    for name in FIELDS[len(values) :]:
        if name in FIELD_DEFAULTS:
            data[name] = FIELD_DEFAULTS[name]
    for name in INT_FIELDS:
        value = data[name]
        if value is None or value == "":
            raise ConfigError("config.field_empty", "{name} is empty: enter a whole number.", name=name)
        try:
            data[name] = parse_whole(value, name)
        except UserError as e:
            raise ConfigError(e.key, e.template, **e.fields) from None
    try:
        for name in NUMBER_FIELDS:
            data[name] = parse_number(data[name], name)
        for name in BOOL_FIELDS:
            data[name] = parse_bool(data[name], name)
    except UserError as e:
        raise ConfigError(e.key, e.template, **e.fields) from None
    return GPTConfig(**data)


def preset_name(cfg: GPTConfig) -> str:
    return next((name for name, preset in FORM_PRESETS.items() if preset == cfg), CUSTOM)


def form_values(model, recipe: dict) -> FormValues:
    """The form as it describes the loaded model: weights, preset, init seed, hub choice, precision, fields."""
    kind = recipe.get("kind")
    weights = kind if kind in ("bundled", "random", "hub") else None
    if kind == "file":
        weights = "trained" if is_trained_checkpoint(recipe.get("path", "")) else "upload"
    hub = next((name for name, repo in HUB_MODELS.items() if repo == recipe.get("repo")), recipe.get("repo"))
    cfg = model.cfg
    return FormValues(
        weights or gr.skip(),
        preset_name(cfg),
        recipe.get("seed", gr.skip()),
        hub or gr.skip(),
        recipe.get("dtype", "float32"),
        *(getattr(cfg, f) for f in FIELDS),
    )


def model_views(model, recipe: dict, depth: int = 3, lang: str = "en", present: bool = False) -> ModelViews:
    """Summary, tying text, tables and figures of the model, then the layer/head slider ranges."""
    rows, breakdown = breakdown_table(model, lang)
    cfg = model.cfg
    memory = {tr(lang, name): size for name, size in breakdown.memory.items()}
    memory[tr(lang, "kv_cache", n=cfg.context_length)] = (
        breakdown.kv_cache_bytes_per_token["float32"] * cfg.context_length
    )
    return ModelViews(
        summary=summary_line(model, recipe, lang),
        tying_md=tying_explanation(cfg, lang),
        breakdown_df=table(rows, "breakdown_headers", lang),
        treemap=dress(
            figures.parameter_treemap(
                tree_items(model), title=tr(lang, "fig_treemap"), root_label=tr(lang, "fig_treemap_root")
            ),
            lang,
            present,
        ),
        memory_plot=dress(
            figures.memory_bars(memory, title=tr(lang, "fig_memory", mflops=f"{breakdown.flops_per_token / 1e6:,.1f}")),
            lang,
            present,
        ),
        tree_df=table(tree_table(model, int(depth), lang), "tree_headers", lang),
        layer=slider_range(cfg.n_layers - 1),
        head=slider_range(cfg.n_heads - 1),
    )


def table(rows, headers_key: str, lang: str, relabel: bool = False):
    """Rows (English: the columns the layout declared), or a table with its column names in the
    page's language (always when ``relabel``: the page's language just changed)."""
    if lang == "en" and not relabel:
        return rows
    if isinstance(rows, pd.DataFrame):
        rows = rows.values.tolist()
    return pd.DataFrame(rows, columns=tr(lang, headers_key).split("|"))


def switch_model(model, recipe: dict, message: str, state=None) -> Switch:
    """A session's new model: fresh state (the old run belonged to the old model; the language
    stays), its views, the form describing it, and the bundled model's head examples only while it
    is the one loaded. The kernels box is left to the Model tab."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    session = (state or {}).get("session")  # the same session: its lease moved to this model
    state = {**new_state(lang), "recipe": recipe, "present": present, **({"session": session} if session else {})}
    return Switch(
        state=state,
        message=message,
        **model_views(model, recipe, lang=lang, present=present)._asdict(),
        kernels_md=gr.skip(),
        **form_values(model, recipe)._asdict(),
        heatmap=dress(figures.empty_figure(tr(lang, "generate_to_see")), lang, present),
        chips=RESET,
        head_box=gr.update(visible=recipe["kind"] == "bundled"),
    )


def switch_outputs(page, message) -> list:
    """Where a ``Switch`` goes: every tab that shows something of the session's model or run;
    ``message``: the component that says how the switch went."""
    return outputs(Switch, page, page.model, page.generate, message=message)


def recipe_from_form(weights, seed, hub_name, upload, dtype, *fields, train_state=None, lang="en") -> dict:
    """The recipe the form describes (no build): also used by the Score & compare tab's second model."""
    weights = parse_choice(weights, WEIGHT_CHOICES, "Weights")
    dtype = parse_choice(dtype, DTYPES, "Precision")
    if weights == "random":
        cfg = config_from_fields(*fields)
        init_seed = parse_seed(seed, "Init seed")
        recipe = random_recipe(cfg, seed=init_seed or 0, dtype=dtype)
    elif weights == "hub":
        recipe = hub_recipe(hub_name, dtype)
    elif weights == "upload":
        if not upload:
            raise UserError("model.need_upload", "Choose a .safetensors file to upload first.")
        upload_path = upload if isinstance(upload, str) else getattr(upload, "name", None)
        recipe = {**import_upload(upload_path), "dtype": dtype}
    elif weights == "trained":
        trained = (train_state or {}).get("recipe")
        if not trained:
            raise UserError(
                "model.need_trained", "Train a model in the Train tab first (or wait for training to finish or stop)."
            )
        recipe = {**trained, "dtype": dtype}
    else:
        recipe = bundled_recipe(dtype)
    return recipe
