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
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from playground.engine.config import PRESETS
from playground.engine.sampling import sampling_distribution
from playground.engine.tokenizer import load_tokenizer
from playground.errors import UserError
from playground.formats import format_prob
from playground.inside.effects import compare
from playground.inside.inspection import count_parameters, parameter_breakdown
from playground.inside.interventions import Intervention, run_with_hooks
from playground.inside.lenses import read_out
from playground.server.lesson_facts import (
    block_parts,
    focused_head,
    head_facts,
    head_map,
    last_logits,
    previous_token_head,
    prompt_losses,
    untied_total,
)
from playground.server.model_views import tree_items

MAX_CHOICES = 4
TOP_SHOWN = 10  # tokens a probability view shows


@dataclass
class Question:
    """``choices``: (id, label) pairs; ``words``: the labels are interface words (the UI says them
    through i18n key ``lesson_choice_<id>``); ``fields`` fill the question's text and its reveal."""

    choices: list[tuple[str, str]]
    answer: str
    view: dict[str, Any]
    fields: dict[str, Any] = field(default_factory=dict)
    words: bool = False

    @property
    def answer_label(self) -> str:
        return dict(self.choices)[self.answer]


class LessonError(UserError):
    """A lesson's question cannot be asked of this model and prompt."""


def need_tokens(ids, n: int) -> None:
    if len(ids) < n:
        raise LessonError(
            "lessons.short_prompt",
            "This question needs a prompt of at least {n} tokens (it has {got}); type a longer one in the Generate tab.",
            n=n,
            got=len(ids),
        )


def numbers(answer: int | float, others, fmt: str = "{:,}") -> tuple[list[tuple[str, str]], str]:
    """Number choices, smallest first (the order says nothing about the answer), at most MAX_CHOICES."""
    labels = {fmt.format(answer): answer}
    for value in others:
        if len(labels) >= MAX_CHOICES:
            break
        if value > 0:
            labels.setdefault(fmt.format(value), value)
    ordered = sorted(labels.items(), key=lambda kv: kv[1])
    return [(label, label) for label, _ in ordered], fmt.format(answer)


def millions(n: int) -> str:
    return f"{n / 1e6:.1f}M"


def pick(ids_in_order: list[int], answer: int, score) -> list[int]:
    """The answer and the highest-scoring others, up to MAX_CHOICES, in their natural order."""
    others = sorted((i for i in ids_in_order if i != answer), key=lambda i: -score(i))
    chosen = {answer, *others[: MAX_CHOICES - 1]}
    return [i for i in ids_in_order if i in chosen]


# ----------------------------------------------------------------------------------------------
# Question types


def token_count(model, ids, labels, params) -> Question:
    n = len(ids)
    choices, answer = numbers(n, [n - 2, n + 1, n + 3, len("".join(labels)), n - 1])
    return Question(choices, answer, {"kind": "tokens", "ids": list(ids), "labels": labels}, {"n": n})


def word_pieces(model, ids, labels, params) -> Question:
    tok = load_tokenizer()
    word = str(params["word"])
    pieces = tok.encode(word)
    choices, answer = numbers(len(pieces), [1, 2, 3, 4, 5])
    shown = [p.display for p in tok.pieces(pieces)]
    return Question(
        choices,
        answer,
        {"kind": "tokens", "ids": pieces, "labels": shown},
        {"word": word.replace(" ", "␣"), "pieces": " | ".join(shown)},
    )


def embedding_width(model, ids, labels, params) -> Question:
    d = int(model.tok_emb.weight.shape[1])
    cfg = model.cfg
    choices, answer = numbers(d, [cfg.head_dim, 4 * d, 2 * d, cfg.n_heads])
    return Question(choices, answer, components_view(model), {"d": f"{d:,}"})


def embedding_params(model, ids, labels, params) -> Question:
    V, d = (int(x) for x in model.tok_emb.weight.shape)
    choices, answer = numbers(V * d, [V, model.cfg.context_length * d, 2 * V * d])
    return Question(choices, answer, treemap_view(model), {"V": f"{V:,}", "d": f"{d:,}"})


