"""The lessons' questions about attention heads, each head found on the model and prompt given.

Where one head looks, the first-token sink, the previous-token head and what removing it costs, the
induction head on the prompt's beginning said twice, and the path between the two (path patching).

Every head a question asks about is found now, on the model and prompt given (the highest score
of all heads), never named in a lesson file: another model, or the bundled one retrained, has its
own. Each question also says where its view lives in the full tab (``target``): the Generate tab's
view, layer and head, or the Inside tab's intervention or path patching, so "Show me" opens that view
drawn.
"""

from __future__ import annotations

import numpy as np

from playground.engine.tokenizer import load_tokenizer
from playground.formats import format_prob
from playground.inside.effects import compare
from playground.inside.interventions import Intervention
from playground.inside.patching import check_pair
from playground.inside.patching_paths import receiver_inputs
from playground.server.lesson_facts import (
    PLACES,
    focused_head,
    head_facts,
    head_map,
    induction_facts,
    induction_pair,
    last_logits,
    previous_token_head,
    said_twice,
)
from playground.server.lesson_facts import (
    sink_head as sink_of,
)
from playground.server.lesson_kit import LessonError, Question, need_tokens, percent, pick

# The Generate tab's map shows the newest 64 positions unless asked for the whole run.
NEWEST = 64


def generate_target(ids, layer: int, head: int, view: str, query: int | None = None, text: str | None = None):
    """Where a head's view lives: the Generate tab on this prompt, that head, that view. A sentence
    said twice is shown whole (the newest positions alone would cut off its first copy)."""
    span = "whole" if text is not None or len(ids) > NEWEST else "newest"
    return {"tab": "generate", "view": view, "layer": layer, "head": head, "query": query, "span": span, "text": text}


def head_choices(scores: np.ndarray, best: tuple[int, int]) -> list[tuple[str, str]]:
    """The best head and the next-best others (ids and labels "layer.head"), in layer-major order."""
    L, H = scores.shape
    flat = [(layer, h) for layer in range(L) for h in range(H)]
    index = flat.index(best)
    shown = pick(list(range(len(flat))), index, lambda i: scores[flat[i]])
    return [(f"{flat[i][0]}.{flat[i][1]}", f"{flat[i][0]}.{flat[i][1]}") for i in shown]


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
    view["head"], view["mark"] = head, answer
    fields = {"head": f"{layer}.{head}", "token": labels[-1], "p": format_prob(row[answer])}
    target = generate_target(ids, layer, head, "one", query=len(ids) - 1)
    return Question(choices, str(answer), view, fields, target=target)


def sink_head(model, ids, labels, params) -> Question:
    """Which head parks the most attention on the first token (the "attention sink")."""
    need_tokens(ids, 3)
    facts = head_facts(model, ids)
    layer, head = sink_of(facts)
    choices = head_choices(facts.first, (layer, head))
    view = {"kind": "overview", "values": facts.first.tolist(), "metric": "first", "mark": [layer, head]}
    fields = {"head": f"{layer}.{head}", "p": format_prob(facts.first[layer, head])}
    target = generate_target(ids, layer, head, "overview-first")
    return Question(choices, f"{layer}.{head}", view, fields, target=target)


def previous_head(model, ids, labels, params) -> Question:
    need_tokens(ids, 3)
    facts = head_facts(model, ids)
    prev = facts.previous
    layer, head = previous_token_head(facts)
    shown = pick(list(range(model.cfg.n_heads)), head, lambda h: prev[layer, h])
    choices = [(str(h), f"{layer}.{h}") for h in shown]
    view = {"kind": "overview", "values": prev.tolist(), "metric": "previous", "mark": [layer, head]}
    target = generate_target(ids, layer, head, "overview-previous")
    return Question(choices, str(head), view, {"layer": layer, "p": format_prob(prev[layer, head])}, target=target)


def head_ablation(model, ids, labels, params) -> Question:
    need_tokens(ids, 3)
    layer, head = previous_token_head(head_facts(model, ids))
    out = compare(model, ids, Intervention(zero_heads=((layer, head),)), len(ids) - 1, lens=False)
    before, after = out["mean_loss_before"], out["mean_loss_after"]
    answer = "rise" if after > before else "fall"
    # Before the guess only the model's own line shows: the removed head's line is the answer.
    view = {"kind": "losses", "labels": labels[1:], "before": out["loss_before"], "after": out["loss_after"]}
    view["context"] = [0]
    fields = {"head": f"{layer}.{head}", "before": f"{before:.3f}", "after": f"{after:.3f}"}
    target = {"tab": "inside", "sub": "inside-intervene", "zero": f"{layer}.{head}", "position": len(ids) - 2}
    return Question([("rise", "rise"), ("fall", "fall")], answer, view, fields, True, target=target)


