"""The Model tab: build or load a model from the form, and show where its parameters live.

The form always tells the truth about the model the session is using: after the page loads, a
build, or "Use the trained model", the weights choice, preset, config fields and precision are set
from the loaded model itself.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import gradio as gr
import pandas as pd

from playground import figures
from playground.engine.config import (
    ACTIVATIONS,
    ATTENTION_IMPLS,
    DEFAULT_PRESET,
    NORM_PLACEMENTS,
    POS_ENCODINGS,
    PRESETS,
    ConfigError,
    GPTConfig,
)
from playground.engine.weights import HUB_MODELS
from playground.errors import UserError
from playground.runtime import kernels
from playground.server.files import discard_upload, import_upload, is_trained_checkpoint
from playground.server.model_cache import CACHE
from playground.server.model_views import breakdown_table, summary_line, tree_items, tree_table, tying_explanation
from playground.server.recipes import BUNDLED_CHECKPOINT, bundled_recipe, describe_recipe, hub_recipe, random_recipe

from . import redraw
from .chips import RESET
from .common import (
    T,
    choices,
    dress,
    fail,
    lang_of,
    new_state,
    ok,
    page_prefs,
    parse_bool,
    parse_choice,
    parse_number,
    parse_seed,
    parse_whole,
    session_model,
    slider_range,
    tr,
)

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
)
INT_FIELDS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers")
WEIGHT_KEYS = {
    "bundled": "w_bundled",
    "random": "w_random",
    "hub": "w_hub",
    "upload": "w_upload",
    "trained": "w_trained",
}
WEIGHT_CHOICES = list(WEIGHT_KEYS)  # the ids the API sends and gets back; labels follow the language
CUSTOM = "custom (the fields below)"
PRESET_CHOICES = list(PRESETS) + [CUSTOM]


def preset_choices(lang: str | None = None) -> list[tuple]:
    return [(name, name) for name in PRESETS] + choices({CUSTOM: "custom"}, lang)


DTYPES = ("float32", "bfloat16", "int8")  # int8: weight-only, bfloat16 activations (playground.engine.quantize)

HEAD_PATTERNS = {  # pattern name in facts.json -> (label key, a prompt that shows it)
    "line_break": (
        "head_line_break",
        "KING RICHARD:\nA horse! a horse!\nMy kingdom for a horse!\n\nCATESBY:\nWithdraw, my lord;\n",
    ),
    "duplicate_token": ("head_duplicate_token", "the king, the queen, the king, the prince, the king and the queen"),
}


def head_examples(view_name: str, lang: str = "en") -> tuple[list[list], list[str]]:
    """(examples, labels): prompts paired with the bundled model's measured heads (assets/bundled/facts.json)."""
    facts_path = BUNDLED_CHECKPOINT.with_name("facts.json")
    if not facts_path.is_file():
        return [], []
    heads = json.loads(facts_path.read_text()).get("attention_heads", {})
    found = [(HEAD_PATTERNS[name], h) for name, h in heads.items() if name in HEAD_PATTERNS]
    examples = [[prompt, view_name, h["layer"], h["head"]] for (_, prompt), h in found]
    labels = [
        tr(lang, "head_example", label=tr(lang, label), layer=h["layer"], head=h["head"], ratio=f"{h['ratio']:.1f}")
        for (label, _), h in found
    ]
    return examples, labels


def config_from_fields(*values) -> GPTConfig:
    data = dict(zip(FIELDS, values))
    for name in INT_FIELDS:
        value = data[name]
        if value is None or value == "":
            raise ConfigError("config.field_empty", "{name} is empty: enter a whole number.", name=name)
        try:
            data[name] = parse_whole(value, name)
        except ValueError as e:
            raise ConfigError(e.key, e.template, **e.fields) from None
    try:
        data["drop_rate"] = parse_number(data["drop_rate"], "drop_rate")
        data["qkv_bias"] = parse_bool(data["qkv_bias"], "qkv_bias")
        data["tie_weights"] = parse_bool(data["tie_weights"], "tie_weights")
    except UserError as e:
        raise ConfigError(e.key, e.template, **e.fields) from None
    return GPTConfig(**data)


def preset_fields(name: str, state=None):
    """Fill the config form from a preset (and preview the tying explanation); "custom" keeps the form."""
    if name not in PRESETS:
        return [gr.skip()] * (len(FIELDS) + 1)
    cfg = PRESETS[name]
    return [getattr(cfg, f) for f in FIELDS] + [tying_explanation(cfg, lang_of(state))]