def attends_most(model, ids, labels, params) -> Question:
    need_tokens(ids, 3)
    facts = head_facts(model, ids)
    layer, head = focused_head(facts)
    row = facts.last_rows[layer, head]
    earlier = list(range(len(ids) - 1))
    answer = int(np.argmax(row[:-1]))
    shown = pick(earlier, answer, lambda i: row[i])
    choices = [(str(i), f"{i}·{labels[i]}") for i in shown]
    view = {"kind": "attention_row", "row": row.tolist(), "labels": labels, "query": labels[-1], "layer": layer}
    view["head"] = head
    fields = {"head": f"{layer}.{head}", "token": labels[-1], "p": format_prob(row[answer])}
    return Question(choices, str(answer), view, fields)


def first_token_mass(model, ids, labels, params) -> Question:
    need_tokens(ids, 3)
    facts = head_facts(model, ids)
    layer, head = focused_head(facts)
    mass = float(facts.first[layer, head])
    answer = "yes" if mass > 0.5 else "no"
    view = {
        "kind": "attention_map",
        "probs": head_map(model, ids, layer, head),
        "labels": labels,
        "layer": layer,
    }
    view["head"] = head
    return Question(
        [("yes", "yes"), ("no", "no")], answer, view, {"head": f"{layer}.{head}", "p": format_prob(mass)}, True
    )


def previous_head(model, ids, labels, params) -> Question:
    need_tokens(ids, 3)
    facts = head_facts(model, ids)
    prev = facts.previous
    layer, head = previous_token_head(facts)
    shown = pick(list(range(model.cfg.n_heads)), head, lambda h: prev[layer, h])
    choices = [(str(h), f"{layer}.{h}") for h in shown]
    view = {"kind": "overview", "values": prev.tolist()}
    return Question(choices, str(head), view, {"layer": layer, "p": format_prob(prev[layer, head])})


def head_ablation(model, ids, labels, params) -> Question:
    need_tokens(ids, 3)
    layer, head = previous_token_head(head_facts(model, ids))
    out = compare(model, ids, Intervention(zero_heads=((layer, head),)), len(ids) - 1, lens=False)
    before, after = out["mean_loss_before"], out["mean_loss_after"]
    answer = "rise" if after > before else "fall"
    view = {"kind": "losses", "labels": labels[1:], "before": out["loss_before"], "after": out["loss_after"]}
    fields = {"head": f"{layer}.{head}", "before": f"{before:.3f}", "after": f"{after:.3f}"}
    return Question([("rise", "rise"), ("fall", "fall")], answer, view, fields, True)


def ffn_vs_attention(model, ids, labels, params) -> Question:
    parts = block_parts(model)
    answer = max(parts, key=lambda k: parts[k])
    L = model.cfg.n_layers
    fields = {name.replace("-", "_"): f"{n // L:,}" for name, n in parts.items()}
    choices = [("attention", "attention"), ("feed-forward", "feed-forward")]
    return Question(choices, answer, components_view(model), fields, True)


