"""The Gradio app: handlers first (widget values -> session/engine calls -> figures and messages),
then the ``gr.Blocks`` layout, then the event wiring. The only module that imports gradio."""

from __future__ import annotations

import logging
import threading
import time
import traceback

import gradio as gr
import numpy as np

from . import figures
from .config import PRESETS, DEFAULT_PRESET, ConfigError, GPTConfig, ACTIVATIONS, ATTENTION_IMPLS, NORM_PLACEMENTS, POS_ENCODINGS
from .session import (
    CACHE, MAX_NEW_TOKENS, Run, breakdown_table, bundled_recipe, default_recipe, describe_recipe, export_model,
    export_run, hub_recipe, import_upload, layer_attention, random_recipe, run_attention, summary_line,
    tree_items, tree_table, tying_explanation, BUNDLED_CHECKPOINT,
)
from .tokenizer import load_tokenizer
from .translations import EN, ZH
from .weights import HUB_MODELS, WeightLoadError

log = logging.getLogger("playground.ui")
DECODE_LOCK = threading.Lock()
ACTIVE_STREAMS: set = set()  # one token per generation in flight, to pace the streamed updates
STREAM_INTERVAL_S = 0.08
N_AFTER = 7  # outputs shown when a run ends: heatmap, query bars, step slider, prob bars, stages, step text, query
I18N = gr.I18n(en=EN, **{"zh-CN": ZH, "zh": ZH})
T = I18N  # T("key") -> a label translated in the browser

FIELDS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate", "qkv_bias",
          "tie_weights", "pos_encoding", "activation", "norm_placement", "attention_impl")
INT_FIELDS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers")
WEIGHT_CHOICES = ["bundled (Tiny Shakespeare)", "random init", "OpenAI GPT-2 (hub)", "uploaded checkpoint"]
VIEWS = ["one head", "all heads of the layer", "head average", "rollout across layers",
         "overview: previous-token mass", "overview: first-token mass", "overview: entropy"]
HEATMAP_MAX_TOKENS = 64  # beyond this the newest positions are shown, and the title says so
GRID_MAX_TOKENS = 32
EXAMPLES = [
    ["ROMEO:\nWhat light through yonder window breaks?\n"],
    ["First Citizen:\nBefore we proceed any further, hear me speak.\n"],
    ["Hello, I am a language model, and"],
    ["The capital of France is Paris. The capital of Germany is"],
    ["从前有一座山，山上有一座庙，"],
    ["注意力机制让模型在生成每个词时"],
]


HEAD_PATTERNS = {  # pattern name in facts.json -> (label, a prompt that shows it)
    "line_break": ("line-break head",
                   "KING RICHARD:\nA horse! a horse!\nMy kingdom for a horse!\n\nCATESBY:\nWithdraw, my lord;\n"),
    "duplicate_token": ("duplicate-token head", "the king, the queen, the king, the prince, the king and the queen"),
}


def head_examples() -> tuple[list[list], list[str]]:
    """(examples, labels): prompts paired with the bundled model's measured heads (assets/bundled/facts.json)."""
    import json

    facts_path = BUNDLED_CHECKPOINT.with_name("facts.json")
    if not facts_path.is_file():
        return [], []
    heads = json.loads(facts_path.read_text()).get("attention_heads", {})
    found = [(HEAD_PATTERNS[name], h) for name, h in heads.items() if name in HEAD_PATTERNS]
    examples = [[prompt, VIEWS[0], h["layer"], h["head"]] for (_, prompt), h in found]
    labels = [f"{label}: layer {h['layer']}, head {h['head']} ({h['ratio']:.1f}× an even spread)"
              for (label, _), h in found]
    return examples, labels


def _warn(message: str) -> str:
    return f"<div class='pg-msg pg-error'>⚠️ {message}</div>"


def _ok(message: str) -> str:
    return f"<div class='pg-msg pg-ok'>✓ {message}</div>"


def _fail(e: Exception) -> str:
    """User errors keep their own message; anything else is logged and reported briefly."""
    if isinstance(e, (ValueError, ConfigError, WeightLoadError, FileNotFoundError, MemoryError)):
        return _warn(str(e))
    log.error("unexpected error: %s", traceback.format_exc())
    return _warn(f"Something went wrong ({type(e).__name__}: {e}). Your model and results are unchanged.")


def new_state() -> dict:
    return {"recipe": default_recipe(), "run": None}


def _model(state: dict):
    return CACHE.get(state["recipe"])


# ----------------------------------------------------------------------------------------------
# Model tab handlers