def preset_name(cfg: GPTConfig) -> str:
    return next((name for name, preset in PRESETS.items() if preset == cfg), CUSTOM)


def form_values(model, recipe: dict) -> tuple:
    """The form as it describes the loaded model: weights, preset, init seed, hub choice, precision, fields."""
    kind = recipe.get("kind")
    weights = kind if kind in ("bundled", "random", "hub") else None
    if kind == "file":
        weights = "trained" if is_trained_checkpoint(recipe.get("path", "")) else "upload"
    hub = next((name for name, repo in HUB_MODELS.items() if repo == recipe.get("repo")), None)
    cfg = model.cfg
    return (
        (weights or gr.skip()),
        preset_name(cfg),
        recipe.get("seed", gr.skip()),
        hub or gr.skip(),
        recipe.get("dtype", "float32"),
    ) + tuple(getattr(cfg, f) for f in FIELDS)


def model_views(model, recipe: dict, depth: int = 3, lang: str = "en", present: bool = False):
    """Summary, tying text, tables and figures of the model, then the layer/head slider ranges."""
    rows, breakdown = breakdown_table(model, lang)
    cfg = model.cfg
    memory = {tr(lang, name): size for name, size in breakdown.memory.items()}
    memory[tr(lang, "kv_cache", n=cfg.context_length)] = (
        breakdown.kv_cache_bytes_per_token["float32"] * cfg.context_length
    )
    return (
        summary_line(model, recipe, lang),
        tying_explanation(cfg, lang),
        table(rows, "breakdown_headers", lang),
        dress(figures.parameter_treemap(tree_items(model), title=tr(lang, "fig_treemap")), lang, present),
        dress(
            figures.memory_bars(memory, title=tr(lang, "fig_memory", mflops=f"{breakdown.flops_per_token / 1e6:,.1f}")),
            lang,
            present,
        ),
        table(tree_table(model, int(depth), lang), "tree_headers", lang),
        slider_range(cfg.n_layers - 1),
        slider_range(cfg.n_heads - 1),
        kernels_table(lang),
    )


KERNEL_TEXT = {  # templates of the kernels box: keys of translations.py
    "head": "kn_head",
    "none": "kn_none",
    "note": "kn_note",
}


def _decision(choice, lang: str) -> str:
    """A kernel decision in the page's language, from its kind and fields (``kn_`` + kind)."""
    if lang == "en" or not choice.kind:
        return choice.decision
    return tr(lang, "kn_" + choice.kind, **choice.fields)


def kernels_table(lang: str = "en") -> str:
    """Every kernel/layout decision this process made, with the figures it was made on."""
    choices = kernels.measured()
    if not choices:
        return tr(lang, KERNEL_TEXT["none"])
    rows = [tr(lang, KERNEL_TEXT["head"])]
    for c in choices:
        figures_ms = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in c.seconds.items()) or "—"
        rows.append(f"| {_decision(c, lang)} | **{c.winner}** | {figures_ms} |")
    return "\n".join(rows) + "\n\n" + tr(lang, KERNEL_TEXT["note"])


def table(rows, headers_key: str, lang: str, relabel: bool = False):
    """Rows (English: the columns the layout declared), or a table with its column names in the
    page's language (always when ``relabel``: the page's language just changed)."""
    if lang == "en" and not relabel:
        return rows
    if isinstance(rows, pd.DataFrame):
        rows = rows.values.tolist()
    return pd.DataFrame(rows, columns=tr(lang, headers_key).split("|"))


N_VIEWS = 9  # what model_views returns
N_FORM = 5 + len(FIELDS)  # what form_values returns


def switch_model(model, recipe: dict, message: str, state=None):
    """A session's new model: fresh state (the old run belonged to the old model; the language
    stays), its views, the form describing it, and the bundled model's head examples only while it
    is the one loaded.

    Outputs: state, message, model views, form values, heatmap, chips, head examples' visibility."""
    lang, present = lang_of(state), bool((state or {}).get("present"))
    state = {**new_state(lang), "recipe": recipe, "present": present}
    return (
        (state, message)
        + model_views(model, recipe, lang=lang, present=present)
        + form_values(model, recipe)
        + (
            dress(figures.empty_figure(tr(lang, "generate_to_see")), lang, present),
            RESET,
            gr.update(visible=recipe["kind"] == "bundled"),
        )
    )


N_SWITCH = 2 + N_VIEWS + N_FORM + 3


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


