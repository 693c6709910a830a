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

from .. import figures, kernels
from ..config import (
    ACTIVATIONS, ATTENTION_IMPLS, DEFAULT_PRESET, NORM_PLACEMENTS, POS_ENCODINGS, PRESETS, ConfigError, GPTConfig,
)
from ..session import (
    BUNDLED_CHECKPOINT, CACHE, breakdown_table, bundled_recipe, describe_recipe, hub_recipe, import_upload,
    random_recipe, summary_line, tree_items, tree_table, tying_explanation,
)
from ..files import discard_upload, is_trained_checkpoint
from ..weights import HUB_MODELS
from .chips import RESET
from .common import T, fail, new_state, ok, parse_bool, parse_choice, parse_number, parse_seed, parse_whole, \
    session_model, slider_range

FIELDS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate", "qkv_bias",
          "tie_weights", "pos_encoding", "activation", "norm_placement", "attention_impl")
INT_FIELDS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers")
WEIGHT_CHOICES = ["bundled (Tiny Shakespeare)", "random init", "OpenAI GPT-2 (hub)", "uploaded checkpoint",
                  "trained in the Train tab"]
CUSTOM = "custom (the fields below)"
PRESET_CHOICES = list(PRESETS) + [CUSTOM]
DTYPES = ("float32", "bfloat16", "int8")  # int8: weight-only, bfloat16 activations (playground.quantize)

HEAD_PATTERNS = {  # pattern name in facts.json -> (label, a prompt that shows it)
    "line_break": ("line-break head",
                   "KING RICHARD:\nA horse! a horse!\nMy kingdom for a horse!\n\nCATESBY:\nWithdraw, my lord;\n"),
    "duplicate_token": ("duplicate-token head", "the king, the queen, the king, the prince, the king and the queen"),
}


def head_examples(view_name: str) -> tuple[list[list], list[str]]:
    """(examples, labels): prompts paired with the bundled model's measured heads (assets/bundled/facts.json)."""
    facts_path = BUNDLED_CHECKPOINT.with_name("facts.json")
    if not facts_path.is_file():
        return [], []
    heads = json.loads(facts_path.read_text()).get("attention_heads", {})
    found = [(HEAD_PATTERNS[name], h) for name, h in heads.items() if name in HEAD_PATTERNS]
    examples = [[prompt, view_name, h["layer"], h["head"]] for (_, prompt), h in found]
    labels = [f"{label}: layer {h['layer']}, head {h['head']} ({h['ratio']:.1f}× an even spread)"
              for (label, _), h in found]
    return examples, labels


def config_from_fields(*values) -> GPTConfig:
    data = dict(zip(FIELDS, values))
    for name in INT_FIELDS:
        value = data[name]
        if value is None or value == "":
            raise ConfigError(f"{name} is empty: enter a whole number.")
        try:
            data[name] = parse_whole(value, name)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    try:
        data["drop_rate"] = parse_number(data["drop_rate"], "drop_rate")
        data["qkv_bias"] = parse_bool(data["qkv_bias"], "qkv_bias")
        data["tie_weights"] = parse_bool(data["tie_weights"], "tie_weights")
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return GPTConfig(**data)


def preset_fields(name: str):
    """Fill the config form from a preset (and preview the tying explanation); "custom" keeps the form."""
    if name not in PRESETS:
        return [gr.skip()] * (len(FIELDS) + 1)
    cfg = PRESETS[name]
    return [getattr(cfg, f) for f in FIELDS] + [tying_explanation(cfg)]


def preset_name(cfg: GPTConfig) -> str:
    return next((name for name, preset in PRESETS.items() if preset == cfg), CUSTOM)


def form_values(model, recipe: dict) -> tuple:
    """The form as it describes the loaded model: weights, preset, init seed, hub choice, precision, fields."""
    kind = recipe.get("kind")
    weights = {"bundled": WEIGHT_CHOICES[0], "random": WEIGHT_CHOICES[1], "hub": WEIGHT_CHOICES[2]}.get(kind)
    if kind == "file":
        weights = WEIGHT_CHOICES[4] if is_trained_checkpoint(recipe.get("path", "")) else WEIGHT_CHOICES[3]
    hub = next((name for name, repo in HUB_MODELS.items() if repo == recipe.get("repo")), None)
    cfg = model.cfg
    return ((weights or gr.skip()), preset_name(cfg), recipe.get("seed", gr.skip()), hub or gr.skip(),
            recipe.get("dtype", "float32")) + tuple(getattr(cfg, f) for f in FIELDS)