def config_from_fields(*values) -> GPTConfig:
    data = dict(zip(FIELDS, values))
    for name in INT_FIELDS:
        value = data[name]
        if value is None or value == "":
            raise ConfigError(f"{name} is empty: enter a whole number.")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be a whole number, got {value!r}.") from None
        if not number.is_integer():
            raise ConfigError(f"{name} must be a whole number, got {value!r}.")
        data[name] = int(number)
    try:
        data["drop_rate"] = float(data["drop_rate"])
    except (TypeError, ValueError):
        raise ConfigError(f"drop_rate must be a number in [0, 1), got {data['drop_rate']!r}.") from None
    data["qkv_bias"], data["tie_weights"] = bool(data["qkv_bias"]), bool(data["tie_weights"])
    return GPTConfig(**data)


def preset_fields(name: str):
    """Fill the config form from a preset (and preview the tying explanation)."""
    cfg = PRESETS.get(name, PRESETS[DEFAULT_PRESET])
    return [getattr(cfg, f) for f in FIELDS] + [tying_explanation(cfg)]


def model_views(model, recipe: dict, depth: int = 3):
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
        gr.update(maximum=cfg.n_layers - 1, value=0),
        gr.update(maximum=cfg.n_heads - 1, value=0),
    )


def build_model(state, weights, seed, hub_name, upload, dtype, *fields, progress=gr.Progress()):
    """Build or load the model the form describes; on any problem the previous model stays."""
    n_views = 8
    try:
        if weights == "random init":
            cfg = config_from_fields(*fields)
            recipe = random_recipe(cfg, seed=int(seed or 0), dtype=dtype)
        elif weights == "OpenAI GPT-2 (hub)":
            recipe = hub_recipe(hub_name, dtype)
        elif weights == "uploaded checkpoint":
            if not upload:
                raise ValueError("Choose a .safetensors file to upload first.")
            path = upload if isinstance(upload, str) else getattr(upload, "name", None)
            recipe = import_upload(path)
            recipe["dtype"] = dtype
        else:
            recipe = bundled_recipe(dtype)
        t0 = time.perf_counter()
        model = CACHE.get(recipe, progress=lambda frac, desc: progress(frac, desc=desc))
        elapsed = time.perf_counter() - t0
    except Exception as e:  # the previous model and run stay as they were
        return (state, _fail(e)) + (gr.skip(),) * (n_views + 2)
    report = getattr(model, "load_report", None)
    extra = f" Loaded weights: {report.summary()}." if report is not None else ""
    return switch_model(model, recipe, _ok(f"Ready: {describe_recipe(recipe)} in {elapsed:.2f} s.{extra}"))


def switch_model(model, recipe: dict, message: str):
    """A session's new model: fresh state (the old run belonged to the old model) and its views."""
    state = {"recipe": recipe, "run": None}
    return (state, message) + model_views(model, recipe) + (figures.empty_figure("Generate to see attention"), [])


def show_tree(state, depth):
    try:
        return tree_table(_model(state), int(depth))
    except Exception as e:
        log.error("tree: %s", e)
        return gr.skip()


def load_session(state=None):
    """Page load: a fresh session on the default model."""
    state = new_state()
    model = _model(state)
    return (state,) + model_views(model, state["recipe"])


# ----------------------------------------------------------------------------------------------
# Generate tab handlers


def token_chips(run: Run) -> list[tuple[str, str]]:
    """(text, label) pairs: prompt tokens labelled by id, generated ones by id and probability."""
    tok = load_tokenizer()
    chips = [(p.display, f"#{p.id}") for p in tok.pieces(run.prompt_ids)]
    for s in run.steps:
        chips.append((tok.piece(s.token_id).display, f"{s.token_id} · {s.prob:.0%}"))
    return chips


def chip_colors(run: Run) -> dict[str, str]:
    """Prompt tokens grey; generated tokens by how sure the model was (dark enough for white labels)."""
    colors = {f"#{i}": "#6b7280" for i in run.prompt_ids}
    for s in run.steps:
        colors[f"{s.token_id} · {s.prob:.0%}"] = "#1d4ed8" if s.prob >= 0.5 else "#b45309" if s.prob >= 0.1 else "#b91c1c"
    return colors