def build_model(
    state, weights, seed, hub_name, upload, dtype, *fields, train_state=None, progress=gr.Progress(), request=None
):
    """Build or load the model the form describes; on any problem the previous model stays. The
    message is remembered for a language switch to say again (``redraw``)."""
    lang = lang_of(state)
    try:
        recipe = recipe_from_form(weights, seed, hub_name, upload, dtype, *fields, train_state=train_state, lang=lang)
        upload_path = upload if isinstance(upload, str) else getattr(upload, "name", None)
        t0 = time.perf_counter()
        try:
            model = CACHE.get(recipe, progress=lambda frac, desc: progress(frac, desc=desc))
        except Exception:
            if weights == "upload":  # a refused upload is not kept on disk
                discard_upload(recipe["path"])
                discard_upload(upload_path)
            raise
        elapsed = time.perf_counter() - t0
    except Exception as e:  # the previous model and run stay as they were
        redraw.remember(request, "model_build", lambda lang, present=False, e=e: fail(e, lang))
        return (state, fail(e, lang)) + (gr.skip(),) * (N_SWITCH - 2)
    report = getattr(model, "load_report", None)

    def say(lang, present=False):
        extra = tr(lang, "loaded_weights", report=report.summary()) if report is not None else ""
        return ok(tr(lang, "ready", model=describe_recipe(recipe, lang), seconds=f"{elapsed:.2f}", extra=extra))

    redraw.remember(request, "model_build", say)
    return switch_model(model, recipe, say(lang), state)


def build_from_form(
    request: gr.Request, state, train_state, weights, seed, hub_name, upload, dtype, *fields, progress=gr.Progress()
):
    """The Build button: the form plus the session's training state (for the "trained" weights)."""
    return build_model(
        state,
        weights,
        seed,
        hub_name,
        upload,
        dtype,
        *fields,
        train_state=train_state,
        progress=progress,
        request=request,
    )


def show_tree(state, depth):
    try:
        lang = lang_of(state)
        return table(
            tree_table(session_model(state), parse_whole(depth, "Tree depth", 1, 10), lang), "tree_headers", lang
        )
    except Exception:
        return gr.skip()


def load_session(state=None, request: gr.Request = None):
    """Page load: a fresh session on the default model, with the form describing it, in the page's
    language (``?lang=`` in its address, else the browser's Accept-Language; English for the API)."""
    lang, present = page_prefs(request)
    state = {**new_state(lang), "present": present}
    model = session_model(state)
    recipe = state["recipe"]
    return (
        (state,)
        + model_views(model, recipe, lang=lang, present=present)
        + form_values(model, recipe)
        + (gr.update(visible=recipe["kind"] == "bundled"),)
    )


# ----------------------------------------------------------------------------------------------
# Layout and wiring