def model_views(model, recipe: dict, depth: int = 3):
    """Summary, tying text, tables and figures of the model, then the layer/head slider ranges."""
    rows, breakdown = breakdown_table(model)
    cfg = model.cfg
    return (
        summary_line(model, recipe),
        tying_explanation(cfg),
        rows,
        figures.parameter_treemap(tree_items(model), title="Parameters by module (tied weights counted once)"),
        figures.memory_bars(
            {**breakdown.memory,
             f"KV cache ({cfg.context_length} tokens, fp32)":
                 breakdown.kv_cache_bytes_per_token["float32"] * cfg.context_length},
            title=f"Memory · {breakdown.flops_per_token / 1e6:,.1f} MFLOPs per token at a full context",
        ),
        tree_table(model, int(depth)),
        slider_range(cfg.n_layers - 1),
        slider_range(cfg.n_heads - 1),
        kernels_table(),
    )


KERNEL_TEXT = {  # templates of the kernels box (kept together for translation)
    "head": "| decision | chosen | measured (median of one pass over the working set) |\n|---|---|---|",
    "none": "Nothing measured yet in this process.",
    "note": "Each choice times its candidates on this machine once per process and weight shape "
            "(`playground.kernels`); `PLAYGROUND_KERNELS=default` turns the measurements off.",
}


def kernels_table() -> str:
    """Every kernel/layout decision this process made, with the figures it was made on."""
    choices = kernels.measured()
    if not choices:
        return KERNEL_TEXT["none"]
    rows = [KERNEL_TEXT["head"]]
    for c in choices:
        figures_ms = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in c.seconds.items()) or "—"
        rows.append(f"| {c.decision} | **{c.winner}** | {figures_ms} |")
    return "\n".join(rows) + "\n\n" + KERNEL_TEXT["note"]


N_VIEWS = 9  # what model_views returns
N_FORM = 5 + len(FIELDS)  # what form_values returns


def switch_model(model, recipe: dict, message: str):
    """A session's new model: fresh state (the old run belonged to the old model), its views, the
    form describing it, and the bundled model's head examples only while it is the one loaded.

    Outputs: state, message, model views, form values, heatmap, chips, head examples' visibility."""
    state = {**new_state(), "recipe": recipe}
    return ((state, message) + model_views(model, recipe) + form_values(model, recipe)
            + (figures.empty_figure("Generate to see attention"), RESET, gr.update(visible=recipe["kind"] == "bundled")))


N_SWITCH = 2 + N_VIEWS + N_FORM + 3


def recipe_from_form(weights, seed, hub_name, upload, dtype, *fields, train_state=None) -> dict:
    """The recipe the form describes (no build): also used by the Score & compare tab's second model."""
    weights = parse_choice(weights, WEIGHT_CHOICES, "Weights")
    dtype = parse_choice(dtype, DTYPES, "Precision")
    if weights == "random init":
        cfg = config_from_fields(*fields)
        init_seed = parse_seed(seed, "Init seed")
        recipe = random_recipe(cfg, seed=init_seed or 0, dtype=dtype)
    elif weights == "OpenAI GPT-2 (hub)":
        recipe = hub_recipe(hub_name, dtype)
    elif weights == "uploaded checkpoint":
        if not upload:
            raise ValueError("Choose a .safetensors file to upload first.")
        upload_path = upload if isinstance(upload, str) else getattr(upload, "name", None)
        recipe = {**import_upload(upload_path), "dtype": dtype}
    elif weights == "trained in the Train tab":
        trained = (train_state or {}).get("recipe")
        if not trained:
            raise ValueError("Train a model in the Train tab first (or wait for training to finish or stop).")
        recipe = {**trained, "dtype": dtype}
    else:
        recipe = bundled_recipe(dtype)
    return recipe


def build_model(state, weights, seed, hub_name, upload, dtype, *fields, train_state=None, progress=gr.Progress()):
    """Build or load the model the form describes; on any problem the previous model stays."""
    try:
        recipe = recipe_from_form(weights, seed, hub_name, upload, dtype, *fields, train_state=train_state)
        upload_path = upload if isinstance(upload, str) else getattr(upload, "name", None)
        t0 = time.perf_counter()
        try:
            model = CACHE.get(recipe, progress=lambda frac, desc: progress(frac, desc=desc))
        except Exception:
            if weights == "uploaded checkpoint":  # a refused upload is not kept on disk
                discard_upload(recipe["path"])
                discard_upload(upload_path)
            raise
        elapsed = time.perf_counter() - t0
    except Exception as e:  # the previous model and run stay as they were
        return (state, fail(e)) + (gr.skip(),) * (N_SWITCH - 2)
    report = getattr(model, "load_report", None)
    extra = f" Loaded weights: {report.summary()}." if report is not None else ""
    return switch_model(model, recipe, ok(f"Ready: {describe_recipe(recipe)} in {elapsed:.2f} s.{extra}"))