def _status(run: Run, elapsed: float, done: bool) -> str:
    n = len(run.steps)
    rate = n / elapsed if elapsed > 0 else 0.0
    parts = [f"{'Done' if done else 'Generating'}: {n} token{'s' if n != 1 else ''} · {rate:.1f} tokens/s"]
    if run.n_cropped:
        parts.append(f"the prompt was cropped by {run.n_cropped} tokens from the left to fit the "
                     f"{len(run.prompt_ids)}-token context window")
    if run.steps and run.steps[-1].context_start:
        parts.append(f"the window now starts at position {run.steps[-1].context_start} (older tokens fall out)")
    if run.stopped:
        parts.append("stopped by you")
    return " · ".join(parts)


def generate_tokens(state, prompt, temperature, top_k, top_p, max_new_tokens, seed, greedy,
                    view=VIEWS[0], layer=0, head=0, log_scale=True):
    """Stream tokens; at the end show the attention and the last step's distribution."""
    from .session import start_run

    try:
        model = _model(state)
        run, gen = start_run(model, state["recipe"], prompt, max_new_tokens=max_new_tokens,
                             temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, greedy=greedy)
    except Exception as e:
        yield (state, gr.skip(), _fail(e)) + (gr.skip(),) * N_AFTER
        return
    state = {"recipe": state["recipe"], "run": run}
    t0 = time.perf_counter()
    steps = iter(gen)
    token = object()
    ACTIVE_STREAMS.add(token)
    try:
        yield from _stream(state, run, steps, t0, view, layer, head, log_scale)
    finally:
        ACTIVE_STREAMS.discard(token)


def _stream(state, run, steps, t0, view, layer, head, log_scale):
    last_yield = 0.0
    while True:
        # One decode step at a time across all users: steps interleave fairly, and the cores are
        # not oversubscribed by several forwards each asking for every core (bench/: with 4 users
        # and no lock, the aggregate rate fell to half of one user's).
        with DECODE_LOCK:
            step = next(steps, None)
        if step is None:
            break
        run.steps.append(step)
        now = time.perf_counter()
        run.elapsed = now - t0
        # Each streamed update costs the server ~20 ms of Python (the GIL serialises it across
        # users), so the whole server sends ~12 updates a second however many users generate.
        if now - last_yield > STREAM_INTERVAL_S * max(1, len(ACTIVE_STREAMS)):
            last_yield = now
            yield (state, gr.update(value=token_chips(run), color_map=chip_colors(run)),
                   _status(run, now - t0, False)) + (gr.skip(),) * N_AFTER
    yield (state, gr.update(value=token_chips(run), color_map=chip_colors(run)),
           _status(run, time.perf_counter() - t0, True)) + after_run_views(state, view, layer, head, log_scale)


def after_run_views(state, view=VIEWS[0], layer=0, head=0, log_scale=True):
    run = state["run"]
    n_steps = len(run.steps)
    heat, query_fig, query_update = attention_views(state, view, layer, head, log_scale, None)
    step_outputs = inspect_step(state, n_steps - 1) if n_steps else (gr.skip(),) * 3
    return ((heat, query_fig, gr.update(maximum=max(0, n_steps - 1), value=max(0, n_steps - 1)))
            + tuple(step_outputs) + (query_update,))


def stop_generation(state, view=VIEWS[0], layer=0, head=0, log_scale=True):
    run = state.get("run")
    if run is None:
        return (state, gr.skip()) + (gr.skip(),) * N_AFTER
    run.stopped = True
    return (state, _status(run, run.elapsed, True)) + after_run_views(state, view, layer, head, log_scale)


def inspect_step(state, step_index):
    """Probability bars, the stage-by-stage reshaping, and a sentence about one generated token."""
    run = state.get("run")
    if run is None or not run.steps:
        empty = figures.empty_figure("Generate first")
        return empty, empty, "Generate some tokens, then pick one."
    i = int(min(max(0, int(step_index or 0)), len(run.steps) - 1))
    s = run.steps[i]
    tok = load_tokenizer()
    top_labels = [f"{tok.piece(t).display} ({t})" for t, _ in s.top]
    bars = figures.token_probability_bars(top_labels, [p for _, p in s.top], chosen=_index_of(s.top, s.token_id),
                                          title=f"Step {i}: most likely next tokens under the sampling distribution")
    cand_labels = [f"{tok.piece(t).display} ({t})" for t in s.candidates]
    stages = figures.sampling_stages_figure(cand_labels, s.stages, chosen=s.candidates.index(s.token_id),
                                            title="How each knob reshapes the distribution")
    settings = run.settings
    text = (
        f"**Step {i}** chose **{tok.piece(s.token_id).display}** (id {s.token_id}) at position {s.position}: "
        f"p = **{s.prob:.2%}** under the sampling distribution, {s.raw_prob:.2%} under the raw softmax, "
        f"rank **{s.rank}** of {tok.n_vocab:,}. "
        f"Entropy {s.entropy:.2f} bits after the filters ({s.raw_entropy:.2f} bits raw); "
        f"{s.kept_tokens:,} tokens could have been drawn. Settings: temperature {settings['temperature']}, "
        f"top-k {settings['top_k'] or 'off'}, top-p {settings['top_p'] if settings['top_p'] not in (None, 1.0) else 'off'}."
    )
    return bars, stages, text