def ffn_width(model, ids, labels, params) -> Question:
    d, L = model.cfg.emb_dim, model.cfg.n_layers
    # One feed-forward: d·h + h + h·d + d parameters, so its hidden width h follows from its count.
    hidden = (block_parts(model)["feed-forward"] // L - d) // (2 * d + 1)
    choices, answer = numbers(hidden, [d, 2 * d, 3 * d, 8 * d])
    return Question(choices, answer, components_view(model), {"d": f"{d:,}", "h": f"{hidden:,}"})


def param_count(model, ids, labels, params) -> Question:
    n = count_parameters(model)
    V, d = model.cfg.vocab_size, model.cfg.emb_dim
    choices, answer = numbers(n, [n - V * d, n + V * d, 2 * n], fmt="{:,}")
    return Question(choices, answer, treemap_view(model), {"n": f"{n:,}"})


def untied_count(model, ids, labels, params) -> Question:
    name = params.get("preset")
    cfg = PRESETS[name] if name else model.cfg
    tied, untied = untied_total(cfg)
    V, d = cfg.vocab_size, cfg.emb_dim
    choices, answer = numbers(untied, [tied, untied + V * d, tied - V * d], fmt="{:,}")
    choices = [(i, millions(int(i.replace(",", "")))) for i, _ in choices]
    fields = {"tied": millions(tied), "untied": millions(untied), "extra": f"{V:,} × {d:,}", "preset": name or ""}
    view = components_view(model) if not name else components_view(replace(cfg, tie_weights=False))
    return Question(choices, answer, view, fields)


def lens_first_layer(model, ids, labels, params) -> Question:
    k = int(params.get("k", 3))
    _, cache = run_with_hooks(model, ids, last_token_only=True)
    probs = [torch.softmax(read_out(model, r[0, -1]).double(), -1) for r in cache.resid]
    tops = [p.topk(k).indices.tolist() for p in probs]
    target = tops[-1][0]  # the model's own next-token prediction
    answer = next(i for i, top in enumerate(tops) if target in top)
    layers = list(range(len(tops)))
    shown = pick(layers, answer, lambda i: -abs(i - answer))
    choices = [(str(i), str(i)) for i in shown]
    tok = load_tokenizer()
    view = {"kind": "lens_column", "tops": [[tok.piece(t).display for t in top] for top in tops], "target": target}
    view["target_probs"] = [float(p[target]) for p in probs]
    view["target_label"] = tok.piece(target).display
    return Question(choices, str(answer), view, {"token": view["target_label"], "k": k, "L": len(tops) - 1})


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
    return Question(choices, str(top[0].item()), view, fields)


def top_prob_temperature(model, ids, labels, params) -> Question:
    temperature = float(params.get("temperature", 0.3))
    logits = last_logits(model, ids)
    plain = sampling_distribution(logits, 1.0)["temperature"]
    cooled = sampling_distribution(logits, temperature)["temperature"]
    p1, pt = float(plain.max()), float(cooled.max())
    answer = "same" if math.isclose(p1, pt, abs_tol=5e-4) else ("up" if pt > p1 else "down")
    top = plain.topk(TOP_SHOWN).indices
    tok = load_tokenizer()
    view = {
        "kind": "stages",
        "labels": [tok.piece(t).display for t in top.tolist()],
        "stages": {"T = 1": plain[top].tolist(), f"T = {temperature:g}": cooled[top].tolist()},
    }
    fields = {"temperature": temperature, "p1": format_prob(p1), "pt": format_prob(pt)}
    return Question([("up", "up"), ("down", "down"), ("same", "same")], answer, view, fields, True)


def loss_vs_uniform(model, ids, labels, params) -> Question:
    need_tokens(ids, 2)
    losses = prompt_losses(model, ids)
    mean, uniform = sum(losses) / len(losses), math.log(model.cfg.vocab_size)
    answer = "below" if mean < uniform else "above"
    view = {"kind": "losses", "labels": labels[1:], "before": losses, "after": [uniform] * len(losses)}
    fields = {"loss": f"{mean:.2f}", "uniform": f"{uniform:.2f}", "V": f"{model.cfg.vocab_size:,}"}
    return Question([("below", "below"), ("above", "above")], answer, view, fields, True)


def prompt_loss(model, ids, labels, params) -> Question:
    need_tokens(ids, 2)
    losses = prompt_losses(model, ids)
    mean = sum(losses) / len(losses)
    choices, answer = numbers(mean, [mean / 2, mean * 1.6, mean + 4, mean * 2.4], fmt="{:.1f}")
    view = {"kind": "losses", "labels": labels[1:], "before": losses, "after": None}
    return Question(choices, answer, view, {"loss": answer, "ppl": f"{math.exp(mean):,.1f}"})


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


QUESTIONS: dict[str, Callable[..., Question]] = {
    fn.__name__: fn
    for fn in (
        token_count,
        word_pieces,
        embedding_width,
        embedding_params,
        attends_most,
        first_token_mass,
        previous_head,
        head_ablation,
        ffn_vs_attention,
        ffn_width,
        param_count,
        untied_count,
        lens_first_layer,
        next_token,
        top_prob_temperature,
        loss_vs_uniform,
        prompt_loss,
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
    "lens_column": "inside",
    "next_tokens": "generate",
    "stages": "generate",
}
WORD_CHOICES = ("yes", "no", "rise", "fall", "attention", "feed-forward", "up", "down", "same", "below", "above")