def build_from_form(state, train_state, weights, seed, hub_name, upload, dtype, *fields, progress=gr.Progress()):
    """The Build button: the form plus the session's training state (for "trained in the Train tab")."""
    return build_model(state, weights, seed, hub_name, upload, dtype, *fields, train_state=train_state,
                       progress=progress)


def show_tree(state, depth):
    try:
        return tree_table(session_model(state), parse_whole(depth, "Tree depth", 1, 10))
    except Exception as e:
        return gr.skip()


def load_session(state=None):
    """Page load: a fresh session on the default model, with the form describing it."""
    state = new_state()
    model = session_model(state)
    recipe = state["recipe"]
    return (state,) + model_views(model, recipe) + form_values(model, recipe) + (
        gr.update(visible=recipe["kind"] == "bundled"),)


# ----------------------------------------------------------------------------------------------
# Layout and wiring


def layout() -> SimpleNamespace:
    """The tab's components: the form on the left, the model's tables and figures on the right."""
    cfg = PRESETS[DEFAULT_PRESET]  # the form starts here; load_session fills in the real model
    c = SimpleNamespace()
    with gr.Row():
        with gr.Column(scale=2, min_width=320):
            c.weights = gr.Radio(WEIGHT_CHOICES, label=T("weights"),
                                 value=WEIGHT_CHOICES[0] if BUNDLED_CHECKPOINT.is_file() else "random init")
            c.preset = gr.Dropdown(PRESET_CHOICES, value=DEFAULT_PRESET, label=T("preset"))
            with gr.Accordion(T("config_fields"), open=False):
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
            with gr.Row():
                c.seed_init = gr.Number(0, label=T("seed_init"), min_width=100)
                c.dtype = gr.Radio(list(DTYPES), value="float32", label=T("dtype"),
                                   info=T("dtype_info"))
            c.hub_name = gr.Dropdown(list(HUB_MODELS), value=list(HUB_MODELS)[0], label=T("hub_model"))
            c.upload = gr.File(label=T("upload"), file_types=[".safetensors"], type="filepath")
            c.build_btn = gr.Button(T("build"), variant="primary", elem_id="pg-build")
            c.build_msg = gr.HTML(elem_id="pg-build-msg")
        with gr.Column(scale=3):
            c.tying_md = gr.Markdown()
            c.breakdown_df = gr.Dataframe(headers=["component", "formula", "formula value", "measured", "agree"],
                                          label=T("breakdown"), interactive=False, wrap=True)
            c.treemap = gr.Plot(label="treemap", show_label=False)
            c.memory_plot = gr.Plot(label="memory", show_label=False)
            with gr.Accordion(T("kernels"), open=False):
                c.kernels_md = gr.Markdown(elem_id="pg-kernels")
            c.tree_depth = gr.Slider(1, 6, value=3, step=1, label=T("tree_depth"))
            c.tree_df = gr.Dataframe(headers=["module", "type", "parameters (shapes)", "own", "total", "tied", "path"],
                                     label=T("tree"), interactive=False, max_height=420, wrap=True)
    c.form = [c.weights, c.preset, c.seed_init, c.hub_name, c.dtype] + c.fields
    return c


def model_outputs(page) -> list:
    """Where ``model_views`` goes (the layer/head sliders live in the Generate tab)."""
    m, g = page.model, page.generate
    return [page.summary, m.tying_md, m.breakdown_df, m.treemap, m.memory_plot, m.tree_df, g.layer, g.head, m.kernels_md]


def switch_outputs(page) -> list:
    """Where ``switch_model`` goes: every tab that shows something of the session's model or run."""
    g = page.generate
    return [page.state, page.model.build_msg] + model_outputs(page) + page.model.form + [g.heatmap, g.chips, g.head_box]


def wire(page) -> None:
    m = page.model
    page.demo.load(load_session, None, [page.state] + model_outputs(page) + m.form + [page.generate.head_box],
                   api_name="load_session")
    m.preset.input(preset_fields, m.preset, m.fields + [m.tying_md], api_name="preset_config")
    m.build_btn.click(build_from_form,
                      [page.state, page.train_state, m.weights, m.seed_init, m.hub_name, m.upload, m.dtype] + m.fields,
                      switch_outputs(page), api_name="build_model", concurrency_id="models", concurrency_limit=2)
    m.tree_depth.release(show_tree, [page.state, m.tree_depth], m.tree_df, api_name="module_tree")