def _index_of(top, token_id):
    for i, (t, _) in enumerate(top):
        if t == token_id:
            return i
    return None


def select_token(state, evt: gr.SelectData):
    """Clicking a chip: a generated token opens its step; a prompt token says so."""
    run = state.get("run")
    if run is None:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    index = evt.index if isinstance(evt.index, int) else evt.index[0]
    step = index - len(run.prompt_ids)
    if step < 0:
        return gr.skip(), gr.skip(), gr.skip(), f"Token {index} is part of the prompt: the model read it, it did not choose it."
    return (gr.update(value=step),) + tuple(inspect_step(state, step))


def attention_views(state, view, layer, head, log_scale, query):
    """The chosen attention figure, where one query looked, and the query slider's range."""
    run = state.get("run")
    if run is None or not run.steps and not run.prompt_ids:
        empty = figures.empty_figure("Generate to see attention")
        return empty, empty, gr.skip()
    model = _model(state)
    start, qk = run_attention(model, run)
    tok = load_tokenizer()
    ids = run.token_ids[start:]
    labels = [p.display for p in tok.pieces(ids)]
    T_len = len(ids)
    layer = int(min(max(0, int(layer or 0)), len(qk) - 1))
    head = int(min(max(0, int(head or 0)), model.cfg.n_heads - 1))
    query = T_len - 1 if query is None else int(min(max(0, int(query)), T_len - 1))
    note = f" (window starts at token {start})" if start else ""
    probs_layer = layer_attention(qk, layer)  # (H, T, T)
    if view == "all heads of the layer":
        fig = figures.attention_grid(probs_layer, labels, title=f"Layer {layer}: every head{note}",
                                     log_scale=log_scale, max_tokens=GRID_MAX_TOKENS)
        row = probs_layer.mean(axis=0)[query]
    elif view == "head average":
        avg = probs_layer.mean(axis=0)
        fig = figures.attention_heatmap(avg, labels, title=f"Layer {layer}: average over heads{note}",
                                        log_scale=log_scale, highlight_query=query, max_tokens=HEATMAP_MAX_TOKENS)
        row = avg[query]
    elif view == "rollout across layers":
        all_layers = [layer_attention(qk, i) for i in range(len(qk))]
        rolled = figures.attention_rollout(all_layers)
        fig = figures.attention_heatmap(rolled, labels, title=f"Attention rollout through all {len(qk)} layers{note}",
                                        log_scale=log_scale, highlight_query=query, max_tokens=HEATMAP_MAX_TOKENS)
        row = rolled[query]
    elif view.startswith("overview"):
        all_layers = [layer_attention(qk, i) for i in range(len(qk))]
        stats = figures.head_stats(all_layers)
        metric = {"overview: previous-token mass": "previous-token", "overview: first-token mass": "first-token",
                  "overview: entropy": "entropy"}[view]
        fig = figures.attention_overview(stats[metric], metric_name=metric,
                                         title=f"Every layer × head: {metric}{' (bits)' if metric == 'entropy' else ''}")
        row = probs_layer[head][query]
    else:
        fig = figures.attention_heatmap(probs_layer[head], labels, title=f"Layer {layer}, head {head}{note}",
                                        log_scale=log_scale, highlight_query=query, max_tokens=HEATMAP_MAX_TOKENS)
        row = probs_layer[head][query]
    query_fig = figures.query_attention_bars(np.asarray(row), labels, query_label=labels[query],
                                             title=f"Where position {query} ({labels[query]}) looked")
    return fig, query_fig, gr.update(maximum=T_len - 1, value=query)


def attention_data(state, layer, head):
    """API: the raw attention matrix of one head for the current run, with its tokens."""
    run = state.get("run")
    if run is None:
        return {"error": "Generate first."}
    model = _model(state)
    start, qk = run_attention(model, run)
    layer = int(layer)
    head = int(head)
    if not (0 <= layer < len(qk) and 0 <= head < model.cfg.n_heads):
        return {"error": f"layer must be 0..{len(qk) - 1} and head 0..{model.cfg.n_heads - 1}."}
    probs = layer_attention(qk, layer)[head]
    tok = load_tokenizer()
    ids = run.token_ids[start:]
    return {"layer": layer, "head": head, "window_start": start, "token_ids": ids,
            "tokens": [p.display for p in tok.pieces(ids)], "attention": probs.tolist()}


