"""The lessons' question types: each computes its choices, its answer and its view from the live model.

A question type is a function ``(model, ids, labels, params) -> Question``: ``ids`` are the prompt's
token ids and ``labels`` their visible text. Nothing is typed into a lesson: the answer, the
numbers the question and its reveal quote, and the data the step's view draws all come from the
model and prompt given, so another model or prompt gives other answers. ``QUESTIONS`` is the
registry the lesson files name their questions from.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import torch

from playground.engine.presets import PRESETS, get_preset
from playground.engine.sampling import sampling_distribution
from playground.engine.sizes import count_parameters_analytic, kv_bytes_per_token
from playground.engine.tokenizer import load_tokenizer
from playground.formats import format_prob
from playground.inside.inspection import count_parameters, parameter_breakdown
from playground.inside.interventions import run_with_hooks
from playground.inside.lenses import read_out
from playground.server import lesson_heads, lesson_training
from playground.server.lesson_facts import PLACES, block_parts, last_logits, prompt_losses, untied_total
from playground.server.lesson_kit import MAX_CHOICES, Question, millions, need_tokens, numbers, pick
from playground.server.model_facts import tree_items

TOP_SHOWN = 10  # tokens a probability view shows


# ----------------------------------------------------------------------------------------------
# Question types


def token_count(model, ids, labels, params) -> Question:
    n = len(ids)
    choices, answer = numbers(n, [n - 2, n + 1, n + 3, len("".join(labels)), n - 1])
    # Before the guess the view shows the text uncut (the chips would be counted, not guessed).
    view = {"kind": "tokens", "ids": list(ids), "labels": labels, "text": load_tokenizer().decode(list(ids))}
    return Question(choices, answer, view, {"n": n}, target={"tab": "tokenizer", "text": view["text"]})


def word_pieces(model, ids, labels, params) -> Question:
    tok = load_tokenizer()
    word = str(params["word"])
    pieces = tok.encode(word)
    choices, answer = numbers(len(pieces), [1, 2, 3, 4, 5])
    shown = [p.display for p in tok.pieces(pieces)]
    return Question(
        choices,
        answer,
        {"kind": "tokens", "ids": pieces, "labels": shown, "text": word},
        {"word": word.replace(" ", "␣"), "pieces": " | ".join(shown)},
        target={"tab": "tokenizer", "text": word},
    )


def embedding_width(model, ids, labels, params) -> Question:
    d = int(model.tok_emb.weight.shape[1])
    cfg = model.cfg
    choices, answer = numbers(d, [cfg.head_dim, 4 * d, 2 * d, cfg.n_heads])
    # One token on its way in: an id (one number), its rows of the two tables, their sum.
    view = widths_view(["lesson_w_id", "lesson_w_tok", "lesson_w_pos", "lesson_w_sum"], [1, d, d, d], [0])
    view["header"] = ["d"]  # the page's header line says d=…
    return Question(choices, answer, view, {"d": f"{d:,}"}, target={"tab": "model"})


def embedding_params(model, ids, labels, params) -> Question:
    V, d = (int(x) for x in model.tok_emb.weight.shape)
    choices, answer = numbers(V * d, [V, model.cfg.context_length * d, 2 * V * d])
    view = treemap_view(model)
    view["header"] = ["n"]
    return Question(choices, answer, view, {"V": f"{V:,}", "d": f"{d:,}"}, target={"tab": "model"})


def ffn_vs_attention(model, ids, labels, params) -> Question:
    parts = block_parts(model)
    answer = max(parts, key=lambda k: parts[k])
    L = model.cfg.n_layers
    fields = {name.replace("-", "_"): f"{n // L:,}" for name, n in parts.items()}
    choices = [("attention", "attention"), ("feed-forward", "feed-forward")]
    return Question(choices, answer, components_view(model), fields, True, target={"tab": "model"})


def ffn_width(model, ids, labels, params) -> Question:
    d, L = model.cfg.emb_dim, model.cfg.n_layers
    # One feed-forward: d·h + h + h·d + d parameters, so its hidden width h follows from its count.
    hidden = (block_parts(model)["feed-forward"] // L - d) // (2 * d + 1)
    choices, answer = numbers(hidden, [d, 2 * d, 3 * d, 8 * d])
    # A token's vector through one block: every width but the hidden layer's shows before the guess.
    names = ["lesson_w_in", "lesson_w_attn", "lesson_w_hidden", "lesson_w_out"]
    view = widths_view(names, [d, d, hidden, d], [0, 1, 3])
    return Question(choices, answer, view, {"d": f"{d:,}", "h": f"{hidden:,}"}, target={"tab": "model"})


def param_count(model, ids, labels, params) -> Question:
    n = count_parameters(model)
    V, d = model.cfg.vocab_size, model.cfg.emb_dim
    choices, answer = numbers(n, [n - V * d, n + V * d, 2 * n], fmt="{:,}")
    view = treemap_view(model)
    view["header"] = ["n"]
    return Question(choices, answer, view, {"n": f"{n:,}"}, target={"tab": "model"})


def untied_count(model, ids, labels, params) -> Question:
    name = params.get("preset")
    cfg = PRESETS[name] if name else model.cfg
    tied, untied = untied_total(cfg)
    V, d = cfg.vocab_size, cfg.emb_dim
    choices, answer = numbers(untied, [tied, untied + V * d, tied - V * d], fmt="{:,}")
    choices = [(i, millions(int(i.replace(",", "")))) for i, _ in choices]
    fields = {"tied": millions(tied), "untied": millions(untied), "extra": f"{V:,} × {d:,}", "preset": name or ""}
    view = components_view(model) if not name else {**components_view(replace(cfg, tie_weights=False)), "untied": True}
    return Question(choices, answer, view, fields, target={"tab": "model"})


def gqa_saving(model, ids, labels, params) -> Question:
    """How many parameters grouped-query attention saves in a named preset (a real size, counted on the meta
    device): W_key and W_value have n_kv_heads heads instead of n_heads."""
    cfg = get_preset(str(params["preset"]))
    mha = cfg.replace(n_kv_heads=0)
    saving = count_parameters_analytic(mha) - count_parameters_analytic(cfg)
    L, d, H, K, hd = cfg.n_layers, cfg.emb_dim, cfg.n_heads, cfg.kv_heads, cfg.head_dim
    choices, answer = numbers(saving, [saving // 2, 2 * saving, L * d * (H - K) * hd, saving * 4], fmt="{:,}")
    fields = {
        "preset": str(params["preset"]),
        "heads": H,
        "kv_heads": K,
        "saving": f"{saving:,}",
        "formula": f"{L}·2·{d}·({H} − {K})·{hd}",
        "share": f"{saving / count_parameters_analytic(mha):.1%}",
    }
    return Question(choices, answer, components_view(cfg), fields, target={"tab": "model"})


def kv_cache_saving(model, ids, labels, params) -> Question:
    """The KV cache a token keeps in bfloat16 (2 · L · n_kv_heads · head_dim · 2 bytes), GQA's real saving."""
    cfg = get_preset(str(params["preset"]))
    kept, mha = int(kv_bytes_per_token(cfg, "bfloat16")), int(kv_bytes_per_token(cfg.replace(n_kv_heads=0), "bfloat16"))
    choices, answer = numbers(kept, [mha, kept // 2, 2 * kept, mha * 2], fmt="{:,}")
    tokens = cfg.context_length
    fields = {
        "preset": str(params["preset"]),
        "kept": f"{kept:,}",
        "mha": f"{mha:,}",
        "context": f"{tokens:,}",
        "gb": f"{kept * tokens / 1e9:.1f}",
        "gb_mha": f"{mha * tokens / 1e9:.1f}",
    }
    return Question(choices, answer, components_view(cfg), fields, target={"tab": "model"})


def lens_first_top(model, ids, labels, params) -> Question:
    """From which read of the logit lens is the model's final top token already on top, at a
    position where that token is not the input token? (With tied embeddings the read right after
    the embeddings returns the input token itself: asked there, the answer would be that artifact.)"""
    need_tokens(ids, 2)
    _, cache = run_with_hooks(model, ids)
    tops = [read_out(model, r[0]).argmax(-1).tolist() for r in cache.resid]  # [reads][T]
    final = tops[-1]
    t = next((i for i in range(len(ids) - 1, -1, -1) if final[i] != ids[i]), len(ids) - 1)
    target = final[t]
    answer = next(i for i, top in enumerate(tops) if top[t] == target)
    probs = [torch.softmax(read_out(model, r[0, t]).double(), -1) for r in cache.resid]
    reads = list(range(len(tops)))
    shown = pick(reads, answer, lambda i: -abs(i - answer))
    said = {str(i): ("in_embeddings", {}) if i == 0 else ("in_after_block", {"i": i - 1}) for i in reads}
    english = {str(i): "embeddings" if i == 0 else f"after block {i - 1}" for i in reads}
    tok = load_tokenizer()
    view: dict = {
        "kind": "lens_column",
        "tops": [tok.piece(top[t]).display for top in tops],
        "target_probs": [float(p[target]) for p in probs],
        "target_label": tok.piece(target).display,
        "reads": [said[str(i)] for i in reads],
        "mark": answer,
    }
    fields = {"token": labels[t], "pos": t, "target": view["target_label"], "p": format_prob(view["target_probs"][-1])}
    question = Question([(str(i), english[str(i)]) for i in shown], str(answer), view, fields, said=said)
    question.target = {"tab": "inside", "sub": "inside-lens", "position": t, "layer": len(tops) - 1}
    return question


def next_token(model, ids, labels, params) -> Question:
    temperature = float(params.get("temperature", 0.3))
    probs = sampling_distribution(last_logits(model, ids), temperature)["temperature"]
    p, top = probs.topk(TOP_SHOWN)
    tok = load_tokenizer()
    shown = [tok.piece(t).display for t in top.tolist()]
    order = sorted(range(MAX_CHOICES), key=lambda i: shown[i].lower())  # the top 4, alphabetically
    choices = [(str(top[i].item()), shown[i]) for i in order]
    view = {"kind": "next_tokens", "labels": shown, "probs": p.tolist(), "temperature": temperature}
    fields = {"temperature": temperature, "token": shown[0], "p": format_prob(float(p[0]))}
    target = {"tab": "generate", "temperature": temperature, "step": 0}
    return Question(choices, str(top[0].item()), view, fields, target=target)


def top_prob_temperature(model, ids, labels, params) -> Question:
    temperature = float(params.get("temperature", 0.3))
    logits = last_logits(model, ids)
    plain = sampling_distribution(logits, 1.0)["temperature"]
    cooled = sampling_distribution(logits, temperature)["temperature"]
    p1, pt = float(plain.max()), float(cooled.max())
    answer = "same" if math.isclose(p1, pt, abs_tol=5e-4) else ("up" if pt > p1 else "down")
    top = plain.topk(TOP_SHOWN).indices
    tok = load_tokenizer()
    view: dict = {
        "kind": "stages",
        "labels": [tok.piece(t).display for t in top.tolist()],
        "stages": {"T = 1": plain[top].tolist(), f"T = {temperature:g}": cooled[top].tolist()},
        "context": [0],  # temperature 1 shows before the guess; the cooled one is the answer
    }
    fields = {"temperature": temperature, "p1": format_prob(p1), "pt": format_prob(pt)}
    target = {"tab": "generate", "temperature": temperature, "step": 0}
    return Question([("up", "up"), ("down", "down"), ("same", "same")], answer, view, fields, True, target=target)


def loss_vs_uniform(model, ids, labels, params) -> Question:
    need_tokens(ids, 2)
    losses = prompt_losses(model, ids)
    mean, uniform = sum(losses) / len(losses), math.log(model.cfg.vocab_size)
    answer = "below" if mean < uniform else "above"
    view = {"kind": "losses", "labels": labels[1:], "before": losses, "after": [uniform] * len(losses)}
    fields = {"loss": f"{mean:.2f}", "uniform": f"{uniform:.2f}", "V": f"{model.cfg.vocab_size:,}"}
    target = {"tab": "compare", "text": load_tokenizer().decode(list(ids))}
    return Question([("below", "below"), ("above", "above")], answer, view, fields, True, target=target)


def prompt_loss(model, ids, labels, params) -> Question:
    need_tokens(ids, 2)
    losses = prompt_losses(model, ids)
    mean = sum(losses) / len(losses)
    choices, answer = numbers(mean, [mean / 2, mean * 1.6, mean + 4, mean * 2.4], fmt="{:.1f}")
    view = {"kind": "losses", "labels": labels[1:], "before": losses, "after": None}
    target = {"tab": "compare", "text": load_tokenizer().decode(list(ids))}
    return Question(choices, answer, view, {"loss": answer, "ppl": f"{math.exp(mean):,.1f}"}, target=target)


# ----------------------------------------------------------------------------------------------
# Views shared by several questions


def components_view(model_or_cfg) -> dict:
    rows = parameter_breakdown(model_or_cfg).rows
    return {
        "kind": "components",
        "components": [r.component for r in rows],
        "formula": [r.formula_value for r in rows],
        "measured": [r.measured for r in rows],
    }


def treemap_view(model) -> dict:
    return {"kind": "treemap", "items": tree_items(model)}


def widths_view(parts: list[str], widths: list[int], context: list[int]) -> dict:
    """A vector's width at each stage (``parts``: i18n keys); ``context``: the stages shown before the guess."""
    return {"kind": "widths", "parts": parts, "widths": widths, "context": context}


QUESTIONS: dict[str, Callable[..., Question]] = {
    fn.__name__: fn
    for fn in (
        token_count,
        word_pieces,
        embedding_width,
        embedding_params,
        lesson_heads.attends_most,
        lesson_heads.sink_head,
        lesson_heads.previous_head,
        lesson_heads.head_ablation,
        lesson_heads.induction_looks,
        lesson_heads.path_patching_key,
        ffn_vs_attention,
        ffn_width,
        param_count,
        untied_count,
        gqa_saving,
        kv_cache_saving,
        lens_first_top,
        next_token,
        top_prob_temperature,
        loss_vs_uniform,
        prompt_loss,
        lesson_training.induction_layer,
        lesson_training.phase_step,
        lesson_training.repeat_loss,
    )
}
# The views the lesson files may name, and the tab of the app that owns each.
VIEW_TABS = {
    "tokens": "tokenizer",
    "components": "model",
    "treemap": "model",
    "attention_row": "generate",
    "attention_map": "generate",
    "overview": "generate",
    "losses": "inside",
    "path_inputs": "inside",
    "lens_column": "inside",
    "next_tokens": "generate",
    "stages": "generate",
    "widths": "model",
    "head_curves": "train",
}
WORD_CHOICES = (
    "yes",
    "no",
    "rise",
    "fall",
    "attention",
    "feed-forward",
    "up",
    "down",
    "same",
    "below",
    "above",
    *PLACES,
)
