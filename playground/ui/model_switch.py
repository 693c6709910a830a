"""The session's model: the form that describes a model, and switching the session to a new one.

Shared by the tabs that load a model (Model: Build; Train: use the trained model; Score & compare:
model B's recipe). A switch gives the session a fresh state (the old run belonged to the old
model), redraws the model's views and sets the form from the loaded model itself, so the form
always tells the truth about the model in use.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import gradio as gr
import pandas as pd

from playground import figures
from playground.errors import UserError
from playground.model_form import CONFIG_FIELDS, WEIGHTS, ModelForm, parse_config_fields
from playground.model_form import DTYPES as DTYPES  # the Model tab and model B offer these
from playground.server.catalog import HUB_MODELS, MODERN_PRESETS, PRESETS, SINCE_GPT2_DEFAULTS, ConfigError, GPTConfig
from playground.server.files import import_upload, is_trained_checkpoint
from playground.server.recipes import bundled_recipe, hub_recipe, random_recipe, recipe_key
from playground.ui.model_words import breakdown_table, summary_line, tree_items, tree_table, tying_explanation

from . import redraw
from .chips import RESET
from .common import choices, dress, empty, lang_of, new_state, slider_range, tr
from .results import outputs, result

# The config fields the form shows, in order (the Since-GPT-2 ones last: see playground.model_form).
FIELDS = CONFIG_FIELDS
# A field an older caller leaves out: its value in GPT-2's layout (the form's own widgets start there too).
FIELD_DEFAULTS = {**SINCE_GPT2_DEFAULTS, "ln_eps": GPTConfig().ln_eps}
WEIGHT_KEYS = {
    "bundled": "w_bundled",
    "random": "w_random",
    "hub": "w_hub",
    "upload": "w_upload",
    "trained": "w_trained",
}
WEIGHT_CHOICES = list(WEIGHTS)  # the ids the API sends and gets back; labels follow the language
CUSTOM = "custom"  # the form's own fields, not a preset
# The form's presets: GPT-2's family and the tiny, trainable "what changed since GPT-2" ones (the real
# sizes are for counting only: they stay in the side-by-side view, built on the meta device).
FORM_PRESETS = {**PRESETS, **MODERN_PRESETS}
PRESET_KEYS = {name: f"preset_{name}" for name in FORM_PRESETS}  # preset id -> its label's key
HUB_KEYS = {name: f"hubm_{name}" for name in HUB_MODELS}  # hub model id -> its label's key
PRESET_CHOICES = list(FORM_PRESETS) + [CUSTOM]

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
    try:
        data = parse_config_fields(values, FIELD_DEFAULTS)
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
    key = (recipe_key(recipe), int(depth), lang, bool(present))
    with _DRAWN_LOCK:
        drawn = _DRAWN.get(key)
    if drawn is None or drawn[0]() is not model:
        drawn = (weakref.ref(model), _drawn_views(model, recipe, int(depth), lang, present))
        with _DRAWN_LOCK:
            _DRAWN[key] = drawn
            while len(_DRAWN) > DRAWN_KEPT:
                _DRAWN.popitem(last=False)
    summary, tying_md, breakdown_df, treemap, memory_plot, tree_df = drawn[1]
    cfg = model.cfg
    return ModelViews(
        summary=summary,
        tying_md=tying_md,
        breakdown_df=_own_copy(breakdown_df),
        treemap=treemap,
        memory_plot=memory_plot,
        tree_df=_own_copy(tree_df),
        layer=slider_range(cfg.n_layers - 1),
        head=slider_range(cfg.n_heads - 1),
    )


# A model's views drawn for each (recipe, depth, language, presenter mode), with the model they were
# drawn from: every page that opens asks for the default model's views (its load, then its language's
# redraw), and drawing them cost about 80 ms of the server's CPU a time (docs/benchmarks.md). They depend
# on the model's structure alone, which a model keeps for its life; another model object (the cache built
# the recipe again) is drawn anew. The figures are shared, never changed after drawing: Gradio only reads
# them (``to_json``); tables are copied for each caller, and the sliders' updates made for each (Gradio
# takes an update's value out of its dict).
DRAWN_KEPT = 32
_DRAWN: OrderedDict[tuple, tuple] = OrderedDict()
_DRAWN_LOCK = threading.Lock()


def _drawn_views(model, recipe: dict, depth: int, lang: str, present: bool) -> tuple:
    rows, breakdown = breakdown_table(model, lang)
    cfg = model.cfg
    memory = {tr(lang, name): size for name, size in breakdown.memory.items()}
    memory[tr(lang, "kv_cache", n=cfg.context_length)] = (
        breakdown.kv_cache_bytes_per_token["float32"] * cfg.context_length
    )
    treemap = figures.parameter_treemap(
        tree_items(model), title=tr(lang, "fig_treemap"), root_label=tr(lang, "fig_treemap_root")
    )
    mflops = f"{breakdown.flops_per_token / 1e6:,.1f}"
    return (
        summary_line(model, recipe, lang),
        tying_explanation(cfg, lang),
        table(rows, "breakdown_headers", lang),
        dress(treemap, lang, present),
        dress(figures.memory_bars(memory, title=tr(lang, "fig_memory", mflops=mflops)), lang, present),
        table(tree_table(model, depth, lang), "tree_headers", lang),
    )


def _own_copy(rows):
    return rows.copy() if isinstance(rows, pd.DataFrame) else [list(row) for row in rows]


def table(rows, headers_key: str, lang: str, relabel: bool = False):
    """Rows (English: the columns the layout declared), or a table with its column names in the
    page's language (always when ``relabel``: the page's language just changed)."""
    if lang == "en" and not relabel:
        return rows
    if isinstance(rows, pd.DataFrame):
        rows = rows.values.tolist()
    return pd.DataFrame(rows, columns=tr(lang, headers_key).split("|"))


# A page's events each read the session's state as they set off, so one that began before the page
# took another model (a room's poll taking the teacher's) would draw the old one after it: every event
# that switches a page's model notes the recipe, and a redraw of the model's views reads the note.
PAGE_MODEL = "page_model"


def took_model(request, recipe: dict) -> None:
    """The page of ``request`` now holds the model ``recipe`` names; noted under the page's lock, which a
    redraw holds from reading the note until it has drawn."""
    with redraw.page_lock(request):
        redraw.note(request, PAGE_MODEL, recipe)


def page_recipe(request, state) -> dict:
    """The recipe of the model the page last took (its state's when nothing was noted)."""
    return redraw.noted(request, PAGE_MODEL) or state["recipe"]


def switch_model(model, recipe: dict, message: str, state=None, request=None) -> Switch:
    """A session's new model: fresh state (the old run belonged to the old model; the language
    stays), its views, the form describing it, and the bundled model's head examples only while it
    is the one loaded. The kernels box is left to the Model tab."""
    took_model(request, recipe)
    lang, present = lang_of(state), bool((state or {}).get("present"))
    session = (state or {}).get("session")  # the same session: its lease moved to this model
    state = {**new_state(lang), "recipe": recipe, "present": present, **({"session": session} if session else {})}
    return Switch(
        state=state,
        message=message,
        **model_views(model, recipe, lang=lang, present=present)._asdict(),
        kernels_md=gr.skip(),
        **form_values(model, recipe)._asdict(),
        heatmap=empty(tr(lang, "generate_to_see"), lang, present),
        chips=RESET,
        head_box=gr.update(visible=recipe["kind"] == "bundled"),
    )


def switch_outputs(page, message) -> list:
    """Where a ``Switch`` goes: every tab that shows something of the session's model or run;
    ``message``: the component that says how the switch went."""
    return outputs(Switch, page, page.model, page.generate, message=message)


def recipe_from_form(weights, seed, hub_name, upload, dtype, *fields, train_state=None, lang="en") -> dict:
    """The recipe the form describes (no build): also used by the Score & compare tab's second model."""
    try:
        form = ModelForm.parse(weights, seed, hub_name, upload, dtype, *fields, defaults=FIELD_DEFAULTS)
    except UserError as e:
        if e.key.startswith("config.") or e.fields.get("name") in FIELDS:
            raise ConfigError(e.key, e.template, **e.fields) from None  # a config field, as config_from_fields says it
        raise
    return recipe_of(form, train_state)


def recipe_of(form: ModelForm, train_state=None) -> dict:
    """The recipe dict a parsed form names (the shape the model cache and replay files keep)."""
    if form.weights == "random":
        return random_recipe(GPTConfig(**form.config_dict()), seed=form.init_seed, dtype=form.dtype)
    if form.weights == "hub":
        return hub_recipe(form.hub_name or "", form.dtype)
    if form.weights == "upload":
        if not form.upload:
            raise UserError("model.need_upload", "Choose a .safetensors file to upload first.")
        return {**import_upload(form.upload), "dtype": form.dtype}
    if form.weights == "trained":
        trained = (train_state or {}).get("recipe")
        if not trained:
            raise UserError(
                "model.need_trained", "Train a model in the Train tab first (or wait for training to finish or stop)."
            )
        return {**trained, "dtype": form.dtype}
    return bundled_recipe(form.dtype)
