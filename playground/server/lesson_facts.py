"""What lesson questions read from the live model: heads' attention, next-token logits, losses, parameter counts.

Every function here reads the model (and the prompt's token ids) and returns plain numbers; the
question types in ``lesson_questions`` turn them into choices, an answer and a view.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from playground.engine.attention import attention_probs
from playground.inside.attention_stats import head_stats
from playground.inside.effects import token_losses
from playground.inside.inspection import parameter_breakdown
from playground.inside.interventions import run_with_hooks


@dataclass
class HeadFacts:
    """What the lessons read from every head's attention over the prompt, each layer's maps reduced
    as soon as they are computed (all of them at once would be L·H·T² numbers)."""

    last_rows: np.ndarray  # [L, H, T]: where the last token looks
    previous: np.ndarray  # [L, H]: mean attention on the previous token
    first: np.ndarray  # [L, H]: mean attention on the first token


def head_maps(model, ids, layers):
    """The attention probabilities [H, T, T] of the given layers over the prompt, one layer at a time
    (one forward keeps every asked layer's queries and keys; the maps are made as they are read)."""
    _, cache = run_with_hooks(model, ids, capture=False, capture_qkv=tuple(layers), last_token_only=True)
    for i in layers:
        q, k, _ = cache.qkv.pop(i)
        yield i, attention_probs(q, k, model.cfg.windowed(i))[0].cpu().numpy()


def head_map(model, ids, layer: int, head: int) -> list:
    return next(head_maps(model, ids, (layer,)))[1][head].tolist()


def head_facts(model, ids) -> HeadFacts:
    rows, previous, first = [], [], []
    for _, A in head_maps(model, ids, range(model.cfg.n_layers)):
        stats = head_stats([A])
        rows.append(A[:, -1])
        previous.append(stats["previous-token"][0])
        first.append(stats["first-token"][0])
    return HeadFacts(np.stack(rows), np.stack(previous), np.stack(first))


def last_logits(model, ids) -> torch.Tensor:
    logits, _ = run_with_hooks(model, ids, capture=False, last_token_only=True)
    return logits[0, -1].float()


def focused_head(facts: HeadFacts) -> tuple[int, int]:
    """The head whose last query puts the most attention on one earlier token other than the first
    (the first token is where many heads park their attention, which says little)."""
    earlier = facts.last_rows[:, :, 1:-1]
    if earlier.shape[-1] == 0:
        return 0, 0
    layer, head = np.unravel_index(int(np.argmax(earlier.max(-1))), earlier.shape[:2])
    return int(layer), int(head)


def previous_token_head(facts: HeadFacts) -> tuple[int, int]:
    layer, head = np.unravel_index(int(np.nanargmax(facts.previous)), facts.previous.shape)
    return int(layer), int(head)


def sink_head(facts: HeadFacts) -> tuple[int, int]:
    """The head that puts the most attention on the first token, on average over the prompt."""
    layer, head = np.unravel_index(int(np.nanargmax(facts.first)), facts.first.shape)
    return int(layer), int(head)


REPEAT_TOKENS = 24  # the induction step says the prompt's first tokens twice: short enough to read as one map


def said_twice(ids, context_length: int) -> tuple[list[int], int]:
    """(the prompt's first ``n`` tokens twice, ``n``): a sentence and its repeat, within the context."""
    n = min(len(ids), REPEAT_TOKENS, context_length // 2)
    return list(ids[:n]) * 2, n


# Where a query of the second copy can look: the token before it, the same token in the first copy,
# the token that followed that one (an induction head's target), and the first token.
PLACES = ("prev", "copy", "after", "first")


def induction_facts(model, twice, n: int) -> tuple[np.ndarray, np.ndarray]:
    """([L, H] induction scores, [L, H, 4] mean attention on each of PLACES) over the second copy's
    queries. The score is TransformerLens's prefix matching: the attention a query of the repeat
    puts on the token after its earlier occurrence, averaged over the repeat."""
    q = np.arange(n + 1, 2 * n)  # queries of the second copy that have a "token after" in the first
    keys = {"prev": q - 1, "copy": q - n, "after": q - n + 1, "first": np.zeros_like(q)}
    places = []
    for _, A in head_maps(model, twice, range(model.cfg.n_layers)):
        places.append(np.stack([A[:, q, keys[name]].mean(-1) for name in PLACES], -1))
    where = np.stack(places)
    return where[..., PLACES.index("after")], where


# Common single tokens; the first not in the sentence stands in for the token the induction pair changes.
STAND_INS = (" and", " the", " of", " to", " a", " in", " that", " is", ",", ".")


@dataclass(frozen=True)
class InductionPair:
    """The sentence said once and again up to token ``x`` (clean): an induction head copies the token
    that followed ``x`` the first time (``answer``). The corrupted prompt changes that first ``x`` to
    ``stand_in``, so no earlier key says "the token before me was ``x``"; the second copy is the same."""

    clean: list[int]
    corrupted: list[int]
    x: int
    stand_in: int
    answer: int


def induction_pair(twice, n: int, tokenizer) -> InductionPair:
    """The pair on the sentence said twice (``said_twice``): ``x`` is the latest token of the sentence
    said only once in it (a token said twice there would have two earlier places to copy from), so
    the copy is the longest the sentence allows. The stand-in keeps both prompts' text reading back
    as the same tokens where it can (the Inside tab's patching view reads them as text)."""
    sentence = list(twice[:n])
    once = [j for j in range(1, n - 1) if sentence.count(sentence[j]) == 1]
    j = once[-1] if once else n - 2
    clean = sentence + sentence[: j + 1]
    free = [t for t in (tokenizer.encode(s)[0] for s in STAND_INS) if t not in sentence] or [
        next(t for t in range(len(sentence) + 1) if t not in sentence)
    ]

    def corrupted(stand_in):
        return clean[:j] + [stand_in] + clean[j + 1 :]

    reads_back = [t for t in free if tokenizer.encode(tokenizer.decode(corrupted(t))) == corrupted(t)]
    stand_in = (reads_back or free)[0]
    return InductionPair(clean, corrupted(stand_in), sentence[j], stand_in, sentence[j + 1])


def prompt_losses(model, ids) -> list[float]:
    logits, _ = run_with_hooks(model, ids, capture=False)
    return token_losses(logits, list(ids))


def block_parts(model) -> dict[str, int]:
    rows = {r.component: r.measured for r in parameter_breakdown(model).rows}
    return {"attention": rows["attention QKV"] + rows["attention output"], "feed-forward": rows["feed-forward"]}


def untied_total(cfg) -> tuple[int, int]:
    """(tied, untied) parameter counts of a config (built on the meta device: no memory)."""
    return (
        parameter_breakdown(replace(cfg, tie_weights=True)).total_measured,
        parameter_breakdown(replace(cfg, tie_weights=False)).total_measured,
    )