def run_data(state):
    """API: the current run's tokens with their probabilities."""
    run = state.get("run")
    if run is None:
        return {"error": "Generate first."}
    tok = load_tokenizer()
    return {
        "model": describe_recipe(run.recipe), "settings": run.settings, "prompt_ids": run.prompt_ids,
        "prompt_tokens_cropped": run.n_cropped, "token_ids": run.token_ids,
        "text": tok.decode([s.token_id for s in run.steps]),
        "steps": [{"token_id": s.token_id, "token": tok.piece(s.token_id).display, "prob": s.prob,
                   "raw_prob": s.raw_prob, "rank": s.rank, "entropy_bits": s.entropy,
                   "top": [[t, p] for t, p in s.top]} for s in run.steps],
    }


def export_run_file(state, fmt):
    run = state.get("run")
    if run is None:
        return gr.skip(), _warn("Generate something first; there is no run to export yet.")
    try:
        return str(export_run(run, _model(state), fmt)), _ok(f"Run exported as .{fmt}.")
    except Exception as e:
        return gr.skip(), _fail(e)


def export_model_file(state):
    try:
        return str(export_model(_model(state), state["recipe"])), _ok("Model exported; the upload box accepts it back.")
    except Exception as e:
        return gr.skip(), _fail(e)


# ----------------------------------------------------------------------------------------------
# Train tab handlers

CORPUS_CHOICES = ["Tiny Shakespeare (downloaded once, then cached)", "upload a .txt", "paste text"]


def corpus_text(source, upload, pasted) -> tuple[str, str]:
    from .corpus import load_tiny_shakespeare, text_from_paste, text_from_upload

    if source == CORPUS_CHOICES[1]:
        return text_from_upload(upload), "your upload"
    if source == CORPUS_CHOICES[2]:
        return text_from_paste(pasted), "pasted text"
    return load_tiny_shakespeare(), "Tiny Shakespeare"


def _loss_figure(job):
    import math

    return figures.loss_curve(
        job.train_points, job.val_points, title="Loss (cross-entropy, nats): training batches and held-out tenth",
        baselines={"unigram (ignores context)": job.unigram, "uniform guess (ln V)": math.log(job.cfg.vocab_size)},
    )


def _progress_html(job) -> str:
    ev = job.last_event
    step = ev.step if ev else 0
    total = job.tcfg.steps
    elapsed = ev.elapsed_s if ev else 0.0
    rate = (ev.tokens_seen / elapsed) if ev and elapsed > 0 else 0.0
    val = f" · validation loss {job.val_points[-1][1]:.3f}" if job.val_points else ""
    return (f"<progress value='{step}' max='{total}' style='width:100%;height:18px'></progress>"
            f"<div>step {step:,} / {total:,} · {ev.tokens_seen if ev else 0:,} tokens · {elapsed:.1f} s · "
            f"{rate:,.0f} tokens/s{val}</div>")


def train_model(train_state, preset_name, source, upload, pasted, steps, lr):
    """Train in a background thread and stream the loss curve; a closed tab stops the thread."""
    from .session import JOBS, TrainingJob

    try:
        if preset_name not in PRESETS:
            raise ValueError(f"Unknown model {preset_name!r}.")
        text, name = corpus_text(source, upload, pasted)
        job = TrainingJob(PRESETS[preset_name], text, name, steps=steps, lr=lr).start()
    except Exception as e:
        yield train_state, gr.skip(), gr.skip(), _fail(e)
        return
    train_state = {"job": job.id, "recipe": None}
    started = _ok(f"Training {preset_name} on {job.corpus.describe()}.")
    try:
        while not job.done.wait(0.5):
            yield train_state, _loss_figure(job), _progress_html(job), started
    finally:
        if not job.done.is_set():
            job.stop()  # the user left or cancelled: end the thread after its current step
    JOBS.pop(job.id, None)
    if job.error:
        yield train_state, _loss_figure(job), _progress_html(job), _warn(f"Training failed: {job.error}")
        return
    train_state = {"job": job.id, "recipe": job.result_recipe()}
    how = "Stopped" if job.stopped else "Finished"
    yield (train_state, _loss_figure(job), _progress_html(job),
           _ok(f"{how} after {job.trainer.step_count:,} steps. Press “Use the trained model” to generate with it."))