def induction_looks(model, ids, labels, params) -> Question:
    """The prompt's beginning said twice: where does the head with the highest induction score look
    from the second copy's tokens (the token before, the same token earlier, the token after it
    earlier, or the first token)?"""
    need_tokens(ids, 4)
    twice, n = said_twice(ids, model.cfg.context_length)
    scores, where = induction_facts(model, twice, n)
    layer, head = (int(i) for i in np.unravel_index(int(np.nanargmax(scores)), scores.shape))
    mass = where[layer, head]
    answer = PLACES[int(np.argmax(mass))]
    tok = load_tokenizer()
    shown = [p.display for p in tok.pieces(twice)]
    view: dict = {"kind": "attention_map", "probs": head_map(model, twice, layer, head), "labels": shown}
    view["layer"], view["head"] = layer, head
    fields = {
        "head": f"{layer}.{head}",
        "n": n,
        "p": format_prob(float(mass.max())),
        "score": format_prob(float(scores[layer, head])),
    }
    target = generate_target(twice, layer, head, "one", text=tok.decode(twice))
    return Question([(p, p) for p in PLACES], answer, view, fields, True, target=target)


# The share of the answer a path brings back, in four bins (a value outside 0–1 falls in the nearest).
SHARE_BINS = (("0-25", "≤ 25%"), ("25-50", "25–50%"), ("50-75", "50–75%"), ("75-100", "≥ 75%"))


def share_bin(value: float) -> str:
    return SHARE_BINS[min(len(SHARE_BINS) - 1, max(0, int(value * len(SHARE_BINS))))][0]


def path_heads(model, ids, twice, n) -> tuple[tuple[int, int], tuple[int, int]]:
    """(sender, receiver): the head with the highest induction score after layer 0 (it reads what an
    earlier layer wrote), and the head with the highest previous-token score in the layers before it."""
    if model.cfg.n_layers < 2:
        raise LessonError("lessons.one_layer", "This question needs a model of at least 2 layers.")
    scores, _ = induction_facts(model, twice, n)
    scores[0] = np.nan
    rl, rh = (int(x) for x in np.unravel_index(int(np.nanargmax(scores)), scores.shape))
    earlier = head_facts(model, ids).previous[:rl]
    sl, sh = (int(x) for x in np.unravel_index(int(np.nanargmax(earlier)), earlier.shape))
    return (sl, sh), (rl, rh)


def wrong_token(model, corrupted, answer, tok) -> int:
    """The corrupted prompt's most likely next token other than the answer (one that reads back as
    itself, so the Inside tab's view can be typed it)."""
    top = last_logits(model, corrupted).topk(10).indices.tolist()
    fits = [t for t in top if t != answer and tok.encode(tok.decode([t])) == [t]]
    return (fits or [t for t in top if t != answer])[0]


def path_patching_key(model, ids, labels, params) -> Question:
    """Path patching of the induction circuit: the previous-token head's clean output delivered into
    the induction head's key only, on a sentence said twice whose first copy has the token before
    the one to copy changed. How much of the answer comes back? The view: every head of the
    sender's layer, and all of them at once, through the receiver's q, k and v."""
    need_tokens(ids, 4)
    tok = load_tokenizer()
    twice, n = said_twice(ids, model.cfg.context_length)
    sender, receiver = path_heads(model, ids, twice, n)
    p = induction_pair(twice, n, tok)
    wrong = wrong_token(model, p.corrupted, p.answer, tok)
    pair = check_pair(model, p.clean, p.corrupted, p.answer, wrong)
    layer = sender[0]
    groups = [[(layer, h)] for h in range(model.cfg.n_heads)] + [[(layer, h) for h in range(model.cfg.n_heads)]]
    got = receiver_inputs(model, pair, groups, receiver)
    mine, together = got[sender[1]], got[-1]
    view = {"kind": "path_inputs", "senders": [f"{layer}.{h}" for h in range(model.cfg.n_heads)], "layer": layer}
    view["values"] = {via: [g[via] for g in got] for via in ("q", "k", "v")}
    view["mark"], view["receiver"] = sender[1], f"{receiver[0]}.{receiver[1]}"
    fields: dict = {"sender": f"{layer}.{sender[1]}", "receiver": view["receiver"], "layer": layer}
    shown = {"x": p.x, "stand_in": p.stand_in, "token": p.answer, "wrong": wrong}
    fields |= {name: tok.piece(t).display for name, t in shown.items()}
    fields |= {via: percent(mine[via]) for via in ("q", "k", "v")}
    fields |= {"together": percent(together["k"]), "heads": model.cfg.n_heads}
    patch = {"clean": tok.decode(p.clean), "corrupted": tok.decode(p.corrupted), "via": "k"}
    # typed as the tab's one-line fields read them: a line break as backslash-n
    patch |= {key: tok.decode([t]).replace("\n", "\\n") for key, t in (("answer", p.answer), ("wrong", wrong))}
    patch |= {"sender": fields["sender"], "receiver": fields["receiver"]}
    target = {"tab": "inside", "sub": "inside-patching", "patch": patch}
    return Question(list(SHARE_BINS), share_bin(mine["k"]), view, fields, target=target)