def layout() -> SimpleNamespace:
    """The form and the model's figures side by side, then the two tables at full width (their
    columns never fit beside the form on a 1024-pixel projector)."""
    cfg = PRESETS[DEFAULT_PRESET]  # the form starts here; load_session fills in the real model
    c = SimpleNamespace()
    with gr.Row():
        with gr.Column(scale=2, min_width=300):
            c.weights = gr.Radio(
                choices(WEIGHT_KEYS),
                label=T("weights"),
                value="bundled" if BUNDLED_CHECKPOINT.is_file() else "random",
            )
            # Shown only for the weights they belong to (an empty upload box only takes room).
            c.hub_name = gr.Dropdown(list(HUB_MODELS), value=list(HUB_MODELS)[0], label=T("hub_model"), visible=False)
            c.upload = gr.File(
                label=T("upload"), file_types=[".safetensors"], type="filepath", visible=False, height=140
            )
            c.preset = gr.Dropdown(preset_choices(), value=DEFAULT_PRESET, label=T("preset"))
            with gr.Accordion(T("config_fields"), open=False, elem_classes=["pg-advanced"]):
                # Integers are checked by the handler (2.5 layers is refused and said), not rounded by the widget.
                c.fields = [
                    gr.Number(cfg.vocab_size, label=T("vocab_size")),
                    gr.Number(cfg.context_length, label=T("context_length")),
                    gr.Number(cfg.emb_dim, label=T("emb_dim")),
                    gr.Number(cfg.n_heads, label=T("n_heads")),
                    gr.Number(cfg.n_layers, label=T("n_layers")),
                    gr.Number(cfg.drop_rate, label=T("drop_rate")),
                    gr.Checkbox(cfg.qkv_bias, label=T("qkv_bias")),
                    gr.Checkbox(cfg.tie_weights, label=T("tie_weights")),
                    gr.Dropdown(list(POS_ENCODINGS), value=cfg.pos_encoding, label=T("pos_encoding")),
                    gr.Dropdown(list(ACTIVATIONS), value=cfg.activation, label=T("activation")),
                    gr.Dropdown(list(NORM_PLACEMENTS), value=cfg.norm_placement, label=T("norm_placement")),
                    gr.Dropdown(list(ATTENTION_IMPLS), value=cfg.attention_impl, label=T("attention_impl")),
                ]
            with gr.Row(elem_classes=["pg-advanced"]):
                c.seed_init = gr.Number(0, label=T("seed_init"), min_width=100)
                c.dtype = gr.Radio(list(DTYPES), value="float32", label=T("dtype"), info=T("dtype_info"), min_width=200)
            c.build_btn = gr.Button(T("build"), variant="primary", elem_id="pg-build")
            c.build_msg = gr.HTML(elem_id="pg-build-msg")
            c.tying_md = gr.Markdown(elem_id="pg-tying")
        with gr.Column(scale=3, min_width=300):
            c.treemap = gr.Plot(label="treemap", show_label=False)
            c.memory_plot = gr.Plot(label="memory", show_label=False)
    c.breakdown_df = gr.Dataframe(
        headers=["component", "formula", "formula value", "measured", "agree"],
        label=T("breakdown"),
        interactive=False,
        wrap=True,
        elem_id="pg-breakdown",
        column_widths=["18%", "42%", "15%", "15%", "10%"],
    )
    with gr.Accordion(T("kernels"), open=False, elem_classes=["pg-advanced"]):
        c.kernels_md = gr.Markdown(elem_id="pg-kernels")
    c.tree_depth = gr.Slider(1, 6, value=3, step=1, label=T("tree_depth"), elem_classes=["pg-advanced"])
    c.tree_df = gr.Dataframe(
        headers=["module", "type", "parameters (shapes)", "own", "total", "tied", "path"],
        label=T("tree"),
        interactive=False,
        max_height=420,
        wrap=True,
        elem_id="pg-tree",
        column_widths=["15%", "15%", "21%", "11%", "12%", "12%", "14%"],
    )
    c.form = [c.weights, c.preset, c.seed_init, c.hub_name, c.dtype] + c.fields
    return c


def weight_inputs(weights):
    """The hub choice and the upload box, each shown only with its own kind of weights."""
    return gr.update(visible=weights == "hub"), gr.update(visible=weights == "upload")


def model_outputs(page) -> list:
    """Where ``model_views`` goes (the layer/head sliders live in the Generate tab)."""
    m, g = page.model, page.generate
    return [
        page.summary,
        m.tying_md,
        m.breakdown_df,
        m.treemap,
        m.memory_plot,
        m.tree_df,
        g.layer,
        g.head,
        m.kernels_md,
    ]


def switch_outputs(page) -> list:
    """Where ``switch_model`` goes: every tab that shows something of the session's model or run."""
    g = page.generate
    return [page.state, page.model.build_msg] + model_outputs(page) + page.model.form + [g.heatmap, g.chips, g.head_box]


def build_message(request: gr.Request, state):
    """The last build's message in the page's new language."""
    return redraw.redraw(request, "model_build", lang_of(state), bool((state or {}).get("present")), 1)[0]


def wire(page) -> None:
    m = page.model
    page.demo.load(
        load_session,
        None,
        [page.state] + model_outputs(page) + m.form + [page.generate.head_box],
        api_name="load_session",
    )
    m.preset.input(preset_fields, [m.preset, page.state], m.fields + [m.tying_md], api_name="preset_config")
    m.build_btn.click(
        build_from_form,
        [page.state, page.train_state, m.weights, m.seed_init, m.hub_name, m.upload, m.dtype] + m.fields,
        switch_outputs(page),
        api_name="build_model",
        concurrency_id="models",
        concurrency_limit=2,
    )
    m.tree_depth.release(show_tree, [page.state, m.tree_depth], m.tree_df, api_name="module_tree")
    m.weights.change(weight_inputs, m.weights, [m.hub_name, m.upload], api_visibility="private", queue=False)
    # The kernels box is not among prefs' own redraws: it follows a language switch here.
    from . import prefs  # (prefs imports this module)

    prefs.on_change(page, lambda state: kernels_table(lang_of(state)), [], [m.kernels_md])
    prefs.on_change(page, build_message, [], [m.build_msg])