def stop_training(train_state):
    from .session import JOBS

    job = JOBS.get((train_state or {}).get("job") or "")
    if job is None:
        return _warn("No training is running in this session.")
    job.stop()
    return _ok("Stopping after the current step; what was learned so far is kept.")


def use_trained(state, train_state):
    recipe = (train_state or {}).get("recipe")
    if not recipe:
        return (state, _warn("Train a model first (or wait for training to finish or stop).")) + (gr.skip(),) * 10
    try:
        model = CACHE.get(recipe)
    except Exception as e:
        return (state, _fail(e)) + (gr.skip(),) * 10
    return switch_model(model, recipe, _ok(f"Now using {describe_recipe(recipe)}."))


# ----------------------------------------------------------------------------------------------
# Layout and wiring

CSS = """
.pg-msg { padding: 6px 10px; border-radius: 6px; margin: 4px 0; font-size: 15px; }
.pg-error { background: #fef2f2; color: #991b1b; border: 1px solid #fecaca; }
.pg-ok { background: #f0fdf4; color: #166534; border: 1px solid #bbf7d0; }
#pg-summary { font-size: 15px; }
#pg-chips span { font-size: 16px; }
"""


def build_demo() -> gr.Blocks:
    default_model = CACHE.get(default_recipe())  # warm: the first page load is instant
    default_cfg = PRESETS[DEFAULT_PRESET]  # what the config form starts from
    model_cfg = default_model.cfg  # what the attention sliders start from
    with gr.Blocks(title="GPT Playground") as demo:
        state = gr.State(new_state())
        gr.Markdown(f"# {EN['title']} · {ZH['title']}\n{EN['subtitle']}")
        summary = gr.Markdown(elem_id="pg-summary")
        with gr.Tabs():
            with gr.Tab(T("tab_model"), id="model"):
                with gr.Row():
                    with gr.Column(scale=2, min_width=320):
                        weights = gr.Radio(WEIGHT_CHOICES, value=WEIGHT_CHOICES[0] if BUNDLED_CHECKPOINT.is_file() else "random init",
                                           label=T("weights"))
                        preset = gr.Dropdown(list(PRESETS), value=DEFAULT_PRESET, label=T("preset"))
                        with gr.Accordion(T("config_fields"), open=False):
                            f_vocab = gr.Number(default_cfg.vocab_size, label=T("vocab_size"), precision=0)
                            f_ctx = gr.Number(default_cfg.context_length, label=T("context_length"), precision=0)
                            f_emb = gr.Number(default_cfg.emb_dim, label=T("emb_dim"), precision=0)
                            f_heads = gr.Number(default_cfg.n_heads, label=T("n_heads"), precision=0)
                            f_layers = gr.Number(default_cfg.n_layers, label=T("n_layers"), precision=0)
                            f_drop = gr.Number(default_cfg.drop_rate, label=T("drop_rate"))
                            f_qkv = gr.Checkbox(default_cfg.qkv_bias, label=T("qkv_bias"))
                            f_tie = gr.Checkbox(default_cfg.tie_weights, label=T("tie_weights"))
                            f_pos = gr.Dropdown(list(POS_ENCODINGS), value=default_cfg.pos_encoding, label=T("pos_encoding"))
                            f_act = gr.Dropdown(list(ACTIVATIONS), value=default_cfg.activation, label=T("activation"))
                            f_norm = gr.Dropdown(list(NORM_PLACEMENTS), value=default_cfg.norm_placement, label=T("norm_placement"))
                            f_attn = gr.Dropdown(list(ATTENTION_IMPLS), value=default_cfg.attention_impl, label=T("attention_impl"))
                        fields = [f_vocab, f_ctx, f_emb, f_heads, f_layers, f_drop, f_qkv, f_tie, f_pos, f_act, f_norm, f_attn]
                        with gr.Row():
                            seed_init = gr.Number(0, label=T("seed_init"), precision=0, min_width=100)
                            dtype = gr.Radio(["float32", "bfloat16"], value="float32", label=T("dtype"),
                                             info="bfloat16 halves memory and is faster on most CPUs; float32 is exact.")
                        hub_name = gr.Dropdown(list(HUB_MODELS), value=list(HUB_MODELS)[0], label=T("hub_model"))
                        upload = gr.File(label=T("upload"), file_types=[".safetensors"], type="filepath")
                        build_btn = gr.Button(T("build"), variant="primary")
                        build_msg = gr.HTML()
                    with gr.Column(scale=3):
                        tying_md = gr.Markdown()
                        breakdown_df = gr.Dataframe(headers=["component", "formula", "formula value", "measured", "agree"],
                                                    label=T("breakdown"), interactive=False, wrap=True)
                        treemap = gr.Plot(label="treemap", show_label=False)
                        memory_plot = gr.Plot(label="memory", show_label=False)
                        tree_depth = gr.Slider(1, 6, value=3, step=1, label=T("tree_depth"))
                        tree_df = gr.Dataframe(headers=["module", "type", "parameters (shapes)", "own", "total", "tied", "path"],
                                               label=T("tree"), interactive=False, max_height=420, wrap=True)
            with gr.Tab(T("tab_generate"), id="generate"):
                with gr.Row():
                    with gr.Column(scale=2, min_width=340):
                        prompt = gr.Textbox(EXAMPLES[0][0], label=T("prompt"), lines=3, max_length=20_000, elem_id="pg-prompt")
                        gr.Examples(EXAMPLES, inputs=[prompt], label=T("examples"))
                        with gr.Row():
                            temperature = gr.Slider(0, 2, value=0.8, step=0.05, label=T("temperature"))
                            top_k = gr.Slider(0, 200, value=40, step=1, label=T("top_k"))
                        with gr.Row():
                            top_p = gr.Slider(0.05, 1, value=1.0, step=0.05, label=T("top_p"))
                            max_new = gr.Slider(1, MAX_NEW_TOKENS, value=40, step=1, label=T("max_new_tokens"), elem_id="pg-max-new")
                        with gr.Row():
                            seed = gr.Number(42, label=T("seed"), precision=0, min_width=100)
                            greedy = gr.Checkbox(False, label=T("greedy"))
                        with gr.Row():
                            gen_btn = gr.Button(T("generate"), variant="primary", elem_id="pg-generate")
                            stop_btn = gr.Button(T("stop"), variant="stop", elem_id="pg-stop")
                        status = gr.HTML(elem_id="pg-status")
                        gr.Markdown("Grey: prompt tokens (with their ids). Generated tokens show id · probability: "
                                    "<span style='color:#1d4ed8'>■</span> ≥ 50% · <span style='color:#b45309'>■</span> 10–50% · "
                                    "<span style='color:#b91c1c'>■</span> < 10%.")
                        chips = gr.HighlightedText(label=T("tokens"), show_legend=False, show_inline_category=True,
                                                   combine_adjacent=False, elem_id="pg-chips")
                        step_slider = gr.Slider(0, 1, value=0, step=1, label=T("step"))
                        step_md = gr.Markdown()
                        prob_plot = gr.Plot(show_label=False)
                        stages_plot = gr.Plot(show_label=False)
                    with gr.Column(scale=3):
                        with gr.Row():
                            view = gr.Dropdown(VIEWS, value=VIEWS[0], label=T("view"), elem_id="pg-view")
                            log_scale = gr.Checkbox(True, label=T("log_scale"))
                        with gr.Row():
                            layer = gr.Slider(0, max(1, model_cfg.n_layers - 1), value=0, step=1, label=T("layer"))
                            head = gr.Slider(0, max(1, model_cfg.n_heads - 1), value=0, step=1, label=T("head"))
                            query = gr.Slider(0, 1, value=0, step=1, label=T("query"), elem_id="pg-query")
                        head_rows, head_labels = head_examples()
                        if head_rows:
                            gr.Examples(head_rows, inputs=[prompt, view, layer, head],
                                        example_labels=head_labels,
                                        label="Heads with a pattern in the bundled model (measured; see README): "
                                              "pick one, then Generate")
                        heatmap = gr.Plot(show_label=False, elem_id="pg-heatmap")
                        query_plot = gr.Plot(show_label=False)
                        with gr.Row():
                            exp_json = gr.Button(T("export_json"), size="sm")
                            exp_npz = gr.Button(T("export_npz"), size="sm")
                            exp_model = gr.Button(T("export_model"), size="sm")
                        export_file = gr.File(label=T("download"), interactive=False)
                        export_msg = gr.HTML()
                        attention_json = gr.JSON(visible=False)
                        run_json = gr.JSON(visible=False)
            with gr.Tab(T("tab_train"), id="train"):
                train_state = gr.State({"job": None, "recipe": None})
                with gr.Row():
                    with gr.Column(scale=2, min_width=320):
                        train_preset = gr.Dropdown(list(PRESETS), value="nano (2 layers, d64)", label=T("train_config"))
                        corpus_source = gr.Radio(CORPUS_CHOICES, value=CORPUS_CHOICES[0], label=T("corpus"))
                        corpus_file = gr.File(label=T("corpus_upload"), file_types=[".txt"], type="filepath")
                        corpus_paste = gr.Textbox(label=T("corpus_paste"), lines=4, max_lines=8, max_length=2_000_000)
                        with gr.Row():
                            train_steps = gr.Number(200, label=T("steps"), precision=0, minimum=1, maximum=5000)
                            train_lr = gr.Number(2e-3, label=T("lr"), minimum=0, maximum=1)
                        with gr.Row():
                            train_btn = gr.Button(T("train"), variant="primary")
                            train_stop = gr.Button(T("stop"), variant="stop")
                        use_btn = gr.Button(T("use_trained"))
                        train_msg = gr.HTML()
                    with gr.Column(scale=3):
                        train_progress = gr.HTML()
                        loss_plot = gr.Plot(show_label=False)

        # ---- wiring ----
        model_outputs = [summary, tying_md, breakdown_df, treemap, memory_plot, tree_df, layer, head]
        demo.load(load_session, None, [state] + model_outputs, api_name="load_session")
        preset.change(preset_fields, preset, fields + [tying_md], api_name="preset_config")
        build_btn.click(build_model, [state, weights, seed_init, hub_name, upload, dtype] + fields,
                        [state, build_msg] + model_outputs + [heatmap, chips],
                        api_name="build_model", concurrency_id="models", concurrency_limit=2)
        tree_depth.release(show_tree, [state, tree_depth], tree_df, api_name="module_tree")

        after = [heatmap, query_plot, step_slider, prob_plot, stages_plot, step_md, query]
        gen_inputs = [state, prompt, temperature, top_k, top_p, max_new, seed, greedy, view, layer, head, log_scale]
        gen_event = gen_btn.click(
            generate_tokens, gen_inputs,
            [state, chips, status] + after, api_name="generate", concurrency_id="generate", concurrency_limit=4,
        )
        prompt.submit(
            generate_tokens, gen_inputs,
            [state, chips, status] + after, api_visibility="private", concurrency_id="generate",
        )
        stop_btn.click(stop_generation, [state, view, layer, head, log_scale], [state, status] + after,
                       cancels=[gen_event], api_name="stop")
        step_slider.release(inspect_step, [state, step_slider], [prob_plot, stages_plot, step_md], api_name="inspect_step")
        chips.select(select_token, state, [step_slider, prob_plot, stages_plot, step_md], api_visibility="private")
        att_inputs = [state, view, layer, head, log_scale, query]
        for control in (view, log_scale):
            control.change(attention_views, att_inputs, [heatmap, query_plot, query], api_visibility="private")
        for control in (layer, head, query):
            control.release(attention_views, att_inputs, [heatmap, query_plot, query], api_visibility="private")
        exp_json.click(lambda s: export_run_file(s, "json"), state, [export_file, export_msg], api_name="export_run_json")
        exp_npz.click(lambda s: export_run_file(s, "npz"), state, [export_file, export_msg], api_name="export_run_npz")
        exp_model.click(export_model_file, state, [export_file, export_msg], api_name="export_model")
        # API-only endpoints: raw numbers for gradio_client users.
        attn_btn = gr.Button(visible=False)
        attn_btn.click(attention_data, [state, layer, head], attention_json, api_name="attention_data")
        run_btn = gr.Button(visible=False)
        run_btn.click(run_data, state, run_json, api_name="run_data")
        view_btn = gr.Button(visible=False)
        view_btn.click(attention_views, att_inputs, [heatmap, query_plot, query], api_name="attention")
        # Training: one at a time on this server (it uses every core); generation keeps its own queue.
        train_btn.click(train_model, [train_state, train_preset, corpus_source, corpus_file, corpus_paste,
                                      train_steps, train_lr],
                        [train_state, loss_plot, train_progress, train_msg], api_name="train",
                        concurrency_id="train", concurrency_limit=1)
        train_stop.click(stop_training, train_state, train_msg, api_name="stop_training")
        use_btn.click(use_trained, [state, train_state], [state, train_msg] + model_outputs + [heatmap, chips],
                      api_name="use_trained")
    demo.queue(default_concurrency_limit=2, max_size=64)
    return demo


def launch_kwargs() -> dict:
    from .session import MAX_UPLOAD_BYTES

    # Uploads larger than the checkpoint limit are refused by the server before they are stored.
    return {"i18n": I18N, "css": CSS, "footer_links": ["api", "settings"], "theme": gr.themes.Soft(),
            "max_file_size": MAX_UPLOAD_BYTES}
